"""``gaigel arena test``: a sequential A/B test (or gauntlet) of one candidate on duplicate sets.

The arena config gets a ``[test]`` table (docs/testing-bots.md)::

    [test]
    candidate = "mybot-v2"
    baseline = "mybot-v1"     # an A/B test; leave it out and list opponents in field for a gauntlet
    field = ["heuristic"]     # A/B: the bot(s) of the other sides at 3 sides; gauntlet: the opponents
    elo0 = 0.0                # bounds in normalized Elo (per game)
    elo1 = 10.0
    alpha = 0.05
    beta = 0.05
    max_sets = 2000           # the cap: inconclusive there
    score = "match"           # match, hands or points
    control = "heuristic"     # house bot in the candidate's seats of the control games; "none": off
    control_against = "random"  # house bot in the other seats (default: control itself, self-play)
    control_playouts = 1

Set *s* is one deal seed (the arena's :func:`~gaigel_arena.schedule.set_seed`) played by
every group (the candidate, its opponent and at 3 sides a field bot) under every rotation
of the sides. Its score ``X_s`` is the candidate's mean pairwise score over the set's
games. The journal is the arena's (same resume and kill -9 guarantees); the test's
statistics are always recomputed from it: the LLR runs over the longest prefix of complete
sets in set order, so sets finished out of order, replayed or played after the verdict
never change it, and a resumed test ends where an uninterrupted one does.

The control variate's baseline values are computed from house-bot self-play on every
deal of the run before the first game, stored in the journal with their hash, and read
back (never recomputed or refit) on a resume.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import itertools
import json
import math
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from gaigel.ruleset import Ruleset
from gaigel_arena.config import ArenaConfig, ConfigError, parse_config
from gaigel_arena.executors import Executor
from gaigel_arena.journal import DbTarget, Journal, JournalError, JournalRow, resolve_db
from gaigel_arena.metrics import ArenaMetrics
from gaigel_arena.schedule import ScheduledMatch, set_seed
from gaigel_arena.sprt import MIN_SETS, Estimate, Sprt, Verdict, controlled_scores, estimate, first_crossing, llr_path

__all__ = [
    "ABConfig",
    "ABKind",
    "ABPlan",
    "ABRun",
    "ABState",
    "ScoreKind",
    "control_values",
    "evaluate",
    "load_ab_config",
    "open_ab",
    "pair_score",
    "parse_ab_table",
    "plan_ab",
    "run_ab",
    "set_game_scores",
]

CONTROL_META_KEY = "control_variate"
"""Journal meta key of the control variate's baseline values (JSON with their hash)."""


class ABKind(enum.Enum):
    """An A/B test against one baseline, or a gauntlet against a field."""

    AB = "ab"
    GAUNTLET = "gauntlet"


class ScoreKind(enum.Enum):
    """What one pairwise game scores (1 for the candidate's side, 0 for the other, between for shares)."""

    MATCH = "match"
    """The match result by dashes: 1 fewer dashes, 1/2 equal, 0 more (the arena's ratings)."""
    HANDS = "hands"
    """The candidate's share of the hands the two sides won (1/2 when neither won one)."""
    POINTS = "points"
    """The opponent's share of the two sides' dashes (a Gigackel counts twice; 1/2 at 0:0)."""


@dataclasses.dataclass(frozen=True)
class ABConfig:
    """The ``[test]`` table, validated."""

    kind: ABKind
    candidate: str
    baseline: str | None
    field: tuple[str, ...]
    elo0: float = 0.0
    elo1: float = 10.0
    alpha: float = 0.05
    beta: float = 0.05
    max_sets: int = 2000
    score: ScoreKind = ScoreKind.MATCH
    control: str = "heuristic"
    """House bot of the control variate's self-play, or ``none``."""
    control_playouts: int = 1
    control_against: str = ""
    """House bot of the other seats in the control games; empty: *control* itself (self-play)."""

    @property
    def control_opponent(self) -> str:
        """The bot of the seats other than the candidate's in the control games."""
        return self.control_against or self.control

    def canonical(self) -> dict[str, Any]:
        """JSON-ready; part of the journal's config hash, so a changed test is refused on resume."""
        return {
            "kind": self.kind.value,
            "candidate": self.candidate,
            "baseline": self.baseline,
            "field": list(self.field),
            "elo0": self.elo0,
            "elo1": self.elo1,
            "alpha": self.alpha,
            "beta": self.beta,
            "max_sets": self.max_sets,
            "score": self.score.value,
            "control": self.control,
            "control_playouts": self.control_playouts,
            "control_against": self.control_against,
        }


_TEST_KEYS = {
    "candidate",
    "baseline",
    "field",
    "elo0",
    "elo1",
    "alpha",
    "beta",
    "max_sets",
    "score",
    "control",
    "control_playouts",
    "control_against",
}


def _number(table: Mapping[str, Any], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"test.{key} must be a number, got {value!r}")
    return float(value)


def parse_ab_table(table: Any, arena: ArenaConfig) -> ABConfig:
    """Validates the ``[test]`` table against the arena's bots and game.

    :raises ConfigError: naming the first invalid key.
    """
    from gaigel.bots import HOUSE_BOTS

    if not isinstance(table, Mapping):
        raise ConfigError("[test] must be a table")
    unknown = sorted(set(table) - _TEST_KEYS)
    if unknown:
        raise ConfigError(f"unknown key(s) in [test]: {', '.join(unknown)} (allowed: {', '.join(sorted(_TEST_KEYS))})")
    names = set(arena.bot_names)

    def bot(key: str, value: Any) -> str:
        if not isinstance(value, str) or value not in names:
            raise ConfigError(f"test.{key} must name a bot of [[bots]] ({', '.join(arena.bot_names)}), got {value!r}")
        return value

    if "candidate" not in table:
        raise ConfigError('[test] needs candidate = "BOT"')
    candidate = bot("candidate", table["candidate"])
    baseline = bot("baseline", table["baseline"]) if "baseline" in table else None
    raw_field = table.get("field", [])
    if not isinstance(raw_field, list):
        raise ConfigError(f"test.field must be a list of bot names, got {raw_field!r}")
    field = tuple(bot("field", f) for f in raw_field)
    if len(set(field)) != len(field) or candidate in field or (baseline is not None and baseline in field):
        raise ConfigError("test.field must list distinct bots other than the candidate and the baseline")
    if baseline == candidate:
        raise ConfigError("test.baseline must be another bot than test.candidate")
    sides = arena.ruleset.num_sides
    kind = ABKind.AB if baseline is not None else ABKind.GAUNTLET
    if kind is ABKind.AB and sides == 3 and not field:
        raise ConfigError('an A/B test at 3 sides needs test.field = ["BOT", ...] for the third side')
    if kind is ABKind.AB and sides == 2 and field:
        raise ConfigError("an A/B test at 2 sides has no other side: leave test.field out")
    if kind is ABKind.GAUNTLET and len(field) < sides - 1:
        raise ConfigError(f"a gauntlet (no test.baseline) needs at least {sides - 1} opponent(s) in test.field")
    score = table.get("score", "match")
    if score not in {s.value for s in ScoreKind}:
        raise ConfigError(f"test.score must be one of {', '.join(s.value for s in ScoreKind)}, got {score!r}")
    control = table.get("control", "heuristic")
    if control != "none" and control not in HOUSE_BOTS:
        raise ConfigError(
            f'test.control must be a house bot ({", ".join(sorted(HOUSE_BOTS))}) or "none", got {control!r}'
        )
    against = table.get("control_against", "")
    if against and (control == "none" or against not in HOUSE_BOTS):
        raise ConfigError(f"test.control_against must be a house bot beside a test.control house bot, got {against!r}")
    playouts = table.get("control_playouts", 1)
    if isinstance(playouts, bool) or not isinstance(playouts, int) or not 1 <= playouts <= 1000:
        raise ConfigError(f"test.control_playouts must be an integer 1..1000, got {playouts!r}")
    max_sets = table.get("max_sets", 2000)
    if isinstance(max_sets, bool) or not isinstance(max_sets, int) or not MIN_SETS <= max_sets <= 1_000_000:
        raise ConfigError(f"test.max_sets must be an integer {MIN_SETS}..1000000, got {max_sets!r}")
    config = ABConfig(
        kind=kind,
        candidate=candidate,
        baseline=baseline,
        field=field,
        elo0=_number(table, "elo0", 0.0),
        elo1=_number(table, "elo1", 10.0),
        alpha=_number(table, "alpha", 0.05),
        beta=_number(table, "beta", 0.05),
        max_sets=max_sets,
        score=ScoreKind(score),
        control=control,
        control_playouts=playouts,
        control_against=against,
    )
    try:
        Sprt(config.elo0, config.elo1, config.alpha, config.beta)
    except ValueError as e:
        raise ConfigError(f"[test]: {e}") from None
    return config


def load_ab_config(path: str | Path) -> tuple[ArenaConfig, ABConfig]:
    """Reads an arena TOML file with a ``[test]`` table.

    :raises ConfigError: for an unreadable file, bad TOML, no ``[test]`` or an invalid setting.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read arena config {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from None
    if "test" not in data:
        raise ConfigError(f"{path}: no [test] table (see docs/testing-bots.md); `gaigel arena run` plays round-robins")
    table = data.pop("test")
    try:
        arena = parse_config(data, base_dir=path.parent)
        return arena, parse_ab_table(table, arena)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


# --- the plan: schedule and scored pairs -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ABPlan:
    """The test's schedule and, per match, which pairs of sides count for the candidate."""

    arena: ArenaConfig
    test: ABConfig
    schedule: tuple[ScheduledMatch, ...]
    pairs: Mapping[str, tuple[tuple[int, int], ...]]
    """Per match id: (candidate's side, opponent's side) for each scored pairwise game."""
    games_per_set: int
    matches_per_set: int

    def sprt(self) -> Sprt:
        """The sequential test of this plan."""
        t = self.test
        return Sprt(t.elo0, t.elo1, t.alpha, t.beta, games_per_set=self.games_per_set)

    def canonical(self) -> dict[str, Any]:
        """The arena's canonical config with the test added (what the journal's hash covers)."""
        return {**self.arena.canonical(), "test": self.test.canonical()}

    def canonical_json(self) -> str:
        """:meth:`canonical` as compact JSON with sorted keys."""
        return json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))


def _groups(test: ABConfig, sides: int) -> list[tuple[str, ...]]:
    if test.kind is ABKind.AB:
        assert test.baseline is not None
        if sides == 2:
            return [(test.candidate, test.baseline)]
        return [(test.candidate, test.baseline, f) for f in test.field]
    return [(test.candidate, *others) for others in itertools.combinations(test.field, sides - 1)]


def plan_ab(arena: ArenaConfig, test: ABConfig) -> ABPlan:
    """Every set up to the cap, set by set, group by group, rotation by rotation.

    :raises ConfigError: if two matches would get the same id (bot names with ``-``).
    """
    ruleset: Ruleset = arena.ruleset
    sides = ruleset.num_sides
    groups = _groups(test, sides)
    opponents = {test.baseline} if test.kind is ABKind.AB else set(test.field)
    schedule: list[ScheduledMatch] = []
    pairs: dict[str, tuple[tuple[int, int], ...]] = {}
    for s in range(test.max_sets):
        seed = set_seed(arena.seed, s)
        for group in groups:
            for r in range(sides):
                by_side = tuple(group[(x + r) % sides] for x in range(sides))
                seats = tuple(by_side[ruleset.side_of(seat)] for seat in range(ruleset.players))
                match = ScheduledMatch(len(schedule), s, r, seed, group, by_side, seats)
                if match.match_id in pairs:
                    raise ConfigError(f"bot names give the same match id twice ({match.match_id}): rename one")
                me = by_side.index(test.candidate)
                pairs[match.match_id] = tuple((me, x) for x, name in enumerate(by_side) if name in opponents)
                schedule.append(match)
    per_set = len(groups) * sides
    games = sum(len(pairs[m.match_id]) for m in schedule[:per_set])
    return ABPlan(arena, test, tuple(schedule), pairs, games, per_set)


# --- scores --------------------------------------------------------------------------------------


def pair_score(result: Mapping[str, Any], me: int, other: int, kind: ScoreKind) -> float:
    """Side *me*'s score against side *other* in a match result (as the journal stores it).

    A side that forfeited loses (0) against one that did not, whatever the score kind.
    """
    forfeits = set(result.get("forfeit_sides") or ())
    if (me in forfeits) != (other in forfeits):
        return 0.0 if me in forfeits else 1.0
    sides = result["sides"]
    if kind is ScoreKind.HANDS:
        mine, theirs = int(sides[me]["hands_won"]), int(sides[other]["hands_won"])
        return 0.5 if mine + theirs == 0 else mine / (mine + theirs)
    mine, theirs = int(sides[me]["dashes"]), int(sides[other]["dashes"])
    if kind is ScoreKind.POINTS:
        return 0.5 if mine + theirs == 0 else theirs / (mine + theirs)
    return 1.0 if mine < theirs else 0.0 if mine > theirs else 0.5


def set_game_scores(plan: ABPlan, rows: Sequence[JournalRow]) -> dict[int, list[float]]:
    """The pairwise game scores of every complete set, by set index (sets with a match not done are left out)."""
    by_set: dict[int, list[JournalRow]] = {}
    index = {m.match_id: m for m in plan.schedule}
    for row in rows:
        by_set.setdefault(index[row.match_id].set_index, []).append(row)
    out: dict[int, list[float]] = {}
    for s, members in by_set.items():
        if len(members) != plan.matches_per_set or any(r.status != "done" or r.result is None for r in members):
            continue
        scores: list[float] = []
        for row in sorted(members, key=lambda r: r.index):
            assert row.result is not None
            scores.extend(pair_score(row.result, me, o, plan.test.score) for me, o in plan.pairs[row.match_id])
        out[s] = scores
    return out


# --- the control variate ------------------------------------------------------------------------


def control_values(plan: ABPlan) -> list[list[float]]:
    """b for every game of every set: the score of the candidate's side against the opponent's side
    when the control bot plays the candidate's seats and ``control_against`` (default: the control
    bot too) every other seat of that set's deal and seating (mean over the playouts)."""
    from gaigel.bots import make_bot
    from gaigel.match import MatchSpec, MatchTermination, play_match

    arena, test = plan.arena, plan.test
    ruleset = arena.ruleset
    first_set = plan.schedule[: plan.matches_per_set]  # every set has these seatings
    self_play = test.control_opponent == test.control
    out: list[list[float]] = []
    for s in range(test.max_sets):
        seed = set_seed(arena.seed, s)
        cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        values: list[float] = []
        for match in first_set:
            me_side = match.sides.index(test.candidate)
            seats = tuple(
                test.control if ruleset.side_of(seat) == me_side else test.control_opponent
                for seat in range(arena.players)
            )
            key = seats if not self_play else ()
            if key not in cache:  # self-play: one game per deal serves every seating
                results = []
                for p in range(test.control_playouts):
                    spec = MatchSpec(ruleset, seed, arena.hands, seats)
                    score, _ = play_match(
                        spec, [make_bot(b) for b in seats], record=False, match_key=f"control-s{s}-p{p}-{'-'.join(key)}"
                    )
                    result = score.to_dict()
                    result["termination"] = MatchTermination.COMPLETED.value
                    results.append(result)
                cache[key] = results
            for me, other in plan.pairs[match.match_id]:
                values.append(sum(pair_score(r, me, other, test.score) for r in cache[key]) / len(cache[key]))
        out.append(values)
    return out


def _values_hash(values: Sequence[Sequence[float]]) -> str:
    return hashlib.sha256(json.dumps(values, separators=(",", ":")).encode()).hexdigest()


def control_payload(plan: ABPlan, values: list[list[float]]) -> str:
    """The journal's control-variate entry: settings, every b value and their SHA-256."""
    t = plan.test
    return json.dumps(
        {
            "reference": t.control,
            "playouts": t.control_playouts,
            "against": t.control_opponent,
            "score": t.score.value,
            "sha256": _values_hash(values),
            "values": values,
        },
        separators=(",", ":"),
    )


def read_control(payload: str) -> tuple[list[list[float]], str]:
    """The b values and their hash from a journal entry.

    :raises JournalError: if the values do not match their stored hash (the journal was edited).
    """
    data = json.loads(payload)
    values = [[float(v) for v in row] for row in data["values"]]
    if _values_hash(values) != data["sha256"]:
        raise JournalError("the control variate stored in the journal does not match its hash; it was changed")
    return values, str(data["sha256"])


# --- evaluation -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ABState:
    """The test's statistics from the journal, always over the complete prefix of sets."""

    sets: int
    """Sets counted: the complete sets before the first incomplete one, up to the verdict."""
    prefix: int
    """Complete sets before the first incomplete one (some may lie beyond the verdict)."""
    verdict: Verdict
    llr: float
    llr_path: tuple[float, ...]
    """The test statistic's LLR after each counted set (on Y with a control variate, else X)."""
    estimate: Estimate | None
    """Of the test statistic over the counted sets."""
    estimate_x: Estimate | None
    """Of X alone (no control variate) over the counted sets."""
    set_scores: tuple[float, ...]
    """X of the counted sets."""
    game_scores: tuple[tuple[float, ...], ...]
    baselines: tuple[float, ...] | None
    """B_s of the counted sets (None without a control variate)."""
    baseline_mean: float | None
    """The mean of B over all sets of the run up to the cap, fixed before play."""
    x_verdict: tuple[Verdict, int]
    """The same test on X alone over the whole prefix: its verdict and the sets it took."""
    y_verdict: tuple[Verdict, int] | None
    """The test on Y over the whole prefix (None without a control variate)."""


def _prefix_verdict(scores: Sequence[float], test: Sprt, cap: int) -> tuple[Verdict, int]:
    verdict, used = first_crossing(llr_path(scores, test), test)
    if verdict is Verdict.CONTINUE and used >= cap:
        verdict = Verdict.INCONCLUSIVE
    return verdict, used


def evaluate(plan: ABPlan, rows: Sequence[JournalRow], control: Sequence[Sequence[float]] | None) -> ABState:
    """The verdict and statistics of a journal's rows: a pure function of the set outcomes in set order.

    With a control variate the test runs on ``Y = X - (B - mean B)``, with ``mean B`` over every
    set up to the cap (fixed before play); the verdict X alone would give is reported beside it.
    """
    test = plan.sprt()
    cap = plan.test.max_sets
    scores = set_game_scores(plan, rows)
    prefix: list[list[float]] = []
    while len(prefix) in scores:
        prefix.append(scores[len(prefix)])
    x = [sum(g) / len(g) for g in prefix]
    baselines: list[float] | None = None
    beta: float | None = None
    y: list[float] | None = None
    if control is not None:
        all_b = [sum(v) / len(v) for v in control]
        beta = sum(all_b) / len(all_b)
        baselines = all_b[: len(x)]
        y = [float(v) for v in controlled_scores(x, baselines, beta)]
    x_verdict = _prefix_verdict(x, test, cap)
    y_verdict = None if y is None else _prefix_verdict(y, test, cap)
    verdict, used = y_verdict if y_verdict is not None else x_verdict
    primary = (y if y is not None else x)[:used]
    path = llr_path(primary, test)
    return ABState(
        sets=used,
        prefix=len(prefix),
        verdict=verdict,
        llr=float(path[-1]) if used else 0.0,
        llr_path=tuple(float(v) for v in path),
        estimate=estimate(primary, plan.games_per_set) if used else None,
        estimate_x=estimate(x[:used], plan.games_per_set) if used else None,
        set_scores=tuple(x[:used]),
        game_scores=tuple(tuple(g) for g in prefix[:used]),
        baselines=None if baselines is None else tuple(baselines[:used]),
        baseline_mean=beta,
        x_verdict=x_verdict,
        y_verdict=y_verdict,
    )


# --- running ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ABRun:
    """What a run of the test did, and the state it ended in."""

    plan: ABPlan
    state: ABState
    played_now: int
    replayed: int
    seconds: float
    db_path: DbTarget
    control: list[list[float]] | None
    control_hash: str | None


def plan_lines(plan: ABPlan) -> list[str]:
    """What the test will do, printed before the first game: the bounds and the expected sets."""
    test = plan.sprt()
    t = plan.test
    h0, h1 = test.expected_sets()
    mid = test.expected_sets_midpoint()
    who = f"{t.candidate} vs {t.baseline}" if t.kind is ABKind.AB else f"{t.candidate} vs the field"
    field = f", field {', '.join(t.field)}" if t.field else ""
    cv = "none"
    if t.control != "none":
        games = "self-play" if t.control_opponent == t.control else f"against {t.control_opponent}"
        cv = f"{t.control} {games}, {t.control_playouts} playout(s) per deal and seating"
    return [
        f"test {who}{field}: {plan.arena.players} players, {plan.matches_per_set} matches and "
        f"{plan.games_per_set} scored games per set, score = {t.score.value}, control variate: {cv}",
        f"SPRT nElo [{t.elo0:g}, {t.elo1:g}], alpha {t.alpha:g}, beta {t.beta:g}: LLR bounds "
        f"[{test.lower:.3f}, {test.upper:.3f}]; expected sets {h0:.0f} under H0, {h1:.0f} under H1, "
        f"{mid:.0f} at the midpoint; cap {t.max_sets} sets, no verdict before {test.min_sets}",
    ]


def live_line(plan: ABPlan, state: ABState) -> str:
    """One line of progress: sets, LLR with its bounds, nElo with its interval."""
    test = plan.sprt()
    est = state.estimate
    nelo = "" if est is None else f"  nElo {est.nelo:+.1f} [{est.nelo_ci95[0]:+.1f}, {est.nelo_ci95[1]:+.1f}]"
    return (
        f"sets {state.sets}/{plan.test.max_sets}  LLR {state.llr:+.3f} [{test.lower:.2f}, {test.upper:.2f}]"
        f"{nelo}  {state.verdict.value}"
    )


def _control(journal: Journal, plan: ABPlan, stream: TextIO | None) -> tuple[list[list[float]] | None, str | None]:
    """The control variate's b values: read from the journal, or computed and stored there before any game."""
    if plan.test.control == "none":
        return None, None
    stored = journal.meta(CONTROL_META_KEY)
    if stored is None:
        if journal.counts()["done"] or journal.counts()["started"]:
            raise JournalError(f"{journal.label} has games but no control variate; it would be fitted after the fact")
        started = time.monotonic()
        values = control_values(plan)
        journal.put_meta(CONTROL_META_KEY, control_payload(plan, values))
        stored = journal.meta(CONTROL_META_KEY)
        assert stored is not None
        _say(
            stream, f"control variate: {len(values)} deals in {time.monotonic() - started:.1f} s, stored in the journal"
        )
    values, digest = read_control(stored)
    if len(values) != plan.test.max_sets:
        raise JournalError(
            f"{journal.label}: the stored control variate has {len(values)} sets, not {plan.test.max_sets}"
        )
    return values, digest


def _say(stream: TextIO | None, line: str) -> None:
    if stream is not None:
        stream.write(line + "\n")
        stream.flush()


def run_ab(
    arena: ArenaConfig,
    test: ABConfig,
    out_dir: Path,
    *,
    db: str | None = None,
    workers: int | None = None,
    executor: str = "auto",
    executor_factory: Callable[[ArenaConfig, int], Executor] | None = None,
    stream: TextIO | None = None,
    interval: float | None = None,
) -> ABRun:
    """Plays sets until the test reaches a bound or the cap, into the journal in *out_dir*.

    Prints the plan (:func:`plan_lines`) before the first game and :func:`live_line` as sets
    finish to *stream* (every *interval* seconds; default 0.25 on a terminal, else 10).

    :raises JournalError: if the journal belongs to another config or test, or another run holds it.
    :raises ArenaError: if a match fails repeatedly (as ``gaigel arena run``).
    """
    from gaigel_arena.runner import drive, make_executor  # the arena's own loop, one chunk of sets at a time

    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    db_path = resolve_db(out_dir, db)
    plan = plan_ab(arena, test)
    records_dir = out_dir / "records"
    if arena.keep_records:
        records_dir.mkdir(exist_ok=True)
    n_workers = workers or arena.workers
    metrics = ArenaMetrics(arena.bot_names)
    tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
    every = interval if interval is not None else (0.25 if tty else 10.0)
    factory = executor_factory or (lambda c, w: make_executor(c, w, executor))
    pool: Executor = factory(arena, n_workers)
    canonical = plan.canonical_json()
    try:
        with Journal.create_or_open(
            db_path, canonical, hashlib.sha256(canonical.encode()).hexdigest(), list(plan.schedule)
        ) as journal:
            replayed = journal.rollback()
            control, digest = _control(journal, plan, stream)
            for line in plan_lines(plan):
                _say(stream, line)
            by_id = {m.match_id: m for m in plan.schedule}
            chunk = max(1, math.ceil(4 * pool.workers / plan.matches_per_set))
            played = 0
            last = 0.0
            while True:
                state = evaluate(plan, journal.rows(), control)
                now = time.monotonic()
                final = state.verdict is not Verdict.CONTINUE
                if stream is not None and (final or now - last >= every):
                    if tty:
                        stream.write("\r" + live_line(plan, state))
                        stream.flush()
                    else:
                        _say(stream, live_line(plan, state))
                    last = now
                if final:
                    break
                window = set(range(state.prefix, state.prefix + chunk))
                todo = [by_id[i] for i in journal.pending() if by_id[i].set_index in window]
                played += drive(arena, journal, pool, todo, records_dir, metrics, None, started)
            if tty and stream is not None:
                stream.write("\n")
    finally:
        pool.shutdown()
    return ABRun(plan, state, played, replayed, time.monotonic() - started, db_path, control, digest)


def open_ab(out: DbTarget) -> tuple[ABPlan, ABState, list[list[float]] | None, str | None, dict[str, int]]:
    """Reads a test's folder (or journal file, or URL): its plan rebuilt from the stored config, and its state.

    :raises JournalError: if there is no journal there or it holds no test.
    """
    target: DbTarget = out
    if isinstance(out, Path) and out.is_dir():
        target = resolve_db(out, None)
    with Journal.open_existing(target) as journal:
        stored = journal.config()
        if "test" not in stored:
            raise JournalError(f"{journal.label} is an arena journal without a test; use `gaigel arena report`")
        rows = journal.rows()
        counts = journal.counts()
        payload = journal.meta(CONTROL_META_KEY)
    arena, test = _configs_from_canonical(stored)
    plan = plan_ab(arena, test)
    control, digest = (None, None) if payload is None else read_control(payload)
    return plan, evaluate(plan, rows, control), control, digest, counts


def _configs_from_canonical(stored: Mapping[str, Any]) -> tuple[ArenaConfig, ABConfig]:
    """The arena and test configs back from the journal's canonical JSON (enough to rebuild the plan)."""
    from gaigel_arena.config import BotConfig, ClockConfig

    game = stored["game"]
    ruleset = Ruleset.from_dict(game["ruleset"])
    bots = tuple(
        BotConfig(name=b["name"], kind=b["kind"], house=b.get("house", ""), command=tuple(b.get("command", ())))
        for b in stored["bots"]
    )
    arena = ArenaConfig(
        name=stored["arena"]["name"],
        seed=int(stored["arena"]["seed"]),
        sets_per_pairing=int(stored["arena"]["sets_per_pairing"]),
        workers=1,
        players=int(game["players"]),
        rules_preset=str(game["rules"]),
        rules_options={},
        ruleset=ruleset,
        hands=int(game["hands"]),
        clock=ClockConfig(),
        bots=bots,
    )
    t = stored["test"]
    test = ABConfig(
        kind=ABKind(t["kind"]),
        candidate=t["candidate"],
        baseline=t["baseline"],
        field=tuple(t["field"]),
        elo0=float(t["elo0"]),
        elo1=float(t["elo1"]),
        alpha=float(t["alpha"]),
        beta=float(t["beta"]),
        max_sets=int(t["max_sets"]),
        score=ScoreKind(t["score"]),
        control=str(t["control"]),
        control_playouts=int(t["control_playouts"]),
        control_against=str(t.get("control_against", "")),
    )
    return arena, test

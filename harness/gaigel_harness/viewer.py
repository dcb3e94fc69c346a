"""``gaigel view``: one self-contained HTML page that replays a match record step by step.

The step data is built here by replaying the record with the engine (hash for hash, as
``gaigel replay`` does) and embedded in the page as JSON; a small hand-written script
renders it. Every step holds an omniscient view and, per seat, what that seat knew
(``state.observation(seat)``). With ``seat`` given only that seat's view is embedded, so
the page does not even contain the other seats' hidden cards.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import html
import json
from pathlib import Path
from typing import Any

from gaigel.actions import action_label, played_card
from gaigel.cards import CODE_OF, card_code, cards_of
from gaigel.match import MatchScore, MatchSpec, hand_setup, spec_from_record
from gaigel.observation import Observation
from gaigel.record import RecordError, load_record
from gaigel.ruleset import OPENING_NAMES
from gaigel.state import GaigelState, IllegalActionError
from gaigel_harness.viewer_page import CSS, JS

__all__ = [
    "ViewerError",
    "build_view",
    "pack_steps",
    "render_viewer",
    "viewer_assets",
    "write_viewer",
    "write_viewer_for",
]

VIEW_FORMAT = "gaigel.viewer.v1"
ALL = "all"
"""The key of the omniscient view in a step's ``views``."""


class ViewerError(ValueError):
    """A record the viewer cannot show (unreadable, not a record, does not replay, bad seat)."""


# --- step data -------------------------------------------------------------------------


def _codes(cards: Any) -> list[str]:
    return [CODE_OF[c] for c in cards]  # the table, not card_code(): this runs for every card of every step


def _scores(state: GaigelState) -> list[dict[str, int]]:
    return [
        {"cards": state.side_cards[x], "melds": state.side_melds[x], "total": state.side_total(x)}
        for x in range(state.num_sides)
    ]


def _common(obs: Observation) -> dict[str, Any]:
    """The parts of a view that read the same from the full state and from an observation."""
    last = obs.tricks[-1] if obs.tricks else None
    return {
        "to_act": obs.to_act,
        "phase": obs.phase,
        "trump": card_code(obs.trump_card),
        "face_up": None if obs.face_up_card is None else card_code(obs.face_up_card),
        "talon_size": obs.talon_size,
        "opening": None if obs.opening is None else OPENING_NAMES[obs.opening],
        "leader": obs.trick_leader,
        "last_trick": None
        if last is None
        else {"leader": last.leader, "cards": _codes(last.cards), "winner": last.winner, "index": len(obs.tricks) - 1},
        "tricks_won": list(obs.tricks_won),
        "melds": [
            {"seat": m.seat, "suit": "EBHS"[m.suit], "double": m.double, "cards": _codes(m.cards), "points": m.points}
            for m in obs.melds
        ],
        "robbed": None
        if obs.robbed_by is None or obs.robbed_cards is None
        else {"seat": obs.robbed_by, "cards": _codes(obs.robbed_cards)},
        "rob_reserved": obs.rob_reserved_seat,
    }


def _full_view(state: GaigelState, obs: Observation) -> dict[str, Any]:
    """Everything, hidden cards included; face-down trick cards are flagged as such (*obs*: any seat's)."""
    view = _common(obs)
    view["hands"] = [_codes(cards_of(h)) for h in state.hands]
    view["trick"] = [
        {"seat": (state.leader + i) % state.n, "card": card_code(c), "down": state.face_down}
        for i, c in enumerate(state.trick_cards)
    ]
    view["talon"] = _codes(state.talon[state.tpos :])
    view["scores"] = _scores(state)
    return view


def _seat_view(state: GaigelState, seat: int, obs: Observation) -> dict[str, Any]:
    """What *seat* knew (*obs*, its observation): its hand, public holdings of the others, face-down cards as backs."""
    view = _common(obs)
    hands: list[list[str | None]] = []
    for s in range(state.n):
        if s == seat:
            hands.append(list(_codes(obs.hand)))
            continue
        known: list[str | None] = list(_codes(obs.public_holdings[s]))
        # how many cards a seat holds is public; which ones is not
        hands.append(known + [None] * (state.hands[s].bit_count() - len(known)))
    view["hands"] = hands
    view["trick"] = [
        {"seat": s, "card": None if c is None else card_code(c), "down": state.face_down} for s, c in obs.current_trick
    ]
    view["talon"] = None
    view["scores"] = (
        None
        if obs.scores is None
        else [{"cards": x.card_points, "melds": x.meld_points, "total": x.total} for x in obs.scores]
    )
    return view


def _decision(entry: dict[str, Any], legal: list[int], seat: int | None, after: Observation | None) -> dict[str, Any]:
    """The decision taken at a step as *seat* (None: everyone) may see it (*after*: the seat's next observation)."""
    acting = int(entry.get("seat", -1))
    action = int(entry["action"])
    label = action_label(action)
    if seat is not None and acting != seat:
        card = played_card(action)
        if card is not None and after is not None and card not in after.visible_cards():
            label = "play (a face-down card)"
    mine = seat is None or acting == seat
    return {
        "seat": acting,
        "label": label,
        "ms": entry.get("ms"),
        "flags": list(entry.get("flags", [])),
        # the legal actions of another seat would tell its hand
        "legal": [action_label(a) for a in legal] if mine else None,
    }


def _fault_view(fault: dict[str, Any], seat: int | None) -> dict[str, Any]:
    """A fault as *seat* may see it: another seat's message may name its hidden cards."""
    mine = seat is None or fault.get("seat") == seat
    return {
        "seat": fault.get("seat"),
        "reason": str(fault.get("reason", "")),
        "message": str(fault.get("message", "")) if mine else "(another seat's fault: message not shown)",
        "hand": fault.get("hand"),
        "step": fault.get("step"),
    }


def _check_seat(seat: int | None, players: int) -> None:
    if seat is not None and not 0 <= seat < players:
        raise ViewerError(f"--seat must be a seat 0..{players - 1} of this {players}-player match, got {seat}")


def _observations(state: GaigelState, keys: list[tuple[str, int | None]]) -> dict[int, Observation]:
    """Each seat's observation the views need, built once per state (the costly part of a step)."""
    seats = {state.forehand if seat is None else seat for _, seat in keys}
    return {s: state.observation(s) for s in seats}


def _views(
    state: GaigelState, keys: list[tuple[str, int | None]], obs: dict[int, Observation]
) -> dict[str, dict[str, Any]]:
    """The step's views by key: the omniscient one (seat None) and each seat's."""
    return {
        key: _full_view(state, obs[state.forehand]) if seat is None else _seat_view(state, seat, obs[seat])
        for key, seat in keys
    }


def _apply(state: GaigelState, entry: dict[str, Any], k: int, i: int) -> None:
    """Applies a recorded action as ``gaigel replay`` does: in turn, legal, and to the recorded hash."""
    if state.is_terminal() or entry.get("seat", state.to_act) != state.to_act:
        raise ViewerError(f"hand {k} step {i}: the record does not replay (seat {entry.get('seat')} out of turn)")
    try:
        state.apply_checked(int(entry["action"]))
    except IllegalActionError as e:
        raise ViewerError(f"hand {k} step {i}: the record does not replay ({e})") from None
    if state.state_hash() != entry["hash"]:
        raise ViewerError(f"hand {k} step {i}: state hash differs from the record's (another engine's rules?)")


def _hidden_from(state: GaigelState, entry: dict[str, Any]) -> list[int]:
    """The seats that did not see the card just played (*state*: after it): a face-down card only."""
    card = played_card(int(entry["action"]))
    if card is None or not state.face_down:
        return []  # a card played face up lies on the table or in the tricks, seen by all
    acting = int(entry.get("seat", -1))
    return [s for s in range(state.n) if s != acting and card not in state.observation(s).visible_cards()]


def _replay_hand(
    spec: MatchSpec,
    hand: dict[str, Any],
    keys: list[tuple[str, int | None]],
    score: MatchScore,
    compact: bool = False,
) -> list[dict[str, Any]]:
    """The steps of one hand: the state before every recorded action and once after the last."""
    k = int(hand["index"])
    d, dealer, forehand = hand_setup(spec, k)
    if hand.get("deal_hash") != d.digest():
        raise ViewerError(f"hand {k}: the deal differs from the seed's deal (not a replayable record)")
    state = GaigelState(spec.ruleset, d, forehand)
    actions = hand["actions"]
    steps = []
    obs = _observations(state, keys)
    for i in range(len(actions) + 1):
        step: dict[str, Any] = {
            "hand": k,
            "i": i,
            "n": len(actions),
            "dealer": dealer,
            "forehand": forehand,
            "trick_no": state.trick_no,
            "dashes": list(score.dashes),
            "hands_won": list(score.hands_won),
            "views": _views(state, keys, obs),
            "outcome": None,
        }
        if compact:  # what each seat knew of the others' hands: the page derives the seat views
            step["known"] = [_codes(cards_of(state.known[x] & state.hands[x])) for x in range(state.n)]
        steps.append(step)
        if i == len(actions):
            break
        legal = state.legal_actions()
        _apply(state, actions[i], k, i)
        obs = _observations(state, keys)
        for key, seat in keys:
            after = None if seat is None else obs[seat]
            step["views"][key]["decision"] = _decision(actions[i], legal, seat, after)
        if compact:
            step["views"][ALL]["decision"]["hidden_from"] = _hidden_from(state, actions[i])
    outcome = state.outcome()
    if outcome is not None:  # None: a hand cut short by a forfeit or an abort
        score.add(outcome)
        last = steps[-1]
        last["outcome"] = outcome.to_dict()
        last["dashes"], last["hands_won"] = list(score.dashes), list(score.hands_won)
    return steps


def _place_faults(faults: list[dict[str, Any]], steps: list[dict[str, Any]]) -> list[int]:
    """The step index each fault belongs to: its hand and decision, else the end of its hand or match."""
    where = {(s["hand"], s["i"]): n for n, s in enumerate(steps)}
    ends = {s["hand"]: n for n, s in enumerate(steps) if s["i"] == s["n"]}
    out = []
    for f in faults:
        hand, step = f.get("hand"), f.get("step")
        if isinstance(hand, int) and isinstance(step, int) and (hand, step) in where:
            out.append(where[(hand, step)])
        elif isinstance(hand, int) and hand in ends:
            out.append(ends[hand])
        else:
            out.append(len(steps) - 1)
    return out


def build_view(record: dict[str, Any], seat: int | None = None, compact: bool = False) -> dict[str, Any]:
    """The viewer's data for *record*: match facts, faults and every step's views.

    With *seat* only that seat's observations are included (no omniscient view). *compact*
    (no *seat*) holds only the omniscient view and, per step, each seat's publicly known cards
    and who did not see a face-down card: the page's script derives each seat's view from them,
    at a third of the work and size (the arena report's pages).

    :raises ViewerError: for a record that does not replay or a seat out of range.
    """
    try:
        spec = spec_from_record(record)
    except RecordError as e:
        raise ViewerError(str(e)) from None
    players = spec.ruleset.players
    _check_seat(seat, players)
    if compact and seat is not None:
        raise ViewerError("a compact view holds every seat's view: it takes no seat")
    seats = [seat] if seat is not None else list(range(players))
    keys: list[tuple[str, int | None]] = ([] if seat is not None else [(ALL, None)]) + [
        (str(s), s) for s in seats if not compact
    ]
    score = MatchScore(spec)
    steps: list[dict[str, Any]] = []
    for hand in record["hands"]:
        steps.extend(_replay_hand(spec, hand, keys, score, compact))
    if not steps:
        raise ViewerError("the record has no hand played: nothing to show")
    raw_faults = [f for f in record.get("faults", []) if isinstance(f, dict)]
    faults = [_fault_view(f, seat) for f in raw_faults]
    for index, (f, n) in enumerate(zip(faults, _place_faults(raw_faults, steps), strict=True)):
        f["at"] = n
        steps[n].setdefault("faults", []).append(index)
    return {
        "format": VIEW_FORMAT,
        "match_id": str(record.get("match_id", "")),
        "seed": str(spec.seed),  # a string: seeds go up to 2^64, past the doubles JavaScript parses
        "players": players,
        "sides": [list(spec.ruleset.seats_of(x)) for x in range(spec.ruleset.num_sides)],
        "seats": [
            {"seat": s, "side": spec.ruleset.side_of(s), "bot": spec.bots[s], "version": str(r.get("version", ""))}
            for s, r in enumerate(record["seats"])
        ],
        "only_seat": seat,
        "views": ([ALL] if seat is None else []) + [str(s) for s in seats],
        "derived_views": compact,
        "expose_scores": spec.ruleset.expose_scores,
        "hands_planned": spec.hands,
        "result": record.get("result"),
        "faults": faults,
        "steps": steps,
    }


# --- page ------------------------------------------------------------------------------


def _delta(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The keys of *new* whose values differ from *base*'s; ``"~"`` lists the keys *new* lacks."""
    out = {k: v for k, v in new.items() if k not in base or base[k] != v}
    gone = [k for k in base if k not in new]
    if gone:
        out["~"] = gone
    return out


def pack_steps(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Each step as its change from the step before (and each view from its view there): most of
    a step (the scores, the hands but one card) repeats. Besides, a talon that lost cards from its
    front is the number of cards lost, hands are only the seats' whose hand changed, and the labels
    of a decision (taken and legal) are indices into one table of labels. The page's script unpacks (``unpack`` in the viewer script)."""
    out: list[dict[str, Any]] = []
    labels: dict[str, int] = {}
    prev: dict[str, Any] = {}
    for step in steps:
        rest = {k: v for k, v in step.items() if k != "views"}
        packed = _delta({k: v for k, v in prev.items() if k != "views"}, rest)
        before = prev.get("views", {})
        packed["views"] = {}
        for key, view in step["views"].items():
            delta = _delta(before.get(key, {}), view)
            old, talon = before.get(key, {}).get("talon"), delta.get("talon")
            if old and talon is not None and len(talon) < len(old) and old[len(old) - len(talon) :] == talon:
                delta["talon"] = len(old) - len(talon)
            old_hands, hands = before.get(key, {}).get("hands"), delta.get("hands")
            if old_hands and hands is not None and len(old_hands) == len(hands):
                delta["hands"] = {str(s): h for s, h in enumerate(hands) if h != old_hands[s]}  # the seats changed
            decision = delta.get("decision")
            if decision:
                legal = decision.get("legal")
                delta["decision"] = {
                    **{k: v for k, v in decision.items() if v != [] or k == "legal"},  # no flags: none given
                    "label": labels.setdefault(decision["label"], len(labels)),
                    "legal": None if legal is None else [labels.setdefault(label, len(labels)) for label in legal],
                }
            packed["views"][key] = delta
        out.append(packed)
        prev = step
    return {"labels": list(labels), "steps": out}


def viewer_assets() -> dict[str, str]:
    """The shared files of pages rendered with ``shared=True``, by file name."""
    return {"viewer.css": CSS, "viewer.js": JS}


def render_viewer(view: dict[str, Any], title: str | None = None, shared: bool = False) -> str:
    """One self-contained HTML page (inline CSS, JS and data; nothing loaded from the network).

    *shared*: the page loads the stylesheet and script from ``viewer.css`` and ``viewer.js``
    beside it (:func:`viewer_assets`) instead of holding copies, as the arena report's many pages do.
    A view built with ``compact=True`` is embedded packed (:func:`pack_steps`) and gzipped
    (base64; the script unpacks it with the browser's ``DecompressionStream``).
    """
    if view.get("derived_views"):  # gzipped: the packed steps' JSON shrinks to about a sixth
        packed = json.dumps(pack_steps(view["steps"]), separators=(",", ":")).encode("utf-8")
        view = {**view, "steps": None, "packed_gz": base64.b64encode(gzip.compress(packed, 6, mtime=0)).decode()}
    # no "<" at all inside the script element: "</script>" or "<!--" in a bot name must not end or bend it
    data = json.dumps(view, separators=(",", ":")).replace("<", "\\u003c")
    if title is None:
        bots = " vs ".join(dict.fromkeys(str(s["bot"]) for s in view["seats"]))  # by seat, as the match list
        title = f"{view['match_id'] or 'match'} (seed {view['seed']}): {bots}"
    style = '<link rel="stylesheet" href="viewer.css">' if shared else f"<style>{CSS}</style>"
    script = '<script src="viewer.js"></script>' if shared else f"<script>{JS}</script>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
{style}</head><body>
<header><h1 id="title">{html.escape(title)}</h1><p id="summary"></p></header>
<nav id="controls">
<button id="first" title="first step (Home)">|◀ start</button>
<button id="prev-hand" title="previous hand (PageUp)">« hand</button>
<button id="prev-trick" title="previous trick (↑)">‹ trick</button>
<button id="prev" title="previous step (←)">◀ step</button>
<button id="next" title="next step (→)">step ▶</button>
<button id="next-trick" title="next trick (↓)">trick ›</button>
<button id="next-hand" title="next hand (PageDown)">hand »</button>
<button id="last" title="last step (End)">end ▶|</button>
<input id="slider" type="range" min="0" value="0" aria-label="step">
<label>view <select id="seat-filter"></select></label>
<span id="position"></span>
</nav>
<main>
<section id="table"></section>
<aside>
<section id="score-panel"><h2>Score</h2><div id="scores"></div></section>
<section id="decision-panel"><h2>Decision</h2><div id="decision"></div></section>
<section id="meld-panel"><h2>Melds, robbing, opening</h2><div id="events"></div></section>
<section id="fault-panel"><h2>Faults</h2><p id="no-faults" class="muted">no faults</p><ol id="faults"></ol></section>
<section id="legend"><h2>Card codes</h2>
<p>A card is written as its code, e.g. <code>HKa</code>: suit, rank, copy (the deck is doubled: <code>a</code> and <code>b</code>).</p>
<p>Suits: <span class="suit-E">E ♣ Eichel</span> (acorns), <span class="suit-B">B ♠ Blatt</span> (leaves),
<span class="suit-H">H ♥ Herz</span> (hearts), <span class="suit-S">S ♦ Schellen</span> (bells).</p>
<p>Ranks and points: A ace 11, T ten 10, K king 4, O Ober 3, U Unter 2, 7 seven 0.</p>
<p>Hands, steps and tricks count from 0, as the record and the protocol's <code>trick_index</code> do.</p>
</section>
</aside>
</main>
<script id="match-data" type="application/json">{data}</script>
{script}
</body></html>
"""


def write_viewer(record_path: str | Path, out: str | Path, seat: int | None = None) -> Path:
    """Reads *record_path* and writes its viewer page to *out*; returns *out*.

    :raises ViewerError: with a one-line reason for bad input or an unwritable *out*.
    """
    try:
        record = load_record(record_path)
    except RecordError as e:
        raise ViewerError(str(e)) from None
    return write_viewer_for(record, out, seat)


def write_viewer_for(record: dict[str, Any], out: str | Path, seat: int | None = None) -> Path:
    """Writes the viewer page of an in-memory *record* to *out* (atomically: temp file, then rename)."""
    page = render_viewer(build_view(record, seat))
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(out)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise ViewerError(f"cannot write {out}: {e.strerror}") from None
    return out

"""Arena configuration: one TOML file, validated into frozen values.

A configuration looks like this (every key but ``[[bots]]`` has a default)::

    [arena]
    name = "demo"
    seed = 1
    sets_per_pairing = 10   # duplicate sets: each deal seed once per rotation of the sides
    workers = 2             # default: one per core; never part of the config hash
    executor = "auto"        # auto, local, inline, grpc or ray; never part of the config hash
    ray_address = "local"    # executor = "ray": a running cluster's address, or "local"

    [game]
    players = 2             # 2, 3, 4 or 6
    rules = "default"       # ruleset preset
    hands = 8               # hands per match
    [game.options]          # RULES.md §14 options, dotted or nested
    "meld.timing" = "own_turn"

    [clock]
    decision_ms = 1000      # per decision, for bots that play over gRPC
    bank_ms = 10000
    resume_grace_ms = 20000 # how long a disconnected bot may take to resume before it forfeits

    [[bots]]
    name = "random"
    house = "random"        # an in-process house bot ...

    [[bots]]
    name = "mybot"
    command = ["python", "mybot.py"]   # ... or a process that connects over gRPC ...

    [[bots]]
    name = "stranger"
    build = "submissions/stranger"      # ... or a submission folder with a Dockerfile
    sandbox = "podman"                  # or an image = "..."; sandbox: auto, bwrap, podman, process, none

    [sandbox]                          # limits of sandboxed command bots (docs/operator-guide.md)
    default = "auto"                    # podman for bots with an image where podman exists, else bwrap
    memory_mb = 512

    [[bots]]
    name = "friend"
    remote = true           # ... or a bot that connects on its own with its token:
    token_env = "FRIEND_TOKEN"   # read from this environment variable (or token_file = "...")

Remote bots need a published server: ``[arena] listen = "0.0.0.0:50051"`` (with
``tls_cert``/``tls_key`` as ``gaigel serve`` has them). ``[clock] connect_wait_ms`` is how
long a match waits for a remote bot that is not connected before its side forfeits
(reason ``ABSENT``). ``[arena] bot_processes = "per_match"`` (the default) starts fresh bot
processes for every match (no memory carried from one seating of a duplicate set to the
next), ``"per_run"`` keeps them for the whole run (faster; for bots you trust);
``allow_in_match_duplicate = true`` accepts ``match.format = "duplicate"`` with bots that
are not house bots (such a bot can remember its first seating's cards inside the match).

:func:`load_config` raises :class:`ConfigError` (a :class:`ValueError`) with one line
that names the file, the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from gaigel.deal import STANDARD_PLAYER_COUNTS, player_counts_text
from gaigel.ruleset import PRESETS, Ruleset, RulesetError, preset
from gaigel_arena.sandbox import LIMIT_KEYS, SANDBOXES, SandboxConfig, parse_limits, parse_sandbox
from gaigel_arena.schedule import check_unambiguous_ids
from gaigel_server.auth import check_bot_name

__all__ = ["ArenaConfig", "BotConfig", "BotKind", "ClockConfig", "ConfigError", "load_config", "parse_config"]

BotKind = Literal["house", "command", "remote"]

CONFIG_FORMAT = "gaigel.arena.config.v1"
"""Format tag of :meth:`ArenaConfig.canonical`."""


class ConfigError(ValueError):
    """An arena configuration that cannot be used; the message says what to fix."""


@dataclasses.dataclass(frozen=True)
class BotConfig:
    """One bot of the arena: a house bot, a command to launch, or a remote bot with a token."""

    name: str
    kind: BotKind
    house: str = ""
    command: tuple[str, ...] = ()
    token: str = dataclasses.field(default="", repr=False)
    """A remote bot's token (from ``token``, ``token_env`` or ``token_file``); never printed."""
    sandbox: str = ""
    """``auto``, ``podman``, ``process`` or ``none``; empty: the arena's ``[sandbox] default``."""
    image: str = ""
    """Container image of a sandboxed bot (``command`` then runs in it, else its CMD)."""
    build: str = ""
    """Submission folder whose Dockerfile the arena builds into the bot's image."""
    folder: str = ""
    """The bot's submission folder (absolute): read-only in the ``bwrap`` sandbox, hidden from other bots."""
    limits: tuple[tuple[str, Any], ...] = ()
    """This bot's overrides of the ``[sandbox]`` limits (``limits = { memory_mb = 2048 }``)."""
    pass_env: tuple[str, ...] = ()
    """Names of the organiser's environment variables this bot gets (besides ``[sandbox] pass_env``)."""

    def canonical(self) -> dict[str, Any]:
        """JSON-ready description; a remote bot's token is left out (a credential, not a result:
        rotating it must not orphan the journal, and the journal must not hold a guessable hash)."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "house":
            out["house"] = self.house
        elif self.kind == "command":
            out["command"] = list(self.command)
            # What the bot is (its image), not how it is confined: only when set, so older hashes stay valid.
            out.update({key: getattr(self, key) for key in ("image", "build") if getattr(self, key)})
        return out


@dataclasses.dataclass(frozen=True)
class ClockConfig:
    """Time control of bots that play over gRPC (in-process house bots are not timed)."""

    decision_ms: int = 1000
    bank_ms: int = 10_000
    resume_grace_ms: int = 20_000
    """How long a bot whose stream broke (a crash) may take to resume before its side forfeits."""
    connect_wait_ms: int = 60_000
    """How long a match waits for an absent remote bot (counted from when it was last connected)."""

    def canonical(self) -> dict[str, int]:
        """JSON-ready; the grace and wait only when not the default, so older config hashes stay valid."""
        out = {"decision_ms": self.decision_ms, "bank_ms": self.bank_ms}
        if self.resume_grace_ms != ClockConfig.resume_grace_ms:
            out["resume_grace_ms"] = self.resume_grace_ms
        if self.connect_wait_ms != ClockConfig.connect_wait_ms:
            out["connect_wait_ms"] = self.connect_wait_ms
        return out


@dataclasses.dataclass(frozen=True)
class ArenaConfig:
    """A validated arena configuration."""

    name: str
    seed: int
    sets_per_pairing: int
    workers: int
    players: int
    rules_preset: str
    rules_options: Mapping[str, Any]
    ruleset: Ruleset
    hands: int
    clock: ClockConfig
    bots: tuple[BotConfig, ...]
    keep_records: bool = True
    executor: str = "auto"
    sandbox: SandboxConfig = dataclasses.field(default_factory=SandboxConfig)
    """How command bots are confined; like ``workers``, never part of the config hash."""
    run_dir: str = ""
    """The arena's output folder (set by the runner, not the config file): bot logs go to its
    ``logs`` folder, and sandboxed bots never see it. Not hashed."""
    ray_address: str | None = None
    """Ray cluster for ``executor = "ray"`` (``HOST:PORT``, ``auto``, ``ray://HOST:PORT`` or
    ``local``); None: ``RAY_ADDRESS`` or a local cluster. Never part of the config hash."""
    listen: str = ""
    """Address of the published match server remote bots connect to (``HOST:PORT``); empty:
    loopback only. Never part of the config hash (nor are the TLS files)."""
    tls_cert: str | None = None
    tls_key: str | None = None
    bot_processes: str = "per_match"
    """``per_match`` (default): fresh command-bot processes for every match, so nothing a bot remembers in one
    seating of a duplicate set reaches the next; ``per_run``: processes play many matches (faster,
    for trusted bots)."""
    allow_in_match_duplicate: bool = False

    @property
    def bot_names(self) -> tuple[str, ...]:
        """Bot names in configuration order."""
        return tuple(b.name for b in self.bots)

    def bot(self, name: str) -> BotConfig:
        """The bot called *name*.

        :raises KeyError: for an unknown name.
        """
        for b in self.bots:
            if b.name == name:
                return b
        raise KeyError(name)

    def canonical(self) -> dict[str, Any]:
        """Everything that fixes the schedule and the results, JSON-ready.

        ``workers`` is left out: it changes how fast the arena runs, never what it plays.
        """
        return {
            "format": CONFIG_FORMAT,
            "arena": {"name": self.name, "seed": self.seed, "sets_per_pairing": self.sets_per_pairing},
            "game": {
                "players": self.players,
                "rules": self.rules_preset,
                "hands": self.hands,
                "ruleset": self.ruleset.to_dict(),
            },
            "clock": self.clock.canonical(),
            "bots": [b.canonical() for b in self.bots],
        }

    def canonical_json(self) -> str:
        """:meth:`canonical` as compact JSON with sorted keys (what the journal stores)."""
        return json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))

    def config_hash(self) -> str:
        """SHA-256 of :meth:`canonical_json`."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def load_config(path: str | Path) -> ArenaConfig:
    """Reads and validates an arena TOML file.

    :raises ConfigError: for an unreadable file, bad TOML or an invalid setting.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read arena config {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from None
    try:
        return parse_config(data, base_dir=path.parent)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def _table(data: Mapping[str, Any], key: str, allowed: set[str]) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"[{key}] must be a table")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) in [{key}]: {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")
    return value


def _int(table: Mapping[str, Any], section: str, key: str, default: int, lo: int, hi: int | None = None) -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < lo or (hi is not None and value > hi):
        bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise ConfigError(f"{section}.{key} must be an integer {bound}, got {value!r}")
    return value


def parse_config(data: Mapping[str, Any], base_dir: Path | None = None) -> ArenaConfig:
    """Validates parsed TOML (a dict) into an :class:`ArenaConfig`.

    Commands are stored as written (they run where ``gaigel arena run`` was started); a
    relative ``token_file`` or ``build`` folder is read from *base_dir* (the config's folder;
    default: the current one).

    :raises ConfigError: naming the first invalid key.
    """
    unknown = sorted(set(data) - {"arena", "game", "clock", "bots", "sandbox"})
    if unknown:
        raise ConfigError(
            f"unknown section(s): {', '.join(unknown)} (allowed: [arena], [game], [clock], [sandbox], [[bots]])"
        )
    arena = _table(
        data,
        "arena",
        {
            "name",
            "seed",
            "sets_per_pairing",
            "workers",
            "keep_records",
            "executor",
            "ray_address",
            *_SUBMITTED_BOT_KEYS,
        },
    )
    game = _table(data, "game", {"players", "rules", "hands", "options"})
    clock = _table(data, "clock", {"decision_ms", "bank_ms", "resume_grace_ms", "connect_wait_ms"})

    name = arena.get("name", "arena")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"arena.name must be a non-empty string, got {name!r}")
    seed = _int(arena, "arena", "seed", 0, 0, 2**63 - 1)
    sets = _int(arena, "arena", "sets_per_pairing", 1, 1, 1_000_000)
    workers = _int(arena, "arena", "workers", os.cpu_count() or 1, 1, 1024)
    keep_records = arena.get("keep_records", True)
    if not isinstance(keep_records, bool):
        raise ConfigError(f"arena.keep_records must be true or false, got {keep_records!r}")
    executor = arena.get("executor", "auto")
    if executor not in EXECUTORS:
        raise ConfigError(f"arena.executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    ray_address = arena.get("ray_address")
    if ray_address is not None and (not isinstance(ray_address, str) or not ray_address.strip()):
        raise ConfigError(
            f'arena.ray_address must be a Ray address such as "HOST:6379" or "local", got {ray_address!r}'
        )

    players = game.get("players", 2)
    if players not in STANDARD_PLAYER_COUNTS or isinstance(players, bool):  # the 8-player variant is not scheduled
        raise ConfigError(f"game.players must be {player_counts_text(STANDARD_PLAYER_COUNTS)}, got {players!r}")
    rules = game.get("rules", "default")
    if rules not in PRESETS:
        raise ConfigError(f"game.rules must be one of {', '.join(PRESETS)}, got {rules!r}")
    hands = _int(game, "game", "hands", 8, 1, 10_000)
    options = game.get("options", {})
    if not isinstance(options, Mapping):
        raise ConfigError("game.options must be a table of ruleset options")
    try:
        ruleset = Ruleset.from_dict(options, base=preset(rules, players))
    except RulesetError as e:
        raise ConfigError(f"game.options: {e}") from None
    if ruleset.players != players:
        raise ConfigError("game.options must not change players; set game.players instead")
    if ruleset.match_format == "duplicate" and hands % ruleset.num_sides:
        raise ConfigError(f"game.hands must be a multiple of {ruleset.num_sides} with match.format = duplicate")

    clock_cfg = ClockConfig(
        decision_ms=_int(clock, "clock", "decision_ms", 1000, 1),
        bank_ms=_int(clock, "clock", "bank_ms", 10_000, 0),
        resume_grace_ms=_int(clock, "clock", "resume_grace_ms", 20_000, 0),
        connect_wait_ms=_int(clock, "clock", "connect_wait_ms", 60_000, 0),
    )
    sandbox_table = _table(
        data,
        "sandbox",
        {f.name for f in dataclasses.fields(SandboxConfig)},
    )
    try:
        sandbox = parse_sandbox(sandbox_table)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    bots = _parse_bots(data.get("bots", []), base_dir)
    submitted = _parse_submitted_bot_settings(arena, bots)
    if ruleset.match_format == "duplicate" and not submitted["allow_in_match_duplicate"]:
        others = [b.name for b in bots if b.kind != "house"]
        if others:
            raise ConfigError(
                f'match.format = "duplicate" replays each deal inside the match, so bot(s) {", ".join(others)} '
                "could remember their first seating's cards and know the opponents' hands in the second; "
                "set [arena] allow_in_match_duplicate = true to accept that (see docs/operator-guide.md)"
            )
    if len(bots) < ruleset.num_sides:
        raise ConfigError(
            f"{players} players with {ruleset.num_sides} sides need at least {ruleset.num_sides} bots, got {len(bots)}"
        )
    try:
        check_unambiguous_ids([b.name for b in bots], ruleset.num_sides)
    except ValueError as e:
        raise ConfigError(f"bots: {e}") from None
    return ArenaConfig(
        name=name,
        seed=seed,
        sets_per_pairing=sets,
        workers=workers,
        players=players,
        rules_preset=rules,
        rules_options=dict(options),
        ruleset=ruleset,
        hands=hands,
        clock=clock_cfg,
        bots=bots,
        keep_records=keep_records,
        executor=executor,
        ray_address=ray_address,
        **submitted,
        sandbox=sandbox,
    )


EXECUTORS = ("auto", "local", "inline", "grpc", "ray")
"""How matches are played: auto (local for house bots, else grpc), local worker processes,
inline in the runner process, grpc through a local match server with bot processes, or
ray: Ray tasks on a Ray cluster (house bots only; never chosen by auto)."""


_SUBMITTED_BOT_KEYS = ("listen", "tls_cert", "tls_key", "bot_processes", "allow_in_match_duplicate")
BOT_PROCESSES = ("per_run", "per_match")


def _parse_submitted_bot_settings(arena: Mapping[str, Any], bots: tuple[BotConfig, ...]) -> dict[str, Any]:
    """The [arena] keys for remote and untrusted bots: the published address, TLS and process isolation."""
    listen = arena.get("listen", "")
    if not isinstance(listen, str) or (listen and ":" not in listen):
        raise ConfigError(f'arena.listen must be "HOST:PORT" such as "0.0.0.0:50051", got {listen!r}')
    remote = [b.name for b in bots if b.kind == "remote"]
    if remote and not listen:
        raise ConfigError(
            f'remote bots ({", ".join(remote)}) need a published server: set [arena] listen = "0.0.0.0:50051"'
        )
    tls: dict[str, str | None] = {}
    for key in ("tls_cert", "tls_key"):
        value = arena.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigError(f"arena.{key} must be a file path, got {value!r}")
        tls[key] = value
    if (tls["tls_cert"] is None) != (tls["tls_key"] is None):
        raise ConfigError("arena.tls_cert and arena.tls_key go together: set both or neither")
    processes = arena.get("bot_processes", "per_match")
    if processes not in BOT_PROCESSES:
        raise ConfigError(f"arena.bot_processes must be one of {', '.join(BOT_PROCESSES)}, got {processes!r}")
    allow = arena.get("allow_in_match_duplicate", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"arena.allow_in_match_duplicate must be true or false, got {allow!r}")
    return {"listen": listen, **tls, "bot_processes": processes, "allow_in_match_duplicate": allow}


def _remote_token(entry: Mapping[str, Any], where: str, base_dir: Path | None) -> str:
    """A remote bot's token from exactly one of token, token_env and token_file (never echoed in errors)."""
    given = [k for k in ("token", "token_env", "token_file") if k in entry]
    if len(given) != 1:
        raise ConfigError(f'{where}: a remote bot needs one of token_env = "VAR", token_file = "PATH" or token = "..."')
    key = given[0]
    value = entry[key]
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}.{key} must be a non-empty string")
    if key == "token_env":
        token = os.environ.get(value, "")
        if not token:
            raise ConfigError(f"{where}: environment variable {value} (token_env) is not set")
    elif key == "token_file":
        path = (base_dir or Path()) / value
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{where}: cannot read token_file {path}: {getattr(e, 'strerror', None) or e}") from None
    else:
        token = value
    if len(token) < 8:
        raise ConfigError(f"{where}: the token ({key}) must have at least 8 characters")
    return token


def _sandbox_keys(entry: Mapping[str, Any], where: str, base_dir: Path | None) -> dict[str, Any]:
    """The bot's ``sandbox``, ``image``, ``build``, ``folder``, ``limits`` and ``pass_env`` keys,
    checked; ``build`` and ``folder`` made absolute."""
    out: dict[str, Any] = {}
    if "limits" in entry:
        limits = entry["limits"]
        if not isinstance(limits, Mapping):
            raise ConfigError(f"{where}: limits must be a table, e.g. limits = {{ memory_mb = 1024 }}")
        unknown = sorted(set(limits) - set(LIMIT_KEYS))
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) in limits: {', '.join(unknown)} (allowed: {', '.join(LIMIT_KEYS)})"
            )
        try:
            out["limits"] = tuple(sorted(parse_limits(limits).items()))
        except ValueError as e:
            raise ConfigError(f"{where}: {str(e).replace('sandbox.', 'limits.')}") from None
    if "pass_env" in entry:
        names = entry["pass_env"]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"{where}: pass_env must be a list of variable names, got {names!r}")
        out["pass_env"] = tuple(names)
    if "folder" in entry:
        value = entry["folder"]
        folder = Path(value) if isinstance(value, str) and value.strip() else None
        if folder is not None and not folder.is_absolute() and base_dir is not None:
            folder = base_dir / folder
        if folder is None or not folder.is_dir():
            raise ConfigError(f"{where}: folder = {value!r} is not a folder")
        out["folder"] = str(folder.resolve())
    for key in ("sandbox", "image", "build"):
        if key in entry:
            value = entry[key]
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{where}: {key} must be a non-empty string, got {value!r}")
            out[key] = value
    if out.get("sandbox", "auto") not in SANDBOXES:
        raise ConfigError(f"{where}: sandbox must be one of {', '.join(SANDBOXES)}, got {out['sandbox']!r}")
    if "image" in out and "build" in out:
        raise ConfigError(f"{where}: give image or build, not both")
    if "build" in out:
        folder = Path(out["build"])
        if not folder.is_absolute() and base_dir is not None:
            folder = base_dir / folder
        if not (folder / "Dockerfile").is_file():
            raise ConfigError(f"{where}: build = {out['build']!r} has no Dockerfile ({folder / 'Dockerfile'})")
        out["build"] = str(folder)
    return out


def _parse_bots(raw: Any, base_dir: Path | None = None) -> tuple[BotConfig, ...]:
    from gaigel.bots import HOUSE_BOTS

    if not isinstance(raw, list):
        raise ConfigError("bots must be an array of tables: [[bots]]")
    bots: list[BotConfig] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        where = f"bots[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where} must be a table")
        allowed = {
            "name",
            "house",
            "command",
            "remote",
            "token",
            "token_env",
            "token_file",
            "sandbox",
            "image",
            "build",
            "folder",
            "limits",
            "pass_env",
        }
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise ConfigError(
                f"unknown key(s) in {where}: {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
            )
        name = entry.get("name")
        if not isinstance(name, str):
            raise ConfigError(f"{where}.name must be a string, got {name!r}")
        try:  # the server's rule: every arena bot is registered there by this name
            check_bot_name(name)
        except ValueError as e:
            raise ConfigError(f"{where}.name: {e}") from None
        if name in seen:
            raise ConfigError(f"bot name {name!r} is used twice")
        seen.add(name)
        where = f"bot {name!r}"
        sandboxing = _sandbox_keys(entry, where, base_dir)
        kinds = [k for k in ("house", "command", "remote") if k in entry]
        if not kinds and ("image" in sandboxing or "build" in sandboxing):
            kinds = ["command"]  # the image's own CMD
        if sandboxing and kinds != ["command"]:
            raise ConfigError(f"{where}: {', '.join(sorted(sandboxing))} only for command bots")
        if len(kinds) != 1:
            raise ConfigError(f'{where} needs exactly one of house = "...", command = [...] or remote = true')
        if any(k in entry for k in ("token", "token_env", "token_file")) and kinds != ["remote"]:
            raise ConfigError(f"{where}: token, token_env and token_file are only for remote bots")
        if kinds == ["house"]:
            house = entry["house"]
            if house not in HOUSE_BOTS:
                raise ConfigError(f"{where}: unknown house bot {house!r} (house bots: {', '.join(sorted(HOUSE_BOTS))})")
            bots.append(BotConfig(name=name, kind="house", house=house))
        elif kinds == ["command"]:
            command = entry.get("command", [])
            if not isinstance(command, list) or not all(isinstance(c, str) and c for c in command):
                raise ConfigError(f'{where}: command must be a non-empty list of strings, e.g. ["python", "bot.py"]')
            if not command and "image" not in sandboxing and "build" not in sandboxing:
                raise ConfigError(f'{where}: command must be a non-empty list of strings, e.g. ["python", "bot.py"]')
            bots.append(BotConfig(name=name, kind="command", command=tuple(command), **sandboxing))
        else:
            if entry["remote"] is not True:
                raise ConfigError(f"{where}: remote must be true (or leave it out)")
            bots.append(BotConfig(name=name, kind="remote", token=_remote_token(entry, where, base_dir)))
    return tuple(bots)

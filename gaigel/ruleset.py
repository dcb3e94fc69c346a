"""The ruleset: every variant option of RULES.md §14 as a field of one frozen value.

Option names in files and records are the dotted names of RULES.md §14
(``meld.timing``); the fields use underscores (``meld_timing``). Two presets exist:
``default`` (the RULES.md defaults) and ``parlett`` (seed 000 / RU-ENC and WK rules).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from gaigel._pickling import reduce_through_constructor
from gaigel.deal import PLAYER_COUNTS, player_counts_text


class Opening(enum.IntEnum):
    """Trick-1 declarations of the forehand (RULES.md §4)."""

    ANDERE_ALTE = 0
    GE_ELFEN = 1
    HOEHER_HAT = 2
    AUF_DISSLE = 3
    TRUMPF_HOEHER = 4


OPENING_NAMES = {
    Opening.ANDERE_ALTE: "Andere Alte",
    Opening.GE_ELFEN: "Ge-Elfen",
    Opening.HOEHER_HAT: "Hoeher hat",
    Opening.AUF_DISSLE: "Auf Dissle",
    Opening.TRUMPF_HOEHER: "Trumpf hoeher",
}

_CHOICES: dict[str, tuple[str, ...]] = {
    "six_player_teams": ("2x3", "3x2"),
    "deal_packets": ("3-T-2", "5-T"),
    "opening_all_trump_fallback": ("TRUMPF_HOEHER", "REDEAL"),
    "dissle_first_trick": ("no_trump_open", "normal"),
    "meld_timing": ("own_turn", "lead_only", "trick_winner", "any_time"),
    "rob_timing": ("own_turn", "lead_only", "any_time"),
    "strict_mode": ("head_trick", "parlett_literal", "follow_only"),
    "aus_mode": ("automatic", "explicit"),
    "gigackel_criterion": ("no_trick", "no_points"),
    "tie_break": ("void", "last_trick"),
    "three_player_losers": ("lowest", "all_non_winners"),
    "match_format": ("fixed_hands", "duplicate", "putzen"),
    "signals": ("off",),
}
_RANGES: dict[str, tuple[int, int]] = {
    "players": (2, 8),
    "dissle_min_sevens": (0, 4),
    "rob_second_seven_points": (0, 100),
    "target": (1, 1000),
    "last_trick_bonus": (0, 100),
    "meld_single_plain": (0, 1000),
    "meld_single_trump": (0, 1000),
    "meld_double_plain": (0, 1000),
    "meld_double_trump": (0, 1000),
    "putzen_max_hands": (0, 1000),
}


class RulesetError(ValueError):
    """An unknown option, a value out of range, or options that contradict each other."""


@dataclasses.dataclass(frozen=True)
class Ruleset:
    """All rule options of one table. Frozen, hashable, validated on construction."""

    players: int = 4
    six_player_teams: str = "2x3"
    deal_packets: str = "3-T-2"
    opening_special_first_trick: bool = True
    opening_enabled: frozenset[Opening] = frozenset(
        {Opening.ANDERE_ALTE, Opening.GE_ELFEN, Opening.HOEHER_HAT, Opening.AUF_DISSLE}
    )
    opening_trump_lead_forbidden: bool = True
    opening_ge_elfen_trump_ace: bool = False
    opening_followers_no_trump: bool = False
    opening_ace_compulsory: bool = False
    opening_all_trump_fallback: str = "TRUMPF_HOEHER"
    dissle_min_sevens: int = 4
    dissle_first_trick: str = "no_trump_open"
    dissle_fail_on_talon_exhausted: bool = True
    five_sevens_dealt_wins: bool = True
    five_sevens_anytime: bool = False
    meld_timing: str = "own_turn"
    meld_partner_privilege: bool = False
    meld_requires_side_trick: bool = True
    meld_after_talon: bool = True
    meld_single_plain: int = 20
    meld_single_trump: int = 40
    meld_double_plain: int = 40
    meld_double_trump: int = 80
    meld_once_per_suit_per_player: bool = True
    rob_enabled: bool = True
    rob_timing: str = "own_turn"
    rob_requires_side_trick: bool = True
    rob_reservation: bool = False
    rob_second_seven_points: int = 0
    strict_mode: str = "head_trick"
    strict_must_undertrump: bool = True
    target: int = 101
    last_trick_bonus: int = 0
    aus_mode: str = "automatic"
    expose_scores: bool = True
    gigackel_criterion: str = "no_trick"
    tie_break: str = "void"
    three_player_losers: str = "lowest"
    match_format: str = "fixed_hands"
    putzen_max_hands: int = 12
    signals: str = "off"

    def __reduce__(self) -> tuple[type[Any], tuple[object, ...]]:
        return reduce_through_constructor(self)  # (compiled frozen dataclasses need it)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            name = option_name(f.name)
            if f.type == "bool" and not isinstance(value, bool):
                raise RulesetError(f"ruleset option {name} must be true or false, got {value!r}")
            if f.name in _CHOICES and value not in _CHOICES[f.name]:
                raise RulesetError(f"ruleset option {name} must be one of {', '.join(_CHOICES[f.name])}; got {value!r}")
            if f.name in _RANGES:
                lo, hi = _RANGES[f.name]
                if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                    raise RulesetError(f"ruleset option {name} must be an integer in {lo}..{hi}, got {value!r}")
        if self.players not in PLAYER_COUNTS:
            raise RulesetError(
                f"players must be {player_counts_text()} (48 cards must split into 5-card hands and whole draw rounds), "
                f"got {self.players}"
            )
        if not isinstance(self.opening_enabled, frozenset) or not all(
            isinstance(o, Opening) for o in self.opening_enabled
        ):
            raise RulesetError(
                "ruleset option opening.enabled must be a set of ANDERE_ALTE, GE_ELFEN, HOEHER_HAT, AUF_DISSLE"
            )
        if Opening.TRUMPF_HOEHER in self.opening_enabled:
            raise RulesetError(
                "opening.enabled cannot name TRUMPF_HOEHER: it is the fallback (opening.all_trump_fallback)"
            )
        if self.meld_partner_privilege and self.meld_timing != "trick_winner":
            raise RulesetError("meld.partner_privilege needs meld.timing = trick_winner")
        if self.match_format == "putzen" and self.putzen_max_hands < 1:
            raise RulesetError("match.format = putzen needs putzen.max_hands >= 1")

    # --- derived values -------------------------------------------------------------

    @property
    def num_sides(self) -> int:
        """Number of sides: singles at 2, 3 and 8 players, teams at 4 and 6."""
        if self.players == 4:
            return 2
        if self.players == 6:
            return 2 if self.six_player_teams == "2x3" else 3
        return self.players

    def side_of(self, seat: int) -> int:
        """The side of *seat*: partners sit alternately (4: 0-2 / 1-3; 6 at 2x3: 0-2-4 / 1-3-5)."""
        return seat % self.num_sides

    def seats_of(self, side: int) -> tuple[int, ...]:
        """The seats of *side* in playing order."""
        return tuple(range(side, self.players, self.num_sides))

    @property
    def tricks_per_hand(self) -> int:
        """48 / players."""
        return 48 // self.players

    def replace(self, **changes: Any) -> Ruleset:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # --- (de)serialisation ----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """All options by their dotted names, JSON-ready."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, frozenset):
                value = sorted(o.name for o in value)
            out[option_name(f.name)] = value
        return out

    @classmethod
    def from_dict(cls, options: Mapping[str, Any], base: Ruleset | None = None) -> Ruleset:
        """Builds a ruleset from dotted (``meld.timing``) or nested (``{"meld": {"timing": ...}}``) options.

        The key ``preset`` selects the starting point; other keys override it.

        :raises RulesetError: for an unknown option or a bad value.
        """
        flat = _flatten(options)
        start = base or Ruleset()
        if "preset" in flat:
            start = preset(str(flat.pop("preset")), players=start.players)
        changes: dict[str, Any] = {}
        known = {f.name for f in dataclasses.fields(cls)}
        for key, value in flat.items():
            field = key.replace(".", "_").replace("-", "_")
            if field not in known:
                raise RulesetError(
                    f"unknown ruleset option {key!r} (known: {', '.join(sorted(option_name(k) for k in known))})"
                )
            if field == "opening_enabled":
                value = _parse_openings(value)
            changes[field] = value
        return dataclasses.replace(start, **changes)


def option_name(field: str) -> str:
    """The dotted option name of a field (``meld_timing`` -> ``meld.timing``)."""
    for prefix in ("opening_", "dissle_", "meld_", "rob_", "strict_", "match_", "putzen_"):
        if field.startswith(prefix):
            return prefix[:-1] + "." + field[len(prefix) :]
    return field


def _flatten(options: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise RulesetError(f"ruleset option names must be strings, got {key!r}")
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _parse_openings(value: Any) -> frozenset[Opening]:
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        raise RulesetError("ruleset option opening.enabled must be a list of opening names")
    out = set()
    for item in value:
        try:
            out.add(item if isinstance(item, Opening) else Opening[str(item).upper()])
        except KeyError:
            raise RulesetError(
                f"unknown opening {item!r} in opening.enabled (known: ANDERE_ALTE, GE_ELFEN, HOEHER_HAT, AUF_DISSLE)"
            ) from None
    return frozenset(out)


PRESETS = ("default", "parlett")


def preset(name: str, players: int = 4) -> Ruleset:
    """The named preset for *players* players.

    ``default``: the RULES.md defaults. ``parlett``: seed 000 (RU-ENC) with WK, as RULES.md
    §14 lists it: ordinary first trick, trick-winner melds with partner privilege, robbing
    at any time without a trick and 10 for the second Seven, literal strict play, five
    Sevens win at any time, explicit Aus with knock semantics, Gigackel on no points.

    :raises RulesetError: for an unknown preset name.
    """
    if name == "default":
        return Ruleset(players=players)
    if name == "parlett":
        return Ruleset(
            players=players,
            opening_special_first_trick=False,
            meld_timing="trick_winner",
            meld_partner_privilege=True,
            rob_timing="any_time",
            rob_requires_side_trick=False,
            rob_second_seven_points=10,
            strict_mode="parlett_literal",
            five_sevens_anytime=True,
            last_trick_bonus=0,
            aus_mode="explicit",
            expose_scores=False,
            gigackel_criterion="no_points",
        )
    raise RulesetError(f"unknown ruleset preset {name!r} (known: {', '.join(PRESETS)})")

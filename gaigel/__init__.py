"""Gaigel: the Swabian card game as a rules engine, with the match driver, house bots and CLI built on it.

Pure (no I/O, no clock, no randomness of its own; the same inputs give the same results):
the rules and everything under them, :mod:`~gaigel.cards`, :mod:`~gaigel.deal` (seeded
deals), :mod:`~gaigel.ruleset`, :mod:`~gaigel.actions`, :mod:`~gaigel.phase`,
:mod:`~gaigel.events`, :mod:`~gaigel.state`, :mod:`~gaigel.observation`,
:mod:`~gaigel.explain`, :mod:`~gaigel.determinize` (draws from the ``random.Random`` it is
given) and :mod:`~gaigel.replay`; in :mod:`~gaigel.match` the spec, score, hand setup and
:class:`~gaigel.match.MatchDriver`; in :mod:`~gaigel.record` the
:class:`~gaigel.record.RecordWriter` and record validation.

Not pure, at the edges: :func:`gaigel.match.play_match` times each in-process decision
with the clock, :func:`gaigel.record.dump_record` and :func:`~gaigel.record.load_record`
write and read files, the search bot of :mod:`gaigel.bots` stops at a wall-clock budget,
and :mod:`gaigel.cli` is the command line (arguments, printing, the clock for
``selfplay``). The whole package is stdlib only: no grpc, no asyncio, no sockets.

Start with :func:`gaigel.deal.deal` and :class:`gaigel.state.GaigelState`; the server,
the arena and Python bots all build on these.
"""

from gaigel import _build

_build.choose()  # the compiled engine modules, or their sources (GAIGEL_PURE, a stale build)

from gaigel._build import engine_build  # noqa: E402
from gaigel.actions import ActionId, action_label, parse_action  # noqa: E402
from gaigel.cards import CardId, card_code, parse_card  # noqa: E402
from gaigel.deal import Deal, deal  # noqa: E402
from gaigel.phase import Phase  # noqa: E402
from gaigel.ruleset import Opening, Ruleset, RulesetError, preset  # noqa: E402
from gaigel.state import ENGINE_VERSION, GaigelState, HandOutcome, IllegalActionError, Termination  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "ENGINE_VERSION",
    "ActionId",
    "CardId",
    "Deal",
    "GaigelState",
    "HandOutcome",
    "IllegalActionError",
    "Opening",
    "Phase",
    "Ruleset",
    "RulesetError",
    "Termination",
    "action_label",
    "card_code",
    "deal",
    "engine_build",
    "parse_action",
    "parse_card",
    "preset",
]

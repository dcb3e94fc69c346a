"""Prometheus metrics of the server (names ``gaigel_*``, units in names, bounded labels).

Labels are never a match id, seed or token. Every labelled series that is known to exist
is created up front so it is exported as zero. The per-bot series are capped (``max_bot_series``):
bots beyond the cap share the series ``bot="_other"``, so thousands of registered bots do not
make a scrape megabytes long.
"""

from __future__ import annotations

import itertools
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from gaigel.match import MATCH_TERMINATIONS, FaultReason

DECISION_OUTCOMES = ("answered", "timeout_fallback", "house")
FAULT_REASONS = tuple(r.value for r in FaultReason)
TERMINATIONS = MATCH_TERMINATIONS
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OTHER_BOTS = "_other"
"""The ``bot`` label value shared by the bots beyond the cap (and by a bot of that very name)."""
DEFAULT_MAX_BOT_SERIES = 200
"""Bots with their own series by default: one histogram is 17 lines, about 1.3 KB, per bot."""
LAG_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class LoopCounter:
    """One series of a counter that only the server's event loop increments (see :class:`_LoopFamily`)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class LoopHistogram:
    """One series of a histogram that only the server's event loop observes: a bisect and two
    additions (see :class:`_LoopFamily`)."""

    __slots__ = ("_bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is +Inf
        self.total = 0.0

    def observe(self, amount: float) -> None:
        self.counts[bisect_left(self._bounds, amount)] += 1  # the first bucket whose bound >= amount
        self.total += amount


S = TypeVar("S", LoopCounter, LoopHistogram)


class _LoopFamily(Generic[S]):
    """A labelled metric of the per-decision path, exported through the registry as a collector.

    prometheus_client's Counter and Histogram take a lock per update (a histogram one for its sum
    and one for its bucket, after a walk over the bounds): about 1 us each, four of them per
    decision, 5 % of a busy server's loop (py-spy, 64 compact streams). These series are written
    by one thread, the server's event loop, so an update needs no lock; a scrape (another thread)
    copies each series, so a histogram's buckets and count always agree (its sum may lag one
    observation behind). Series are added and removed under a lock, off the hot path."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...], registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self._series: dict[tuple[str, ...], S] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def labels(self, *values: str) -> S:
        """The series of these label values, created (as zero) if new."""
        series = self._series.get(values)
        if series is None:
            with self._lock:
                series = self._series.setdefault(values, self._new())
        return series

    def remove(self, *values: str) -> None:
        with self._lock:
            self._series.pop(values, None)

    def describe(self) -> list[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        with self._lock:
            series = list(self._series.items())
        for values, one in series:
            self._add(family, list(values), one)
        yield family

    def _new(self) -> S:
        raise NotImplementedError

    def _family(self) -> Metric:
        raise NotImplementedError

    def _add(self, family: Metric, values: list[str], series: S) -> None:
        raise NotImplementedError


class LoopCounters(_LoopFamily[LoopCounter]):
    def _new(self) -> LoopCounter:
        return LoopCounter()

    def _family(self) -> Metric:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, values: list[str], series: LoopCounter) -> None:
        assert isinstance(family, CounterMetricFamily)
        family.add_metric(values, series.value)


class LoopHistograms(_LoopFamily[LoopHistogram]):
    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...],
        buckets: tuple[float, ...],
        registry: CollectorRegistry,
    ) -> None:
        self.buckets = buckets
        # The bound labels as prometheus_client writes them ("0.001", "10.0", "+Inf").
        self._les = [floatToGoString(b) for b in (*buckets, float("inf"))]  # type: ignore[no-untyped-call]
        super().__init__(name, documentation, labelnames, registry)

    def _new(self) -> LoopHistogram:
        return LoopHistogram(self.buckets)

    def _family(self) -> Metric:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def _add(self, family: Metric, values: list[str], series: LoopHistogram) -> None:
        assert isinstance(family, HistogramMetricFamily)
        counts, total = list(series.counts), series.total
        family.add_metric(values, list(zip(self._les, itertools.accumulate(counts), strict=True)), total)


class ServerMetrics:
    """The metric objects of one server, in *registry* (a private one in tests)."""

    def __init__(self, registry: CollectorRegistry, max_bot_series: int = DEFAULT_MAX_BOT_SERIES) -> None:
        if max_bot_series < 0:
            raise ValueError(f"max_bot_series must be 0 or more, got {max_bot_series}")
        self.registry = registry
        self.max_bot_series = max_bot_series
        self._bot_series: dict[str, LoopHistogram] = {}  # bot -> its own decision_seconds series (at most the cap)
        self.decisions = LoopCounters(
            "gaigel_decisions_total", "Decisions completed, by outcome.", ("outcome",), registry
        )
        self.decision_seconds = LoopHistograms(
            "gaigel_decision_duration_seconds",
            "Time a bot took to answer a decision (server lag excluded), by bot name.",
            ("bot",),
            LATENCY_BUCKETS,
            registry,
        )
        self.faults = Counter(
            "gaigel_faults_total", "Faults charged to seats, by reason code.", ["reason"], registry=registry
        )
        self.server_lag = LoopHistograms(
            "gaigel_server_lag_seconds",
            "Time the server itself was late sending a request (event loop, messages ahead), not charged to bots.",
            (),
            LAG_BUCKETS,
            registry,
        ).labels()
        self.active_sessions = Gauge("gaigel_active_sessions", "Bot sessions with an open stream.", registry=registry)
        self.active_matches = Gauge("gaigel_active_matches", "Matches being played.", registry=registry)
        self.matches = Counter(
            "gaigel_matches_total", "Matches ended, by termination.", ["termination"], registry=registry
        )
        self.sessions = Counter(
            "gaigel_sessions_total", "Play streams opened, by result.", ["result"], registry=registry
        )
        self.admin_refused = Counter(
            "gaigel_admin_refused_total",
            "MatchService calls refused for a missing or wrong admin token (token guessing shows here).",
            registry=registry,
        )
        self.slow_readers = Counter(
            "gaigel_slow_readers_total",
            "Bot streams ended with SLOW_READER: they did not read what the server had for them.",
            registry=registry,
        )
        self.pending_evicted = Counter(
            "gaigel_pending_streams_evicted_total",
            "Streams ended with SERVER_BUSY before their first message to make room for new ones.",
            registry=registry,
        )
        self.play_refused = Counter(
            "gaigel_play_refused_total",
            "Play streams ended before their session began, by gRPC status code (logged rate-limited).",
            ["code"],
            registry=registry,
        )
        self.connections_refused = Counter(
            "gaigel_connections_refused_total",
            "TCP connections the front door refused or ended: global_cap, peer_cap, connect_rate, churn, "
            "preface_timeout, "
            "rapid_reset (GOAWAY) or ended (a token past its session limit, GOAWAY); with --processes also "
            "no_first_call (GOAWAY) and unreadable_first_call.",
            ["reason"],
            registry=registry,
        )
        self.connections_open = Gauge(
            "gaigel_connections_open", "TCP connections open at the front door.", registry=registry
        )
        self.event_loop_tasks = Gauge(
            "gaigel_event_loop_tasks",
            "asyncio tasks alive on the server's event loop (steady under load; growth is a leak).",
            registry=registry,
        )
        if registry is not REGISTRY:  # the default registry has its own process collector
            # process_resident_memory_bytes, process_open_fds, process_cpu_seconds_total, ...
            ProcessCollector(registry=registry)
        # The per-decision series, looked up once.
        self.decided = {o: self.decisions.labels(o) for o in DECISION_OUTCOMES}
        for r in FAULT_REASONS:
            self.faults.labels(r)
        for t in TERMINATIONS:
            self.matches.labels(t)
        for r in ("accepted", "rejected"):
            self.sessions.labels(r)
        for r in (
            "global_cap",
            "peer_cap",
            "connect_rate",
            "churn",
            "preface_timeout",
            "rapid_reset",
            "ended",
            "no_first_call",
            "unreadable_first_call",
        ):
            self.connections_refused.labels(r)

    def bot(self, name: str) -> LoopHistogram:
        """The decision-latency series of *name* (a registered bot), created as zero if new.

        The one place that labels by bot: the first ``max_bot_series`` bots get their own series,
        the others share ``bot="_other"``. A bot in ``_other`` gets its own series at a later
        call (registration, or a match it is seated in) once :meth:`forget_bot` has freed a slot.
        """
        child = self._bot_series.get(name)
        if child is not None:
            return child
        if name != OTHER_BOTS and len(self._bot_series) < self.max_bot_series:
            child = self._bot_series[name] = self.decision_seconds.labels(name)
            return child
        return self.decision_seconds.labels(OTHER_BOTS)

    def forget_bot(self, name: str) -> None:
        """Removes the per-bot series of *name* (an unregistered bot), freeing its slot."""
        if self._bot_series.pop(name, None) is not None:
            self.decision_seconds.remove(name)


__all__ = ["DEFAULT_MAX_BOT_SERIES", "OTHER_BOTS", "LoopCounter", "LoopHistogram", "ServerMetrics"]


PROCESS_LABEL = "process"
"""The label of every series in ``gaigel serve --processes N``'s one scrape: "front" or the
table process's index."""
_CREATED_KINDS = ("counter", "histogram", "summary")


class ProcessesCollector:
    """The metrics of ``gaigel serve --processes N`` as one scrape target: the front's own
    registry and each table process's exposition text, every series labelled ``process``
    ("front", "0", "1", ...), one family per name; ``gaigel_table_process_up`` says which table
    processes answered (a process that did not is missing from the scrape, not stale in it).

    *fetch* gives (process label, exposition text or None) for each table process; it runs in
    the scrape's thread. ``*_created`` series are left out: the text parser makes them families
    of their own, which would clash with the front's (Prometheus computes rates without them).
    """

    def __init__(self, front: CollectorRegistry, fetch: Callable[[], list[tuple[str, str | None]]]) -> None:
        self._front = front
        self._fetch = fetch

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        up = GaugeMetricFamily(
            "gaigel_table_process_up",
            "1 when the table process answered this scrape's metrics call, else 0.",
            labels=[PROCESS_LABEL],
        )
        _merge(families, "front", self._front.collect())
        for label, text in self._fetch():
            up.add_metric([label], 0.0 if text is None else 1.0)
            if text is not None:
                parsed = list(text_string_to_metric_families(text))
                created = {f.name + "_created" for f in parsed if f.type in _CREATED_KINDS}
                _merge(families, label, (f for f in parsed if f.name not in created))
        yield from families.values()
        yield up


def _merge(families: dict[str, Metric], label: str, source: Iterable[Metric]) -> None:
    for family in source:
        merged = families.get(family.name)
        if merged is None:
            merged = families[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
        elif merged.type != family.type:
            continue  # a process of another version: its series would not parse as this family's
        for sample in family.samples:
            if family.type in _CREATED_KINDS and sample.name.endswith("_created"):
                continue
            labels = {**sample.labels, PROCESS_LABEL: label}
            merged.samples.append(Sample(sample.name, labels, sample.value, sample.timestamp, sample.exemplar))

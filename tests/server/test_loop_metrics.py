"""The per-decision metrics without locks (``LoopCounters``, ``LoopHistograms``): their scrape
is the one prometheus_client's Counter and Histogram give for the same updates (hypothesis, the
server's own buckets, values on and between the bounds), and a scrape taken while the loop's
thread observes is consistent (count = the +Inf bucket, buckets cumulative)."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gaigel_server.metrics import LATENCY_BUCKETS, LoopCounters, LoopHistograms

BOTS = ("alpha", "beta", "_other")
VALUES = st.one_of(
    st.sampled_from(LATENCY_BUCKETS),  # exactly on a bound: that bucket, as prometheus_client counts it
    st.floats(min_value=0.0, max_value=30.0, allow_nan=False),
)


def _text(registry: CollectorRegistry) -> list[str]:
    """The exposition without ``_created`` lines (timestamps; these series leave them out)."""
    return [line for line in generate_latest(registry).decode().splitlines() if "_created" not in line]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(BOTS), VALUES), max_size=40), st.lists(st.sampled_from(BOTS), max_size=10))
def test_loop_series_scrape_as_prometheus_client_s_own(observed: list[tuple[str, float]], counted: list[str]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    doc = "Time a bot took."
    hist = LoopHistograms("gaigel_test_seconds", doc, ("bot",), LATENCY_BUCKETS, ours)
    reference = Histogram("gaigel_test_seconds", doc, ["bot"], buckets=LATENCY_BUCKETS, registry=theirs)
    count = LoopCounters("gaigel_test_total", "Things.", ("outcome",), ours)
    reference_count = Counter("gaigel_test_total", "Things.", ["outcome"], registry=theirs)
    hist.labels("never")  # a series created and never observed is exported as zero by both
    reference.labels("never")
    for bot, value in observed:
        hist.labels(bot).observe(value)
        reference.labels(bot).observe(value)
    for outcome in counted:
        count.labels(outcome).inc()
        reference_count.labels(outcome).inc()
    if observed:
        hist.remove(observed[0][0])
        reference.remove(observed[0][0])
    assert _text(ours) == _text(theirs)


def test_a_scrape_while_the_loop_observes_is_consistent() -> None:
    registry = CollectorRegistry()
    hist = LoopHistograms("gaigel_test_seconds", "Time.", (), LATENCY_BUCKETS, registry).labels()
    values = [LATENCY_BUCKETS[i % len(LATENCY_BUCKETS)] * 0.9 for i in range(200_000)] + [99.0]
    done = threading.Event()

    def observe() -> None:
        for v in values:
            hist.observe(v)
        done.set()

    def scrape() -> float:
        (family,) = text_string_to_metric_families(generate_latest(registry).decode())
        buckets = [s.value for s in family.samples if s.name.endswith("_bucket")]
        (count,) = (s.value for s in family.samples if s.name.endswith("_count"))
        assert buckets == sorted(buckets) and buckets[-1] == count, (buckets, count)
        return count

    writer = threading.Thread(target=observe)
    writer.start()
    during = [scrape()]
    while not done.is_set():
        during.append(scrape())
    writer.join()
    assert scrape() == len(values)
    assert len(during) >= 3 and any(0 < c < len(values) for c in during), during

"""``gaigel serve --processes``: where tables go and which idle sessions move
(:mod:`gaigel_server.placement`, pure functions), by example and by property."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gaigel_server.placement import Move, place, plan, spare


def status(idle: dict[str, int], waiting: list[dict[str, int]] = (), tables: int = 0, tag: str = "") -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "idle": {b: [[f"{tag}{b}{i}", f"ipv4:127.0.0.1:{i}"] for i in range(n)] for b, n in idle.items()},
        "waiting": [[f"{tag}m{i}", need] for i, need in enumerate(waiting)],
        "seated": [],
        "tables": tables + len(waiting),
    }


def test_a_table_goes_where_its_bots_idle_sessions_are() -> None:
    statuses = [status({"a": 1}), status({"a": 1, "b": 1})]
    assert place(statuses, ["a", "b"]) == 1
    # sessions a waiting table there needs do not count
    statuses = [status({"a": 1, "b": 1}, [{"a": 1, "b": 1}]), status({"a": 1})]
    assert spare(statuses[0]) == Counter()
    assert place(statuses, ["a", "b"]) == 1
    # a tie goes to fewer tables, then fewer recent connections, then the lower index
    assert place([status({}, tables=2), status({}, tables=1)], ["a"]) == 1
    assert place([status({}), status({})], ["a"], routed=[3, 1]) == 1
    assert place([status({}), status({})], ["a"]) == 0


def test_two_tables_each_holding_what_the_other_needs_do_not_wait_for_ever() -> None:
    # process 0 waits for a and b and holds a; process 1 waits for a and b and holds b.
    statuses = [status({"a": 1}, [{"a": 1, "b": 1}], tag="p0"), status({"b": 1}, [{"a": 1, "b": 1}], tag="p1")]
    order = {"p0m0": 1, "p1m0": 2}  # process 0's table is older
    moves, wanted = plan(statuses, order, {}, set())
    assert moves == [Move("b", 1, 0, "p1b0", "ipv4:127.0.0.1:0")]
    assert sorted(wanted) == [(1, "a"), (1, "b")]  # the younger one waits for new Joins
    # the same with the other table older: the move goes the other way
    moves, _ = plan(statuses, {"p0m0": 2, "p1m0": 1}, {}, set())
    assert moves == [Move("a", 0, 1, "p0a0", "ipv4:127.0.0.1:0")]


def test_joins_on_their_way_and_moves_under_way_are_not_planned_twice() -> None:
    statuses = [status({}, [{"a": 2}], tag="p0"), status({"a": 3}, tag="p1")]
    moves, wanted = plan(statuses, {}, {}, set())
    assert [m.source for m in moves] == [1, 1] and wanted == []
    # one Join already on its way to process 0: one move; its session under way: another one
    moves, _ = plan(statuses, {}, {(0, "a"): 1}, {"p1a2"})
    assert len(moves) == 1 and moves[0].session_id != "p1a2"


names = st.sampled_from(["a", "b", "c"])
needs = st.dictionaries(names, st.integers(1, 2), min_size=1, max_size=3)
process = st.tuples(st.dictionaries(names, st.integers(0, 3)), st.lists(needs, max_size=3))


@settings(max_examples=300, deadline=None)
@given(st.lists(process, min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_plan_properties(processes: list[tuple[dict[str, int], list[dict[str, int]]]], rng: Any) -> None:
    statuses = [status(idle, waiting, tag=f"p{k}") for k, (idle, waiting) in enumerate(processes)]
    ids = [m for st_ in statuses for m, _ in st_["waiting"]]
    rng.shuffle(ids)
    order = {m: i for i, m in enumerate(ids)}
    moves, wanted = plan(statuses, order, {}, set())
    moved = [m.session_id for m in moves]
    assert len(moved) == len(set(moved))  # no session moves twice
    for m in moves:
        assert m.source != m.target
        assert [m.session_id, m.peer] in statuses[m.source]["idle"][m.bot]  # an idle session of that bot there
    # what each process gets (its own idle sessions, moves in, wanted Joins) covers its waiting
    # tables together, bot by bot; what it gives away leaves it at least what its tables need
    # when the older tables were served
    for k, st_ in enumerate(statuses):
        have = Counter({b: len(v) for b, v in st_["idle"].items()})
        have += Counter(m.bot for m in moves if m.target == k)
        have += Counter(b for j, b in wanted if j == k)
        have -= Counter(m.bot for m in moves if m.source == k)
        need: Counter[str] = Counter()
        for _, n in st_["waiting"]:
            need.update(n)
        assert all(have[b] >= n for b, n in need.items()), (k, have, need)
    # no move when no table waits
    if not ids:
        assert moves == [] and wanted == []

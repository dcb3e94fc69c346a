"""Compact mode (Join.compact, issue 13) over real gRPC on loopback.

A compact session gets its HandStart and Events folded into its next DecisionRequest; any
other message flushes them first. Unfolded, a compact session must see exactly the messages
a plain session sees, in the same order; a session without the field must be unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm
from gaigel_server.clock import Clock
from gaigel_server.session import BotSession, Outgoing, Stream, envelope
from tests.server.srvkit import Admin, ScriptedBot, queued, run, running_server

NAMES = [f"p{i}" for i in range(6)]
BOTS = {name: f"{name}-token-0123456" for name in NAMES}
# A long decision time: the bank never moves, so bank_left is the same in every run.
SLOW = Clock(decision_time=60.0, bank=5.0, strikes_limit=1000, resume_grace=30.0)

Unfolded = list[tuple[str, bytes]]


def unfold(received: list[bs.PlayResponse]) -> Unfolded:
    """Each message the bot saw as (kind, payload bytes), folded ones taken out of their
    DecisionRequest first; per-run values (ids, tokens) blanked, decision ids numbered."""
    out: Unfolded = []
    decisions: dict[str, str] = {}
    for msg in received:
        kind = msg.WhichOneof("message")
        assert kind is not None
        if kind == "decision_request":
            req = bs.DecisionRequest()
            req.CopyFrom(msg.decision_request)
            out.extend(("event", ev.SerializeToString()) for ev in req.ended_hand_events)
            if req.HasField("hand_end"):
                out.append(("hand_end", req.hand_end.SerializeToString()))
            if req.HasField("hand_start"):
                out.append(("hand_start", req.hand_start.SerializeToString()))
            out.extend(("event", ev.SerializeToString()) for ev in req.events)
            for name in ("ended_hand_events", "hand_end", "hand_start", "events"):
                req.ClearField(name)
            req.decision_id = decisions.setdefault(req.decision_id, f"d{len(decisions)}")
            out.append((kind, req.SerializeToString()))
            continue
        payload: Any = type(getattr(msg, kind))()
        payload.CopyFrom(getattr(msg, kind))
        if kind == "match_start":
            payload.match_id, payload.resume_token = "", ""
        elif kind == "match_end":
            payload.match_id = ""
        elif kind == "welcome":
            payload.session_id = ""
        out.append((kind, payload.SerializeToString()))
    return out


def folded_counts(received: list[bs.PlayResponse]) -> tuple[int, int]:
    """(messages carried inside DecisionRequests, standalone HandStarts and Events)."""
    inside = sum(
        int(m.decision_request.HasField("hand_start")) + len(m.decision_request.events)
        for m in received
        if m.HasField("decision_request")
    )
    alone = sum(1 for m in received if m.WhichOneof("message") in ("hand_start", "event"))
    return inside, alone


def folded_ends(received: list[bs.PlayResponse]) -> tuple[int, int]:
    """(HandEnds carried inside DecisionRequests, standalone HandEnds)."""
    inside = sum(1 for m in received if m.HasField("decision_request") and m.decision_request.HasField("hand_end"))
    return inside, sum(1 for m in received if m.HasField("hand_end"))


def assert_flushed_only_by_others(
    received: list[bs.PlayResponse], held: tuple[str, ...] = ("hand_start", "event")
) -> None:
    """In a compact stream a standalone message of a *held* kind is there only because a message
    of another kind (not a DecisionRequest) flushed it: the run of them must end in one."""
    kinds = [m.WhichOneof("message") for m in received]
    for i, kind in enumerate(kinds):
        if kind in held:
            following = next(k for k in kinds[i + 1 :] if k not in held)
            assert following != "decision_request", f"message {i} ({kind}) should have ridden in the next request"


async def play_match(
    players: int, seed: int, compact_seats: set[int], hands: int = 2, fold_hand_end: bool = False
) -> list[ScriptedBot]:
    """One seeded match of scripted bots (seat s plays bot p<s> with rng seed s); the seats in
    *compact_seats* join compact (and with *fold_hand_end*, Join.compact_hand_end)."""
    async with running_server(bots=dict(BOTS), clock=SLOW) as (_, port):
        admin = Admin(port)
        bots = [
            ScriptedBot(
                port,
                NAMES[s],
                token=BOTS[NAMES[s]],
                seed=s,
                compact=s in compact_seats,
                fold_hand_end=fold_hand_end and s in compact_seats,
            )
            for s in range(players)
        ]
        tasks = [asyncio.create_task(b.run()) for b in bots]
        m = await admin.create(players, NAMES[:players], hands=hands, seed=seed, match_key="compact-test")
        await admin.wait_ended(m.match_id, 60.0)
        await asyncio.gather(*tasks)
        for b in bots:
            await b.close()
        await admin.close()
        return bots


def compare_modes(players: int, seed: int, hands: int = 2, fold_hand_end: bool = False) -> None:
    """Every seat plays once compact and once plain in the same seeded match: same unfolded messages."""
    evens = {s for s in range(players) if s % 2 == 0}
    odds = set(range(players)) - evens
    first = run(play_match(players, seed, evens, hands, fold_hand_end))
    second = run(play_match(players, seed, odds, hands, fold_hand_end))
    for seat in range(players):
        compact, plain = (first, second) if seat in evens else (second, first)
        assert compact[seat].status == grpc.StatusCode.OK and plain[seat].status == grpc.StatusCode.OK
        assert unfold(compact[seat].received) == unfold(plain[seat].received), f"seat {seat}"
        inside, _ = folded_counts(compact[seat].received)
        assert inside > 0, "nothing was folded"
        assert folded_counts(plain[seat].received)[0] == 0, "a plain session got folded messages"
        assert folded_ends(plain[seat].received)[0] == 0, "a plain session got a folded HandEnd"
        assert len(compact[seat].received) < len(plain[seat].received)
        ends_inside, ends_alone = folded_ends(compact[seat].received)
        if fold_hand_end:
            # Every hand but the last ends before one of this seat's requests (the last one's
            # HandEnd is flushed by MatchEnd); nothing is flushed by a request.
            assert ends_inside == hands - 1 and ends_alone == 1, (ends_inside, ends_alone)
            assert_flushed_only_by_others(compact[seat].received, ("hand_start", "event", "hand_end"))
            # One message per decision: from the MatchStart to the last request nothing else.
            kinds = [m.WhichOneof("message") for m in compact[seat].received]
            last = len(kinds) - 1 - kinds[::-1].index("decision_request")
            assert kinds[:2] == ["welcome", "match_start"] and set(kinds[2 : last + 1]) == {"decision_request"}
        else:
            assert ends_inside == 0, "a session without Join.compact_hand_end got a folded HandEnd"
            assert_flushed_only_by_others(compact[seat].received)


@pytest.mark.parametrize("fold_hand_end", [False, True], ids=["compact", "compact_hand_end"])
def test_compact_and_plain_sessions_see_the_same_messages(fold_hand_end: bool) -> None:
    compare_modes(players=4, seed=7, hands=3, fold_hand_end=fold_hand_end)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(players=st.sampled_from([2, 3, 4, 6]), seed=st.integers(0, 2**64 - 1), fold_hand_end=st.booleans())
def test_unfolded_compact_equals_plain_for_any_seed(players: int, seed: int, fold_hand_end: bool) -> None:
    compare_modes(players, seed, hands=2, fold_hand_end=fold_hand_end)


# --- Resume -----------------------------------------------------------------------------------


async def play_with_drop(
    compact: bool, drop_at: int, fold_hand_end: bool = False
) -> tuple[list[bs.PlayResponse], list[bs.PlayResponse]]:
    """Seat 0 drops its stream on its *drop_at*-th DecisionRequest without answering, resumes
    with the sequence number before it, and plays on. Returns (before the drop, after the resume)."""
    async with running_server(bots=dict(BOTS), clock=SLOW) as (_, port):
        admin = Admin(port)
        me = ScriptedBot(port, "p0", token=BOTS["p0"], seed=0, compact=compact, fold_hand_end=fold_hand_end)
        other = ScriptedBot(port, "p1", token=BOTS["p1"], seed=1)
        other_task = asyncio.create_task(other.run())
        await me.open()
        m = await admin.create(2, ["p0", "p1"], hands=2, seed=11, match_key="compact-test")
        seen = 0

        def stop(msg: bs.PlayResponse) -> bool:
            nonlocal seen
            seen += msg.HasField("decision_request")
            return seen == drop_at

        await me.play(stop_after=stop)
        before = list(me.received)
        me.call.cancel()
        assert me.match_start is not None
        resume = bs.Resume(
            match_id=me.match_start.match_id,
            seat=0,
            resume_token=me.match_start.resume_token,
            last_sequence=before[-1].sequence - 1,  # the request itself comes again
        )
        me.received = []
        await asyncio.sleep(0.2)  # the server notices the break (a DISCONNECT fault)
        await me.open(bs.PlayRequest(resume=resume))
        await me.play()
        after = list(me.received)
        await admin.wait_ended(m.match_id, 60.0)
        await other_task
        for b in (me, other):
            await b.close()
        await admin.close()
        return before, after


def _without_faults(unfolded: Unfolded) -> Unfolded:
    out: Unfolded = []
    for kind, data in unfolded:
        if kind == "event" and gm.Event.FromString(data).HasField("fault"):
            continue  # DISCONNECT and RESUMED: only the run with the break has them
        if kind == "match_end":
            end = gm.MatchEnd.FromString(data)
            end.ClearField("faults")
            data = end.SerializeToString()
        out.append((kind, data))
    return out


@pytest.mark.parametrize("fold_hand_end", [False, True], ids=["compact", "compact_hand_end"])
def test_resume_keeps_compact_mode_and_loses_nothing(fold_hand_end: bool) -> None:
    before, after = run(play_with_drop(compact=True, drop_at=3, fold_hand_end=fold_hand_end))
    assert after[0].HasField("welcome") and after[0].welcome.resumed
    resent = after[1]
    assert resent.sequence == before[-1].sequence and resent.SerializeToString() == before[-1].SerializeToString()
    # Still compact after the Resume: the DISCONNECT and RESUMED faults ride in the next request.
    later = [m for m in after[2:] if m.HasField("decision_request")]
    faults = [ev.fault.reason for ev in later[0].decision_request.events if ev.HasField("fault")]
    assert faults == [cm.FAULT_REASON_DISCONNECT, cm.FAULT_REASON_RESUMED]
    assert_flushed_only_by_others(
        after[1:], ("hand_start", "event", "hand_end") if fold_hand_end else ("hand_start", "event")
    )
    if fold_hand_end:  # the first hand ended after the Resume: its end rode in a request
        assert folded_ends(after[1:]) == (1, 1)
    sequences = [m.sequence for m in before[1:] + after[2:]]
    assert sequences == list(range(1, len(sequences) + 1)), "a message was lost or numbered twice"
    # The same match without the break, plain: the same game messages, none lost.
    whole = before[:-1] + after[1:]
    reference = run(play_match(2, 11, set(), hands=2))[0].received
    assert _without_faults(unfold(whole)) == _without_faults(unfold(reference))


def test_plain_resume_stays_plain() -> None:
    _, after = run(play_with_drop(compact=False, drop_at=2))
    assert folded_counts(after[1:])[0] == 0
    assert any(m.HasField("event") and m.event.HasField("fault") for m in after[1:])


# --- old clients ------------------------------------------------------------------------------


async def raw_session(port: int, join: bytes) -> list[bytes]:
    """A client that speaks raw bytes (as an old client built without Join.compact would)."""
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    play = channel.stream_stream("/gaigel.v1.BotService/Play")
    call: Any = play()
    await call.write(join)
    out: list[bytes] = []
    while True:
        data = await call.read()
        if data is grpc.aio.EOF:
            break
        out.append(data)
        msg = bs.PlayResponse.FromString(data)
        if msg.HasField("decision_request"):
            answer = bs.Action(
                decision_id=msg.decision_request.decision_id, action_id=msg.decision_request.legal_actions[0].id
            )
            await call.write(bs.PlayRequest(action=answer).SerializeToString())
        elif msg.HasField("match_end"):
            await call.write(bs.PlayRequest(leave=bs.Leave()).SerializeToString())
    await channel.close()
    return out


def test_old_client_without_the_field_is_unchanged() -> None:
    async def scenario() -> list[bytes]:
        async with running_server(bots=dict(BOTS), clock=SLOW) as (_, port):
            admin = Admin(port)
            # Join as an old client encodes it: fields 1..4, no field 5.
            join = bs.PlayRequest(join=bs.Join(bot_token=BOTS["p0"], bot_name="p0", protocol_version=1))
            raw = join.SerializeToString()
            assert b"\x28" not in raw[-2:]  # no compact tag (field 5, varint) at the end
            task = asyncio.create_task(raw_session(port, raw))
            other = ScriptedBot(port, "p1", token=BOTS["p1"], seed=1, compact=True)
            other_task = asyncio.create_task(other.run())
            m = await admin.create(2, ["p0", "p1"], hands=1, seed=5)
            await admin.wait_ended(m.match_id, 60.0)
            out = await task
            await other_task
            await other.close()
            await admin.close()
            return out

    raw = run(scenario())
    kinds = []
    for i, data in enumerate(raw):
        msg = bs.PlayResponse.FromString(data)
        assert msg.sequence == i
        assert msg.SerializeToString() == data  # canonical bytes: nothing unknown added
        if msg.HasField("decision_request"):
            assert not msg.decision_request.HasField("hand_start") and not msg.decision_request.events
        kinds.append(msg.WhichOneof("message"))
    assert kinds[:3] == ["welcome", "match_start", "hand_start"]
    assert kinds.count("event") > 10 and kinds[-2:] == ["hand_end", "match_end"]


# --- what flushes ------------------------------------------------------------------------------


def _session(compact: bool, fold_hand_end: bool = False) -> tuple[BotSession, Stream]:
    session, stream = BotSession("p0", "v", compact=compact, fold_hand_end=fold_hand_end), Stream()
    session.attach(stream)
    return session, stream


def _script(session: BotSession) -> None:
    def ev(trick: int) -> gm.Event:
        return gm.Event(hand_index=0, trick_won=gm.TrickWon(trick_index=trick, winner_seat=1))

    session.send(hand_start=gm.HandStart(hand_index=0, dealer_seat=1))
    session.send(event=ev(0))
    session.send(action_rejected=bs.ActionRejected(decision_id="x", reason=bs.REJECT_REASON_UNKNOWN_DECISION))
    session.send(event=ev(1))
    session.send(decision_request=bs.DecisionRequest(decision_id="d1"))
    session.send(event=ev(2))
    session.send(hand_end=gm.HandEnd(hand_index=0))
    session.send(event=ev(3))
    session.send(hand_start=gm.HandStart(hand_index=1))
    session.send(match_end=gm.MatchEnd(match_id="m"))


def test_other_messages_flush_the_held_ones_first() -> None:
    compact, cstream = _session(compact=True)
    _script(compact)
    got = queued(cstream)
    assert [m.WhichOneof("message") for m in got] == [
        "hand_start",
        "event",
        "action_rejected",  # flushed the two before it
        "decision_request",  # carries event 1
        "event",
        "hand_end",  # flushed event 2
        "event",
        "hand_start",  # event 3, then the next HandStart, flushed by MatchEnd
        "match_end",
    ]
    assert [m.sequence for m in got] == list(range(1, 10))
    assert [e.trick_won.trick_index for e in got[3].decision_request.events] == [1]
    assert compact.held_start is None and not compact.held_events
    plain, pstream = _session(compact=False)
    _script(plain)
    assert unfold(got) == unfold(queued(pstream))


def test_with_compact_hand_end_the_same_script_keeps_its_order() -> None:
    folding, stream = _session(compact=True, fold_hand_end=True)
    _script(folding)
    got = queued(stream)
    # Event 3 came after the HandEnd and before the next HandStart: it flushes the held end
    # (a HandStart rides before its hand's events), so the order is the plain one.
    plain, pstream = _session(compact=False)
    _script(plain)
    assert unfold(got) == unfold(queued(pstream))
    assert [m.sequence for m in got] == list(range(1, len(got) + 1))
    assert folding.held_end is None and not folding.held_end_events and folding.held_start is None


def _hand(index: int, trick: int) -> tuple[gm.HandStart, gm.Event, gm.HandEnd]:
    return (
        gm.HandStart(hand_index=index, dealer_seat=index % 2),
        gm.Event(hand_index=index, trick_won=gm.TrickWon(trick_index=trick, winner_seat=1)),
        gm.HandEnd(hand_index=index),
    )


def test_compact_hand_end_rides_in_the_next_request_in_protobufs_own_bytes() -> None:
    session, stream = _session(compact=True, fold_hand_end=True)
    start0, last0, end0 = _hand(0, 9)
    start1, first1, _ = _hand(1, 0)
    request = bs.DecisionRequest(decision_id="d2", legal_actions=[bs.LegalAction(id=3)])
    session.send(hand_start=start0)
    session.send(decision_request=bs.DecisionRequest(decision_id="d1"))
    session.send(event=last0)
    session.send(hand_end=end0)
    session.send(hand_start=start1)
    session.send(event=first1)
    session.send(decision_request=request)
    got = queued(stream)
    assert [m.WhichOneof("message") for m in got] == ["decision_request", "decision_request"]
    want = bs.PlayResponse(sequence=2, decision_request=request)
    want.decision_request.ended_hand_events.append(last0)
    want.decision_request.hand_end.CopyFrom(end0)
    want.decision_request.hand_start.CopyFrom(start1)
    want.decision_request.events.append(first1)
    assert got[1].SerializeToString() == want.SerializeToString()
    plain, pstream = _session(compact=False)
    for kind, msg in [
        ("hand_start", start0),
        ("decision_request", bs.DecisionRequest(decision_id="d1")),
        ("event", last0),
        ("hand_end", end0),
        ("hand_start", start1),
        ("event", first1),
        ("decision_request", request),
    ]:
        plain.send(**{kind: msg})
    assert unfold(got) == unfold(queued(pstream))


def test_a_second_hand_end_before_a_request_flushes_the_first() -> None:
    session, stream = _session(compact=True, fold_hand_end=True)
    start1, _, end1 = _hand(1, 0)
    _, _, end0 = _hand(0, 0)
    session.send(hand_end=end0)
    session.send(hand_start=start1)
    session.send(hand_end=end1)  # hand 1 ended before this seat was asked anything
    session.send(decision_request=bs.DecisionRequest(decision_id="d"))
    got = queued(stream)
    assert [m.WhichOneof("message") for m in got] == ["hand_end", "hand_start", "decision_request"]
    assert got[0].hand_end.hand_index == 0 and got[2].decision_request.hand_end.hand_index == 1


def test_match_end_flushes_a_held_hand_end_and_drop_held_forgets_it() -> None:
    session, stream = _session(compact=True, fold_hand_end=True)
    _, last, end = _hand(0, 8)
    session.send(event=last)
    session.send(hand_end=end)
    session.send(match_end=gm.MatchEnd(match_id="m"))
    assert [m.WhichOneof("message") for m in queued(stream)] == ["event", "hand_end", "match_end"]
    session.send(event=last)
    session.send(hand_end=end)
    session.drop_held()
    session.send(decision_request=bs.DecisionRequest(decision_id="d"))
    (request,) = queued(stream)
    assert not request.decision_request.HasField("hand_end") and not request.decision_request.ended_hand_events


def test_compact_hand_end_without_compact_is_ignored() -> None:
    session, stream = _session(compact=False, fold_hand_end=True)
    session.send(hand_end=gm.HandEnd(hand_index=0))
    session.send(decision_request=bs.DecisionRequest(decision_id="d"))
    assert [m.WhichOneof("message") for m in queued(stream)] == ["hand_end", "decision_request"]


_POSTS = st.lists(
    st.sampled_from(["event", "hand_start", "hand_end", "decision_request", "action_rejected"]), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(posts=_POSTS, fold_hand_end=st.booleans())
def test_any_order_of_posts_unfolds_to_the_plain_stream(posts: list[str], fold_hand_end: bool) -> None:
    """Whatever a table posts in whatever order (including orders no match makes: two hand ends in a
    row, a hand end with its start still held), a compact session's messages, unfolded, are the plain
    session's, numbered without a gap, and nothing stays held past a MatchEnd."""
    sessions = [_session(compact=False), _session(compact=True, fold_hand_end=fold_hand_end)]
    for i, kind in enumerate([*posts, "match_end"]):
        msg: Any = {
            "event": gm.Event(hand_index=i, trick_won=gm.TrickWon(trick_index=i)),
            "hand_start": gm.HandStart(hand_index=i),
            "hand_end": gm.HandEnd(hand_index=i),
            "decision_request": bs.DecisionRequest(decision_id=f"d{i}"),
            "action_rejected": bs.ActionRejected(decision_id=f"x{i}"),
            "match_end": gm.MatchEnd(match_id=f"m{i}"),
        }[kind]
        for session, _ in sessions:
            session.send(**{kind: msg})
    (_, plain), (compact, folded) = sessions
    got = queued(folded)
    assert unfold(got) == unfold(queued(plain))
    assert [m.sequence for m in got] == list(range(1, len(got) + 1))
    assert compact.held_start is None and not compact.held_events
    assert compact.held_end is None and not compact.held_end_events
    if not fold_hand_end:
        assert not any(m.decision_request.HasField("hand_end") for m in got if m.HasField("decision_request"))


def test_a_new_hand_start_flushes_what_is_held() -> None:
    session, stream = _session(compact=True)
    session.send(event=gm.Event(hand_index=0, trick_won=gm.TrickWon(trick_index=5)))
    session.send(hand_start=gm.HandStart(hand_index=1))
    session.send(decision_request=bs.DecisionRequest(decision_id="d"))
    got = queued(stream)
    assert [m.WhichOneof("message") for m in got] == ["event", "decision_request"]
    assert got[1].decision_request.hand_start.hand_index == 1 and not got[1].decision_request.events


def test_folding_leaves_the_callers_request_alone() -> None:
    session, stream = _session(compact=True)
    request = bs.DecisionRequest(decision_id="d")
    session.send(event=gm.Event(hand_index=0))
    session.send(decision_request=request)
    assert not request.events and len(queued(stream)[0].decision_request.events) == 1


# --- the hand-built PlayResponse bytes ---------------------------------------------------------


def test_envelope_is_protobufs_own_serialization() -> None:
    samples: dict[str, Any] = {
        "match_start": bs.MatchStart(match_id="m", seat=1, bot_seed=2**63),
        "hand_start": gm.HandStart(hand_index=3, dealer_seat=1),
        "event": gm.Event(hand_index=0, trick_won=gm.TrickWon(trick_index=2, winner_seat=1)),
        "decision_request": bs.DecisionRequest(decision_id="d" * 22, legal_actions=[bs.LegalAction(id=7)]),
        "action_rejected": bs.ActionRejected(decision_id="x", message="m" * 300),
        "hand_end": gm.HandEnd(hand_index=1),
        "match_end": gm.MatchEnd(match_id="m"),
        "welcome": bs.Welcome(session_id="s"),
    }
    assert set(samples) == {f.name for f in bs.PlayResponse.DESCRIPTOR.oneofs_by_name["message"].fields}
    for kind, msg in samples.items():
        for sequence in (0, 1, 127, 128, 300, 2**40):
            want = bs.PlayResponse(sequence=sequence, **{kind: msg}).SerializeToString()
            assert envelope(sequence, kind, msg.SerializeToString()) == want, (kind, sequence)


def test_folded_bytes_are_protobufs_own_serialization() -> None:
    session, stream = _session(compact=True)
    start = gm.HandStart(hand_index=1, dealer_seat=0)
    events = [gm.Event(hand_index=1, trick_won=gm.TrickWon(trick_index=i)) for i in range(3)]
    request = bs.DecisionRequest(decision_id="d", legal_actions=[bs.LegalAction(id=1)])
    session.send(hand_start=start)
    for ev in events:
        session.send(event=ev)
    session.send(decision_request=request)
    item = stream.items.popleft()
    assert isinstance(item, Outgoing)
    want = bs.PlayResponse(sequence=1, decision_request=request)
    want.decision_request.hand_start.CopyFrom(start)
    want.decision_request.events.extend(events)
    assert item.message == want.SerializeToString()

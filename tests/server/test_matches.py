"""Full matches over real streams, and what every receiver may (not) see."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.protobuf.message import Message
from srvkit import Admin, ScriptedBot, admin_md, run, running_server

from gaigel.match import hand_setup, spec_from_record
from gaigel.replay import replay
from gaigel.state import GaigelState
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import match_service_pb2 as ms


def card_ids(msg: Message) -> set[int]:
    """Every card id in *msg*, at any depth."""
    out: set[int] = set()
    if isinstance(msg, cm.Card):
        out.add(msg.id)
        return out
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        items = value if field.is_repeated else [value]
        for item in items:
            if isinstance(item, Message):
                out |= card_ids(item)
    return out


def knowable(record: dict[str, Any], seat: int | None) -> dict[int, list[set[int]]]:
    """Per hand: what *seat* (None: every seat at once, i.e. public) may know before each card play.

    Entry m holds everything the seat's observations showed up to just before the (m+1)-th
    card play of the hand; the last entry holds the end of the hand.
    """
    spec = spec_from_record(record)
    out: dict[int, list[set[int]]] = {}
    seats = range(spec.players) if seat is None else [seat]
    for hand in record["hands"]:
        d, _dealer, forehand = hand_setup(spec, hand["index"])
        state = GaigelState(spec.ruleset, d, forehand)

        def seen(state: GaigelState = state) -> set[int]:
            sets = [state.observation(s).visible_cards() for s in seats]
            return set.intersection(*sets)

        known = seen()
        if seat is None:
            known -= {c for s in range(spec.players) for c in state.hand(s)}
            known.add(state.trump_card)
        windows: list[set[int]] = []
        for entry in hand["actions"]:
            if entry["action"] < 144:
                windows.append(set(known))
            state.apply(entry["action"])
            now = seen()
            if seat is None:
                now = {
                    c
                    for c in now
                    if not any(
                        c in state.hand(s) and c not in state.observation((s + 1) % spec.players).visible_cards()
                        for s in range(spec.players)
                    )
                }
            known |= now
        windows.append(known)
        out[hand["index"]] = windows
    return out


def check_messages(messages: list[tuple[str, Message]], allowed: dict[int, list[set[int]]], who: str) -> int:
    """Asserts every message's cards lie in the window it was received in; returns the number checked."""
    hand, m = -1, 0
    checked = 0
    for i, (kind, msg) in enumerate(messages):
        if kind == "hand_start":
            hand, m = msg.hand_index, 0  # type: ignore[attr-defined]
        elif kind == "event":
            ev = msg
            which = ev.WhichOneof("kind")  # type: ignore[attr-defined]
            if which == "card_played":
                m += 1
            elif which == "meld" and i + 1 < len(messages):
                nk, nxt = messages[i + 1]
                if nk == "event" and nxt.WhichOneof("kind") == "card_played" and nxt.card_played.seat == ev.meld.seat:  # type: ignore[attr-defined]
                    m += 1
                    messages[i + 1] = ("event-counted", nxt)
        elif kind == "event-counted":
            pass
        if hand < 0:
            continue
        cards = card_ids(msg)
        window = allowed[hand][min(m, len(allowed[hand]) - 1)]
        leaked = cards - window
        assert not leaked, (
            f"{who} received hidden cards {sorted(leaked)} in {kind} #{i} of hand {hand} (window {m}): {msg}"
        )
        checked += 1
    return checked


def bot_messages(bot: ScriptedBot) -> list[tuple[str, Message]]:
    out: list[tuple[str, Message]] = []
    for r in bot.received:
        kind = r.WhichOneof("message") or ""
        out.append((kind, getattr(r, kind)))
    return out


async def play_full(
    port: int, players: int, names: list[str], hands: int, seed: int, watch: bool = False
) -> tuple[dict[str, Any], list[ScriptedBot], list[ms.WatchMatchResponse]]:
    admin = Admin(port)
    bots = [ScriptedBot(port, name, seed=seed * 10 + i) for i, name in enumerate(names)]
    tasks = [asyncio.create_task(b.run()) for b in bots]
    m = await admin.create(players, names, hands=hands, seed=seed)
    watched: list[ms.WatchMatchResponse] = []
    if watch:
        async for item in admin.stub.WatchMatch(
            ms.WatchMatchRequest(match_id=m.match_id, from_start=True), metadata=admin_md()
        ):
            watched.append(item)
    await asyncio.gather(*tasks)
    end = await admin.wait_ended(m.match_id)
    record = await admin.record(m.match_id)
    assert end.termination == cm.MATCH_TERMINATION_COMPLETED, record["faults"]
    await admin.close()
    for b in bots:
        await b.close()
    bots.sort(key=lambda b: b.match_start.seat if b.match_start else -1)  # same-name sessions take seats in any order
    return record, bots, watched


class TestFullMatches:
    """Matches at every table size with bots that answer legal ids only."""

    @pytest.mark.parametrize(
        "players,names",
        [
            (2, ["alpha", "beta"]),
            (3, ["alpha", "beta", "gamma"]),
            (4, ["alpha", "beta", "alpha", "beta"]),
            (6, ["alpha", "beta", "gamma", "alpha", "beta", "gamma"]),
        ],
    )
    def test_match_completes_and_replays(self, players: int, names: list[str]) -> None:
        """Every seat gets MatchStart, hands and MatchEnd with the seed; the record replays hash for hash."""

        async def scenario() -> None:
            async with running_server() as (_server, port):
                record, bots, _ = await play_full(port, players, names, hands=2, seed=100 + players)
                assert replay(record).ok
                assert record["result"]["termination"] == "completed"
                assert not record["faults"]
                for seat, bot in enumerate(bots):
                    kinds = bot.kinds()
                    assert kinds[0] == "welcome" and kinds[1] == "match_start" and kinds[-1] == "match_end"
                    assert bot.received[-1].match_end.seed == 100 + players
                    assert bot.match_start is not None and bot.match_start.seat == seat
                    assert [r.sequence for r in bot.received] == list(range(len(bot.received)))
                    assert kinds.count("hand_end") == 2
                    assert bot.decisions == sum(1 for h in record["hands"] for a in h["actions"] if a["seat"] == seat)

        run(scenario())

    def test_many_tables_at_once(self) -> None:
        """Several tables run concurrently; a session returns to its pool after its match."""

        async def scenario() -> None:
            async with running_server() as (_server, port):
                admin = Admin(port)
                bots = [
                    ScriptedBot(port, n, seed=i, matches=2) for i, n in enumerate(["alpha", "alpha", "beta", "beta"])
                ]
                tasks = [asyncio.create_task(b.run()) for b in bots]
                ids = [(await admin.create(2, ["alpha", "beta"], hands=1, seed=s)).match_id for s in range(4)]
                await asyncio.gather(*tasks)
                for mid in ids:
                    assert (await admin.wait_ended(mid)).termination == cm.MATCH_TERMINATION_COMPLETED
                assert all(b.kinds().count("match_end") == 2 for b in bots)

        run(scenario())

    def test_house_bots_fill_seats(self) -> None:
        """Seats named house:random and house:first are played in-process."""

        async def scenario() -> None:
            async with running_server() as (_server, port):
                admin = Admin(port)
                bot = ScriptedBot(port, "alpha")
                task = asyncio.create_task(bot.run())
                m = await admin.create(4, ["alpha", "house:random", "house:first", "house:random"], hands=2, seed=3)
                await task
                rec = await admin.record((await admin.wait_ended(m.match_id)).match_id)
                assert replay(rec).ok and rec["seats"][1]["bot"] == "house:random"

        run(scenario())


class TestHiddenInformation:
    """No receiver ever gets another seat's cards or the undrawn talon."""

    @pytest.mark.parametrize("players,seed", [(2, 11), (2, 12), (3, 13), (4, 14), (4, 15), (6, 16)])
    def test_no_hidden_card_reaches_a_bot_or_spectator(self, players: int, seed: int) -> None:
        """Every card id in every message lies in what the receiver could know at that moment."""

        async def scenario() -> None:
            names = (["alpha", "beta", "gamma"] * 2)[:players]
            async with running_server() as (_server, port):
                record, bots, watched = await play_full(port, players, names, hands=3, seed=seed, watch=True)
            checked = 0
            for seat, bot in enumerate(bots):
                checked += check_messages(bot_messages(bot), knowable(record, seat), f"seat {seat}")
            spectator = [(w.WhichOneof("message") or "", getattr(w, w.WhichOneof("message") or "")) for w in watched]
            assert spectator[0][0] == "match" and not spectator[0][1].HasField("seed")
            assert spectator[-1][0] == "match_end" and spectator[-1][1].seed == seed
            assert all(not msg.hand for kind, msg in spectator if kind == "hand_start")
            checked += check_messages(spectator, knowable(record, None), "spectator")
            assert checked > 100

        run(scenario())

    def test_face_down_card_hidden_until_trick_complete(self) -> None:
        """A face-down trick-0 card reaches other seats without its card until TrickRevealed."""

        async def scenario() -> None:
            async with running_server() as (_server, port):
                for seed in range(20, 40):
                    _record, bots, _ = await play_full(port, 2, ["alpha", "beta"], hands=1, seed=seed)
                    downs = [
                        (s, r.event.card_played)
                        for s, b in enumerate(bots)
                        for r in b.received
                        if r.WhichOneof("message") == "event"
                        and r.event.WhichOneof("kind") == "card_played"
                        and r.event.card_played.face_down
                    ]
                    if not downs:
                        continue
                    for receiver, cp in downs:
                        assert cp.HasField("card") == (cp.seat == receiver)
                    revealed = [
                        r
                        for b in bots
                        for r in b.received
                        if r.WhichOneof("message") == "event" and r.event.WhichOneof("kind") == "trick_revealed"
                    ]
                    assert revealed
                    return
                pytest.skip("no face-down opening in the seeds tried")

        run(scenario(), timeout=60)

    def test_checker_catches_a_leak(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Sanity check of the test itself: a codec that forgets to filter is caught."""
        from gaigel_server import codec

        monkeypatch.setattr(codec.Routed, "for_viewer", lambda self, viewer: self.event)

        async def scenario() -> None:
            async with running_server() as (_server, port):
                record, bots, _ = await play_full(port, 2, ["alpha", "beta"], hands=1, seed=11)
            with pytest.raises(AssertionError, match="hidden cards"):
                for seat, bot in enumerate(bots):
                    check_messages(bot_messages(bot), knowable(record, seat), f"seat {seat}")

        run(scenario())

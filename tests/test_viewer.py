"""``gaigel view``: the match viewer page, rendered by headless Chromium.

Records come from real runs (``gaigel play``, and ``gaigel try`` against a real in-process
server for faults). The expected cards are computed independently by replaying the record
with the engine; the page is checked through the DOM Chromium renders, opened at a step
with ``#step=N&seat=S``. Stepping is checked by appending a script that clicks the page's
own buttons and presses its keys before the DOM is dumped. The browser tests are skipped
without Chromium unless ``CI`` is set (tests/tools/browser.py).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gaigel.cards import card_code, cards_of
from gaigel.match import hand_setup, spec_from_record
from gaigel.record import load_record
from gaigel.state import GaigelState
from gaigel_harness.viewer import build_view
from tests.tools.browser import Dom, dump_dom

GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]
MINIMAL_BOT = Path(__file__).parent / "server" / "bots" / "minimal_bot.py"


def _play(tmp: Path, *args: str) -> Path:
    record = tmp / "match.json"
    done = subprocess.run([*GAIGEL, "play", *args, "--record", str(record)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return record


def _view(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GAIGEL, "view", *args], capture_output=True, text=True, timeout=60)


def _states(record: dict[str, Any]) -> list[tuple[int, int, GaigelState]]:
    """(hand, step, state before that step's action) for every page step, replayed independently."""
    spec = spec_from_record(record)
    out = []
    for hand in record["hands"]:
        d, _, forehand = hand_setup(spec, hand["index"])
        state = GaigelState(spec.ruleset, d, forehand)
        for i, entry in enumerate(hand["actions"]):
            out.append((hand["index"], i, state.clone()))
            state.apply_checked(entry["action"])
        out.append((hand["index"], len(hand["actions"]), state.clone()))
    return out


def _cards(dom: Dom, element_id: str) -> list[str]:
    """Card codes shown inside an element ("" for a card shown face down / hidden)."""
    return [a["data-card"] for a in dom.inside(element_id, "span") if "card" in a.get("class", "").split()]


def _page(tmp: Path, record: Path, *args: str) -> Path:
    page = tmp / ("view" + "".join(args).replace(" ", "") + ".html")
    done = _view(str(record), "--out", str(page), *args)
    assert done.returncode == 0, done.stderr
    return page


def _with_script(page: Path, script: str) -> Path:
    """A copy of *page* that runs *script* after the viewer's own (real clicks and key presses)."""
    text = page.read_text(encoding="utf-8")
    copy = page.with_name("driven-" + page.name)
    copy.write_text(text.replace("</body>", f"<script>{script}</script></body>"), encoding="utf-8")
    return copy


@pytest.fixture(scope="module")
def two_player(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("view2p")
    record = _play(tmp, "--players", "2", "--hands", "2", "--seed", "3")
    return record, load_record(record)


class TestViewerPage:
    """The full page (every hand visible) at chosen steps, stepping, and the seat filter."""

    @pytest.mark.parametrize("pick", [0, 5, 26, 27, 40, 42])
    def test_cards_at_a_step_match_the_engine(
        self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]], pick: int
    ) -> None:
        """Opened at #step=N, each seat's hand, the trump, the talon size and the trick are the engine's."""
        record_path, record = two_player
        hand, i, state = _states(record)[pick]
        dom = Dom(dump_dom(_page(tmp_path, record_path).as_uri() + f"#step={pick}&seat=all"))
        assert dom.by_id("table")["data-step"] == str(pick)
        for seat in range(2):
            assert _cards(dom, f"seat-{seat}") == [card_code(c) for c in cards_of(state.hands[seat])]
        face_up = state.face_up if state.face_up >= 0 else state.trump_card  # the seven after a rob
        assert _cards(dom, "trump") == [card_code(face_up)]
        assert dom.by_id("trump")["data-trump"] == card_code(state.trump_card)
        assert dom.by_id("talon")["data-size"] == str(state.talon_size)
        assert f"hand {hand} " in dom.all_text("position")
        trick = [card_code(c) for c in state.trick_cards]
        if trick:
            assert _cards(dom, "trick") == trick
        if i < len(record["hands"][hand]["actions"]):
            entry = record["hands"][hand]["actions"][i]
            assert dom.all_text("chosen") == entry["label"]
            assert len(dom.inside("legal", "li")) == len(state.legal_actions())

    def test_cards_show_their_codes_and_tricks_count_from_zero(
        self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]]
    ) -> None:
        """Each card carries its code as text beside the symbol, a legend explains the codes, and the trick
        is numbered as the protocol's trick_index (from 0), like hands and steps."""
        record_path, record = two_player
        pick, state = next((n, s) for n, (_, _, s) in enumerate(_states(record)) if s.trick_cards and s.trick_no >= 1)
        dom = Dom(dump_dom(_page(tmp_path, record_path).as_uri() + f"#step={pick}&seat=all"))
        hand_text = dom.all_text("seat-0")
        for c in cards_of(state.hands[0]):
            assert card_code(c) in hand_text
        assert f"trick {state.trick_no}, led by seat {state.leader}" in dom.all_text("trick")
        assert f"\u00b7 trick {state.trick_no} \u00b7" in dom.all_text("position")
        legend = dom.all_text("legend")
        for text in ("E \u2663 Eichel", "B \u2660 Blatt", "H \u2665 Herz", "S \u2666 Schellen", "U Unter 2"):
            assert text in legend

    def test_robbing_and_melds_of_four_players(self, tmp_path: Path) -> None:
        """Just after a rob the face-up card is the trump seven and the rob names both cards; melds show theirs."""
        record_path = _play(tmp_path, "--players", "4", "--hands", "1", "--seed", "6", "--bot", "heuristic")
        states = _states(load_record(record_path))
        pick = max(n for n, (_, _, s) in enumerate(states) if s.robbed_by >= 0 and s.face_up >= 0)  # melds by then
        state = states[pick][2]
        dom = Dom(dump_dom(_page(tmp_path, record_path).as_uri() + f"#step={pick}&seat=all"))
        seven, taken = state.rob_cards
        assert _cards(dom, "trump") == [card_code(seven)]
        assert _cards(dom, "robbed") == [card_code(seven), card_code(taken)]
        assert f"seat {state.robbed_by} " in dom.all_text("robbed")
        assert state.melds
        for i, (seat, _, _, cards, points) in enumerate(state.melds):
            assert _cards(dom, f"meld-{i}") == [card_code(c) for c in cards]
            assert dom.all_text(f"meld-{i}").startswith(f"seat {seat} ") and f"+{points}" in dom.all_text(f"meld-{i}")
        for seat in range(4):
            assert _cards(dom, f"seat-{seat}") == [card_code(c) for c in cards_of(state.hands[seat])]

    def test_buttons_and_keys_step(self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]]) -> None:
        """Three clicks on 'step', one left arrow: step 2; 'next trick' lands where the trick number changes."""
        record_path, record = two_player
        states = _states(record)
        page = _with_script(
            _page(tmp_path, record_path),
            """
            for (let k = 0; k < 3; k++) document.getElementById("next").click();
            document.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowLeft", bubbles: true}));
            const afterSteps = document.getElementById("table").getAttribute("data-step");
            document.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowDown", bubbles: true}));
            const afterTrick = document.getElementById("table").getAttribute("data-step");
            document.getElementById("next-hand").click();
            const afterHand = document.getElementById("table").getAttribute("data-step");
            document.dispatchEvent(new KeyboardEvent("keydown", {key: "End", bubbles: true}));
            document.body.setAttribute("data-trail", [afterSteps, afterTrick, afterHand].join(","));
            """,
        )
        dom = Dom(dump_dom(page.as_uri()))
        body = next(attrs for tag, attrs, _ in dom.elements if tag == "body")
        trail = [int(x) for x in body["data-trail"].split(",")]
        assert trail[0] == 2
        next_trick = next(n for n in range(3, len(states)) if states[n][2].trick_no != states[2][2].trick_no)
        assert trail[1] == next_trick
        assert trail[2] == len(record["hands"][0]["actions"]) + 1  # the first step of hand 1
        last = len(states) - 1
        assert dom.by_id("table")["data-step"] == str(last)
        assert _cards(dom, "seat-0") == [card_code(c) for c in cards_of(states[last][2].hands[0])]
        assert "over" in dom.all_text("position") and dom.all_text("outcome")

    def test_seat_filter_hides_other_hands(self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]]) -> None:
        """#seat=1: seat 1's own cards, seat 0's as backs (as many as it holds), no talon order."""
        record_path, record = two_player
        _, _, state = _states(record)[5]
        dom = Dom(dump_dom(_page(tmp_path, record_path).as_uri() + "#step=5&seat=1"))
        assert dom.by_id("table")["data-view"] == "1"
        assert _cards(dom, "seat-1") == [card_code(c) for c in cards_of(state.hands[1])]
        known = {card_code(c) for c in cards_of(state.known[0] & state.hands[0])}
        shown = _cards(dom, "seat-0")
        assert len(shown) == state.hands[0].bit_count()
        assert {c for c in shown if c} == known and shown.count("") == len(shown) - len(known)
        assert _cards(dom, "talon") in ([], [""])  # a face-down stack at most

    def test_seat_page_holds_only_that_seats_view(
        self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]]
    ) -> None:
        """--seat 0: the page's data has one view, and no step names a card seat 0 could not see then."""
        record_path, record = two_player
        page = _page(tmp_path, record_path, "--seat", "0")
        text = page.read_text(encoding="utf-8")
        found = re.search(r'<script id="match-data" type="application/json">(.*?)</script>', text, re.S)
        assert found is not None
        data = json.loads(found[1])
        assert data["views"] == ["0"]
        states = _states(record)
        for n, step in enumerate(data["steps"]):
            assert list(step["views"]) == ["0"]
            # hidden before this step's action and still hidden after it (a card played face up is seen)
            around = [states[n][2]] + ([states[n + 1][2]] if step["i"] < step["n"] else [])
            hidden = set.intersection(*(_hidden_from_seat0(s) for s in around))
            named = set(re.findall(r"\b([EBHS][ATKOU7][ab])\b", json.dumps(step["views"]["0"])))
            assert not named & hidden, (step["hand"], step["i"], named & hidden)
        dom = Dom(dump_dom(page.as_uri() + "#step=3&seat=all"))  # a view the page lacks falls back to seat 0
        assert dom.by_id("table")["data-view"] == "0"
        assert all(c == "" for c in _cards(dom, "seat-1"))
        assert [a.get("value") for a in dom.inside("seat-filter", "option")] == ["0"]


def test_markup_in_a_bot_name_stays_text(tmp_path: Path, two_player: tuple[Path, dict[str, Any]]) -> None:
    """A bot name with a closing script tag and markup is shown as text, not run as markup."""
    name = '</script><b id="injected">x</b><!-- & "quotes"'
    record = json.loads(two_player[0].read_text(encoding="utf-8"))
    record["seats"][0]["bot"] = name
    path = tmp_path / "named.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    dom = Dom(dump_dom(_page(tmp_path, path).as_uri() + "#step=1&seat=all"))
    assert not any(attrs.get("id") == "injected" for _, attrs, _ in dom.elements)
    assert name in dom.all_text("summary") and name in dom.all_text("seat-0")
    assert dom.by_id("table")["data-step"] == "1"  # the script ran


class TestFaults:
    """A record with faults from a real server (``gaigel try`` with a misbehaving bot)."""

    def test_every_fault_is_listed_and_highlighted_at_its_step(self, tmp_path: Path) -> None:
        """Each fault of the try's JSON output is listed with its reason code and marked at its step."""
        page = tmp_path / "try.html"
        try_args = ["--players", "2", "--hands", "1", "--seed", "5", "--json", "--view", str(page)]
        done = subprocess.run(
            [*GAIGEL, "try", *try_args, "--", *_chaos_bot(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        faults = json.loads(done.stdout)["faults"]
        assert len(faults) >= 2, faults
        dom = Dom(dump_dom(page.as_uri()))
        listed = dom.inside("faults", "li")
        assert [a["data-reason"] for a in listed] == [f["reason"] for f in faults]
        for fault, li in zip(faults, listed, strict=True):
            at = int(li["data-at"])
            at_dom = Dom(dump_dom(page.as_uri() + f"#step={at}&seat=0"))
            assert f"hand {fault['hand']} step {fault['step']} " in at_dom.all_text("position") + " "
            current = [a for a in at_dom.inside("faults", "li") if "current" in a["class"].split()]
            assert fault["reason"] in [a["data-reason"] for a in current]
            assert fault["reason"] in at_dom.all_text("decision")


def _hidden_from_seat0(state: GaigelState) -> set[str]:
    seen = state.observation(0).visible_cards()
    cards = cards_of(state.hands[1]) + list(state.talon[state.tpos :]) + list(state.trick_cards)
    return {card_code(c) for c in cards if c not in seen}


def _chaos_bot(tmp: Path) -> list[str]:
    """A bot that answers illegally, quotes stale decision ids and sends garbage at seeded decisions."""
    return [
        *GAIGEL,
        "chaos-bot",
        "--chaos",
        "illegal=0.15,stale=0.1,garbage=0.05",
        "--seed",
        "3",
        "--fault-log",
        str(tmp / "f"),
    ]


class TestViewCommand:
    """Bad input: one line, exit 2."""

    def test_not_a_record(self, tmp_path: Path) -> None:
        bad = tmp_path / "bad.json"
        bad.write_text('{"hello": 1}', encoding="utf-8")
        done = _view(str(bad))
        assert done.returncode == 2 and done.stderr.count("\n") == 1
        assert "not a Gaigel match record" in done.stderr

    def test_seat_out_of_range(self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]]) -> None:
        done = _view(str(two_player[0]), "--seat", "2", "--out", str(tmp_path / "x.html"))
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "seat 0..1" in done.stderr
        assert not (tmp_path / "x.html").exists()

    def test_unwritable_out(self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]]) -> None:
        done = _view(str(two_player[0]), "--out", str(tmp_path / "missing" / "x.html"))
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "cannot write" in done.stderr

    def test_tampered_record_does_not_replay(self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]]) -> None:
        record = json.loads(two_player[0].read_text(encoding="utf-8"))
        record["hands"][0]["actions"][3]["hash"] = "0" * 32
        bad = tmp_path / "tampered.json"
        bad.write_text(json.dumps(record), encoding="utf-8")
        done = _view(str(bad))
        assert done.returncode == 2 and "hand 0 step 3" in done.stderr and done.stderr.count("\n") == 1

    def test_record_without_hands(self, tmp_path: Path, two_player: tuple[Path, dict[str, Any]]) -> None:
        record = json.loads(two_player[0].read_text(encoding="utf-8"))
        record["hands"] = []
        bad = tmp_path / "empty.json"
        bad.write_text(json.dumps(record), encoding="utf-8")
        done = _view(str(bad))
        assert done.returncode == 2 and "no hand played" in done.stderr and done.stderr.count("\n") == 1

    def test_try_view_into_a_missing_folder_fails_before_playing(self, tmp_path: Path) -> None:
        done = subprocess.run(
            [*GAIGEL, "try", "--view", str(tmp_path / "missing" / "x.html"), "--", sys.executable, str(MINIMAL_BOT)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no such folder" in done.stderr
        assert "match" not in done.stdout

    def test_default_out_is_next_to_the_record(self, two_player: tuple[Path, dict[str, Any]]) -> None:
        done = _view(str(two_player[0]))
        assert done.returncode == 0, done.stderr
        page = two_player[0].with_suffix(".html")
        assert "<script" in page.read_text(encoding="utf-8") and "http" not in _external_refs(page)


def _external_refs(page: Path) -> str:
    """src= and href= values of a page: a self-contained page loads nothing."""
    text = page.read_text(encoding="utf-8")
    return " ".join(re.findall(r'(?:src|href)="([^"]*)"', text))


def test_build_view_counts_steps(two_player: tuple[Path, dict[str, Any]]) -> None:
    """One step before every action and one after each hand's last."""
    _, record = two_player
    view = build_view(record)
    assert len(view["steps"]) == sum(len(h["actions"]) + 1 for h in record["hands"])
    assert view["views"] == ["all", "0", "1"]


def test_points_stay_hidden_from_a_seat_when_the_ruleset_hides_them(tmp_path: Path) -> None:
    """Parlett rules do not expose scores to bots: a seat's view has no points, the full view has them."""
    record = load_record(_play(tmp_path, "--players", "2", "--hands", "1", "--seed", "1", "--rules", "parlett"))
    full, seat = build_view(record), build_view(record, 1)
    assert all(step["views"]["1"]["scores"] is None for step in seat["steps"])
    totals = [step["views"]["all"]["scores"][0]["total"] for step in full["steps"]]
    assert totals[-1] > 0 and totals == sorted(totals)


@pytest.mark.parametrize(
    "args",
    [
        ("--players", "2", "--hands", "2", "--seed", "3"),
        ("--players", "3", "--hands", "2", "--seed", "5"),
        ("--players", "4", "--hands", "1", "--seed", "1", "--rules", "parlett"),
    ],
)
def test_compact_page_derives_every_seat_view_exactly(tmp_path: Path, args: tuple[str, ...]) -> None:
    """The arena report's compact page (omniscient view only, packed) unpacks in the browser to the
    very steps of a full page: every seat's view equal, hidden cards, face-down plays and labels included."""
    from gaigel_harness.viewer import render_viewer

    record = load_record(_play(tmp_path, *args))
    full = build_view(record)
    compact = build_view(record, compact=True)
    assert list(compact["steps"][0]["views"]) == ["all"] and compact["views"] == full["views"]
    page = tmp_path / "compact.html"
    dump = "READY.then(() => { document.body.appendChild(document.createElement('pre')).id = 'dump';"
    dump += "document.getElementById('dump').textContent = JSON.stringify(STEPS); });"
    page.write_text(render_viewer(compact).replace("</body>", f"<script>{dump}</script></body>"), encoding="utf-8")
    found = re.search(r'<pre id="dump">(.*?)</pre>', dump_dom(page.as_uri()), re.S)
    assert found is not None
    steps = json.loads(html.unescape(found[1]))
    for step in steps:
        del step["known"]
        step["views"]["all"].get("decision", {}).pop("hidden_from", None)
    assert steps == full["steps"]
    assert len(render_viewer(compact, shared=True)) < len(render_viewer(full)) / 3  # the arena's pages


def test_title_names_the_bots_by_seat(tmp_path: Path) -> None:
    """The page title lists the bots in seat order, as the arena's match list does (not alphabetically)."""
    from gaigel_harness.viewer import render_viewer

    record = load_record(_play(tmp_path, "--players", "2", "--hands", "1", "--bot", "random", "--bot", "first"))
    assert [s["bot"] for s in record["seats"]] == ["random", "first"]
    title = re.search(r"<title>(.*?)</title>", render_viewer(build_view(record)))
    assert title is not None and title[1].endswith(": random vs first")

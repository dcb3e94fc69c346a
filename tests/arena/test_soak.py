"""The soak at CI size: a chaos bot with high fault rates, audited by bench/soak.py.

``bench/soak.py`` runs ``gaigel arena run`` (gRPC executor) on an arena of ``gaigel
chaos-bot`` (every fault kind at a few percent of its decisions), a well-behaved copy of
it and a house bot, then audits the journal, the records, the fault log and the arena's
log. Here it plays 24 one-hand matches (about 20 s) with clocks long enough that a loaded
machine does not make the well-behaved bots late. The arena runs in subprocesses, so this
test process never starts gRPC threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from gaigel_client.errors import ConfigError
from gaigel_harness.chaos import EXPECTED_REASONS, FAULT_KINDS, ChaosSpec, claim_resume_file, garbage_bytes

pytest.importorskip("gaigel_server.server")

REPO = Path(__file__).resolve().parents[2]
SOAK = REPO / "bench" / "soak.py"
CHAOS = "timeout=0.03,illegal=0.03,stale=0.03,garbage=0.03,disconnect=0.03,crash=0.03"


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "soak-ci.toml"
    path.write_text(
        f"""
[arena]
name = "soak ci"
seed = 11
sets_per_pairing = 1
workers = 2
executor = "grpc"

[game]
players = 2
hands = 1

[clock]
decision_ms = 500
bank_ms = 1000
resume_grace_ms = 5000

[[bots]]
name = "chaos"
command = ["gaigel", "chaos-bot", "--seed", "7", "--crash-interval", "4", "--chaos", "{CHAOS}"]
sandbox = "none"  # the project's own test tool: its fault log goes to the soak's folder

[[bots]]
name = "calm"
command = ["gaigel", "chaos-bot", "--chaos", "none"]
sandbox = "none"

[[bots]]
name = "first"
house = "first"
"""
    )
    return path


def _soak(tmp_path: Path, matches: int) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp_path / "out"
    command = [sys.executable, str(SOAK), "--config", str(_config(tmp_path)), "--matches", str(matches)]
    command += ["--out", str(out), "--json", "--bootstrap", "0", "--timeout", "150"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=200, cwd=REPO)
    first, _, rest = done.stdout.partition("\n")
    assert first.startswith("# rerun: python bench/soak.py --matches"), done.stdout[:500]
    return done, json.loads(rest) if rest.strip() else {}


class TestSoak:
    """Every match accounted for, every injected fault recorded under its code, ratings computed."""

    def test_small_soak_passes_every_invariant(self, tmp_path: Path) -> None:
        """24 matches with every fault kind injected: all invariants hold and every kind shows up."""
        done, doc = _soak(tmp_path, matches=24)
        assert done.returncode == 0, (doc.get("problems"), done.stderr[-2000:])
        assert doc["ok"] and all(doc["checks"].values()) and len(doc["checks"]) >= 12
        assert doc["run"]["matches"] == 24 and doc["run"]["decisions"] > 0
        injected = doc["faults"]["injected"]
        assert set(injected) == set(FAULT_KINDS), f"not every kind was injected: {injected}"
        table = {row["reason"]: row for row in doc["faults"]["table"]}
        for kind in FAULT_KINDS:
            for reason in EXPECTED_REASONS[kind]:
                assert table[reason]["recorded"] >= table[reason]["expected_from_injections"] > 0
        for reason in ("ILLEGAL_ACTION", "MALFORMED_MESSAGE", "DISCONNECT"):  # nothing else causes these
            assert table[reason]["recorded"] == table[reason]["expected_from_injections"]
        assert table["RESUMED"]["recorded"] <= table["DISCONNECT"]["recorded"]
        assert all(row["recorded_other_bots"] == 0 for r, row in table.items() if r != "TIMEOUT_FALLBACK")
        crashes = doc["faults"]["crashes"]
        assert crashes["crashes"] == crashes["restarts"] >= 1
        assert crashes["resume_files_claimed"] >= 1  # a restarted process took its predecessor's match over
        rated = {b["name"]: b["games"] for b in doc["ratings"]}
        assert rated == {"chaos": 16, "calm": 16, "first": 16}

    def test_soak_fails_when_a_fault_goes_missing(self, tmp_path: Path) -> None:
        """The audit is not a rubber stamp: a record with a fault deleted fails it."""
        from bench import soak

        record = {
            "_arena_match_id": "s0000-r0-chaos-first",
            "seats": [{"seat": 0, "side": 0, "bot": "chaos"}, {"seat": 1, "side": 1, "bot": "first"}],
            "hands": [{"index": 0, "actions": []}],
            "faults": [{"seat": 0, "reason": "DISCONNECT", "message": "", "hand": 0, "step": 3}],
            "result": {"termination": "completed"},
        }
        injected = [
            {"event": "fault", "kind": "garbage", "bot": "chaos", "pid": 1, "match_id": "m1", "seat": 0},
        ]
        audit = soak.Audit()
        soak.audit_faults({"m1": record}, injected, audit)
        assert not audit.checks["every injected fault is recorded under its reason code"]
        assert any("MALFORMED_MESSAGE" in p for p in audit.problems)
        record["faults"].append({"seat": 0, "reason": "MALFORMED_MESSAGE", "message": "", "hand": 0, "step": 3})
        audit = soak.Audit()
        soak.audit_faults({"m1": record}, injected, audit)
        assert audit.checks["every injected fault is recorded under its reason code"], audit.problems


class TestChaosPieces:
    """The chaos bot's seeded parts."""

    def test_spec_parses_and_picks_by_cumulative_probability(self) -> None:
        """Kinds are tested in FAULT_KINDS order; unknown kinds and sums over 1 are refused."""
        spec = ChaosSpec.parse("timeout=0.1, crash=0.2")
        assert [spec.pick(u) for u in (0.05, 0.15, 0.29, 0.31)] == ["timeout", "crash", "crash", None]
        assert str(ChaosSpec.parse("none")) == "none" and ChaosSpec.parse("").pick(0.0) is None
        for bad in ("boom=0.1", "timeout=2", "timeout=0.6,crash=0.6", "timeout"):
            with pytest.raises(ConfigError):
                ChaosSpec.parse(bad)

    def test_garbage_never_parses_as_a_play_request(self) -> None:
        """Every garbage message is rejected by the protobuf parser, so the server must call it malformed."""
        from google.protobuf.message import DecodeError

        from gaigel_api.v1 import bot_service_pb2 as pb

        for i in range(500):
            data = garbage_bytes(i / 500)
            assert data == garbage_bytes(i / 500)  # seeded
            with pytest.raises(DecodeError):
                pb.PlayRequest.FromString(data)

    def test_a_new_process_claims_only_a_dead_process_resume_file(self, tmp_path: Path) -> None:
        """The file of a live process is left alone; a dead one's is taken over with its crash marker."""
        import os

        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        dead_pid = int(dead.stdout)
        (tmp_path / f"resume-{os.getppid()}.json").write_text("{}")  # alive: our parent
        (tmp_path / f"resume-{dead_pid}.json").write_text('{"x": 1}')
        (tmp_path / f"crash-{dead_pid}.json").write_text('{"decision_id": "abc"}')
        path, claimed, no_fault = claim_resume_file(tmp_path)
        assert (claimed, no_fault) == (dead_pid, {"abc"})
        assert path == tmp_path / f"resume-{os.getpid()}.json" and path.read_text() == '{"x": 1}'
        assert (tmp_path / f"resume-{os.getppid()}.json").exists()
        assert claim_resume_file(tmp_path)[1] is None  # nothing left to claim

    def test_no_fault_at_a_decision_the_server_kept_while_the_bot_was_away(self, tmp_path: Path) -> None:
        """After a resume, decisions up to the seat's RESUMED event were issued while it was away: no fault
        there (a timeout at the resume step could not be told from the outage's, the audit counted both)."""
        from gaigel_api.v1 import bot_service_pb2 as pb
        from gaigel_api.v1 import common_pb2, game_pb2
        from gaigel_harness.chaos import ChaosBot, ChaosSession, FaultLog

        session = ChaosSession(
            ChaosBot(1),
            cast(Any, None),  # never called: the messages are handed to the session directly
            spec=ChaosSpec.parse("timeout=1"),  # every fresh decision times out
            fault_log=FaultLog(tmp_path / "faults.jsonl"),
            no_fault=set(),
            token="t",
            name="chaos",
            version="v",
            matches=None,
            connect_timeout=1.0,
            initial_backoff=0.1,
            max_backoff=1.0,
        )

        def decision(seq: int, did: str) -> pb.PlayResponse:
            request = pb.DecisionRequest(decision_id=did, legal_actions=[pb.LegalAction(id=3)])
            request.time_left.FromMilliseconds(0)  # the injected timeout sleeps only its margin
            return pb.PlayResponse(sequence=seq, decision_request=request)

        def fault(seq: int, seat: int, reason: int) -> pb.PlayResponse:
            return pb.PlayResponse(sequence=seq, event=game_pb2.Event(fault=common_pb2.Fault(seat=seat, reason=reason)))

        messages = [
            (pb.PlayResponse(sequence=1, match_start=pb.MatchStart(match_id="m", seat=0)), False),
            (decision(2, "before"), False),  # fresh: faulted
            (pb.PlayResponse(sequence=0, welcome=pb.Welcome(resumed=True)), True),
            (decision(3, "kept-1"), True),  # issued while away
            (fault(4, 1, common_pb2.FAULT_REASON_RESUMED), True),  # another seat's RESUMED
            (decision(5, "kept-2"), True),
            (fault(6, 0, common_pb2.FAULT_REASON_RESUMED), True),  # ours: caught up
            (decision(7, "after"), True),  # fresh again
        ]
        for message, resuming in messages:
            session.handle(message, resuming)
        lines = [json.loads(line) for line in (tmp_path / "faults.jsonl").read_text().splitlines()]
        assert [(e["kind"], e["decision_id"]) for e in lines] == [("timeout", "before"), ("timeout", "after")]

"""The server seen by standard tools: grpcurl through reflection and health, promtool on the metrics.

Skipped when a tool is absent, failed when ``CI`` is set (see tools.py for where they are looked for).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from srvkit import Admin, ScriptedBot, run, running_server
from tools import require_tool

from gaigel.replay import replay


async def _run(*argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def test_grpcurl_lists_services_and_reads_health() -> None:
    """grpcurl lists the services through reflection, describes Play, and gets SERVING from health."""
    grpcurl = require_tool("grpcurl")

    async def scenario() -> None:
        async with running_server() as (_s, port):
            target = f"127.0.0.1:{port}"
            rc, out, err = await _run(grpcurl, "-plaintext", target, "list")
            assert rc == 0, err
            services = set(out.split())
            assert {"gaigel.v1.BotService", "gaigel.v1.MatchService", "grpc.health.v1.Health"} <= services, out
            rc, out, err = await _run(grpcurl, "-plaintext", target, "describe", "gaigel.v1.BotService")
            assert rc == 0, err
            assert "rpc Play ( stream .gaigel.v1.PlayRequest ) returns ( stream .gaigel.v1.PlayResponse )" in out
            for service in ("", "gaigel.v1.BotService", "gaigel.v1.MatchService"):
                rc, out, err = await _run(
                    grpcurl, "-plaintext", "-d", json.dumps({"service": service}), target, "grpc.health.v1.Health/Check"
                )
                assert rc == 0, err
                assert json.loads(out) == {"status": "SERVING"}, out
            # MatchService through reflection, with the admin token as metadata
            rc, out, err = await _run(
                grpcurl,
                "-plaintext",
                "-H",
                "authorization: Bearer admin-token-for-tests",
                "-d",
                "{}",
                target,
                "gaigel.v1.MatchService/ListMatches",
            )
            assert rc == 0, err
            assert json.loads(out) == {}
            rc, out, err = await _run(grpcurl, "-plaintext", "-d", "{}", target, "gaigel.v1.MatchService/ListMatches")
            assert rc != 0 and "Unauthenticated" in out + err and "admin token" in out + err

    run(scenario())


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_promtool_checks_scraped_metrics() -> None:
    """After a match the scraped metrics pass `promtool check metrics`, and names and values match the record."""
    promtool = require_tool("promtool")

    async def scenario() -> None:
        async with running_server(metrics_port=0) as (server, port):

            def scrape() -> str:
                url = f"http://127.0.0.1:{server.metrics_port}/metrics"
                with urllib.request.urlopen(url, timeout=5) as r:
                    return r.read().decode()  # type: ignore[no-any-return]

            admin = Admin(port)
            bot = ScriptedBot(port, "alpha")
            task = asyncio.create_task(bot.run())
            m = await admin.create(2, ["alpha", "house:random"], hands=2, seed=4242)
            await task
            await admin.wait_ended(m.match_id)
            record: dict[str, Any] = await admin.record(m.match_id)
            assert replay(record).ok
            text = await asyncio.to_thread(scrape)
            rc, out, err = await _run(promtool, "check", "metrics", stdin=text.encode())
            assert rc == 0 and not out.strip() and not err.strip(), out + err

            actions = [a for h in record["hands"] for a in h["actions"]]
            by_seat = [sum(1 for a in actions if a["seat"] == s) for s in (0, 1)]
            assert by_seat[0] == bot.decisions > 0
            v = _samples(text)
            assert v[("gaigel_decisions_total", (("outcome", "answered"),))] == by_seat[0]
            assert v[("gaigel_decisions_total", (("outcome", "house"),))] == by_seat[1]
            assert v[("gaigel_decisions_total", (("outcome", "timeout_fallback"),))] == 0
            assert v[("gaigel_decision_duration_seconds_count", (("bot", "alpha"),))] == by_seat[0]
            assert v[("gaigel_decision_duration_seconds_bucket", (("bot", "alpha"), ("le", "+Inf")))] == by_seat[0]
            assert v[("gaigel_decision_duration_seconds_count", (("bot", "beta"),))] == 0
            assert v[("gaigel_matches_total", (("termination", "completed"),))] == 1
            for t in ("forfeit", "aborted", "cancelled"):
                assert v[("gaigel_matches_total", (("termination", t),))] == 0
            assert all(value == 0 for (name, _), value in v.items() if name == "gaigel_faults_total")
            assert v[("gaigel_sessions_total", (("result", "accepted"),))] == 1
            assert v[("gaigel_active_matches", ())] == 0
            assert v[("gaigel_server_lag_seconds_count", ())] >= by_seat[0]
            names = {name for name, _ in v}
            assert {n for n in names if n.startswith("gaigel_")} >= {
                "gaigel_decisions_total",
                "gaigel_faults_total",
                "gaigel_matches_total",
                "gaigel_sessions_total",
                "gaigel_active_sessions",
                "gaigel_active_matches",
                "gaigel_decision_duration_seconds_sum",
                "gaigel_server_lag_seconds_bucket",
            }
            # bounded labels: no match id, seed or token in any name, label or help text (a sample's
            # value is left out: a float such as a _created timestamp may hold the digits 4242)
            shown = "\n".join(line if line.startswith("#") else line.rsplit(" ", 1)[0] for line in text.splitlines())
            assert m.match_id not in shown and "4242" not in shown and "alpha-token" not in shown
            await admin.close()
            await bot.close()

    run(scenario())

"""The per-bot metric series are capped (issue 22): thousands of registered bots keep ``/metrics``
small, the bots beyond the cap share ``bot="_other"``, and unregistering a bot frees its slot.

Real servers on loopback, bots registered with the RegisterBot admin call, real HTTP scrapes.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import urllib.request

from srvkit import Admin, ScriptedBot, admin_md, run, running_server

from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server.server import GaigelServer, ServerConfig

GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]
BOT_SERIES = re.compile(r'^gaigel_decision_duration_seconds_count\{bot="([^"]*)"\}', re.MULTILINE)


async def _scrape(server: GaigelServer) -> str:
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=30) as r:
            return r.read().decode()  # type: ignore[no-any-return]

    return await asyncio.to_thread(get)


async def _register(admin: Admin, names: list[str]) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for start in range(0, len(names), 250):
        replies = await asyncio.gather(
            *(
                admin.stub.RegisterBot(ms.RegisterBotRequest(bot_name=n), metadata=admin_md())
                for n in names[start : start + 250]
            )
        )
        tokens.update((r.bot_name, r.bot_token) for r in replies)
    return tokens


def test_5000_registered_bots_keep_metrics_under_1_mb() -> None:
    """5,000 bots registered with RegisterBot: the page is under 1 MB and holds the cap's 200
    series plus ``_other`` (uncapped it was 6.5 MB, 5,003 series)."""

    async def scenario() -> None:
        async with running_server(metrics_port=0) as (server, port):
            admin = Admin(port)
            await _register(admin, [f"many-{i:05d}" for i in range(5000)])
            text = await _scrape(server)
            series = BOT_SERIES.findall(text)
            assert len(text.encode()) < 1_000_000, len(text.encode())
            assert len(series) == 200 + 1 and len(set(series)) == len(series)
            assert "_other" in series and {"alpha", "beta", "gamma"} <= set(series)  # the config's bots came first
            assert "many-04999" not in text
            await admin.close()

    run(scenario(), timeout=120)


def test_bots_beyond_the_cap_play_into_other_and_a_freed_slot_is_reused() -> None:
    """With a cap of 3 (the config's three bots), a fourth bot's decisions count in ``_other``;
    after one bot is unregistered, the next bot registered gets its own series."""

    async def scenario() -> None:
        async with running_server(metrics_port=0, max_bot_series=3) as (server, port):
            admin = Admin(port)
            tokens = await _register(admin, ["late-1", "late-2"])
            reg = server.metrics.registry
            count = "gaigel_decision_duration_seconds_count"
            assert reg.get_sample_value(count, {"bot": "_other"}) == 0
            assert reg.get_sample_value(count, {"bot": "late-1"}) is None
            bot = ScriptedBot(port, "late-1", token=tokens["late-1"])
            task = asyncio.create_task(bot.run())
            m = await admin.create(2, ["late-1", "house:random"], hands=1, seed=5)
            await task
            await admin.wait_ended(m.match_id)
            assert bot.decisions > 0 and reg.get_sample_value(count, {"bot": "_other"}) == bot.decisions
            assert BOT_SERIES.findall(await _scrape(server)) == ["alpha", "beta", "gamma", "_other"]
            await admin.stub.UnregisterBot(ms.UnregisterBotRequest(bot_name="beta"), metadata=admin_md())
            await _register(admin, ["late-3"])
            assert sorted(BOT_SERIES.findall(await _scrape(server))) == ["_other", "alpha", "gamma", "late-3"]
            await admin.close()

    run(scenario())


def test_cap_zero_puts_every_bot_in_other() -> None:
    """``max_bot_series=0``: no per-bot series at all, only the shared one."""

    async def scenario() -> None:
        async with running_server(metrics_port=0, max_bot_series=0) as (server, port):
            admin = Admin(port)
            await _register(admin, ["zero-1"])
            assert BOT_SERIES.findall(await _scrape(server)) == ["_other"]
            await admin.close()

    run(scenario())


def test_max_bot_series_flag() -> None:
    """``gaigel serve --max-bot-series``: the default is ServerConfig's; a negative count is one line, exit 2."""
    from gaigel.cli import build_parser

    args = build_parser().parse_args(["serve"])
    assert args.max_bot_series == ServerConfig().max_bot_series == 200
    done = subprocess.run([*GAIGEL, "serve", "--max-bot-series", "-1"], capture_output=True, text=True, timeout=60)
    last = done.stderr.strip().splitlines()[-1]  # argparse: the usage, then the error in one line
    assert done.returncode == 2 and last.endswith("argument --max-bot-series: expected a count >= 0, got -1"), last

"""The docs stay true to the code: metric names, commands and links they mention exist.

* every metric the Grafana dashboard queries is registered by the server or the arena;
* the dashboard is valid JSON (and, where promtool is installed, valid PromQL);
* every ``gaigel <command>`` (and ``gaigel arena <command>``) in docs/*.md is a real
  subcommand of ``gaigel --help``;
* every relative link between docs/*.md and the README files resolves, anchors in links
  from docs/*.md included;
* the newcomer's path works as printed: the README's bot commands from a checkout without an
  activated venv, the stdio example, the transcript bot's ending, the stub include path.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DASHBOARD = DOCS / "grafana-dashboard.json"
DOC_FILES = sorted(DOCS.glob("*.md"))
README_FILES = sorted([ROOT / "README.md", *ROOT.glob("clients/*/README.md"), *ROOT.glob("docker/README.md")])

METRIC = re.compile(r"\bgaigel_[a-z0-9_]+")
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created"), "gauge": ("",)}


def registered_series() -> set[str]:
    """Every series name the server and the arena export (counters with _total, histograms with _bucket, ...)."""
    from gaigel_arena.metrics import ArenaMetrics
    from gaigel_server.metrics import ServerMetrics

    server = ServerMetrics(CollectorRegistry())
    server.bot("some-bot")
    arena = ArenaMetrics(["some-bot"])
    names: set[str] = set()
    for registry in (server.registry, arena.registry):
        for family in registry.collect():
            names.update(family.name + suffix for suffix in SUFFIXES[family.type])
    return names


def dashboard() -> dict[str, object]:
    data = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def dashboard_exprs() -> list[str]:
    """Every PromQL expression of the dashboard (panel targets and query variables)."""
    data = dashboard()
    exprs: list[str] = []

    def walk(panels: object) -> None:
        for panel in panels if isinstance(panels, list) else []:
            for target in panel.get("targets", []):
                exprs.append(target["expr"])
            walk(panel.get("panels", []))

    walk(data["panels"])
    for var in data.get("templating", {}).get("list", []):  # type: ignore[union-attr]
        if var.get("type") == "query":
            query = var["query"]
            exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def test_dashboard_is_valid_json_with_a_prometheus_datasource() -> None:
    data = dashboard()
    assert data["title"]
    assert isinstance(data["schemaVersion"], int) and data["schemaVersion"] >= 36
    variables = {v["name"]: v for v in data["templating"]["list"]}  # type: ignore[index]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in data["panels"]]  # type: ignore[union-attr]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_dashboard_queries_only_registered_metrics() -> None:
    known = registered_series()
    used = {name for expr in dashboard_exprs() for name in METRIC.findall(expr)}
    assert used, "the dashboard queries no gaigel metric"
    assert not used - known, f"unknown metrics in {DASHBOARD.name}: {sorted(used - known)}"
    # process_* come from the client library's process collector: standard, not all worth a panel.
    families = {n for n in known if not n.endswith("_created") and not n.startswith("process_")}
    bases = {re.sub(r"_(bucket|count|sum)$", "", n) for n in used}
    # every metric family of the server and the arena has a panel
    missing = {re.sub(r"_(bucket|count|sum)$", "", n) for n in families} - bases
    assert not missing, f"metrics without a panel: {sorted(missing)}"


def test_dashboard_promql_parses() -> None:
    promtool = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not promtool:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing (apt-get install -y prometheus)")
        pytest.skip("promtool is not installed")
    rules = [
        {"record": f"gaigel:docs_check_{i}", "expr": expr.replace("$__rate_interval", "5m").replace("$bot", ".*")}
        for i, expr in enumerate(dashboard_exprs())
        if not expr.startswith("label_values(")
    ]
    path = DOCS.parent / ".pytest_cache" / "dashboard-rules.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def subcommands(*args: str) -> set[str]:
    """The subcommands listed by ``gaigel [ARGS] --help``."""
    proc = subprocess.run(
        [sys.executable, "-m", "gaigel.cli", *args, "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    section = proc.stdout.split("positional arguments:", 1)[-1].split("options:", 1)[0]
    names = set(re.findall(r"(?m)^ {4}([a-z][a-z-]*)(?: {2,}|$)", section))
    assert names, proc.stdout
    return names


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: p.name)
def test_every_gaigel_command_in_the_docs_exists(doc: Path) -> None:
    commands = subcommands()
    arena = subcommands("arena")
    text = doc.read_text(encoding="utf-8")
    for match in re.finditer(r"(?<![\w/.-])gaigel ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", text):
        command, sub = match.group(1), match.group(2)
        assert command in commands, f"{doc.name}: `gaigel {command}` is not a gaigel command ({sorted(commands)})"
        if command == "arena":
            assert sub in arena, f"{doc.name}: `gaigel arena {sub}` is not an arena command ({sorted(arena)})"


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slugs(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip()
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


@pytest.mark.parametrize("doc", DOC_FILES + README_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    text = re.sub(r"(?ms)^```.*?^```", "", doc.read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc
        assert resolved.exists(), f"{doc.relative_to(ROOT)}: link {target!r} points to a missing file"
        if anchor and doc.parent == DOCS and resolved.suffix == ".md":
            assert anchor in slugs(resolved), f"{doc.relative_to(ROOT)}: link {target!r}: no heading #{anchor}"


# --- newcomer paths: the commands and examples a first-time reader copies -----------------


def readme_bot_commands() -> dict[str, list[str]]:
    """The README's commands for bot authors, keyed by their trailing comment."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Bot authors", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands: dict[str, list[str]] = {}
    for line in block.splitlines():
        command, _, comment = line.partition("  #")
        commands[comment.strip()] = shlex.split(command)
    return commands


def as_printed(argv: list[str]) -> list[str]:
    """*argv* with the README's ``.venv/bin/gaigel``: that file in a checkout set up as the README says,
    else the gaigel of the interpreter running the tests (a venv elsewhere)."""
    assert argv[0] == ".venv/bin/gaigel", argv
    if (ROOT / ".venv" / "bin" / "gaigel").exists():
        return argv
    return [str(Path(sysconfig.get_path("scripts")) / "gaigel"), *argv[1:]]


def not_activated_env(home: Path) -> dict[str, str]:
    """A shell without an activated venv: only the system folders on PATH."""
    return {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}


@pytest.mark.parametrize("label", ["Python SDK", "any language, JSON lines (needs jq)", "conformance checks"])
def test_readme_bot_commands_work_as_printed(label: str, tmp_path: Path) -> None:
    """The README's Python, stdio and check-bot commands pass from the checkout, venv not activated."""
    argv = readme_bot_commands()[label]
    for tool in ("bash", "jq") if "jq" in label else ():
        if not shutil.which(tool, path="/usr/bin:/bin"):
            if os.environ.get("CI"):
                pytest.fail(f"{tool} is missing (apt-get install -y {tool})")
            pytest.skip(f"{tool} is not installed")
    proc = subprocess.run(
        as_printed(argv), cwd=ROOT, env=not_activated_env(tmp_path), capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("ok: "), proc.stdout


def test_readme_names_every_house_bot_for_try() -> None:
    """The README's ``--house a|b|...`` lists exactly gaigel.bots.HOUSE_BOTS."""
    from gaigel.bots import HOUSE_BOTS

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"`--house ([a-z|]+)`", text)
    assert listed and sorted(listed.group(1).split("|")) == sorted(HOUSE_BOTS)


def exchange_lines(doc: Path) -> list[list[str]]:
    """The ``>``/``<`` lines of each example exchange in *doc*."""
    blocks = re.findall(r"(?ms)^```\n(.*?)^```", doc.read_text(encoding="utf-8"))
    return [[line for line in b.splitlines() if line[:2] in ("> ", "< ")] for b in blocks if b.startswith(("> ", "< "))]


def test_stdio_examples_answer_each_decision_once() -> None:
    """In docs/stdio-protocol.md, every decision line gets at most one answer and every answer follows one."""
    blocks = exchange_lines(DOCS / "stdio-protocol.md")
    assert blocks
    for lines in blocks:
        open_decision = lines[0].startswith("< ")  # a block may go on with the decision of the one before
        for line in lines:
            if line.startswith('> {"type":"decision"'):
                open_decision = True
            elif line.startswith("< "):
                assert open_decision, f"an answer without an open decision: {line[:60]}"
                open_decision = False


def test_stdio_random_bot_answers_each_decision_once() -> None:
    """clients/stdio/random_bot.sh writes exactly one answer line per decision line, none for other lines."""
    if not (shutil.which("bash") and shutil.which("jq")):
        if os.environ.get("CI"):
            pytest.fail("bash and jq are needed")
        pytest.skip("bash or jq is not installed")
    to_bot = [line[2:] for lines in exchange_lines(DOCS / "stdio-protocol.md") for line in lines if line[0] == ">"]
    decisions = [json.loads(line) for line in to_bot if line.startswith('{"type":"decision"')]
    assert len(decisions) >= 2 and len(to_bot) > len(decisions)
    proc = subprocess.run(
        ["bash", str(ROOT / "clients" / "stdio" / "random_bot.sh")],
        input="\n".join(to_bot) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(answers) == len(decisions)
    for answer, decision in zip(answers, decisions, strict=True):
        assert answer["action"] in {a["id"] for a in decision["legal_actions"]}


def python_block(doc: Path, first_line: str) -> str:
    """The ```python block of *doc* that starts with *first_line*."""
    for block in re.findall(r"(?ms)^```python\n(.*?)^```", doc.read_text(encoding="utf-8")):
        if block.startswith(first_line):
            return str(block)
    raise AssertionError(f"{doc.name}: no python block starting with {first_line!r}")


def test_transcript_bot_ends_its_stream_as_the_guide_says(tmp_path: Path) -> None:
    """The bot guide's transcript_bot.py leaves after MatchEnd and the server ends its stream: it exits 0 by itself."""
    import asyncio

    from gaigel_api.v1 import match_service_pb2 as ms
    from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
    from gaigel_server.server import ServerConfig, create_server

    script = tmp_path / "transcript_bot.py"
    script.write_text(python_block(DOCS / "bot-guide.md", "# transcript_bot.py"), encoding="utf-8")

    async def scenario() -> tuple[int | None, bytes]:
        server, port = create_server("127.0.0.1:0", ServerConfig())
        await server.start()
        try:
            token = server.bots.register("transcript")
            env = dict(os.environ, GAIGEL_SERVER=f"127.0.0.1:{port}", GAIGEL_TOKEN=token, GAIGEL_BOT_NAME="transcript")
            bot = await asyncio.create_subprocess_exec(
                sys.executable, str(script), env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
            async with grpc_channel(port) as channel:
                request = ms.CreateMatchRequest(players=2, seat_bots=["transcript", "house:random"], hands=1, seed=5)
                metadata = (("authorization", f"Bearer {server.admin_token}"),)
                await ms_grpc.MatchServiceStub(channel).CreateMatch(request, metadata=metadata, timeout=10)
            try:
                out, _ = await asyncio.wait_for(bot.communicate(), 30)
            except TimeoutError:
                bot.kill()
                await bot.wait()
                return None, b""
            return bot.returncode, out
        finally:
            await server.stop(1.0)

    code, out = asyncio.run(scenario())
    assert code == 0, "the transcript bot did not end on its own after MatchEnd"
    assert "match_end" in json.loads(out.decode().splitlines()[-1])


def grpc_channel(port: int) -> Any:
    import grpc

    return grpc.aio.insecure_channel(f"127.0.0.1:{port}")


def test_stubs_generate_with_the_documented_include_path(tmp_path: Path) -> None:
    """The bot guide's protoc command (include path proto/) compiles every .proto (run with grpc_tools'
    protoc, which has the well-known types, and its Python generator in place of the C++ one), and its
    Python command writes the stubs under the import name it gives."""
    text = (DOCS / "bot-guide.md").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("protoc -I proto "))
    argv = shlex.split(line.split("#")[0])
    out = tmp_path / "gen"
    out.mkdir()
    argv = [a.replace("--cpp_out=gen", f"--python_out={out}") for a in argv]
    files = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(argv[-1]))
    assert len(files) == 4
    protoc = [sys.executable, "-m", "grpc_tools.protoc"]
    proc = subprocess.run([*protoc, *argv[1:-1], *files], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (out / "gaigel" / "v1").glob("*_pb2.py")) == [
        "bot_service_pb2.py",
        "common_pb2.py",
        "game_pb2.py",
        "match_service_pb2.py",
    ]
    line = next(x for x in text.splitlines() if x.startswith(".venv/bin/python proto/generate.py --out "))
    argv = shlex.split(line.split("#")[0])
    argv = [sys.executable, *(str(tmp_path / "py") if a == "gen" else a for a in argv[1:])]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "py" / "mybot_pb" / "v1").glob("*_pb2.py")) == [
        "bot_service_pb2.py",
        "common_pb2.py",
        "game_pb2.py",
        "match_service_pb2.py",
    ]


def test_operator_guide_states_the_arena_metrics_address() -> None:
    """The metrics section names the arena's real default address, and no doc says it listens on all interfaces."""
    import argparse

    from gaigel_arena.commands import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["arena", "run", "x.toml"])
    text = (DOCS / "operator-guide.md").read_text(encoding="utf-8")
    section = text.split("## Prometheus metrics", 1)[1].split("\n## ", 1)[0]
    paragraph = " ".join(section.split("\n\n", 2)[1].split())
    assert f"the arena on `--metrics-address` `--metrics-port`, default address `{args.metrics_address}`" in paragraph
    assert "all interfaces" not in paragraph


def test_stdio_guide_shows_the_random_bot_as_it_is() -> None:
    """The whole bot printed in docs/stdio-protocol.md is clients/stdio/random_bot.sh, byte for byte."""
    text = (DOCS / "stdio-protocol.md").read_text(encoding="utf-8")
    shown = re.findall(r"(?ms)^```bash\n(.*?)^```", text)
    assert shown == [(ROOT / "clients" / "stdio" / "random_bot.sh").read_text(encoding="utf-8")]


def test_readme_commands_lists_every_printed_command_in_order() -> None:
    """.ci/readme-commands (run by CI on a fresh clone) starts with the README's set-up, runs the
    README's test command with the venv of that set-up, and skips only what cannot run as printed."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "readme-commands"), "--list"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    commands = [x for x in lines if x.startswith("$ ")]
    assert commands[0].startswith("$ python3 -m venv .venv && .venv/bin/pip install -e '.[test]'  [README.md block 1]")
    assert commands[1].startswith("$ .venv/bin/gaigel arena run examples/demo.toml")
    assert commands[2].startswith("$ .venv/bin/pytest  [README.md block 3]")
    assert not any(" -q " in x and "pip install" in x for x in commands)  # pip shows its progress
    skipped = [x for x in lines if x.startswith("-- ")]
    for line in skipped:
        reason = line.split("skipped (", 1)[1]
        assert reason.startswith(("has a <placeholder>", "a server that runs until stopped", "system packages")), line
    assert len(skipped) <= 12
    typescript = next(i for i, x in enumerate(commands) if "npm --prefix clients/typescript start" in x)
    assert "npm --prefix clients/typescript ci &&" in commands[typescript]  # no try before the kit's npm ci

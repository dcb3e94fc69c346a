"""The docs stay true to the code: metric names, commands and links they mention exist.

* every metric the Grafana dashboard queries is registered by the server or the arena;
* the dashboard is valid JSON (and, where promtool is installed, valid PromQL);
* every ``gaigel <command>`` (and ``gaigel arena <command>``) in docs/*.md is a real
  subcommand of ``gaigel --help``;
* every relative link between docs/*.md and the README files resolves, anchors in links
  from docs/*.md included.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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

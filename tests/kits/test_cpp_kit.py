"""The C++ kit: configure, build and play one match (skipped without the toolchain unless $CI)."""

from __future__ import annotations

import pytest
from kitlib import GAIGEL, ROOT, need, run

pytestmark = pytest.mark.slow


def test_cpp_random_bot_builds_and_plays() -> None:
    need("cmake", "c++", "protoc", "grpc_cpp_plugin", "pkg-config")
    build = ROOT / "build" / "cpp"
    r = run(["cmake", "-S", "clients/cpp", "-B", str(build)], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run(["cmake", "--build", str(build), "-j2"], timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    r = run([*GAIGEL, "try", "--players", "4", "--seed", "9", "--", str(build / "random_bot")])
    assert r.returncode == 0, r.stdout + r.stderr

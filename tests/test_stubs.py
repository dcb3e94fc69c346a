"""Python stubs for a bot of your own (docs/bot-guide.md, generating stubs): ``proto/generate.py --out DIR
--package NAME`` writes them under an import name beside the engine package ``gaigel``, where protoc's own
output (package ``gaigel.v1``, a folder ``gaigel/``) collides with it. Both are imported in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BOTH = """
from gaigel import GaigelState, deal, preset
from mybot_pb.v1 import bot_service_pb2, bot_service_pb2_grpc

state = GaigelState(preset("default", players=2), deal(seed=1, hand=0, players=2), forehand=0)
request = bot_service_pb2.PlayRequest(join=bot_service_pb2.Join(bot_name="b", bot_token="t", protocol_version=1))
again = bot_service_pb2.PlayRequest.FromString(request.SerializeToString())
assert again.join.bot_name == "b" and state.legal_actions()
assert bot_service_pb2.PlayRequest.DESCRIPTOR.full_name == "gaigel.v1.PlayRequest"
assert bot_service_pb2_grpc.BotServiceStub.__module__ == "mybot_pb.v1.bot_service_pb2_grpc"
print("both imported")
"""


def _python(code: str, path: Path) -> subprocess.CompletedProcess[str]:
    """*code* in a fresh interpreter with *path* first on its import path (as a bot's folder would be)."""
    env = dict(os.environ, PYTHONPATH=str(path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=path)


def test_generated_stubs_import_beside_the_engine(tmp_path: Path) -> None:
    made = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--out", str(tmp_path), "--package", "mybot_pb"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "mybot_pb" / "v1" / "bot_service_pb2.py").is_file()
    assert not (tmp_path / "gaigel").exists()
    ran = _python(BOTH, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "both imported"


def test_protoc_output_as_is_collides_with_the_engine(tmp_path: Path) -> None:
    """Why the guide does not print the plain protoc command for Python: its folder gaigel/ (package gaigel.v1),
    first on the import path as a bot's own folder is, hides the engine package gaigel."""
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            "proto",
            f"--python_out={tmp_path}",
            "proto/gaigel/v1/common.proto",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert made.returncode == 0, made.stderr
    ran = _python("from gaigel.v1 import common_pb2\nfrom gaigel import GaigelState", tmp_path)
    assert ran.returncode != 0 and "ImportError: cannot import name 'GaigelState' from 'gaigel'" in ran.stderr


def test_the_engine_name_and_an_existing_folder_are_refused(tmp_path: Path) -> None:
    script = str(ROOT / "proto" / "generate.py")
    bad = subprocess.run(
        [sys.executable, script, "--out", str(tmp_path), "--package", "gaigel"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "other than gaigel" in bad.stderr
    (tmp_path / "taken").mkdir()
    bad = subprocess.run(
        [sys.executable, script, "--out", str(tmp_path), "--package", "taken"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "exists already" in bad.stderr

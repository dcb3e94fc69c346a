"""The ``bwrap`` sandbox: a submitted bot in namespaces of its own, built by bubblewrap.

No daemon and no image: bubblewrap (Debian's ``bubblewrap``) sets up, for each bot
process,

* new pid, network, ipc, uts and cgroup namespaces: the bot sees only its own processes
  (``/proc`` is its namespace's), has no network but its own loopback, and when its main
  process ends the namespace's init dies and the kernel kills everything it left behind;
* a root of its own on a tmpfs with read-only views of only what it needs: ``/usr`` and
  the ``/bin``-style links, a few ``/etc`` files (the dynamic loader's cache, the
  alternatives links, Java's configuration; ``passwd`` and ``group`` made up for the bot),
  the runtime of its command (the interpreter's installation, a venv, this project's
  packages), its submission folder, and the folder of the match server's unix socket at
  ``/run/gaigel``; a private writable tmpfs at ``/tmp`` is its home and working folder.
  The arena's output folder and other bots' folders are covered by empty tmpfs mounts
  where they fall inside a mounted folder;
* ``PR_SET_NO_NEW_PRIVS`` and the seccomp filter of :mod:`gaigel_arena.seccomp`.

The bot never runs as root, nor as the organiser: when the arena runs as root, each bot
process gets a uid and gid of its own (``setpriv`` switches to it inside the sandbox, with
every capability dropped); run as a normal user, bubblewrap puts the bot in a user
namespace as uid 65534 (on the host the organiser's uid, which owns nothing the bot can
see but the read-only views). Rlimits and the cgroup are set by the launcher before it
execs ``bwrap``, so they hold for everything inside.

Tokens and the environment: the bot's environment is built from scratch (``GAIGEL_*``
variables of its session, ``PATH``, ``HOME=/tmp``, ``LANG``, and what the config passes)
and handed to ``bwrap`` as its environment, never on a command line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gaigel_arena.seccomp import SeccompUnavailable, filter_program

__all__ = [
    "SANDBOX_HOME",
    "SOCKET_DIR",
    "BwrapPlan",
    "bwrap_problem",
    "plan",
    "project_paths",
    "runtime_paths",
]

SOCKET_DIR = "/run/gaigel"
SANDBOX_HOME = "/tmp"
NOBODY = 65534
_UID_BASE = 1_000_000_000
"""Per-process uids (arena run as root) are drawn from [base, 2 * base): far above any
user's, so no file on the host belongs to them; RLIMIT_NPROC then counts the bot's own tasks."""
_ETC = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "nsswitch.conf",
    "host.conf",
    "ssl",
    "ca-certificates",
    "mime.types",
)
"""The only host ``/etc`` entries a bot sees (plus ``java-*``): no ``shadow``, no ``ssh``."""
_PROJECT_MODULES = (
    "gaigel",
    "gaigel_api",
    "gaigel_client",
    "gaigel_engine__mypyc",
    "gaigel_server",
    "gaigel_harness",
    "gaigel_arena",
)
"""The project's top-level modules a bot may import: the SDK, the engine and its compiled part,
and the packages behind the ``gaigel`` command (``gaigel bot``, the ``gaigel stdio-bot`` bridge).
Open source, no secret in them; an editable install keeps them in the checkout."""


@functools.cache
def bwrap_problem() -> str:
    """Why the ``bwrap`` sandbox cannot run here (what to install), or ``""`` when it can.

    Tries a real sandbox once: a kernel without unprivileged user namespaces, or a
    container that forbids mounts, fails here rather than at the first bot.
    """
    if not sys.platform.startswith("linux"):
        return "the bwrap sandbox needs Linux"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv is not installed (apt-get install util-linux)"
    try:
        filter_program()
    except SeccompUnavailable as e:
        return str(e)
    args = ["bwrap", *_namespaces(os.geteuid() == 0), *_system_mounts(), "--", "/usr/bin/true"]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap does not start: {e}"
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["no message"])[0]
        return f"bwrap cannot create namespaces here: {first}"
    return ""


def _namespaces(root: bool) -> list[str]:
    args = [
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "gaigel-bot",
    ]
    if not root:  # bubblewrap maps the organiser to nobody inside its user namespace
        args += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--disable-userns"]
    return args


def _system_mounts() -> list[str]:
    """/usr read-only, and /bin, /lib, ... as on the host (links on a merged-/usr system)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/", name)
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    return [*args, "--proc", "/proc", "--dev", "/dev"]


def _etc_mounts() -> list[str]:
    args = []
    etc = Path("/etc")
    names = [*_ETC, *sorted(p.name for p in etc.glob("java-*"))]
    for name in names:
        if (etc / name).exists():
            args += ["--ro-bind", str(etc / name), str(etc / name)]
    return args


def _prefix_of(path: Path) -> Path:
    """The installation folder of an executable: the parent of its ``bin``, else its own folder."""
    folder = path.parent
    return folder.parent if folder.name in ("bin", "sbin") else folder


def _interpreter(path: Path) -> Path | None:
    """The interpreter a script's ``#!`` line names, if any."""
    try:
        with path.open("rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    if not words:
        return None
    program = Path(words[0].decode(errors="replace"))
    if program.name == "env" and len(words) > 1:
        found = shutil.which(words[1].decode(errors="replace"))
        return Path(found) if found else None
    return program


def _venv_home(prefix: Path) -> Path | None:
    """The base installation a venv at *prefix* was made from (``home`` in ``pyvenv.cfg``)."""
    try:
        text = (prefix / "pyvenv.cfg").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return _prefix_of(Path(value.strip()) / "python")
    return None


def project_paths() -> list[Path]:
    """Where this installation's SDK, engine and protocol modules are (an editable install keeps
    them in the checkout, outside the venv): read-only in the sandbox, for SDK bots."""
    import importlib.util

    paths = []
    for name in _PROJECT_MODULES:
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            if spec is None:
                continue
            if spec.submodule_search_locations:
                paths += [Path(p) for p in spec.submodule_search_locations]
            elif spec.origin:
                paths.append(Path(spec.origin))
    return paths


def runtime_paths(executable: str) -> list[Path]:
    """The host folders an executable needs besides ``/usr``: its installation and, for a script,
    its interpreter's; for a venv's Python also the base Python it was made from."""
    out: list[Path] = []
    todo = [Path(executable)]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for candidate in (path, path.resolve()):
            prefix = _prefix_of(candidate)
            if not _under(prefix, [Path("/usr")]):
                out.append(prefix)
            home = _venv_home(prefix)
            if home is not None and not _under(home, [Path("/usr")]):
                out.append(home)
        interpreter = _interpreter(path.resolve())
        if interpreter is not None:
            todo.append(interpreter)
    return out


def _under(path: Path, folders: Iterable[Path]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def _minimal(paths: Iterable[Path]) -> list[Path]:
    """*paths* without those inside another one of them, sorted."""
    unique = sorted({p for p in paths if p.exists()}, key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for p in unique:
        if not _under(p, kept):
            kept.append(p)
    return sorted(kept)


@dataclasses.dataclass(frozen=True)
class BwrapPlan:
    """One bot process's sandbox: the full argument vector and what it shows of the host."""

    argv: list[str]
    uid: int
    """The bot's uid on the host (its own when the arena is root; else the organiser's)."""
    mounts: list[str]
    """Host folders visible read-only (besides /usr and the /etc files)."""
    masked: list[str]
    """Folders inside those that are covered by an empty tmpfs."""


class _Uids:
    """Fresh uids for the bot processes of one arena process (never reused in it)."""

    def __init__(self) -> None:
        self._next = _UID_BASE + secrets.randbelow(_UID_BASE - 1_000_000)

    def take(self) -> int:
        uid = self._next
        self._next += 1
        return uid


_uids = _Uids()


def plan(
    command: Sequence[str],
    *,
    executable: str,
    cwd: Path,
    folders: Iterable[Path],
    hidden: Iterable[Path],
    socket_dir: str,
    files_dir: Path,
    seccomp_fd: int,
    tmpfs_mb: int,
) -> BwrapPlan:
    """The ``bwrap`` command that runs *command* (its program found at *executable*).

    *folders* are the bot's own (its submission folder), shown read-only; arguments of
    *command* that name existing files or folders (relative to *cwd*, where the arena was
    started) are shown too, made absolute, as the bot's working folder is its tmpfs.
    *hidden* (the arena's output folder, other bots' folders, the organiser's home) are
    covered by an empty tmpfs where they fall inside a shown folder. *files_dir* is a
    private folder of the arena where the made-up ``passwd`` and ``group`` are written.
    """
    root = os.geteuid() == 0
    uid = _uids.take() if root else os.geteuid()
    inner_uid = uid if root else NOBODY
    args = [str(executable)]
    shown: list[Path] = [Path(f).resolve() for f in folders]
    for word in command[1:]:
        candidate = Path(word) if os.path.isabs(word) else cwd / word
        if word and not word.startswith("-") and candidate.exists():
            candidate = candidate.resolve()
            shown.append(candidate if candidate.is_dir() else candidate.parent)
            args.append(str(candidate))
        else:
            args.append(word)
    needed = [*runtime_paths(executable), *project_paths(), *shown]
    mounts = [p for p in _minimal(needed) if not _under(p, [Path("/usr")])]
    masked = []
    for h in sorted({Path(p).resolve() for p in hidden}):
        if _under(h, mounts) and not any(_under(n.resolve(), [h]) for n in needed):
            masked.append(h)
    passwd, group = _identity_files(files_dir, inner_uid)
    targets = [Path("/etc/passwd"), *mounts, Path(SOCKET_DIR)]
    argv = ["bwrap", *_namespaces(root), *_system_mounts()]
    # The tmpfs first: a shown folder below /tmp on the host is mounted on top of it, not hidden by it.
    argv += ["--size", str(tmpfs_mb * 2**20), "--perms", "1777", "--tmpfs", SANDBOX_HOME]
    argv += [*_parents(targets), *_etc_mounts()]
    argv += ["--ro-bind", str(passwd), "/etc/passwd", "--ro-bind", str(group), "/etc/group"]
    for m in mounts:
        argv += ["--ro-bind", str(m), str(m)]
    for h in masked:
        argv += ["--tmpfs", str(h)]
    argv += ["--ro-bind", socket_dir, SOCKET_DIR, "--chdir", SANDBOX_HOME, "--seccomp", str(seccomp_fd), "--"]
    if root:  # drop to the bot's own uid with no capability left, inside the namespaces
        argv += [
            "/usr/bin/setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    return BwrapPlan([*argv, *args], uid, [str(m) for m in mounts], [str(h) for h in masked])


def _parents(targets: Iterable[Path]) -> list[str]:
    """``--dir`` with mode 0755 for every folder above *targets* (bubblewrap would make them 0700,
    which the bot's uid could not pass through)."""
    folders = sorted({p for t in targets for p in t.parents if p != Path("/")}, key=lambda p: (len(p.parts), str(p)))
    args = []
    for folder in folders:
        args += ["--perms", "0755", "--dir", str(folder)]
    return args


def _identity_files(folder: Path, uid: int) -> tuple[Path, Path]:
    passwd, group = folder / f"passwd-{uid}", folder / f"group-{uid}"
    if not passwd.exists():
        passwd.write_text(f"root:x:0:0:root:/root:/usr/sbin/nologin\nbot:x:{uid}:{uid}:bot:{SANDBOX_HOME}:/bin/sh\n")
        group.write_text(f"root:x:0:\nbot:x:{uid}:\n")
        for f in (passwd, group):
            f.chmod(0o644)
    return passwd, group


def environment(session: Mapping[str, str], passed: Mapping[str, str], executable: str) -> dict[str, str]:
    """The whole environment of a sandboxed bot: its session's ``GAIGEL_*`` variables, what the
    config passes, a ``PATH`` with its runtime's ``bin`` first, ``HOME`` on its tmpfs."""
    bins = [str(Path(executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
    env = {"PATH": os.pathsep.join(dict.fromkeys(bins)), "HOME": SANDBOX_HOME, "TMPDIR": SANDBOX_HOME}
    env["LANG"] = "C.UTF-8"
    env.update(passed)
    env.update(session)
    return env


def seccomp_file(folder: Path) -> Path:
    """The filter program written once into the arena's private *folder* (opened per bot process)."""
    path = folder / "seccomp.bpf"
    if not path.exists():
        path.write_bytes(filter_program())
        path.chmod(0o600)
    return path

"""A control group per sandboxed bot process: its memory, process count and CPU time.

Memory limits by address space (``RLIMIT_AS``) are the wrong tool for runtimes that
reserve far more virtual memory than they use (a JVM, Go, V8): a cgroup limits what a
bot really uses, and its counters say afterwards whether the kernel's OOM killer or the
pids limit struck. Both layouts are handled:

* **cgroup v1** (one hierarchy per controller): a folder ``gaigel-...`` below the arena's
  own group in the ``memory``, ``pids`` and ``cpuacct`` hierarchies (root, or a user the
  hierarchies were delegated to).
* **cgroup v2** (one unified hierarchy): a child of the arena's own group, when that group
  delegates the ``memory`` and ``pids`` controllers (``cgroup.subtree_control``).

Where neither can be created, :func:`create` returns None and the sandbox falls back to
rlimits (``RLIMIT_DATA`` for memory); the record says which was enforced.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from pathlib import Path

__all__ = ["BotCgroup", "cgroup_version", "create"]

_ROOT = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("memory", "pids", "cpuacct")


def _own_groups() -> dict[str, str]:
    """This process's group per v1 controller, and ``""`` -> its v2 group."""
    groups: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            groups[""] = path
        for name in controllers.split(","):
            groups[name] = path
    return groups


def _v1_folders() -> dict[str, Path]:
    """The arena's own folder in each v1 hierarchy this process may create groups in."""
    groups = _own_groups()
    folders = {}
    for name in _V1_CONTROLLERS:
        base = _ROOT / name
        if name in groups and (base / "cgroup.procs").is_file():
            folder = base / groups[name].lstrip("/")
            if os.access(folder, os.W_OK):
                folders[name] = folder
    return folders


def _v2_folder() -> Path | None:
    """The arena's own v2 group, if it delegates the memory and pids controllers to children."""
    groups = _own_groups()
    if "" not in groups or not (_ROOT / "cgroup.controllers").is_file():
        return None
    folder = _ROOT / groups[""].lstrip("/")
    try:
        enabled = (folder / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    if {"memory", "pids"} <= set(enabled) and os.access(folder, os.W_OK):
        return folder
    return None


def cgroup_version() -> int:
    """2 or 1 where this process can create limited groups (memory and pids), else 0."""
    if _v2_folder() is not None:
        return 2
    if {"memory", "pids"} <= set(_v1_folders()):
        return 1
    return 0


def counter(text: str, key: str) -> int:
    """The value of *key* in the text of a flat-keyed cgroup file (``pids.events``, ``cpu.stat``,
    ``memory.events``, ``memory.oom_control``); 0 when it is not there."""
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


@dataclasses.dataclass
class BotCgroup:
    """The group of one bot process: created before it starts, removed after it ended."""

    version: int
    folders: dict[str, Path]
    """Controller (``memory``, ``pids``, ``cpuacct``; all ``""`` on v2) -> the group's folder."""

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files the bot's launcher writes its pid to (one per v1 hierarchy)."""
        return sorted({str(folder / "cgroup.procs") for folder in self.folders.values()})

    def _read(self, controller: str, name: str) -> str:
        folder = self.folders.get(controller) or self.folders.get("")
        if folder is None:
            return ""
        try:
            return (folder / name).read_text()
        except OSError:
            return ""

    def oom_kills(self) -> int:
        """Processes of the group the kernel's OOM killer ended at the memory limit."""
        text = self._read("memory", "memory.oom_control" if self.version == 1 else "memory.events")
        return counter(text, "oom_kill")

    def pids_refused(self) -> int:
        """Forks the pids limit refused."""
        return counter(self._read("pids", "pids.events"), "max")

    def cpu_seconds(self) -> float:
        """CPU time the group's processes used."""
        if self.version == 1:
            text = self._read("cpuacct", "cpuacct.usage").strip()
            return int(text) / 1e9 if text.isdigit() else 0.0
        return counter(self._read("", "cpu.stat"), "usage_usec") / 1e6

    def pids(self) -> list[int]:
        out: set[int] = set()
        for file in self.procs_files():
            with contextlib.suppress(OSError):
                out.update(int(p) for p in Path(file).read_text().split())
        return sorted(out)

    def kill(self) -> None:
        """SIGKILLs every process left in the group (v2: ``cgroup.kill`` where the kernel has it)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.folders[""] / "cgroup.kill").write_text("1")
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """Removes the group's folders; False while a process is still in one."""
        removed = True
        for folder in set(self.folders.values()):
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                removed = False
        return removed


def create(name: str, memory_bytes: int, pids: int) -> BotCgroup | None:
    """A new group *name* with *memory_bytes* of memory (no swap) and *pids* tasks, or None where
    this process cannot create one (then the caller falls back to rlimits)."""
    v2 = _v2_folder()
    if v2 is not None:
        folder = v2 / name
        try:
            folder.mkdir()
            (folder / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):  # no swap accounting compiled in
                (folder / "memory.swap.max").write_text("0")
            (folder / "pids.max").write_text(str(pids))
        except OSError:
            BotCgroup(2, {"": folder}).remove()
            return None
        return BotCgroup(2, {"": folder})
    parents = _v1_folders()
    if not {"memory", "pids"} <= set(parents):
        return None
    group = BotCgroup(1, {c: parent / name for c, parent in parents.items()})
    try:
        for folder in group.folders.values():
            folder.mkdir()
        (group.folders["memory"] / "memory.limit_in_bytes").write_text(str(memory_bytes))
        with contextlib.suppress(OSError):  # memsw exists only with swap accounting
            (group.folders["memory"] / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (group.folders["pids"] / "pids.max").write_text(str(pids))
    except OSError:
        group.remove()
        return None
    return group

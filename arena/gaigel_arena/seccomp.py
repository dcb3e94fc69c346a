"""The seccomp filter of the ``bwrap`` sandbox, compiled by libseccomp (through :mod:`ctypes`).

The filter allows every system call but the ones a game bot has no use for and that widen
the attack surface of the shared kernel: debugging other processes, mounting, loading
kernel code, keyrings, BPF, new namespaces (``unshare``, ``setns``, ``clone`` with a
``CLONE_NEW*`` flag; ``clone3`` answers ``ENOSYS`` so that the C library falls back to
``clone``, whose flags a filter can see). Refused calls fail with ``EPERM``; system calls
of another architecture (the 32-bit ABI) kill the process, libseccomp's default.

libseccomp (Debian's ``libseccomp2``, on every system that has systemd or podman) is the
library the field uses for this; it is loaded with :mod:`ctypes` rather than the
``python3-seccomp`` bindings, which belong to the system's Python and not to a venv's.
bubblewrap loads the exported program (``bwrap --seccomp FD``) just before it runs the bot.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import tempfile

__all__ = ["DENIED_NAMESPACE_FLAGS", "DENIED_SYSCALLS", "SeccompUnavailable", "filter_program"]

DENIED_SYSCALLS = (
    # other processes' memory
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    # file systems and mounts
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    "quotactl",
    "swapon",
    "swapoff",
    # kernel code and state
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "reboot",
    "acct",
    "syslog",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fanotify_init",
    # keyrings
    "keyctl",
    "add_key",
    "request_key",
    # namespaces
    "unshare",
    "setns",
)
"""System calls refused outright (``EPERM``); names this kernel's libseccomp does not know are skipped."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWCGROUP = 0x02000000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWTIME = 0x00000080
DENIED_NAMESPACE_FLAGS = (
    _CLONE_NEWNS,
    _CLONE_NEWCGROUP,
    _CLONE_NEWUTS,
    _CLONE_NEWIPC,
    _CLONE_NEWUSER,
    _CLONE_NEWPID,
    _CLONE_NEWNET,
    _CLONE_NEWTIME,
)
"""``clone`` with any of these flags is refused (threads and ``fork`` pass)."""

_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class SeccompUnavailable(RuntimeError):
    """libseccomp is missing or refused to build the filter."""


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as e:
        raise SeccompUnavailable(f"libseccomp not found ({e}); apt-get install libseccomp2") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


@functools.cache
def filter_program() -> bytes:
    """The filter as a BPF program (``struct sock_filter`` array) for ``bwrap --seccomp``.

    :raises SeccompUnavailable: without libseccomp, or when it refuses a rule.
    """
    lib = _library()
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:

        def add(action: int, name: str, *cmps: _ArgCmp) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:  # not a system call of this architecture (or this libseccomp)
                return
            array = (_ArgCmp * len(cmps))(*cmps) if cmps else None
            rc = lib.seccomp_rule_add_array(ctx, action, number, len(cmps), array)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_rule_add({name}) failed: {os.strerror(-rc)}")

        for name in DENIED_SYSCALLS:
            add(_act_errno(errno.EPERM), name)
        add(_act_errno(errno.ENOSYS), "clone3")  # its flags live in memory a filter cannot read
        for flag in DENIED_NAMESPACE_FLAGS:
            add(_act_errno(errno.EPERM), "clone", _ArgCmp(0, _SCMP_CMP_MASKED_EQ, flag, flag))
        with tempfile.TemporaryFile() as out:
            rc = lib.seccomp_export_bpf(ctx, out.fileno())
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            out.seek(0)
            program = out.read()
    finally:
        lib.seccomp_release(ctx)
    if not program or len(program) % 8:
        raise SeccompUnavailable(f"libseccomp exported {len(program)} bytes, not a BPF program")
    return program

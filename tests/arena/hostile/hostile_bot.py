"""A hostile submitted bot for the sandbox tests: at its first decision it attacks, then plays randomly.

``python hostile_bot.py PROBE[,PROBE...] [NAME=VALUE ...]``. Each probe prints one line to
stderr, ``hostile: PROBE contained|BREACHED DETAIL`` (its log file, kept by the arena);
attacks that a limit kills print nothing. The values name what the test created for it:

* ``env``: the organiser's secret variables (``secret_env`` names one) in this environment;
* ``ssh`` / ``shadow``: read ``ssh`` (a key in the organiser's home) / ``/etc/shadow``;
* ``otherbot``: read and write files in another bot's folder (``other``);
* ``token``: another bot's ``GAIGEL_TOKEN`` in ``/proc/*/environ`` or ``/proc/*/cmdline``;
* ``signal``: signal 0 to the runner's pid (``runner``), a harmless "may I kill it?";
* ``journal``: write into the arena's output folder (``out``);
* ``loopback`` / ``unix``: connect to a TCP port on loopback (``tcp``) / a unix socket (``sock``);
* ``daemon``: double-fork a process that sleeps with ``marker`` in its command line;
* ``fork``, ``mem``, ``cpu``, ``flood``: 200 processes, 4 GB, a spinning CPU, 100 MB of stderr.
"""

import contextlib
import os
import random
import socket
import sys
import time

from gaigel_client import Bot, run

FORK_ATTEMPTS = 200  # bounded: this also runs unconfined in the `process` test
MEM_TARGET = 4 * 2**30
CHUNK = 64 * 2**20
FLOOD = 100 * 2**20


def verdict(probe: str, breached: bool, detail: str) -> None:
    print(f"hostile: {probe} {'BREACHED' if breached else 'contained'} {detail}", file=sys.stderr, flush=True)


def read(probe: str, path: str) -> None:
    try:
        with open(path, "rb") as f:
            verdict(probe, True, f"read {len(f.read())} bytes of {path}")
    except OSError as e:
        verdict(probe, False, f"{type(e).__name__}: {e}")


def probe_env(args: dict[str, str]) -> None:
    leaked = [n for n in (args.get("secret_env", ""), "GAIGEL_ADMIN_TOKEN") if n and n in os.environ]
    verdict("env", bool(leaked), f"saw {leaked}" if leaked else f"{len(os.environ)} variables, no secret")


def probe_otherbot(args: dict[str, str]) -> None:
    folder = args["other"]
    done = []
    with contextlib.suppress(OSError):
        done.append(f"listed {len(os.listdir(folder))} entries")
    try:
        with open(os.path.join(folder, "hostile-was-here"), "w") as f:
            f.write("hostile\n")
        done.append("wrote a file")
    except OSError:
        pass
    verdict("otherbot", bool(done), ", ".join(done) or f"{folder} neither readable nor writable")


def probe_token() -> None:
    own = os.environ.get("GAIGEL_TOKEN", "").encode()
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{entry}/{name}", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            for word in data.split(b"\0"):
                for key in (b"GAIGEL_TOKEN=", b"--env=GAIGEL_TOKEN="):
                    if word.startswith(key) and word[len(key) :] != own:
                        found.add(word[len(key) :][:6])
    verdict("token", bool(found), f"{len(found)} other token(s)" if found else "no other bot's token visible")


def probe_signal(args: dict[str, str]) -> None:
    pid = int(args["runner"])
    try:
        os.kill(pid, 0)
        verdict("signal", True, f"may signal the runner (pid {pid})")
    except OSError as e:
        verdict("signal", False, f"{type(e).__name__}: {e}")


def probe_journal(args: dict[str, str]) -> None:
    out = args["out"]
    written = []
    for target in (os.path.join(out, "pwned"), os.path.join(out, "arena.sqlite")):
        try:
            with open(target, "ab") as f:
                f.write(b"")
            written.append(target)
        except OSError:
            pass
    verdict("journal", bool(written), f"opened {written} for writing" if written else "output folder unreachable")


def probe_loopback(args: dict[str, str]) -> None:
    host, port = args["tcp"].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as conn:
            conn.sendall(b"hostile bot was here\n")
        verdict("loopback", True, f"connected to {args['tcp']}")
    except OSError as e:
        verdict("loopback", False, f"{type(e).__name__}: {e}")


def probe_unix(args: dict[str, str]) -> None:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(3)
            conn.connect(args["sock"])
            conn.sendall(b"hostile bot was here\n")
        verdict("unix", True, f"connected to {args['sock']}")
    except OSError as e:
        verdict("unix", False, f"{type(e).__name__}: {e}")


def probe_daemon(args: dict[str, str]) -> None:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sh", ["/bin/sh", "-c", f"sleep 60 # {args['marker']}"])
        os._exit(0)
    verdict("daemon", False, "left a daemon behind (the test looks for it after the arena)")


def attack_fork() -> None:
    children = 0
    for _ in range(FORK_ATTEMPTS):
        try:
            pid = os.fork()
        except OSError as e:
            verdict("fork", False, f"{children} children, then {type(e).__name__}: {e}")
            return
        if pid == 0:
            time.sleep(10)
            os._exit(0)
        children += 1
    verdict("fork", True, f"{children} children")


def attack_mem() -> None:
    hoard = []
    try:
        while len(hoard) * CHUNK < MEM_TARGET:
            block = bytearray(CHUNK)
            for i in range(0, CHUNK, 4096):  # touch every page: really use the memory
                block[i] = 1
            hoard.append(block)
        verdict("mem", True, f"allocated {len(hoard) * CHUNK >> 20} MiB")
    except MemoryError:
        got = len(hoard) * CHUNK >> 20
        hoard.clear()
        verdict("mem", False, f"MemoryError after {got} MiB")


def attack_cpu() -> None:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        pass
    verdict("cpu", True, "spun 30 s")


def attack_flood() -> None:
    line = b"x" * 1023 + b"\n"
    out = sys.stderr.buffer
    for _ in range(FLOOD // len(line)):
        out.write(line)
    out.flush()
    verdict("flood", False, f"wrote {FLOOD >> 20} MiB to stderr")


class HostileBot(Bot):
    name = "hostile"

    def __init__(self, probes: list[str], args: dict[str, str]) -> None:
        self.probes, self.args, self.done = probes, args, False
        self.rng = random.Random(0)

    def decide(self, request):  # type: ignore[no-untyped-def]
        if not self.done:
            self.done = True
            for probe in self.probes:
                attack(probe, self.args)
        return self.rng.choice(request.legal_actions).id


def attack(probe: str, args: dict[str, str]) -> None:
    if probe in ("ssh", "shadow"):
        read(probe, args["ssh"] if probe == "ssh" else "/etc/shadow")
    elif probe in ("env", "otherbot", "signal", "journal", "loopback", "unix", "daemon"):
        globals()[f"probe_{probe}"](args)
    elif probe == "token":
        probe_token()
    elif probe != "none":
        {"fork": attack_fork, "mem": attack_mem, "cpu": attack_cpu, "flood": attack_flood}[probe]()


if __name__ == "__main__":
    named = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
    run(HostileBot(sys.argv[1].split(","), named))

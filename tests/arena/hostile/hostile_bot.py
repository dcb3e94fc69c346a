"""A hostile submitted bot for the sandbox tests: at its first decision it attacks, then plays randomly.

``python hostile_bot.py ATTACK [ARG]``, ATTACK one of ``tcp HOST:PORT``, ``home PATH``,
``write PATH``, ``fork``, ``mem``, ``cpu``. Each attack prints one line to stderr,
``hostile: ATTACK contained|BREACHED DETAIL``; attacks that a limit kills print nothing.
"""

import os
import random
import socket
import sys
import time

from gaigel_client import Bot, run

FORK_ATTEMPTS = 200  # bounded: this also runs unconfined in the `process` test
MEM_TARGET = 4 * 2**30
CHUNK = 64 * 2**20


def verdict(attack: str, breached: bool, detail: str) -> None:
    print(f"hostile: {attack} {'BREACHED' if breached else 'contained'} {detail}", file=sys.stderr, flush=True)


def attack_tcp(target: str) -> None:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as conn:
            conn.sendall(b"hostile bot was here\n")
        verdict("tcp", True, f"connected to {target}")
    except OSError as e:
        verdict("tcp", False, f"{type(e).__name__}: {e}")


def attack_home(path: str) -> None:
    try:
        with open(path) as f:
            verdict("home", True, f"read {len(f.read())} characters of {path}")
    except OSError as e:
        verdict("home", False, f"{type(e).__name__}: {e}")


def attack_write(path: str) -> None:
    written = []
    for target in (path, "/etc/hostile", "/opt/hostile/hostile", "/run/gaigel/hostile"):
        try:
            with open(target, "w") as f:
                f.write("hostile bot was here\n")
            written.append(target)
        except OSError:
            pass
    verdict("write", bool(written), f"wrote {written}" if written else "every write outside /tmp refused")


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


class HostileBot(Bot):
    name = "hostile"

    def __init__(self, attack: str, arg: str) -> None:
        self.attack, self.arg, self.done = attack, arg, False
        self.rng = random.Random(0)

    def decide(self, request):  # type: ignore[no-untyped-def]
        if not self.done:
            self.done = True
            attacks = {"tcp": attack_tcp, "home": attack_home, "write": attack_write}
            if self.attack in attacks:
                attacks[self.attack](self.arg)
            else:
                {"fork": attack_fork, "mem": attack_mem, "cpu": attack_cpu}[self.attack]()
        return self.rng.choice(request.legal_actions).id


if __name__ == "__main__":
    run(HostileBot(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""))

#!/opt/gaigel/bin/python3
"""The image's HEALTHCHECK: asks the server's grpc.health.v1 service whether it is SERVING.

The address is ``$GAIGEL_HEALTH_ADDRESS`` if set, else the ``--address`` of the
``gaigel serve`` running as the container's PID 1 (a wildcard host is asked on the
loopback), else 127.0.0.1:50051. ``$GAIGEL_HEALTH_SERVICE`` names the service to ask
about (default "", the whole server). Exit 0 when SERVING, 1 otherwise.
"""

from __future__ import annotations

import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

DEFAULT = "127.0.0.1:50051"
WILDCARDS = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}


def serve_address() -> str:
    """The --address of PID 1's command line, if it is one."""
    try:
        with open("/proc/1/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
    except OSError:
        return DEFAULT
    for i, arg in enumerate(argv):
        if arg == "--address" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--address="):
            return arg.split("=", 1)[1]
    return DEFAULT


def target() -> str:
    address = os.environ.get("GAIGEL_HEALTH_ADDRESS") or serve_address()
    host, sep, port = address.rpartition(":")
    if not sep:
        return DEFAULT
    return f"{WILDCARDS.get(host, host)}:{port}"


def main() -> int:
    address = target()
    service = os.environ.get("GAIGEL_HEALTH_SERVICE", "")
    try:
        with grpc.insecure_channel(address) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=3.0
            )
    except grpc.RpcError as e:
        print(f"unhealthy: {address}: {e.code().name}: {e.details()}", file=sys.stderr)
        return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{address}: {status}")
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    sys.exit(main())

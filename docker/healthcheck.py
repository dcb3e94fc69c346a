#!/opt/gaigel/bin/python3
"""The image's HEALTHCHECK: asks the server's grpc.health.v1 service whether it is SERVING.

The address is ``$GAIGEL_HEALTH_ADDRESS`` if set, else the ``--address`` of the
``gaigel serve`` running as the container's PID 1 (a wildcard host is asked on the
loopback), else 127.0.0.1:50051. ``$GAIGEL_HEALTH_SERVICE`` names the service to ask
about (default "", the whole server). Exit 0 when SERVING, 1 otherwise.

TLS: when PID 1 was started with ``--tls-cert`` (or ``$GAIGEL_HEALTH_TLS_CERT`` names a PEM
file) the check speaks TLS and trusts that certificate (``$GAIGEL_HEALTH_CA`` names another
CA file, e.g. when the server's certificate comes from a public CA). The name checked against
the certificate is ``$GAIGEL_HEALTH_TLS_NAME``, else the certificate's first DNS name, since
the check connects to the loopback address rather than the public name.
"""

from __future__ import annotations

import os
import ssl
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

DEFAULT = "127.0.0.1:50051"
WILDCARDS = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}


def serve_option(name: str) -> str | None:
    """The value of option *name* (e.g. ``--address``) on PID 1's command line, if given."""
    try:
        with open("/proc/1/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
    except OSError:
        return None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def target() -> str:
    address = os.environ.get("GAIGEL_HEALTH_ADDRESS") or serve_option("--address") or DEFAULT
    host, sep, port = address.rpartition(":")
    if not sep:
        return DEFAULT
    return f"{WILDCARDS.get(host, host)}:{port}"


def first_dns_name(cert_file: str) -> str | None:
    """The first DNS subjectAltName of a PEM certificate (None if it has none or cannot be read)."""
    try:
        decoded = ssl._ssl._test_decode_cert(cert_file)  # type: ignore[attr-defined]
    except (OSError, ssl.SSLError, AttributeError):
        return None
    names = [value for kind, value in decoded.get("subjectAltName", ()) if kind == "DNS"]
    return names[0] if names else None


def open_channel(address: str) -> grpc.Channel:
    """A plaintext channel, or a TLS one when the server was started with a certificate."""
    cert = os.environ.get("GAIGEL_HEALTH_TLS_CERT") or serve_option("--tls-cert")
    if not cert:
        return grpc.insecure_channel(address)
    ca = os.environ.get("GAIGEL_HEALTH_CA") or cert
    with open(ca, "rb") as f:
        roots = f.read()
    options = []
    name = os.environ.get("GAIGEL_HEALTH_TLS_NAME") or first_dns_name(cert)
    if name:
        options.append(("grpc.ssl_target_name_override", name))
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=roots), options=options)


def main() -> int:
    address = target()
    service = os.environ.get("GAIGEL_HEALTH_SERVICE", "")
    try:
        channel = open_channel(address)
    except OSError as e:
        print(f"unhealthy: {address}: cannot read the TLS certificate: {e}", file=sys.stderr)
        return 1
    try:
        with channel:
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

"""Exceptions raised by :func:`gaigel_client.run`."""

from __future__ import annotations

import grpc


class GaigelClientError(Exception):
    """Base class of every error the SDK raises."""


class ConfigError(GaigelClientError):
    """The bot was started without what it needs (no token, a bad server address, ...)."""


class ServerError(GaigelClientError):
    """The server ended the stream with an error status; the message says what to fix.

    :ivar code: the gRPC status code, for example ``grpc.StatusCode.UNAUTHENTICATED``.
    :ivar details: the server's message.
    """

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        self.details = details
        super().__init__(f"the server ended the session with {code.name}: {details or '(no message)'}")


class ConnectionLostError(GaigelClientError):
    """The server stayed unreachable longer than the SDK was allowed to wait."""

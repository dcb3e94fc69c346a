"""Bot and admin tokens: issued with :mod:`secrets`, compared in constant time, never logged."""

from __future__ import annotations

import hmac
import json
import re
import secrets
import tomllib
from collections.abc import Mapping
from pathlib import Path

from gaigel_server.guard import clip

BOT_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
HOUSE_PREFIX = "house:"


class AuthError(Exception):
    """A failed authentication; the message says what to fix (never the token)."""


def new_token() -> str:
    """A fresh unguessable token."""
    return secrets.token_urlsafe(24)


def tokens_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two tokens."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def check_bot_name(name: str) -> str:
    """Returns *name* if it is a valid bot name.

    :raises ValueError: naming the rule.
    """
    if not BOT_NAME.match(name):
        raise ValueError(f"bot name {clip(name)!r} must be 1 to 64 characters from A-Z, a-z, 0-9, '_', '-' and '.'")
    return name


def load_bots_file(path: str | Path) -> dict[str, str]:
    """Reads a TOML or JSON file mapping bot names to tokens (TOML may nest them under ``[bots]``).

    :raises ValueError: for an unreadable file or a bad entry.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"cannot read bots file {path}: {e.strerror}") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"bots file {path} is not valid {'JSON' if p.suffix == '.json' else 'TOML'}: {e}") from None
    if isinstance(data, dict) and isinstance(data.get("bots"), dict):
        data = data["bots"]
    if not isinstance(data, dict):
        raise ValueError(f"bots file {path} must map bot names to tokens")
    out: dict[str, str] = {}
    for name, token in data.items():
        check_bot_name(str(name))
        if not isinstance(token, str) or len(token) < 8:
            raise ValueError(f"bots file {path}: the token of {name!r} must be a string of at least 8 characters")
        out[str(name)] = token
    return out


class BotRegistry:
    """Registered bot names and their tokens."""

    def __init__(self, bots: Mapping[str, str] | None = None) -> None:
        self._tokens: dict[str, str] = dict(bots or {})

    def register(self, name: str, rotate: bool = False) -> str:
        """Registers *name* and returns its new token.

        :raises ValueError: for a bad name.
        :raises KeyError: if the name exists and *rotate* is false.
        """
        check_bot_name(name)
        if name in self._tokens and not rotate:
            raise KeyError(name)
        token = new_token()
        self._tokens[name] = token
        return token

    def set(self, name: str, token: str) -> None:
        """Registers *name* with a token issued elsewhere (the front of ``gaigel serve --processes``)."""
        check_bot_name(name)
        self._tokens[name] = token

    def unregister(self, name: str) -> bool:
        """Forgets *name* and revokes its token; False if it was not registered."""
        return self._tokens.pop(name, None) is not None

    def __contains__(self, name: object) -> bool:
        return name in self._tokens

    def tokens(self) -> dict[str, str]:
        """A copy of every registered name and its token (for a process that must know them all)."""
        return dict(self._tokens)

    def verify(self, name: str, token: str) -> None:
        """Checks that *token* belongs to bot *name*.

        :raises AuthError: for an unknown name or a wrong token.
        """
        expected = self._tokens.get(name)
        # Compare against something even for unknown names, so timing does not tell them apart.
        ok = tokens_equal(token, expected if expected is not None else new_token())
        if expected is None or not ok:
            raise AuthError(f"unknown or revoked bot token for bot {clip(name)!r}: check GAIGEL_TOKEN and the bot name")


def bearer_token(metadata: object) -> str:
    """The token of an ``authorization: Bearer <token>`` metadata entry, or ''."""
    if not metadata:
        return ""
    for item in metadata:  # type: ignore[attr-defined]
        key, value = item[0], item[1]
        if key.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else str(value)
            scheme, _, tok = text.partition(" ")
            if scheme.lower() == "bearer":
                return tok.strip()
    return ""


__all__ = [
    "HOUSE_PREFIX",
    "AuthError",
    "BotRegistry",
    "bearer_token",
    "check_bot_name",
    "load_bots_file",
    "new_token",
    "tokens_equal",
]

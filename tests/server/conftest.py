"""Fixtures of the server tests (helpers live in srvkit.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _quiet_logs() -> None:
    from gaigel_server.logging import configure_logging

    configure_logging("warning", json=True)

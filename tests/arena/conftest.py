"""Arena test fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """CLI tests configure structlog globally; start and end every test with the defaults."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()

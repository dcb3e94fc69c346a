"""structlog setup, done once at the edge: JSON lines off a terminal, readable on one."""

from __future__ import annotations

import logging as std_logging
import sys
from typing import Any

import structlog


def configure_logging(level: str = "info", json: bool | None = None) -> None:
    """Configures structlog: ``merge_contextvars`` first, ISO UTC timestamps, one line per event.

    *json* None means JSON unless stderr is a terminal.
    """
    if json is None:
        json = not sys.stderr.isatty()
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors.append(structlog.processors.dict_tracebacks)
    processors.append(renderer)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(getattr(std_logging, level.upper(), std_logging.INFO)),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),  # one write per line: processes share stderr
        cache_logger_on_first_use=True,
    )


def get_logger(**context: Any) -> Any:
    """A bound logger of the server."""
    return structlog.get_logger("gaigel_server").bind(**context)


__all__ = ["configure_logging", "get_logger"]

"""Makes clients/python importable even when the editable install predates it."""

from __future__ import annotations

import sys
from pathlib import Path

CLIENT_ROOT = Path(__file__).resolve().parents[2] / "clients" / "python"

try:
    import gaigel_api  # noqa: F401
    import gaigel_client  # noqa: F401
except ImportError:
    sys.path.insert(0, str(CLIENT_ROOT))

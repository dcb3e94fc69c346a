"""Pickling for the engine's frozen dataclasses, compiled or not.

A mypyc-compiled frozen dataclass cannot be restored field by field (pickle's default),
so each defines ``__reduce__`` as ``reduce_through_constructor(self)``: rebuilt by calling
the class with its fields. The arena's worker processes and Ray tasks receive rulesets and
deals and send back hand outcomes this way.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def reduce_through_constructor(obj: Any) -> tuple[type[Any], tuple[object, ...]]:
    """``(class, field values)``: what ``__reduce__`` returns for a frozen dataclass *obj*."""
    return (type(obj), tuple(getattr(obj, f.name) for f in dataclasses.fields(obj)))

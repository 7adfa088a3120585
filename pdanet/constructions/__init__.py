"""Compilers from machines to networks with hand-set weights.

The names below live in `pdanet.constructions.base` and `.table` (which import torch) and are loaded on
first use, so importing this subpackage alone stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CompiledNetwork", "ExactWeight", "available", "compile", "register"]


def __getattr__(name: str) -> Any:
    """Load a public name from `pdanet.constructions.base` on first use."""
    if name not in __all__:
        raise AttributeError(f"module 'pdanet.constructions' has no attribute {name!r}")
    home = "base" if name in ("CompiledNetwork", "ExactWeight") else "table"
    value = getattr(importlib.import_module(f"pdanet.constructions.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

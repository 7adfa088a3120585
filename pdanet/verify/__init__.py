"""Verification: run machine and network in lockstep and find the first disagreement; compare
hidden-unit counts with their theoretical bounds.

Names are loaded on first use (PEP 562), so importing this subpackage does not import torch.
Note that ``pdanet.verify`` (the attribute of the package ``pdanet``) is the *function*
`pdanet.verify.lockstep.verify`; this subpackage is ``sys.modules["pdanet.verify"]``.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule of pdanet.verify that defines it
_LAZY: dict[str, str] = {
    "BoundRow": "bounds",
    "DFABoundRow": "bounds",
    "dfa_table": "bounds",
    "format_table": "bounds",
    "information_floor": "bounds",
    "table": "bounds",
    "compare_batch": "lockstep",
    "verify": "lockstep",
    "VerifyOptions": "lockstep",
    "Counterexample": "report",
    "PhaseResult": "report",
    "Report": "report",
    "live_prefixes": "strings",
    "long_strings": "strings",
    "random_live_strings": "strings",
    "verify_transduction": "transduction",
}

__all__ = [
    "BoundRow",
    "Counterexample",
    "DFABoundRow",
    "PhaseResult",
    "Report",
    "VerifyOptions",
    "compare_batch",
    "dfa_table",
    "format_table",
    "information_floor",
    "live_prefixes",
    "long_strings",
    "random_live_strings",
    "table",
    "verify",
    "verify_transduction",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its submodule on first use."""
    try:
        sub = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'pdanet.verify' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{sub}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

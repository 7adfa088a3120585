"""Verification: run machine and network in lockstep and find the first disagreement; compare
hidden-unit counts with their theoretical bounds."""

from pdanet.verify.bounds import (
    BoundRow,
    DFABoundRow,
    dfa_table,
    format_table,
    information_floor,
    table,
)
from pdanet.verify.lockstep import compare_batch, verify
from pdanet.verify.report import Counterexample, PhaseResult, Report
from pdanet.verify.strings import live_prefixes, long_strings, random_live_strings

__all__ = [
    "BoundRow",
    "Counterexample",
    "DFABoundRow",
    "PhaseResult",
    "Report",
    "compare_batch",
    "dfa_table",
    "format_table",
    "information_floor",
    "live_prefixes",
    "long_strings",
    "random_live_strings",
    "table",
    "verify",
]

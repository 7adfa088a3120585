"""Standard finite-state examples: parity and a modular counter over bit strings. Their samplers
draw uniform bit strings (members and non-members alike)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pdanet.automata.dfa import DFA
from pdanet.automata.tasks.sampling import bits_sampler
from pdanet.errors import InputError


def _ones(string: Sequence) -> int:
    return sum(1 for a in string if a == "1")


def parity_machine() -> DFA:
    """Accepts bit strings with an odd number of 1s."""
    return DFA((0, 1), "01", {(q, a): q ^ int(a) for q in (0, 1) for a in "01"}, 0,
               accepting=(1,), name="parity")


def parity_reference(string: Sequence) -> bool:
    return _ones(string) % 2 == 1


def modular_counter_machine(modulus: int = 3, residue: int = 0) -> DFA:
    """Accepts bit strings whose number of 1s is ≡ `residue` (mod `modulus`): a cycle of
    `modulus` states."""
    n = modulus
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"the modulus must be a positive integer, got {n!r}")
    if not 0 <= residue < n:
        raise InputError(f"residue {residue!r} must lie in [0, {n})")
    return DFA(range(n), "01", {(q, a): (q + int(a)) % n for q in range(n) for a in "01"}, 0,
               accepting=(residue,), name=f"mod{n}")


def modular_counter_reference(string: Sequence, modulus: int = 3, residue: int = 0) -> bool:
    return _ones(string) % modulus == residue


def modular_counter_sampler(n: int, lengths, rng=None, modulus: int = 3,
                            residue: int = 0) -> list:
    """Uniform bit strings, whatever the modulus and residue."""
    return bits_sampler(n, lengths, rng)


__all__ = ["modular_counter_machine", "modular_counter_reference", "modular_counter_sampler",
           "parity_machine", "parity_reference"]

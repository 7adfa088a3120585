"""Slot codes for the Dyck-(k, m) stack constructions: how one bracket type fills one stack slot.

A code gives every bracket type i a vector φ_i ∈ {-1, 0, 1}^d; an empty slot is the zero vector.
Each coordinate has a fixed sign over all i (``signs``), so a unit can store |φ_i| ∈ {0, 1}.
What a construction needs from a code (all exact integers):

- ``omega``: occupancy functional, ω·φ_i ∈ [1, A] for every i (A = ``amax``) and ω·0 = 0;
- ``feat`` Z (r × d) and ``match(ids)`` → (Ψ, τ): Ψ_c·Zφ_i ≥ τ_c when i = c and ≤ τ_c − 1 when
  i ≠ c or the slot is empty — the linear read-out of "the top is bracket c";
- ``inputs(ids)`` (the open bracket's input code, q columns) and Φ (d × (q+1)) with
  φ_i = Φ·[inputs(i); 1] — so a network input of width q + 1 suffices (no one-hot of width 2k);
- ``decode(on)``: the bracket type of a slot from its thresholded units (-1 empty, -2 invalid).

Three codes: ``OneHotCode`` (d = k), ``HewittCode`` (the distributed code of Hewitt et al. 2020,
§"A distributed vocabulary code": bits p_i, complement 1 − p_i and ⌈log₂k⌉ − 1 entries −1 so that
Σφ_i = 1; d = 3⌈log₂k⌉ − 1) and ``NonzeroCode`` (ours: the binary digits of i + 1, d = ⌈log₂(k+1)⌉;
the all-zero word is "empty", so no complement half is needed).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


def ceil_log2(n: int) -> int:
    """⌈log₂ n⌉ for an integer n ≥ 1 (exact)."""
    return (int(n) - 1).bit_length()


def binary(values: np.ndarray, width: int) -> np.ndarray:
    """Binary digits, least significant first: (n,) → (n, width) int64."""
    values = np.asarray(values, dtype=np.int64)
    return (values[:, None] >> np.arange(width, dtype=np.int64)) & 1


def from_binary(on: np.ndarray) -> np.ndarray:
    """Inverse of `binary` over the last axis (bool or 0/1)."""
    width = on.shape[-1]
    return (on.astype(np.int64) << np.arange(width, dtype=np.int64)).sum(axis=-1)


@dataclass(frozen=True)
class SlotCode:
    """Base: subclasses set d, q, r, amax and implement the arrays (see the module docstring)."""

    k: int

    name = "code"

    @property
    def d(self) -> int:
        raise NotImplementedError

    @property
    def q(self) -> int:
        raise NotImplementedError

    @property
    def amax(self) -> int:
        raise NotImplementedError

    @cached_property
    def r(self) -> int:
        return int(self.feat.shape[0])

    def phi(self, ids: np.ndarray) -> np.ndarray:
        """φ_i for an array of bracket types: (n, d) ints in {-1, 0, 1}."""
        x = np.concatenate([self.inputs(ids), np.ones((len(ids), 1), np.int64)], axis=1)
        return x @ self.Phi.T

    @cached_property
    def match_l1(self) -> int:
        """An upper bound on max_c ‖Ψ_c Z‖₁ (for the noise argument)."""
        raise NotImplementedError


@dataclass(frozen=True)
class OneHotCode(SlotCode):
    """φ_i = e_i (d = k): the mk / 2mk constructions of Hewitt et al. (2020), Thm 1."""

    name = "onehot"

    @property
    def d(self) -> int:
        return self.k

    @property
    def q(self) -> int:
        return self.k

    @property
    def amax(self) -> int:
        return 1

    @cached_property
    def signs(self) -> np.ndarray:
        return np.ones(self.d, np.int64)

    @cached_property
    def omega(self) -> np.ndarray:
        return np.ones(self.d, np.int64)

    def inputs(self, ids: np.ndarray) -> np.ndarray:
        return np.eye(self.k, dtype=np.int64)[np.asarray(ids, np.int64)]

    @cached_property
    def Phi(self) -> np.ndarray:
        return np.concatenate([np.eye(self.k, dtype=np.int64), np.zeros((self.k, 1), np.int64)], 1)

    @cached_property
    def feat(self) -> np.ndarray:
        return np.concatenate([np.eye(self.k, dtype=np.int64), self.omega[None, :]], 0)

    def match(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ids = np.asarray(ids, np.int64)
        psi = np.zeros((len(ids), self.r), np.int64)
        psi[np.arange(len(ids)), ids] = 1
        return psi, np.ones(len(ids), np.int64)

    @cached_property
    def match_l1(self) -> int:
        return 1

    def decode(self, on: np.ndarray) -> np.ndarray:
        count = on.sum(axis=-1)
        return np.where(count == 0, -1, np.where(count == 1, on.argmax(axis=-1), -2))


@dataclass(frozen=True)
class HewittCode(SlotCode):
    """φ_i = [p_i, 1 − p_i, −1^(L−1)], L = max(1, ⌈log₂k⌉) (Hewitt et al. 2020, distributed code).

    Σ_j φ_i[j] = L − (L − 1) = 1, so ω = all-ones detects a filled slot exactly as for one-hot.
    Read-out: Ψ_c·[p; ω·φ] = Σ_j (2p_c[j] − 1) p[j] + (L − |p_c|)·occ = L − Hamming(p_c, p) on a
    filled slot and 0 on an empty one, so τ = L.
    """

    name = "hewitt"

    @property
    def L(self) -> int:
        return max(1, ceil_log2(self.k))

    @property
    def d(self) -> int:
        return 3 * self.L - 1

    @property
    def q(self) -> int:
        return self.L

    @property
    def amax(self) -> int:
        return 1

    @cached_property
    def signs(self) -> np.ndarray:
        return np.array([1] * (2 * self.L) + [-1] * (self.L - 1), np.int64)

    @cached_property
    def omega(self) -> np.ndarray:
        return np.ones(self.d, np.int64)

    def inputs(self, ids: np.ndarray) -> np.ndarray:
        return binary(ids, self.L)

    @cached_property
    def Phi(self) -> np.ndarray:
        L = self.L
        eye = np.eye(L, dtype=np.int64)
        top = np.concatenate([eye, np.zeros((L, 1), np.int64)], 1)            # p
        mid = np.concatenate([-eye, np.ones((L, 1), np.int64)], 1)            # 1 − p
        low = np.concatenate([np.zeros((L - 1, L), np.int64), -np.ones((L - 1, 1), np.int64)], 1)
        return np.concatenate([top, mid, low], 0)

    @cached_property
    def feat(self) -> np.ndarray:
        L = self.L
        bits = np.concatenate([np.eye(L, dtype=np.int64), np.zeros((L, self.d - L), np.int64)], 1)
        return np.concatenate([bits, self.omega[None, :]], 0)

    def match(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        b = binary(ids, self.L)
        psi = np.concatenate([2 * b - 1, (self.L - b.sum(1))[:, None]], 1)
        return psi, np.full(len(b), self.L, np.int64)

    @cached_property
    def match_l1(self) -> int:
        return self.L + self.L * (3 * self.L - 1)

    def decode(self, on: np.ndarray) -> np.ndarray:
        L = self.L
        p, comp, neg = on[..., :L], on[..., L:2 * L], on[..., 2 * L:]
        filled = (p ^ comp).all(-1) & neg.all(-1)
        empty = ~on.any(-1)
        value = from_binary(p)
        return np.where(empty, -1, np.where(filled & (value < self.k), value, -2))


@dataclass(frozen=True)
class NonzeroCode(SlotCode):
    """φ_i = binary(i + 1), d = ⌈log₂(k+1)⌉ (ours). Empty = all zero; ω·φ_i = popcount ∈ [1, d].

    Read-out: Ψ_c = 2·binary(c+1) − 1, τ_c = popcount(c+1): the score is τ_c on a match and at most
    τ_c − 1 otherwise (a missing bit or an extra bit), and 0 ≤ τ_c − 1 on an empty slot.
    """

    name = "compact"

    @property
    def d(self) -> int:
        return max(1, ceil_log2(self.k + 1))

    @property
    def q(self) -> int:
        return self.d

    @property
    def amax(self) -> int:
        return self.d

    @cached_property
    def signs(self) -> np.ndarray:
        return np.ones(self.d, np.int64)

    @cached_property
    def omega(self) -> np.ndarray:
        return np.ones(self.d, np.int64)

    def inputs(self, ids: np.ndarray) -> np.ndarray:
        return binary(np.asarray(ids, np.int64) + 1, self.d)

    @cached_property
    def Phi(self) -> np.ndarray:
        return np.concatenate([np.eye(self.d, dtype=np.int64), np.zeros((self.d, 1), np.int64)], 1)

    @cached_property
    def feat(self) -> np.ndarray:
        return np.concatenate([np.eye(self.d, dtype=np.int64), self.omega[None, :]], 0)

    def match(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        b = binary(np.asarray(ids, np.int64) + 1, self.d)
        psi = np.concatenate([2 * b - 1, np.zeros((len(b), 1), np.int64)], 1)
        return psi, b.sum(1)

    @cached_property
    def match_l1(self) -> int:
        return self.d

    def decode(self, on: np.ndarray) -> np.ndarray:
        value = from_binary(on)
        return np.where(value == 0, -1, np.where(value <= self.k, value - 1, -2))


CODES = {"onehot": OneHotCode, "hewitt": HewittCode, "compact": NonzeroCode}

__all__ = [
    "CODES",
    "HewittCode",
    "NonzeroCode",
    "OneHotCode",
    "SlotCode",
    "binary",
    "ceil_log2",
    "from_binary",
]

"""Semirings for weighted automata: boolean, real, log, Viterbi (max-times in log space), rationals,
tropical (min-plus over costs).

A semiring value array is a numpy array of the semiring's ``dtype`` (``object`` holding
`fractions.Fraction` for `RATIONAL`). Every semiring converts from and to nonnegative real numbers
(`lift`, `lower`), adds and multiplies elementwise (`plus`, `times`), reduces along axes (`sum`,
`product`) and contracts two arrays like ``numpy.einsum`` (`einsum`): ``⊕`` over the summed
indices of ``⊗`` of the operands. In the log and Viterbi semirings values are natural logarithms
of weights (zero is ``-inf``); Viterbi's ``plus`` is ``max`` and `einsum_argmax` also returns the
positions of the maxima (backpointers).

The tropical semiring ("tropical") holds costs: ⊕ = min, ⊗ = +, zero = +inf, one = 0; a cost v
stands for the weight e^(−v) (`lift`, `lower`), so costs may be negative (weights above one). Its
star is x* = min(0, x, 2x, …) = 0 for x ≥ 0; for x < 0 (a negative cycle) the infimum is −inf,
which is not a value of the semiring: `pdanet.automata.weighted_ops.closure` raises
DivergenceError naming the cycle instead (shortest distances are undefined there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from pdanet.errors import InputError


def _parse(subscripts: str, n: int) -> tuple[list[str], str]:
    if "->" not in subscripts:
        raise InputError(f"einsum subscripts {subscripts!r} need an explicit '->' output")
    ins, out = subscripts.replace(" ", "").split("->")
    parts = ins.split(",")
    if len(parts) != n:
        raise InputError(f"einsum subscripts {subscripts!r} name {len(parts)} operands, got {n}")
    return parts, out


def _broadcast(subscripts: str, operands: tuple) -> tuple[list[np.ndarray], str, list[str]]:
    """Operands transposed and reshaped to a common index order ``out + summed``."""
    parts, out = _parse(subscripts, len(operands))
    letters = list(dict.fromkeys("".join(parts)))
    summed = [c for c in letters if c not in out]
    order = list(out) + summed
    sizes: dict = {}
    for p, op in zip(parts, operands):
        for c, s in zip(p, np.shape(op)):
            sizes[c] = s
    views = []
    for p, op in zip(parts, operands):
        arr = np.asarray(op)
        perm = sorted(range(len(p)), key=lambda j: order.index(p[j]))
        arr = arr.transpose(perm)
        present = [p[j] for j in perm]
        shape = [sizes[c] if c in present else 1 for c in order]
        views.append(arr.reshape(shape))
    return views, out, summed


@dataclass(frozen=True)
class Semiring:
    """A commutative semiring over numpy arrays (see the module docstring)."""

    name: str
    dtype: Any
    zero: Any
    one: Any

    # --- conversion ---------------------------------------------------------------------------
    def lift(self, w: Any) -> Any:
        """The semiring value of a nonnegative real weight."""
        raise NotImplementedError

    def lower(self, v: Any) -> float:
        """The nonnegative real weight of a semiring value (float)."""
        raise NotImplementedError

    def check(self, v: Any, where: str) -> Any:
        """Validate and normalise a user-given value; InputError naming `where` when invalid."""
        return v

    def array(self, shape: tuple, fill: Any = None) -> np.ndarray:
        """An array of zeros (or `fill`)."""
        a = np.empty(shape, dtype=self.dtype)
        a.fill(self.zero if fill is None else fill)
        return a

    # --- arithmetic ---------------------------------------------------------------------------
    def plus(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def times(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def sum(self, a: np.ndarray, axis: Any = None) -> Any:
        raise NotImplementedError

    def product(self, a: np.ndarray, axis: Any = None) -> Any:
        raise NotImplementedError

    def is_zero(self, a: Any) -> Any:
        return np.asarray(a) == self.zero

    def einsum(self, subscripts: str, *operands: np.ndarray) -> np.ndarray:
        """⊕ over the summed indices of the ⊗ of the operands (broadcast, exact)."""
        views, out, summed = _broadcast(subscripts, operands)
        prod = views[0]
        for v in views[1:]:
            prod = self.times(prod, v)
        full = np.broadcast_to(prod, np.broadcast_shapes(*(v.shape for v in views)))
        axes = tuple(range(len(out), len(out) + len(summed)))
        return self.sum(full, axis=axes) if axes else np.array(full, dtype=self.dtype)


@dataclass(frozen=True)
class _Boolean(Semiring):
    def lift(self, w):
        return bool(w)

    def lower(self, v):
        return 1.0 if v else 0.0

    def check(self, v, where):
        if not isinstance(v, (bool, np.bool_)):
            raise InputError(f"{where}: weight {v!r} is not a boolean (semiring {self.name})")
        return bool(v)

    def plus(self, a, b):
        return np.logical_or(a, b)

    def times(self, a, b):
        return np.logical_and(a, b)

    def sum(self, a, axis=None):
        return np.any(a, axis=axis)

    def product(self, a, axis=None):
        return np.all(a, axis=axis)

    def einsum(self, subscripts, *operands):
        return np.einsum(subscripts, *(np.asarray(o, dtype=np.float64) for o in operands),
                         optimize=True) > 0


@dataclass(frozen=True)
class _Real(Semiring):
    def lift(self, w):
        return float(w)

    def lower(self, v):
        return float(v)

    def check(self, v, where):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise InputError(f"{where}: weight {v!r} is not a real number") from None
        if not math.isfinite(f) or f < 0:
            raise InputError(f"{where}: weight {v!r} is negative or not finite; the real semiring "
                             "needs weights ≥ 0 (use the log semiring for log-weights)")
        return f

    def plus(self, a, b):
        return np.add(a, b)

    def times(self, a, b):
        return np.multiply(a, b)

    def sum(self, a, axis=None):
        return np.sum(a, axis=axis)

    def product(self, a, axis=None):
        return np.prod(a, axis=axis)

    def einsum(self, subscripts, *operands):
        return np.einsum(subscripts, *operands, optimize=True)


@dataclass(frozen=True)
class _Log(Semiring):
    """Log weights; ⊕ = log-sum-exp, ⊗ = +."""

    def lift(self, w):
        return math.log(w) if w > 0 else -math.inf

    def lower(self, v):
        return math.exp(v)

    def check(self, v, where):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise InputError(f"{where}: log-weight {v!r} is not a real number") from None
        if math.isnan(f) or f == math.inf:
            raise InputError(f"{where}: log-weight {v!r} is NaN or +inf")
        return f

    def plus(self, a, b):
        return np.logaddexp(a, b)

    def times(self, a, b):
        return np.add(a, b)

    def sum(self, a, axis=None):
        a = np.asarray(a, dtype=np.float64)
        m = np.max(a, axis=axis, keepdims=True) if a.size else np.zeros(())
        m = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(divide="ignore"):
            out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
        return np.squeeze(out, axis=axis) if axis is not None else out.reshape(())

    def product(self, a, axis=None):
        return np.sum(a, axis=axis)

    def einsum(self, subscripts, *operands):
        """Max-shifted real einsum: exact up to float64 rounding while the operands' ranges span
        less than ~700 nats below their maxima."""
        shifted, shift = [], 0.0
        for o in operands:
            o = np.asarray(o, dtype=np.float64)
            m = np.max(o) if o.size else 0.0
            m = m if np.isfinite(m) else 0.0
            shifted.append(np.exp(o - m))
            shift += m
        with np.errstate(divide="ignore"):
            return np.log(np.einsum(subscripts, *shifted, optimize=True)) + shift


@dataclass(frozen=True)
class _Viterbi(_Log):
    """Log weights; ⊕ = max, ⊗ = +."""

    def plus(self, a, b):
        return np.maximum(a, b)

    def sum(self, a, axis=None):
        a = np.asarray(a, dtype=np.float64)
        if a.size == 0:
            return np.full(np.sum(a, axis=axis).shape, -np.inf)
        return np.max(a, axis=axis)

    def einsum(self, subscripts, *operands):
        return Semiring.einsum(self, subscripts, *operands)

    def einsum_argmax(self, subscripts: str, *operands) -> tuple[np.ndarray, np.ndarray]:
        """(max, flat argmax over the summed indices in their order of first appearance)."""
        views, out, _summed = _broadcast(subscripts, operands)
        total = views[0]
        for v in views[1:]:
            total = total + v
        full = np.broadcast_to(total, np.broadcast_shapes(*(v.shape for v in views)))
        flat = full.reshape(full.shape[: len(out)] + (-1,))
        return flat.max(axis=-1), flat.argmax(axis=-1)


@dataclass(frozen=True)
class _Rational(Semiring):
    """Exact nonnegative rationals (`fractions.Fraction` in object arrays)."""

    def lift(self, w):
        return Fraction(w)

    def lower(self, v):
        return float(v)

    def check(self, v, where):
        try:
            f = Fraction(v)
        except (TypeError, ValueError):
            raise InputError(f"{where}: weight {v!r} is not a rational number") from None
        if f < 0:
            raise InputError(f"{where}: weight {v!r} is negative; rational weights must be ≥ 0")
        return f

    def array(self, shape, fill=None):
        a = np.empty(shape, dtype=object)
        a.fill(Fraction(0) if fill is None else Fraction(fill))
        return a

    def plus(self, a, b):
        return np.add(a, b, dtype=object)

    def times(self, a, b):
        return np.multiply(a, b, dtype=object)

    def sum(self, a, axis=None):
        a = np.asarray(a, dtype=object)
        if a.size == 0:
            return self.array(np.sum(np.zeros(a.shape), axis=axis).shape)
        return np.sum(a, axis=axis, dtype=object)

    def product(self, a, axis=None):
        return np.prod(np.asarray(a, dtype=object), axis=axis, dtype=object)


@dataclass(frozen=True)
class _Tropical(Semiring):
    """Costs; ⊕ = min, ⊗ = +, zero = +inf, one = 0 (see the module docstring)."""

    def lift(self, w):
        return -math.log(w) if w > 0 else math.inf

    def lower(self, v):
        return math.exp(-v)

    def check(self, v, where):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise InputError(f"{where}: cost {v!r} is not a real number") from None
        if math.isnan(f) or f == -math.inf:
            raise InputError(f"{where}: cost {v!r} is NaN or -inf; tropical costs are reals or "
                             "+inf (the zero: no path)")
        return f

    def plus(self, a, b):
        return np.minimum(a, b)

    def times(self, a, b):
        return np.add(a, b)

    def sum(self, a, axis=None):
        a = np.asarray(a, dtype=np.float64)
        if a.size == 0:
            return np.full(np.sum(a, axis=axis).shape, math.inf)
        return np.min(a, axis=axis)

    def product(self, a, axis=None):
        return np.sum(a, axis=axis)


BOOLEAN = _Boolean("boolean", np.bool_, False, True)
REAL = _Real("real", np.float64, 0.0, 1.0)
LOG = _Log("log", np.float64, -math.inf, 0.0)
VITERBI = _Viterbi("viterbi", np.float64, -math.inf, 0.0)
RATIONAL = _Rational("rational", object, Fraction(0), Fraction(1))
TROPICAL = _Tropical("tropical", np.float64, math.inf, 0.0)

SEMIRINGS = {s.name: s for s in (BOOLEAN, REAL, LOG, VITERBI, RATIONAL, TROPICAL)}


def get(semiring: Semiring | str) -> Semiring:
    """A semiring by value or name ("boolean", "real", "log", "viterbi", "rational", "tropical")."""
    if isinstance(semiring, Semiring):
        return semiring
    try:
        return SEMIRINGS[semiring]
    except (KeyError, TypeError):
        raise InputError(f"unknown semiring {semiring!r}; choose one of {sorted(SEMIRINGS)}") \
            from None


def convert(values: np.ndarray, source: Semiring, target: Semiring) -> np.ndarray:
    """Values of `source` as values of `target` (through nonnegative reals; exact from
    rationals/reals to rationals, since a float is a rational)."""
    if source is target:
        return values
    out = target.array(np.shape(values))
    flat_in = np.asarray(values).ravel()
    flat_out = out.reshape(-1)
    for j, v in enumerate(flat_in):
        if target is RATIONAL and source in (REAL, RATIONAL):
            flat_out[j] = Fraction(v)
        elif target is RATIONAL and source is BOOLEAN:
            flat_out[j] = Fraction(int(bool(v)))
        elif source is RATIONAL and target in (LOG, VITERBI):
            flat_out[j] = math.log(v) if v > 0 else -math.inf
        else:
            flat_out[j] = target.lift(source.lower(v))
    return out


__all__ = [
    "BOOLEAN",
    "LOG",
    "RATIONAL",
    "REAL",
    "SEMIRINGS",
    "TROPICAL",
    "VITERBI",
    "Semiring",
    "convert",
    "get",
]

"""Sound interval arithmetic for one step of a compiled network, in the module's own dtype.

An `Interval` is a pair of float64 arrays ``lo ≤ hi``. Every operation returns an interval that
contains (a) the exact real result for all inputs in the argument intervals, and (b) the result the
module computes in its dtype (float32 or float64), by the standard error model:

- a dot product or sum of n terms, in any order of summation (blocked, pairwise, FMA), satisfies
  |fl(Σ aᵢbᵢ) − Σ aᵢbᵢ| ≤ γₙ Σ|aᵢbᵢ| with γₙ = n·u / (1 − n·u) and u the unit round-off of the
  dtype (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1);
- a product or sum of two numbers is rounded once: relative error ≤ u;
- tanh and the logistic sigmoid are monotone and computed within `ACTIVATION_ULPS` units in the
  last place (a stated assumption about the library's kernels, well above their documented error),
  plus an absolute term for results that underflow.

The float64 arithmetic used here to evaluate the bounds is itself rounded; each result is widened
by the same model for float64 and then rounded outward with ``nextafter``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

ACTIVATION_ULPS = 8


def unit_roundoff(dtype: torch.dtype) -> float:
    return {torch.float32: 2.0**-24, torch.float64: 2.0**-53, torch.float16: 2.0**-11,
            torch.bfloat16: 2.0**-8}[dtype]


def tiny(dtype: torch.dtype) -> float:
    """The smallest positive subnormal of the dtype (absolute error floor)."""
    return float(torch.finfo(dtype).tiny) * float(torch.finfo(dtype).eps)


def gamma(n: int | np.ndarray, u: float) -> np.ndarray:
    n = np.asarray(n, dtype=np.float64)
    return n * u / (1.0 - n * u)


_U64 = 2.0**-53


def _down(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, -np.inf)


def _up(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, np.inf)


@dataclass(frozen=True)
class Interval:
    """Elementwise closed intervals [lo, hi] (float64 arrays of equal shape)."""

    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def point(cls, x) -> Interval:
        x = np.asarray(x, dtype=np.float64)
        return cls(x, x)

    @classmethod
    def around(cls, center, radius) -> Interval:
        c = np.asarray(center, dtype=np.float64)
        return cls(_down(c - radius), _up(c + radius))

    @property
    def mid(self) -> np.ndarray:
        return (self.lo + self.hi) / 2

    @property
    def mag(self) -> np.ndarray:
        """max |x| over the interval."""
        return np.maximum(np.abs(self.lo), np.abs(self.hi))

    def contains(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return (self.lo <= x) & (x <= self.hi)

    def within(self, other: Interval) -> np.ndarray:
        return (other.lo <= self.lo) & (self.hi <= other.hi)

    def __getitem__(self, idx) -> Interval:
        return Interval(self.lo[idx], self.hi[idx])

    def widen(self, err: np.ndarray) -> Interval:
        return Interval(_down(self.lo - err), _up(self.hi + err))


def affine(W: np.ndarray, x: Interval, b: np.ndarray | None, dtype: torch.dtype,
           extra_terms: int = 0) -> Interval:
    """Enclosure of fl(W @ x + b) over x ∈ interval (batched over leading axes of x).

    ``W`` is (out, in) float64 holding the module's float weights exactly; ``b`` (out,) likewise.
    ``extra_terms`` counts further summands already folded into ``b`` (e.g. a second bias).
    """
    u = unit_roundoff(dtype)
    Wp, Wn = np.maximum(W, 0), np.minimum(W, 0)
    lo = x.lo @ Wp.T + x.hi @ Wn.T
    hi = x.hi @ Wp.T + x.lo @ Wn.T
    absum = x.mag @ np.abs(W).T
    n = W.shape[1] + extra_terms
    if b is not None:
        lo = lo + b
        hi = hi + b
        absum = absum + np.abs(b)
        n += 1
    err = (gamma(n, u) + gamma(n + 2, _U64)) * absum + n * tiny(dtype)
    return Interval(lo, hi).widen(err)


def add(a: Interval, b: Interval, dtype: torch.dtype) -> Interval:
    """fl(a + b). Besides the relative bound u·|a+b|, rounding to nearest moves a sum of two
    floats of the dtype by at most min(|a|, |b|): each summand is itself a float at that distance
    from the exact sum. This keeps tiny increments from growing a saturated cell."""
    u = unit_roundoff(dtype)
    lo, hi = a.lo + b.lo, a.hi + b.hi
    err = np.minimum(u * np.maximum(np.abs(lo), np.abs(hi)), np.minimum(a.mag, b.mag))
    err = err + _U64 * np.maximum(np.abs(lo), np.abs(hi))
    return Interval(lo, hi).widen(err)


def mul(a: Interval, b: Interval, dtype: torch.dtype) -> Interval:
    u = unit_roundoff(dtype)
    cands = np.stack([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
    lo, hi = cands.min(axis=0), cands.max(axis=0)
    err = (u + _U64) * np.maximum(np.abs(lo), np.abs(hi)) + tiny(dtype)
    # a product with exactly 0 or ±1 is exact in floating point
    exact = _is_exact_factor(a) | _is_exact_factor(b)
    return Interval(lo, hi).widen(np.where(exact, 0.0, err))


def _is_exact_factor(a: Interval) -> np.ndarray:
    return (a.lo == a.hi) & ((a.lo == 0) | (np.abs(a.lo) == 1))


def scale(a: Interval, c: float, dtype: torch.dtype) -> Interval:
    """c · a for a float constant c (one rounding)."""
    return mul(a, Interval.point(np.full_like(a.lo, c)), dtype)


KERNEL_MODELS = ("ulp", "monotone")
_kernel_model = "ulp"


def set_kernel_model(model: str) -> str:
    """Choose how tanh/sigmoid kernels are modelled; returns the previous model.

    ``"ulp"`` (default): the kernel's result is within `ACTIVATION_ULPS` ulps of the true value.
    ``"monotone"``: the kernel is monotone, so evaluating the library's own kernel, in the dtype,
    at the interval's endpoints (rounded outward to the dtype) encloses every result; saturated
    gates then enclose exactly 1.0 where the kernel returns 1.0.
    """
    global _kernel_model
    if model not in KERNEL_MODELS:
        raise ValueError(f"kernel model must be one of {KERNEL_MODELS}, got {model!r}")
    previous, _kernel_model = _kernel_model, model
    return previous


def _to_dtype_outward(x: np.ndarray, dtype: torch.dtype, up: bool) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=torch.float64)
    r = t.to(dtype)
    back = r.to(torch.float64)
    if up:
        fix = back < t
        r = torch.where(fix, torch.nextafter(r, torch.full_like(r, float("inf"))), r)
    else:
        fix = back > t
        r = torch.where(fix, torch.nextafter(r, torch.full_like(r, float("-inf"))), r)
    return r


def _monotone(f, a: Interval, dtype: torch.dtype, kernel=None) -> Interval:
    if _kernel_model == "monotone" and kernel is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            lo = kernel(_to_dtype_outward(a.lo, dtype, up=False)).double().numpy()
            hi = kernel(_to_dtype_outward(a.hi, dtype, up=True)).double().numpy()
        return Interval(lo, hi)
    u = unit_roundoff(dtype)
    lo, hi = f(a.lo), f(a.hi)
    err = (ACTIVATION_ULPS * 2 * u + 4 * _U64) * np.maximum(np.abs(lo), np.abs(hi)) + tiny(dtype)
    return Interval(lo, hi).widen(err)


def tanh(a: Interval, dtype: torch.dtype) -> Interval:
    out = _monotone(np.tanh, a, dtype, torch.tanh)
    return Interval(np.maximum(out.lo, -1.0), np.minimum(out.hi, 1.0))


def sigmoid(a: Interval, dtype: torch.dtype) -> Interval:
    def f(z):  # the numerically stable logistic, accurate to a few float64 ulps everywhere
        with np.errstate(over="ignore"):
            e = np.exp(-np.abs(z))
            return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    out = _monotone(f, a, dtype, torch.sigmoid)
    return Interval(np.maximum(out.lo, 0.0), np.minimum(out.hi, 1.0))


__all__ = [
    "ACTIVATION_ULPS",
    "Interval",
    "add",
    "affine",
    "gamma",
    "mul",
    "scale",
    "sigmoid",
    "tanh",
    "unit_roundoff",
]

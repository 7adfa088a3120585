"""Sound interval arithmetic for one step of a compiled network, in the module's own dtype.

An `Interval` is a pair of float64 arrays ``lo ≤ hi``. Every operation returns an interval that
contains (a) the exact real result for all inputs in the argument intervals, and (b) the result the
module computes in its dtype (float32 or float64), by the standard error model:

- a dot product or sum of n terms, in any order of summation (blocked, pairwise, FMA), satisfies
  |fl(Σ aᵢbᵢ) − Σ aᵢbᵢ| ≤ γₙ Σ|aᵢbᵢ| with γₙ = n·u / (1 − n·u) and u the unit round-off of the
  dtype (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1);
- a product or sum of two numbers is rounded once: relative error ≤ u;
- tanh and the logistic sigmoid are computed within `ACTIVATION_ULPS` units in the
  last place (a stated assumption about the library's kernels, well above their documented error),
  plus an absolute term (the smallest normal number) for results that underflow or are flushed
  to zero.

The float64 arithmetic used here to evaluate the bounds is itself rounded; each result is widened
by the same model for float64 and then rounded outward with ``nextafter``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

ACTIVATION_ULPS = 8


def unit_roundoff(dtype: torch.dtype) -> float:
    return {torch.float32: 2.0**-24, torch.float64: 2.0**-53, torch.float16: 2.0**-11,
            torch.bfloat16: 2.0**-8}[dtype]


def tiny(dtype: torch.dtype) -> float:
    """The absolute error floor: the smallest positive *normal* number of the dtype. Vectorised
    kernels may flush results that underflow to zero (``torch.sigmoid(-90.0)`` is 0.0 in
    float32, not the subnormal 8e-40), so a subnormal floor would not enclose them."""
    return float(torch.finfo(dtype).tiny)


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


def _fl(x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Round float64 values to nearest in the dtype (float32: one correctly rounded cast)."""
    if dtype == torch.float64:
        return x
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def to_dtype(a: Interval, dtype: torch.dtype) -> Interval:
    """The smallest interval of dtype floats holding every dtype float of ``a``: a network's
    values are floats of its dtype, so rounding the endpoints inward loses none of them. Where
    ``a`` holds no float of the dtype (e.g. a point between two floats), the two floats around
    it."""
    lo = _to_dtype_outward(a.lo, dtype, up=True).double().numpy()
    hi = _to_dtype_outward(a.hi, dtype, up=False).double().numpy()
    return Interval(np.minimum(lo, hi), np.maximum(lo, hi))


def _rounded_product(a: Interval, b: Interval, dtype: torch.dtype) -> Interval:
    """fl(a·b) over dtype floats a, b of the (dtype-valued) boxes, exactly: rounding to nearest
    is monotone, so the extremes are fl of the extreme exact products. In float32 each product of
    two floats is exact in float64 (48 bits); in float64 numpy's product is fl itself."""
    cands = np.stack([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
    return Interval(_fl(cands.min(axis=0), dtype), _fl(cands.max(axis=0), dtype))


def lstm_cell(f: Interval, c: Interval, i: Interval, g: Interval, dtype: torch.dtype) -> Interval:
    """Enclosure of the LSTM cell update c' = f·c + i·g as the dtype computes it, exactly up to
    the boxes: both fl(fl(f·c) + fl(i·g)) (ATen: two products, one sum) and fl(f·c + fl(i·g))
    (oneDNN: one fused multiply-add).

    Every operation here rounds to nearest, which is monotone, so the image of a box of floats is
    the interval between fl of its exact extremes — no outward widening. In float32 the sum of
    two floats computed in float64 then rounded to float32 is correctly rounded (double rounding
    is innocuous for 53 ≥ 2·24 + 2 bits, Figueroa 1995). This is what keeps a cell with a
    saturated forget gate (f = 1 exactly) and a tiny i·g in its box for every length: once the
    increment is below half an ulp of the box's endpoints, fl returns the endpoints themselves.
    The fused form rounds f·c + p once; its extremes are bounded by fl of the outward float64
    bounds of the exact sum (monotonicity again), except where f ∈ {0, 1} exactly, where both
    forms coincide."""
    f, c, i, g = (to_dtype(x, dtype) for x in (f, c, i, g))
    p = _rounded_product(i, g, dtype)
    fc = _rounded_product(f, c, dtype)
    sep_lo, sep_hi = _fl(fc.lo + p.lo, dtype), _fl(fc.hi + p.hi, dtype)
    cands = np.stack([f.lo * c.lo, f.lo * c.hi, f.hi * c.lo, f.hi * c.hi])
    q_lo, q_hi = cands.min(axis=0), cands.max(axis=0)
    err = _U64 * np.maximum(np.abs(q_lo), np.abs(q_hi))     # float32: exact; float64: one rounding
    fus_lo = _fl(_down(q_lo - err + p.lo - _U64 * np.abs(q_lo - err + p.lo)), dtype)
    fus_hi = _fl(_up(q_hi + err + p.hi + _U64 * np.abs(q_hi + err + p.hi)), dtype)
    exact = (f.lo == f.hi) & ((f.lo == 0) | (f.lo == 1))
    return Interval(np.where(exact, sep_lo, np.minimum(sep_lo, fus_lo)),
                    np.where(exact, sep_hi, np.maximum(sep_hi, fus_hi)))


KERNEL_MODELS = ("ulp", "saturating")
_kernel_model = "ulp"


def set_kernel_model(model: str) -> str:
    """Choose how tanh/sigmoid kernels are modelled; returns the previous model.

    ``"ulp"`` (default): the kernel's result is within `ACTIVATION_ULPS` ulps of the true value.
    ``"saturating"``: the ulp model, plus exact saturation — σ(z) = 1 for every float
    z ≥ `saturation`(dtype).sigmoid and tanh(z) = ±1 for every float |z| ≥ ….tanh, thresholds
    found and checked on this build's kernels (the elementwise ``torch.sigmoid``/``torch.tanh``
    and the ones inside ``nn.LSTM``/``nn.RNN``, which on CPU are oneDNN's and round differently).
    Saturated gates are then exactly 1, which the ulp model alone can never show.
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


def _layer_probe(kind: str, z: torch.Tensor) -> torch.Tensor:
    """``kind`` ("sigmoid", "tanh" or "rnn_tanh") of z as the recurrent layers compute it in this
    build (oneDNN or ATen): a one-unit ``nn.LSTM`` / ``nn.RNN`` run for one step on the batch z,
    with weights that make the probed pre-activation exactly z and every other factor exactly
    0 or 1, so its output *is* the layer's kernel value: c₁ = σ(z)·tanh(64) = σ(z) (probe i),
    c₁ = σ(64)·tanh(z) = tanh(z) (probe g), h₁ = tanh(z) (Elman)."""
    flat = z.reshape(-1, 1, 1)
    with torch.no_grad():
        if kind == "rnn_tanh":
            layer = torch.nn.RNN(1, 1, batch_first=True).to(z.dtype)
            for p in layer.parameters():
                p.zero_()
            layer.weight_ih_l0.fill_(1.0)
            out, _ = layer(flat)
            return out.reshape(z.shape)
        layer = torch.nn.LSTM(1, 1, batch_first=True).to(z.dtype)
        for p in layer.parameters():
            p.zero_()
        probe, fixed = (0, 2) if kind == "sigmoid" else (2, 0)     # gate rows: i, f, g, o
        layer.weight_ih_l0[probe, 0] = 1.0
        layer.bias_ih_l0[fixed] = 64.0                            # σ(64) = tanh(64) = 1 exactly
        _, (_, c) = layer(flat)
        return c.reshape(z.shape)


@dataclass(frozen=True)
class Saturation:
    """Exact-saturation thresholds of this build's kernels in one dtype: every kernel returns
    σ(z) = 1 for every float z ≥ ``sigmoid`` and tanh(z) = ±1 for every float |z| ≥ ``tanh``.
    ``checked`` says how: for float32 every float from the threshold to `SATURATION_CHECKED`
    (both signs for tanh) is evaluated, and the floats beyond it at a fixed bit-pattern stride up
    to the largest finite value; float64 has too many floats, so a dense sample is evaluated."""

    sigmoid: float
    tanh: float
    checked: str


#: every float32 from the threshold up to this value is checked exhaustively
SATURATION_CHECKED = 64.0


def _floats_between(lo: float, hi: float, dtype: torch.dtype, stride: int = 1) -> torch.Tensor:
    """Every float of ``dtype`` in [lo, hi] (0 < lo ≤ hi), or every ``stride``-th by bit pattern."""
    itype = torch.int32 if dtype == torch.float32 else torch.int64
    a = int(torch.tensor(lo, dtype=dtype).view(itype))
    b = int(torch.tensor(hi, dtype=dtype).view(itype))
    return torch.arange(a, b + 1, stride, dtype=itype).view(dtype)


def _kernels(kind: str):
    if kind == "sigmoid":
        return (torch.sigmoid, lambda z: _layer_probe("sigmoid", z))
    return (torch.tanh, lambda z: _layer_probe("tanh", z), lambda z: _layer_probe("rnn_tanh", z))


def _first_saturated(kind: str, z: torch.Tensor) -> float | None:
    """The smallest element z₀ of the sorted positive probe set z such that every kernel returns
    exactly 1 at every element ≥ z₀ (and tanh exactly −1 at −z); None if the last one fails."""
    ok = torch.ones(z.shape, dtype=torch.bool)
    for k in _kernels(kind):
        ok &= k(z) == 1
        if kind == "tanh":
            ok &= k(-z) == -1
    bad = (~ok).nonzero()
    if len(bad) == 0:
        return float(z[0])
    last = int(bad[-1, 0])
    return None if last == len(z) - 1 else float(z[last + 1])


_SATURATION: dict = {}


def saturation(dtype: torch.dtype) -> Saturation:
    """The `Saturation` thresholds of this build's kernels (computed once per dtype)."""
    if dtype in _SATURATION:
        return _SATURATION[dtype]
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"exact saturation is checked for float32 and float64, not {dtype}")
    # below these no correctly rounded kernel can return 1: 1 − σ(z) ≈ e^(−z), 1 − tanh ≈ 2e^(−2z)
    u = unit_roundoff(dtype)
    start = {"sigmoid": math.log(1 / u) - 0.5, "tanh": 0.5 * math.log(2 / u) - 0.5}
    found = {}
    for kind, z0 in start.items():
        if dtype == torch.float32:
            near = _floats_between(z0, SATURATION_CHECKED, dtype)
            far = _floats_between(SATURATION_CHECKED, float(torch.finfo(dtype).max), dtype, 4099)
            how = (f"every float32 in [threshold, {SATURATION_CHECKED:g}] and every 4099th float32 "
                   "beyond it")
        else:
            near = torch.linspace(z0, SATURATION_CHECKED, 1 << 20, dtype=dtype)
            far = torch.logspace(math.log10(SATURATION_CHECKED), 308, 1 << 14, dtype=dtype)
            how = (f"2^20 evenly spaced float64 values in [threshold, {SATURATION_CHECKED:g}] and "
                   "2^14 log-spaced ones beyond it")
        if _first_saturated(kind, far) != float(far[0]):
            raise ValueError(f"{kind} does not saturate exactly for every large {dtype} input: "
                             "exact-saturation proofs are not available on this build")
        z_sat = _first_saturated(kind, near)
        if z_sat is None:
            raise ValueError(f"{kind} is not exactly saturated at {SATURATION_CHECKED:g} in {dtype}")
        found[kind] = z_sat
    result = Saturation(found["sigmoid"], found["tanh"],
                        how + "; kernels: torch.sigmoid/torch.tanh and nn.LSTM/nn.RNN's own")
    _SATURATION[dtype] = result
    return result


def _activation(f, a: Interval, dtype: torch.dtype, kind: str) -> Interval:
    u = unit_roundoff(dtype)
    lo, hi = f(a.lo), f(a.hi)
    err = (ACTIVATION_ULPS * 2 * u + 4 * _U64) * np.maximum(np.abs(lo), np.abs(hi)) + tiny(dtype)
    out = Interval(lo, hi).widen(err)
    if _kernel_model != "saturating":
        return out
    z = getattr(saturation(dtype), kind)
    top = a.lo >= z
    lo, hi = np.where(top, 1.0, out.lo), np.where(top, 1.0, out.hi)
    if kind == "tanh":
        bottom = a.hi <= -z
        lo, hi = np.where(bottom, -1.0, lo), np.where(bottom, -1.0, hi)
    return Interval(lo, hi)


def tanh(a: Interval, dtype: torch.dtype) -> Interval:
    out = _activation(np.tanh, a, dtype, "tanh")
    return Interval(np.maximum(out.lo, -1.0), np.minimum(out.hi, 1.0))


def sigmoid(a: Interval, dtype: torch.dtype) -> Interval:
    def f(z):  # the numerically stable logistic, accurate to a few float64 ulps everywhere
        with np.errstate(over="ignore"):
            e = np.exp(-np.abs(z))
            return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    out = _activation(f, a, dtype, "sigmoid")
    return Interval(np.maximum(out.lo, 0.0), np.minimum(out.hi, 1.0))


__all__ = [
    "ACTIVATION_ULPS",
    "Interval",
    "add",
    "affine",
    "gamma",
    "lstm_cell",
    "mul",
    "saturation",
    "scale",
    "set_kernel_model",
    "sigmoid",
    "tanh",
    "to_dtype",
    "unit_roundoff",
]

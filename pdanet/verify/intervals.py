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

Exact saturation (the "saturating" kernel model, ``kernel="saturating"`` in `tanh`/`sigmoid`).
An LSTM cell whose forget gate is exactly 1 keeps its value for every length; the ulp model can
never show a gate equal to 1, so a proof may instead use facts checked on this build's own
kernels: σ(z) = 1 for every float32 z with t_σ ≤ z ≤ U, and tanh(z) = 1, tanh(−z) = −1 for every float32 z with t_tanh ≤ z ≤ U
(`saturation`). What is checked, and why it is enough:

- every float32 z in [t, U] is evaluated, one by one (the scan runs from U downwards over bit
  patterns, `SCAN_CHUNK` floats at a time, so its memory is bounded), on every kernel a float32
  network runs: ``torch.sigmoid``/``torch.tanh`` and the ones inside ``nn.LSTM``/``nn.RNN``
  (oneDNN's on CPU, which round differently), read through probe layers whose output *is* the
  kernel's value (`_layer_probe`, `_wide_probes`); t is the float after the largest one found
  unsaturated. Assumed: each kernel is a function of its input element alone (not of its
  position, the batch or the layer's width), and the probe's constant factors σ(64), tanh(64)
  are exactly 1 (were they not, the probe would read below 1 and find no saturation);
- U is a power of two, at least `SATURATION_MIN_UPTO`; `_activation` claims exact saturation for a
  box only if it lies inside [t, U] (or [−U, −t]). A box reaching past U first extends the scan
  to the next power of two above it (+∞ included: ∞ is probed through a bias), so a proof never
  relies on a float that was not evaluated;
- results are cached in memory and on disk (`cache_dir`), keyed by everything that selects the
  kernels: torch version and build, CPU capability, oneDNN use and ISA cap, architecture. A cache
  file that is unreadable, malformed or for another build is ignored and the range rescanned;
- float64 has 2⁵² floats per binade, too many to evaluate: no float64 saturation is claimed
  here, and float64 proofs use the ulp model alone (the language-model certificates,
  `pdanet.verify.certify.lm`, claim float64 saturation under a stated kernel assumption that
  `lm.f64_limits` checks on samples before using it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pdanet import limits

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


#: how tanh/sigmoid kernels are modelled, passed to `tanh` and `sigmoid` as ``kernel``:
#: ``"ulp"`` — the kernel's result is within `ACTIVATION_ULPS` ulps of the true value;
#: ``"saturating"`` — the ulp model, plus exact saturation in float32: σ(z) = 1 for every float z
#: in [`saturation`(dtype).sigmoid, ….upto] and tanh(z) = ±1 for every float ±z in [….tanh,
#: ….upto], each float of those ranges checked on this build's kernels (module docstring, "Exact
#: saturation"). Saturated gates are then exactly 1, which the ulp model alone can never show.
KERNEL_MODELS = ("ulp", "saturating")


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


def _zeroed(layer: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    layer = layer.to(dtype)
    for p in layer.parameters():
        p.requires_grad_(False).zero_()
    return layer


def _layer_probe(kind: str, z: torch.Tensor) -> torch.Tensor:
    """``kind`` ("sigmoid", "tanh" or "rnn_tanh") of z as the recurrent layers compute it in this
    build (oneDNN or ATen): a one-unit ``nn.LSTM`` / ``nn.RNN`` run for one step on the batch z,
    with weights that make the probed pre-activation exactly z and every other factor exactly
    0 or 1, so its output *is* the layer's kernel value: c₁ = σ(z)·tanh(64) = σ(z) (probe i),
    c₁ = σ(64)·tanh(z) = tanh(z) (probe g), h₁ = tanh(z) (Elman). An infinite z enters through
    the bias with input 0 (through the weight, 0·∞ in another gate would be NaN)."""
    flat = z.reshape(-1)
    inf = torch.isinf(flat)
    x = torch.where(inf, torch.zeros_like(flat), flat).reshape(-1, 1, 1)
    with torch.no_grad():
        if kind == "rnn_tanh":
            layer = _zeroed(torch.nn.RNN(1, 1, batch_first=True), z.dtype)
            layer.weight_ih_l0.fill_(1.0)
            bias, row = layer.bias_ih_l0, 0
            run = lambda v: layer(v)[0].reshape(-1)
        else:
            layer = _zeroed(torch.nn.LSTM(1, 1, batch_first=True), z.dtype)
            row, fixed = (0, 2) if kind == "sigmoid" else (2, 0)     # gate rows: i, f, g, o
            layer.weight_ih_l0[row, 0] = 1.0
            layer.bias_ih_l0[fixed] = 64.0                           # σ(64) = tanh(64) = 1 exactly
            bias = layer.bias_ih_l0
            run = lambda v: layer(v)[1][1].reshape(-1)
        out = run(x)
        for j in inf.nonzero().reshape(-1).tolist():                 # ±∞: one run each
            bias[row] = flat[j]
            out[j] = run(x[j:j + 1])[0]
        return out.reshape(z.shape)


@dataclass(frozen=True)
class Saturation:
    """Exact-saturation thresholds of this build's kernels in one dtype: every kernel returns
    σ(z) = 1 for every float z with ``sigmoid ≤ z ≤ upto``, and tanh(z) = 1, tanh(−z) = −1 for
    every float z with ``tanh ≤ z ≤ upto``; each of those floats was evaluated (module section
    "Exact saturation"). A threshold of ``inf`` means no float is known to saturate (float64)."""

    sigmoid: float
    tanh: float
    checked: str
    upto: float = 0.0


#: floats per chunk of the saturation scan: its working memory is a few dozen bytes per float
SCAN_CHUNK = 1 << 20
#: the scan covers every float32 up to at least this value, and further on demand
SATURATION_MIN_UPTO = 512.0
#: version of the scan and of its cache files: bump it when what is checked changes
_SCAN_FORMAT = 1
_LANES = 16                        # units of the wide probe layers: one float per unit
_F32_INF_BITS = 0x7F800000         # bit pattern of +inf, just above the largest finite float32


def _bits(x: float) -> int:
    return int(torch.tensor(x, dtype=torch.float32).view(torch.int32))


def _from_bits(b: int) -> float:
    return float(torch.tensor(b, dtype=torch.int32).view(torch.float32))


def _start_bits(kind: str) -> int:
    """Where the scan may stop: below ln 2²⁴ − ½ (σ) and ½ ln 2²⁵ − ½ (tanh) a correctly
    rounded kernel is below 1 (1 − σ(z) ≈ e⁻ᶻ, 1 − tanh z ≈ 2e⁻²ᶻ), so no threshold lies lower."""
    u = unit_roundoff(torch.float32)
    z0 = math.log(1 / u) - 0.5 if kind == "sigmoid" else 0.5 * math.log(2 / u) - 0.5
    return _bits(z0)


def _wide_probes(kind: str):
    """A function z ↦ [(values, expected), ...]: the value of every kernel of ``kind`` at each of
    the finite positive float32 z (a 1-D tensor whose length is a multiple of `_LANES`), as a
    (rows, k, `_LANES`) tensor whose [r, :, j] entries belong to z[r·`_LANES` + j], and the k
    values saturation means there (tanh: 1 at z, −1 at −z).

    Kernels: ``torch.sigmoid`` / ``torch.tanh`` elementwise, and the ones inside ``nn.LSTM`` and
    ``nn.RNN`` (`_layer_probe`'s probes with `_LANES` floats per row): unit j's probed
    pre-activation is x_j·1 + Σₖ 0·x_k + 0 = x_j exactly (identity weights, finite x), its other
    factors are σ(64) = tanh(64) = 1 and σ(0)·c₀ = 0 with c₀ = 0, so c₁ or h₁ *is* the value."""
    n = _LANES
    eye = torch.eye(n)
    with torch.no_grad():
        if kind == "sigmoid":
            lstm = _zeroed(torch.nn.LSTM(n, n, batch_first=True), torch.float32)
            lstm.weight_ih_l0[:n] = eye                             # i gate: σ(z)
            lstm.bias_ih_l0[2 * n:3 * n] = 64.0                     # g gate: tanh(64) = 1
        else:
            h = 2 * n
            lstm = _zeroed(torch.nn.LSTM(n, h, batch_first=True), torch.float32)
            lstm.weight_ih_l0[2 * h:2 * h + n] = eye                # g gate of units 0..n−1: z
            lstm.weight_ih_l0[2 * h + n:3 * h] = -eye               # g gate of units n..2n−1: −z
            lstm.bias_ih_l0[:h] = 64.0                              # i gate: σ(64) = 1
            elman = _zeroed(torch.nn.RNN(n, h, batch_first=True), torch.float32)
            elman.weight_ih_l0[:n] = eye
            elman.weight_ih_l0[n:] = -eye
    zeros: dict = {}

    def state(rows: int, width: int) -> torch.Tensor:
        if (rows, width) not in zeros:
            zeros[rows, width] = torch.zeros(1, rows, width)
        return zeros[rows, width]

    def values(z: torch.Tensor) -> list:
        x = z.reshape(-1, 1, n)
        rows = x.shape[0]
        with torch.no_grad():
            if kind == "sigmoid":
                c = lstm(x, (state(rows, n), state(rows, n)))[1][1][0]
                return [(torch.sigmoid(x), (1.0,)), (c.view(rows, 1, n), (1.0,))]
            c = lstm(x, (state(rows, 2 * n), state(rows, 2 * n)))[1][1][0]
            r = elman(x, state(rows, 2 * n))[0]
            return [(torch.tanh(x), (1.0,)), (torch.tanh(-x), (-1.0,)),
                    (c.view(rows, 2, n), (1.0, -1.0)), (r.view(rows, 2, n), (1.0, -1.0))]
    return values


def _all_equal(v: torch.Tensor, expected: tuple) -> bool:
    """Every v[:, i, :] equals expected[i] (two reductions, no copy; NaN fails)."""
    e = torch.tensor(expected, dtype=v.dtype)
    return bool(torch.equal(v.amin(dim=(0, 2)), e) and torch.equal(v.amax(dim=(0, 2)), e))


def _saturated(kind: str, values, z: torch.Tensor) -> torch.Tensor:
    """Boolean mask over the positive float32 z (+inf allowed): every kernel of ``kind``
    saturates exactly at z (and at −z for tanh). ``values`` is `_wide_probes`(kind)."""
    if len(z) == 0:
        return torch.ones(0, dtype=torch.bool)
    if math.isinf(float(z[-1])):                       # sorted: +∞ can only come last; once
        inf = torch.isinf(z)
        out = torch.ones(len(z), dtype=torch.bool)
        out[~inf] = _saturated(kind, values, z[~inf])
        v = z[inf][:1]
        kernels = ((torch.sigmoid, lambda t: _layer_probe("sigmoid", t)) if kind == "sigmoid"
                   else (torch.tanh, lambda t: _layer_probe("tanh", t),
                         lambda t: _layer_probe("rnn_tanh", t)))
        out[inf] = all(bool((k(v) == 1).all()) and (kind == "sigmoid" or bool((k(-v) == -1).all()))
                       for k in kernels)
        return out
    pad = (-len(z)) % _LANES
    padded = torch.cat([z, z[-1:].expand(pad)]) if pad else z
    pairs = values(padded)
    if all(_all_equal(v, e) for v, e in pairs):                     # fast path: one pass each
        return torch.ones(len(z), dtype=torch.bool)
    ok = torch.ones(len(padded), dtype=torch.bool)
    for v, e in pairs:
        ok &= (v == torch.tensor(e, dtype=v.dtype).view(1, -1, 1)).all(dim=1).reshape(-1)
    return ok[:len(z)]


def _scan(saturated, lo: int, hi: int, chunk: int = SCAN_CHUNK) -> int:
    """The smallest bit pattern b in [lo, hi + 1] such that ``saturated`` (a mask function) holds
    at every float32 whose bit pattern lies in [b, hi]; hi + 1 if it fails at hi. For positive
    floats the order of bit patterns is the order of values. The floats are evaluated every one,
    from hi downwards, ``chunk`` at a time (bounded memory), up to the first failure."""
    end = hi + 1
    while end > lo:
        start = max(lo, end - chunk)
        z = torch.arange(start, end, dtype=torch.int32).view(torch.float32)
        ok = saturated(z)
        if not bool(ok.all()):
            return start + int((~ok).nonzero()[-1, 0]) + 1
        end = start
    return lo


def cached_scan(kind: str, saturated, lo: int, hi: int) -> int:
    """`_scan` (``saturated`` over the float32 bit patterns [lo, hi]) with its result kept on
    disk (`cache_dir`), keyed by ``kind``, ``hi`` and this torch build and CPU (`_build_key`): a
    cached entry is used only when it has this key and a threshold a scan could return."""
    key = dict(_build_key(kind), upto_bits=hi)
    path = _cache_file(key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    got = data.get("threshold_bits") if isinstance(data, dict) and data.get("key") == key \
        else None
    if isinstance(got, int) and not isinstance(got, bool) and lo <= got <= hi + 1:
        return got
    t = _scan(saturated, lo, hi)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "threshold_bits": t}), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
    return t


def cache_dir() -> Path:
    """Where scan results are kept: ``$PDANET_CACHE_DIR``, else ``$XDG_CACHE_HOME/pdanet``, else
    ``~/.cache/pdanet``."""
    if os.environ.get("PDANET_CACHE_DIR"):
        return Path(os.environ["PDANET_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pdanet"


def _build_key(kind: str) -> dict:
    """Everything that selects the kernels a float32 network runs on this CPU: the torch build,
    its CPU capability (ATen's vector kernels), whether nn.LSTM goes through oneDNN, oneDNN's
    ISA cap, and the machine architecture."""
    return {"format": _SCAN_FORMAT, "kind": kind, "dtype": "float32", "device": "cpu",
            "torch": torch.__version__, "git": str(torch.version.git_version),
            "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
            "mkldnn": bool(torch.backends.mkldnn.is_available()
                           and torch.backends.mkldnn.enabled),
            "onednn_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "")),
            "machine": platform.machine()}


def _cache_file(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return cache_dir() / f"saturation-{key['kind']}-{digest}.json"


def _valid_entry(kind: str, entry) -> tuple[int, int] | None:
    """(threshold bits, upto bits) from a cache entry, or None unless its shape and values are
    those a scan can produce."""
    if not isinstance(entry, dict):
        return None
    t, u = entry.get("threshold_bits"), entry.get("upto_bits")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (t, u)):
        return None
    if not (_bits(SATURATION_MIN_UPTO) <= u <= _F32_INF_BITS and u & 0x7FFFFF == 0):
        return None                                                  # upto is a power of two
    if not _start_bits(kind) <= t <= u + 1:
        return None
    return t, u


def _load(key: dict) -> tuple[int, int] | None:
    try:
        with open(_cache_file(key), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    return _valid_entry(key["kind"], data)


def _store(key: dict, t: int, u: int) -> None:
    """Write atomically (a temporary file, then os.replace); an unwritable cache is skipped."""
    path = _cache_file(key)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".saturation-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"key": key, "threshold_bits": t, "upto_bits": u,
                       "threshold": _from_bits(t) if t <= _F32_INF_BITS else None,
                       "upto": _from_bits(u)}, fh)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


_MEMO: dict[str, tuple[int, int]] = {}


def _checked(kind: str, upto_bits: int) -> tuple[int, int]:
    """(threshold bits t, upto bits U ≥ upto_bits): every kernel of ``kind`` saturates at every
    float32 with bits in [t, U]. Taken from the in-process or the disk cache when they cover
    ``upto_bits``; else the missing range above the cached one is scanned and the cache updated."""
    key = _build_key(kind)
    memo = json.dumps(key, sort_keys=True)
    have = _MEMO.get(memo) or _load(key)
    if have is not None and have[1] >= upto_bits:
        _MEMO[memo] = have
        return have
    limits.check("the kernel saturation scan", 64 * SCAN_CHUNK,
                 hint="set pdanet.verify.intervals.SCAN_CHUNK lower")
    values = _wide_probes(kind)
    mask = lambda z: _saturated(kind, values, z)
    if have is None:
        t = _scan(mask, _start_bits(kind), upto_bits)
    else:
        t_new = _scan(mask, have[1] + 1, upto_bits)
        t = have[0] if t_new == have[1] + 1 else t_new
    _MEMO[memo] = (t, upto_bits)
    _store(key, t, upto_bits)
    return t, upto_bits


def _upto_bits(need: float) -> int:
    """The bits of the least power of two ≥ max(need, SATURATION_MIN_UPTO) (+inf past float32)."""
    need = max(float(need), SATURATION_MIN_UPTO)
    if need > float(torch.finfo(torch.float32).max):
        return _F32_INF_BITS
    return _bits(2.0 ** math.ceil(math.log2(need)))


def saturation(dtype: torch.dtype, upto: float = 0.0) -> Saturation:
    """The `Saturation` thresholds of this build's kernels, checked at least up to ``upto``
    (rounded up to a power of two, at least `SATURATION_MIN_UPTO`). float32: every float of the
    range is evaluated on every kernel, once per torch build (cached in memory and on disk,
    `cache_dir`). float64 has 2⁵² floats per binade, too many to evaluate: no float64 float is
    claimed to saturate (thresholds ``inf``), so float64 proofs use the ulp model alone."""
    if dtype == torch.float64:
        return Saturation(math.inf, math.inf, "nothing in float64 (2^52 floats per binade are too "
                          "many to evaluate): float64 proofs use no exact saturation", 0.0)
    if dtype != torch.float32:
        raise ValueError(f"exact saturation is checked for float32 and float64, not {dtype}")
    need = _upto_bits(upto)
    found = {kind: _checked(kind, need) for kind in ("sigmoid", "tanh")}
    top = min(u for _, u in found.values())
    sig, th = (_from_bits(t) if t <= u else math.inf for t, u in found.values())
    return Saturation(sig, th, f"every float32 z from the threshold to {_from_bits(top):g} "
                      "(and −z for tanh), one by one, on torch.sigmoid/torch.tanh and the kernels "
                      "inside nn.LSTM/nn.RNN; the scan extends before a proof relies on a larger z",
                      _from_bits(top))


def _activation(f, a: Interval, dtype: torch.dtype, kind: str, kernel: str) -> Interval:
    if kernel not in KERNEL_MODELS:
        raise ValueError(f"kernel model must be one of {KERNEL_MODELS}, got {kernel!r}")
    u = unit_roundoff(dtype)
    lo, hi = f(a.lo), f(a.hi)
    err = (ACTIVATION_ULPS * 2 * u + 4 * _U64) * np.maximum(np.abs(lo), np.abs(hi)) + tiny(dtype)
    out = Interval(lo, hi).widen(err)
    if kernel != "saturating" or dtype != torch.float32:
        return out
    sat = saturation(dtype)
    z = getattr(sat, kind)
    top = a.lo >= z
    bottom = a.hi <= -z if kind == "tanh" else np.zeros_like(top)
    reach = max(float(np.max(a.hi, where=top, initial=0.0)),
                float(np.max(-a.lo, where=bottom, initial=0.0)))
    if reach > sat.upto:                  # rely on no float beyond what was checked
        sat = saturation(dtype, upto=reach)
        z = getattr(sat, kind)
        top = a.lo >= z
        bottom = a.hi <= -z if kind == "tanh" else np.zeros_like(top)
    top &= a.hi <= sat.upto
    bottom &= a.lo >= -sat.upto
    lo, hi = np.where(top, 1.0, out.lo), np.where(top, 1.0, out.hi)
    lo, hi = np.where(bottom, -1.0, lo), np.where(bottom, -1.0, hi)
    return Interval(lo, hi)


def tanh(a: Interval, dtype: torch.dtype, kernel: str = "ulp") -> Interval:
    """Enclosure of the dtype's tanh over ``a`` under the kernel model ``kernel``
    (`KERNEL_MODELS`)."""
    out = _activation(np.tanh, a, dtype, "tanh", kernel)
    return Interval(np.maximum(out.lo, -1.0), np.minimum(out.hi, 1.0))


def sigmoid(a: Interval, dtype: torch.dtype, kernel: str = "ulp") -> Interval:
    """Enclosure of the dtype's logistic sigmoid over ``a`` under the kernel model ``kernel``
    (`KERNEL_MODELS`)."""
    def f(z):  # the numerically stable logistic, accurate to a few float64 ulps everywhere
        with np.errstate(over="ignore"):
            e = np.exp(-np.abs(z))
            return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    out = _activation(f, a, dtype, "sigmoid", kernel)
    return Interval(np.maximum(out.lo, 0.0), np.minimum(out.hi, 1.0))


__all__ = [
    "ACTIVATION_ULPS",
    "KERNEL_MODELS",
    "Interval",
    "Saturation",
    "add",
    "affine",
    "cache_dir",
    "gamma",
    "lstm_cell",
    "mul",
    "saturation",
    "scale",
    "sigmoid",
    "tanh",
    "to_dtype",
    "unit_roundoff",
]

"""Certificates for Minsky language models (`pdanet.constructions.lm.LMUnits`): the hidden state
stays in a certified box around its one-hot centre for every length, and from the boxes a
rigorous bound on the log-probability error.

1. *State*: the recurrent part is the DFA Minsky construction, certified exactly as the DFA
   networks are (`box.Boxes` and the induction of `induction`, over the explored (PFSA state,
   network state) nodes, in the module's dtype with outward rounding): every state h_t lies in
   the R-box of the centre of its node. The induction's readout check is only that the logits
   are enclosed on the invariant boxes (finite, no overflow).
2. *Image boxes, per node*: one more pass maps every (node, symbol) case's invariant box through
   a step and keeps, for each successor node, the hull of the images that enter it, intersected
   with its invariant box (`image_boxes`). Every state after one step or more lies in its node's
   image box; the initial state is a point of its own. Per node, not one radius per unit: a unit
   that is on in one node and off in another keeps its own, tight, interval in each. The pass
   uses the "saturating" kernel model: float32 saturation as checked by `intervals.saturation`;
   float64 saturation by the assumption `F64_LIMIT_GAP` (`f64_limits`, sampled on this build
   before use); and the *kernel's own value* where an activation's input
   is a single float (an LSTM cell exactly 1 gives h = tanh(1) as the kernels compute it,
   evaluated here on every kernel a network of that dtype runs: `kernel_hull`; the same
   assumption as the saturation scan — each kernel is a function of its input element alone).
3. *Readout*: on each node's image box the logits z = O₂(O₁h + b₁) + b₂ are enclosed in the dtype
   (`affine_tight`: the classical bound γₙ·Σ|terms| with n the nonzero terms, intersected with
   dominant-term bounds — one large term (or two, e.g. cancelling) created by single roundings,
   to which every other merge adds at most twice the small terms, whatever the order of
   summation or fusion), or computed exactly for Elman networks whose units are exactly ±1 (the code layer
   sums multiples of 1/2 that every float order computes exactly, so the logits are the stored
   floats of ln p). They are compared with the ideal logits ℓ* of the node's PFSA state, computed
   from the machine's own probabilities (ln p within 2⁻¹²⁰ by `lm.exact_log`, then as float64
   within 2⁻⁵²·|ℓ*|; the floor F for probability 0), never read from the network.
   With δ the largest |Δℓ| over the possible symbols and δ_F over the n impossible ones, s the
   row's exact sum of probabilities (1 for exact rows; float rows may be off by their
   tolerance) and a = n·e^F/s: ln q(o) − ln p(o) = Δℓ_o − ln E_{softmax(ℓ*)}[e^Δℓ] −
   ln(s + n·e^F), the middle term lies in [−δ + ln(1 − m), δ + ln(1 + m·e^δ_F)] with
   m = n·e^F/(s + n·e^F) ≤ a the ideal impossible mass, so
   |ln q(o) − ln p(o)| ≤ ``2δ + |ln s| + ln(1 + a) + ln(1 + a·e^δ_F)``. Plus the error of
   evaluating log-softmax in the dtype (`_logsoftmax_error`: max-shift, exp, sum, log, each
   rounded, exp and log within `intervals.ACTIVATION_ULPS` ulps), since what the network reports
   — and `pdanet.verify` measures — is that float: the certified ``logprob_error`` in nats per
   symbol (every position of every string of positive probability, hence the log-likelihood
   per symbol of every such string); the impossible symbols carry total mass ≤ a·e^(δ_F + δ).
   The certificate holds when the bound is at most ``tolerance``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from fractions import Fraction

import numpy as np
import torch

from pdanet.automata.base import Machine
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.lm import LMUnits, exact_log
from pdanet.errors import CertificationError, InputError
from pdanet.verify import intervals as iv
from pdanet.verify.certify.box import Boxes, _affine_overflow_free
from pdanet.verify.certify.core import (
    EPS_LADDER,
    Certificate,
    FailingCase,
    Progress,
    begin,
    check_pair,
    notify,
    ulp_then_saturating,
)
from pdanet.verify.certify.induction import LIVE_NOTE, induct

#: the largest certified log-probability error (nats per symbol) a certificate accepts
DEFAULT_TOLERANCE = 5e-2
_F64 = 2.0**-52
_U64 = 2.0**-53

# --- float64 saturation: an assumption on the kernels near their limits ----------------------

#: Assumed of every float64 kernel: where the exact σ(z) or |tanh(z)| lies within this gap of 1
#: (an eighth of the spacing 2⁻⁵³ of the floats just below 1), the kernel returns exactly 1
#: (tanh: ±1). A correctly rounded kernel does so within 2⁻⁵⁴; so do the usual forms with their
#: inner exp within `intervals.ACTIVATION_ULPS` ulps: σ = 1/(1 + e), e = exp(−z) ≤
#: e^(−z)·(1 + 8·2⁻⁵²) ≤ 2⁻⁵³ rounds 1 + e to 1; tanh = 1 − 2/(t + 2), t = expm1(2z), whose
#: quotient ≤ 2⁻⁵⁴ rounds to 1. (No ulp bound alone can give exactly 1: a result 8 ulps below 1
#: is within 8 ulps of any value near 1.) `f64_limits` samples it on this build before use.
F64_LIMIT_GAP = 2.0**-56
#: σ(z) = 1 for float64 z ≥ this: 1 − σ(z) < e^(−z) ≤ gap ⇔ z ≥ 56·ln 2 = 38.8162…
F64_SIGMOID_AT = 38.82
#: tanh(z) = ±1 for float64 |z| ≥ this: 1 − tanh z < 2e^(−2z) ≤ gap ⇔ z ≥ 57·ln 2 / 2 = 19.7547…
F64_TANH_AT = 19.76
#: consecutive float64s sampled above each threshold (with a geometric sample up to the largest)
F64_SAMPLE = 1 << 16


def _cell_tanh_probe(z: torch.Tensor) -> torch.Tensor:
    """tanh(z) as ``nn.LSTM`` computes its output h = o·tanh(c) (the cell's tanh, which may be
    another kernel than the g gate's): a one-unit LSTM run one step from c₀ = z with f = o = σ(64)
    = 1 and g = tanh(0) = 0, so c₁ = c₀ exactly and h₁ = tanh(z)."""
    flat = z.reshape(-1)
    with torch.no_grad():
        layer = iv._zeroed(torch.nn.LSTM(1, 1, batch_first=True), z.dtype)
        layer.bias_ih_l0[1] = 64.0                                   # f gate: σ(64) = 1
        layer.bias_ih_l0[3] = 64.0                                   # o gate: σ(64) = 1
        x = torch.zeros(len(flat), 1, 1, dtype=z.dtype)
        h0 = torch.zeros(1, len(flat), 1, dtype=z.dtype)
        out = layer(x, (h0, flat.reshape(1, -1, 1)))[0].reshape(-1)
    return out.reshape(z.shape)


def _kernels(kind: str) -> tuple:
    """Every kernel a network runs for ``kind``: the elementwise torch function and the ones
    inside ``nn.LSTM`` / ``nn.RNN`` (`intervals._layer_probe`, `_cell_tanh_probe`)."""
    if kind == "sigmoid":
        return (torch.sigmoid, lambda t: iv._layer_probe("sigmoid", t))
    return (torch.tanh, lambda t: iv._layer_probe("tanh", t),
            lambda t: iv._layer_probe("rnn_tanh", t), _cell_tanh_probe)


_F64_LIMITS: dict[str, iv.Saturation | None] = {}


def f64_limits() -> iv.Saturation | None:
    """The float64 thresholds `F64_SIGMOID_AT`, `F64_TANH_AT` (assumption `F64_LIMIT_GAP`), once
    a sample agrees on this build: the `F64_SAMPLE` consecutive floats from each threshold up,
    4,096 geometrically spaced ones to the largest float, on every kernel (`_kernels`; tanh at
    ±z). None when a sampled float is not saturated (then no float64 saturation is claimed).
    Memoised per process."""
    if "v" not in _F64_LIMITS:
        ok = True
        top = float(torch.finfo(torch.float64).max)
        for kind, t in (("sigmoid", F64_SIGMOID_AT), ("tanh", F64_TANH_AT)):
            bits = np.float64(t).view(np.int64) + np.arange(F64_SAMPLE, dtype=np.int64)
            z = torch.as_tensor(np.concatenate([bits.view(np.float64), np.exp(np.linspace(math.log(t), math.log(top) - 1e-9, 4096))]))
            for k in _kernels(kind):
                ok &= bool((k(z) == 1).all())
                if kind == "tanh":
                    ok &= bool((k(-z) == -1).all())
        _F64_LIMITS["v"] = iv.Saturation(
            F64_SIGMOID_AT, F64_TANH_AT, f"assumed where the exact value is within 2^-56 of ±1 "
            f"(σ(z) = 1 for z ≥ {F64_SIGMOID_AT}, tanh(z) = ±1 for |z| ≥ {F64_TANH_AT}); sampled "
            f"on this build's float64 kernels ({F64_SAMPLE:,} consecutive floats from each "
            "threshold, 4,096 up to the largest)", top) if ok else None
    return _F64_LIMITS["v"]


_HULL: dict[tuple, tuple[float, float]] = {}


def kernel_hull(kind: str, points: np.ndarray, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): the least and greatest value of every kernel of ``kind`` (`_kernels`) at each of
    the float ``points`` of ``dtype`` (evaluated, memoised): exact, for a network running one of
    those kernels, each a function of its input element alone."""
    _check_kind(kind)
    pts = np.asarray(points, dtype=np.float64)
    key = str(dtype)
    missing = np.unique(pts[[(key, kind, float(p)) not in _HULL for p in pts]]) if pts.size \
        else pts
    if missing.size:
        t = torch.as_tensor(missing).to(dtype)
        vals = torch.stack([k(t).double() for k in _kernels(kind)])
        lo, hi = vals.amin(0).numpy(), vals.amax(0).numpy()
        for p, a, b in zip(missing.tolist(), lo.tolist(), hi.tolist()):
            _HULL[key, kind, p] = (a, b)
    got = np.array([_HULL[key, kind, float(p)] for p in pts]).reshape(pts.shape + (2,))
    return got[..., 0], got[..., 1]


def _check_kind(kind: str) -> None:
    if kind not in ("sigmoid", "tanh"):
        raise InputError(f"kind={kind!r}: the activations are 'sigmoid' and 'tanh'")


def _is_float(x: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    return np.isfinite(x) & ((x.astype(np.float32).astype(np.float64) == x)
                             if dtype == torch.float32 else True)


def activation(kind: str, z: iv.Interval, dtype: torch.dtype, kernel: str) -> iv.Interval:
    """Enclosure of the dtype's ``kind`` ("sigmoid" or "tanh") over ``z``: `intervals.sigmoid` /
    `intervals.tanh` under ``kernel``; under "saturating" also float64 saturation (`f64_limits`)
    and, where z is a single float, the kernels' own values there (`kernel_hull`)."""
    _check_kind(kind)
    out = (iv.sigmoid if kind == "sigmoid" else iv.tanh)(z, dtype, kernel)
    if kernel != "saturating":
        return out
    lo, hi = out.lo.copy(), out.hi.copy()
    if dtype == torch.float64 and (lim := f64_limits()) is not None:
        t = getattr(lim, kind)
        top = (z.lo >= t) & (z.hi <= lim.upto)
        lo[top] = hi[top] = 1.0
        if kind == "tanh":
            bottom = (z.hi <= -t) & (z.lo >= -lim.upto)
            lo[bottom] = hi[bottom] = -1.0
    point = (z.lo == z.hi) & _is_float(z.lo, dtype)
    if point.any():
        lo[point], hi[point] = kernel_hull(kind, z.lo[point], dtype)
    return iv.Interval(lo, hi)


# --- tight readout enclosures ----------------------------------------------------------------

def affine_tight(W: np.ndarray, x: iv.Interval, b: np.ndarray, dtype: torch.dtype) -> iv.Interval:
    """Enclosure of fl(W x + b) over the box x (rows of x batched), in any order of summation,
    blocked or fused, as the intersection of three bounds per output (terms: the products
    w_j·x_j and b; n: the nonzero ones — a zero weight or bias adds an exact 0):

    - classical: the exact range widened by γₙ·Σ|terms| (Higham §3.1) plus n·tiny;
    - one dominant term t₁ (the largest), S ≥ Σ|others| (their rounded partial sums lie within
      (1 + γₙ)·S): the node that creates t₁ (a rounded product, or a fused product plus a small
      partial sum) lies in [fl(min t₁ − S), fl(max t₁ + S)] (rounding is monotone), and every
      merge of a partial sum V holding t₁ with a small partial sum v moves V by ≤ 2|v| (V is a
      float at distance |v| from V + v, so round-to-nearest lands within |v| of it): in all
      ≤ 2(1 + γₙ)·S;
    - two dominant terms t₁, t₂ (e.g. a bias 1 and a unit's −h/t that cancel): each partial sum
      Vₖ holding tₖ alone lies in its creation's range (or tₖ's exact range, when it is fused
      into the merge) ± 2S; their one merge fl(V₁ + V₂) lies in [fl(min V₁ + min V₂),
      fl(max V₁ + max V₂)] (monotone again, exact under cancellation); later merges ± 2S.

    The bounds are evaluated in float64 with their own rounding accounted for (outward)."""
    u, tiny = iv.unit_roundoff(dtype), iv.tiny(dtype)
    P, out = x.lo.shape[0], W.shape[0]
    lo_all, hi_all = np.empty((P, out)), np.empty((P, out))
    mag = x.mag
    r = np.arange(P)
    for q in range(out):
        cols = np.flatnonzero(W[q])
        w = W[q, cols]
        bq = float(b[q]) if b is not None else 0.0
        tm = mag[:, cols] * np.abs(w)                                    # |terms| (P, k)
        pl = np.minimum(x.lo[:, cols] * w, x.hi[:, cols] * w)            # product ranges
        ph = np.maximum(x.lo[:, cols] * w, x.hi[:, cols] * w)
        if bq != 0:                                                       # the bias: a term
            tm = np.concatenate([tm, np.full((P, 1), abs(bq))], axis=1)
            pl = np.concatenate([pl, np.full((P, 1), bq)], axis=1)
            ph = np.concatenate([ph, np.full((P, 1), bq)], axis=1)
        n = tm.shape[1]
        A = tm.sum(axis=1)
        g64 = iv.gamma(n + 2, _U64)
        gn = iv.gamma(max(n, 1), u)
        err = (gn + g64) * A + n * tiny
        lo, hi = _dn(pl.sum(axis=1) - g64 * A), _upx(ph.sum(axis=1) + g64 * A)
        best_lo, best_hi = _dn(lo - err), _upx(hi + err)
        if n >= 1:
            top = np.argpartition(-tm, min(1, n - 1), axis=1)[:, :2] if n >= 2 else \
                np.zeros((P, 1), dtype=np.int64)
            top = np.where(tm[r, top[:, 0]][:, None] >= tm[r, top[:, -1]][:, None], top,
                           top[:, ::-1])
            pk_lo, pk_hi = _dn(pl[r[:, None], top]), _upx(ph[r[:, None], top])
            others = tm.copy()
            others[r, top[:, 0]] = 0.0
            S = _small(others.sum(axis=1), gn, g64, n, tiny)
            c_lo, c_hi = _fl_down(pk_lo[:, 0] - S, dtype), _fl_up(pk_hi[:, 0] + S, dtype)
            best_lo = np.maximum(best_lo, _dn(c_lo - 2 * S))
            best_hi = np.minimum(best_hi, _upx(c_hi + 2 * S))
            if n >= 2:
                others[r, top[:, 1]] = 0.0
                S = _small(others.sum(axis=1), gn, g64, n, tiny)
                V_lo, V_hi = [], []
                for k in (0, 1):
                    c_lo = np.minimum(_fl_down(pk_lo[:, k] - S, dtype), pk_lo[:, k])
                    c_hi = np.maximum(_fl_up(pk_hi[:, k] + S, dtype), pk_hi[:, k])
                    V_lo.append(_dn(c_lo - 2 * S))
                    V_hi.append(_upx(c_hi + 2 * S))
                t_lo = _fl_down(V_lo[0] + V_lo[1], dtype)
                t_hi = _fl_up(V_hi[0] + V_hi[1], dtype)
                best_lo = np.maximum(best_lo, _dn(t_lo - 2 * S))
                best_hi = np.minimum(best_hi, _upx(t_hi + 2 * S))
        lo_all[:, q], hi_all[:, q] = best_lo, best_hi
    return iv.Interval(lo_all, hi_all)


def _small(total: np.ndarray, gn: float, g64: float, n: int, tiny: float) -> np.ndarray:
    """An upper bound on the magnitude of any rounded partial sum of the small terms, from their
    float64 sum ``total``."""
    return _upx(total * (1 + gn) * (1 + 2 * g64) + (n + 1) * tiny)


def _dn(v: np.ndarray) -> np.ndarray:
    """A float64 ≤ the real value that float64 arithmetic rounded to ``v`` (one rounding)."""
    return np.nextafter(v - _U64 * np.abs(v), -np.inf)


def _upx(v: np.ndarray) -> np.ndarray:
    return np.nextafter(v + _U64 * np.abs(v), np.inf)


def _fl_down(v: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """A float of the dtype ≤ fl(y) for every real y ≥ the value v stands for (v float64,
    rounded once: widened first; round-to-nearest is monotone)."""
    return iv._fl(_dn(v), dtype)


def _fl_up(v: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    return iv._fl(_upx(v), dtype)


# --- the certificate ----------------------------------------------------------------------------

@dataclass(frozen=True)
class LMCertificate(Certificate):
    """A `Certificate` of a Minsky language model with the certified bounds (module
    docstring): ``logprob_error`` — |ln q(o | prefix) − ln p(o | prefix)| for every prefix of
    positive probability (of the lengths the certificate covers) and every possible symbol o, in
    nats, as the network's log-softmax computes it in its dtype (``evaluation_error``, the
    share of that evaluation, included); ``logit_error`` — max |Δ logit| on the image boxes,
    over every symbol;
    ``impossible_mass`` — the largest softmax mass on impossible symbols; ``tolerance`` — the
    largest bound the certificate accepts."""

    logprob_error: float = math.nan
    logit_error: float = math.nan
    impossible_mass: float = math.nan
    tolerance: float = math.nan
    evaluation_error: float = math.nan

    def __str__(self) -> str:
        line = (f"  log-probability error ≤ {self.logprob_error:.3g} nats per symbol (logits "
                f"within {self.logit_error:.3g}; log-softmax evaluation ≤ "
                f"{self.evaluation_error:.3g}; mass on impossible symbols ≤ "
                f"{self.impossible_mass:.3g})")
        return super().__str__() + ("\n" + line if self.ok else "")


@dataclass(frozen=True)
class ImageBoxes:
    """Per node, the hull of the one-step images that enter it (`image_boxes`): ``lo``/``hi``
    (P, S), +inf/−inf where no case enters (NaN where an enclosure is not finite)."""

    lo: np.ndarray
    hi: np.ndarray
    cases: int


class LMBoxes(Boxes):
    """`Boxes` whose readout check is the log-probability bound of the module docstring."""

    def __init__(self, machine: Machine, net: CompiledNetwork, max_configs: int, chunk: int,
                 progress: Progress | None, tolerance: float):
        super().__init__(machine, net, max_configs, chunk, progress)
        abst = net.abstraction
        self.tolerance = tolerance
        self.floor = float(abst.floor)
        code_of = {q: c for c, q in enumerate(abst.code_states)}
        states = np.asarray(self.fields["state"]).reshape(-1)
        self.node_code = np.array([code_of.get(int(q), -1) for q in states], dtype=np.int64)
        # the ideal logits come from the machine, never from the network's weights
        logs = {}
        rows = np.asarray(machine.probs, dtype=np.float64)
        ideal = np.full(rows.shape, self.floor)
        for q, o in zip(*np.nonzero(rows > 0)):
            p = machine._rows[q, o]
            if p not in logs:
                logs[p] = float(exact_log(p))
            ideal[q, o] = logs[p]
        self.node_state = states
        self.ideal_rows = ideal                                   # (Q, O)
        # |ln s| for each state's row sum s (exactly 1 for exact rows; float rows may be off)
        sums = [sum((Fraction(p) for p in machine._rows[q]), Fraction(0))
                for q in range(len(rows))]
        self.log_sum = np.array([0.0 if t == 1 else abs(float(exact_log(t))) * (1 + 2**-50)
                                 for t in sums])
        self.row_sum_low = np.array([float(t) * (1 - 2**-50) for t in sums])
        probs = np.asarray(self.fields["output"]).reshape(len(states), -1)
        self.possible = probs > 0                                 # (P, O)
        self.impossible = (~self.possible).sum(axis=1)            # per node
        self.last_R: np.ndarray | None = None

    def rejection(self) -> FailingCase | None:
        bad = super().rejection()
        if bad is None and (self.node_code < 0).any():
            p = int(np.argmax(self.node_code < 0))
            return FailingCase("encoding", self.pair_desc(p), None, -1, "readout code",
                               (math.nan, math.nan), (math.nan, math.nan))
        return bad

    def bound(self, R_h: np.ndarray) -> tuple[float, float, float, tuple | None, float]:
        """(log-prob bound, max |Δ logit|, impossible mass, worst (node, symbol, lo, hi, ideal),
        log-softmax evaluation bound) on the boxes of radii R_h (H,) around every node (inf
        where an enclosure overflows)."""
        h = iv.Interval.around(self.E[:, :self.H], R_h)
        return self.box_bound(np.arange(len(self.E)), h.lo, h.hi)

    def box_bound(self, nodes: np.ndarray, lo: np.ndarray, hi: np.ndarray
                  ) -> tuple[float, float, float, tuple | None, float]:
        """The bound of the module docstring over hidden states h ∈ [lo, hi] (rows) at ``nodes``
        (the node whose PFSA state's ideal logits each row is compared with)."""
        worst_b, worst_d, worst_m, where, worst_e = 0.0, 0.0, 0.0, None, 0.0
        for start in range(0, len(nodes), self.chunk):
            sl = slice(start, min(len(nodes), start + self.chunk))
            got = self._bound_rows(nodes[sl], lo[sl], hi[sl])
            if got[0] > worst_b or where is None:
                worst_b, where = got[0], got[3]
            worst_d, worst_m = max(worst_d, got[1]), max(worst_m, got[2])
            worst_e = max(worst_e, got[4])
        return worst_b, worst_d, worst_m, where, worst_e

    def _logits(self, lo: np.ndarray, hi: np.ndarray) -> tuple[iv.Interval, np.ndarray]:
        """Enclosure of the logits on the boxes [lo, hi] (rows), and where it is overflow-free:
        exactly on the rows of an Elman network that are exactly ±1 (`_exact_logits`), else by
        `affine_tight`."""
        W, dtype = self.W, self.dtype
        h = iv.Interval(lo, hi)
        safe = _affine_overflow_free(W.readout_weight, h, W.readout_bias, dtype).all(1)
        z = affine_tight(W.readout_weight, h, W.readout_bias, dtype)
        safe &= _affine_overflow_free(W.out_weight, z, W.out_bias, dtype).all(1)
        z = affine_tight(W.out_weight, z, W.out_bias, dtype)
        exact, rows = self._exact_logits(lo, hi)
        if rows.any():
            z = iv.Interval(np.where(rows[:, None], exact, z.lo), np.where(rows[:, None], exact,
                                                                           z.hi))
            safe |= rows
        return z, safe

    def _exact_logits(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(logits, rows where they are exact): an Elman row whose units are exactly ±1, when the
        code layer's weights and biases are multiples of 1/2 whose absolute sum stays below
        2^(mantissa bits) / 2 — every partial sum is then an exactly representable multiple of
        1/2 in any order of summation — and gives a one-hot code: the logits are one weight times
        1 plus exact zeros (with a zero bias), the stored floats of ln p."""
        W, dtype = self.W, self.dtype
        none = np.zeros(len(lo), dtype=bool)
        if self.cell != "rnn" or W.out_weight is None or (W.out_bias != 0).any():
            return np.zeros((len(lo), 0)), none
        w2, b2 = 2 * W.readout_weight, 2 * W.readout_bias
        span = np.abs(W.readout_weight).sum(axis=1) + np.abs(W.readout_bias)
        if not ((w2 == np.round(w2)).all() and (b2 == np.round(b2)).all()
                and (span < 0.5 / iv.unit_roundoff(dtype)).all()):
            return np.zeros((len(lo), 0)), none
        rows = (lo == hi).all(axis=1) & np.isin(lo, (-1.0, 1.0)).all(axis=1)
        h = np.where(rows[:, None], lo, 0.0)
        z = h @ W.readout_weight.T + W.readout_bias               # exact: small multiples of 1/2
        rows &= np.isin(z, (0.0, 1.0)).all(axis=1) & (z.sum(axis=1) == 1)
        logits = W.out_weight[:, z.argmax(axis=1)].T               # (P, O): the stored floats
        return logits, rows

    def _bound_rows(self, nodes: np.ndarray, lo: np.ndarray, hi: np.ndarray
                    ) -> tuple[float, float, float, tuple, float]:
        z, safe = self._logits(lo, hi)
        ideal = self.ideal_rows[self.node_state[nodes]]
        dev = np.maximum(z.hi - ideal, ideal - z.lo) + _F64 * np.abs(ideal)
        dev = np.where(safe[:, None], dev, np.nan)
        pos = self.possible[nodes]
        d_pos = np.where(pos, dev, -np.inf).max(axis=1)
        d_imp = np.where(pos, -np.inf, dev).max(axis=1)
        d_imp = np.where(np.isnan(dev).any(axis=1), np.nan, np.maximum(d_imp, 0.0))
        d_pos = np.where(np.isnan(dev).any(axis=1), np.nan, np.maximum(d_pos, 0.0))
        ev = _logsoftmax_error(z, pos, self.dtype)
        n = self.impossible[nodes]
        st = self.node_state[nodes]
        a = n * math.exp(self.floor) / self.row_sum_low[st]        # ≥ n·e^F / s
        with np.errstate(over="ignore", invalid="ignore"):
            b = (2 * d_pos + self.log_sum[st] + np.log1p(a)
                 + np.log1p(a * np.exp(d_imp)) + ev) * (1 + 8 * _U64)
            mass = a * np.exp(d_imp + d_pos)
        b = np.where(np.isnan(b), np.inf, b)
        r = int(np.argmax(b))
        o = int(np.nanargmax(np.where(pos[r] | ~np.isfinite(dev[r]),
                                      np.nan_to_num(dev[r], nan=np.inf), -np.inf)))
        where = (int(nodes[r]), o, float(z.lo[r, o]), float(z.hi[r, o]), float(ideal[r, o]))
        d_all = np.nan_to_num(dev, nan=np.inf).max(axis=1)
        return (float(b.max()), float(d_all.max()), float(np.nan_to_num(mass, nan=np.inf).max()),
                where, float(np.nan_to_num(ev, nan=np.inf).max()))

    def readout(self, R: np.ndarray) -> tuple[FailingCase | None, float, int]:
        """During the induction: only that the logits on the invariant boxes are enclosed
        (finite, no overflow); the bound itself is taken on the image boxes (`certify`). The
        radii are kept (``last_R``)."""
        self.last_R = R.copy()
        W, dtype = self.W, self.dtype
        for start in range(0, len(self.E), self.chunk):
            rows = np.arange(start, min(len(self.E), start + self.chunk))
            h = iv.Interval.around(self.E[rows, :self.H], R[:self.H, 0])
            safe = _affine_overflow_free(W.readout_weight, h, W.readout_bias, dtype).all(1)
            z = iv.affine(W.readout_weight, h, W.readout_bias, dtype)
            safe &= _affine_overflow_free(W.out_weight, z, W.out_bias, dtype).all(1)
            z = iv.affine(W.out_weight, z, W.out_bias, dtype)
            ok = safe & np.isfinite(z.lo).all(1) & np.isfinite(z.hi).all(1)
            if not ok.all():
                r = int(np.argmax(~ok))
                where = (int(rows[r]), 0, float(z.lo[r, 0]), float(z.hi[r, 0]),
                         float(self.ideal_rows[self.node_state[rows[r]], 0]))
                return self.failing_readout(where, math.inf), math.nan, len(self.E)
        return None, math.inf, len(self.E)

    def failing_readout(self, where: tuple, tolerance: float) -> FailingCase:
        p, o, lo, hi, ideal = where
        sym = self.machine.output_alphabet.symbols[o]
        half = tolerance / 2
        return FailingCase("readout", self.pair_desc(p), None, o, f"logit of {sym!r}", (lo, hi),
                           (ideal - half, ideal + half))


def _logsoftmax_error(z: iv.Interval, possible: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Per row, a bound on |fl(log_softmax(z))_o − ln softmax(z)_o| over the possible symbols o
    and the logits z in the boxes, for a kernel computing a_j = z_j − M (M = max z), S = Σ
    exp(a_j), then a_o − ln S (or z_o − (M + ln S)), each operation rounded (u) and exp, log within
    `intervals.ACTIVATION_ULPS` ulps (2u·k relative, the assumption made of the kernels): with
    n logits, 1 ≤ S ≤ n and |a_j|·e^(a_j) ≤ 1/e, Ŝ = S(1 + η), |η| ≤ γₙ + 2ku + u/e, and
    |error| ≤ 3u|a_o| + η(1 + η) + 2ku(ln n + η) + u(2 ln n + 2η + |M|), first order, widened
    by 1% and (n + 4)·tiny for what is second order or flushed."""
    u, k = iv.unit_roundoff(dtype), iv.ACTIVATION_ULPS
    n = z.lo.shape[1]
    M_hi = z.hi.max(axis=1)
    M_mag = np.maximum(np.abs(z.lo.max(axis=1)), np.abs(M_hi))       # ≥ |M|
    a = np.where(possible, M_hi[:, None] - z.lo, 0.0).max(axis=1)     # ≥ |a_o|, possible o
    eta = iv.gamma(n, u) + 2 * k * u + u / math.e
    ln_n = math.log(n)
    err = (3 * u * a + eta * (1 + eta) + 2 * k * u * (ln_n + eta)
           + u * (2 * ln_n + 2 * eta + M_mag))
    return err * 1.01 + (n + 4) * iv.tiny(dtype)


def image_boxes(fam: LMBoxes, R: np.ndarray, kernel: str = "saturating") -> ImageBoxes:
    """One step of every (node, live symbol) case from the invariant boxes of radii R (S, 1)
    (those of `Boxes.step`: the same pre-activation enclosure, `Boxes.preactivations`), with the
    activations of `activation` under ``kernel``; each image is intersected with its successor's
    invariant box (the induction proved it lies there) and hulled into that node's image box."""
    E, H, dtype = fam.E, fam.H, fam.dtype
    R = R[:, 0]
    P, S = E.shape
    lo, hi = np.full((P, S), np.inf), np.full((P, S), -np.inf)
    cases = 0
    for rows, _, tgt, z in fam.preactivations(R, "image boxes"):
        cases += len(rows)
        if fam.cell == "rnn":
            out = activation("tanh", z, dtype, kernel)
        else:  # c' = f·c + i·g, h' = o·tanh(c') (gate order i, f, g, o)
            zi, zf, zg, zo = (z[:, k * H:(k + 1) * H] for k in range(4))
            gi, gf = activation("sigmoid", zi, dtype, kernel), activation("sigmoid", zf,
                                                                           dtype, kernel)
            gg, go = activation("tanh", zg, dtype, kernel), activation("sigmoid", zo, dtype,
                                                                        kernel)
            cn = iv.lstm_cell(gf, iv.Interval.around(E[rows, H:], R[H:]), gi, gg, dtype)
            hn = iv.mul(go, activation("tanh", cn, dtype, kernel), dtype)
            out = iv.Interval(np.concatenate([hn.lo, cn.lo], 1),
                              np.concatenate([hn.hi, cn.hi], 1))
        box = iv.Interval.around(E[tgt], R)
        o_lo, o_hi = np.maximum(out.lo, box.lo), np.minimum(out.hi, box.hi)  # NaN stays NaN
        np.minimum.at(lo, tgt, o_lo)
        np.maximum.at(hi, tgt, o_hi)
    return ImageBoxes(lo, hi, cases)


def cap_order(fam: LMBoxes) -> tuple[float, ...]:
    """`EPS_LADDER`, led by the largest cap at which the induction's starting radii (10⁻³ of the
    cap, `induction.induct`) move no pre-activation by more than a quarter of its designed
    margin (β for Elman units, β/4 for LSTM gates: `constructions.lm`), so that a wide Minsky
    network does not first fail at every larger cap. Only the time taken depends on it: every
    cap's proof is checked in full."""
    beta = float(fam.net.scale)
    margin = beta if fam.cell == "rnn" else beta / 4
    spread = float(np.abs(fam.W.weight_hh).sum(axis=1).max(initial=0.0)) * 1e-3
    fits = [c for c in EPS_LADDER if spread * c <= margin / 4]
    first = fits[0] if fits else EPS_LADDER[-1]
    return (first,) + tuple(c for c in EPS_LADDER if c != first)


def _prove(fam: LMBoxes, run, eps: float | None) -> tuple[Certificate, np.ndarray | None]:
    """`induction.prove` with retry (the ulp model, then the saturating one when it proves less
    than every length: `ulp_then_saturating`), over ``eps`` or the caps of `cap_order` (the
    first that proves every length, else the one proving the longest: `best_over_caps`),
    keeping the radii of the certificate's own induction."""
    saved: dict = {}
    caps = (float(eps),) if eps is not None else cap_order(fam)

    def attempt(kernel: str) -> Certificate:
        at = replace(run, kernel=kernel)
        best = None
        for cap in caps:
            fam.last_R = None
            cert = induct(fam, at, cap)
            if cert.ok and fam.last_R is not None:
                saved[kernel, float(cap)] = fam.last_R
            if cert.ok and cert.all_lengths:
                return cert
            if best is None or (cert.ok and (not best.ok or (cert.max_length or 0)
                                             > (best.max_length or 0))):
                best = cert
        return best

    cert = ulp_then_saturating(attempt, run.kernel, run.dtype)
    return cert, saved.get((cert.kernel, float(cert.eps)))


def certify(machine: Machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None,
            tolerance: float = DEFAULT_TOLERANCE) -> LMCertificate:
    """Box induction for the state (as for DFA Minsky networks), then per-node image boxes and
    the certified log-probability bound on them (module docstring). `machine` is the PFSA or
    the bounded PDPDA the network was compiled from. Arguments are checked by
    `pdanet.verify.certify.certify`; ``tolerance`` (nats): the certificate holds only if the
    certified log-probability error is at most this; its ``readout_margin`` is tolerance −
    bound."""
    check_pair(machine, net)

    if not isinstance(net.abstraction, LMUnits):
        raise CertificationError(f"{net.construction} is not a Minsky language model (its "
                                 f"abstraction is {type(net.abstraction).__name__})")
    if not (isinstance(tolerance, (int, float)) and not isinstance(tolerance, bool)
            and math.isfinite(tolerance) and tolerance > 0):
        raise CertificationError(f"tolerance={tolerance!r} must be a positive number of nats")
    pfsa = net.machine
    run = begin(pfsa, net, dtype, kernel)
    if isinstance(run, Certificate):
        return _lm(run)
    fam = LMBoxes(pfsa, run.net, max_configs, chunk, progress, float(tolerance))
    notify(progress, "explore", len(fam.E), len(fam.E))
    run = replace(run, configs=len(fam.E), notes=(LIVE_NOTE,))
    bad = fam.rejection()
    if bad is not None:
        return _lm(run.refused(bad, "the box centres are not what the network's decoder reads"))
    cert, R = _prove(fam, run, eps)
    if not cert.ok:
        return _lm(cert, tolerance=float(tolerance))
    if R is None:  # cannot happen: a certificate that holds ran its readout check
        raise CertificationError("the induction kept no radii; certify again")
    img = image_boxes(fam, R, "saturating")
    reached = np.isfinite(img.lo).all(1) | np.isnan(img.lo).any(1) | np.isnan(img.hi).any(1)
    nodes = np.concatenate([[0], np.flatnonzero(reached)])
    H = fam.H
    lo = np.concatenate([fam.s0[None, :H], img.lo[reached, :H]])   # the initial state, a point
    hi = np.concatenate([fam.s0[None, :H], img.hi[reached, :H]])
    b, d, mass, where, ev = fam.box_bound(nodes, lo, hi)
    width = float(np.nan_to_num(hi - lo, nan=np.inf).max()) / 2
    limits = f64_limits() if fam.dtype == torch.float64 else iv.saturation(fam.dtype)
    facts = limits.checked if limits is not None else "none (the float64 sample failed)"
    lengths = "" if cert.all_lengths else " (of the lengths above)"
    note = (f"log-probability error ≤ {b:.3g} nats per symbol at every position of every string "
            f"of positive probability{lengths}: 2·max|Δ logit| over possible symbols plus the "
            f"row sum's and the floor's shares |ln s| + ln(1 + a) + ln(1 + a·e^δ_F), a = "
            f"n·e^F/s, F = {int(fam.floor)}, plus the log-softmax evaluation in the dtype "
            f"(≤ {ev:.3g}), on "
            f"the image boxes of {int(reached.sum()):,} nodes (and the initial state) from the "
            f"boxes invariant at ε = {cert.eps:g} (largest image half-width {width:.3g}; max "
            f"|Δ logit| {d:.3g}); kernel model saturating with the kernels' own values at single "
            f"floats; saturation facts: {facts}")
    cert = replace(cert, cases=cert.cases + img.cases)
    if not (b <= tolerance):
        fc = fam.failing_readout(where, float(tolerance)) if where is not None else None
        cert = replace(cert, ok=False, all_lengths=False, max_length=None, failing=fc,
                       readout_margin=float(tolerance) - b,
                       notes=cert.notes + (note + f", above the tolerance {tolerance:g}",))
    else:
        cert = replace(cert, readout_margin=float(tolerance) - b, notes=cert.notes + (note,))
    return _lm(cert, logprob_error=b, logit_error=d, impossible_mass=mass,
               evaluation_error=ev, tolerance=float(tolerance))


def _lm(cert: Certificate, **extra: float) -> LMCertificate:
    base = {f.name: getattr(cert, f.name) for f in fields(Certificate)}
    return LMCertificate(**base, **extra)


__all__ = [
    "DEFAULT_TOLERANCE",
    "F64_LIMIT_GAP",
    "F64_SAMPLE",
    "F64_SIGMOID_AT",
    "F64_TANH_AT",
    "ImageBoxes",
    "LMBoxes",
    "LMCertificate",
    "activation",
    "affine_tight",
    "cap_order",
    "certify",
    "f64_limits",
    "image_boxes",
    "kernel_hull",
]

"""Certificates for the source papers' compiled stack RNNs with a `PaperController` abstraction:
Hao et al. (2018) §2.2 — the LSTM controller (``hao_lstm``) and the linear controller
(``hao_linear``) driving Grefenstette et al.'s neural stack (2015, Eqs. 1–3, as Hao et al. §2.1
restate it) — and the original Stack-RNN of Joulin & Mikolov (2015) §3
(``joulin_mikolov_stack_rnn``: a sigmoid hidden layer, a softmax over (push, no-op, pop) and the
superposition stack, as DuSell & Chiang (2021) App. A.2 restate it). The models and their compiled weights are
`pdanet.models.hao` and `pdanet.models.joulin_mikolov`; Hao et al.'s equations are unnumbered and
cited by section. The buffered model (``hao_buffered``) is not covered (its buffers are queues).

The proof is the induction of `pdanet.verify.certify.stack` (read its docstring), restated for
these controllers, whose heads are the papers' own squashing functions: after every step the
controller state is exactly its ideal value, the stack's strengths exactly 0/1, its cells exactly
symbol codes and the reading r_t exactly the code of the top (0 when empty). Abstract cases are
κ = (c, j, R) — controller state c = (machine state, mode) of the construction, the unit j that is
on, the reading R — taken from the machine's real-time table (`realtime.table`), with the reachable
set over-approximated by the same fixpoint (below the top the memory is an unknown ρ). Every check
is made on the module's weights as they are (after fine-tuning or noise), never on the compiled
ones.

*Lemma 0 (simulation invariant)* is `stack.step_invariant`, checked for every case: the memory op
the controller must emit (the machine's op for the neural stack, which replaces in one step;
`realtime.one_op` with the top held in the controller for the superposition stack) keeps
memory ++ held symbol equal to the machine's stack, token for token, and the store's own discrete
step (`Store.apply`) is that op.

*Lemma 1 (controller), per model.* Inputs are exactly [onehot(a); code(R)]. Pre-activations are
enclosed by Lemma E (`stack.exact_terms_sum`: a point where every term is a float multiple of 2^g
with Σ|terms| ≤ 2^(p+g)) or by the bound of `intervals.affine` (any summation order, products
rounded) with n the number of nonzero terms of each row: inputs exactly 0 are dropped, since
W·0 = 0 and s + 0 = s exactly. The state of a case is a function of its unit j alone, so each
(j, input, reading) is enclosed once.

- ``hao_lstm`` (§2.2, a standard LSTM cell on [x_t; r_{t−1}]): the state of case κ is c = e_j
  exactly and h in the box B(j) = (0, …, T, …, 0) with T the value of tanh(1) (the start case:
  the module's own h_0, c_0). The gates i, f, o = σ(·) and g = tanh(·) are enclosed; the cell
  c' = f·c + i·g (exact where f, i are exactly 0 or 1, else `intervals.lstm_cell`: both the
  ATen and the fused forms) must be exactly
  e_{j2}, j2 the unit of the move taken; h' = o·tanh(c') must lie in B(j2) (o exactly 1 on j2;
  tanh(0) = 0 and o·0 = 0 elsewhere). The heads d_t, u_t, v_t = σ(W h_t + b) and y_t = W_y h_t
  + b_y (§2.2) are enclosed over B(j2).
- ``hao_linear`` (§2.2, no hidden state): d_t, u_t, v_t = σ(W [x_t; r_{t−1}] + b) and
  y_t = W_y [x_t; r_{t−1}] + b_y at exact inputs; y_0 = b_y.
- ``joulin_mikolov_stack_rnn`` (J&M §3; App. A.2): h' = σ(U x_t + R h_{t−1} + P r_{t−1} + b) must
  be exactly e_{j2} (0/1 units), a_t = softmax(A h_t + b_A) exactly the one-hot of the op, v_t =
  σ(D h_t + b_D), y_t = Y h_t + b_Y.

In every model the actions must equal exactly the store's encoding of the op (`Store.actions`),
the pushed vector exactly the code of the pushed symbol, and the logits must put the machine's
output (or verdict) strictly on top (the readout margin, read as `controllers._reader` reads it).

*Lemma 2 (memory exactness)* is the stack certificate's: with exact 0/1 actions and exact codes
the neural stack (Grefenstette et al. Eqs. 1–3) and the superposition stack are the discrete
stack at every depth (< 2^p cells for the neural stack's live-cell counts), checked bit for bit on
the module's own store over every saturated action sequence of a few steps (`stack.memory_check`).

*Kernel model.* Exact 0/1 strengths need σ(z) to round to exactly 0 or 1, tanh(z) to ±1 and the
softmax to a one-hot — which the "ulp" model (a kernel within a few ulps of the true value,
`intervals`) can never show. Under ``kernel="saturating"`` each activation is instead *evaluated*:
every float of the dtype in a pre-activation's box (at most `MAX_FLOATS` of them; every row of
floats for the 3-way softmax) is run through this build's CPU kernels (``torch.sigmoid``,
``torch.tanh``, ``torch.softmax``: the ones the modules call), contiguously and strided, and the
enclosure is the hull of the values. Assumed, as `intervals` assumes for its saturation scan:
each kernel is a function of its input (element, or softmax row) alone. This needs no threshold
scan and holds in float64 too. Under ``kernel="ulp"`` the certificate fails at the first strength
that is not provably 0/1 and is retried under "saturating", with a note (as
`core.ulp_then_saturating`, whose threshold facts this proof does not use); where that fails too,
the "saturating" certificate is returned: its failing case is the informative one.

*Induction.* The initial state is the module's own; Lemmas 1, E and 2 map an exact state of κ to
one of a successor κ' in the fixpoint, and the output at every step is the machine's: agreement
at every length on every unpadded string all of whose prefixes are live (and whose stack depth
stays below 2^p for the neural stack — automatic for strings of length ≤ 2^p).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.realtime import U, store_codes
from pdanet.constructions.stacks.protocol import holds_top
from pdanet.errors import CertificationError
from pdanet.models.hao import HaoBufferedStackRNN, HaoStackRNN, PaperController
from pdanet.models.joulin_mikolov import JoulinMikolovStackRNN
from pdanet.verify import intervals as iv
from pdanet.verify.certify.core import (
    Certificate,
    FailingCase,
    Progress,
    Run,
    begin,
    check_arguments,
    check_pair,
    not_final,
    notify,
    overflow_free,
)
from pdanet.verify.certify.stack import (
    RHO,
    _Machine,
    _machine,
    affine_point,
    memory_check,
    memory_of,
    step_invariant,
)

#: the most floats of a box whose kernel values are evaluated one by one (per entry; per row of
#: the 3-way softmax, the product of its entries' counts)
MAX_FLOATS = 1 << 14

#: the models this family certifies: (module class, controller cell)
MODELS = {"hao_lstm": (HaoStackRNN, "lstm"), "hao_linear": (HaoStackRNN, "linear"),
          "joulin_mikolov_stack_rnn": (JoulinMikolovStackRNN, "sigmoid")}


# --- activations: the kernel model, or the kernels evaluated at every float of a box -----------
def _floats_in(lo: float, hi: float, dtype: torch.dtype) -> np.ndarray | None:
    """Every float of ``dtype`` in [lo, hi] (both signs of 0 where 0 is in it), or None when
    there are more than `MAX_FLOATS` or an end is not finite."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        return None
    f, i = (np.float32, np.int32) if dtype == torch.float32 else (np.float64, np.int64)
    parts, count = [], 0
    for a, b, sign in ((max(lo, 0.0) + 0.0, hi, 1.0), (max(-hi, 0.0) + 0.0, -lo, -1.0)):
        if a > b:
            continue
        # the dtype floats inside [a, b] (a, b ≥ 0): bit patterns are ordered like the values
        fa, fb = f(a), f(b)
        if float(fa) < a:
            fa = np.nextafter(fa, f(np.inf))
        if float(fb) > b:
            fb = np.nextafter(fb, f(0))
        ba, bb = int(np.array(fa, f).view(i)), int(np.array(fb, f).view(i))
        if ba > bb:
            continue
        count += bb - ba + 1
        if count > MAX_FLOATS:
            return None
        parts.append(sign * np.arange(ba, bb + 1, dtype=i).view(f).astype(np.float64))
    return np.concatenate(parts) if parts else np.zeros(0)


def _to_dtype(z: iv.Interval, dtype: torch.dtype) -> iv.Interval:
    """`intervals.to_dtype` (the dtype floats of a box, ends rounded inward), in numpy."""
    if dtype == torch.float64:
        return z
    with np.errstate(over="ignore", invalid="ignore"):
        lo, hi = z.lo.astype(np.float32), z.hi.astype(np.float32)
    up, down = lo.astype(np.float64) < z.lo, hi.astype(np.float64) > z.hi
    lo[up] = np.nextafter(lo[up], np.float32(np.inf))
    hi[down] = np.nextafter(hi[down], np.float32(-np.inf))
    lo, hi = lo.astype(np.float64), hi.astype(np.float64)
    return iv.Interval(np.minimum(lo, hi), np.maximum(lo, hi))


def _cell(f: iv.Interval, c: iv.Interval, i: iv.Interval, g: iv.Interval, dtype: torch.dtype
          ) -> iv.Interval:
    """The LSTM cell c' = f·c + i·g as the dtype computes it: exactly where f and i are points
    in {0, 1} and c, g points (each product is then 0 or the other factor; the sum is one
    rounding, the same in the ATen and the fused forms), else `intervals.lstm_cell`."""
    pts = all((x.lo == x.hi).all() and np.isfinite(x.lo).all() for x in (f, c, i, g))
    if not (pts and np.isin(f.lo, (0.0, 1.0)).all() and np.isin(i.lo, (0.0, 1.0)).all()):
        return iv.lstm_cell(f, c, i, g, dtype)
    q, p = f.lo * c.lo, i.lo * g.lo
    s = q + p                                   # exact in float64 for float32 summands
    if dtype == torch.float32:
        s = s.astype(np.float32).astype(np.float64)
    else:
        s = np.where((q == 0) | (p == 0), s, np.nan)   # float64: only the trivial sums
        if np.isnan(s).any():
            return iv.lstm_cell(f, c, i, g, dtype)
    return iv.Interval.point(s)


def _evaluate(fn: Callable[[torch.Tensor], torch.Tensor], x: np.ndarray, dtype: torch.dtype
              ) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) of ``fn`` at each row/element of ``x``, run contiguously and strided (ATen's
    vectorised and scalar loops)."""
    t = torch.as_tensor(x, dtype=dtype)
    wide = torch.zeros(tuple(t.shape) + (2,), dtype=dtype)
    wide[..., 0] = t
    strided = wide[..., 0]                                  # stride 2 in its last dimension
    with torch.no_grad():
        a, b = fn(t).double().numpy(), fn(strided).double().numpy()
    return np.minimum(a, b), np.maximum(a, b)


def _evaluated(fn: Callable[[torch.Tensor], torch.Tensor], lo: np.ndarray, hi: np.ndarray,
               dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
    """For each entry, (min, max) of the elementwise kernel ``fn`` over every float of the
    dtype in [lo, hi] (ends floats of the dtype); NaN where that is more than `MAX_FLOATS`
    floats or an end is not finite."""
    f, i = (np.float32, np.int32) if dtype == torch.float32 else (np.float64, np.int64)
    n = lo.size
    vlo, vhi = np.full(n, np.nan), np.full(n, np.nan)
    fin = np.isfinite(lo) & np.isfinite(hi) & (lo <= hi)
    segs = []                 # (entry, first bit pattern, count, sign) per sign of the box
    for sign in (1.0, -1.0):
        a = np.where(sign > 0, np.maximum(lo, 0.0), np.maximum(-hi, 0.0)) + 0.0   # +0, not −0
        b = np.where(sign > 0, hi, -lo) + 0.0
        has = fin & (a <= b)
        ba = np.where(has, a, 0).astype(f).view(i).astype(np.int64)
        bb = np.where(has, b, 0).astype(f).view(i).astype(np.int64)
        segs.append((has, ba, bb - ba + 1, sign))
    count = sum(np.where(h, c, 0) for h, _, c, _ in segs)
    fin &= count <= MAX_FLOATS
    ent, start, cnt, sgn = [], [], [], []
    for has, ba, c, sign in segs:
        sel = np.nonzero(has & fin)[0]
        ent.append(sel)
        start.append(ba[sel])
        cnt.append(c[sel])
        sgn.append(np.full(sel.size, sign))
    ent, start, cnt, sgn = (np.concatenate(v) for v in (ent, start, cnt, sgn))
    if not ent.size:
        return vlo, vhi
    seg = np.repeat(np.arange(ent.size), cnt)
    first = np.cumsum(cnt) - cnt
    bits = start[seg] + (np.arange(seg.size) - first[seg])
    x = sgn[seg] * bits.astype(i).view(f).astype(np.float64)
    a, b = _evaluate(fn, x, dtype)
    order = np.argsort(ent[seg], kind="stable")
    e_sorted = ent[seg][order]
    starts = np.nonzero(np.r_[True, e_sorted[1:] != e_sorted[:-1]])[0]
    idx = e_sorted[starts]
    vlo[idx] = np.minimum.reduceat(a[order], starts)
    vhi[idx] = np.maximum.reduceat(b[order], starts)
    return vlo, vhi


class _Kernels:
    """Enclosures of σ, tanh and the 3-way softmax over boxes, under a kernel model (module
    docstring): ``ulp`` — `intervals.sigmoid`/`intervals.tanh` (and the softmax formula widened
    the same way); ``saturating`` — the kernels evaluated at every float of a small box."""

    def __init__(self, dtype: torch.dtype, kernel: str):
        self.dtype, self.kernel = dtype, kernel
        self.memo: dict[tuple, tuple[float, float]] = {}

    def act(self, kind: str, z: iv.Interval) -> iv.Interval:
        if self.kernel != "saturating":
            return (iv.sigmoid if kind == "sigmoid" else iv.tanh)(z, self.dtype, "ulp")
        zd = _to_dtype(z, self.dtype)
        key = (kind, zd.lo.tobytes(), zd.hi.tobytes())
        if key not in self.memo:
            out = (iv.sigmoid if kind == "sigmoid" else iv.tanh)(z, self.dtype, "ulp")
            vlo, vhi = _evaluated(torch.sigmoid if kind == "sigmoid" else torch.tanh,
                                  zd.lo, zd.hi, self.dtype)
            ok = np.isfinite(vlo) & np.isfinite(vhi) & np.isfinite(z.lo) & np.isfinite(z.hi)
            self.memo[key] = (np.where(ok, vlo, out.lo), np.where(ok, vhi, out.hi))
        lo, hi = self.memo[key]
        return iv.Interval(lo.copy(), hi.copy())

    def softmax(self, z: iv.Interval) -> iv.Interval:
        """softmax over the entries of a 1-D box (the action head of J&M, App. A.2)."""
        n = z.lo.size
        with np.errstate(over="ignore", invalid="ignore"):
            lo = np.array([1.0 / (1.0 + sum(np.exp(z.hi[j] - z.lo[k]) for j in range(n) if j != k))
                           for k in range(n)])
            hi = np.array([1.0 / (1.0 + sum(np.exp(z.lo[j] - z.hi[k]) for j in range(n) if j != k))
                           for k in range(n)])
        u = iv.unit_roundoff(self.dtype)
        err = (iv.ACTIVATION_ULPS * 2 * u + (n + 2) * u) * np.abs(hi) + iv.tiny(self.dtype)
        out = iv.Interval(np.nan_to_num(lo, nan=0.0), np.nan_to_num(hi, nan=1.0)).widen(err)
        out = iv.Interval(np.maximum(out.lo, 0.0), np.minimum(out.hi, 1.0))
        finite = np.isfinite(z.lo).all() and np.isfinite(z.hi).all()
        if self.kernel != "saturating" or not finite:
            return out
        zd = _to_dtype(z, self.dtype)
        key = ("softmax",) + tuple(zd.lo.tolist()) + tuple(zd.hi.tolist())
        if key not in self.memo:
            pts = [_floats_in(float(a), float(b), self.dtype) for a, b in zip(zd.lo, zd.hi)]
            if any(p is None or not p.size for p in pts) or \
                    math.prod(p.size for p in pts) > MAX_FLOATS:
                return out
            rows = np.stack(np.meshgrid(*pts, indexing="ij"), -1).reshape(-1, n)
            a, b = _evaluate(lambda t: torch.softmax(t, -1), rows, self.dtype)
            self.memo[key] = (a.min(0), b.max(0))
        a, b = self.memo[key]
        return iv.Interval(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def _affine(blocks: list[tuple[np.ndarray, iv.Interval]], biases: list[np.ndarray],
            dtype: torch.dtype) -> iv.Interval:
    """Enclosure of fl(Σ_k W_k x_k + Σ b) over boxes x_k, in any order of summation. Inputs that
    are exactly 0 are dropped (W·0 = 0 and s + 0 = s exactly). Then `stack.affine_point` where
    every input is a point (Lemma E), else the `intervals.affine` bound with n the number of
    nonzero terms of each row (the rounding bound γ_n·Σ|terms| of a sum of n nonzero terms, any
    order; Higham §3.1); NaN where a sum could overflow the dtype."""
    W = np.concatenate([w for w, _ in blocks], axis=1)
    lo = np.concatenate([x.lo for _, x in blocks])
    hi = np.concatenate([x.hi for _, x in blocks])
    keep = (lo != 0) | (hi != 0)
    W, lo, hi = W[:, keep], lo[keep], hi[keep]
    if (lo == hi).all():
        return affine_point([(W, lo)], biases, dtype)
    x = iv.Interval(lo, hi)
    Wp, Wn = np.maximum(W, 0), np.minimum(W, 0)
    b = np.sum(biases, axis=0) if biases else np.zeros(W.shape[0])
    zlo, zhi = x.lo @ Wp.T + x.hi @ Wn.T + b, x.hi @ Wp.T + x.lo @ Wn.T + b
    absum = np.abs(W) @ x.mag + sum((np.abs(bb) for bb in biases), np.zeros(W.shape[0]))
    n = (W != 0).sum(1) + sum(((bb != 0).astype(np.int64) for bb in biases),
                              np.zeros(W.shape[0], dtype=np.int64))
    coef = iv.gamma(n, iv.unit_roundoff(dtype)) + iv.gamma(n + 2, 2.0**-53)
    enc = iv.Interval(zlo, zhi).widen(coef * absum + n * iv.tiny(dtype))
    safe = overflow_free(absum, coef, dtype)
    return iv.Interval(np.where(safe, enc.lo, np.nan), np.where(safe, enc.hi, np.nan))


def _mul(a: iv.Interval, b: iv.Interval, dtype: torch.dtype) -> iv.Interval:
    """fl(a·b) over boxes of dtype floats: exact where a factor is exactly 0 (the other finite)
    or exactly 1 (the product is the other factor's float); else `intervals.mul`."""
    out = iv.mul(a, b, dtype)
    lo, hi = out.lo.copy(), out.hi.copy()
    for x, y in ((a, b), (b, a)):
        finite = np.isfinite(y.lo) & np.isfinite(y.hi)
        zero = (x.lo == 0) & (x.hi == 0) & finite
        one = (x.lo == 1) & (x.hi == 1) & finite
        lo, hi = np.where(zero, 0.0, lo), np.where(zero, 0.0, hi)
        lo, hi = np.where(one, y.lo, lo), np.where(one, y.hi, hi)
    return iv.Interval(lo, hi)


def _pt(x: np.ndarray) -> iv.Interval:
    return iv.Interval.point(x)


class _Fail(Exception):
    """A check of Lemma 1 fails: (unit, label, interval, required)."""

    def __init__(self, unit: int, label: str, lo: float, hi: float, want: tuple[float, float]):
        super().__init__(label)
        self.args_ = (unit, label, (float(lo), float(hi)), (float(want[0]), float(want[1])))


def _exact(box: iv.Interval, want: np.ndarray, label: Callable[[int], str]) -> None:
    """Every entry of ``box`` must be exactly the point ``want`` (NaN fails)."""
    bad = ~((box.lo == want) & (box.hi == want))
    if bad.any():
        u = int(np.nonzero(bad)[0][0])
        raise _Fail(u, label(u), box.lo[u], box.hi[u], (want[u], want[u]))


# --- the three controllers ------------------------------------------------------------------------
class _Controller:
    """One paper controller under the proof: its state per case, its step (Lemma 1) and heads.
    States are tuples of boxes; ``state(j)`` the ideal state of unit j (None: the start);
    ``step(state, a, R, j2)`` the checked successor state, raising `_Fail`; ``heads(j2, a, R)``
    the boxes (actions in the store's channel order, pushed vector, logits) of the step into
    j2 (from input a and reading R: the linear controller)."""

    def __init__(self, module, dtype: torch.dtype, kern: _Kernels, codes: np.ndarray,
                 labels: Callable[[int], str]):
        self.dtype, self.kern, self.codes, self.label = dtype, kern, codes, labels
        self.W = module.blocks(numpy=True)                 # the weights as they are, by meaning
        self.m = codes.shape[1]
        self.margin = math.inf
        self._heads: dict = {}

    def note(self, z: iv.Interval) -> None:
        """The state margin: the least distance of a squashed pre-activation from 0."""
        d = np.minimum(np.abs(z.lo), np.abs(z.hi))
        d = np.where(np.sign(z.lo) == np.sign(z.hi), d, 0.0)
        self.margin = min(self.margin, float(np.min(d, initial=math.inf)))

    def onehot(self, a: int) -> iv.Interval:
        x = np.zeros(self.K)
        x[a] = 1.0
        return _pt(x)


class _HaoLSTM(_Controller):
    """Hao et al. §2.2, LSTM controller (gates i, f, g, o; heads linear(h_t))."""

    def __init__(self, module, *args):
        super().__init__(module, *args)
        W = self.W
        self.K, self.H = module.num_symbols, module.hidden
        self.Wx, self.Wr = W.weight_ih[:, :self.K], W.weight_ih[:, self.K:]
        self.Whh, self.b = W.weight_hh, [W.bias_ih, W.bias_hh]
        self.Wh, self.bh = W.heads_weight, W.heads_bias
        tau = self.kern.act("tanh", _pt(np.ones(1)))                       # T = tanh(1)
        self.tau = (float(tau.lo[0]), float(tau.hi[0]))

    def state(self, j: int | None) -> tuple:
        if j is None:
            return (_pt(self.W.h0), _pt(self.W.c0))
        lo, hi = np.zeros(self.H), np.zeros(self.H)
        lo[j], hi[j] = self.tau
        c = np.zeros(self.H)
        c[j] = 1.0
        return (iv.Interval(lo, hi), _pt(c))

    def step(self, st: tuple, a: int, R: int, j2: int) -> tuple:
        h, c = st
        z = _affine([(self.Wx, self.onehot(a)), (self.Wr, _pt(self.codes[R])), (self.Whh, h)],
                    self.b, self.dtype)                                    # §2.2, LSTM gates
        H = self.H
        zi, zf, zg, zo = (z[slice(k * H, (k + 1) * H)] for k in range(4))
        for zz in (zi, zf, zg, zo):
            self.note(zz)
        gi, gf = self.kern.act("sigmoid", zi), self.kern.act("sigmoid", zf)
        gg, go = self.kern.act("tanh", zg), self.kern.act("sigmoid", zo)
        c2 = _cell(gf, c, gi, gg, self.dtype)                              # c' = f·c + i·g
        want_h, want_c = self.state(j2)
        _exact(c2, want_c.lo, lambda u: f"cell c of {self.label(u)} (gates i, f, g)")
        h2 = _mul(go, self.kern.act("tanh", c2), self.dtype)                # h' = o·tanh(c')
        bad = ~h2.within(want_h)
        if bad.any():
            u = int(np.nonzero(bad)[0][0])
            raise _Fail(u, f"h of {self.label(u)} (output gate o)", h2.lo[u], h2.hi[u],
                        (want_h.lo[u], want_h.hi[u]))
        return (want_h, want_c)

    def heads(self, st: tuple, j2, a, R) -> tuple[iv.Interval, iv.Interval, iv.Interval]:
        if j2 not in self._heads:
            z = _affine([(self.Wh, st[0])], [self.bh], self.dtype)          # linear(h_t)
            self.note(z[:2 + self.m])
            self._heads[j2] = (self.kern.act("sigmoid", z[:2]),
                               self.kern.act("sigmoid", z[2:2 + self.m]), z[2 + self.m:])
        return self._heads[j2]

    def initial_logits(self) -> iv.Interval:
        m = self.m
        return _affine([(self.Wh[2 + m:], self.state(None)[0])], [self.bh[2 + m:]], self.dtype)


class _HaoLinear(_Controller):
    """Hao et al. §2.2, linear controller: every head reads [x_t; r_{t−1}]."""

    def __init__(self, module, *args):
        super().__init__(module, *args)
        self.K = module.num_symbols
        self.Wx, self.Wr = self.W.heads_weight[:, :self.K], self.W.heads_weight[:, self.K:]
        self.bh = self.W.heads_bias

    def state(self, j) -> tuple:
        return ()

    def step(self, st: tuple, a: int, R: int, j2) -> tuple:
        return ()

    def heads(self, st, j2, a: int, R: int):
        key = (a, R)
        if key not in self._heads:
            z = _affine([(self.Wx, self.onehot(a)), (self.Wr, _pt(self.codes[R]))], [self.bh],
                        self.dtype)                                        # W [x_t; r_{t−1}] + b
            self.note(z[:2 + self.m])
            self._heads[key] = (self.kern.act("sigmoid", z[:2]),
                                self.kern.act("sigmoid", z[2:2 + self.m]), z[2 + self.m:])
        return self._heads[key]

    def initial_logits(self) -> iv.Interval:
        return _pt(self.bh[2 + self.m:])                                     # y_0 = b_y


class _JoulinMikolov(_Controller):
    """Joulin & Mikolov §3 (sigmoid hidden layer), heads of DuSell & Chiang App. A.2."""

    def __init__(self, module, *args):
        super().__init__(module, *args)
        W = self.W
        self.K, self.H = W.embedding.shape
        self.Wx, self.Wh, self.Wr, self.b = W.embedding.T, W.weight_hh, W.weight_r, W.bias

    def state(self, j: int | None) -> tuple:
        if j is None:
            return (_pt(self.W.h0),)
        h = np.zeros(self.H)
        h[j] = 1.0
        return (_pt(h),)

    def step(self, st: tuple, a: int, R: int, j2: int) -> tuple:
        z = _affine([(self.Wx, self.onehot(a)), (self.Wh, st[0]), (self.Wr, _pt(self.codes[R]))],
                    [self.b], self.dtype)                                  # J&M §3
        self.note(z)
        h2 = self.kern.act("sigmoid", z)
        want = self.state(j2)
        _exact(h2, want[0].lo, lambda u: f"sigmoid {self.label(u)}")
        return want

    def heads(self, st: tuple, j2, a, R):
        if j2 not in self._heads:
            W = self.W
            za = _affine([(W.actions_weight, st[0])], [W.actions_bias], self.dtype)  # A.2: a_t
            zd = _affine([(W.values_weight, st[0])], [W.values_bias], self.dtype)    # A.2: v_t
            self.note(zd)
            top = int(np.argmax(za.lo))                     # the softmax's gap to its runner-up
            self.margin = min(self.margin, float(za.lo[top] - np.max(np.delete(za.hi, top))))
            zy = _affine([(W.out_weight, st[0])], [W.out_bias], self.dtype)           # y_t
            self._heads[j2] = (self.kern.softmax(za), self.kern.act("sigmoid", zd), zy)
        return self._heads[j2]

    def initial_logits(self) -> iv.Interval:
        return _affine([(self.W.out_weight, self.state(None)[0])], [self.W.out_bias], self.dtype)


#: `stack.memory_check`'s verdict per (store class, depth, codes, dtype), in this process
_MEMORY_CHECKED: dict[tuple, str | None] = {}

CONTROLLERS = {"hao_lstm": _HaoLSTM, "hao_linear": _HaoLinear,
               "joulin_mikolov_stack_rnn": _JoulinMikolov}


# --- the certificate ------------------------------------------------------------------------------
def certify_paper(machine, net: CompiledNetwork, dtype: torch.dtype | None = None,
                  kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """Prove that a compiled ``hao_lstm``, ``hao_linear`` or ``joulin_mikolov_stack_rnn``
    network agrees with `machine` at every length by exact saturation (module docstring).
    ``kernel="ulp"`` cannot prove exact 0/1 strengths and is retried under "saturating" (the
    kernels evaluated at every float of each box), with a note; the certificate's ``kernel``
    names the model the proof used. A non-finite weight gives a NOT CERTIFIED certificate naming
    it. CertificationError for another model (``hao_buffered``: check it with pn.verify), a
    module that is not the model's class, or a memory other than a stack."""
    check_arguments(kernel=kernel, dtype=dtype, progress=progress)
    abst = net.abstraction
    if not isinstance(abst, PaperController):
        raise CertificationError(f"certify_paper needs a network of a paper model with a "
                                 f"PaperController abstraction, got {net.construction}")
    if abst.model not in MODELS:
        raise CertificationError(
            f"{net.construction}: the paper-model certificate covers {sorted(MODELS)}, not "
            f"{abst.model!r} (the buffered model's input and output buffers are queues); check it "
            "with pn.verify")
    cls, cell = MODELS[abst.model]
    module = net.module
    if not isinstance(module, cls) or isinstance(module, HaoBufferedStackRNN) or (
            cls is HaoStackRNN and module.controller != cell):
        raise CertificationError(f"{net.construction}: the module is a {type(module).__name__}, "
                                 f"not the {abst.model} model's {cls.__name__} ({cell})")
    if abst.store != "stack":
        raise CertificationError(f"{net.construction} drives a {abst.store}; the paper-model "
                                 "certificate covers stacks only — check it with pn.verify")
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    mc = _machine(machine)
    if mc.tab.output == "accept" and mc.tab.empty_stack:
        raise CertificationError(f"{machine!r} accepts by empty stack; the {abst.model} readout "
                                 "reads the controller only, so no certificate can hold")
    codes = np.asarray(run.net.module.codes.codes, dtype=np.float64)
    if codes.shape != store_codes(mc.tab.G, abst.code).shape:
        raise CertificationError("the network's symbol codes do not fit the machine's stack "
                                 "alphabet")
    attempt = lambda k: _prove(mc, Run(machine, run.net, k, run.t0), codes, progress)
    cert = attempt(kernel)
    if kernel != "ulp" or cert.ok or not not_final(cert):
        return cert
    sat = attempt("saturating")
    if sat.ok:
        note = (f"under the ulp kernel model alone the proof fails ({cert.failing}); this one "
                "evaluates this build's kernels at every float of each pre-activation box")
        return replace(sat, notes=sat.notes + (note,))
    if sat.failing is not None and sat.failing.kind in ("weights", "nonfinite"):
        return cert
    note = ("the ulp kernel model alone fails earlier (it can never show a strength exactly 0 "
            f"or 1): {cert.failing}")
    return replace(sat, notes=sat.notes + (note,))


def _prove(mc: _Machine, run: Run, codes: np.ndarray, progress: Progress | None) -> Certificate:
    """The induction over κ = (c, j, R) under ``run.kernel``."""
    net, kernel, dtype = run.net, run.kernel, run.dtype
    abst, module, tab = net.abstraction, net.module, mc.tab
    store = module.store
    G, K = tab.G, tab.K
    modes = G + 2 if holds_top(store) else 1
    shift = 0 if abst.start is None else 1
    units = {(u.c, u.a, u.R): j + shift for j, u in enumerate(abst.units)}
    names = tuple(abst.labels)
    label = lambda j: names[j] if j < len(names) else f"h{j}"
    chans = tuple(store.channels)
    kern = _Kernels(dtype, kernel)
    ctl = CONTROLLERS[abst.model](module, dtype, kern, codes, label)
    linear = abst.model == "hao_linear"
    depth = getattr(store, "depth", None)
    notes = ["agreement covers every unpadded string whose prefixes are all live",
             "states are points, or (LSTM h) the few floats of tanh(1): ε = 0"]
    if abst.memory == "grefenstette":
        p = 24 if dtype == torch.float32 else 53
        notes.append(f"neural stack: live-cell counts are exact while the stack depth is "
                     f"< 2^{p} = {2**p:,}, which every string of length ≤ 2^{p} satisfies")
    stats = {"readout_margin": math.inf}
    done: set = set()
    steps: dict = {}

    def result(ok: bool, failing: FailingCase | None, n_configs: int) -> Certificate:
        return replace(run, configs=n_configs).certificate(
            ok, eps=0.0, state_margin=ctl.margin if ok else 0.0,
            readout_margin=stats["readout_margin"] if ok else 0.0, cases=len(done),
            failing=failing, extra=tuple(notes))

    def desc(node: tuple) -> str:
        c, j, R = node
        p, mode = divmod(c, modes)
        held = "" if mode == U else f", holding {mc.store[mode - 1]}"
        unit = "none" if j is None else label(j)
        return (f"controller state (q={mc.states[p]!r}{held}) with unit {unit} on and memory "
                f"top {mc.store[R] if R != G else 'empty'}")

    def fail(kind: str, node: tuple, sym: str | None, what: str, n: int,
             unit: int = -1, interval=(math.nan, math.nan), required=(math.nan, math.nan)
             ) -> Certificate:
        return result(False, FailingCase(kind, desc(node), sym, unit, what, interval, required), n)

    def readout(z: iv.Interval, want) -> tuple[float, int, tuple] | None:
        """None, or (slack, logit, required) where the machine's output is not strictly on
        top (as `controllers._reader` reads the logits)."""
        if tab.output == "symbol":
            y = tab.n_out if want < 0 else want
            others = np.delete(z.hi, y)
            slack, req = z.lo[y] - others.max(), (float(others.max()), math.inf)
        else:
            y = 0
            slack = z.lo[0] if want else -z.hi[0]
            req = (0.0, math.inf) if want else (-math.inf, 0.0)
        stats["readout_margin"] = min(stats["readout_margin"], float(slack))
        return None if slack > 0 else (float(slack), y, req)

    def want_output(mv, p2: int) -> int | bool:
        if tab.output == "symbol":
            return -1 if mv is None else mv.out
        return bool(tab.accepting[p2])

    start = (tab.q0 * modes, abst.start, G)
    bad = readout(ctl.initial_logits(), want_output(None, tab.q0))
    if bad is not None:
        z0 = ctl.initial_logits()
        return fail("readout", start, None, f"logit {bad[1]}", 1, bad[1],
                    (float(z0.lo[bad[1]]), float(z0.hi[bad[1]])), bad[2])
    seen, frontier = {start}, [start]
    pushed: set[int] = set()
    prev_pushed = -1
    while frontier or len(pushed) != prev_pushed:
        if not frontier:  # new pushed symbols widen what a pop may reveal: revisit all nodes
            prev_pushed = len(pushed)
            frontier = sorted(seen, key=repr)
        node = frontier.pop()
        c, j, R = node
        p, mode = divmod(c, modes)
        X = R if mode == U else mode - 1
        st = ctl.state(None if j == abst.start else j)
        for a in range(K):
            mv = mc.move(p, a, X)
            if mv is None:
                continue  # the machine dies: outside the prefix language
            sym = str(mc.symbols[a])
            inv = step_invariant(store, G, mode, R, mv)                     # Lemma 0
            if isinstance(inv, str):
                return fail("invariant", node, sym, "memory", len(seen))
            mode2, op, code, mem2 = inv
            if op not in store.ops or store.apply(tuple(memory_of(R, G)), op, code) != tuple(mem2):
                return fail("invariant", node, sym, f"memory op {op} ({type(store).__name__})",
                            len(seen))
            if depth is not None and op in ("push", "replace"):
                return fail("invariant", node, sym, f"a push into a stack fixed to {depth} "
                            "cells, which may drop its bottom cell", len(seen))
            c2 = mv.p2 * modes + mode2
            j2 = None if linear else units.get((c, a, R), units.get((c, a, None)))
            if j2 is None and not linear:
                return fail("encoding", node, sym, "no unit for this move", len(seen))
            done.add((node, a))
            if len(done) % 256 == 0:
                notify(progress, f"paper-model cases ({kernel} kernels)", len(done),
                       max(len(done), len(seen) * K))
            try:                                                             # Lemma 1
                key = (j, a, R, j2)          # the state of a case is a function of j alone
                if key not in steps:
                    st2 = ctl.step(st, a, R, j2)
                    steps[key] = ctl.heads(st2, j2, a, R)
                act, val, logits = steps[key]
                want_act = np.asarray(store.actions(op), dtype=np.float64)
                _exact(act, want_act, lambda k: f"action {chans[k]}")
                if op in ("push", "replace"):
                    _exact(val, codes[code], lambda b: f"pushed value bit {b}")
                elif not (np.isfinite(val.lo).all() and np.isfinite(val.hi).all()):
                    raise _Fail(-1, "pushed value (unused)", val.lo[0], val.hi[0], (0.0, 1.0))
            except _Fail as f:
                unit, what, interval, required = f.args_
                return fail("step", node, sym, what, len(seen), unit, interval, required)
            bad = readout(logits, want_output(mv, mv.p2))
            if bad is not None:
                return fail("readout", node, sym, f"logit {bad[1]}", len(seen), bad[1],
                            (float(logits.lo[bad[1]]), float(logits.hi[bad[1]])), bad[2])
            if op in ("push", "replace"):
                pushed.add(code)
            if not mem2:                                                     # Lemma 2: readings
                readings = {G}
            elif mem2[-1] == RHO:
                readings = set(pushed) | {G}
            else:
                readings = {mem2[-1]}
            for R2 in sorted(readings):
                node2 = (c2, j2, R2)
                if node2 not in seen:
                    seen.add(node2)
                    frontier.append(node2)
    notify(progress, f"paper-model cases ({kernel} kernels)", len(done), len(done))
    mkey = (type(store), depth, codes.tobytes(), codes.shape, dtype)
    if mkey not in _MEMORY_CHECKED:             # the same store class, codes and dtype: once
        _MEMORY_CHECKED[mkey] = memory_check(net)
    msg = _MEMORY_CHECKED[mkey]
    if msg is not None:
        return fail("memory", start, None, "memory module: " + msg, len(seen))
    notes.append("memory module checked bit-exact against the discrete stack on every saturated "
                 "action sequence of a few steps")
    if kernel == "saturating":
        notes.append(f"activations evaluated on this build's CPU kernels (torch.sigmoid, "
                     f"torch.tanh, torch.softmax) at every float of each pre-activation box "
                     f"(≤ {MAX_FLOATS:,} floats), assuming each kernel is a function of its "
                     "input alone")
    return result(True, None, len(seen))


def certify(machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """A `PaperController` network: `certify_paper` (states are points: ``eps``,
    ``max_configs`` and ``chunk`` do not apply). Arguments are checked by
    `pdanet.verify.certify.certify`."""
    check_pair(machine, net)
    return certify_paper(machine, net, dtype=dtype, kernel=kernel, progress=progress)


__all__ = ["MAX_FLOATS", "MODELS", "certify", "certify_paper"]

"""Certificates for the compiled Stack-RNN and Stack-LSTM of Suzgun et al. (2019)
(`pdanet.models.suzgun`, abstraction `SuzgunController`), both readouts (the machine's own
output and ``readout="next_set"``), and for its Baby-NTM (`BabyNTMController`,
`certify_baby_ntm`: bounded machines, a finite product explored exactly), for every length.

The model (Suzgun, Gehrmann, Belinkov & Shieber 2019, §3.1–3.2; the paper numbers no
equations, so they are cited by section): h̃_{t−1} = h_{t−1} + W_sh s_{t−1}^{(0)}, h_t =
tanh(W_ih x_t + b_ih + W_hh h̃_{t−1} + b_hh) (Stack-LSTM: h_t, c_t = LSTM(x_t, (h̃_{t−1},
c_{t−1}))), y_t = W_y h_t + b (σ(y_t) the output), a_t = softmax(W_a h_t / τ) (§3.4 softmax
temperature), n_t = σ(W_n h_t), and the superposition stack s_t^{(0)} = a_t^{(0)} n_t +
a_t^{(1)} s_{t−1}^{(1)}, s_t^{(i)} = a_t^{(0)} s_{t−1}^{(i−1)} + a_t^{(1)} s_{t−1}^{(i+1)} (§3.1;
DuSell & Chiang 2022 App. A.2). The certificate is for the
deterministic forward: Gumbel-softmax (§3.4) is noise drawn only while a ``gumbel=True`` module
is training; in ``eval()`` mode (as compiled) no noise is drawn.

The proof is checked on the module's weights as they are (after fine-tuning or noise), not on
the compiled ones; it uses the compiler's bookkeeping only for the map μ from memory codes to
the machine's store symbols (``SuzgunController.symbol_of``: the bottom marking of empty-stack
recognisers). It is an induction over time steps on abstract configurations

    κ = (machine state p, the controller's saturation pattern, the memory's top cell, the
         symbols w the machine holds above the memory, the output the machine gives),

explored as a least fixpoint from the start configuration. Invariant (*Lemma 0*): the machine's
stack is ⊥ · μ(memory) · w, |w| ≤ `MAX_HELD` — the memory is a prefix of the machine's stack and
the controller knows the rest (the construction's held tops, latches and modes are whatever the
weights make of them: nothing about them is assumed, the weights' own step is followed). Below
its top cell the memory is an unknown ρ shared by both stacks; a pop reveals any cell that was
ever pushed directly onto the popped one (the pairs of adjacent cells created by pushes, a
fixpoint over the exploration; a cell is (code, B) with B the co-reachability mask of the
machine's stack below it for the next-set readout, else 0). For every case (κ, a) with a live
machine move:

*Lemma 1 (controller).* With the reading exactly the top cell's code (0 for the empty memory),
h̃ = fl(h + fl(W_sh r)) and the pre-activations are enclosed with rounding (`intervals.affine`, or
exactly by Lemma E of `pdanet.verify.certify.stack` where every input is 0 or ±1); tanh/σ under
the kernel model. A unit whose value is not a point ±1 (RNN h; LSTM c) is carried as a box
(relay units: tanh(0) within a few ulps); boxes reaching the same κ are joined (hull, then
widened geometrically) until they are stable, so the state at κ is enclosed for every length.
LSTM: c' = f·c + i·g by `intervals.lstm_cell` (exact ±1 when i, g are exactly 1, ±1 and f·c below
half an ulp), h' = o·tanh(c').

*Lemma A (exact one-hot action).* Softmax row x = W_a h'/τ: the winner w must lead every other
entry by at least a* (x_i − x_w ≤ −a*, and ≥ −U, in real arithmetic over the enclosures; fl is
monotone and −a* a float, so fl(x_i − x_w) ∈ [−U, −a*]). Kernel fact (`softmax_underflow`,
scanned on this build): torch.softmax of a two-entry row [0, −z] and [−z, 0] is exactly one-hot
for every float32 z ∈ [a*, U]. Assumed (as for the saturation scans of `pdanet.verify.intervals`):
softmax computes exp(x − max x) entrywise and normalises by the row sum, and its result depends
only on the row. Then a_t is exactly the store's encoding `Store.actions` of push or pop.

*Lemma N (exact pushed code).* On a push, n = σ(W_n h' + b) must be exactly the code of a store
symbol: bits 1 by exact saturation (`intervals.saturation`), bits 0 where the pre-activation lies
in [−U, −t₀] on which float32 torch.sigmoid returns exactly 0 (`sigmoid_underflow`, scanned).
On a pop n only needs to be finite (0·n = 0).

*Lemma 2 (memory).* With one-hot actions and exact codes the superposition stack is the discrete
stack at every depth (one weight 1, the others 0, no counts); checked bit-for-bit on the
module's store by `stack.memory_check`. The network's op (push n / pop) is applied to the
symbolic memory and Lemma 0 is re-checked token by token against the machine's move.

*Readout.* The machine's output after the move (acceptance: final state, or ⊥ · μ(memory) · w
empty; a transducer's symbol, argmax with the "none" class; next-symbol sets of Suzgun et al.
2019 §4.1 / Table 1 from `NextSetMachine.summaries` at (p, top, B(below)), each σ(y_k) > 1/2 iff
in the set) must be given with strict slack over the state box. Prefixes the machine rejects by
dying (or, for next-symbol sets, that no word of the language extends) are outside the claim.

Float64 and the ulp kernel model: no float64 float is claimed to saturate or underflow
(`intervals.saturation`), so float64 networks are not certified; under ``kernel="ulp"`` the
proof runs under "saturating" directly (the ulp model alone can never show σ = 1, so it is
not tried first), with a note. A fixed-depth `SuzgunStack` (``depth``) is certified only if no
push is ever emitted.

*Baby-NTM* (§3.3: h̃ = h + W_m M^{(0)}, a_t = softmax over five ops, M_t = Σ_i a_t^{(i)} OP_i
M_{t−1}, M_t^{(0)} += n_t): the machines it is compiled from are bounded, so κ = (the machine's
configuration, the saturation pattern, the memory M itself) ranges over a finite set, explored
exactly; Lemmas 1 and A as above (rows of five entries scanned), n_t exactly 0/1 at every step,
and M_t computed by the module's own update on those exact tensors (`certify_baby_ntm`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from pdanet.constructions.realtime import op_name, table
from pdanet.errors import CertificationError, CompileError
from pdanet.verify import intervals as iv
from pdanet.verify.certify.core import (
    Certificate,
    FailingCase,
    Progress,
    Run,
    begin,
    check_arguments,
    check_pair,
    notify,
    overflow_free,
)
from pdanet.verify.certify.stack import affine_point, exact_terms_sum, memory_check

RHO = "ρ"            # the unknown rest of the memory (and of the machine's stack) below the top
EMPTY = None         # the empty memory, as a top cell
MAX_HELD = 4         # the most machine symbols the controller may hold above the memory
MAX_WIDEN = 40       # joins of one configuration's box before the fixpoint is given up
PLAIN_JOINS = 16     # joins by the plain hull before the box is widened
#: floats of the underflow scans start here (every compiled gap is far beyond)
_SCAN_FROM = 64.0
_SCAN_CAP = 2.0 ** 13
_UNDERFLOW: dict = {}
_MEMORY: dict = {}   # `stack.memory_check` results, by store class, depth, codes and dtype
NAN = (math.nan, math.nan)


# --- kernel facts: exact zeros of softmax and sigmoid (float32, this build) ----------------------
def _underflow(kind: str, reach: float, width: int = 2) -> tuple[float, float]:
    """(t, U): the float32 kernel ``kind`` gives its exact limit at every float32 z in [t, U]
    (each evaluated, `intervals._scan`), U the least power of two ≥ max(reach, 128); t = inf
    where none is known or ``reach`` exceeds the scan cap. Scanned once per process and U (and
    cached on disk, `_cache`). Softmax: rows of ``width`` entries, 0 at one place and −z at
    the others, for every place of the 0."""
    if not reach <= _SCAN_CAP:
        return math.inf, 0.0
    upto = 128.0
    while upto < reach:
        upto *= 2
    hi = iv._bits(upto)
    name = f"softmax{width}" if kind == "softmax" else kind
    key = (name, hi)
    if key not in _UNDERFLOW:
        if kind == "softmax":
            eye = torch.eye(width, dtype=torch.float32)

            def exact(z: torch.Tensor) -> torch.Tensor:
                rows = (eye - 1)[None] * z[:, None, None]          # (N, width, width): 0 / −z
                return (torch.softmax(rows, -1) == eye).all(-1).all(-1)
        else:
            def exact(z: torch.Tensor) -> torch.Tensor:
                neg = -z
                ok = torch.sigmoid(neg) == 0                        # contiguous: vector path
                n = len(neg) // 2 * 2
                for off in (0, 1):                                   # stride 2: scalar path
                    ok[off:n:2] &= torch.sigmoid(neg[off:n:2]) == 0
                return ok
        _UNDERFLOW[key] = iv.cached_scan(f"suzgun_{name}_underflow", exact,
                                         iv._bits(_SCAN_FROM), hi)
    t = _UNDERFLOW[key]
    return (iv._from_bits(t) if t <= hi else math.inf), upto


def softmax_underflow(reach: float, width: int = 2) -> tuple[float, float]:
    """(a*, U): float32 torch.softmax of every row of ``width`` entries with 0 at one place and
    −z at the others is exactly one-hot for every float32 z ∈ [a*, U] (every float evaluated;
    a* = inf: nothing claimed)."""
    return _underflow("softmax", reach, width)


def sigmoid_underflow(reach: float) -> tuple[float, float]:
    """(t₀, U): float32 torch.sigmoid(−z) is exactly 0 for every float32 z ∈ [t₀, U]
    (contiguous and strided kernels; every float evaluated; t₀ = inf: nothing claimed)."""
    return _underflow("sigmoid", reach)


# --- enclosures -------------------------------------------------------------------------------------
def _is_point(x: iv.Interval) -> bool:
    return bool(np.array_equal(x.lo, x.hi))


def _lin(blocks: list[tuple[np.ndarray, iv.Interval]], biases: list[np.ndarray],
         dtype: torch.dtype) -> iv.Interval:
    """fl(Σ W_k x_k + Σ b): exact by Lemma E (`stack.affine_point`) where every x is a point,
    else `intervals.affine` over the boxes (NaN where a sum could overflow)."""
    if all(_is_point(x) for _, x in blocks):
        return affine_point([(w, x.lo) for w, x in blocks], biases, dtype)
    W = np.concatenate([w for w, _ in blocks], axis=1)
    x = iv.Interval(np.concatenate([b.lo for _, b in blocks]),
                    np.concatenate([b.hi for _, b in blocks]))
    b = np.sum(biases, axis=0) if biases else None
    n_extra = max(len(biases) - 1, 0)
    out = iv.affine(W, x, b, dtype, extra_terms=n_extra)
    # a sum that could overflow the dtype has no rounding bound: NaN, which every check fails
    n = W.shape[1] + n_extra + 1
    absum = np.abs(W) @ x.mag + sum((np.abs(bb) for bb in biases), np.zeros(W.shape[0]))
    coef = iv.gamma(n, iv.unit_roundoff(dtype)) + iv.gamma(n + 2, 2.0**-53)
    bad = ~(np.isfinite(out.lo) & np.isfinite(out.hi) & overflow_free(absum, coef, dtype))
    return iv.Interval(np.where(bad, np.nan, out.lo), np.where(bad, np.nan, out.hi))


def _add(a: iv.Interval, b: iv.Interval, dtype: torch.dtype) -> iv.Interval:
    """fl(a + b): exact where both are points and Lemma E applies, else `intervals.add`."""
    enc = iv.add(a, b, dtype)
    if _is_point(a) and _is_point(b):
        value, ok = exact_terms_sum(np.stack([a.lo, b.lo], -1), dtype)
        return iv.Interval(np.where(ok, value, enc.lo), np.where(ok, value, enc.hi))
    return enc


def _hull(a: tuple, b: tuple) -> tuple:
    return tuple(None if x is None else iv.Interval(np.minimum(x.lo, y.lo), np.maximum(x.hi, y.hi))
                 for x, y in zip(a, b))


def _within(a: tuple, b: tuple) -> bool:
    return all(x is None or bool(x.within(y).all()) for x, y in zip(a, b))


def _widen(s: tuple, k: int) -> tuple:
    """A joined box: the plain hull for the first `PLAIN_JOINS` joins (carried units that
    contract settle there), then grown by 2^(k − PLAIN_JOINS − 8) times its width (points stay
    points), so that a box that keeps growing is either stable or given up soon."""
    if k <= PLAIN_JOINS:
        return s
    out = []
    for x in s:
        if x is None:
            out.append(None)
            continue
        r = (x.hi - x.lo) * 2.0 ** (k - PLAIN_JOINS - 8)
        out.append(iv.Interval(np.where(x.lo == x.hi, x.lo, np.nextafter(x.lo - r, -np.inf)),
                               np.where(x.lo == x.hi, x.hi, np.nextafter(x.hi + r, np.inf))))
    return tuple(out)


# --- the machine --------------------------------------------------------------------------------
class _Spec:
    """The machine's side: its real-time table, μ, and the outputs it requires."""

    def __init__(self, machine, net):
        from pdanet.models.suzgun import NextSetMachine

        abst = net.abstraction
        self.next_set = isinstance(net.machine, NextSetMachine)
        base = machine.machine if isinstance(machine, NextSetMachine) else machine
        try:
            self.tab = table(base)
        except CompileError as exc:
            raise CertificationError(str(exc)) from None
        if self.tab.kind != "stack":
            raise CertificationError(f"{base!r} keeps a {self.tab.kind}; the Suzgun stack "
                                     "certificate covers stacks only")
        self.ns = None
        if self.next_set:
            self.ns = (machine if isinstance(machine, NextSetMachine)
                       else NextSetMachine(base)).summaries
        self.states = tuple(base.states)
        self.symbols = tuple(base.alphabet.symbols)
        self.mu = tuple(int(g) for g in abst.symbol_of)
        G = self.tab.G
        self._above: dict = {}
        self._want: dict = {}
        self.bottom = self.mask_above(G, 0)                                  # B(⊥)

    def mask_above(self, X: int, below: int) -> int:
        if self.ns is None:
            return 0
        key = (X, below)
        if key not in self._above:
            self._above[key] = int(self.ns.above(X, below))
        return self._above[key]

    def head(self, top, w: tuple) -> tuple[int, int, bool]:
        """(machine top X, B(stack below X), whether the stack is empty) of ⊥ · μ(memory) · w."""
        G = self.tab.G
        if top is EMPTY:
            cur, X, below = self.bottom, G, 0
        else:
            code, bb = top
            X, below = self.mu[code], bb
            cur = self.mask_above(X, bb)
        for s in w:
            X, below = s, cur
            cur = self.mask_above(s, cur)
        return X, below, top is EMPTY and not w

    def want(self, p: int, top, w: tuple, out: int):
        """The output the machine requires at (p, ⊥ · μ(memory) · w) after a move with output
        ``out``; None: the configuration is dead (no word of the language extends it)."""
        tab = self.tab
        if self.ns is not None:
            X, below, _ = self.head(top, w)
            key = (p, X, below)
            if key not in self._want:
                self._want[key] = None if not bool(self.ns.live(p, X, below)) else tuple(
                    bool(b) for b in self.ns.sets(p, X, below))
            return self._want[key]
        if tab.output == "symbol":
            return tab.n_out if out < 0 else out
        if tab.empty_stack:
            return self.head(top, w)[2]
        return bool(tab.accepting[p])


# --- the proof ------------------------------------------------------------------------------------
def certify_suzgun(machine, net, dtype: torch.dtype | None = None, kernel: str = "ulp",
                   max_configs: int = 200_000, progress: Progress | None = None) -> Certificate:
    """Prove that a compiled `SuzgunStackRNN`/`SuzgunStackLSTM` network agrees with `machine`
    (or its `NextSetMachine` for ``readout="next_set"``) on every string whose prefixes are live,
    at every length (module docstring). ``kernel="ulp"`` cannot show exact saturation and falls
    back to "saturating", with a note. More than ``max_configs`` abstract configurations gives
    NOT CERTIFIED (kind "configs"). A non-finite weight gives NOT CERTIFIED naming it."""
    from pdanet.models.suzgun import SuzgunController, SuzgunStackLSTM, SuzgunStackRNN

    check_arguments(kernel=kernel, dtype=dtype, progress=progress, max_configs=max_configs)
    if not isinstance(net.abstraction, SuzgunController) \
            or not isinstance(net.module, (SuzgunStackRNN, SuzgunStackLSTM)):
        raise CertificationError(f"certify_suzgun needs a compiled suzgun_stack_rnn or "
                                 f"suzgun_stack_lstm network, got {net.construction}")
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    spec = _Spec(machine, run.net)
    if kernel == "ulp":     # σ = 1 is never a point under the ulp model alone: go saturating
        cert = _prove(spec, Run(machine, run.net, "saturating", run.t0), max_configs, progress)
        return replace(cert, notes=cert.notes + (_ulp_note(run.dtype),))
    return _prove(spec, Run(machine, run.net, kernel, run.t0), max_configs, progress)


class _Model:
    """The module's weights as they are (float64 copies of its floats) and its step under one
    kernel model: Lemma 1 (`cell`), Lemma A (`action`), Lemma N (`value`) and the readout
    logits, each an enclosure with rounding; ``stats`` collects the smallest slacks."""

    def __init__(self, net, kernel: str):
        module = net.module
        self.module, self.kernel, self.dtype = module, kernel, net.dtype
        self.sd = module.blocks(numpy=True)
        self.lstm = module.cell_kind == "lstm"
        self.H = module.hidden
        self.eye = np.eye(module.num_symbols)
        self.labels = tuple(net.abstraction.labels)
        t = module.temperature
        self.tau = float(np.float32(t)) if self.dtype == torch.float32 else float(t)
        self.sat = iv.saturation(self.dtype)
        self.stats = {"state_margin": math.inf, "readout_margin": math.inf}

    def label(self, j: int) -> str:
        return self.labels[j] if 0 <= j < len(self.labels) else f"h{j}"

    def pattern(self, s: tuple) -> tuple:
        """±1 for the units that are exactly ±1 (the LSTM's cells c), 0 for carried boxes."""
        v = s[1] if self.lstm else s[0]
        return tuple(np.where((v.lo == v.hi) & (np.abs(v.lo) == 1), v.lo, 0).astype(int).tolist())

    def initial(self) -> tuple:
        """h_0 (and c_0) exactly: parameters of the module."""
        return (iv.Interval.point(self.sd["h0"]),
                iv.Interval.point(self.sd["c0"]) if self.lstm else None)

    def cell(self, s: tuple, a: int, r: np.ndarray) -> tuple:
        """Lemma 1: the state after input a with reading r (exact), or ("nonfinite", unit,
        what, got, need)."""
        sd, dtype, kernel, H = self.sd, self.dtype, self.kernel, self.H
        h, c = s
        x = iv.Interval.point(self.eye[a])
        ht = _add(h, _lin([(sd["W_sh"], iv.Interval.point(r))], [], dtype), dtype)  # h̃
        z = _lin([(sd["W_ih"], x), (sd["W_hh"], ht)], [sd["b_ih"], sd["b_hh"]], dtype)  # §3.1
        if self.lstm:                 # PyTorch LSTM cell gates i, f, g, o (§3.2)
            zi, zf, zg, zo = (z[k * H:(k + 1) * H] for k in range(4))
            i_, f_ = iv.sigmoid(zi, dtype, kernel), iv.sigmoid(zf, dtype, kernel)
            g_, o_ = iv.tanh(zg, dtype, kernel), iv.sigmoid(zo, dtype, kernel)
            c2 = iv.lstm_cell(f_, c, i_, g_, dtype)
            h2 = iv.mul(o_, iv.tanh(c2, dtype, kernel), dtype)
            zsat, on = zg, (c2.lo == c2.hi) & (np.abs(c2.lo) == 1)
        else:
            h2, c2, zsat = iv.tanh(z, dtype, kernel), None, z
            on = (h2.lo == h2.hi) & (np.abs(h2.lo) == 1)
        if on.any():
            m = np.minimum(np.abs(zsat.lo), np.abs(zsat.hi))[on] - self.sat.tanh
            self.stats["state_margin"] = min(self.stats["state_margin"], float(np.min(m)))
        for v, what in ((h2, "h"), (c2, "c")):
            if v is not None and not (np.isfinite(v.lo).all() and np.isfinite(v.hi).all()):
                u = int(np.argmin(np.isfinite(v.lo) & np.isfinite(v.hi)))
                return ("nonfinite", u, f"{what} {self.label(u)}", (v.lo[u], v.hi[u]),
                        (-math.inf, math.inf))
        return (h2, c2)

    def action(self, h2: iv.Interval, channels: tuple) -> int | tuple:
        """Lemma A: the index of the exactly-one-hot softmax(W_a h / τ) entry, or ("step",
        unit, what, got, need)."""
        sd, dtype = self.sd, self.dtype
        l = _lin([(sd["W_a"], h2)], [sd["b_a"]], dtype)
        if self.tau != 1.0:
            lo, hi = (np.minimum(l.lo / self.tau, l.hi / self.tau),
                      np.maximum(l.lo / self.tau, l.hi / self.tau))
            l = iv.Interval(lo, hi).widen(iv.unit_roundoff(dtype) * np.maximum(
                np.abs(lo), np.abs(hi)) * 4 + iv.tiny(dtype))    # τ rounded, ÷ or ×(1/τ)
        if not (np.isfinite(l.lo).all() and np.isfinite(l.hi).all()):
            return ("step", -1, "action logits (not finite)")
        win = int(np.argmax(l.lo))
        gap = np.nextafter(np.delete(l.hi, win) - l.lo[win], np.inf)   # ≥ x_i − x_w
        far = np.nextafter(np.delete(l.lo, win) - l.hi[win], -np.inf)  # ≤ x_i − x_w
        a_star, U = (softmax_underflow(float(-far.min()), len(l.lo))
                     if dtype == torch.float32 else (math.inf, 0.0))
        self.stats["state_margin"] = min(self.stats["state_margin"], float(-gap.max() - a_star))
        if not (gap.max() <= -a_star and far.min() >= -U):
            k = int(np.delete(np.arange(len(l.lo)), win)[int(np.argmax(gap))])
            why = (f"≥ a* = {a_star:.6g}, where float32 softmax is exactly one-hot"
                   if a_star < math.inf else
                   "within the scanned float32 underflow range (float64: none is claimed; "
                   f"float32: gaps up to {_SCAN_CAP:g})")
            what = (f"action {channels[k]} (softmax not exactly one-hot: its gap to the "
                    f"winner {channels[win]} must be {why})")
            return ("step", k, what, (l.lo[k] - l.hi[win], l.hi[k] - l.lo[win]), (-U, -a_star))
        return win

    def value(self, h2: iv.Interval) -> tuple[np.ndarray, np.ndarray]:
        """Lemma N: the enclosure (lo, hi) of n = σ(W_n h + b), with exact 1 (saturation) and
        exact 0 (`sigmoid_underflow`) where they are proven; the margins go to ``stats``
        where n is exact."""
        sd, dtype = self.sd, self.dtype
        zn = _lin([(sd["W_n"], h2)], [sd["b_n"]], dtype)
        nval = iv.sigmoid(zn, dtype, self.kernel)
        t0, U0 = (sigmoid_underflow(float(np.max(-zn.lo, initial=0.0)))
                  if dtype == torch.float32 else (math.inf, 0.0))
        zero = (zn.hi <= -t0) & (zn.lo >= -U0)
        lo, hi = np.where(zero, 0.0, nval.lo), np.where(zero, 0.0, nval.hi)
        if np.array_equal(lo, hi) and np.isin(lo, (0.0, 1.0)).all():
            m = np.where(lo == 1, zn.lo - self.sat.sigmoid, -zn.hi - t0)
            self.stats["state_margin"] = min(self.stats["state_margin"], float(m.min()))
        return lo, hi

    def logits(self, h: iv.Interval) -> iv.Interval:
        return _lin([(self.sd["W_y"], h)], [self.sd["b_y"]], self.dtype)

    def slack(self, h: iv.Interval, want) -> tuple[float, int, tuple, tuple]:
        """The readout's slack (> 0: every point of the box reads ``want``: a bool (σ(y_0) >
        1/2), a class (argmax), or a bool vector (σ(y_k) > 1/2 per column)), the worst logit,
        its interval and the interval it needs."""
        z = self.logits(h)
        if isinstance(want, tuple):
            slack = np.where(np.array(want), z.lo, -z.hi)
            k = int(np.argmin(np.where(np.isnan(slack), -math.inf, slack)))
            s = float(slack[k])
            need = (0.0, math.inf) if want[k] else (-math.inf, 0.0)
        elif isinstance(want, bool):
            s = float(z.lo[0] if want else -z.hi[0])
            k, need = 0, ((0.0, math.inf) if want else (-math.inf, 0.0))
        else:
            others = np.delete(z.hi, want)
            s = float(z.lo[want] - others.max())
            k, need = int(want), (float(others.max()), math.inf)
        self.stats["readout_margin"] = min(self.stats["readout_margin"], s)
        return s, k, (z.lo[k], z.hi[k]), need


NOTES = ("agreement covers every unpadded string whose prefixes are all live",
         ("the deterministic forward (eval mode): Gumbel noise (§3.4) is training-only and "
          "not covered"))


def _mode_notes(module) -> list[str]:
    """A note when the module would draw Gumbel noise in its present (training) mode."""
    if getattr(module, "gumbel", False) and module.training:
        return [("the module is in training mode with gumbel=True: its forward adds Gumbel "
                 "noise now; this certificate is for module.eval()")]
    return []


def _prove(spec: _Spec, run: Run, max_configs: int, progress: Progress | None) -> Certificate:
    net, kernel, dtype = run.net, run.kernel, run.dtype
    module = net.module
    model = _Model(net, kernel)
    stats, pattern = model.stats, model.pattern
    tab = spec.tab
    store = module.store
    codes = np.asarray(module.codes.codes, dtype=np.float64)
    Gn = codes.shape[0] - 1                     # the memory's empty code (zeros)
    if codes[Gn].any():
        raise CertificationError("the module's last symbol code (the empty memory's reading) "
                                 "is not all zero")
    notes = list(NOTES) + _mode_notes(module) + [
        ("forward_window / forward_decoded equal forward wherever the actions are exactly "
         "one-hot and the pushed values exact codes, which the proof shows at every step")]
    done: set = set()
    boxes: dict = {}                            # κ → (h box, c box | None)
    widened: dict = {}
    pairs: dict = {}                            # cell → cells (or EMPTY) pushed right under it

    def result(ok: bool, failing: FailingCase | None) -> Certificate:
        return replace(run, configs=len(boxes)).certificate(
            ok, eps=0.0, state_margin=stats["state_margin"] if ok else 0.0,
            readout_margin=stats["readout_margin"] if ok else 0.0, cases=len(done),
            failing=failing, extra=tuple(notes))

    def desc(node: tuple) -> str:
        p, _, top, w, _ = node
        mem = "empty memory" if top is EMPTY else f"memory top {spec.mu[top[0]]} (code {top[0]})"
        held = f", holding {list(w)}" if w else ""
        return f"machine state {spec.states[p]!r} with {mem}{held}"

    def fail(kind: str, node, sym, unit: int, what: str, got=NAN, need=NAN) -> Certificate:
        return result(False, FailingCase(kind, desc(node), sym, unit, what,
                                         (float(got[0]), float(got[1])),
                                         (float(need[0]), float(need[1]))))

    def readout(node: tuple, h: iv.Interval) -> Certificate | None:
        s, k, got, need = model.slack(h, node[4])
        if not s > 0:
            return fail("readout", node, None, k, f"logit {k}", got, need)
        return None

    steps: dict = {}

    def net_step(s: tuple, a: int, R: int) -> tuple:
        """Lemmas 1, A, N for the module from state s on input a reading code R (memoised):
        (new state, op, pushed code, pattern), or (kind, unit, what[, got, need])."""
        key = (a, R) + tuple(b for x in s if x is not None for b in (x.lo.tobytes(),
                                                                       x.hi.tobytes()))
        if key not in steps:
            steps[key] = _net_step(s, a, codes[R])
        return steps[key]

    def _net_step(s: tuple, a: int, r: np.ndarray) -> tuple:
        s2 = model.cell(s, a, r)                                  # Lemma 1
        if isinstance(s2[0], str):
            return s2
        win = model.action(s2[0], store.channels)                 # Lemma A
        if isinstance(win, tuple):
            return win
        onehot = np.eye(len(store.channels))[win]
        ops = [o for o in store.ops if np.array_equal(store.actions(o), onehot)]
        if not ops:
            return ("step", win, f"action {store.channels[win]} is no op")
        op = ops[0]
        lo, hi = model.value(s2[0])                               # Lemma N
        if op == "push":
            if store.depth is not None:
                what = f"a push into the fixed {store.depth}-cell SuzgunStack (it drops cells)"
                return ("step", -1, what)
            hits = [g for g in range(Gn) if np.array_equal(lo, codes[g])
                    and np.array_equal(hi, codes[g])]
            if not hits:
                b = int(np.argmax(lo != hi)) if (lo != hi).any() else 0
                return ("step", b, f"pushed value bit {b} (not an exact symbol code)",
                        (lo[b], hi[b]), NAN)
            code = hits[0]
        elif not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            return ("step", -1, "pushed value (unused, not finite)")
        else:
            code = -1
        return s2, op, code, pattern(s2)

    # the initial configuration: h0 (and c0) exactly, the memory empty, the reading 0
    s0 = model.initial()
    want0 = spec.want(tab.q0, EMPTY, (), -1)
    if want0 is None:
        notes.append("no word of the language exists: nothing to certify")
        return result(True, None)
    start = (tab.q0, pattern(s0), EMPTY, (), want0)
    boxes[start] = s0
    frontier = [start]
    swept = -1
    n_pairs = 0
    while frontier or n_pairs != swept:
        if not frontier:              # new adjacent pairs widen what a pop may reveal
            swept = n_pairs
            frontier = sorted(boxes, key=repr)
        node = frontier.pop()
        p, _, top, w, _ = node
        s = boxes[node]
        fc = readout(node, s[0])
        if fc is not None:
            return fc
        X, _, _ = spec.head(top, w)
        for a in range(tab.K):
            mv = tab.trans.get((p, a, X))
            if mv is None:
                continue                # the machine dies: outside the live prefixes
            sym = str(spec.symbols[a])
            p2, out, pe, ue, y = mv
            done.add((node, a))
            if len(done) % 256 == 0:
                notify(progress, f"suzgun cases ({kernel} kernels)", len(done),
                       max(len(done), len(boxes) * tab.K))
            got_step = net_step(s, a, Gn if top is EMPTY else top[0])
            if isinstance(got_step[0], str):
                kind_, unit_, what_, *iv_ = got_step
                return fail(kind_, node, sym, unit_, what_, *iv_)
            s2, op, code, pat2 = got_step
            # Lemma 0 and Lemma 2: the machine's move against the memory's op
            mem = [] if top is EMPTY else [RHO, ("c", top)]
            mach = mem + list(w)
            mop = op_name(pe, ue)
            if mop in ("pop", "replace"):
                if not mach:
                    return fail("invariant", node, sym, -1, "the machine pops ⊥")
                mach = mach[:-1]
            if mop in ("push", "replace"):
                mach = mach + [y]
            concrete = tuple(range(len(mem)))
            want_mem = store.apply(concrete, op, len(mem))
            if op == "push":
                ncell = (code, spec.mask_above(*spec.head(top, ())[:2]) if top is not EMPTY
                         else spec.bottom) if spec.ns is not None else (code, 0)
                mem2 = mem + [("c", ncell)]
                got = pairs.setdefault(ncell, set())
                if top not in got:
                    got.add(top)
                    n_pairs += 1
            else:
                mem2 = mem[:-1] if mem else []
                if mem:
                    mem2 = [RHO]
            if want_mem is None or len(want_mem) != len(mem2):
                return fail("invariant", node, sym, -1, f"memory op {op} "
                            f"({type(store).__name__}) is not the discrete one")

            def token(t):
                return RHO if t == RHO else (spec.mu[t[1][0]] if isinstance(t, tuple) else t)

            if len(mach) < len(mem2) or any(token(u) != token(v)
                                            for u, v in zip(mach, mem2)):
                return fail("invariant", node, sym, -1,
                            f"after the network's {op} the memory is not a prefix of the "
                            f"machine's stack (machine {mop})")
            rest = [token(t) for t in mach[len(mem2):]]     # memory cells the op left above
            if any(t == RHO for t in rest) or len(rest) > MAX_HELD:
                return fail("invariant", node, sym, -1, f"the machine's stack runs more than "
                            f"{MAX_HELD} symbols ahead of the memory")
            w2 = tuple(int(t) for t in rest)
            if mem2 == [RHO]:
                tops = sorted(pairs.get(top, ()), key=repr)
            else:
                tops = [mem2[-1][1] if mem2 else EMPTY]
            for top2 in tops:
                want2 = spec.want(p2, top2, w2, out)
                if want2 is None:
                    continue
                node2 = (p2, pat2, top2, w2, want2)
                old = boxes.get(node2)
                if old is not None and _within(s2, old):
                    continue
                if old is not None:
                    k = widened[node2] = widened.get(node2, 0) + 1
                    if k > MAX_WIDEN:
                        return fail("step", node2, sym, -1, "no stable state box (the carried "
                                    "units keep growing)")
                    s2 = _widen(_hull(old, s2), k)
                elif len(boxes) >= max_configs:
                    return fail("configs", node, sym, -1, f"more than {max_configs:,} abstract "
                                "configurations (raise max_configs)")
                boxes[node2] = s2
                frontier.append(node2)
    notify(progress, f"suzgun cases ({kernel} kernels)", len(done), len(done))
    key = (type(store), store.depth, codes.shape, codes.tobytes(), dtype)
    if key not in _MEMORY:              # the store has no weights: one check per store & codes
        _MEMORY[key] = memory_check(net, limit=4096)
    msg = _MEMORY[key]
    if msg is not None:
        return result(False, FailingCase("memory", msg, None, -1, "memory module", NAN, NAN))
    notes.append("memory module checked bit-exact against the discrete stack on every saturated "
                 "action sequence of a few steps")
    if dtype == torch.float32:
        a_star, U = softmax_underflow(_SCAN_FROM)
        notes.append(f"kernel facts: float32 softmax rows [0, −z] are exactly one-hot for every "
                     f"float32 z ≥ {a_star:.6g} scanned (to ≥ {U:g}); sigmoid(−z) = 0 likewise "
                     f"from {sigmoid_underflow(_SCAN_FROM)[0]:.6g}")
    return result(True, None)


# --- Baby-NTM (Suzgun et al. 2019 §3.3): a finite product, explored concretely ------------------
NTM_CHANNELS = ("ROTATE_RIGHT", "ROTATE_LEFT", "NOOP", "POP_LEFT", "POP_RIGHT")


def certify_baby_ntm(machine, net, dtype: torch.dtype | None = None, kernel: str = "ulp",
                     max_configs: int = 200_000, progress: Progress | None = None
                     ) -> Certificate:
    """Prove that a compiled `SuzgunBabyNTM` agrees with its bounded machine (DFA, Mealy
    machine, `BoundedPDA`, `DyckKM`) on every string whose prefixes are live, at every length.

    The machine has finitely many configurations and the memory is fixed (``size`` rows), so
    the product is finite and explored exactly: κ = (the machine's configuration, the
    controller's saturation pattern, the memory M itself). Per case: Lemma 1 and the carried
    boxes as for the Stack-RNN (`certify_suzgun`); Lemma A over the five ops (rows of five
    entries scanned, `softmax_underflow`); n_t = σ(W_n h_t) must be an exact 0/1 vector at
    every step (M_t^{(0)} += n_t on every op, §3.3); then M_t = Σ a_i OP_i M_{t−1} + n_t is
    computed by the module's own update (`BabyNTM._update`) on those exact tensors in the
    dtype — the value the network computes, with no model of the memory. The readout of each
    κ is checked against the machine's output at its configuration (taken from
    ``machine.run_batch`` on the first string found reaching κ: the output is a function of the
    configuration). ``kernel``, ``max_configs``, ``progress`` and non-finite weights as in
    `certify_suzgun`."""
    from pdanet.models.suzgun import BabyNTMController, SuzgunBabyNTM

    check_arguments(kernel=kernel, dtype=dtype, progress=progress, max_configs=max_configs)
    if not isinstance(net.abstraction, BabyNTMController) \
            or not isinstance(net.module, SuzgunBabyNTM):
        raise CertificationError(f"certify_baby_ntm needs a compiled suzgun_baby_ntm network, "
                                 f"got {net.construction}")
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    cert = _prove_ntm(machine, Run(machine, run.net, "saturating", run.t0), max_configs, progress)
    if kernel == "ulp":
        cert = replace(cert, notes=cert.notes + (_ulp_note(run.dtype),))
    return cert


def _ulp_note(dtype: torch.dtype) -> str:
    z = iv.saturation(dtype)
    return (f"the ulp kernel model alone can never show σ(z) = 1 or tanh(z) = ±1 exactly (the "
            f"pushed codes and units), so the proof uses exact saturation (σ(z) = 1 for z ≥ "
            f"{z.sigmoid:.6g}, tanh(z) = ±1 for |z| ≥ {z.tanh:.6g}; checked: {z.checked})")


def _prove_ntm(machine, run: Run, max_configs: int, progress: Progress | None) -> Certificate:
    net, kernel, dtype = run.net, run.kernel, run.dtype
    module = net.module
    model = _Model(net, kernel)
    stats = model.stats
    syms = tuple(machine.alphabet.symbols)
    notes = list(NOTES) + _mode_notes(module) + [
        "the memory is explored exactly (finitely many configurations)"]
    boxes: dict = {}
    mems: dict = {}
    reps: dict = {}
    widened: dict = {}
    steps: dict = {}
    done: set = set()

    def result(ok: bool, failing: FailingCase | None) -> Certificate:
        return replace(run, configs=len(boxes)).certificate(
            ok, eps=0.0, state_margin=stats["state_margin"] if ok else 0.0,
            readout_margin=stats["readout_margin"] if ok else 0.0, cases=len(done),
            failing=failing, extra=tuple(notes))

    def fail(kind: str, node, sym, unit: int, what: str, got=NAN, need=NAN) -> Certificate:
        where = f"machine configuration {node[0]!r} after {''.join(map(str, reps[node]))!r}"
        return result(False, FailingCase(kind, where, sym, unit, what,
                                         (float(got[0]), float(got[1])),
                                         (float(need[0]), float(need[1]))))

    def net_step(s: tuple, a: int, M: torch.Tensor) -> tuple:
        key = (a, M.numpy().tobytes()) + tuple(b for x in s if x is not None
                                               for b in (x.lo.tobytes(), x.hi.tobytes()))
        if key in steps:
            return steps[key]
        r = M[0, 0].double().numpy()
        s2 = model.cell(s, a, r)                                  # Lemma 1
        if isinstance(s2[0], str):
            steps[key] = s2
            return s2
        win = model.action(s2[0], NTM_CHANNELS)                   # Lemma A
        if isinstance(win, tuple):
            steps[key] = win
            return win
        lo, hi = model.value(s2[0])                               # n_t exactly 0/1
        if not (np.array_equal(lo, hi) and np.isin(lo, (0.0, 1.0)).all()):
            b = int(np.argmax((lo != hi) | ~np.isin(lo, (0.0, 1.0))))
            out = ("step", b, f"written value bit {b} (not exactly 0 or 1)", (lo[b], hi[b]),
                   NAN)
        else:
            ops = torch.zeros(1, len(NTM_CHANNELS), dtype=dtype)
            ops[0, win] = 1
            with torch.no_grad():                                 # §3.3 M_t = Σ a OP M; += n
                M2 = module.memory._update(M, ops, torch.as_tensor(lo, dtype=dtype)[None])
            out = ("nonfinite", -1, "memory (not finite)") if not bool(
                torch.isfinite(M2).all()) else (s2, M2, model.pattern(s2))
        steps[key] = out
        return out

    width = module.width
    M0 = module.memory.init_state(1, width, dtype=dtype).memory
    c0 = machine.initial()
    if machine.is_dead(c0):
        notes.append("the start configuration is dead: nothing to certify")
        return result(True, None)
    s0 = model.initial()
    start = (c0, model.pattern(s0), M0.numpy().tobytes())
    boxes[start], mems[start], reps[start] = s0, M0, ()
    frontier = [start]
    while frontier:
        node = frontier.pop(0)                                    # breadth first: short reps
        config, _, _ = node
        s, M = boxes[node], mems[node]
        for a, sym in enumerate(syms):
            config2 = machine.step(config, sym)
            if machine.is_dead(config2):
                continue                  # outside the live prefixes
            done.add((node, a))
            if len(done) % 256 == 0:
                notify(progress, "baby-ntm cases", len(done), max(len(done), len(boxes)))
            got = net_step(s, a, M)
            if isinstance(got[0], str):
                kind_, unit_, what_, *rest = got
                return fail(kind_, node, str(sym), unit_, what_, *rest)
            s2, M2, pat2 = got
            node2 = (config2, pat2, M2.numpy().tobytes())
            old = boxes.get(node2)
            if old is not None and _within(s2, old):
                continue
            if old is not None:
                k = widened[node2] = widened.get(node2, 0) + 1
                if k > MAX_WIDEN:
                    return fail("step", node2, str(sym), -1, "no stable state box (the carried "
                                "units keep growing)")
                s2 = _widen(_hull(old, s2), k)
            elif len(boxes) >= max_configs:
                return fail("configs", node, str(sym), -1, f"more than {max_configs:,} "
                            "configurations (raise max_configs)")
            else:
                reps[node2], mems[node2] = reps[node] + (sym,), M2
            boxes[node2] = s2
            frontier.append(node2)
    notify(progress, "baby-ntm cases", len(done), len(done))
    # the readout of every κ against the machine's output at its configuration
    nodes = list(boxes)
    ids, lengths = machine.encode([reps[n] for n in nodes])
    outs = np.asarray(machine.run_batch(ids, lengths).fields["output"])
    n_out = int(model.sd["b_y"].shape[0])
    for b, node in enumerate(nodes):
        o = outs[b, int(lengths[b])]
        if o.ndim == 1:
            want = tuple(bool(x) for x in o)
        elif o.dtype == bool:
            want = bool(o)
        else:
            want = n_out - 1 if int(o) < 0 else int(o)
        sl, k, got_, need = model.slack(boxes[node][0], want)
        if not sl > 0:
            return fail("readout", node, None, k, f"logit {k}", got_, need)
    if dtype == torch.float32:
        a_star, U = softmax_underflow(_SCAN_FROM, len(NTM_CHANNELS))
        notes.append(f"kernel facts: float32 softmax rows of five entries (0 at one place, −z "
                     f"elsewhere) are exactly one-hot for every float32 z ≥ {a_star:.6g} "
                     f"scanned (to ≥ {U:g}); sigmoid(−z) = 0 from "
                     f"{sigmoid_underflow(_SCAN_FROM)[0]:.6g}")
    return result(True, None)


def certify(machine, net, *, dtype: torch.dtype | None = None, eps: float | None = None,
            max_configs: int = 200_000, chunk: int = 1024, kernel: str = "ulp",
            progress: Progress | None = None) -> Certificate:
    """A `SuzgunController` network: `certify_suzgun`; a `BabyNTMController` network:
    `certify_baby_ntm` (states are points or stable boxes: ``eps`` and ``chunk`` do not
    apply). Arguments are checked by `pdanet.verify.certify.certify`."""
    from pdanet.models.suzgun import BabyNTMController

    check_pair(machine, net)
    if isinstance(net.abstraction, BabyNTMController):
        return certify_baby_ntm(machine, net, dtype=dtype, kernel=kernel,
                                max_configs=max_configs, progress=progress)
    return certify_suzgun(machine, net, dtype=dtype, kernel=kernel, max_configs=max_configs,
                          progress=progress)


__all__ = ["certify", "certify_baby_ntm", "certify_suzgun", "sigmoid_underflow",
           "softmax_underflow"]

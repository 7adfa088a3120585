"""Certificates for DuSell & Chiang's compiled models (`NSController`: an LSTM controller driving
the nondeterministic stack of DuSell & Chiang 2021/2022; models ``dusell_chiang_ns``,
``dusell_chiang_ns_s``, ``dusell_chiang_ns_u``, ``dusell_chiang_rns``; equation numbers are
those of DuSell & Chiang 2021, /work/shared/papers).

`DuSellChiangRNN.forward_decoded` checks at run time, step by step, that the action weights of
the run's configuration are exactly one-hot, so that the chart keeps exactly one run and the
reading is exactly the code of the top. This module proves the same for *every* string and
*every* length (NS+U, RNS) or every length up to a computed bound (NS, NS+S), from the weights
as they are (after fine-tuning or noise: nothing is read from the compiled plan but the
network-stack encoding that the module docstring of `pdanet.models.dusell_chiang` specifies).

**Abstract cases.** κ = (q, n, S): the machine state q (the NS stack's state), the network top
n (symbol ids: 0 = ⊥₀, 1..G = Z, G+1..2G = Ẑ, 2G+1 = ⊥̂) and the set S of controller units that
are on. They come from the machine's real-time table (`pdanet.constructions.realtime.table`),
not from the weights; after a pop the new top is any symbol ever written (over-approximated, as
in `pdanet.verify.certify.stack`), and the exploration is a fixpoint over that set.

*Lemma 0 (simulation invariant).* The network stack is enc(machine stack): ⊥₀ ⊥̂ for the empty
machine stack, ⊥₀ Ẑ₁ Z₂ … Z_k otherwise (the lowest symbol marked), and the NS state is the
machine state. A machine move on top X becomes one network operation (on ⊥₀, only at step 1:
noop → push ⊥̂, push y → push ŷ; on ⊥̂: noop → replace ⊥̂, push y → replace ŷ; on Z: noop →
replace Z, push y → push y, replace → y, pop → pop; on Ẑ: noop → replace Ẑ, push y → push y,
replace → ŷ, pop → replace ⊥̂), which preserves the invariant; no live move replaces or pops ⊥₀.

*Lemma 1 (controller, §2.1).* The state invariant is a box: every unit's cell c lies in
C_on = [1 − ρ_on, 1 + ρ_on] if the unit is on and C_off = [−ρ_off, ρ_off] otherwise, its output
h in H_on = [(1 − ρ_on)·tanh(C_on)] (the output gate may sit below 1 by ρ_on) or H_off = [±1.001
ρ_off + 4·tiny] (h = σ(o)·tanh(c) is not saturated — tanh 1 ≈ 0.76 — so it is carried as a box),
with the inputs exact: x_t one-hot, r_{t−1} exactly the one-hot reading of (q, n) (NS+S, RNS,
§3.2) or of n (NS, NS+U, Eq. 5). For every case (κ, a) with a live machine move the LSTM gates
are enclosed with rounding (`intervals.affine` on the module's own gate parts, the bias
b_ih + b_hh as the one float the module adds; `intervals.sigmoid`/`tanh` under the kernel
model; `intervals.lstm_cell`), and every unit's c' and h' must lie in the box of on or off: the
units on define S'. h_0 = c_0 = 0 lie in the off boxes. The radii are a small fixpoint: from
ρ_on = 2⁻¹⁶, ρ_off = 2⁻¹⁰⁰, a case that leaves a box doubles that radius past what it needed (a
power of two, at most 2⁻⁶) and the induction restarts. No exact saturation of σ/tanh is needed
(the ulp model suffices); exactness enters only through the action head:

*Lemma A (action head, Eq. 1 and §3.1).* ℓ = W_ha h_t + b_ha is enclosed from the box of h_t
(`affine_tight`: the standard bound, or one for sums dominated by the bias).
The stack shifts the log actions by their maximum m before exp (`NondeterministicStack.step`):

- NS+U, RNS (Δ = exp(ℓ), §3.1): the entry of the machine's move in the row of (q, n) must be
  the unique maximum of all of Δ[t] (its lower bound above every other upper bound), so m is
  that float and the move weighs exp(m − m) = exp(0) = 1; every other entry ℓ' satisfies
  −U ≤ ℓ' − m ≤ −a*, where exp underflows to exactly 0 (float32: every float of [a*, U]
  evaluated on this build, `pdanet.learning.paper_init.exp_underflow`, a* ≈ 103.97; float64:
  a* = 746, assumed — e^{−746} is below half the least subnormal — and sampled). So Δ[t] is
  exactly one 1 and zeros.
- NS, NS+S (Eq. 1, softmax over (r, v) of each (q, x)): the move must be the unique maximum of
  its row and the row's other entries ℓ' − ℓ_M must underflow as above. torch.logsumexp
  computes max + log Σ exp(x − max) (checked on this build on such a row): Σ = 1 + 0 + … = 1,
  log 1 = 0, so the row's logsumexp is ℓ_M and its entries after Eq. 1 are exactly 0 (the
  move) and exactly −(gap) (the rest: weight 0 after exp). Every other row's entries after
  Eq. 1 are ≤ 0 (its logsumexp is its maximum plus log of a sum ≥ 1), so the step's maximum is
  exactly 0 and the run's row is exactly one-hot. The other rows are not zero (a softmax row
  sums to 1): the certificate encloses, per case, the largest row sum S̄ and the largest push
  mass P̄ of the rows the run does not occupy (ulp model for exp and log).

*Lemma 2 (chart, Eqs. 2–4, §3.2, Eq. 5).* If at every step the run's row of Δ[t] is exactly
one-hot on the network move of Lemma 0 and the stack's column normaliser is s = 1, then by
induction on t: every γ[i→t][c_i→·] from the run's configuration c_i at i is 0 except, for
i = p − 1 with p the step that pushed the run's top, the single entry c_t, which is exactly 1
(push term: the move's 1; replace term: 1·1 + 0 + …; pop term: one product 1·1, every other
term has an exact 0 factor and finite co-factor); every α[t] (Eq. 4, with the scaled
arithmetic's e^{v−max} = e^0 = 1 at the run's entries and e^{−inf} = 0 elsewhere) is exactly 1 at
c_t and 0 elsewhere, so the reading (§3.2 for NS+S/RNS, Eq. 5 for NS/NS+U) is exactly the one-hot
of (q_t, n_t) (n_t). The normaliser s is the column maximum: the run's entry 1, so s = 1 iff no
other entry exceeds 1 in float.

- NS+U, RNS: every other weight of Δ[t] is exactly 0, so every other chart entry is exactly 0:
  s = 1 at every step, and the lemma holds for *every length*.
- NS, NS+S: entries of sub-runs that start off the run are not 0. In exact arithmetic on the
  float weights, each is at most P̄·S̄^{t−i−1} (its first action pushes from a row the run does not
  occupy; each later step multiplies the total weight of the continuations by at most a row
  sum, and the run's row sums to 1). The chart evaluates sums and products of non-negative
  floats, each rounding multiplying by at most 1 + u, along at most d(t) = QN·t(t+1)/2 + 2t
  roundings (a column is the replace and pop products of earlier columns: sums of QN and
  (t − 2)·QN terms). So every entry is ≤ P̄·S̄^{t−1}·(1 + u)^{d(t)} ≤ 1 − 2⁻²⁰ (the slack
  covers subnormal rounding) up to the largest such t, L: the certificate holds for every
  length ≤ L (with a window D, ≤ min(L, D)).

*Window (§5.1).* With D, γ[i→t] = 0 for t − i > D, so the run dies once its top is older than D:
the certificate covers lengths ≤ D (every top of a string of length ≤ D was pushed at a step
p ≥ 1 with t − p < D).

*Readout (§2.1).* y_t = W_hy h_t + b_hy is enclosed from the box of h_t and must be strictly
positive exactly when the machine accepts after the step (final state; empty stack: the network
top is ⊥̂), also at t = 0 (h_0 = 0).

*Induction.* The initial state is in the boxes with the exact reading of (q0, ⊥₀) (Eq. 3);
Lemmas 0, 1, A and 2 map a state of κ into the boxes of a successor κ' in the fixpoint, with
the reading exact and the output the machine's. Hence agreement at every step on every unpadded
string all of whose prefixes are live, for every length (NS+U, RNS) or every length ≤ L (NS,
NS+S). The certificate also runs the module's own stack (`chart_check`) on saturated action
sequences of a few steps and checks each reading bit for bit against the discrete run.

*Assumed* (stated in the certificate's notes): the kernel model of `pdanet.verify.intervals`
for σ and tanh (and, for the NS / NS+S row bounds only, the same ulp model for exp and log);
exp underflow as above (float32: scanned on this build's CPU kernels; float64: assumed and
sampled); torch.logsumexp = max + log Σ exp(x − max) and log(1) = 0 (checked on this build).
The proof is about the module's CPU arithmetic in its dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.realtime import RealtimeTable, table
from pdanet.errors import CertificationError, CompileError
from pdanet.models.dusell_chiang import NSController
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
)

#: the first radii of the controller's state boxes around 1 (units on) and 0 (units off); a
#: case that leaves them doubles the radius it needs, up to `RHO_MAX`
RHO_ON, RHO_OFF, RHO_MAX = 2.0**-16, 2.0**-100, 2.0**-6
#: float64 exp is assumed to return exactly 0 below −this (e^{−746} < 2^−1075), and sampled
F64_EXP_ZERO = 746.0
#: the slack kept below 1 by the NS / NS+S chart bound (covers subnormal rounding)
CHART_SLACK = 2.0**-20
NAN = (math.nan, math.nan)


# --- the machine and the network-stack encoding (Lemma 0) --------------------------------------
@dataclass(frozen=True)
class _Machine:
    tab: RealtimeTable
    states: tuple
    symbols: tuple
    G: int

    @property
    def N(self) -> int:
        return 2 * self.G + 2

    def top(self, n: int) -> int:
        """The machine's top code (G: ⊥) for network top n."""
        G = self.G
        if n == 0 or n == 2 * G + 1:
            return G
        return n - 1 if n <= G else n - G - 1

    def name(self, n: int) -> str:
        G = self.G
        if n == 0:
            return "⊥₀"
        if n == 2 * G + 1:
            return "⊥̂"
        return f"Z{n - 1}" if n <= G else f"Ẑ{n - G - 1}"


def _machine(machine) -> _Machine:
    try:
        tab = table(machine)
    except CompileError as exc:
        raise CertificationError(str(exc)) from None
    if tab.kind != "stack" or tab.output != "accept":
        raise CertificationError(f"{machine!r} is not a real-time recogniser with a stack; the "
                                 "DuSell & Chiang certificate covers DPDA and DFA recognisers")
    return _Machine(tab, tuple(machine.states), tuple(machine.alphabet.symbols), tab.G)


def network_op(mc: _Machine, n: int, move: tuple) -> tuple[int, int | None]:
    """(op index v, new top or None for "the cell below") of the network move that simulates
    machine move ``move`` = (p2, out, pop_end, push_end, y) on network top n (Lemma 0). Op
    indices: push s → s, replace s → N + s, pop → 2N. CertificationError where the machine
    pops or replaces ⊥ (the paper's bottom cannot)."""
    G, N = mc.G, mc.N
    _p2, _out, pe, ue, y = move
    op = {(None, None): "noop", (None, "top"): "push", ("top", None): "pop",
          ("top", "top"): "replace"}[(pe, ue)]
    hat = 2 * G + 1
    marked = lambda c: G + 1 + c
    plain = lambda c: 1 + c
    if n in (0, hat):
        if op not in ("noop", "push"):
            raise CertificationError(f"the machine does {op} on ⊥; the paper's stack keeps ⊥ "
                                     "at the bottom (noop or push on it only)")
        s = hat if op == "noop" else marked(y)
        return (s, s) if n == 0 else (N + s, s)
    is_marked = n > G
    if op == "noop":
        return N + n, n
    if op == "push":
        return plain(y), plain(y)
    if op == "replace":
        s = marked(y) if is_marked else plain(y)
        return N + s, s
    return (N + hat, hat) if is_marked else (2 * N, None)


# --- kernel facts ------------------------------------------------------------------------------
def exp_zero(dtype: torch.dtype, reach: float) -> tuple[float, float, str]:
    """(a*, U, how): the dtype's ``torch.exp`` returns exactly 0 at every x with −U ≤ x ≤ −a*
    (a* = inf: nothing claimed). float32: every float evaluated on this build
    (`paper_init.exp_underflow`); float64: assumed for a* = `F64_EXP_ZERO` (the exact value is
    below half the least subnormal) and sampled here (4,096 consecutive floats from −a* down and
    4,096 geometrically spaced ones to −U, contiguous and strided), with exp(0) = 1,
    exp(−inf) = 0 and log(1) = 0."""
    if dtype == torch.float32:
        from pdanet.learning.paper_init import exp_underflow

        a, U = exp_underflow(reach)
        return a, U, "every float32 of [a*, U] evaluated on this build"
    if dtype != torch.float64 or not reach <= 2.0**13:
        return math.inf, 0.0, "not claimed"
    U = 2.0 ** max(10, math.ceil(math.log2(max(reach, 1.0))))
    bits = np.float64(-F64_EXP_ZERO).view(np.int64) + np.arange(4096, dtype=np.int64)
    xs = np.concatenate([bits.view(np.float64), -np.exp(np.linspace(math.log(F64_EXP_ZERO),
                                                                     math.log(U), 4096))])
    x = torch.as_tensor(xs)
    ok = bool((torch.exp(x) == 0).all()) and bool((torch.exp(x[::2]) == 0).all())
    special = torch.tensor([0.0, -0.0, -math.inf], dtype=torch.float64)
    ok &= torch.equal(torch.exp(special), torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64))
    if not ok:
        return math.inf, 0.0, "not claimed (a sampled float64 exp did not underflow)"
    return F64_EXP_ZERO, U, "assumed for float64 (e^-746 < 2^-1075) and sampled on this build"


def _logsumexp_ok(dtype: torch.dtype, gap: float) -> bool:
    """Lemma A's facts about torch.logsumexp and log on this build: log(1) = 0 (contiguous and
    strided), and the logsumexp of a row whose other entries lie ``gap`` below its maximum is
    that maximum, exactly."""
    one = torch.ones(8, dtype=dtype)
    if not (bool((torch.log(one) == 0).all()) and bool((torch.log(one[::2]) == 0).all())):
        return False
    for top in (0.0, 1.5, -1536.0, 3120.25, 1e4):
        row = torch.tensor([[top, top - gap, top - gap * 2, top - gap]], dtype=dtype)
        if float(torch.logsumexp(row, dim=1)[0]) != float(row[0, 0]):
            return False
    return True


def affine_tight(W: np.ndarray, x: iv.Interval, b: np.ndarray, dtype: torch.dtype
                 ) -> iv.Interval:
    """`intervals.affine` with a second rounding bound for sums dominated by one term (the
    bias of a head whose inputs are nearly 0): in any order of summation, each addition of two
    floats moves by at most the smaller operand, and the operand without the largest term is
    at most the sum of the other terms' magnitudes (times (1 + γ_n) for its own roundings), so
    the error is ≤ n·(1 + γ_n)·(1 + u)·Σ_{k≠k*}|t_k| + u·|t_k*| (the largest term's own product
    rounding; a fused multiply-add is covered the same way) + n·tiny, k* the largest term. The
    smaller of the two bounds is used. ``x`` is one vector."""
    std = iv.affine(W, x, b, dtype)
    u = iv.unit_roundoff(dtype)
    n = W.shape[1] + 1
    terms = np.abs(W) * x.mag                                     # x: one vector
    absx = terms.sum(-1)
    big = np.maximum(terms.max(-1), np.abs(b))
    rest = absx + np.abs(b) - big
    err = (n * (1 + iv.gamma(n, u)) * (1 + u) * rest + u * terms.max(-1)) * (1 + 2.0**-40) \
        + n * iv.tiny(dtype)
    Wp, Wn = np.maximum(W, 0), np.minimum(W, 0)
    lo = x.lo @ Wp.T + x.hi @ Wn.T + b
    hi = x.hi @ Wp.T + x.lo @ Wn.T + b
    f64 = iv.gamma(n + 2, 2.0**-53) * (absx + np.abs(b))          # this float64 evaluation
    alt = iv.Interval(lo, hi).widen(err + f64)
    return iv.Interval(np.maximum(std.lo, alt.lo), np.minimum(std.hi, alt.hi))


# --- Lemma 2's bound for the normalised variants -----------------------------------------------
def chart_length(P: float, S: float, QN: int, dtype: torch.dtype, window: int | None) -> int:
    """The largest L with P·S^(t−1)·(1 + u)^d(t) ≤ 1 − 2⁻²⁰ for every t ≤ L, d(t) = QN·t(t+1)/2
    + 2t (module docstring, Lemma 2; ``window`` D caps it); 0 when even t = 1 fails."""
    u = iv.unit_roundoff(dtype)
    if not (P >= 0 and math.isfinite(P) and S >= 1 and math.isfinite(S)):
        return 0
    P = max(P, 1e-300)
    budget = math.log1p(-CHART_SLACK) - math.log(P)
    lu, ls = math.log1p(u), math.log(max(S, 1.0))

    def fits(t: int) -> bool:
        return (t - 1) * ls + (QN * t * (t + 1) / 2 + 2 * t) * lu <= budget

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi) and hi < 2**62:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo if window is None else min(lo, window)


def _other_rows_bounds(lo: np.ndarray, hi: np.ndarray, dtype: torch.dtype, N: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Rows (R, M) of log-action boxes (Eq. 1's rows, M = Q(2N+1)): upper bounds of (row sum,
    push mass) of the float weights exp(fl(ℓ − logsumexp(row)) − 0) under the ulp model for
    exp and log (`intervals.ACTIVATION_ULPS`), each rounding bounded by u (Lemma A)."""
    u, tiny = iv.unit_roundoff(dtype), iv.tiny(dtype)
    kap = iv.ACTIVATION_ULPS * 2 * u + 4 * 2.0**-53
    M_lo, M_hi = lo.max(1, keepdims=True), hi.max(1, keepdims=True)
    d_lo = np.minimum(lo - M_hi, 0.0) * (1 + u) - tiny           # fl(ℓ − max) ≥ this
    e_lo = np.maximum(np.exp(d_lo) * (1 - kap) - tiny, 0.0)
    n = lo.shape[1]
    s_lo = np.maximum(e_lo.sum(1, keepdims=True) * (1 - iv.gamma(n, u) - 2.0**-50), 1.0)
    lg_lo = np.maximum(np.log(s_lo) * (1 - kap) - tiny, 0.0)     # log of a sum ≥ 1: ≥ 0
    lse_lo = (lg_lo + M_lo) - u * np.abs(lg_lo + M_lo) - 2.0**-50 * np.abs(lg_lo + M_lo)
    y_hi = np.minimum(hi - lse_lo + (u + 2.0**-50) * np.abs(hi - lse_lo), 0.0)
    d_hi = np.exp(y_hi) * (1 + kap) + tiny
    push = (np.arange(n) % (2 * N + 1)) < N
    grow = 1 + 2.0**-40
    return d_hi.sum(1) * grow, d_hi[:, push].sum(1) * grow


# --- the module's stack on saturated actions ---------------------------------------------------
def chart_check(net: CompiledNetwork, steps: int = 6, samples: int = 256, seed: int = 0
                ) -> str | None:
    """Run the network's own stack (``net.module.stack``, in its dtype) on ``samples`` random
    sequences of ``steps`` network moves that the discrete stack allows (push on any top; replace
    and pop only above ⊥₀; pop only onto a cell above ⊥₀), with log actions as Lemma A leaves
    them — the move's entry 0, every other entry of its row 4,000 below; the other rows all
    equal (uniform after Eq. 1) for NS/NS+S, 4,000 below for NS+U/RNS — and compare every
    reading, bit for bit, with the one-hot of the discrete run's (state, top) (top only for
    NS/NS+U). Returns None, or a description of the first mismatch."""
    mod = net.module
    stack = mod.stack
    Q, N, dt = mod.num_states, mod.num_stack, net.dtype
    A = 2 * N + 1
    want_cfg = ("paper", mod.mode, mod.normalize, mod.window, mod.start, Q, N)
    got_cfg = (stack.bottom, stack.mode, stack.normalize, stack.window, stack.start,
               stack.num_states, stack.num_stack)
    if got_cfg != want_cfg:
        return (f"the module's stack is (bottom, mode, normalize, window, start, Q, N) = "
                f"{got_cfg}; the lemmas assume {want_cfg}")
    rng = np.random.default_rng(seed)
    B = samples
    if mod.window is not None:           # §5.1: beyond D steps the run may die by design
        steps = min(steps, mod.window)
    cells = [[0] for _ in range(B)]
    q = np.full(B, mod.start)
    state = stack.initial_state(B, dt)
    rows = torch.arange(B)
    r0 = torch.zeros_like(state.reading)
    if mod.mode == "rns":
        r0[:, mod.start, 0] = 1.0
    else:
        r0[:, 0] = 1.0
    if not torch.equal(state.reading, r0):
        return "the module's stack does not read exactly the one-hot of (q0, ⊥₀) at t = 0 (Eq. 3)"
    for t in range(steps):
        la = torch.full((B, Q, N, Q, A), -4000.0, dtype=dt)
        if mod.normalize:
            la[:] = -1.0
        moves = []
        for b in range(B):
            top = cells[b][-1]
            choices = [("push", s) for s in range(1, N)]
            if len(cells[b]) > 1:
                choices += [("replace", s) for s in range(1, N)]
            if len(cells[b]) > 2:
                choices.append(("pop", None))
            kind, s = choices[rng.integers(len(choices))]
            r = int(rng.integers(Q))
            v = s if kind == "push" else (N + s if kind == "replace" else 2 * N)
            moves.append((top, r, v, kind, s))
        for b, (top, r, v, _k, _s) in enumerate(moves):
            la[b, q[b], top, :, :] = -4000.0
            la[b, q[b], top, r, v] = 0.0
        state, reading = stack.step(state, la)
        for b, (_top, r, _v, kind, s) in enumerate(moves):
            if kind == "push":
                cells[b].append(s)
            elif kind == "replace":
                cells[b][-1] = s
            else:
                cells[b].pop()
            q[b] = r
        want = torch.zeros_like(reading)
        tops = torch.as_tensor([c[-1] for c in cells])
        if mod.mode == "rns":
            want[rows, torch.as_tensor(q), tops] = 1.0
        else:
            want[rows, tops] = 1.0
        if not torch.equal(reading, want):
            b = int(torch.nonzero((reading != want).flatten(1).any(1))[0])
            return (f"the module's stack read {reading[b].flatten().tolist()} after {t + 1} "
                    f"saturated steps (network stack {cells[b]}, state {int(q[b])}); the "
                    "discrete run reads its one-hot")
    return None


# --- the certificate ---------------------------------------------------------------------------
def certify_dusell_chiang(machine, net: CompiledNetwork, dtype: torch.dtype | None = None,
                          kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """Prove that a compiled DuSell & Chiang network (`NSController`) agrees with `machine` on
    every live string: every length for NS+U and RNS, every length ≤ a computed L for NS and
    NS+S, ≤ D with a window (module docstring). The weights are read as they are; a NaN or
    infinite weight gives a NOT CERTIFIED certificate naming it, and every check is an
    inequality that NaN fails. ``kernel`` is the σ/tanh model (`intervals.KERNEL_MODELS`; the
    ulp model suffices here). CertificationError for another kind of network or a machine the
    encoding does not cover."""
    check_arguments(kernel=kernel, dtype=dtype, progress=progress)
    abst = net.abstraction
    if not isinstance(abst, NSController):
        raise CertificationError(f"certify_dusell_chiang needs a DuSell & Chiang network, got "
                                 f"{net.construction}")
    mc = _machine(machine)
    if (net.module.num_stack, net.module.num_states, net.module.num_symbols) != (
            mc.N, mc.tab.Q, mc.tab.K):
        raise CertificationError(
            f"the network has {net.module.num_stack} stack symbols, {net.module.num_states} "
            f"states and {net.module.num_symbols} inputs; the machine needs 2G + 2 = {mc.N}, "
            f"{mc.tab.Q} and {mc.tab.K}: certify it with the machine it was compiled from")
    run = begin(machine, net, dtype, kernel)
    if isinstance(run, Certificate):
        return run
    return _prove(mc, run, progress)


def _linear(layer: torch.nn.Linear) -> tuple[np.ndarray, np.ndarray]:
    """An affine head's (weight, bias) in float64 (exact copies of the dtype's floats)."""
    return (layer.weight.detach().cpu().double().numpy(),
            layer.bias.detach().cpu().double().numpy())


@dataclass(frozen=True)
class _Escape:
    """A case whose cell or output left its box: which box ("on"/"off"), by how much."""

    box: str
    dev: float
    failing: FailingCase


def _prove(mc: _Machine, run: Run, progress: Progress | None) -> Certificate:
    """Lemma 1's boxes by a small fixpoint on their two radii: start from (`RHO_ON`,
    `RHO_OFF`); a case that leaves a box widens that radius to twice what it needed (a power of
    two), up to `RHO_MAX`, and the induction starts again."""
    rho = {"on": RHO_ON, "off": RHO_OFF}
    for _ in range(40):
        out = _attempt(mc, run, progress, rho["on"], rho["off"])
        if isinstance(out, Certificate):
            return out
        need = 2.0 ** math.ceil(math.log2(max(2 * out.dev, 2 * rho[out.box])))
        if not need <= RHO_MAX:
            return _attempt(mc, run, progress, rho["on"], rho["off"], final=True)
        rho[out.box] = need
    return _attempt(mc, run, progress, rho["on"], rho["off"], final=True)


def _attempt(mc: _Machine, run: Run, progress: Progress | None, rho_on: float, rho_off: float,
             final: bool = False) -> Certificate | _Escape:
    net, kernel, dtype = run.net, run.kernel, run.dtype
    mod = net.module
    tab = mc.tab
    Q, N, K, H = mod.num_states, mod.num_stack, mod.num_symbols, mod.hidden
    A = 2 * N + 1
    R = mod.reading_size
    rns, normalize, window = mod.mode == "rns", mod.normalize, mod.window
    np64 = lambda t: t.detach().cpu().double().numpy()
    # the LSTM's parts as `run` adds them (§2.1): x_t's row, the bias b_ih + b_hh (one float of
    # the dtype, rounded once as the module rounds it), W_r and W_hh
    x_rows, bias, Wr, Whh = (np64(t) for t in mod._gate_parts())
    W_gate = np.concatenate([x_rows[:K].T, Wr.T, Whh.T], axis=1)   # (4H, K + R + H)
    b_gate = bias
    W_ha, b_ha = _linear(mod.actions)                               # Eq. 1: W_ha, b_ha
    W_hy, b_hy = _linear(mod.out)                                   # §2.1: W_hy, b_hy
    labels = tuple(getattr(net.abstraction, "labels", ()))
    label = lambda j: labels[j] if j < len(labels) else f"h{j}"
    C_on = iv.Interval(np.array([1.0 - rho_on]), np.array([1.0 + rho_on]))
    C_off = iv.Interval(np.array([-rho_off]), np.array([rho_off]))
    t_on = iv.tanh(C_on, dtype, "ulp")
    H_on = iv.Interval(np.array([(1 - rho_on) * t_on.lo[0]]),     # o ≥ 1 − ρ_on
                       np.array([t_on.hi[0] * (1 + 2.0**-20)]))
    h_off = rho_off * (1 + 2.0**-10) + 4 * iv.tiny(dtype)         # |σ(o)·tanh(c)|, c ∈ C_off
    H_off = iv.Interval(np.array([-h_off]), np.array([h_off]))
    notes = ["agreement covers every unpadded string whose prefixes are all live",
             (f"controller state as boxes: c within {rho_on:.3g} of 1 (on) and {rho_off:.3g} of "
              "0 (off), h = σ(o)·tanh(c) within its enclosure "
             "of those (Lemma 1); stack weights and readings exact (Lemmas A, 2)")]
    stats = {"gap": math.inf, "readout": math.inf, "P": 0.0, "S": 1.0, "reach": 0.0}
    done: set = set()

    def result(ok: bool, failing: FailingCase | None, n_configs: int, *, all_lengths=None,
               max_length=None, more=()) -> Certificate:
        return replace(run, configs=n_configs).certificate(
            ok, eps=0.0, state_margin=stats["gap"] if ok else 0.0,
            readout_margin=stats["readout"] if ok else 0.0, cases=len(done), failing=failing,
            all_lengths=all_lengths, max_length=max_length, extra=tuple(notes) + tuple(more))

    def desc(node) -> str:
        q, n, S = node
        on = ", ".join(label(j) for j in sorted(S)) or "none"
        return f"state {mc.states[q]!r}, network top {mc.name(n)}, units on: {on}"

    def boxes(S) -> tuple[iv.Interval, iv.Interval]:
        on = np.zeros(H, dtype=bool)
        on[list(S)] = True
        c = iv.Interval(np.where(on, C_on.lo[0], C_off.lo[0]), np.where(on, C_on.hi[0],
                                                                        C_off.hi[0]))
        h = iv.Interval(np.where(on, H_on.lo[0], H_off.lo[0]), np.where(on, H_on.hi[0],
                                                                        H_off.hi[0]))
        return c, h

    def reading(q: int, n: int) -> np.ndarray:
        r = np.zeros(R)
        r[q * N + n if rns else n] = 1.0
        return r

    def accepts(q2: int, n2: int) -> bool:
        return n2 == 2 * mc.G + 1 if tab.empty_stack else bool(tab.accepting[q2])

    def readout(node, h: iv.Interval, want: bool, sym) -> FailingCase | None:
        y = iv.affine(W_hy, h, b_hy, dtype)                    # §2.1: y_t = W_hy h_t + b_hy
        slack = float(y.lo[0]) if want else float(-y.hi[0])
        stats["readout"] = min(stats["readout"], slack)
        if not slack > 0:
            return FailingCase("readout", desc(node), sym, 0, "acceptance logit y",
                               (float(y.lo[0]), float(y.hi[0])),
                               (0.0, math.inf) if want else (-math.inf, 0.0))
        return None

    # the initial state: h_0 = c_0 = 0 (in the off boxes), reading of (q0, ⊥₀)
    start = (tab.q0, 0, frozenset())
    zero = iv.Interval.point(np.zeros(H))
    fc = readout(start, zero, True if tab.empty_stack else bool(tab.accepting[tab.q0]), None)
    if fc is not None:
        return result(False, fc, 1)
    if (mod.start, ) != (tab.q0, ):
        return result(False, FailingCase("initial", "the stack's start state", None, -1,
                                         "start", (mod.start, mod.start), (tab.q0, tab.q0)), 1)

    def step(node, a: int):
        """Lemma 1 and Lemma A for one case: (q2, v, new top or None, S') or a FailingCase."""
        q, n, S = node
        sym = str(mc.symbols[a])
        mv = mc.tab.trans.get((q, a, mc.top(n)))
        if mv is None:
            return None
        v, n2 = network_op(mc, n, mv)
        q2 = mv[0]
        c, h = boxes(S) if S or node != start else (zero, zero)
        x = np.zeros(K)
        x[a] = 1.0
        xin = iv.Interval(np.concatenate([x, reading(q, n), h.lo]),
                          np.concatenate([x, reading(q, n), h.hi]))
        z = iv.affine(W_gate, xin, b_gate, dtype)           # §2.1: the LSTM's gates
        zi, zf, zg, zo = (z[k * H:(k + 1) * H] for k in range(4))        # §2.1: i, f, g, o
        gi, gf = iv.sigmoid(zi, dtype, kernel), iv.sigmoid(zf, dtype, kernel)
        gg, go = iv.tanh(zg, dtype, kernel), iv.sigmoid(zo, dtype, kernel)
        c2 = iv.lstm_cell(gf, c, gi, gg, dtype)
        h2 = iv.mul(go, iv.tanh(c2, dtype, kernel), dtype)
        on = c2.within(iv.Interval(np.full(H, C_on.lo[0]), np.full(H, C_on.hi[0])))
        off = c2.within(iv.Interval(np.full(H, C_off.lo[0]), np.full(H, C_off.hi[0])))
        bad = ~(on | off)
        if bad.any():
            u = int(np.nonzero(bad)[0][0])
            up = c2.hi[u] > 0.5
            fc = FailingCase("step", desc(node), sym, u, f"cell c of {label(u)}",
                             (float(c2.lo[u]), float(c2.hi[u])),
                             (float(C_on.lo[0]), float(C_on.hi[0])) if up
                             else (float(C_off.lo[0]), float(C_off.hi[0])))
            dev = float(max(abs(c2.lo[u] - 1), abs(c2.hi[u] - 1)) if up else c2.mag[u])
            return fc if final else _Escape("on" if up else "off", dev, fc)
        hl = np.where(on, H_on.lo[0], H_off.lo[0])
        hh = np.where(on, H_on.hi[0], H_off.hi[0])
        bad = ~((h2.lo >= hl) & (h2.hi <= hh))
        if bad.any():
            u = int(np.nonzero(bad)[0][0])
            fc = FailingCase("step", desc(node), sym, u,
                             f"h = σ(o)·tanh(c) of {label(u)} (output gate not saturated?)",
                             (float(h2.lo[u]), float(h2.hi[u])), (float(hl[u]), float(hh[u])))
            if on[u]:
                dev = float(1 - h2.lo[u] / t_on.lo[0])
                return fc if final else _Escape("on", dev, fc)
            return fc if final else _Escape("off", float(h2.mag[u]), fc)
        S2 = frozenset(int(j) for j in np.nonzero(on)[0])
        h2 = iv.Interval(hl, hh)                         # the successor's box (Lemma 1)
        # Lemma A: the action head
        ell = affine_tight(W_ha, h2, b_ha, dtype)                # Eq. 1 / §3.1: W_ha h_t + b_ha
        row = q * N + n
        M = row * (Q * A) + q2 * A + v
        lo_M, hi_M = float(ell.lo[M]), float(ell.hi[M])
        others_hi = ell.hi.copy()
        others_hi[M] = -math.inf
        scope = slice(row * Q * A, (row + 1) * Q * A) if normalize else slice(None)
        g_hi = float(others_hi[scope].max())
        gap_ub = float(iv._up(np.array(g_hi - lo_M)))            # ≥ every ℓ' − m (real)
        others_lo = ell.lo[scope].copy()
        others_lo[M - (scope.start or 0)] = math.inf
        low = float(iv._down(np.array(float(others_lo.min()) - hi_M)))   # ≤ every ℓ' − m
        stats["reach"] = max(stats["reach"], -low)
        a_star, U, _ = exp_zero(dtype, -low)
        stats["gap"] = min(stats["gap"], -gap_ub - a_star)
        if not (lo_M > g_hi and gap_ub <= -a_star and low >= -U):
            what = ("every other log action of the step (§3.1)" if not normalize
                    else "every other log action of its row (Eq. 1)")
            return FailingCase("step", desc(node), sym, M,
                               f"log action of the move (v = {v}) against {what}",
                               (lo_M, hi_M), (g_hi + a_star, math.inf))
        if normalize:                                     # the rows the run does not occupy
            rows_lo = np.delete(ell.lo.reshape(Q * N, Q * A), row, axis=0)
            rows_hi = np.delete(ell.hi.reshape(Q * N, Q * A), row, axis=0)
            if rows_lo.size:
                Ssum, Pm = _other_rows_bounds(rows_lo, rows_hi, dtype, N)
                stats["S"] = max(stats["S"], float(Ssum.max()))
                stats["P"] = max(stats["P"], float(Pm.max()))
        return q2, v, n2, S2, h2

    seen = {start}
    frontier = [start]
    cache: dict = {}
    written: set[int] = set()
    prev_written = -1
    while frontier or len(written) != prev_written:
        if not frontier:
            prev_written = len(written)
            frontier = sorted(seen, key=repr)
        node = frontier.pop()
        for a in range(K):
            if (node, a) not in cache:
                out = step(node, a)
                cache[node, a] = out
                if out is not None:
                    done.add((node, a))
                    if len(done) % 128 == 0:
                        notify(progress, "dusell_chiang cases", len(done),
                               max(len(done), len(seen) * K))
            out = cache[node, a]
            if out is None:
                continue
            if isinstance(out, FailingCase):
                return result(False, out, len(seen))
            if isinstance(out, _Escape):
                return out
            q2, v, n2, S2, h2 = out
            if n2 is not None and n2 != 2 * mc.G + 1 and v != 2 * N:
                written.add(n2)
            tops = [n2] if n2 is not None else sorted(written)
            for t2 in tops:
                fc = readout((q2, t2, S2), h2, accepts(q2, t2), str(mc.symbols[a]))
                if fc is not None:
                    return result(False, fc, len(seen))
                nxt = (q2, t2, S2)
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
    notify(progress, "dusell_chiang cases", len(done), len(done))
    a_star, U, how = exp_zero(dtype, stats["reach"])
    notes.append(f"exp(x) = 0 exactly for −{U:g} ≤ x ≤ −{a_star:.6g}: {how}")
    if normalize and not _logsumexp_ok(dtype, max(a_star, 1.0) * 2):
        return result(False, FailingCase("kernel", "torch.logsumexp / log", None, -1,
                                         "logsumexp of a saturated row", NAN, NAN), len(seen))
    msg = chart_check(net)
    if msg is not None:
        return result(False, FailingCase("memory", msg, None, -1, "NS stack module", NAN, NAN),
                      len(seen))
    notes.append("the module's stack checked bit-exact against the discrete run on saturated "
                 "action sequences of 6 steps")
    if not normalize:
        if window is None:
            return result(True, None, len(seen))
        notes.append(f"window D = {window} (§5.1): the run dies once its top is older than D")
        return result(True, None, len(seen), all_lengths=False, max_length=window)
    L = chart_length(stats["P"], stats["S"], Q * N, dtype, window)
    notes.append(f"Eq. 1 leaves the rows the run does not occupy nonzero: their push mass ≤ "
                 f"{stats['P']:.6g}, row sums ≤ {stats['S']:.9g}; the chart's column maximum "
                 f"stays the run's 1 for every length ≤ {L:,} (Lemma 2)")
    if L < 1:
        return result(False, FailingCase("chart", "rows the run does not occupy (Eq. 1)", None,
                                         -1, "push mass P̄", (stats["P"], stats["P"]),
                                         (0.0, 1.0)), len(seen))
    return result(True, None, len(seen), all_lengths=False, max_length=L)


def certify(machine, net: CompiledNetwork, *, dtype: torch.dtype | None = None,
            eps: float | None = None, max_configs: int = 200_000, chunk: int = 1024,
            kernel: str = "ulp", progress: Progress | None = None) -> Certificate:
    """An `NSController` network: `certify_dusell_chiang` (the state is a fixed box: ``eps``,
    ``max_configs`` and ``chunk`` do not apply). Arguments are checked by
    `pdanet.verify.certify.certify`."""
    check_pair(machine, net)
    return certify_dusell_chiang(machine, net, dtype=dtype, kernel=kernel, progress=progress)


__all__ = ["certify", "certify_dusell_chiang", "chart_check", "chart_length", "exp_zero",
           "network_op"]

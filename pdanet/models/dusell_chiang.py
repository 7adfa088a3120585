"""DuSell & Chiang (2021), "Learning hierarchical structures with differentiable nondeterministic
stacks" (the Renormalizing NS-RNN; equation numbers are this paper's): an LSTM controller driving
the nondeterministic stack, as a trainable module, with compile functions that emit weights for
exactly this module (models ``"dusell_chiang_ns"``, ``"dusell_chiang_ns_s"``,
``"dusell_chiang_ns_u"``, ``"dusell_chiang_rns"``).

**The model** (`DuSellChiangRNN`). At step t (§2.1, unnumbered):

    (h_t, c_t) = LSTM((h_{t−1}, c_{t−1}), [x_t; r_{t−1}]),   h_0 = c_0 = 0,
    Δ[t] = softmax_{q,x}(W_ha h_t + b_ha)   (Eq. 1; NS and NS+S),
    Δ[t] = exp(W_ha h_t + b_ha)             (§3.1; NS+U and RNS = NS+S+U),
    γ, α by Eqs. 2–4 on Δ[1..t],   y_t = W_hy h_t + b_hy,

and the reading r_t is Eq. 5 (the distribution of the top stack symbol: NS, NS+U) or §3.2's
joint distribution over (state, top) (NS+S, RNS), zeros where no run survives. x_t is the
one-hot input (padding −1: the zero vector; positions past a row's length are unspecified),
r_0 the reading of α[0] (Eq. 3), y_0 = b_hy. Δ[t] comes from h_t and acts at step t, as in
Eq. 2, so r_t already reflects x_t. The stack follows the paper's equations for its
bottom (``bottom="paper"`` of `pdanet.constructions.stacks.ns`: stack symbol 0 is ⊥, the initial
⊥ is never replaced nor popped, Eq. 4 sums from i = 0 as the authors' code does); ``window`` is
D of §5.1 (γ[i→t] = 0 for t − i > D). The stack is the module's ``stack``, a
`pdanet.constructions.stacks.ns.NondeterministicStack` (Eq. 1 or exp, Eqs. 2–5), run one step
at a time inside the controller loop through its `NondeterministicStack.step` (the controller
reads r_{t−1} before it emits Δ[t]), with the same scaled linear arithmetic and the same
numbers as its whole-sequence forward: every γ column and α are kept divided by a running
per-step normaliser (constants for autograd; readings and gradients are those of the
equations, checked against `pdanet.constructions.stacks.reference_ns`). Time per step
O(B·Q³Γ²·t²) (O(B·Q³Γ²·D²) with a window): the model is cubic in the length, as the paper says
(§2.4). Memory without gradients O(B·Q²Γ²·T²) (O(B·Q²Γ²·D²) with a window); with gradients
autograd also keeps each step's pop operand, O(B·Q²Γ²·T³/3) in all (O(B·Q²Γ²·T·D²)).

**Compiled** (`compile_dusell_chiang_ns`, …): a real-time DPDA (final-state or empty-stack
acceptance) or a DFA recogniser, every move one of noop/push/pop/replace.

- Stack symbols (N = 2G + 2 for a machine with G symbols besides ⊥): 0 = the paper's initial
  ⊥₀, 1..G the machine's symbols Z, G+1..2G their marked copies Ẑ, 2G+1 = ⊥̂ (the machine's
  empty stack). The machine stack ⊥ Z₁ … Z_k is the network stack ⊥₀ Ẑ₁ Z₂ … Z_k (⊥₀ ⊥̂ when
  k = 0): the lowest machine symbol is marked, so that no run ever needs to pop back to ⊥₀ (the
  paper's equations kill such runs). A machine move becomes one network operation: on ⊥₀
  (only at step 1) noop → push ⊥̂, push y → push ŷ; on ⊥̂ noop → replace ⊥̂, push y → replace by
  ŷ; on Z noop → replace Z, push y → push y, replace by y → y, pop → pop; on Ẑ noop → replace Ẑ,
  push y → push y, replace by y → ŷ, pop → replace by ⊥̂. The NS stack's states are the
  machine's.
- Hidden unit j stands for one network transition (q, a, n) (state q, input a, network top n).
  Gates f = σ(−β) = 0, g = tanh(β) = 1, o = σ(β) = 1, so c_t,j = i_j ∈ {0, 1} and h_t,j ∈
  {0, τ}, τ = tanh 1. Input gate with the (state, top) reading (NS+S, RNS):
  i_j = σ(β(x_t[a] + r_{t−1}[(q, n)] − 3/2)). With the top-only reading (NS, NS+U) the reading
  cannot show the state, so the controller keeps it (an extra recurrence, no extra unit):
  i_j = σ(β(x_t[a] + r_{t−1}[n] + Σ_{i→q} h_{t−1,i} − 19/8)) (units i whose move enters q),
  and for n = ⊥₀ (only on top at t = 0, so it marks the start state) σ(β(x_t[a] + r_{t−1}[⊥₀]
  − 3/2)).
- Action head: W_ha has a 1 from unit j to the entry (q, n → r, v) of its move, b_ha = −3/8:
  the move's logit is β(τ − 3/8), every other entry −3/8·β. With β = 4096 the gap exceeds 3000,
  so after Eq. 1 (or the max-shift of exp) every other action weighs exactly 0 and the move 1
  in float32 and float64: one run survives and the reading is exactly one-hot.
- Readout y_t = β(Σ_j w_j h_t,j + b): b = 3/8 and w_j = −1 for moves into rejecting
  configurations when ε is accepted, else b = −3/8 and w_j = 1 for moves into accepting ones
  (empty-stack acceptance: moves leaving ⊥̂ on top). Accepted iff y_t > 0; margin 3/8.

``net.decode`` gives ``state`` (from the reading for NS+S/RNS; from the controller's units for
NS/NS+U) and ``top`` (the reading's top, Z and Ẑ both read as Z, ⊥₀ and ⊥̂ as ⊥), which
`pn.verify` compares with the machine at every step, with the output. A window D is exact while
every network top was pushed at most D steps earlier — every string of length ≤ D (⊥̂ is pushed
at step 1 and only replaced after, so an empty machine stack after step D + 1 dies);
``net.info["exact_for"]`` says so. A nondeterministic or weighted PDA compiles to target
``"ns_rnn"`` (exact log-weights, `pdanet.constructions.ns`); a transducer to ``"hao_lstm"``.

**Verification in O(1) per step.** `forward` costs O(T³) a string (Eqs. 2–4), so
`DuSellChiangRNN.forward_decoded` (what `pn.verify` runs) and `DuSellChiangRNN.forward_window`
run the same controller and heads with the stack kept as one run of symbol ids, proving at every
step that this is exact (every action row the run reads is exactly one-hot, so one run survives
and every reading is exactly its one-hot; see `DuSellChiangRNN._discrete`), and fall back to
`forward` (None for the window) where it is not. The compiled network of a DPDA carries a
``window_decoder``, with which `pn.verify` compares long strings by state, depth and the top
three cells in O(T): 1,000 Dyck-2 strings of length 2,000 verify in about 10 s of CPU time
(float32, one thread), where `forward` would need O(T³) time and O(T²) memory per string.

**A network out of that regime** (trained, perturbed: the actions are no longer exactly
one-hot) has only `forward` to give its values. `pn.verify` therefore runs
`DuSellChiangRNN.forward_bounded`: the symbol-id run per row up to its first step that is not
provably exact, then `forward` on each such row's longest prefix that fits the memory limit
and an operation budget (``full_run_work``), in batch order; it compares those positions only
and reports the first disagreement found there (decoded as for the compiled network: argmax of
the reading, the controller's strongest unit), or, where none, which steps the full model
checked and which it could not, with the memory it would need for them
(`pdanet.verify.report.Coverage`; such a report is not ``ok``). It never raises a
ResourceError for a long string.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp
import torch
from torch import nn

from pdanet import limits
from pdanet.automata.pda import PDA, DeterministicPushdown
from pdanet.constructions.abstraction import Abstraction
from pdanet.constructions.base import CompiledNetwork, ExactWeight, as_dtype, load_exact
from pdanet.constructions.realtime import RealtimeTable
from pdanet.constructions.realtime import table as realtime_table
from pdanet.constructions.stacks.ns import VARIANTS, NondeterministicStack
from pdanet.errors import CompileError, InputError, PdanetError, ResourceError

BETA = 4096
MARGIN = Fraction(3, 8)
TAU = sp.tanh(1)

# model suffix -> the stack variant of §4 (`NondeterministicStack.variant` names)
MODEL_VARIANTS = {"ns": "ns", "ns_s": "ns+s", "ns_u": "ns+u", "rns": "rns"}


@dataclass(frozen=True)
class DuSellChiangRun:
    """Everything one forward pass computed: ``h`` (B, T+1, H), ``reading`` (B, T+1, R),
    ``logits`` (B, T+1, O), ``log_actions`` (B, T, Q, N, Q, 2N+1) (W_ha h_t + b_ha, before
    Eq. 1 or exp), ``log_norm`` (B, T+1) log Σ_{r,y} α[t][r, y]."""

    h: torch.Tensor
    reading: torch.Tensor
    logits: torch.Tensor
    log_actions: torch.Tensor
    log_norm: torch.Tensor


@dataclass(frozen=True)
class BoundedRun:
    """What `DuSellChiangRNN.forward_bounded` computed for a batch of B rows.

    ``states`` (B, T+1, H+R) and ``logits`` (B, T+1, O) hold `forward`'s values at every
    position t ≤ ``checked[b]`` of row b, and unspecified values after it. ``lengths`` (B,):
    each row's number of symbols. ``exact`` (B,): positions t ≤ exact[b] come from the
    symbol-id run (exact by `DuSellChiangRNN._discrete_rows`); those in (exact[b], checked[b]]
    from `forward` itself, run on the row's first checked[b] symbols (``full`` (B,) marks the
    rows it ran on). Where checked[b] < lengths[b], positions after checked[b] were not
    computed: ``needed_bytes[b]`` and ``needed_work[b]`` say what `forward` would need for the
    whole row (its chart's bytes, its operations; 0 elsewhere) and ``reason`` why it was not
    run ("" when every row is checked to its end)."""

    states: torch.Tensor
    logits: torch.Tensor
    lengths: np.ndarray
    exact: np.ndarray
    checked: np.ndarray
    full: np.ndarray
    needed_bytes: np.ndarray
    needed_work: np.ndarray
    reason: str = ""


# default operation budget of one `forward_bounded` call's `forward` runs (about 10 s of CPU
# on one thread)
FULL_RUN_WORK = 2 * 10**9


class DuSellChiangRNN(nn.Module):
    """DuSell & Chiang (2021): an LSTM controller and the nondeterministic stack (module
    docstring). ``variant``: "ns", "ns+s", "ns+u" or "rns" (§4); ``num_states`` |Q| and
    ``num_stack`` |Γ| of the stack (symbol 0 is ⊥); ``window`` D (§5.1, None = unlimited);
    ``start`` the index of q0. Parameters: ``cell`` (an `nn.LSTMCell` on [x_t; r_{t−1}]),
    ``actions`` (W_ha, b_ha), ``out`` (W_hy, b_hy); random (PyTorch's) initialisation.

    ``forward(ids (B, T), −1 padding)`` → (states (B, T+1, H + R), logits (B, T+1, O)) with
    states[t] = [h_t; r_t] (R = |Γ| for NS/NS+U, |Q|·|Γ| for NS+S/RNS) and logits[t] = y_t.
    `run` returns everything (`DuSellChiangRun`). `forward_decoded` gives `forward`'s result
    with the stack kept as symbol ids where that is provably exact (O(1) a step; else
    `forward`), `forward_window` the top cells of that stack (None where not exact), and
    `forward_bounded` `forward`'s values per row as far as a memory and time budget reach
    (what `pn.verify` runs; a `BoundedRun`)."""

    def __init__(self, num_symbols: int, num_states: int, num_stack: int, variant: str = "rns",
                 hidden: int = 20, num_outputs: int = 1, window: int | None = None,
                 start: int = 0):
        super().__init__()
        if variant not in VARIANTS:
            raise InputError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")
        for name, val, least in (("num_symbols", num_symbols, 1), ("num_states", num_states, 1),
                                 ("num_stack", num_stack, 2), ("hidden", hidden, 1),
                                 ("num_outputs", num_outputs, 1)):
            if isinstance(val, bool) or not isinstance(val, int) or val < least:
                raise InputError(f"{name} must be an integer ≥ {least}, got {val!r}")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                                   or window < 1):
            raise InputError(f"window must be a positive integer or None, got {window!r}")
        if not (isinstance(start, int) and 0 <= start < num_states):
            raise InputError(f"start state index {start!r} is outside 0..{num_states - 1}")
        self.variant = variant
        self.mode, self.normalize = VARIANTS[variant]
        self.num_symbols, self.num_states, self.num_stack = num_symbols, num_states, num_stack
        self.hidden, self.window, self.start = hidden, window, start
        Q, N = num_states, num_stack
        self.reading_size = Q * N if self.mode == "rns" else N
        self.cell = nn.LSTMCell(num_symbols + self.reading_size, hidden)   # §2.1: LSTM([x; r])
        self.actions = nn.Linear(hidden, Q * N * Q * (2 * N + 1))          # Eq. 1: W_ha, b_ha
        self.out = nn.Linear(hidden, num_outputs)                          # §2.1: W_hy, b_hy
        # Eqs. 1–5 one step at a time (parameter-free; the paper's bottom)
        self.stack = NondeterministicStack.variant(variant, Q, N, window=window, start=start)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = self.run(ids)
        return torch.cat([r.h, r.reading], -1), r.logits

    def _checked(self, ids: Any) -> torch.Tensor:
        """``ids`` as a (B, T) integer tensor on the module's device; InputError otherwise."""
        ids = torch.as_tensor(ids)
        if ids.dim() != 2:
            raise InputError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        if ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise InputError(f"ids must be integer symbol indices, got {ids.dtype}")
        if ids.numel() and int(ids.max()) >= self.num_symbols:
            raise InputError(f"symbol index {int(ids.max())} is outside 0..{self.num_symbols - 1}"
                             " (−1 is padding)")
        return ids.to(self.actions.weight.device)

    def _gate_parts(self) -> tuple[torch.Tensor, ...]:
        """(x table, bias, W_r, W_hh): x_t one-hot (padding: zero), so its part of the LSTM's
        gates is a row of W_ih (row K: padding's zeros); the rest as `run` adds them."""
        K, H = self.num_symbols, self.hidden
        Wi = self.cell.weight_ih
        table = torch.cat([Wi[:, :K].T, Wi.new_zeros(1, 4 * H)])
        return table, self.cell.bias_ih + self.cell.bias_hh, Wi[:, K:].T, self.cell.weight_hh.T

    def run(self, ids: Any) -> DuSellChiangRun:
        W = self.actions.weight
        ids = self._checked(ids)
        B, T = ids.shape
        Q, N, H, K = self.num_states, self.num_stack, self.hidden, self.num_symbols
        table, bias, Wr, Whh = self._gate_parts()
        xpart = table[torch.where(ids < 0, K, ids)]
        h = W.new_zeros(B, H)                                              # h_0 = c_0 = 0
        c = W.new_zeros(B, H)
        span = T + 1 if self.window is None else min(T, self.window) + 1
        limits.check(f"the nondeterministic stack's chart for {B} strings of length {T}",
                     B * (T + 1) * span * (Q * N) ** 2 * W.element_size(), "max_bytes",
                     hint="run fewer strings at once (verify: a smaller batch_size) or a window")
        state = self.stack.initial_state(B, W.dtype, W.device)               # α[0] (Eq. 3)
        r = state.reading.reshape(B, -1)                                   # r_0 (Eq. 5 / §3.2)
        hs, rs, ys, acts, norms = [h], [r], [self.out(h)], [], [state.log_norm]
        for t in range(T):
            gates = xpart[:, t] + bias + r @ Wr + h @ Whh
            i, f, g, o = gates.chunk(4, 1)                                 # §2.1: LSTM
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            lact = self.actions(h).view(B, Q, N, Q, 2 * N + 1)             # W_ha h_t + b_ha
            state, r = self.stack.step(state, lact)      # Eq. 1 (or §3.1's exp), Eqs. 2–4
            r = r.reshape(B, -1)                                           # Eq. 5 / §3.2
            hs.append(h)
            rs.append(r)
            ys.append(self.out(h))                                         # y_t = W_hy h_t + b_hy
            acts.append(lact)
            norms.append(state.log_norm)
        log_actions = (torch.stack(acts, 1) if acts
                       else W.new_zeros(B, 0, Q, N, Q, 2 * N + 1))
        return DuSellChiangRun(torch.stack(hs, 1), torch.stack(rs, 1), torch.stack(ys, 1),
                               log_actions, torch.stack(norms, 1))

    # --- the stack as symbol ids (what pn.verify runs) --------------------------------------
    @torch.no_grad()
    def forward_decoded(self, ids: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward`'s (states, logits), computed with the stack kept as symbol ids where that
        is exact, which is what `pdanet.verify` runs: each step costs the controller, the heads
        and O(B) index updates, instead of Eqs. 2–4's O(t²) pop term. Exact under the
        conditions checked at every step (`_discrete`, whose docstring gives the argument);
        where one fails, this returns `forward(ids)` (whose ResourceError, on long strings,
        then says which step of which row failed). Positions after a row's last symbol whose
        actions are not one-hot (padding: the compiled controller is silent there) are
        unspecified, as for `forward`."""
        out, why = self._discrete_why(ids, None)
        if out is not None:
            return out
        try:
            return self.forward(ids)
        except ResourceError as exc:
            raise ResourceError(f"{exc} (forward_decoded could not keep the stack as one run of "
                                f"symbol ids: {why})") from exc

    @torch.no_grad()
    def forward_window(self, ids: Any, cells: int = 3
                       ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`forward` in O(1) per step, or None where that is not exact (the conditions of
        `_discrete`). states[t] = [h_t; r_t; n_t; the symbol ids of the top ``cells`` cells of
        the surviving run's stack, top first, ⊥₀ = 0 included, −1 below it] in float64, n_t the
        number of cells above ⊥₀; logits as `forward`. `pdanet.verify` compares long strings
        of a real-time DPDA through it and the compiled network's ``window_decoder``."""
        if isinstance(cells, bool) or not isinstance(cells, int) or cells < 1:
            raise InputError(f"cells must be a positive integer, got {cells!r}")
        return self._discrete(ids, cells)

    # operation budget of `forward_bounded`'s `forward` runs (an instance may set its own)
    full_run_work: int = FULL_RUN_WORK

    def _chart_costs(self, T: int, elt: int) -> tuple[np.ndarray, np.ndarray]:
        """(bytes, work) of `forward` on one row of L = 0 … T symbols: ``bytes[L]`` the chart
        estimate that `run` checks against the limits, ``work[L]`` Q³N²·Σ_{t ≤ L} span_t²
        operations (the pop term of Eq. 2 over a span of (t+1) or (min(t, D)+1) cells)."""
        Q, N, D = self.num_states, self.num_stack, self.window
        L = np.arange(T + 1, dtype=np.float64)
        span = L + 1 if D is None else np.minimum(L, D) + 1
        nbytes = (L + 1) * span * float((Q * N) ** 2 * elt)
        work = np.concatenate([[0.0], np.cumsum(span[1:] ** 2)]) * float(Q ** 3 * N ** 2)
        return nbytes, work

    @torch.no_grad()
    def forward_bounded(self, ids: Any, max_bytes: int | None = None,
                        max_work: int | None = None) -> BoundedRun:
        """`forward`'s values where they can be had within a memory and time budget, and which
        positions those are (a `BoundedRun`); what `pdanet.verify` runs, so that a network
        whose actions left the exactly one-hot regime (trained, perturbed) still gets a report.

        Every row first runs as symbol ids (`forward_decoded`'s O(1)-a-step run, exact up to
        the step before its first action row that is not exactly one-hot). Rows where that
        stops before their end are then run through `forward` (Eqs. 1–5 in full, O(T²) memory
        and O(T³) time a row) on their first min(length, L) symbols, in chunks whose charts fit
        ``max_bytes`` (default and cap: `pdanet.limits`' max_bytes), L the longest common
        prefix such that one row's chart fits ``max_bytes`` and running every such row to it
        costs at most ``max_work`` operations (default: the module's ``full_run_work``,
        `FULL_RUN_WORK`; cost as `_chart_costs`); where not even L = 1 fits the budget, only
        the first rows in batch order are run. Positions after a row's ``checked`` step are
        not computed; the `BoundedRun` says what they would need. NaN or +inf log actions on
        a row end its checked prefix before that step."""
        ids = self._checked(ids)
        B, T = ids.shape
        cap = limits.current().max_bytes
        for name, val in (("max_bytes", max_bytes), ("max_work", max_work)):
            if val is not None and (isinstance(val, bool) or not isinstance(val, (int, float))
                                    or not val > 0):
                raise InputError(f"{name} must be a positive number or None, got {val!r}")
        max_bytes = cap if max_bytes is None else min(max_bytes, cap)
        max_work = self.full_run_work if max_work is None else max_work
        (states, logits), fail, why = self._discrete_rows(ids, None)
        lengths = (ids >= 0).long().cumprod(1).sum(1).cpu().numpy()
        exact = np.minimum(np.where(fail > 0, fail - 1, lengths), lengths)
        checked = exact.copy()
        full = np.zeros(B, dtype=bool)
        nbytes, work = self._chart_costs(T, self.actions.weight.element_size())
        upto = np.minimum(lengths[None, :], np.arange(T + 1)[:, None])   # (L, b): min(len_b, L)
        cost = (work[upto] * (upto > exact[None, :])).sum(1)   # every row that gains, to L
        fits = np.flatnonzero((nbytes <= max_bytes) & (cost <= max_work))
        reach = int(fits[-1]) if len(fits) else 0   # the longest common prefix affordable
        if reach == 0 and T and nbytes[1] <= max_bytes:
            reach = 1                            # too many rows for the budget: the first ones
        want = np.minimum(lengths, reach)
        todo = np.flatnonzero(want > exact)
        broken = ""
        if len(todo):
            L = int(want[todo].max())
            spent = np.cumsum(work[want[todo]])                      # the budget, in order
            todo = todo[:max(1, int(np.searchsorted(spent, max_work, side="right")))]
            chunk = max(1, int(max_bytes // max(nbytes[L], 1.0)))
            for lo in range(0, len(todo), chunk):
                sel = todo[lo:lo + chunk]
                part = ids[torch.as_tensor(sel, device=ids.device), :L]
                try:
                    r = self.run(part)                     # Eqs. 1–5 in full on the prefixes
                except InputError as exc:                  # NaN/+inf log actions (the stack's)
                    broken = broken or str(exc)
                    continue
                rows_t = torch.as_tensor(sel, device=states.device)
                states[rows_t, :L + 1] = torch.cat([r.h, r.reading], -1).to(states.dtype)
                logits[rows_t, :L + 1] = r.logits.to(logits.dtype)
                checked[sel] = want[sel]
                full[sel] = True
        short = checked < lengths
        needed_bytes = np.where(short, nbytes[lengths].astype(np.int64), 0)
        needed_work = np.where(short, work[lengths], 0.0)
        reason = ""
        if short.any():
            b = int(np.flatnonzero(short)[0])
            reason = (f"{int(short.sum())} of {B} strings not checked to their end: the "
                      f"actions are not exactly one-hot ({why}), so only the full model "
                      f"(Eqs. 1–5) gives the network's values, and on string {b} (length "
                      f"{int(lengths[b])}) it would need {limits.human_bytes(needed_bytes[b])} "
                      f"(limit {limits.human_bytes(max_bytes)}) and about {needed_work[b]:.2g} "
                      f"operations (budget {float(max_work):.2g} a batch)")
            if broken:
                reason += f"; the full model could not run on some prefixes: {broken}"
        return BoundedRun(states, logits, lengths, exact, checked, full, needed_bytes,
                          needed_work, reason)

    def _discrete(self, ids: Any, cells: int | None
                  ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`_discrete_why`'s run, or None where it is not exact."""
        return self._discrete_why(ids, cells)[0]

    @torch.no_grad()
    def _discrete_why(self, ids: Any, cells: int | None
                      ) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, str]:
        """(run, "") or (None, why not): the run of `forward_decoded` (``cells`` None: states
        [h_t; r_t] as `forward`'s) and of `forward_window` (the top ``cells`` cells), where it
        is exact (`_discrete_rows`, stopping at the first failed check)."""
        run, _fail, why = self._discrete_rows(ids, cells, per_row=False)
        return run, why

    @torch.no_grad()
    def _discrete_rows(self, ids: Any, cells: int | None, per_row: bool = True
                       ) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, np.ndarray, str]:
        """(run, fail, why): the symbol-id run and, per row, ``fail[b]`` = the first step of a
        symbol at which a check below fails (0: none), ``why`` the first failure in words.
        With ``per_row`` False the run stops there (run None); with ``per_row`` True a failing
        row is tracked as dead from that step on and the others go on, so positions
        t < fail[b] of row b (every position where fail[b] = 0) are exactly `forward`'s.

        It runs the same LSTM and heads as `run` on the same inputs (the same operations, so
        h_t, the log actions and y_t are bitwise `run`'s while r_{t−1} is), with the stack as
        one run: state q, symbol ids with the step that pushed each (cell 0: the initial ⊥₀),
        and a flag "alive". At every step of a symbol it checks that the row of Δ[t] of the run's
        configuration (q, top x) is exactly one-hot — for NS+U and RNS (exp, §3.1) that all of
        Δ[t] but the move is exactly 0 — in whatever float arithmetic the stack uses, by a
        sufficient test on the log actions ℓ = W_ha h_t + b_ha: with L the largest entry of the
        row, every other entry ℓ' of the row has ℓ' − L < cut (−200; −800 in float64), so
        exp(ℓ' − L) is exactly 0 and Eq. 1's logsumexp of the row is exactly L: the move
        weighs exp(0) = 1 and the rest 0 after Eq. 1 and the stack's shift by the step's
        maximum, which is then 0 (normalised entries are ≤ 0); with exp, L must be the step's
        maximum and every other entry of Δ[t] below it by more than the cut. All log actions
        must be finite or −inf (a NaN or +inf: None, as the stack raises); a dead run needs
        nothing more. Then, by induction on t, the run is the only one (Eqs. 2–4):

        - every γ[i→t][c_i→·] from the configuration c_i of the run at i (Eq. 3) is 0 unless the
          cell pushed at step i+1 is the run's top at t, and then it has the single entry
          c_t: the push term reads Δ[i+1]'s row of c_i, the replace term γ[i→t−1] and the row
          of c_{t−1}, the pop term γ[i→k] and γ[k→t−1] on c_k, c_{t−1} and that row, all one-hot
          on the run's move (or 0); entries from configurations the run is not in are finite and
          only ever multiply α[i][c] = 0 (Eq. 4); with exp they are 0 altogether, with Eq. 1 they
          are probabilities of sub-runs (≤ 1), so the scaled arithmetic's column maximum is the
          run's entry and nothing underflows;
        - so α[t] (Eq. 4) has one nonzero entry, (q_t, x_t), while the run's top was pushed at a
          step p ≥ 1 with t − p < D (§5.1: γ[i→t] = 0 for t − i > D, i = p − 1), and α[t] = 0
          once a replace or pop reaches ⊥₀ (the paper's bottom: no γ starts below step 1) or
          the top is older than D — and stays 0: every later α sums α[i] = 0 or γ of cells
          already popped;
        - the reading (§3.2 for NS+S/RNS, Eq. 5 for NS/NS+U) of a single finite entry is exactly
          the one-hot of (q_t, x_t) (x_t), zeros once dead: exactly `run`'s r_t, so h_{t+1} is
          bitwise `run`'s again.

        A padding step (x_t = 0) whose row fails the check makes the row's later values
        unspecified (the run is then tracked as dead); a check failing at a symbol's step, or
        NaN/+inf log actions anywhere (the stack's InputError), stops the run there (None and
        the step, row and reason; with ``per_row``: that row's ``fail``). Each
        step is a fixed number of tensor and numpy operations over the batch (no loop over
        cells or rows): the controller, Δ[t], and O(B) index updates of the stack."""
        ids = self._checked(ids)
        W = self.actions.weight
        B, T = ids.shape
        Q, N, H, K = self.num_states, self.num_stack, self.hidden, self.num_symbols
        A, D, R = 2 * N + 1, self.window, self.reading_size
        dev, dt = W.device, W.dtype
        cut = -800.0 if dt == torch.float64 else -200.0   # exp(x) = 0 below: e^cut < ulp/2
        table, bias, Wr, Whh = self._gate_parts()
        xi = torch.where(ids < 0, K, ids).t().contiguous()
        valid = (ids >= 0).t().contiguous().cpu().numpy()
        # the run's stack: symbol ids (cell 0: ⊥₀) and the step that pushed each cell
        rows, rows_t = np.arange(B), torch.arange(B, device=dev)
        mem = np.zeros((B, T + 2), dtype=np.int64)
        born = np.zeros((B, T + 2), dtype=np.int64)
        n = np.ones(B, dtype=np.int64)                               # cells, ⊥₀ included
        q = np.full(B, self.start, dtype=np.int64)
        top = np.zeros(B, dtype=np.int64)
        alive = np.ones(B, dtype=bool)                               # the run survives
        known = np.ones(B, dtype=bool)                               # the row is tracked
        fail = np.zeros(B, dtype=np.int64)                           # first failed step (0: none)
        why = ""
        kind = np.repeat(np.arange(3), [N, N, 1])                    # push, replace, pop
        sym = np.concatenate([np.arange(N), np.arange(N), [0]])
        onehot = torch.cat([torch.eye(R, dtype=dt), torch.zeros(1, R, dtype=dt)]).to(dev)
        h = W.new_zeros(B, H)                                              # h_0 = c_0 = 0
        c = W.new_zeros(B, H)
        r = self.stack.initial_state(B, dt, dev).reading.reshape(B, -1)    # r_0 (Eq. 3)
        buf = W.new_empty(T + 1, B, H + R)                 # [h_t; r_t], time-major
        ys = W.new_empty(T + 1, B, self.out.out_features)
        buf[0, :, :H], buf[0, :, H:], ys[0] = h, r, self.out(h)
        if cells is not None:
            offs = np.arange(cells)
            sizes = np.zeros((T + 1, B), dtype=np.int64)
            wins = np.full((T + 1, B, cells), -1, dtype=np.int64)
            wins[0, :, 0] = 0
        for t in range(T):
            gates = table[xi[t]] + bias + r @ Wr + h @ Whh
            i, f, g, o = gates.chunk(4, 1)                                 # §2.1: LSTM
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            lact = self.actions(h)                                         # W_ha h_t + b_ha
            m = lact.amax(-1)                        # NaN or +inf: forward's stack raises
            finite = torch.isfinite(m)
            if not bool(finite.all()):
                if not per_row:
                    return None, fail, f"step {t + 1}: log actions not finite"
                if not why:
                    b = int(torch.nonzero(~finite)[0])
                    why = f"step {t + 1} of row {b}: log actions not finite"
            at = torch.from_numpy(q * N + top).to(dev)
            row = lact.view(B, Q * N, Q * A)[rows_t, at]          # the run's (q, top) row
            best, move = row.max(-1)
            row[rows_t, move] = -np.inf
            exact = row.amax(-1) - best < cut        # Eq. 1: this row of Δ[t] is one-hot
            if not self.normalize:                   # exp (§3.1): all of Δ[t] but the move
                lact[rows_t, at * (Q * A) + move] = -np.inf
                exact &= (best == m) & (lact.amax(-1) - m < cut)
            exact, move = exact.cpu().numpy(), move.cpu().numpy()
            finite = finite.cpu().numpy()
            fine = (~alive | exact) & finite
            v_t = valid[t]
            bad = v_t & ~(fine & known)
            if bad.any():
                b = int(np.flatnonzero(bad)[0])
                msg = (f"step {t + 1} of row {b}: the action row of the run's configuration "
                       "is not exactly one-hot" if known[b] else
                       f"step {t + 1} of row {b}: a symbol after a padding step whose actions "
                       "were not one-hot")
                if not per_row:
                    return None, fail, msg
                first = bad & (fail == 0)
                if first.any() and not why:
                    why = msg
                fail[first] = t + 1
                fine &= ~bad
            known &= fine
            alive &= known
            r_to, v = move // A, move % A                                  # (q, x → r, v)
            op = kind[v]
            push, rep, pop = alive & (op == 0), alive & (op == 1), alive & (op == 2)
            dies = (rep & (n == 1)) | (pop & (n <= 2))   # a replace or pop reaching ⊥₀
            at = np.where(push, n, n - 1)
            w = push | rep
            mem[rows[w], at[w]] = sym[v[w]]
            born[rows[push], at[push]] = t + 1
            n += push
            n -= pop & ~dies
            q = np.where(alive, r_to, q)
            alive &= ~dies
            top = mem[rows, n - 1]
            if D is not None:                        # §5.1: pushed at p, kept while t − p < D
                alive &= (t + 1) - born[rows, n - 1] < D
            idx = np.where(alive, q * N + top if self.mode == "rns" else top, R)
            r = onehot[torch.from_numpy(idx).to(dev)]                      # Eq. 5 / §3.2
            buf[t + 1, :, :H], buf[t + 1, :, H:] = h, r
            ys[t + 1] = self.out(h)                                        # y_t = W_hy h_t + b_hy
            if cells is not None:
                sizes[t + 1] = n - 1
                pos = (n - 1)[:, None] - offs
                wins[t + 1] = np.where(pos >= 0, mem[rows[:, None], np.maximum(pos, 0)], -1)
        if cells is not None:
            tail = np.concatenate([sizes[..., None], wins], 2)
            buf = torch.cat([buf.double(), torch.from_numpy(tail).to(dev).double()], -1)
        return (buf.transpose(0, 1).contiguous(), ys.transpose(0, 1).contiguous()), fail, why


# --- compile ------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class NSController(Abstraction):
    """`DuSellChiangRNN` compiled from a real-time machine (module docstring): hidden unit j is
    the network move ``moves[j]`` = (q, a, n, r, v) (state, input, network top, next state,
    stack operation index); ``variant`` the stack variant; ``machine_stack`` G (the network has
    N = 2G + 2 stack symbols); ``window`` D (None: unlimited)."""

    model: str = ""
    variant: str = "rns"
    moves: tuple = ()
    machine_stack: int = 0
    window: int | None = None


@dataclass(frozen=True)
class _Plan:
    view: RealtimeTable
    N: int
    moves: tuple            # (q, a, n, r, v, accepts_after)


def _net_symbol(G: int, code: int, marked: bool) -> int:
    """Network symbol of machine code ``code`` (G = ⊥: ⊥̂), marked or not."""
    if code == G:
        return 2 * G + 1
    return (G + 1 + code) if marked else (1 + code)


def _plan(machine: Any, model: str) -> _Plan:
    if isinstance(machine, PDA) and not isinstance(machine, DeterministicPushdown):
        raise CompileError(f"{machine!r} is nondeterministic; {model} compiles deterministic "
                           "machines with saturated heads. Compile it with "
                           "pn.compile(machine, target='ns_rnn') (exact log-weights)")
    if type(machine).__name__ == "WeightedPDA":
        raise CompileError(f"{machine!r} is a weighted PDA; {model} compiles deterministic "
                           "machines with saturated heads. Compile it with "
                           "pn.compile(machine, target='ns_rnn') (exact log-weights)")
    view = realtime_table(machine)
    if view.kind != "stack":
        raise CompileError(f"{machine!r} uses a {view.kind}; {model} has a stack. Compile it "
                           "with target 'stack_rnn', method 'grefenstette'")
    if view.output != "accept":
        raise CompileError(f"{machine!r} is a transducer; {model} compiles recognisers (its "
                           "readout is one acceptance logit). Compile it with model 'hao_lstm'")
    G = view.G
    N = 2 * G + 2
    bot = 2 * G + 1
    push, repl, pop = (lambda y: y), (lambda y: N + y), 2 * N
    moves = []
    for (q, a, x), (q2, _out, pe, ue, y) in sorted(view.trans.items()):
        op = {(None, None): "noop", (None, "top"): "push", ("top", None): "pop",
              ("top", "top"): "replace"}[(pe, ue)]
        if x == G and op not in ("noop", "push"):
            raise CompileError(f"{machine!r} moves {op} on ⊥; {model} keeps ⊥ at the bottom "
                               "(noop or push on it only)")
        if x == G:                                   # the machine's stack is empty
            cases = [(bot, repl(_net_symbol(G, y, True)) if op == "push" else repl(bot))]
            if q == view.q0:                         # step 1: on the paper's ⊥₀, push
                cases.append((0, push(_net_symbol(G, y, True)) if op == "push" else push(bot)))
        else:
            n, nm = _net_symbol(G, x, False), _net_symbol(G, x, True)
            if op == "noop":
                cases = [(n, repl(n)), (nm, repl(nm))]
            elif op == "push":
                cases = [(n, push(_net_symbol(G, y, False))), (nm, push(_net_symbol(G, y, False)))]
            elif op == "replace":
                cases = [(n, repl(_net_symbol(G, y, False))), (nm, repl(_net_symbol(G, y, True)))]
            else:
                cases = [(n, pop), (nm, repl(bot))]
        for n, v in cases:
            if view.empty_stack:
                empty = v in (repl(bot), push(bot))
                acc = empty
            else:
                acc = bool(view.accepting[q2])
            moves.append((q, a, n, q2, v, acc))
    return _Plan(view, N, tuple(moves))


def _accepts_empty(view: RealtimeTable) -> bool:
    return True if view.empty_stack else bool(view.accepting[view.q0])


def _weights(plan: _Plan, mode: str) -> tuple[dict, int]:
    view, N, moves = plan.view, plan.N, plan.moves
    Q, K = view.Q, view.K
    H = max(1, len(moves))
    R = Q * N if mode == "rns" else N
    Fr = Fraction
    W_ih = np.full((4 * H, K + R), Fr(0), dtype=object)
    W_hh = np.full((4 * H, H), Fr(0), dtype=object)
    bias = np.full(4 * H, Fr(0), dtype=object)
    bias[:H] = Fr(-1)                                  # i: off unless a move's test holds
    bias[H:2 * H] = Fr(-1)                             # f = σ(−β) = 0
    bias[2 * H:3 * H] = Fr(1)                          # g = tanh(β) = 1
    bias[3 * H:] = Fr(1)                               # o = σ(β) = 1
    into: dict = {}
    for j, (_q, _a, _n, q2, _v, _acc) in enumerate(moves):
        into.setdefault(q2, []).append(j)
    A = Q * N * Q * (2 * N + 1)
    W_ha = np.zeros((A, H), dtype=np.int64)
    acc_empty = _accepts_empty(view)
    W_hy = np.zeros((1, H), dtype=np.int64)
    for j, (q, a, n, q2, v, acc) in enumerate(moves):
        W_ih[j, a] = Fr(1)                             # x_t[a]
        if mode == "rns":                              # r_{t−1}[(q, n)] (§3.2 reading)
            W_ih[j, K + q * N + n] = Fr(1)
            bias[j] = Fr(-3, 2)
        elif n == 0:                                   # ⊥₀ on top: t = 1, state q0
            W_ih[j, K] = Fr(1)
            bias[j] = Fr(-3, 2)
        else:                                          # r_{t−1}[n] and the state kept in h
            W_ih[j, K + n] = Fr(1)
            for i in into.get(q, ()):
                W_hh[j, i] = Fr(1)
            bias[j] = Fr(-19, 8)
        W_ha[((q * N + n) * Q + q2) * (2 * N + 1) + v, j] = 1      # the move's action entry
        W_hy[0, j] = (0 if acc else -1) if acc_empty else (1 if acc else 0)
    w: dict[str, Any] = {
        "cell.weight_ih": ExactWeight.of(W_ih), "cell.weight_hh": ExactWeight.of(W_hh),
        "cell.bias_ih": ExactWeight.of(bias),
        "cell.bias_hh": ExactWeight.of(np.zeros(4 * H, dtype=np.int64)),
        "actions.weight": ExactWeight.of(W_ha),
        "actions.bias": ExactWeight.of(np.full(A, -MARGIN, dtype=object)),
        "out.weight": ExactWeight.of(W_hy),
        "out.bias": ExactWeight.of(np.array([MARGIN if acc_empty else -MARGIN], dtype=object))}
    return w, H


def _decoder(plan: _Plan, mode: str, H: int):
    view, N = plan.view, plan.N
    Q, G = view.Q, view.G
    code = np.full(N, -1, dtype=np.int64)
    code[0] = code[2 * G + 1] = G
    code[1:G + 1] = code[G + 1:2 * G + 1] = np.arange(G)
    targets = np.array([m[3] for m in plan.moves] + [-1] * (H - len(plan.moves)), dtype=np.int64)
    half = float(np.tanh(1.0)) / 2

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        s = np.asarray(states, dtype=np.float64)
        h, r = s[..., :H], s[..., H:]
        if mode == "rns":
            flat = r.reshape(s.shape[:2] + (Q * N,))
            best = flat.argmax(-1)
            alive = flat.max(-1) > 0.5
            state = np.where(alive, best // N, -1)
            n = best % N
        else:
            n = r.argmax(-1)
            alive = r.max(-1) > 0.5
            unit = h.argmax(-1)
            state = np.where(h.max(-1) > half, targets[unit], -1)
            state[:, 0] = np.where(alive[:, 0], view.q0, -1)
            state = np.where(alive, state, -1)
        out = {"state": state}
        if view.fields == "pushdown":
            out["top"] = np.where(alive & (state >= 0), code[n], -1)
        return out

    return decode


def _window_decoder(plan: _Plan, mode: str, H: int):
    """`DuSellChiangRNN.forward_window` states → ``state`` and ``top`` (as `_decoder`, from
    [h_t; r_t]), ``depth`` and ``stack_top`` (the top cells of the decoded machine stack, top
    first, then ⊥ = G, then −1): the fields of `DeterministicPushdown.run_batch_window`.

    The network stack ⊥₀ c_1 … c_k decodes cell by cell as ⊥ m(c_1) … m(c_k) (m drops the
    marks; ⊥₀ and ⊥̂ read as ⊥), except ⊥₀ ⊥̂ (k = 1), the empty machine stack ⊥. So a step,
    which rewrites at most the network's top cell and pushes at most one, changes at most the
    top two decoded cells (and the whole ⊥₀ ⊥̂ case lies within the window): the induction of
    `pdanet.verify.lockstep._forward_window` applies."""
    inner = _decoder(plan, mode, H)
    view, N = plan.view, plan.N
    G = view.G
    R = view.Q * N if mode == "rns" else N
    code = np.full(N + 1, -1, dtype=np.int64)          # index −1 (below ⊥₀): −1
    code[0] = code[2 * G + 1] = G
    code[1:G + 1] = code[G + 1:2 * G + 1] = np.arange(G)
    hat = 2 * G + 1

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        s = np.asarray(states, dtype=np.float64)
        out = inner(s[..., :H + R])
        n = np.rint(s[..., H + R]).astype(np.int64)                 # cells above ⊥₀
        net = np.rint(s[..., H + R + 1:]).astype(np.int64)          # top first, ⊥₀ = 0
        empty = (n == 1) & (net[..., 0] == hat)                      # ⊥₀ ⊥̂: the machine's ⊥
        mapped = code[net]
        below = np.concatenate([mapped[..., 1:], np.full(mapped.shape[:-1] + (1,), -1)], -1)
        window = np.where(empty[..., None], below, mapped)
        depth = n - empty
        dead = out["state"] < 0
        window[dead] = -1
        out["depth"] = np.where(dead, -1, depth)
        out["stack_top"] = window
        return out

    return decode


def requires(machine: Any, model: str) -> PdanetError | None:
    """Why ``machine`` cannot compile to DuSell & Chiang model ``model`` (None: it can)."""
    try:
        _plan(machine, model)
    except PdanetError as exc:
        return exc
    return None


def requires_dusell_chiang_ns(machine: Any) -> PdanetError | None:
    """Why ``machine`` cannot compile to model ``dusell_chiang_ns`` (None: it can)."""
    return requires(machine, "dusell_chiang_ns")


def requires_dusell_chiang_ns_s(machine: Any) -> PdanetError | None:
    """Why ``machine`` cannot compile to model ``dusell_chiang_ns_s`` (None: it can)."""
    return requires(machine, "dusell_chiang_ns_s")


def requires_dusell_chiang_ns_u(machine: Any) -> PdanetError | None:
    """Why ``machine`` cannot compile to model ``dusell_chiang_ns_u`` (None: it can)."""
    return requires(machine, "dusell_chiang_ns_u")


def requires_dusell_chiang_rns(machine: Any) -> PdanetError | None:
    """Why ``machine`` cannot compile to model ``dusell_chiang_rns`` (None: it can)."""
    return requires(machine, "dusell_chiang_rns")


def _compile(machine: Any, suffix: str, dtype: Any, window: Any, options: dict
             ) -> CompiledNetwork:
    model = f"dusell_chiang_{suffix}"
    if options:
        raise InputError(f"compile_{model} takes dtype and window, not {sorted(options)}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 1):
        raise InputError(f"window must be a positive integer or None, got {window!r}")
    dtype = as_dtype(dtype)
    variant = MODEL_VARIANTS[suffix]
    mode = VARIANTS[variant][0]
    plan = _plan(machine, model)
    view, N = plan.view, plan.N
    Q, K = view.Q, view.K
    H = max(1, len(plan.moves))
    R = Q * N if mode == "rns" else N
    A = Q * N * Q * (2 * N + 1)
    params = 4 * H * (K + R + H + 2) + (A + 1) * (H + 1)
    what = f"compiling {machine!r} to {model} ({H:,} hidden units)"
    limits.check(what, H, "max_units", hint="use a smaller machine")
    limits.check(f"{what}, {params:,} parameters", 32 * params, "max_bytes",
                 hint="use a smaller machine")
    weights, H = _weights(plan, mode)
    module = DuSellChiangRNN(K, Q, N, variant, H, 1, window, view.q0)
    module = load_exact(module, weights, BETA, dtype)
    if view.fields == "pushdown":        # `forward_window`: pn.verify's O(1)-per-step compare
        module.window_decoder = _window_decoder(plan, mode, H)
    moves = tuple(m[:5] for m in plan.moves)
    labels = tuple(f"({q},{a},{n})→({r},{v})" for q, a, n, r, v in moves) or ("idle",)
    Qs, Ks, Gs = sp.symbols("Q K G")
    exact_for = ("every string" if window is None else
                 f"strings on which every network stack top was pushed at most D = {window} steps "
                 f"earlier, e.g. every string of length ≤ {window}")
    info = {"model": model, "variant": variant, "controller": "lstm", "memory": "ns",
            "hidden_units": H, "parameters": sum(p.numel() for p in module.parameters()),
            "num_states": Q, "num_inputs": K, "num_store_symbols": view.G,
            "network_stack_symbols": N, "reading": "(state, top)" if mode == "rns" else "top",
            "window": window, "exact_for": exact_for,
            "state": ("read from the stack reading (§3.2)" if mode == "rns" else
                      "kept by the controller: the top-only reading (Eq. 5) does not show it"),
            "bottom": "paper: lowest machine symbol marked (N = 2G + 2 network symbols)"}
    return CompiledNetwork(
        machine=machine, module=module, target="ns_rnn", method=model, hidden_units=H,
        bound=Qs * Ks * 2 * (Gs + 1) + 1, params={"Q": Q, "K": K, "G": view.G},
        weights=weights, scale=sp.Integer(BETA), decoder=_decoder(plan, mode, H),
        reader=lambda logits: np.asarray(logits)[..., 0] > 0,
        margin=sp.Rational(MARGIN.numerator, MARGIN.denominator), steps_per_symbol=1,
        scale_argument=("gates and heads are ±3/8 or beyond (active unit h = tanh 1); β = "
                        f"{BETA} makes σ, tanh exactly 0/1 and every action but the machine's "
                        "move exactly 0 after Eq. 1 / exp in float32 and float64; one unit per "
                        "network move (q, a, n), at most Q·K·2(G+1); "
                        + info["state"]),
        abstraction=NSController(labels=labels, model=model, variant=variant, moves=moves,
                                 machine_stack=view.G, window=window),
        info=info)


def compile_dusell_chiang_ns(machine: Any, dtype: torch.dtype = torch.float32,
                             window: int | None = None, **options: Any) -> CompiledNetwork:
    """A real-time DPDA or DFA recogniser in DuSell & Chiang's NS-RNN (normalised actions,
    top-only reading; the controller keeps the state). See the module docstring."""
    return _compile(machine, "ns", dtype, window, options)


def compile_dusell_chiang_ns_s(machine: Any, dtype: torch.dtype = torch.float32,
                               window: int | None = None, **options: Any) -> CompiledNetwork:
    """NS+S: normalised actions, (state, top) reading. See the module docstring."""
    return _compile(machine, "ns_s", dtype, window, options)


def compile_dusell_chiang_ns_u(machine: Any, dtype: torch.dtype = torch.float32,
                               window: int | None = None, **options: Any) -> CompiledNetwork:
    """NS+U: unnormalised actions, top-only reading (the controller keeps the state)."""
    return _compile(machine, "ns_u", dtype, window, options)


def compile_dusell_chiang_rns(machine: Any, dtype: torch.dtype = torch.float32,
                              window: int | None = None, **options: Any) -> CompiledNetwork:
    """RNS-RNN (NS+S+U): unnormalised actions, (state, top) reading. See the module docstring."""
    return _compile(machine, "rns", dtype, window, options)


def _example():
    from pdanet.automata.alphabet import BOTTOM
    from pdanet.automata.pda import DPDA
    # marked reversal {w#w^R} (§4): push each symbol (the first one marked), on # go to "pop"
    # ("done" for w = ε), pop matching symbols; popping the marked one ends in "done"
    t = {}
    for a in ("0", "1"):
        t[("push", a, BOTTOM)] = ("push", (a + "'", BOTTOM))
        for x in ("0", "1", "0'", "1'"):
            t[("push", a, x)] = ("push", (a, x))
        t[("pop", a, a)] = ("pop", ())
        t[("pop", a, a + "'")] = ("done", ())
    t[("push", "#", BOTTOM)] = ("done", (BOTTOM,))
    for x in ("0", "1", "0'", "1'"):
        t[("push", "#", x)] = ("pop", (x,))
    return DPDA(["push", "pop", "done"], ["0", "1", "#"], ["0", "1", "0'", "1'"], t, "push",
                accepting={"done"}, name="marked_reversal_dpda")


EXAMPLE_DUSELL_CHIANG_RNS = _example()
EXAMPLE_DUSELL_CHIANG_NS = EXAMPLE_DUSELL_CHIANG_NS_S = EXAMPLE_DUSELL_CHIANG_NS_U = \
    EXAMPLE_DUSELL_CHIANG_RNS

__all__ = ["BETA", "EXAMPLE_DUSELL_CHIANG_NS", "EXAMPLE_DUSELL_CHIANG_NS_S",
           "EXAMPLE_DUSELL_CHIANG_NS_U", "EXAMPLE_DUSELL_CHIANG_RNS", "FULL_RUN_WORK",
           "MODEL_VARIANTS", "BoundedRun", "DuSellChiangRNN", "DuSellChiangRun", "NSController",
           "compile_dusell_chiang_ns", "compile_dusell_chiang_ns_s", "compile_dusell_chiang_ns_u",
           "compile_dusell_chiang_rns", "requires_dusell_chiang_ns", "requires_dusell_chiang_ns_s",
           "requires_dusell_chiang_ns_u", "requires_dusell_chiang_rns"]

"""The Neural Stack models of Hao et al. (2018), "Context-free transductions with neural stacks",
as trainable modules, with compile functions that emit weights for exactly these modules
(models ``"hao_linear"``, ``"hao_lstm"`` and the buffered ``"hao_buffered"``).

The memory is Grefenstette et al.'s neural stack as Hao et al. §2.1 write it (pop strength u_t,
then push v_t with strength d_t, then read one unit of strength), run through the public
`NeuralStack` store. Hao et al.'s equations are unnumbered; comments cite them by section.

**Linear controller** (§2.2): no hidden state; from the one-hot input x_t and the reading
r_{t−1},

    u_t = σ(W_u [x_t; r_{t−1}] + b_u),  d_t = σ(W_d [x_t; r_{t−1}] + b_d),
    v_t = σ(W_v [x_t; r_{t−1}] + b_v),  y_t = W_y [x_t; r_{t−1}] + b_y.

``logits[:, 0]`` (before any input) is y_0 = b_y, the same map on x = 0 and r = 0 (the empty
stack). The linear controller can express a machine with *one* controller state whose every
decision is a function of (x_t, r_{t−1}) alone: a real-time DPDA/DPDT or Mealy machine with one
state (e.g. the paper's string reversal pushes each symbol and pops on #), and only when each
head's 0/1 table over (input symbol, stack top) is a threshold function of [x_t; r_{t−1}]. Stack
symbols are coded one-hot (the empty stack reads 0), so a head's score is α_a + γ_R for input a
and top R; "score ≥ 1/2 where the head is on, ≤ −1/2 where it is off" is then a system of
difference constraints α_a − (−γ_R) ≥ 1/2 or ≤ −1/2, solved exactly (integers) by
Bellman–Ford, and infeasible exactly when the constraint graph has a cycle (e.g. an XOR table,
Minsky & Papert). Each output symbol k gets its own head y_k (≥ 1/2 exactly where the machine
emits k, ≤ −1/2 elsewhere); the "no output" logit is 0. Anything else raises CompileError naming
``"hao_lstm"``. A recogniser's verdict after step t must then be constant (one state, final-state
acceptance).

**LSTM controller** (§2.2): an LSTM cell on [x_t; r_{t−1}] and (h_{t−1}, c_{t−1}); u, d, v =
σ(linear(h_t)), y_t = linear(h_t). Hidden unit j stands for the transition (c, a, R, c2) of the
real-time table (`pdanet.constructions.controllers._plan`: controller state c, input a,
stack-top condition R); its input gate is the test

    i_j = σ(β (x_t[a] + Σ_{i→c} h_{t−1,i} + m_R(r_{t−1}) − 19/8))     (− 11/8 without R),
    m_R(r) = Σ_b (2 code(R)_b − 1) r_b − |code(R)|_1 + 1,

forget gate f = σ(−β) = 0, cell candidate g = tanh(β) = 1, output gate o = σ(β) = 1; so
c_t,j = i_j ∈ {0, 1} and h_t,j = tanh(c_t,j) ∈ {0, τ}, τ = tanh 1 ≈ 0.7616 (the start unit has
h_0 = 1, c_0 = 0). With one unit active, the test is τ − 3/8 or more for the transition taken
and −3/8 or less for every other; heads read Σ_j w_j h_j − 3/8 with w_j ∈ {0, 1}. Margin 3/8;
at β = 4096 every sigmoid and tanh argument is ±1536 or beyond, where σ and tanh are exactly
0, 1 or ±1 in float32 and float64, so strengths are exactly 0/1, pushed vectors exactly codes and
the network repeats the same float states at every length. A recogniser's verdict is read from
h_t (y_t = W_y h_t): final-state acceptance only; an empty-stack DPDA needs the reading r_t in
the readout (target ``"stack_rnn"``, method ``"grefenstette"``).

Both: one network step per input symbol; a replace is pop + push in one step (§2.1); ε-moves
need the buffered model (target ``"buffered_stack_rnn"``); queues and deques another memory.

**Verification in O(1) per step** (all three models, and `JoulinMikolovStackRNN`):
``forward_window`` runs the same controller with the stack kept as symbol ids (`WindowStack`),
proving at every step that the heads are saturated exactly (0/1 strengths, exact codes), so the
differentiable stack equals the discrete one; it returns None where that fails. `pdanet.verify`
uses it (with the compiled ``window_decoder``) on long strings of a DPDA/DPDT, and through
``forward_decoded`` on DFAs and Mealy machines (``control_only``: the decoder reads h_t alone).
The buffered model's ``forward_decoded`` also keeps its input and output buffers as discrete
queues where i_t and o_t are exactly 0/1.

**Buffered model** (§2.3, `HaoBufferedStackRNN`, `compile_hao_buffered`): the LSTM controller
and stack plus the read-only input buffer and write-only output buffer (neural queues,
`pdanet.constructions.stacks.buffered`); the controller also emits the input pop strength i_t and
the output push strength o_t (sigmoid heads). Compiled for Mealy machines (a DFA with outputs)
and real-time DPDTs: every step pops exactly one input symbol (i_t = 1) and enqueues its output
where the transition emits (o_t = 1); the output tape is the drained output buffer.
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
from pdanet.constructions.abstraction import Abstraction, ControllerUnit
from pdanet.constructions.base import CompiledNetwork, ExactWeight, as_dtype, load_exact
from pdanet.constructions.controllers import (
    SymbolStack,
    _decoder,
    _plan,
    _reader,
    _window_decoder,
    assemble_states,
    unit_label,
)
from pdanet.constructions.realtime import RealtimeTable, store_codes
from pdanet.constructions.realtime import table as realtime_table
from pdanet.constructions.stacks.buffered import InputBuffer, OutputBuffer
from pdanet.constructions.stacks.grefenstette import NeuralStack
from pdanet.constructions.stacks.protocol import SymbolCodes
from pdanet.errors import CompileError, InputError, PdanetError

BETA = 4096
MARGIN_LSTM = Fraction(3, 8)
MARGIN_LINEAR = Fraction(1, 2)
TAU = sp.tanh(1)


@dataclass(frozen=True, eq=False)
class PaperController(Abstraction):
    """A source paper's controller driving a differentiable store (`pdanet.models`).

    ``model`` names it (``hao_linear``, ``hao_lstm``, ``joulin_mikolov``); ``cell`` the
    controller's recurrence (``linear``, ``lstm``, ``sigmoid``); ``units[j]`` the meaning of
    hidden unit ``j + (start is not None)`` as (c, a, R, c2); ``memory``/``store`` the store
    family and the machine's store kind; ``codes`` the (G + 1, width) 0/1 symbol codes (row G:
    empty); ``active`` the value of an active hidden unit (τ = tanh 1 for the LSTM, 1 for a
    sigmoid unit)."""

    model: str = ""
    cell: str = ""
    memory: str = "grefenstette"
    store: str = "stack"
    code: str = "binary"
    codes: np.ndarray = None  # type: ignore[assignment]
    start: int | None = 0
    units: tuple[ControllerUnit, ...] = ()
    active: Any = 1


def _ids(ids: Any, device: torch.device) -> torch.Tensor:
    ids = torch.as_tensor(ids)
    if ids.dim() != 2:
        raise InputError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
    return ids.to(device)


# --- the memory of forward_window ---------------------------------------------------------------
class NotExact(Exception):
    """Raised inside a windowed run at the first step where the discrete memory is not provably
    the differentiable one; ``forward_window`` then returns None."""


class WindowStack:
    """A stack memory kept as symbol ids (`SymbolStack`) with the interface of a `Store.run`
    (``idle``, ``step``, ``k``/``BLOCK``, ``flush``), for ``forward_window``: O(1) per step.

    ``step(act, value, valid)`` checks, on every valid row, that the action row is exactly the
    encoding of one of the store's one-step ops (``ops``: (n_ops, channels) 0/1 rows; for the
    Grefenstette stack push d and pop u each exactly 0 or 1, for the superposition stack a one-hot
    (push, no-op, pop)), that the value vector is finite and, where the row pushes, exactly the code
    of a store symbol; raises `NotExact` otherwise (and where a stack of fixed ``depth`` would
    drop its bottom cell). Under those conditions every strength (occupancy) of the
    differentiable stack stays exactly 0 or 1 and its step is a discrete one — pop the top live
    cell (pop = 1, a no-op on the empty stack), then push the value (push = 1) — and its reading
    is exactly the code of the new top (row G, all zero, when empty): Grefenstette et al. (2015)
    Eqs. 1–3 with 0/1 strengths; the superposition update of Joulin & Mikolov (2015) with a
    one-hot action. So the reading returned is the one the differentiable store returns, bit for
    bit. Invalid (padding) rows keep their memory and reading."""

    BLOCK = -1                                   # never full: nothing to flush

    def __init__(self, B: int, T: int, cells: int, codes: np.ndarray, like: torch.Tensor,
                 ops: np.ndarray, channels: tuple[str, ...], depth: int | None = None):
        self.stack = SymbolStack(B, T, cells, codes)
        self.codes_np = np.asarray(codes)
        self.codes = torch.as_tensor(self.codes_np, dtype=like.dtype, device=like.device)
        self.ops = np.asarray(ops, dtype=np.float64)
        self.nA, self.depth = len(channels), depth
        self.i_push, self.i_pop = channels.index("push"), channels.index("pop")
        self.r = like.new_zeros(B, self.codes_np.shape[1])
        self.t, self.k = 0, 0

    def idle(self, act: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        return act                               # `step` leaves invalid rows unchanged

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        head = torch.cat([act, value], 1).double().cpu().numpy()
        a, val = head[:, :self.nA], head[:, self.nA:]
        v = np.ones(len(a), dtype=bool) if valid is None else valid.cpu().numpy()
        ok = (a[:, None, :] == self.ops).all(-1).any(-1) & np.isfinite(val).all(-1)
        push = (a[:, self.i_push] == 1) & v
        pop = (a[:, self.i_pop] == 1) & v
        stack = self.stack
        sym = stack.symbols(val) if push.any() else np.full(len(a), -1, dtype=np.int64)
        ok &= ~push | ((sym >= 0) & (val == self.codes_np[np.maximum(sym, 0)]).all(-1))
        if not ok[v].all():
            raise NotExact(f"step {self.t}")
        if self.depth is not None and (push & (stack.n - (pop & (stack.n > 0)) >= self.depth)).any():
            raise NotExact(f"step {self.t}: a stack of {self.depth} cells drops its bottom")
        top = stack.step(self.t, push, pop, sym)
        r = self.codes[torch.from_numpy(top).to(self.codes.device)]
        if valid is not None:
            r = torch.where(valid.unsqueeze(1), r, self.r)
        self.r, self.t = r, self.t + 1
        return r

    def flush(self) -> None:
        return None

    def states(self, hs: torch.Tensor, rs: torch.Tensor) -> torch.Tensor:
        """[h_t; r_t; n_t; the top cells' symbol ids, top first, −1 below] (B, T+1, ·)."""
        return torch.cat([hs, rs, self.stack.tail(hs)], 2)


class _ExactRuns(nn.Module):
    """The run plumbing of the stack RNNs here and in `pdanet.models.joulin_mikolov`: a subclass
    defines ``_run(ids, keep, cells=None, ...)`` → (states, logits, trace), which raises
    `NotExact` in a windowed run (``cells`` set) at the first step its discrete memory is not
    provably the differentiable one, and ``width`` (the stack reading's size). The class
    docstring says which conditions make its `forward_window` exact."""

    @property
    def reading_size(self) -> int:
        return self.width

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        states, logits, _ = self._run(ids, False)
        return states, logits

    def _exact(self, ids: torch.Tensor, *args: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``_run(ids, False, *args)``'s (states, logits), or None where it raises `NotExact`."""
        try:
            states, logits, _ = self._run(ids, False, *args)
        except NotExact:
            return None
        return states, logits

    def _control_window(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`forward_window`'s result where the decoder reads the controller state alone
        (``control_only``: set at compile for a DFA or Mealy machine), else None."""
        return self.forward_window(ids) if getattr(self, "control_only", False) else None

    @torch.no_grad()
    def forward_window(self, ids: torch.Tensor, cells: int = 3
                       ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`forward` in O(1) per step with the stack kept as symbol ids, or None where that is
        not provably exact. Returns (states (B, T+1, H + m + 1 + cells), logits): states[t] =
        [h_t; r_t; n_t; the symbol ids of the top ``cells`` cells, top first, −1 below the
        bottom]; logits as `forward`'s.

        Why it is exact: it runs the same controller and heads as `forward` on the same inputs;
        only the memory differs (`WindowStack`), which proves at every valid step the
        conditions the class docstring names, under which the differentiable stack's step is
        the discrete stack's. At the first step where that fails it returns None (only
        `forward` then tells what the network does)."""
        return self._exact(ids, cells)

    @torch.no_grad()
    def forward_decoded(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What `pdanet.verify` runs: `forward`, or — where the compiled network's decoder reads
        the controller state alone (``control_only``: set at compile for a DFA or Mealy machine)
        — `forward_window`'s states and logits when it proves them exact: the same h_t and
        logits in O(1) per step."""
        out = self._control_window(ids)
        return out if out is not None else self.forward(ids)


# --- the module -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class HaoBlocks:
    """`HaoStackRNN`'s weights by meaning. ``heads_weight``/``heads_bias``: the rows push d,
    pop u, value v (m rows), output y (O rows), on [x_t; r_{t−1}] ((2 + m + O, K + m), linear
    controller) or on h_t ((2 + m + O, H), LSTM), §2.2. LSTM only (None for the linear
    controller): ``weight_ih`` (4H, K + m) on [x_t; r_{t−1}] and ``weight_hh`` (4H, H), biases
    ``bias_ih``, ``bias_hh`` (gate rows i, f, g, o), the initial state ``h0``, ``c0``."""

    heads_weight: Any
    heads_bias: Any
    weight_ih: Any = None
    weight_hh: Any = None
    bias_ih: Any = None
    bias_hh: Any = None
    h0: Any = None
    c0: Any = None


class HaoStackRNN(_ExactRuns):
    """Hao et al. (2018) §2: a linear or LSTM controller driving a Grefenstette neural stack.

    Parameters (paper names): ``pop`` (W_u, b_u), ``push`` (W_d, b_d), ``value`` (W_v, b_v),
    ``out`` (W_y, b_y) — affine maps of [x_t; r_{t−1}] (linear) or of h_t (LSTM); the LSTM adds
    ``cell`` (an `nn.LSTMCell` on [x_t; r_{t−1}], gates i, f, g, o) and the initial state ``h0``,
    ``c0``. Random initialisation by default (PyTorch's), as the paper trains it.

    ``forward(ids (B, T), −1 padding)`` → (states (B, T+1, H + m + 1 + D), logits (B, T+1, O)):
    states[t] = [h_t; r_t; n_t; the n_t live cells' symbol ids, bottom first] (H = 0 for the
    linear controller), logits[t] = y_t. Padding leaves a row's whole state unchanged.

    Why `forward_window` is exact: `WindowStack` proves at every valid step that push d_t and
    pop u_t are exactly 0 or 1, v_t is finite and, when pushed, exactly a symbol's code — then
    the neural stack (Grefenstette et al. 2015, Eqs. 1–3) has 0/1 strengths, its step is
    pop-then-push of one cell and its reading the top cell's code, which is what the discrete
    stack returns."""

    def __init__(self, num_symbols: int, codes: np.ndarray, num_outputs: int,
                 controller: str = "lstm", hidden: int = 10):
        super().__init__()
        if controller not in ("linear", "lstm"):
            raise InputError(f"controller must be 'linear' or 'lstm', got {controller!r}")
        if num_symbols < 1 or num_outputs < 1 or (controller == "lstm" and hidden < 1):
            raise InputError(f"HaoStackRNN needs ≥ 1 symbol, output and hidden unit, got "
                             f"{num_symbols}, {num_outputs}, {hidden}")
        codes = np.asarray(codes)
        self.controller, self.num_symbols = controller, num_symbols
        self.width = codes.shape[1]
        self.hidden = 0 if controller == "linear" else hidden
        fan_in = num_symbols + self.width if controller == "linear" else hidden
        if controller == "lstm":
            self.cell = nn.LSTMCell(num_symbols + self.width, hidden)       # §2.2, LSTM
            self.h0 = nn.Parameter(torch.zeros(hidden))
            self.c0 = nn.Parameter(torch.zeros(hidden))
        self.pop = nn.Linear(fan_in, 1)                                     # u_t = σ(W_u · + b_u)
        self.push = nn.Linear(fan_in, 1)                                    # d_t = σ(W_d · + b_d)
        self.value = nn.Linear(fan_in, self.width)                          # v_t = σ(W_v · + b_v)
        self.out = nn.Linear(fan_in, num_outputs)                           # y_t = W_y · + b_y
        self.store = NeuralStack()
        self.codes = SymbolCodes(codes)

    def _heads(self) -> tuple[torch.Tensor, torch.Tensor]:
        W = torch.cat([self.push.weight, self.pop.weight, self.value.weight, self.out.weight])
        b = torch.cat([self.push.bias, self.pop.bias, self.value.bias, self.out.bias])
        return W, b

    def blocks(self, numpy: bool = False) -> HaoBlocks:
        """The weights by meaning (`HaoBlocks`): tensors (the heads concatenated, new tensors),
        or with ``numpy`` detached float64 arrays."""
        conv = (lambda t: t.detach().double().cpu().numpy()) if numpy else (lambda t: t)
        W, b = self._heads()
        if self.controller == "linear":
            return HaoBlocks(heads_weight=conv(W), heads_bias=conv(b))
        cell = self.cell
        return HaoBlocks(heads_weight=conv(W), heads_bias=conv(b),
                         weight_ih=conv(cell.weight_ih), weight_hh=conv(cell.weight_hh),
                         bias_ih=conv(cell.bias_ih), bias_hh=conv(cell.bias_hh),
                         h0=conv(self.h0), c0=conv(self.c0))

    @torch.no_grad()
    def trace_actions(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """The stack instructions of every step of ``forward(ids)``: ``push`` d_t and ``pop``
        u_t (B, T), ``value`` v_t (B, T, m)."""
        return self._run(ids, True)[2]

    def _memory(self, B: int, T: int, like: torch.Tensor, cells: int | None):
        """The store's run (`Store.run`), or with ``cells`` its discrete `WindowStack`."""
        if cells is None:
            return self.store.run(B, T, like, self.codes)
        ops = [self.store.actions(op) for op in self.store.ops]
        return WindowStack(B, T, cells, np.asarray(self.codes.codes), like, np.array(ops),
                           self.store.channels, getattr(self.store, "depth", None))

    def _run(self, ids: Any, keep: bool, cells: int | None = None):
        W, b = self._heads()
        ids = _ids(ids, W.device)
        B, T = ids.shape
        valid = ids >= 0
        padded = (~valid).any(0).tolist()
        m, K = self.width, self.num_symbols
        idx = ids.clamp(min=0)
        mem = self._memory(B, T, W.new_zeros(1, 1), cells)
        r = W.new_zeros(B, m)
        blocks = [(W.new_zeros(B, 1, 0), W.new_zeros(B, 1))]
        rs, ys, acts = [r], [], []
        linear = self.controller == "linear"
        if linear:
            pre = W[:, :K].T[idx] + b                       # the x_t part of every head, all t
            Wr = W[:, K:].T
            ys.append(b[2 + m:].expand(B, -1))              # y_0: x = 0, r = 0
            hs = [W.new_zeros(B, 0)]
        else:
            Wi = self.cell.weight_ih
            pre = Wi[:, :K].T[idx] + (self.cell.bias_ih + self.cell.bias_hh)
            Wir, Whh = Wi[:, K:].T, self.cell.weight_hh.T
            h = self.h0.view(1, -1).expand(B, -1)
            c = self.c0.view(1, -1).expand(B, -1)
            hs = [h]
            ys.append(torch.addmm(b[2 + m:], h, W[2 + m:].T))
            Wt = W.T
        for t in range(T):
            v_t = valid[:, t:t + 1] if padded[t] else None
            if linear:
                z = torch.addmm(pre[:, t], r, Wr)           # W [x_t; r_{t−1}] + b  (§2.2)
            else:
                gates = torch.addmm(torch.addmm(pre[:, t], r, Wir), h, Whh)
                i, f, g, o = gates.chunk(4, 1)              # LSTM gates (§2.2, standard LSTM)
                c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h_new = torch.sigmoid(o) * torch.tanh(c_new)
                if v_t is not None:
                    h_new, c_new = torch.where(v_t, h_new, h), torch.where(v_t, c_new, c)
                h, c = h_new, c_new
                hs.append(h)
                z = torch.addmm(b, h, Wt)                   # linear(h_t)
            act = torch.sigmoid(z[:, :2])                   # d_t, u_t = σ(·)  (§2.2)
            value = torch.sigmoid(z[:, 2:2 + m])            # v_t = σ(·)
            ys.append(z[:, 2 + m:])                         # y_t
            if v_t is not None:
                act = mem.idle(act, v_t[:, 0])
            r = mem.step(act, value, None if v_t is None else v_t[:, 0])   # §2.1: pop, push, read
            if keep:
                acts.append((act, value))
            rs.append(r)
            if linear:
                hs.append(hs[0])
            if cells is None and (mem.k == mem.BLOCK or t == T - 1):
                blocks.append(mem.flush())
        hs_t, rs_t = torch.stack(hs, 1), torch.stack(rs, 1)
        states = (assemble_states(hs_t, rs_t, blocks) if cells is None
                  else mem.states(hs_t, rs_t))
        trace = {}
        if keep:
            a = torch.stack([x for x, _ in acts], 1) if acts else W.new_zeros(B, 0, 2)
            trace = {"push": a[..., 0], "pop": a[..., 1],
                     "value": torch.stack([v for _, v in acts], 1) if acts
                     else W.new_zeros(B, 0, m)}
        return states, torch.stack(ys, 1), trace


# --- the linear controller's heads: difference constraints --------------------------------------
def _threshold_head(on: dict, rows: list, cols: list) -> tuple[dict, dict] | None:
    """Integers α (rows) and γ (cols) with α_a + γ_R ≥ 1 where ``on[(a, R)]`` and ≤ −1 where
    not (pairs absent from ``on``: don't care), or None when there are none. As difference
    constraints on (α, β = −γ) every edge weighs −1, so a solution exists iff the constraint
    graph has no cycle; Bellman–Ford from a virtual source gives one."""
    nodes = [("a", a) for a in rows] + [("R", R) for R in cols]
    index = {n: i for i, n in enumerate(nodes)}
    edges = []                                    # x_dst ≤ x_src + w, w = −1
    for (a, R), bit in on.items():
        ia, iR = index[("a", a)], index[("R", R)]
        edges.append((ia, iR) if bit else (iR, ia))   # β_R ≤ α_a − 1 / α_a ≤ β_R − 1
    dist = [0] * len(nodes)
    for _ in range(len(nodes)):
        changed = False
        for s, d in edges:
            if dist[s] - 1 < dist[d]:
                dist[d] = dist[s] - 1
                changed = True
        if not changed:
            break
    else:
        if any(dist[s] - 1 < dist[d] for s, d in edges):
            return None
    alpha = {a: dist[index[("a", a)]] for a in rows}
    gamma = {R: -dist[index[("R", R)]] for R in cols}
    return alpha, gamma


def _linear_heads(plan, codes: np.ndarray) -> tuple[dict, str | None]:
    """Exact weights of the linear controller's heads, or the reason it cannot express the
    machine (``(weights, None)`` or ``({}, reason)``)."""
    v = plan.view
    K, G = v.K, v.G
    cs = {plan.c0} | {u.c for u in plan.units} | {u.c2 for u in plan.units}
    if len(cs) > 1:
        return {}, (f"it needs {len(cs)} controller states and the linear controller has no "
                    "hidden state (its decisions are functions of (x_t, r_{t−1}) alone)")
    if v.output == "accept" and v.empty_stack:
        return {}, ("its empty-stack verdict after a step depends on the stack below the top, "
                    "which y_t = W_y [x_t; r_{t−1}] does not see")
    readings = sorted({G} | {y for u in plan.units for y in u.push if y >= 0})
    moves = {}
    for u in plan.units:
        for R in ([u.R] if u.R is not None else readings):
            moves[(u.a, R)] = u
    rows, cols = list(range(K)), list(range(G + 1))
    n_out = 1 if v.output == "accept" else v.n_out
    m = codes.shape[1]
    tables: list[tuple[str, dict]] = [
        ("push", {k: bool(u.act[0]) for k, u in moves.items()}),
        ("pop", {k: bool(u.act[1]) for k, u in moves.items()})]
    for bit in range(m):
        tables.append((f"value bit {bit}", {k: bool(codes[u.push[0]][bit]) for k, u in moves.items()
                                            if u.push[0] >= 0}))
    empty_row = "start"
    for k in range(n_out):
        if v.output == "accept":
            on = {key: bool(v.accepting[plan.q_of(u.c2)]) for key, u in moves.items()}
            on[(empty_row, G)] = bool(v.accepting[plan.q_of(plan.c0)])
        else:
            on = {key: u.out == k for key, u in moves.items()}
            on[(empty_row, G)] = False
        tables.append((f"output {k}", on))
    Fr = Fraction
    Wx = np.full((len(tables), K), Fr(0), dtype=object)
    Wr = np.full((len(tables), m), Fr(0), dtype=object)
    bias = np.full(len(tables), Fr(0), dtype=object)
    for i, (name, on) in enumerate(tables):
        sol = _threshold_head(on, rows + ([empty_row] if i >= 2 + m else []), cols)
        if sol is None:
            return {}, (f"its {name} head is no threshold function of [x_t; r_{{t−1}}] (its table "
                        "over (input, stack top) has a cycle of on/off constraints, as XOR does)")
        alpha, gamma = sol
        base = alpha.get(empty_row, 0) + gamma[G]
        bias[i] = Fr(base, 2)
        for a in rows:
            Wx[i, a] = Fr(alpha[a] + gamma[G] - base, 2)
        for R in range(G):                        # one-hot codes: column R of the reading
            Wr[i, int(np.argmax(codes[R]))] = Fr(gamma[R] - gamma[G], 2)
    W = np.concatenate([Wx, Wr], 1)
    out_rows = slice(2 + m, 2 + m + n_out)
    if v.output == "symbol":                      # the "no output" logit: 0
        W = np.concatenate([W, np.full((1, K + m), Fr(0), dtype=object)])
        bias = np.concatenate([bias, np.array([Fr(0)], dtype=object)])
        out_rows = slice(2 + m, 3 + m + n_out)
    w = {}
    for name, rows_ in (("push", slice(0, 1)), ("pop", slice(1, 2)), ("value", slice(2, 2 + m)),
                        ("out", out_rows)):
        w[f"{name}.weight"] = ExactWeight.of(W[rows_])
        w[f"{name}.bias"] = ExactWeight.of(bias[rows_])
    return w, None


# --- the LSTM controller's weights --------------------------------------------------------------
def _lstm_weights(plan, codes: np.ndarray) -> tuple[dict, int]:
    v, units = plan.view, plan.units
    K, m = v.K, codes.shape[1]
    Fr = Fraction
    H = len(units) + 1                                   # unit 0: start
    into = plan.incoming()
    W_ih = np.full((4 * H, K + m), Fr(0), dtype=object)
    W_hh = np.full((4 * H, H), Fr(0), dtype=object)
    bias = np.full(4 * H, Fr(0), dtype=object)
    bias[0] = Fr(-1)                                     # i of the start unit: off after t = 0
    bias[H:2 * H] = Fr(-1)                               # f = σ(−β) = 0
    bias[2 * H:3 * H] = Fr(1)                            # g = tanh(β) = 1
    bias[3 * H:] = Fr(1)                                 # o = σ(β) = 1
    for j, u in enumerate(units):
        i = j + 1
        W_ih[i, u.a] = Fr(1)                             # x_t[a]
        for src in into.get(u.c, ()):
            W_hh[i, src] = Fr(1)                         # Σ_{i→c} h_{t−1,i}
        bias[i] = -(Fr(11, 8) if u.R is None else Fr(19, 8))
        if u.R is not None:                              # m_R(r_{t−1})
            cR = codes[u.R]
            W_ih[i, K:K + m] = [Fr(int(2 * b - 1)) for b in cR]
            bias[i] += Fr(int(1 - cR.sum()))
    w: dict[str, Any] = {"cell.weight_ih": ExactWeight.of(W_ih),
                         "cell.weight_hh": ExactWeight.of(W_hh),
                         "cell.bias_ih": ExactWeight.of(bias),
                         "cell.bias_hh": ExactWeight.of(np.zeros(4 * H, dtype=np.int64))}
    h0 = np.zeros(H, dtype=np.int64)
    h0[0] = 1
    w["h0"] = ExactWeight.of(h0, scaled=False)
    w["c0"] = ExactWeight.of(np.zeros(H, dtype=np.int64), scaled=False)

    def head(name: str, coef: np.ndarray, start: np.ndarray | None = None) -> None:
        """Rows Σ_j coef[k, j] h_{j+1} (+ start[k] h_0) − 3/8, times β."""
        Wm = np.zeros((coef.shape[0], H), dtype=np.int64)
        Wm[:, 1:] = coef
        if start is not None:
            Wm[:, 0] = start
        b = np.full(coef.shape[0], -MARGIN_LSTM, dtype=object)
        w[f"{name}.weight"], w[f"{name}.bias"] = ExactWeight.of(Wm), ExactWeight.of(b)

    head("push", np.array([[u.act[0] for u in units]], dtype=np.int64))
    head("pop", np.array([[u.act[1] for u in units]], dtype=np.int64))
    val = np.zeros((m, len(units)), dtype=np.int64)
    for j, u in enumerate(units):
        if u.push[0] >= 0:
            val[:, j] = codes[u.push[0]]
    head("value", val)
    if v.output == "symbol":
        out = np.zeros((v.n_out + 1, len(units)), dtype=np.int64)
        for j, u in enumerate(units):
            if u.out >= 0:
                out[u.out, j] = 1
        head("out", out)
        w["out.bias"] = ExactWeight.of(np.array([-MARGIN_LSTM] * v.n_out + [0], dtype=object))
    else:
        acc = np.array([[int(v.accepting[plan.q_of(u.c2)]) for u in units]], dtype=np.int64)
        head("out", acc, np.array([int(v.accepting[plan.q_of(plan.c0)])]))
    return w, H


def _linear_decoder(plan, codes: np.ndarray, window: bool = False):
    """The stack-RNN decoder (with ``window``: the window decoder of ``forward_window``'s
    states) for states without controller units (one controller state)."""
    n = len(plan.units)
    inner = (_window_decoder if window else _decoder)(plan, codes, n, True)

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        pad = np.zeros(states.shape[:2] + (n,), dtype=states.dtype)
        return inner(np.concatenate([pad, states], -1))

    return decode


# --- compile -------------------------------------------------------------------------------------
def stack_view(machine: Any, model: str, memory: str) -> RealtimeTable:
    """The real-time table of a deterministic machine with a stack whose recogniser accepts by
    final state — what a paper model with a one-stack memory and a controller-only readout
    compiles; CompileError naming the target that can otherwise."""
    if isinstance(machine, PDA) and not isinstance(machine, DeterministicPushdown):
        raise CompileError(f"{machine!r} is nondeterministic; the {model} model drives a "
                           f"deterministic {memory}. Compile it to the nondeterministic stack "
                           "of DuSell & Chiang: pn.compile(machine, target='ns_rnn')")
    view = realtime_table(machine)
    if view.kind != "stack":
        raise CompileError(f"{machine!r} uses a {view.kind}; the {model} model has a {memory}. "
                           "Compile it with target 'stack_rnn', method 'grefenstette' "
                           "(NeuralQueue / NeuralDeQue)")
    if view.output == "accept" and view.empty_stack:
        raise CompileError(f"{machine!r} accepts by empty stack; the {model} readout y_t reads "
                           "the controller only, not the stack after step t. Compile it with "
                           "target 'stack_rnn', method 'grefenstette' (its readout reads r_t)")
    return view


def unit_controller(module: nn.Module, view: Any, plan: Any, codes: np.ndarray, H: int, *,
                    model: str, cell: str, memory: str, code: str, active: Any
                    ) -> PaperController:
    """Attach what `pn.verify` needs to a compiled controller with one unit per acting
    transition (the top cells for a pushdown machine's long strings; h_t alone for a DFA) and
    return its abstraction: a start unit, then one unit per `plan` unit."""
    if view.fields == "pushdown":          # long strings: verify compares the top cells only
        module.window_decoder = _window_decoder(plan, codes, H, False)
    module.control_only = view.fields == "dfa"      # the decoder reads h_t alone
    units = tuple(ControllerUnit(u.c, u.a, u.R, u.c2) for u in plan.units)
    return PaperController(
        labels=("start",) + tuple(unit_label(u) for u in units), model=model, cell=cell,
        memory=memory, store="stack", code=code, codes=codes, start=0, units=units,
        active=active)


def _view_and_plan(machine: Any, model: str):
    """The real-time table and controller plan for a Hao model (CompileError naming the model
    that can where this one cannot)."""
    view = stack_view(machine, model, "neural stack")
    return view, _plan(view, NeuralStack())


def requires_hao_lstm(machine: Any) -> str | PdanetError | None:
    """Why ``machine`` cannot compile to model ``hao_lstm`` (None: it can)."""
    try:
        _view_and_plan(machine, "hao_lstm")
    except PdanetError as exc:
        return exc
    return None


def requires_hao_linear(machine: Any) -> str | PdanetError | None:
    """Why ``machine`` cannot compile to model ``hao_linear`` (None: it can)."""
    try:
        view, plan = _view_and_plan(machine, "hao_linear")
    except PdanetError as exc:
        return exc
    _, why = _linear_heads(plan, store_codes(view.G, "one_hot"))
    if why is not None:
        return CompileError(f"{machine!r} cannot run on Hao et al.'s linear controller: {why}; "
                            "compile it with model 'hao_lstm'")
    return None


def _check_size(machine: Any, H: int, K: int, m: int, O: int, model: str) -> None:
    params = 4 * H * (K + m + H) + H * (m + 2 + O)
    what = f"compiling {machine!r} to {model} ({H:,} hidden units)"
    hint = ("compile it with model 'grefenstette_lstm' or 'grefenstette_rnn', which factor the "
            "symbols a machine copies (`pdanet.models.grefenstette.estimate(machine)` gives "
            "their size), or use a smaller machine (for a task, a smaller vocabulary)")
    limits.check(what, H, "max_units", hint=hint)
    limits.check(f"{what}, {params:,} parameters", 32 * params, "max_bytes", hint=hint)


def _compile(machine: Any, controller: str, dtype: Any, code: str) -> CompiledNetwork:
    model = f"hao_{controller}"
    dtype = as_dtype(dtype)
    view, plan = _view_and_plan(machine, model)
    n_out = 1 if view.output == "accept" else view.n_out + 1
    if controller == "linear":
        if code != "one_hot":
            raise InputError("the linear controller codes stack symbols one-hot (its heads are "
                             "threshold functions of the reading); leave `code` at 'one_hot'")
        codes = store_codes(view.G, "one_hot")
        weights, why = _linear_heads(plan, codes)
        if why is not None:
            raise CompileError(f"{machine!r} cannot run on Hao et al.'s linear controller: "
                               f"{why}; compile it with model 'hao_lstm'")
        H, margin = 0, MARGIN_LINEAR
        _check_size(machine, 1, view.K, codes.shape[1], n_out, model)
    else:
        codes = store_codes(view.G, code)
        H = len(plan.units) + 1
        _check_size(machine, H, view.K, codes.shape[1], n_out, model)
        weights, H = _lstm_weights(plan, codes)
        margin = MARGIN_LSTM
    module = HaoStackRNN(view.K, codes, n_out, controller, max(H, 1))
    module = load_exact(module, weights, BETA, dtype)
    linear = controller == "linear"
    if linear:                             # one state: no units, decoded from the readings
        if view.fields == "pushdown":
            module.window_decoder = _linear_decoder(plan, codes, window=True)
        module.control_only = view.fields == "dfa"
        abstraction = PaperController(labels=(), model=model, cell=controller,
                                      memory="grefenstette", store="stack", code=code,
                                      codes=codes, start=None, units=(), active=1)
    else:
        abstraction = unit_controller(module, view, plan, codes, H, model=model, cell=controller,
                                      memory="grefenstette", code=code, active=TAU)
    Qs, Ks, Gs = sp.symbols("Q K G")
    bound = sp.Integer(0) if linear else Qs * Ks * (Gs + 1) + 1
    info = {"model": model, "controller": controller, "memory": "grefenstette", "store": "stack",
            "hidden_units": H, "controller_states": len({plan.c0} | {u.c2 for u in plan.units}),
            "units_with_reading": sum(u.R is not None for u in plan.units),
            "num_states": view.Q, "num_inputs": view.K, "num_store_symbols": view.G,
            "code": code, "code_width": codes.shape[1],
            "position_bytes": limits.position_bytes(H, "rnn" if linear else "lstm",
                                                    2 * codes.shape[1] + n_out),
            "step": "one network step reads one input symbol and applies one stack step "
                    "(pop u, push v with strength d, read); a replace is pop + push"}
    arg = ("linear heads: every score is ±1/2 or beyond (difference-constraint solution), β = "
           f"{BETA} makes σ exactly 0/1" if linear else
           "LSTM: input gates ±3/8 or beyond (active unit h = tanh 1 ≥ 3/4), forget/candidate/"
           f"output gates ±1; β = {BETA} gives |βz| ≥ 1536, where σ and tanh are exactly 0, 1, "
           "±1 in float32 and float64, so strengths, values and readings stay exact")
    return CompiledNetwork(
        machine=machine, module=module, target="stack_rnn", method=model, hidden_units=H,
        bound=bound, params={"Q": view.Q, "K": view.K, "G": view.G}, weights=weights,
        scale=sp.Integer(BETA), decoder=_linear_decoder(plan, codes) if linear else
        _decoder(plan, codes, H, False), reader=_reader(view),
        margin=sp.Rational(margin.numerator, margin.denominator), steps_per_symbol=1,
        scale_argument=arg, abstraction=abstraction, info=info)


def compile_hao_lstm(machine: Any, dtype: torch.dtype = torch.float32, code: str = "binary",
                     **options: Any) -> CompiledNetwork:
    """Compile a real-time DPDA (final-state acceptance), DPDT or Mealy machine into Hao et
    al.'s LSTM controller + neural stack (module docstring). ``code``: "binary" or "one_hot"
    stack-symbol codes. Hidden units: one per (controller state, input, stack top) that acts
    differently, plus a start unit (bound Q·K·(G+1) + 1)."""
    if options:
        raise InputError(f"compile_hao_lstm takes dtype and code, not {sorted(options)}")
    return _compile(machine, "lstm", dtype, code)


def compile_hao_linear(machine: Any, dtype: torch.dtype = torch.float32, code: str = "one_hot",
                       **options: Any) -> CompiledNetwork:
    """Compile a one-state real-time machine into Hao et al.'s linear controller + neural stack
    (module docstring: which machines it expresses; CompileError naming ``hao_lstm`` for
    others). No hidden units; stack symbols are coded one-hot."""
    if options:
        raise InputError(f"compile_hao_linear takes dtype and code, not {sorted(options)}")
    return _compile(machine, "linear", dtype, code)


# --- the buffered model (§2.3) -------------------------------------------------------------------
class HaoBufferedStackRNN(HaoStackRNN):
    """Hao et al. (2018) §2.3: the LSTM controller and neural stack of `HaoStackRNN` plus a
    read-only input buffer and a write-only output buffer (`InputBuffer`, `OutputBuffer`:
    neural queues). Step t pops the input buffer with strength i_{t−1} (i_0 = 0) and reads x_t
    from its front; the controller emits the stack instructions, the output vector y_t and the
    buffer strengths i_t = σ(·), o_t = σ(·) (head ``io``); y_t is enqueued with strength o_t.
    The module runs one step per input symbol. ``forward`` → (states, logits): states as
    `HaoStackRNN`; logits[:, t] is the output vector that step t enqueued, read back by draining
    the output buffer (§2.3: dequeue 1, read 1, repeatedly), or the "no output" one-hot where
    step t enqueued nothing (o_t ≤ 1/2)."""

    def __init__(self, num_symbols: int, codes: np.ndarray, num_outputs: int, hidden: int = 10):
        super().__init__(num_symbols, codes, num_outputs, "lstm", hidden)
        self.io = nn.Linear(hidden, 2)                                      # i_t, o_t = σ(·)

    def output_tape(self, ids: torch.Tensor, steps: int | None = None) -> torch.Tensor:
        """The paper's output (§2.3): after the last step, dequeue 1 and read 1 from the
        output buffer, ``steps`` times (default: the number of input symbols) → (B, steps, O).
        Differentiable in every y_t and o_t; the loss a buffered model trains on."""
        _, ys, os_, _ = self._steps(ids, False)
        B, O = ys.shape[0], self.out.out_features
        steps = ys.shape[1] if steps is None else steps
        if steps < 0:
            raise InputError(f"steps must be ≥ 0, got {steps}")
        outbuf = OutputBuffer()
        return outbuf.drain(outbuf.scan(ys, os_), steps) if ys.shape[1] else ys.new_zeros(B, 0, O)

    @torch.no_grad()
    def forward_window(self, ids: torch.Tensor, cells: int = 3
                       ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`forward` in O(1) per step, or None where that is not provably exact: the stack kept
        as symbol ids (as `HaoStackRNN.forward_window`) and both buffers as discrete queues
        (see `forward_decoded`). states[t] = [h_t; r_t; n_t; the top ``cells`` symbol ids, top
        first, −1 below the bottom]; logits as `forward`'s."""
        return self._exact(ids, cells, True)

    @torch.no_grad()
    def forward_decoded(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward`, computed with both buffers kept as discrete queues where that is provably
        exact (O(1) per step for the buffers instead of O(T)); else `forward` itself.

        Why it is exact: when the input pop strength i_t is exactly 1 at every valid step that
        a valid step follows (and i_0 = 0, §2.3), every item of the input buffer has strength
        exactly 0 or 1 and step t reads exactly the one-hot of the t-th input symbol (Eqs. 4–5
        with 0/1 strengths); when o_t is exactly 0 or 1 at every valid step (0 on padding) and
        every y_t is finite, draining the output buffer reads exactly the y_t of the steps that
        enqueued, in order, so ``logits[:, t]`` is y_t where o_t = 1 and the "no output" one-hot
        elsewhere. These conditions are checked on the values the heads compute. Where the
        decoder reads the controller state alone (``control_only``, a Mealy machine), the stack
        is kept as symbol ids too (`forward_window`)."""
        out = self._control_window(ids)
        if out is None:
            out = self._exact(ids, None, True)
        return out if out is not None else self.forward(ids)

    def _run(self, ids: Any, keep: bool, cells: int | None = None, discrete: bool = False):
        states, Y, S, trace = self._steps(ids, keep, cells, discrete)
        B, T, O = Y.shape
        none = Y.new_zeros(O)
        none[O - 1] = 1
        logits = none.expand(B, T + 1, O).clone()
        if T and discrete:                      # o_t exactly 0/1: the drained y_t, in place
            got = torch.where((S == 1).unsqueeze(2), Y, none)
            logits = torch.cat([logits[:, :1], got], 1)
        elif T:
            emitted = S > 0.5
            count = torch.round(S).cumsum(1).long()                         # e_t
            total = int(count[:, -1].max())
            outbuf = OutputBuffer()
            drained = outbuf.drain(outbuf.scan(Y, S), total)                # §2.3: the output
            drained = torch.cat([drained, none.expand(B, 1, O)], 1)
            idx = torch.where(emitted, count - 1, total).clamp(min=0)
            got = torch.gather(drained, 1, idx.unsqueeze(2).expand(-1, -1, O))
            logits = torch.cat([logits[:, :1], got], 1)
        return states, logits, trace

    def _steps(self, ids: Any, keep: bool, cells: int | None = None, discrete: bool = False):
        """The controller's run: (states, y (B, T, O), o (B, T), trace). ``cells``: the stack as
        symbol ids (`WindowStack`); ``discrete``: the buffers as discrete queues, raising
        `NotExact` where that is not exact (`forward_decoded`)."""
        W, b = self._heads()
        W = torch.cat([W, self.io.weight])
        b = torch.cat([b, self.io.bias])
        ids = _ids(ids, W.device)
        B, T = ids.shape
        if T > 1 and bool((ids[:, :-1] < 0).logical_and(ids[:, 1:] >= 0).any()):
            raise InputError("padding (-1) must come after each row's symbols")
        valid = ids >= 0
        padded = (~valid).any(0).tolist()
        m, K, O = self.width, self.num_symbols, self.out.out_features
        items = torch.nn.functional.one_hot(ids.clamp(min=0), K).to(W.dtype)     # I_0
        inbuf = InputBuffer()
        if not discrete:
            state_in = inbuf.init_state(items, valid.sum(1))
        else:
            valid_np = valid.cpu().numpy()
            reads_next = np.zeros_like(valid_np)            # a valid step follows: i_t must be 1
            reads_next[:, :-1] = valid_np[:, :-1] & valid_np[:, 1:]
        mem = self._memory(B, T, W.new_zeros(1, 1), cells)
        r = W.new_zeros(B, m)
        blocks = [(W.new_zeros(B, 1, 0), W.new_zeros(B, 1))]
        Wi = self.cell.weight_ih
        Wix, Wir, Whh = Wi[:, :K].T, Wi[:, K:].T, self.cell.weight_hh.T
        bias = self.cell.bias_ih + self.cell.bias_hh
        h = self.h0.view(1, -1).expand(B, -1)
        c = self.c0.view(1, -1).expand(B, -1)
        hs, rs, ys, os_, acts = [h], [r], [], [], []
        i_prev = W.new_zeros(B)
        Wt = W.T
        for t in range(T):
            v_t = valid[:, t:t + 1] if padded[t] else None
            if discrete:                                                    # x_t: the t-th item
                x = items[:, t]
            else:
                state_in, x = inbuf.step(state_in, i_prev)                  # §2.3: ι_t, x_t
            gates = torch.addmm(torch.addmm(torch.addmm(bias, x, Wix), r, Wir), h, Whh)
            i, f, g, o = gates.chunk(4, 1)
            c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h_new = torch.sigmoid(o) * torch.tanh(c_new)
            if v_t is not None:
                h_new, c_new = torch.where(v_t, h_new, h), torch.where(v_t, c_new, c)
            h, c = h_new, c_new
            z = torch.addmm(b, h, Wt)
            act = torch.sigmoid(z[:, :2])                                   # d_t, u_t
            value = torch.sigmoid(z[:, 2:2 + m])                            # v_t
            io = torch.sigmoid(z[:, 2 + m + O:])                            # i_t, o_t
            i_prev, o_t = io[:, 0], io[:, 1]
            if v_t is not None:
                act = mem.idle(act, v_t[:, 0])
                i_prev, o_t = i_prev * v_t[:, 0], o_t * v_t[:, 0]
            if discrete:                         # the buffers are discrete only with 0/1 i, o
                io_np = torch.stack([i_prev, o_t], 1).double().cpu().numpy()
                if (not (io_np[reads_next[:, t], 0] == 1).all()
                        or not np.isin(io_np[:, 1], (0.0, 1.0)).all()):
                    raise NotExact(f"step {t}: input/output buffer strengths")
            r = mem.step(act, value, None if v_t is None else v_t[:, 0])
            ys.append(z[:, 2 + m:2 + m + O])                                # y_t
            os_.append(o_t)
            hs.append(h)
            rs.append(r)
            if keep:
                acts.append((act, value, io))
            if cells is None and (mem.k == mem.BLOCK or t == T - 1):
                blocks.append(mem.flush())
        hs_t, rs_t = torch.stack(hs, 1), torch.stack(rs, 1)
        states = (assemble_states(hs_t, rs_t, blocks) if cells is None
                  else mem.states(hs_t, rs_t))
        Y = torch.stack(ys, 1) if ys else W.new_zeros(B, 0, O)
        S = torch.stack(os_, 1) if os_ else W.new_zeros(B, 0)
        if discrete and not bool(torch.isfinite(Y).all()):
            raise NotExact("an output vector y_t is not finite")
        trace = {}
        if keep:
            cat = (lambda k: torch.stack([a[k] for a in acts], 1)) if acts else None
            trace = {"push": cat(0)[..., 0] if acts else W.new_zeros(B, 0),
                     "pop": cat(0)[..., 1] if acts else W.new_zeros(B, 0),
                     "value": cat(1) if acts else W.new_zeros(B, 0, m),
                     "input_pop": cat(2)[..., 0] if acts else W.new_zeros(B, 0),
                     "output_push": cat(2)[..., 1] if acts else W.new_zeros(B, 0)}
        return states, Y, S, trace


def requires_hao_buffered(machine: Any) -> str | PdanetError | None:
    """Why ``machine`` cannot compile to model ``hao_buffered`` (None: it can)."""
    try:
        view, _ = _view_and_plan(machine, "hao_buffered")
    except PdanetError as exc:
        return exc
    if view.output != "symbol":
        return CompileError(f"{machine!r} is a recogniser; the buffered model writes an output "
                            "tape. Compile a recogniser with model 'hao_lstm'")
    return None


def compile_hao_buffered(machine: Any, dtype: torch.dtype = torch.float32, code: str = "binary",
                         **options: Any) -> CompiledNetwork:
    """Compile a Mealy machine (a DFA with outputs) or a real-time DPDT into Hao et al.'s
    buffered model with the LSTM controller (§2.3; `HaoBufferedStackRNN`): the weights of
    `compile_hao_lstm` plus the buffer heads i_t = σ(β(Σ_j h_j − 3/8)) (every transition reads
    its symbol: exactly 1 after each step) and o_t = σ(β(Σ_{j emits} h_j − 3/8)) (1 exactly
    where the transition emits). One network step per input symbol; the output tape is the
    drained output buffer. A DPDT with ε-moves compiles to target ``buffered_stack_rnn``
    (`pdanet.constructions.buffered`, an Elman controller taking one machine move per step)."""
    if options:
        raise InputError(f"compile_hao_buffered takes dtype and code, not {sorted(options)}")
    dtype = as_dtype(dtype)
    why = requires_hao_buffered(machine)
    if why is not None:
        raise why if isinstance(why, PdanetError) else CompileError(str(why))
    view, plan = _view_and_plan(machine, "hao_buffered")
    codes = store_codes(view.G, code)
    H = len(plan.units) + 1
    n_out = view.n_out + 1
    _check_size(machine, H, view.K, codes.shape[1], n_out, "hao_buffered")
    weights, H = _lstm_weights(plan, codes)
    io = np.zeros((2, H), dtype=np.int64)
    io[0, 1:] = 1
    io[1, 1:] = [int(u.out >= 0) for u in plan.units]
    weights["io.weight"] = ExactWeight.of(io)
    weights["io.bias"] = ExactWeight.of(np.array([-MARGIN_LSTM] * 2, dtype=object))
    module = load_exact(HaoBufferedStackRNN(view.K, codes, n_out, H), weights, BETA, dtype)
    abstraction = unit_controller(module, view, plan, codes, H, model="hao_buffered",
                                  cell="lstm", memory="grefenstette", code=code, active=TAU)
    Qs, Ks, Gs = sp.symbols("Q K G")
    info = {"model": "hao_buffered", "controller": "lstm", "memory": "grefenstette",
            "store": "stack", "buffers": "input (read-only), output (write-only)",
            "hidden_units": H, "num_states": view.Q, "num_inputs": view.K,
            "num_store_symbols": view.G, "code": code, "code_width": codes.shape[1],
            "position_bytes": limits.position_bytes(H, "lstm", 2 * codes.shape[1] + n_out + 2),
            "step": "one network step per input symbol: input pop i = 1, output push o = 1 "
                    "where the transition emits; the stack as in hao_lstm"}
    return CompiledNetwork(
        machine=machine, module=module, target="buffered_stack_rnn", method="hao_buffered",
        hidden_units=H, bound=Qs * Ks * (Gs + 1) + 1,
        params={"Q": view.Q, "K": view.K, "G": view.G}, weights=weights, scale=sp.Integer(BETA),
        decoder=_decoder(plan, codes, H, False), reader=_reader(view),
        margin=sp.Rational(3, 8), steps_per_symbol=1,
        scale_argument="as hao_lstm; the buffer strengths i, o are exactly 0/1, so every input "
                       "read is exactly one symbol's one-hot row and every output is enqueued "
                       "with strength exactly 0 or 1",
        abstraction=abstraction, info=info)


def _example_linear():
    from pdanet.automata.alphabet import BOTTOM
    from pdanet.automata.pdt import DPDT
    # string reversal, one state (§3): push each symbol emitting #; on # pop the top, emit it
    t = {}
    for x in ("0", "1", BOTTOM):
        for a in ("0", "1"):
            t[(0, a, x)] = (0, "#", (a, x))
        if x is not BOTTOM:
            t[(0, "#", x)] = (0, x, ())
    return DPDT([0], ["0", "1", "#"], ["0", "1", "#"], ["0", "1"], t, 0, name="hao_reversal")


EXAMPLE_HAO_LINEAR = _example_linear()
EXAMPLE_HAO_LSTM = EXAMPLE_HAO_LINEAR


def _example_mealy():
    from pdanet.automata.dfa import DFA
    # cumulative XOR (§4): output the parity of the bits read so far
    return DFA(states=[0, 1], alphabet="01", transitions={(0, "0"): 0, (0, "1"): 1, (1, "0"): 1,
                                                          (1, "1"): 0},
               start=0, outputs={(0, "0"): "0", (0, "1"): "1", (1, "0"): "1", (1, "1"): "0"},
               output_alphabet="01", name="cumulative_xor_mealy")


EXAMPLE_HAO_BUFFERED = _example_mealy()

__all__ = ["BETA", "EXAMPLE_HAO_BUFFERED", "EXAMPLE_HAO_LINEAR", "EXAMPLE_HAO_LSTM",
           "HaoBlocks", "HaoBufferedStackRNN", "HaoStackRNN", "NotExact", "PaperController", "WindowStack",
           "compile_hao_buffered", "compile_hao_linear", "compile_hao_lstm",
           "requires_hao_buffered", "requires_hao_linear", "requires_hao_lstm"]

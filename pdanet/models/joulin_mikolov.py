"""The original Stack-RNN of Joulin & Mikolov (2015), "Inferring algorithmic patterns with
stack-augmented recurrent nets", as a trainable module, with the compile function that emits
weights for exactly this module (model ``"joulin_mikolov_stack_rnn"``). The original's sigmoid
hidden layer (Joulin & Mikolov 2015 §3) with the stack equations as DuSell & Chiang (2021)
restate them (App. A.2: vector pushes, biases on the action and value heads, the bottom read as
0 rather than −1):

    h_t = σ(U x_t + R h_{t−1} + P s_{t−1}[0:k])           (hidden layer, sigmoid; J&M §3)
    a_t = softmax(A h_t + b_A)  over (push, no-op, pop)    (App. A.2, a_t)
    v_t = σ(D h_t + b_D)                                   (App. A.2, v_t)
    s_t[0] = a_t[push] v_t + a_t[no-op] s_{t−1}[0] + a_t[pop] s_{t−1}[1]       (superposition)
    s_t[i] = a_t[push] s_{t−1}[i−1] + a_t[no-op] s_{t−1}[i] + a_t[pop] s_{t−1}[i+1]
    y_t = Y h_t + b_Y                                      (output logits)

The stack is the public `SuperpositionStack`; the controller reads its top k = 1 cell (as
DuSell & Chiang do; the original reads the top k), the reading the store's step returns.

**Compiled weights.** A superposition stack does one push, pop or no-op per step and cannot
replace a top in one step, so the controller holds the machine's top itself (controller states
(q, mode), mode U or H_X: `pdanet.constructions.realtime.one_op`; the memory then holds the
machine's stack below the held top) and every machine move is one memory op. Hidden unit j
stands for the transition (c, a, R, c2) of the controller table
(`pdanet.constructions.controllers._plan`), with h ∈ {0, 1}:

    z_j = x_t[a] + Σ_{i→c} h_{t−1,i} + m_R(r_{t−1}) − 5/2      (− 3/2 without R),
    m_R(r) = Σ_b (2 code(R)_b − 1) r_b − |code(R)|_1 + 1,

so z = +1/2 for the one unit of the transition taken and ≤ −1/2 for every other; a start unit
(h_0 = 1, off after t = 0) stands for the initial state. Action logits A h_t are +1/2 for the
action of the active unit and −1/2 for the others; pushed bits D h_t ± 1/2; output logits
±1/2 (no-output logit 0). Margin 1/2; at β = 2048 every argument is ±1024 or beyond, where σ is
exactly 0 or 1 and the softmax exactly one-hot (e^{−2048} underflows) in float32 and float64,
so the stack cells are exactly the codes of the symbols and the network is exact at every
length. A recogniser's verdict is read from h_t: final-state acceptance only (an empty-stack
DPDA needs the reading r_t in the readout: target ``"stack_rnn"``, method ``"grefenstette"``).

**Verification in O(1) per step**: ``forward_window`` keeps the stack as symbol ids and proves
at every step that the action is exactly one-hot and the pushed value exactly a code (else
None); `pdanet.verify` uses it on long strings (see `pdanet.models.hao`). On a dead prefix (no
active unit) the action is the uniform softmax, so the window declines there; verify's long and
random strings are live.
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
from pdanet.constructions.base import CompiledNetwork, ExactWeight, as_dtype, load_exact
from pdanet.constructions.controllers import (
    _decoder,
    _plan,
    _reader,
    assemble_states,
)
from pdanet.constructions.realtime import store_codes
from pdanet.constructions.stacks.protocol import SymbolCodes
from pdanet.constructions.stacks.superposition import SuperpositionStack
from pdanet.errors import InputError, PdanetError, UnboundedStackError
from pdanet.models.hao import WindowStack, _ExactRuns, _ids, stack_view, unit_controller

BETA = 2048
MARGIN = Fraction(1, 2)


@dataclass(frozen=True)
class JoulinMikolovBlocks:
    """`JoulinMikolovStackRNN`'s weights by meaning (J&M §3, App. A.2): ``embedding`` (K, H) the
    rows U x_t; ``weight_hh`` (H, H) R and ``bias`` (H,) its bias; ``weight_r`` (H, m) P on the
    top cell; ``actions_weight`` (3, H), ``actions_bias``: A, b_A over the store's channels
    (push, no-op, pop); ``values_weight`` (m, H), ``values_bias``: D, b_D; ``out_weight``
    (O, H), ``out_bias``: Y, b_Y; ``h0`` (H,)."""

    embedding: Any
    weight_hh: Any
    bias: Any
    weight_r: Any
    actions_weight: Any
    actions_bias: Any
    values_weight: Any
    values_bias: Any
    out_weight: Any
    out_bias: Any
    h0: Any


class JoulinMikolovStackRNN(_ExactRuns):
    """Joulin & Mikolov (2015) Stack-RNN (module docstring): sigmoid hidden layer ``U`` (input,
    as an embedding of the symbol ids), ``R`` (recurrent, with the hidden bias), ``P`` (the top
    stack cell), action head ``A`` (softmax over push, no-op, pop), pushed value ``D``
    (sigmoid), output ``Y``, and the initial hidden state ``h0``. Random initialisation by
    default (PyTorch's), as the paper trains it. ``depth`` caps the stack at that many cells
    (a push then drops the bottom one); None sizes it to each input.

    ``forward(ids (B, T), −1 padding)`` → (states (B, T+1, H + m + 1 + D), logits (B, T+1, O)):
    states[t] = [h_t; r_t; n_t; the symbol ids of the n_t cells whose occupancy exceeds 1/2,
    bottom first]. Padding leaves a row's whole state unchanged (no-op action).

    Why `forward_window` is exact: `pdanet.models.hao.WindowStack` proves at every valid step
    that a_t is exactly one-hot over (push, no-op, pop), σ(D h_t) finite and, when pushed,
    exactly a symbol's code, and that a stack of fixed ``depth`` drops no cell. Then the
    superposition update (module docstring) is a discrete push, no-op or pop and s_t[0] is
    exactly the new top's code (0 when empty), which is what the discrete stack reads."""

    def __init__(self, num_symbols: int, hidden: int, codes: np.ndarray, num_outputs: int,
                 depth: int | None = None):
        super().__init__()
        if num_symbols < 1 or hidden < 1 or num_outputs < 1:
            raise InputError(f"JoulinMikolovStackRNN needs ≥ 1 symbol, hidden unit and output, "
                             f"got {num_symbols}, {hidden}, {num_outputs}")
        codes = np.asarray(codes)
        self.width = codes.shape[1]
        self.U = nn.Embedding(num_symbols, hidden)                  # U x_t (one-hot x_t)
        self.R = nn.Linear(hidden, hidden)                          # R h_{t−1} + bias
        self.P = nn.Linear(self.width, hidden, bias=False)          # P s_{t−1}[0:1]
        self.A = nn.Linear(hidden, 3)                               # softmax(A h_t)
        self.D = nn.Linear(hidden, self.width)                      # σ(D h_t)
        self.Y = nn.Linear(hidden, num_outputs)                     # y_t
        self.h0 = nn.Parameter(torch.zeros(hidden))
        self.store = SuperpositionStack(depth)
        self.codes = SymbolCodes(codes)

    def blocks(self, numpy: bool = False) -> JoulinMikolovBlocks:
        """The weights by meaning (`JoulinMikolovBlocks`): the parameters (tensors), or with
        ``numpy`` detached float64 arrays."""
        conv = (lambda t: t.detach().double().cpu().numpy()) if numpy else (lambda t: t)
        return JoulinMikolovBlocks(
            embedding=conv(self.U.weight), weight_hh=conv(self.R.weight), bias=conv(self.R.bias),
            weight_r=conv(self.P.weight), actions_weight=conv(self.A.weight),
            actions_bias=conv(self.A.bias), values_weight=conv(self.D.weight),
            values_bias=conv(self.D.bias), out_weight=conv(self.Y.weight),
            out_bias=conv(self.Y.bias), h0=conv(self.h0))

    @torch.no_grad()
    def trace_actions(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The action distributions a_t (B, T, 3: push, no-op, pop) and pushed vectors σ(D h_t)
        (B, T, m) of every step of ``forward(ids)``."""
        return self._run(ids, True)[2]

    def _run(self, ids: Any, keep: bool, cells: int | None = None):
        ids = _ids(ids, self.h0.device)
        B, T = ids.shape
        valid = ids >= 0
        padded = (~valid).any(0).tolist()
        pre = self.U(ids.clamp(min=0)) + self.R.bias                # U x_t + b, all t
        Wh, Wr = self.R.weight.T, self.P.weight.T
        head_w = torch.cat([self.A.weight, self.D.weight]).T
        head_b = torch.cat([self.A.bias, self.D.bias])
        h = self.h0.view(1, -1).expand(B, -1)
        r = pre.new_zeros(B, self.width)
        if cells is None:
            mem = self.store.run(B, T, pre, self.codes)
        else:                                   # forward_window: the stack as symbol ids
            mem = WindowStack(B, T, cells, np.asarray(self.codes.codes), pre,
                              np.array([self.store.actions(op) for op in self.store.ops]),
                              self.store.channels, self.store.depth)
        hs, rs, acts, vals = [h], [r], [], []
        blocks = [(pre.new_zeros(B, 1, 0), pre.new_zeros(B, 1))]
        for t in range(T):
            h_new = torch.sigmoid(torch.addmm(torch.addmm(pre[:, t], h, Wh), r, Wr))   # J&M §3
            head = torch.addmm(head_b, h_new, head_w)
            act = torch.softmax(head[:, :3], 1)                                         # A.2: a_t
            value = torch.sigmoid(head[:, 3:])
            v = None
            if padded[t]:
                v = valid[:, t]
                h_new = torch.where(v.unsqueeze(1), h_new, h)
                act = mem.idle(act, v)
            r = mem.step(act, value, v)                                                 # superposition
            if keep:
                acts.append(act)
                vals.append(value)
            h = h_new
            hs.append(h)
            rs.append(r)
            if cells is None and (mem.k == mem.BLOCK or t == T - 1):
                blocks.append(mem.flush())
        hs_t, rs_t = torch.stack(hs, 1), torch.stack(rs, 1)
        states = assemble_states(hs_t, rs_t, blocks) if cells is None else mem.states(hs_t, rs_t)
        trace = None
        if keep:
            trace = (torch.stack(acts, 1) if acts else pre.new_zeros(B, 0, 3),
                     torch.stack(vals, 1) if vals else pre.new_zeros(B, 0, self.width))
        return states, self.Y(hs_t), trace


def _weights(plan, codes: np.ndarray) -> tuple[dict, int]:
    v, units = plan.view, plan.units
    K, m = v.K, codes.shape[1]
    Fr = Fraction
    H = len(units) + 1                                   # unit 0: start
    into = plan.incoming()
    U = np.zeros((K, H), dtype=np.int64)                 # the embedding: (K, H) = U^T
    R = np.zeros((H, H), dtype=np.int64)
    P = np.zeros((H, m), dtype=np.int64)
    bias = np.full(H, Fr(0), dtype=object)
    bias[0] = Fr(-1, 2)
    for j, u in enumerate(units):
        i = j + 1
        U[u.a, i] = 1                                    # x_t[a]
        for src in into.get(u.c, ()):
            R[i, src] = 1                                # Σ_{i→c} h_{t−1,i}
        bias[i] = -(Fr(3, 2) if u.R is None else Fr(5, 2))
        if u.R is not None:                              # m_R(r_{t−1})
            cR = codes[u.R]
            P[i] = 2 * cR - 1
            bias[i] += Fr(int(1 - cR.sum()))
    w: dict[str, Any] = {"U.weight": ExactWeight.of(U), "R.weight": ExactWeight.of(R),
                         "R.bias": ExactWeight.of(bias), "P.weight": ExactWeight.of(P)}
    h0 = np.zeros(H, dtype=np.int64)
    h0[0] = 1
    w["h0"] = ExactWeight.of(h0, scaled=False)

    def head(name: str, coef: np.ndarray, start: np.ndarray | None = None,
             none: bool = False) -> None:
        """Rows Σ_j coef[k, j] h_{j+1} (+ start[k] h_0) − 1/2 (a last row 0 with ``none``)."""
        Wm = np.zeros((coef.shape[0] + none, H), dtype=np.int64)
        Wm[:coef.shape[0], 1:] = coef
        if start is not None:
            Wm[:coef.shape[0], 0] = start
        b = np.array([-MARGIN] * coef.shape[0] + [Fr(0)] * none, dtype=object)
        w[f"{name}.weight"], w[f"{name}.bias"] = ExactWeight.of(Wm), ExactWeight.of(b)

    head("A", np.array([u.act for u in units], dtype=np.int64).T.reshape(3, -1))
    val = np.zeros((m, len(units)), dtype=np.int64)
    for j, u in enumerate(units):
        if u.push[0] >= 0:
            val[:, j] = codes[u.push[0]]
    head("D", val)
    if v.output == "symbol":
        out = np.zeros((v.n_out, len(units)), dtype=np.int64)
        for j, u in enumerate(units):
            if u.out >= 0:
                out[u.out, j] = 1
        head("Y", out, none=True)
    else:
        acc = np.array([[int(v.accepting[plan.q_of(u.c2)]) for u in units]], dtype=np.int64)
        head("Y", acc, np.array([int(v.accepting[plan.q_of(plan.c0)])]))
    return w, H


def _view_and_plan(machine: Any, depth: int | None):
    view = stack_view(machine, "joulin_mikolov_stack_rnn", "superposition stack")
    if depth is not None and any(mv[3] is not None for mv in view.trans.values()):
        raise UnboundedStackError(
            f"{machine!r} has an unbounded stack but the SuperpositionStack was fixed to {depth} "
            "cells; drop `depth` (the stack is then sized to each input), or bound the machine's "
            "depth with `.bounded(m)` and compile it to a finite-state target")
    return view, _plan(view, SuperpositionStack(depth))


def requires_joulin_mikolov_stack_rnn(machine: Any) -> str | PdanetError | None:
    """Why ``machine`` cannot compile to model ``joulin_mikolov_stack_rnn`` (None: it can)."""
    try:
        _view_and_plan(machine, None)
    except PdanetError as exc:
        return exc
    return None


def compile_joulin_mikolov_stack_rnn(machine: Any, dtype: torch.dtype = torch.float32,
                           code: str = "binary", depth: int | None = None,
                           **options: Any) -> CompiledNetwork:
    """Compile a real-time DPDA (final-state acceptance), DPDT or Mealy machine into the
    Joulin–Mikolov Stack-RNN (module docstring). ``code``: "binary" or "one_hot" stack-symbol
    codes; ``depth``: a fixed number of stack cells (only for a machine that never pushes).
    Hidden units: one per (controller state, input, stack reading) that acts differently plus a
    start unit; controller states are (q, mode) with G + 2 modes (bound Q·(G+2)·K·(G+1) + 1)."""
    if options:
        raise InputError(f"compile_joulin_mikolov_stack_rnn takes dtype, code and depth, not "
                         f"{sorted(options)}")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InputError(f"depth must be a positive int or None, got {depth!r}")
    dtype = as_dtype(dtype)
    view, plan = _view_and_plan(machine, depth)
    codes = store_codes(view.G, code)
    H = len(plan.units) + 1
    m = codes.shape[1]
    n_out = 1 if view.output == "accept" else view.n_out + 1
    params = H * (view.K + H + m + 1) + H * (3 + m + n_out)
    what = f"compiling {machine!r} to joulin_mikolov_stack_rnn ({H:,} hidden units)"
    hint = ("compile it with model 'grefenstette_lstm' or 'grefenstette_rnn', which factor the "
            "symbols a machine copies (`pdanet.models.grefenstette.estimate(machine)` gives "
            "their size), or use a smaller machine (for a task, a smaller vocabulary)")
    limits.check(what, H, "max_units", hint=hint)
    limits.check(f"{what}, {params:,} parameters", 32 * params, "max_bytes", hint=hint)
    weights, H = _weights(plan, codes)
    module = JoulinMikolovStackRNN(view.K, H, codes, n_out, depth)
    module = load_exact(module, weights, BETA, dtype)
    abstraction = unit_controller(module, view, plan, codes, H, model="joulin_mikolov_stack_rnn",
                                  cell="sigmoid", memory="joulin_mikolov", code=code, active=1)
    Qs, Ks, Gs = sp.symbols("Q K G")
    info = {"model": "joulin_mikolov_stack_rnn", "controller": "sigmoid", "memory": "joulin_mikolov",
            "store": "stack", "hidden_units": H, "depth": depth,
            "controller_states": len({plan.c0} | {u.c2 for u in plan.units}),
            "units_with_reading": sum(u.R is not None for u in plan.units),
            "num_states": view.Q, "num_inputs": view.K, "num_store_symbols": view.G,
            "code": code, "code_width": m,
            "position_bytes": limits.position_bytes(H, "rnn", 2 * m + n_out),
            "step": "one network step reads one input symbol and applies one push, pop or no-op; "
                    "the machine's top is held in the controller (modes U, H_X), so a replace "
                    "is one memory op"}
    return CompiledNetwork(
        machine=machine, module=module, target="stack_rnn", method="joulin_mikolov_stack_rnn",
        hidden_units=H, bound=Qs * (Gs + 2) * Ks * (Gs + 1) + 1,
        params={"Q": view.Q, "K": view.K, "G": view.G}, weights=weights, scale=sp.Integer(BETA),
        decoder=_decoder(plan, codes, H, False), reader=_reader(view), margin=sp.Rational(1, 2),
        steps_per_symbol=1,
        scale_argument=(f"every hidden, action, value and output pre-activation is ±1/2 or beyond "
                        f"(one-hot input, one active unit, exact codes); β = {BETA} gives |βz| ≥ "
                        "1024, where σ is exactly 0/1 and the softmax exactly one-hot in float32 "
                        "and float64, so the stack cells stay exact codes"),
        abstraction=abstraction, info=info)


def _example():
    from pdanet.automata.alphabet import BOTTOM
    from pdanet.automata.pda import DPDA
    # a^n b^m with m ≤ n: push A per a, pop one per b; accepting while still reading a's
    t = {("p", "a", BOTTOM): ("p", ("A", BOTTOM)), ("p", "a", "A"): ("p", ("A", "A")),
         ("p", "b", "A"): ("q", ()), ("q", "b", "A"): ("q", ())}
    return DPDA(["p", "q"], "ab", ["A"], t, "p", accepting=["p"], name="anbn_prefix")


EXAMPLE_JOULIN_MIKOLOV_STACK_RNN = _example()

__all__ = ["BETA", "EXAMPLE_JOULIN_MIKOLOV_STACK_RNN", "JoulinMikolovBlocks",
           "JoulinMikolovStackRNN", "compile_joulin_mikolov_stack_rnn",
           "requires_joulin_mikolov_stack_rnn"]

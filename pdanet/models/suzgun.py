"""The memory-augmented RNNs of Suzgun et al. (2019) §3, as trainable modules, and their compiler.

Models (Suzgun, Gehrmann, Belinkov & Shieber 2019, "Memory-Augmented Recurrent Neural Networks
Can Learn Generalized Dyck Languages", §3.1–3.4; equation lines cited by section):

- `SuzgunStackRNN` (§3.1): with x_t one-hot and s_{t−1}^{(0)} the stack's top cell,

      h̃_{t−1} = h_{t−1} + W_sh s_{t−1}^{(0)}
      h_t     = tanh(W_ih x_t + b_ih + W_hh h̃_{t−1} + b_hh)
      y_t     = σ(W_y h_t)          a_t = softmax(W_a h_t)          n_t = σ(W_n h_t)

  and the stack update s_t = a_t^{(0)}·push(n_t) + a_t^{(1)}·pop (`SuzgunStack`, no no-op).
- `SuzgunStackLSTM` (§3.2): h_t = LSTM(x_t, h̃_{t−1}) (PyTorch's LSTM cell, gates i, f, g, o).
- `SuzgunBabyNTM` (§3.3): the Stack-RNN controller on the fixed `BabyNTM` memory (five ops,
  M_t = Σ_i a_t^{(i)} OP_i M_{t−1}, M_t^{(0)} += n_t), compiled from machines whose store fits
  its fixed memory (`compile_suzgun_baby_ntm`, below); an unbounded stack gets
  `UnboundedStackError` naming the stack models.

Softmax options (§3.4): ``temperature`` τ gives a_t = softmax(W_a h_t / τ); ``gumbel=True`` gives
a_t = softmax((W_a h_t + g)/τ) with g_i i.i.d. Gumbel(0, 1) while the module is training (the
paper's Gumbel-softmax; in ``eval()`` mode no noise is drawn, as at the paper's evaluation). The
linear maps W_y, W_a, W_n carry biases (``nn.Linear``); the equations omit them. The initial
state h_0 (and c_0) is a parameter (zeros at random init). ``forward(ids)`` (−1 padding) returns
``(states (B, T+1, S), logits (B, T+1, O))`` with states[t] = [h_t; s_t^{(0)}; k_t; ids_t] — the
controller state, the top cell, and an exact read-back of the stack (k_t cells with occupancy
> 1/2 and their symbol ids, as `pdanet.constructions.controllers.StackRNN` gives it); logits are
W_y h_t + b (y_t = σ(logits)).

Construction (`compile_suzgun_stack_rnn`, `compile_suzgun_stack_lstm`): a real-time
deterministic machine whose store is a stack (DPDA, DPDT, DFA, Mealy machine) becomes one
instance of the model. Hidden units are Elman threshold units as in
`pdanet.constructions.controllers` ("the controller was in state c, read input a and the top
was X": z = Σ x_t[a] + Σ_{i → c} ind(h_i) + m_X − 5/2, ind(h) = (h + 1)/2, exactly one unit
on per step), with these choices for the paper's model:

1. One op per step, no no-op: the paper's stack only pushes or pops, so the controller holds the
   machine's top when the memory cannot follow it in one op. Controller state c = (p, mode):
   U (memory = the machine's stack), H_y (top y held, known to the controller) or L (top held
   in the *latch*: it is the reading before the previous step). In H_y and L the memory holds
   the stack below the held top. Rule (`_one_op`), from U: noop → pop, to L (the popped top is
   what the latch keeps); replace by y → pop, to H_y; push / pop → the same. From H_X or L:
   noop → push X, to U; replace by y → push y, to U; push y → push X, to H_y; pop → pop, to L
   (the new top is the memory's top before this step, which the latch now keeps). No machine
   move costs an extra step; `net.bound` counts |Γ| + 3 modes per machine state.
2. The reading enters only through h̃ (W_hh W_sh s^{(0)}), so the construction adds one *relay*
   unit per code bit that some unit tests: its row of the recurrence is zero (h = tanh 0 = 0 at
   every step) and W_sh copies bit k of the top into h̃ at the relay's index, where W_hh's
   column carries the reading tests. A *latch* unit per latched bit k is 2·bit_k(s_{t−1}^{(0)})
   − 1 (a threshold of its relay); mode-L units test the latch instead of the reading.
3. Few units: a unit tests only the bits that tell apart the tops the machine has a move for
   and that act differently (the fewest such bits over the whole machine; tops it has no move
   for are dead configurations, outside what the network must match); a unit whose every
   defined top acts alike tests nothing; units with the same test and the same step (next
   controller state, action, pushed code, output) on a rectangle (controller states) × (inputs)
   are one unit (a sum of one-hot indicators over a set is still 0 or 1). There is no start unit
   when some unit enters the initial controller state with the initial output: h_0 turns it on.
4. Heads: y, a and n read the units through affine maps whose pre-activations are ±βH/2 with
   H = `HEAD` = 32 (±1024 at β = 64): σ and softmax then give exact 0/1 (one-hot) values in
   float32 and float64 (e^{−1024} underflows to 0). The temperature is folded into W_a
   (W_a = τ·…), so W_a h / τ is the same at every τ. With Gumbel noise g the action stays
   exactly one-hot whenever g_lose − g_win ≤ τ(βH − 750): the gap of W_a h/τ is βH = 2048, and
   e^{−x} underflows to 0 in float64 (and float32) for x ≥ 750. The noise drawn here is
   −log(−log u) with u clamped to [1e-20, 1 − 1e-7], so |g| ≤ 16.2 and the condition holds for
   every draw whenever τ ≥ 1/40 (g_lose − g_win ≤ 20); the paper evaluates without noise, and so does ``eval()`` (the
   compiled module is returned in eval mode; ``.train()`` turns the noise on).
5. Empty-stack recognisers: the output reads h_t only, so the controller must know when the
   stack empties; the construction marks the bottom stack symbol (Γ → Γ ⊎ Γ', as the Dyck tasks
   do by hand) and tracks "empty" in the controller state (Q → Q × {0, 1}); the decoder maps
   both back.
6. LSTM: the input, forget and output gates are constant (bias ±βH/2: i = o = 1, f = 0
   exactly), the cell gate g carries the Elman unit, so c_t = ±1 and h_t = tanh c_t = ±tanh 1,
   read downstream through ρ ≈ 1/tanh 1 (`RHO`, a rational with |ρ tanh 1 − 1| < 1e-12).
7. Next-symbol sets (``readout="next_set"``, a real-time DPDA): y_t has one unit per input
   symbol and one for the end marker ⊣, σ(y_t) > 1/2 (logit +βH/2, else −βH/2) iff the symbol
   may follow the prefix — u·a is a prefix of a word of L, ⊣ iff u ∈ L — as Suzgun et al.
   (2019) §4.1 and Table 1 define the target (`NextSetMachine`, the network's ``machine``).
   Whether a configuration is co-reachable follows from pop summaries of the machine
   (`_summaries`, a least fixpoint); reachability over abstract cells (symbol, the
   co-reachable states of the stack below it) then decides whether the set is a function of
   (state, top) on the reachable live configurations; if not, CompileError names two prefixes
   that reach the same (state, top) with different sets. When it is, y_t reads the controller
   state alone, so the controller must hold the top after every step, including after a pop,
   whose new top the paper's y_t = σ(W_y h_t) could not see in the memory. Layout "held": the
   controller holds the top one or two stack symbols (mode X, or the pair Z·X with X on top),
   the memory the stack below them, and each machine move is one push or pop: one held X —
   push y: push X, hold y; pop: pop, hold the memory's top R; noop: pop, hold R·X; replace by
   y: pop, hold R·y; two held Z·X — push y: push Z, hold X·y; pop: pop, hold R·Z; noop: push Z,
   hold X; replace by y: push Z, hold y. R is the reading s_{t−1}^{(0)} (the memory's top
   before the step), which the popping unit tests through h̃ as in 2.; a pop of the empty
   memory (nothing under the held symbols, or ⊥ held) leaves it empty and stands for "no
   change". Empty-stack acceptance needs no bottom marking (⊥ is held). No latch units;
   ``net.bound`` counts (|Γ| + 1)² modes per machine state.

Baby-NTM construction (`compile_suzgun_baby_ntm`): DFAs / Mealy machines, real-time
depth-bounded DPDAs and DPDTs (`BoundedPDA`, ``dpda.bounded(m)``) and Dyck-(k, m) (`DyckKM`).

1. Layout "held": the machine's top is *always held in the controller*: controller state
   c = p·(G + 1) + X (machine state p, top X, X = G: the empty stack ⊥). The stack below the
   top lies in memory
   rows 0 … m − 2 (``max(m − 1, 1)`` rows, one entry of width W = the code width per row): row
   0 is the symbol just under the top, deeper symbols in the next rows; every row past the
   stack holds 0, the code of ⊥ (and an empty row). The rotations are never chosen.
2. Moves (one network step per input, no extra step): push y on X ≠ ⊥ → POP_RIGHT
   ([0, a, b, …], then row 0 += n_t with n_t the code of X; the dropped last row is empty
   whenever the push stays within the bound m, and a push past it is a dead configuration),
   hold y. Pop → POP_LEFT ([b, c, …, 0]); the new top is row 0 *before* the step, which h̃
   reads in the same step (W_m M^{(0)} through relay units, as in 2. above), so the unit that
   pops also tests it and enters (p2, that symbol). Noop, replace by y, and push y on ⊥ → NOOP
   (the held top changes, the memory stays).
3. Since the top is held, every output is a function of the active unit: acceptance by final
   state or by empty stack (held ⊥), a transducer's symbol, and Dyck-(k, m)'s next-symbol set,
   for which the memory symbols are (bracket type, depth) pairs — the held top then tells
   whether the depth is below m. Units test the fewest reading bits and merge as in 3. above.
4. Heads as in 4. above: W_a picks one of the five ops with logits ±βH/2 (softmax exactly
   one-hot), W_n writes exact 0/1 codes, so the memory rows stay exact.
5. Layout "memory" (when the output needs no top after a pop: final-state recognisers,
   transducers, DFAs): the top lies in row 0 of rows 0 … m − 1 (mode U; the reading tests it, as
   in the Stack-RNN), held in the controller only after a replace (mode H_X, the rows holding
   the stack below X). From U: noop → NOOP; push y → POP_RIGHT writing y; pop → POP_LEFT;
   replace by y → POP_LEFT, hold y. From H_X: noop → NOOP; replace by y → NOOP, hold y; push y →
   POP_RIGHT writing X, hold y; pop → NOOP, back to U. ``layout="auto"`` (default) compiles the
   layout with fewer hidden units (Dyck-2 bounded: 7 units in "memory", 22 in "held").

Margin: every unit's pre-activation is ±1/2 or beyond (one-hot input, one active unit, exact
0/1 readings), β = 64 gives |βz| ≥ 32 where tanh is exactly ±1 in float32 and float64, so the
network is bit-exact at every length.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp
import torch
import torch.nn.functional as F
from torch import nn

from pdanet import limits
from pdanet.automata.alphabet import Alphabet
from pdanet.automata.base import BatchTrace, Machine
from pdanet.automata.bounded import DyckKM
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import PDA, BoundedPDA, DeterministicPushdown
from pdanet.automata.pdt import DPDT
from pdanet.automata.store import StoreTransducer
from pdanet.constructions.abstraction import Abstraction
from pdanet.constructions.base import CompiledNetwork, ExactWeight, load_exact
from pdanet.constructions.controllers import SymbolStack, _reader, assemble_states, held_stack
from pdanet.constructions.realtime import RealtimeTable, op_name, store_codes
from pdanet.constructions.realtime import table as realtime_table
from pdanet.constructions.stacks.protocol import SymbolCodes
from pdanet.constructions.stacks.suzgun import (
    NTM_NOOP,
    POP_LEFT,
    POP_RIGHT,
    BabyNTM,
    SuzgunStack,
)
from pdanet.errors import CompileError, InputError, PdanetError, UnboundedStackError

BETA = 64
HEAD = 32                       # head pre-activations are ±β·HEAD/2
RHO = Fraction(1 / math.tanh(1)).limit_denominator(10**7)   # ≈ 1/tanh 1 (LSTM units ±tanh 1)
MODELS = ("suzgun_stack_rnn", "suzgun_stack_lstm")      # the stack models (+ "suzgun_baby_ntm")
ONE = Fraction(1)


# --- the modules -----------------------------------------------------------------------------------
class _SuzgunController(nn.Module):
    """Shared part of the Suzgun et al. (2019) models: x_t one-hot, h̃ from the memory reading,
    the heads y, a (softmax with temperature / Gumbel), n. Subclasses give the cell."""

    cell_kind = "rnn"

    def __init__(self, num_symbols: int, hidden: int, width: int, num_outputs: int,
                 num_ops: int, temperature: float = 1.0, gumbel: bool = False):
        super().__init__()
        for name, v in (("num_symbols", num_symbols), ("hidden", hidden), ("width", width),
                        ("num_outputs", num_outputs)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"{type(self).__name__}: {name} must be a positive int, got {v!r}")
        self.temperature = _temperature(temperature)
        if not isinstance(gumbel, bool):
            raise InputError(f"gumbel must be True or False, got {gumbel!r}")
        self.gumbel = gumbel
        self.num_symbols, self.hidden, self.width = num_symbols, hidden, width
        self.W_sh = nn.Linear(width, hidden, bias=False)         # §3.1: h̃ = h + W_sh s^(0)
        self.W_y = nn.Linear(hidden, num_outputs)                # §3.1: y_t = σ(W_y h_t)
        self.W_a = nn.Linear(hidden, num_ops)                    # §3.1: a_t = softmax(W_a h_t)
        self.W_n = nn.Linear(hidden, width)                      # §3.1: n_t = σ(W_n h_t)
        self.h0 = nn.Parameter(torch.zeros(hidden))

    def actions(self, h: torch.Tensor) -> torch.Tensor:
        """a_t = softmax(W_a h_t / τ) (§3.4 softmax-temp), with Gumbel noise g added to W_a h_t
        while training when ``gumbel`` (§3.4 Gumbel-softmax; u clamped so that |g| ≤ 16.2)."""
        logits = self.W_a(h)
        if self.gumbel and self.training:
            u = torch.rand_like(logits).clamp(1e-20, 1 - 1e-7)
            logits = logits - torch.log(-torch.log(u))            # g ~ Gumbel(0, 1)
        return torch.softmax(logits / self.temperature, -1)

    def blocks(self, numpy: bool = False) -> dict[str, Any]:
        """The weights by meaning (§3.1–3.3): ``W_ih``, ``b_ih``, ``W_hh``, ``b_hh`` (the cell;
        an LSTM's rows in PyTorch's gate order i, f, g, o), ``W_sh`` (Baby-NTM's W_m), ``W_y``,
        ``b_y``, ``W_a``, ``b_a``, ``W_n``, ``b_n``, ``h0`` and, for an LSTM, ``c0``: the
        parameters (tensors), or with ``numpy`` detached float64 arrays."""
        conv = (lambda t: t.detach().double().cpu().numpy()) if numpy else (lambda t: t)
        cell = self.cell
        out = {"W_ih": cell.weight_ih, "b_ih": cell.bias_ih, "W_hh": cell.weight_hh,
               "b_hh": cell.bias_hh, "W_sh": self.W_sh.weight, "W_y": self.W_y.weight,
               "b_y": self.W_y.bias, "W_a": self.W_a.weight, "b_a": self.W_a.bias,
               "W_n": self.W_n.weight, "b_n": self.W_n.bias, "h0": self.h0}
        if hasattr(self, "c0"):
            out["c0"] = self.c0
        return {k: conv(v) for k, v in out.items()}

    def _x(self, ids: torch.Tensor) -> torch.Tensor:
        return F.one_hot(ids.clamp(min=0), self.num_symbols).to(self.h0.dtype)

    def _init(self, B: int):
        raise NotImplementedError

    def _cell(self, x_t: torch.Tensor, h_tilde: torch.Tensor, state):
        """(h_t, new recurrent state) from x_t and h̃_{t−1}."""
        raise NotImplementedError

    def _check_ids(self, ids) -> torch.Tensor:
        ids = torch.as_tensor(ids)
        if ids.dim() != 2:
            raise InputError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        if ids.numel() and int(ids.max()) >= self.num_symbols:
            raise InputError(f"symbol id {int(ids.max())} is out of range for "
                             f"{self.num_symbols} input symbols")
        return ids.to(self.h0.device)


class _SuzgunStackModel(_SuzgunController):
    """The Stack-RNN / Stack-LSTM loop on the paper's stack (`SuzgunStack`)."""

    def __init__(self, num_symbols: int, hidden: int, codes: np.ndarray, num_outputs: int,
                 temperature: float = 1.0, gumbel: bool = False, depth: int | None = None):
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[0] < 1:
            raise InputError(f"codes must be a (G + 1, width) 0/1 table, got shape {codes.shape}")
        super().__init__(num_symbols, hidden, codes.shape[1], num_outputs, 2, temperature,
                         gumbel)
        self.store = SuzgunStack(depth)
        self.codes = SymbolCodes(codes)
        self.reading_size = self.width

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = self._check_ids(ids)
        B, T = ids.shape
        valid = ids >= 0
        padded = (~valid).any(0).tolist()
        x = self._x(ids)
        state = self._init(B)
        h = state[0]
        r = x.new_zeros(B, self.width)
        mem = self.store.run(B, T, x, self.codes)
        hs, rs = [h], [r]
        blocks = [(x.new_zeros(B, 1, 0), x.new_zeros(B, 1))]
        for t in range(T):
            h_tilde = h + self.W_sh(r)                           # §3.1 h̃_{t−1}
            h_new, new_state = self._cell(x[:, t], h_tilde, state)
            act = self.actions(h_new)                            # §3.1 a_t (§3.4)
            value = torch.sigmoid(self.W_n(h_new))               # §3.1 n_t
            v = None
            if padded[t]:                   # padding leaves the row's whole state unchanged
                v = valid[:, t]
                keep = v.unsqueeze(1)
                h_new = torch.where(keep, h_new, h)
                new_state = tuple(torch.where(keep, a, b) for a, b in zip(new_state, state))
            r = mem.step(act, value, v)                          # §3.1 s_t (no no-op)
            h, state = h_new, new_state
            hs.append(h)
            rs.append(r)
            if mem.k == mem.BLOCK or t == T - 1:
                blocks.append(mem.flush())
        hs_t, rs_t = torch.stack(hs, 1), torch.stack(rs, 1)
        return assemble_states(hs_t, rs_t, blocks), self.W_y(hs_t)        # y_t = σ(logits)

    @torch.no_grad()
    def forward_window(self, ids: torch.Tensor, cells: int = 3
                       ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`forward` with the stack kept as symbol ids, O(1) per step, or None where that is not
        exact: as `StackRNN.forward_window`, it runs the same controller and heads and checks at
        every valid step that the action is exactly one-hot and the pushed value exactly a
        symbol's code (then the superposition stack is a discrete stack, bit for bit).
        states[t] = [h_t; s_t^{(0)}; n_t; the top ``cells`` symbol ids, top first, −1 below]."""
        ids = self._check_ids(ids)
        B, T = ids.shape
        valid = ids >= 0
        valid_np = valid.cpu().numpy()
        padded = (~valid_np).any(0)
        x = self._x(ids)
        codes_np = np.asarray(self.codes.codes)
        codes = torch.as_tensor(codes_np, dtype=x.dtype, device=x.device)
        stack = SymbolStack(B, T, cells, codes_np)          # the memory, as symbol ids
        state = self._init(B)
        h = state[0]
        r = x.new_zeros(B, self.width)
        hs = x.new_empty(T + 1, B, h.shape[1])
        rs = x.new_empty(T + 1, B, self.width)
        hs[0], rs[0] = h, r
        depth = self.store.depth
        for t in range(T):
            h_new, new_state = self._cell(x[:, t], h + self.W_sh(r), state)
            act = self.actions(h_new).double().cpu().numpy()
            value = torch.sigmoid(self.W_n(h_new)).double().cpu().numpy()
            v = valid_np[:, t]
            if padded[t]:
                keep = valid[:, t].unsqueeze(1)
                h_new = torch.where(keep, h_new, h)
                new_state = tuple(torch.where(keep, a, b) for a, b in zip(new_state, state))
            push = (act[:, 0] == 1) & (act[:, 1] == 0)
            pop = (act[:, 1] == 1) & (act[:, 0] == 0)
            ok = (push | pop) & np.isfinite(value).all(-1)
            sym = stack.symbols(value)
            ok &= ~push | ((sym >= 0) & (value == codes_np[np.maximum(sym, 0)]).all(-1))
            if not ok[v].all():
                return None
            push &= v
            pop &= v
            if depth is not None and (push & (stack.n - (pop & (stack.n > 0)) >= depth)).any():
                return None                     # a fixed stack would drop its bottom cell
            ridx = stack.step(t, push, pop, sym)
            r_new = codes[torch.from_numpy(ridx).to(x.device)]
            r = torch.where(valid[:, t].unsqueeze(1), r_new, r) if padded[t] else r_new
            h, state = h_new, new_state
            hs[t + 1], rs[t + 1] = h, r
        hs_t, rs_t = hs.transpose(0, 1), rs.transpose(0, 1)
        states = torch.cat([hs_t, rs_t, stack.tail(x)], 2)
        return states, self.W_y(hs_t)

    @torch.no_grad()
    def forward_decoded(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What `pdanet.verify` runs: `forward`, or — where the compiled network's decoder reads
        only [h_t; s_t^{(0)}] (``control_only``: set at compile for a DFA, whose decoded field is
        the state alone) — `forward_window`'s states and logits when it proves them exact: the
        same h_t, reading and logits (its first H + width columns are `forward`'s) in O(1) per
        step instead of the stack's O(t) cells."""
        out = self.forward_window(ids, 1) if getattr(self, "control_only", False) else None
        return out if out is not None else self.forward(ids)


class SuzgunStackRNN(_SuzgunStackModel):
    """Stack-RNN of Suzgun et al. (2019) §3.1 (module docstring): an Elman tanh controller
    (``cell = nn.RNNCell``: W_ih, b_ih, W_hh, b_hh) reading h̃_{t−1} = h_{t−1} + W_sh s_{t−1}^{(0)},
    heads y = σ(W_y h), a = softmax(W_a h / τ), n = σ(W_n h), on a `SuzgunStack` (``depth``
    cells, or None: sized to each input). ``codes``: the (G + 1, width) 0/1 symbol codes used to
    read the stack back (any table of the right width for a trained model)."""

    def __init__(self, num_symbols: int, hidden: int, codes: np.ndarray, num_outputs: int,
                 temperature: float = 1.0, gumbel: bool = False, depth: int | None = None):
        super().__init__(num_symbols, hidden, codes, num_outputs, temperature, gumbel, depth)
        self.cell = nn.RNNCell(num_symbols, hidden, nonlinearity="tanh")

    def _init(self, B: int):
        return (self.h0.view(1, -1).expand(B, -1),)

    def _cell(self, x_t, h_tilde, state):
        h = self.cell(x_t, h_tilde)                              # §3.1 h_t
        return h, (h,)


class SuzgunStackLSTM(_SuzgunStackModel):
    """Stack-LSTM of Suzgun et al. (2019) §3.2: h_t, c_t = LSTM(x_t, (h̃_{t−1}, c_{t−1})) with
    ``cell = nn.LSTMCell`` (gates i, f, g, o); otherwise as `SuzgunStackRNN`. The states that
    ``forward`` returns hold h_t (c_t is internal)."""

    cell_kind = "lstm"

    def __init__(self, num_symbols: int, hidden: int, codes: np.ndarray, num_outputs: int,
                 temperature: float = 1.0, gumbel: bool = False, depth: int | None = None):
        super().__init__(num_symbols, hidden, codes, num_outputs, temperature, gumbel, depth)
        self.cell = nn.LSTMCell(num_symbols, hidden)
        self.c0 = nn.Parameter(torch.zeros(hidden))

    def _init(self, B: int):
        return (self.h0.view(1, -1).expand(B, -1), self.c0.view(1, -1).expand(B, -1))

    def _cell(self, x_t, h_tilde, state):
        h, c = self.cell(x_t, (h_tilde, state[1]))               # §3.2 h_t = LSTM(x_t, h̃)
        return h, (h, c)


class SuzgunBabyNTM(_SuzgunController):
    """Baby-NTM of Suzgun et al. (2019) §3.3: the Stack-RNN controller (h̃ = h + W_m M^{(0)})
    with a = softmax over the five ops ROTATE_RIGHT, ROTATE_LEFT, NOOP, POP_LEFT, POP_RIGHT on a
    fixed memory of ``size`` rows of ``width`` (`BabyNTM`): M_t = Σ_i a_i OP_i M_{t−1},
    M_t^{(0)} += n_t. forward(ids) → (states (B, T+1, H + size·width) = [h_t; M_t flattened],
    logits W_y h_t + b). Compiled by `compile_suzgun_baby_ntm` (`requires_suzgun_baby_ntm`)."""

    def __init__(self, num_symbols: int, hidden: int, width: int, num_outputs: int,
                 size: int = 104, temperature: float = 1.0, gumbel: bool = False):
        super().__init__(num_symbols, hidden, width, num_outputs, 5, temperature, gumbel)
        self.memory = BabyNTM(size)
        self.cell = nn.RNNCell(num_symbols, hidden, nonlinearity="tanh")

    @property
    def W_m(self) -> nn.Linear:
        """The paper's W_m (the map of the memory's row 0 into h̃)."""
        return self.W_sh

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = self._check_ids(ids)
        B, T = ids.shape
        valid = ids >= 0
        x = self._x(ids)
        h = self.h0.view(1, -1).expand(B, -1)
        mstate = self.memory.init_state(B, self.width, dtype=x.dtype, device=x.device)
        M = mstate.memory
        hs, ms = [h], [M.flatten(1)]
        for t in range(T):
            h_new = self.cell(x[:, t], h + self.W_sh(M[:, 0]))   # §3.3 h̃, h_t
            act = self.actions(h_new)                            # §3.3 a_t
            value = torch.sigmoid(self.W_n(h_new))               # §3.3 n_t
            M_new = self.memory._update(M, act, value)           # §3.3 M_t = Σ a OP M; += n
            keep = valid[:, t]
            h = torch.where(keep.unsqueeze(1), h_new, h)
            M = torch.where(keep.view(-1, 1, 1), M_new, M)
            hs.append(h)
            ms.append(M.flatten(1))
        hs_t = torch.stack(hs, 1)
        return torch.cat([hs_t, torch.stack(ms, 1)], 2), self.W_y(hs_t)


def _temperature(tau: Any) -> float:
    if isinstance(tau, bool) or not isinstance(tau, (int, float, Fraction)) \
            or not (math.isfinite(float(tau)) and float(tau) > 0):
        raise InputError(f"temperature must be a finite number > 0, got {tau!r}")
    return float(tau)


def _check_compile_options(temperature: Any, gumbel: Any) -> None:
    """The compilers' checks of ``temperature`` (τ, folded into W_a exactly) and ``gumbel``."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, Fraction)) \
            or not (math.isfinite(temperature) and temperature > 0):
        raise InputError(f"temperature must be a finite number > 0 (it is folded into W_a "
                         f"exactly), got {temperature!r}")
    if not isinstance(gumbel, bool):
        raise InputError(f"gumbel must be True or False, got {gumbel!r}")


# --- the controller table ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SuzgunUnit:
    """Hidden unit "the controller was in one of ``cs`` and read one of ``inputs``, and (unless
    ``test`` is None) the machine's top has the given bits": ``test`` is ("reading", bits of the
    memory's top on `SuzgunController.bits`) in mode U or ("latch", bits of the latched top on
    `SuzgunController.latch_bits`) in mode L — which, among the tops the machine has a move
    for, means the top is one of the store codes ``reads`` (None: any). Then the controller is
    in ``c2``, the memory does ``op`` ("push"/"pop") pushing code ``push`` (−1: none), and the
    output is ``out`` (−1: none)."""

    cs: tuple[int, ...]
    inputs: tuple[int, ...]
    reads: tuple[int, ...] | None
    test: tuple[int, ...] | None
    c2: int
    op: str
    push: int
    out: int


@dataclass(frozen=True, eq=False)
class SuzgunController(Abstraction):
    """A compiled `SuzgunStackRNN`/`SuzgunStackLSTM`. Hidden units: ``start`` (+1 only at
    t = 0; None when there is none: then ``units[0]``, a unit entering the initial controller
    state, is on at t = 0 instead), the `SuzgunUnit`s ``units`` in order (±1, or ±tanh 1 for the
    LSTM, read as (ρh + 1)/2 with ρ = ``rho``), then ``relays``: always 0, relay k carries bit
    ``bits[k]`` of the top's code from h̃ through W_hh (only the bits that some unit's test
    needs; the tests of mode-U units are on ``reading_bits``). ``codes`` are the (G + 1, width) symbol codes of the memory (row G empty);
    ``latches`` are the latch units (latch k = 2·bit ``latch_bits[k]`` of the reading one
    step earlier − 1); ``modes``: controller state c is machine state c // modes in mode
    c % modes (0: U, 1 + g: H_g, G + 2: L; module docstring, 1.).
    ``marked``: the store symbols were split into (symbol, is-bottom) for an empty-stack
    recogniser (then ``symbol_of`` maps a memory code to the machine's store code and
    ``state_of`` a controller table state to the machine's state)."""

    cell: str = "rnn"
    codes: np.ndarray = None  # type: ignore[assignment]
    start: int | None = 0
    units: tuple[SuzgunUnit, ...] = ()
    modes: int = 1
    bits: tuple[int, ...] = ()
    reading_bits: tuple[int, ...] = ()
    relays: tuple[int, ...] = ()
    latch_bits: tuple[int, ...] = ()
    latches: tuple[int, ...] = ()
    rho: Fraction = Fraction(1)
    marked: bool = False
    symbol_of: tuple[int, ...] = ()
    state_of: tuple[int, ...] = ()


def _mark_bottom(view: RealtimeTable) -> RealtimeTable:
    """An empty-stack recogniser as a final-state one whose controller can tell: store code g
    (< G) becomes g (above the bottom) or G + g (the bottom element), ⊥ becomes 2G; state p
    becomes (p, e) = 2p + e with e = "the stack is empty", accepting iff e."""
    G = view.G
    trans = {}
    for (p, a, x), (p2, out, pe, ue, y) in view.trans.items():
        xs = [(2 * G, 1)] if x == G else [(x, 0), (G + x, 0)]
        for x2, empty in xs:
            bottom = G <= x2 < 2 * G
            if pe is None and ue is None:               # noop
                y2, e2 = -1, empty
            elif pe is None:                             # push
                y2, e2 = (G + y if empty else y), 0
            elif ue is None:                             # pop
                y2, e2 = -1, int(bottom and not empty)
            else:                                        # replace
                y2, e2 = (G + y if bottom else y), 0
            trans[(2 * p + empty, a, x2)] = (2 * p2 + e2, out, pe, ue, y2)
    Q = 2 * view.Q
    return RealtimeTable(view.kind, view.fields, Q, 2 * view.q0 + 1, view.K, 2 * G, trans,
                         (True,) * Q, "accept", tuple(bool(q % 2) for q in range(Q)), False, 0,
                         {})


# controller modes (mode m of state c = p·(G + 3) + m): U = 0 (memory = the machine's stack),
# H_g = 1 + g (top g held, g = G: ⊥), L = G + 2 (top held in the latch: the reading before
# the previous step); in H_g and L the memory holds the stack below the held top
U = 0


@dataclass(frozen=True)
class _Move:
    c: int                 # controller state before
    a: int                 # input
    X: int                 # the machine's top (reading in U, latch in L, held in H_g)
    c2: int
    op: str                # "push" / "pop"
    push: int              # pushed code (−1: none)
    out: int


def _one_op(mode: int, G: int, X: int, move: tuple) -> tuple[int, str, int]:
    """(mode after, memory op, pushed code) that simulates the machine's move (pop end, push
    end, y) on top X with one push or pop (module docstring, 1.)."""
    pe, ue, y = move
    op = {(None, None): "noop", (None, "top"): "push", ("top", None): "pop",
          ("top", "top"): "replace"}[(pe, ue)]
    L = G + 2
    if mode == U:
        return {"noop": (L, "pop", -1), "replace": (1 + y, "pop", -1), "push": (U, "push", y),
                "pop": (U, "pop", -1)}[op]
    if op == "noop":
        return (U, "push", X) if X != G else (L, "pop", -1)     # ⊥: memory empty, stays
    if op == "replace":
        return U, "push", y
    if op == "push":
        return (1 + y, "push", X) if X != G else (U, "push", y)
    return L, "pop", -1


def _moves(view: RealtimeTable) -> tuple[int, list[_Move]]:
    """Every (controller state, input, machine top) move from the reachable controller states,
    with an over-approximation of the tops possible in each (`_one_op`'s rule)."""
    G = view.G
    modes = G + 3
    c0 = view.q0 * modes + U
    pushed = {y for mv in view.trans.values() if mv[4] is not None and mv[4] >= 0
              for y in [mv[4]]}
    below = frozenset(pushed | {G})                   # what a pop may uncover
    tops: dict[int, set] = {c0: {G}}
    moves: dict = {}
    todo = [c0]
    while todo:
        c = todo.pop()
        p, mode = divmod(c, modes)
        for X in sorted(tops[c]):
            for a in range(view.K):
                mv = view.trans.get((p, a, X))
                if mv is None or (p, a, X, c) in moves:
                    continue
                p2, out, pe, ue, y = mv
                mode2, op, push = _one_op(mode, G, X, (pe, ue, y))
                c2 = p2 * modes + mode2
                moves[(p, a, X, c)] = _Move(c, a, X, c2, op, push, out)
                if ue is not None:
                    nxt = {y}
                elif pe is not None:
                    nxt = set(below)
                else:
                    nxt = {X}
                if 0 < mode2 <= G + 1:
                    nxt = {mode2 - 1}
                have = tops.setdefault(c2, set())
                if not nxt <= have:
                    have |= nxt
                    todo.append(c2)
    return modes, list(moves.values())


def _fewest_bits(pairs: set, codes: np.ndarray) -> tuple[int, ...]:
    """The fewest code bits that tell apart every pair of codes in ``pairs``."""
    if not pairs:
        return ()
    for size in range(1, codes.shape[1] + 1):
        for bits in itertools.combinations(range(codes.shape[1]), size):
            b = list(bits)
            if all((codes[R1, b] != codes[R2, b]).any() for R1, R2 in pairs):
                return bits
    raise CompileError("two store symbols share one code")   # codes are distinct: unreachable


def _merge(moves: list[_Move], modes: int, codes: np.ndarray, held: bool = False
           ) -> tuple[tuple[SuzgunUnit, ...], tuple[int, ...], tuple[int, ...]]:
    """The controller's units (module docstring, 3.), the relayed bits (tests on the reading,
    in mode U) and the latched bits (tests on the latch, in mode L): each on the fewest bits
    that tell apart the defined tops whose moves differ; tops alike on them merged, no test
    where every defined top acts alike; then rectangles (states × inputs) of units alike.
    ``held``: the held layout (module docstring, 7.), whose units test the reading in every mode."""
    G = codes.shape[0] - 1

    def on_reading(mode: int) -> bool:
        return held or mode == U
    groups: dict = {}
    for mv in moves:
        groups.setdefault((mv.c, mv.a), {})[mv.X] = (mv.c2, mv.op, mv.push, mv.out)
    pairs: dict[str, set] = {"reading": set(), "latch": set()}
    for (c, _), g in groups.items():
        mode = c % modes
        if len(set(g.values())) > 1 and (on_reading(mode) or mode == G + 2):
            pairs["reading" if on_reading(mode) else "latch"] |= {
                (X1, X2) for X1 in g for X2 in g if X1 < X2 and g[X1] != g[X2]}
    bits = {k: _fewest_bits(v, codes) for k, v in pairs.items()}
    steps: dict = {}
    for (c, a), g in groups.items():
        mode = c % modes
        if len(set(g.values())) == 1:
            keyed = {None: (None, next(iter(g.values())))}
        else:
            kind = "reading" if on_reading(mode) else "latch"
            on = bits[kind]
            keyed = {}
            for X, res in g.items():
                test = (kind,) + tuple(int(codes[X, k]) for k in on)
                reads = keyed.get(test, ((), res))[0]
                keyed[test] = (reads + (X,), res)
        for test, (reads, res) in keyed.items():
            step = steps.setdefault((test, *res), {})
            step.setdefault(c, {}).setdefault(a, set()).update(reads or ())
    units = []
    for (test, c2, op, push, out), per_c in steps.items():
        by_inputs: dict = {}
        for c, inputs in per_c.items():
            by_inputs.setdefault(tuple(sorted(inputs)), []).append(c)
        for inputs, cs in by_inputs.items():
            reads = None if test is None else tuple(sorted(
                {X for c in cs for a in inputs for X in per_c[c][a]}))
            units.append(SuzgunUnit(tuple(sorted(cs)), inputs, reads, test, c2, op, push, out))
    units.sort(key=lambda u: (u.cs, u.inputs, u.test or ()))
    return tuple(units), bits["reading"], bits["latch"]


def _size(merged: tuple) -> int:
    units, rbits, lbits = merged
    return len(units) + len(set(rbits) | set(lbits)) + len(lbits)


def _choose_codes(moves: list[_Move], modes: int, codes: np.ndarray, tries: int = 400,
                  max_moves: int = 400, held: bool = False) -> tuple[np.ndarray, tuple]:
    """Which nonzero code of the given width each store symbol gets: the binary counting codes,
    improved by a seeded local search (swap two symbols' codes, or give one an unused code;
    kept when the controller gets no larger) for machines of at most ``max_moves`` moves.
    Codes decide which units merge (e.g. Dyck-k with one "bottom" bit: the closing units of all
    bracket types become one). Returns the codes and `_merge`'s result for them."""
    best = (codes, _merge(moves, modes, codes, held))
    G, m = codes.shape[0] - 1, codes.shape[1]
    if len(moves) > max_moves or G < 2:
        return best
    values = np.array([[(v >> (m - 1 - b)) & 1 for b in range(m)] for v in range(1, 1 << m)],
                      dtype=np.int64)
    use = list(range(G)) + list(range(G, len(values)))       # symbol g has code values[use[g]]
    rng = np.random.default_rng(0)
    for _ in range(tries):
        cand = list(use)
        i = int(rng.integers(G))
        j = int(rng.integers(len(values)))
        cand[i], cand[j] = cand[j], cand[i]
        trial = np.vstack([values[cand[:G]], np.zeros((1, m), dtype=np.int64)])
        merged = _merge(moves, modes, trial, held)
        if _size(merged) <= _size(best[1]):
            use, best = cand, (trial, merged)
    return best


def _entry(c0: int, output: str, units: tuple[SuzgunUnit, ...]) -> int | None:
    """A unit that may stand for the start (on at t = 0 instead of a start unit): one entering
    the initial controller state whose output is the machine's output before any input (a
    recogniser's acceptance is the state's; a transducer's must be none). None: keep a start
    unit."""
    for j, u in enumerate(units):
        if u.c2 == c0 and (output == "accept" or u.out < 0):
            return j
    return None


# --- weights ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Layout:
    """Hidden units: [start] + units + relays (one per relayed bit) + latches (one per latched
    bit)."""

    start: bool
    units: tuple[SuzgunUnit, ...]
    relay_bits: tuple[int, ...]
    latch_bits: tuple[int, ...]
    reading_bits: tuple[int, ...] = ()     # the bits of the reading tests (⊆ relay_bits)

    @property
    def n_units(self) -> int:
        return int(self.start) + len(self.units)

    def relay(self, k: int) -> int:
        return self.n_units + self.relay_bits.index(k)

    def latch(self, k: int) -> int:
        return self.n_units + len(self.relay_bits) + self.latch_bits.index(k)

    @property
    def H(self) -> int:
        return self.n_units + len(self.relay_bits) + len(self.latch_bits)


def _zeros(*shape) -> np.ndarray:
    arr = np.empty(shape, dtype=object)
    arr[...] = Fraction(0)
    return arr


def _recurrence(K: int, c0: int, lay: _Layout, rho: Fraction
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(W_ih, W_hh, bias, W_sh, h0) of the Elman units (module docstring, 2.–3.): unit j is on
    iff its input, an active unit entering one of its controller states and (if it tests) its
    bits of the reading (through the relays) or of the latch; relays read bit k of the memory's
    top through W_sh; latches threshold their relay. Exact Fractions (h0, W_sh unscaled)."""
    Fr = Fraction
    H, off, units = lay.H, int(lay.start), lay.units
    n_units = lay.n_units
    into: dict[int, list] = {c0: [0]} if lay.start else {}
    for j, u in enumerate(units):
        into.setdefault(u.c2, []).append(j + off)
    W_ih, W_hh, bias = _zeros(H, K), _zeros(H, H), _zeros(H)
    if lay.start:
        bias[0] = Fr(-1, 2)                             # the start unit is off after t = 0
    for j, u in enumerate(units):
        i = j + off
        for a in u.inputs:
            W_ih[i, a] = Fr(1)
        sources = sorted({s for c in u.cs for s in into.get(c, ())})
        for s in sources:
            W_hh[i, s] = rho / 2                        # ind(h_s) = (ρ h_s + 1)/2
        bias[i] = Fr(len(sources), 2) - (Fr(5, 2) if u.test is not None else Fr(3, 2))
        if u.test is None:
            continue
        on, values = u.test[0], u.test[1:]
        bias[i] += Fr(1 - sum(values))                  # m_X = Σ (2c − 1) bit − |c| + 1
        on_bits = lay.reading_bits if on == "reading" else lay.latch_bits
        if len(on_bits) != len(values):
            raise CompileError(f"unit test {u.test} does not match the bits {on_bits}")
        for k, c in zip(on_bits, values):
            if on == "reading":                         # bit k of s^(0) through its relay
                W_hh[i, lay.relay(k)] = Fr(2 * c - 1)
            else:                                       # bit k of the latch, (ρh + 1)/2
                W_hh[i, lay.latch(k)] = Fr(2 * c - 1) * rho / 2
                bias[i] += Fr(2 * c - 1, 2)
    for k in lay.latch_bits:                            # latch_t = 2·bit_k(s^(0)_{t−1}) − 1
        W_hh[lay.latch(k), lay.relay(k)] = Fr(1)
        bias[lay.latch(k)] = Fr(-1, 2)
    width = max([k + 1 for k in lay.relay_bits], default=0)
    W_sh = np.zeros((H, width), dtype=np.int64)
    for k in lay.relay_bits:
        W_sh[lay.relay(k), k] = 1
    # h0: unit 0 (the start unit or the entry unit) on, the other units and latches off,
    # relays 0 (h = ±1, or ±1/ρ for the LSTM)
    h0 = _zeros(H)
    h0[:n_units] = -1 / rho
    h0[0] = 1 / rho
    for k in lay.latch_bits:
        h0[lay.latch(k)] = -1 / rho
    return W_ih, W_hh, bias, W_sh, h0


def _head(lay: _Layout, rho: Fraction, values: np.ndarray, at_start: np.ndarray,
          factor: Fraction = ONE) -> tuple[ExactWeight, ExactWeight]:
    """Rows (k, H), bias (k,) of factor·HEAD·(Σ_j values[k, j] ind(h_j) − 1/2), j over the start
    unit (column ``at_start``, when there is one) and the units; exactly ±factor·HEAD/2 (times
    β)."""
    Fr = Fraction
    coef = np.concatenate([at_start[:, None], values], 1) if lay.start else values
    Wm = _zeros(coef.shape[0], lay.H)
    Wm[:, :lay.n_units] = [[factor * HEAD * Fr(int(c)) * rho / 2 for c in row] for row in coef]
    b = np.array([factor * HEAD * (Fr(int(s), 2) - Fr(1, 2)) for s in coef.sum(1)],
                 dtype=object)
    return ExactWeight.of(Wm), ExactWeight.of(b)


def _weights(view: RealtimeTable, c0: int, modes: int, lay: _Layout, codes: np.ndarray,
             lstm: bool, temperature: Fraction, readout=None) -> dict:
    """The module's exact weights; ``readout(c2)`` (None: the machine's output) gives the 0/1
    output column of a unit entering controller state c2 (the next-symbol sets, 7.)."""
    K, H, units = view.K, lay.H, lay.units
    rho = RHO if lstm else Fraction(1)
    W_ih, W_hh, bias, W_sh_bits, h0 = _recurrence(K, c0, lay, rho)
    W_sh = np.zeros((H, codes.shape[1]), dtype=np.int64)
    W_sh[:, :W_sh_bits.shape[1]] = W_sh_bits
    w: dict[str, Any] = {"W_sh.weight": ExactWeight.of(W_sh, scaled=False)}
    w["h0"] = ExactWeight.of(h0, scaled=False)
    big = np.full(H, Fraction(HEAD, 2), dtype=object)
    zeros = _zeros
    if lstm:                    # gates i, f, g, o: i = o = 1, f = 0 exactly; g the Elman unit
        w["cell.weight_ih"] = ExactWeight.of(np.concatenate([zeros(H, K), zeros(H, K), W_ih,
                                                             zeros(H, K)]))
        w["cell.weight_hh"] = ExactWeight.of(np.concatenate([zeros(H, H), zeros(H, H), W_hh,
                                                             zeros(H, H)]))
        w["cell.bias_ih"] = ExactWeight.of(np.concatenate([big, -big, bias, big]))
        w["cell.bias_hh"] = ExactWeight.of(np.zeros(4 * H, dtype=np.int64))
        c0_ = np.array([int(np.sign(x)) for x in h0], dtype=np.int64)
        w["c0"] = ExactWeight.of(c0_, scaled=False)
    else:
        w["cell.weight_ih"] = ExactWeight.of(W_ih)
        w["cell.weight_hh"] = ExactWeight.of(W_hh)
        w["cell.bias_ih"] = ExactWeight.of(bias)
        w["cell.bias_hh"] = ExactWeight.of(np.zeros(H, dtype=np.int64))

    def head(values: np.ndarray, at_start: np.ndarray, factor: Fraction = ONE
             ) -> tuple[ExactWeight, ExactWeight]:
        return _head(lay, rho, values, at_start, factor)

    n_out = 1 if view.output == "accept" else view.n_out + 1
    none = view.n_out                                    # the "no output" class of a transducer
    acts = np.array([[u.op == "push" for u in units], [u.op == "pop" for u in units]],
                    dtype=np.int64).reshape(2, len(units))
    w["W_a.weight"], w["W_a.bias"] = head(acts, np.zeros(2, dtype=np.int64), temperature)
    m = codes.shape[1]
    vals = np.zeros((m, len(units)), dtype=np.int64)
    for j, u in enumerate(units):
        if u.push >= 0:
            vals[:, j] = codes[u.push]
    w["W_n.weight"], w["W_n.bias"] = head(vals, np.zeros(m, dtype=np.int64))
    if readout is not None:                              # 7.: y_t = the set of (p, top)
        first = np.asarray(readout(c0), dtype=np.int64)
        out = np.array([readout(u.c2) for u in units], dtype=np.int64).reshape(
            len(units), len(first)).T
    elif view.output == "symbol":
        out = np.zeros((n_out, len(units)), dtype=np.int64)
        for j, u in enumerate(units):
            out[u.out if u.out >= 0 else none, j] = 1
        first = np.zeros(n_out, dtype=np.int64)
        first[none] = 1
    else:
        out = np.array([[int(view.accepting[u.c2 // modes]) for u in units]],
                       dtype=np.int64).reshape(1, len(units))
        first = np.array([int(view.accepting[c0 // modes])], dtype=np.int64)
    w["W_y.weight"], w["W_y.bias"] = head(out, first)
    return w


# --- decoding ------------------------------------------------------------------------------------
def _unit_targets(lay: _Layout, c0: int, C: int) -> np.ndarray:
    """(H, C) 0/1: row j marks the controller state c2 of hidden unit j (the start unit, when
    the layout has one, marks c0)."""
    target = np.zeros((lay.H, C), dtype=np.float32)
    if lay.start:
        target[0, c0] = 1
    for j, u in enumerate(lay.units):
        target[j + int(lay.start), u.c2] = 1
    return target


def _active_unit(states: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The controller state of the one active (> 0) hidden unit of each step's states, as
    marked in `target` (`_unit_targets`); −1 where no unit is active (dead). Read in chunks of
    positions, so the (positions, H) and (positions, C) working arrays stay about 32 MB."""
    states = np.asarray(states)
    H, C = target.shape
    flat = states.reshape(-1, states.shape[-1])
    out = np.empty(flat.shape[0], dtype=np.int64)
    step = max(1, (1 << 23) // max(H + C, 1))
    for lo in range(0, flat.shape[0], step):
        hits = (flat[lo:lo + step, :H] > 0).astype(np.float32) @ target
        out[lo:lo + step] = np.where(hits.max(-1) > 0.5, hits.argmax(-1), -1)
    return out.reshape(states.shape[:-1])


def _decoders(view: RealtimeTable, modes: int, c0: int, lay: _Layout, codes: np.ndarray):
    """(decode, window_decode): states → the machine's fields. The controller state is the one
    active unit's c2 (the start unit's: c0; none: dead, −1); the stack is the memory's read-back
    plus the held top — in H_g the symbol g, in L the symbol whose code the reading had one step
    earlier (states[t − 1]: the latch holds it)."""
    G, H, m = view.G, lay.H, codes.shape[1]
    C = view.Q * modes
    target = _unit_targets(lay, c0, C)
    lut = np.full(1 << m, -1, dtype=np.int64)
    lut[codes.astype(np.int64) @ (1 << np.arange(m - 1, -1, -1))] = np.arange(G + 1)
    pow2 = 1 << np.arange(m - 1, -1, -1)

    def control(states: np.ndarray):
        c = _active_unit(states, target)
        dead = c < 0
        mode = np.where(dead, -1, c % modes)
        held = np.where((mode > 0) & (mode <= G + 1), mode - 1, -1)
        prev = np.concatenate([states[:, :1, H:H + m], states[:, :-1, H:H + m]], 1)
        sym = lut[(prev > 0.5).astype(np.int64) @ pow2]
        held = np.where(mode == G + 2, sym, held)
        return dead, np.where(dead, -1, c // modes), held

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        B, T1 = states.shape[:2]
        dead, state, held = control(states)
        if view.fields == "dfa":
            return {"state": state}
        n = np.rint(states[..., H + m]).astype(np.int64)
        contents = np.rint(states[..., H + m + 1:]).astype(np.int64)
        depth = np.where(dead, -1, n + (held >= 0) * (held != G))
        if view.fields == "store":
            W = max(int(depth.max(initial=0)), 1)
            store = np.full((B, T1, W), -1, dtype=np.int64)
            w = min(W, contents.shape[2])
            store[..., :w] = contents[..., :w]
            b, t = np.nonzero((held >= 0) & (held != G))
            ok = n[b, t] < W
            store[b[ok], t[ok], n[b, t][ok]] = held[b[ok], t[ok]]
            store[dead] = -1
            return {"state": state, "store": store, "size": depth}
        # a held ⊥ (G) is the bottom itself, not a symbol above it
        stack, top = held_stack(contents, n, np.where(held == G, -1, held), depth, dead, G)
        return {"state": state, "stack": stack, "depth": depth, "top": top}

    def window(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        dead, state, held = control(states)
        n = np.rint(states[..., H + m]).astype(np.int64)
        mw = np.rint(states[..., H + m + 1:]).astype(np.int64)         # memory, top first
        cells = mw.shape[2]
        i = np.arange(cells)
        mem = np.where(i < n[..., None], mw, np.where(i == n[..., None], G, -1))
        real = (held >= 0) & (held != G)
        shifted = np.concatenate([held[..., None], mem[..., :cells - 1]], 2)
        win = np.where(real[..., None], shifted, mem)
        win[dead] = -1
        depth = np.where(dead, -1, n + real)
        return {"state": state, "stack_top": win, "depth": depth,
                "top": np.where(dead, -1, win[..., 0])}

    return decode, window


# --- preconditions and compile -------------------------------------------------------------------
def _view(machine, model: str) -> RealtimeTable | PdanetError:
    """The machine's table for a Suzgun stack model, or the typed error saying why not."""
    try:
        view = realtime_table(machine)
    except CompileError as exc:
        msg = str(exc)
        if "not a real-time deterministic machine" in msg:
            return CompileError(
                f"{model}: {msg}; the Suzgun stack takes one push or pop per step of a "
                "deterministic real-time machine — a nondeterministic PDA needs the "
                "nondeterministic stack RNN of DuSell & Chiang (target 'ns_rnn')")
        return CompileError(f"{model}: {msg}")
    if view.kind != "stack":
        return CompileError(
            f"{model}: {machine!r} keeps a {view.kind}; the Suzgun et al. (2019) stack holds a "
            f"stack only — compile it to target 'stack_rnn' with memory 'grefenstette' (the "
            f"neural {view.kind.capitalize() if view.kind != 'deque' else 'DeQue'} of "
            "Grefenstette et al. 2015)")
    return view


def requires_suzgun_stack_rnn(machine) -> str | PdanetError | None:
    """Why ``machine`` cannot be compiled into `SuzgunStackRNN` (an error to raise), or None.
    Accepted: real-time deterministic machines whose store is a stack (DPDA, DPDT with at most
    one output per step, DFA / Mealy machine)."""
    view = _view(machine, "suzgun_stack_rnn")
    return view if isinstance(view, PdanetError) else None


def requires_suzgun_stack_lstm(machine) -> str | PdanetError | None:
    """As `requires_suzgun_stack_rnn` (the same machines) for `SuzgunStackLSTM`."""
    view = _view(machine, "suzgun_stack_lstm")
    return view if isinstance(view, PdanetError) else None


def _compile(machine, lstm: bool, dtype: torch.dtype, temperature: Any, gumbel: bool,
             depth: int | None, readout: str | None = None) -> CompiledNetwork:
    model = MODELS[int(lstm)]
    if readout not in READOUTS:
        raise InputError(f"readout must be one of {READOUTS} (None: the machine's own output), "
                         f"got {readout!r}")
    view = _view(machine, model)
    if isinstance(view, PdanetError):
        raise view
    _check_compile_options(temperature, gumbel)
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise InputError(f"depth must be a positive int or None, got {depth!r}")
        if any(mv[3] is not None for mv in view.trans.values()):
            raise UnboundedStackError(
                f"{model}: {machine!r} pushes without bound but the SuzgunStack was fixed to "
                f"{depth} cells; drop `depth` (the stack is then sized to each input)")
    tau = Fraction(temperature)
    if readout == "next_set":
        return _compile_next_set(machine, view, lstm, dtype, tau, gumbel, depth)
    original = view
    marked = view.empty_stack
    if marked:
        view = _mark_bottom(view)
    codes = store_codes(view.G, "binary")
    modes, moves = _moves(view)
    c0 = view.q0 * modes + U
    what = f"compiling {machine!r} to {model} (up to {len(moves) + 1:,} hidden units)"
    hint = ("compile it with model 'grefenstette_lstm' or 'grefenstette_rnn', which factor the "
            "symbols a machine copies (`pdanet.models.grefenstette.estimate(machine)` gives "
            "their size), or use a smaller machine (for a task, a smaller vocabulary, e.g. "
            "vocab_size=16)")
    limits.check(what, len(moves) + 1, "max_units", hint=hint)
    limits.check(what, 32 * (len(moves) + 1) * (4 * (len(moves) + view.K) + codes.shape[1] + 8),
                 "max_bytes", hint=hint)
    codes, (units, rbits, lbits) = _choose_codes(moves, modes, codes)
    entry = _entry(c0, view.output, units)
    if entry is not None:                    # the entry unit stands for the start: index 0
        units = (units[entry],) + units[:entry] + units[entry + 1:]
    start = entry is None
    lay = _Layout(start, units, tuple(sorted(set(rbits) | set(lbits))), lbits, rbits)
    H = lay.H
    weights = _weights(view, c0, modes, lay, codes, lstm, tau)
    n_out = 1 if view.output == "accept" else view.n_out + 1
    cls = SuzgunStackLSTM if lstm else SuzgunStackRNN
    module = cls(view.K, H, codes, n_out, float(tau), gumbel, depth)
    module = load_exact(module, weights, BETA, dtype).eval()   # eval: no Gumbel noise
    decoder, window = _decoders(view, modes, c0, lay, codes)
    G0 = original.G
    symbol_of = tuple(range(view.G)) + (G0,)
    state_of = tuple(range(view.Q))
    if marked:
        symbol_of = tuple(g % G0 for g in range(2 * G0)) + (G0,)
        state_of = tuple(q // 2 for q in range(view.Q))
        decoder, window = _unmark(decoder, symbol_of, state_of), _unmark(window, symbol_of,
                                                                            state_of)
    if view.fields == "pushdown":
        module.window_decoder = window
    module.control_only = view.fields == "dfa"      # the decoder reads [h_t; s_t^(0)] alone
    reader = _reader(view)
    relays = tuple(lay.relay(k) for k in lay.relay_bits)
    latches = tuple(lay.latch(k) for k in lay.latch_bits)
    labels = (("start",) if start else ()) + tuple(_label(u) for u in units) + tuple(
        f"relay·bit{k}" for k in lay.relay_bits) + tuple(f"latch·bit{k}" for k in lay.latch_bits)
    abstraction = SuzgunController(labels=labels, cell="lstm" if lstm else "rnn", codes=codes,
                                   start=0 if start else None, units=units, modes=modes,
                                   bits=lay.relay_bits, reading_bits=rbits, relays=relays,
                                   latch_bits=lbits,
                                   latches=latches, rho=RHO if lstm else Fraction(1),
                                   marked=marked, symbol_of=symbol_of, state_of=state_of)
    Qs, Ks, Gs, Ws = sp.symbols("Q K G W")
    if marked:      # Q × {empty?}, Γ ⊎ Γ'; at most one unit per (state·mode, input, top)
        bound = 2 * Qs * (2 * Gs + 3) * Ks * (2 * Gs + 1) + 1 + 2 * Ws
    else:
        bound = Qs * (Gs + 3) * Ks * (Gs + 1) + 1 + 2 * Ws
    params = {"Q": original.Q, "K": original.K, "G": original.G, "W": codes.shape[1]}
    info = {
        "model": model,
        "controller": "lstm" if lstm else "elman",
        "memory": "suzgun",
        "hidden_units": H,
        "controller_units": len(units) + int(start),
        "start_unit": start,
        "relay_units": len(relays),
        "latch_units": len(latches),
        "stack_width": codes.shape[1],
        "units_with_test": sum(u.test is not None for u in units),
        "controller_states": len({u.c2 for u in units} | {c0}),
        "temperature": str(tau),
        "gumbel": gumbel,
        "bottom_marked": marked,
        "position_bytes": limits.position_bytes(H, "lstm" if lstm else "rnn",
                                                2 * codes.shape[1] + view.n_out + 1),
        "step": ("one network step reads one input symbol and applies one push or pop; the "
                 "machine's noop / replace change the top held in the controller (modes H_X, "
                 "or the latch)"),
    }
    argument = ("every unit pre-activation is ±1/2 or beyond (one-hot input, one active unit, "
                "exact 0/1 readings) and every head pre-activation ±HEAD/2 = ±16; at β = 64 "
                "tanh(±32) is exactly ±1 and σ(±1024), softmax with gap 2048 exactly 0/1 in "
                "float32 and float64, so actions, pushed codes and readings stay exact")
    if lstm:
        argument += ("; LSTM gates i = o = σ(1024) = 1, f = σ(−1024) = 0 exactly, units ±tanh 1 "
                     f"read through ρ = {RHO} (|ρ tanh 1 − 1| < 1e-12)")
    return CompiledNetwork(
        machine=machine, module=module, target="stack_rnn", method=model, hidden_units=H,
        bound=bound, params=params, weights=weights, scale=sp.Integer(BETA), decoder=decoder,
        reader=reader, margin=sp.Rational(1, 2), steps_per_symbol=1, scale_argument=argument,
        abstraction=abstraction, info=info)


def _compile_next_set(machine, view: RealtimeTable, lstm: bool, dtype: torch.dtype,
                      tau: Fraction, gumbel: bool, depth: int | None) -> CompiledNetwork:
    """`_compile` with ``readout="next_set"``: the held layout (module docstring, 7.)."""
    model = MODELS[int(lstm)]
    if view.fields != "pushdown" or not isinstance(machine, DeterministicPushdown):
        raise CompileError(f"{model}: readout 'next_set' takes a real-time DPDA (a recogniser "
                           f"with a stack); {machine!r} is not one")
    _, sets = _next_set_table(view, machine, model)
    target = NextSetMachine(machine)
    G, K = view.G, view.K
    modes, moves = _held_moves(view)
    c0 = view.q0 * modes + G
    what = f"compiling {machine!r} to {model} (up to {len(moves) + 1:,} hidden units)"
    hint = "use a smaller machine"
    limits.check(what, len(moves) + 1, "max_units", hint=hint)
    limits.check(what, 32 * (len(moves) + 1) * (4 * (len(moves) + K) + G + 8), "max_bytes",
                 hint=hint)
    codes = store_codes(G, "binary")
    codes, (units, rbits, _) = _choose_codes(moves, modes, codes, held=True)
    zero = (False,) * (K + 1)

    def readout(c2: int) -> np.ndarray:
        p, mode = divmod(c2, modes)
        return np.array(sets.get((p, _held_top(mode, G)), zero), dtype=np.int64)

    entry = _entry(c0, "accept", units)        # the output is a function of c2
    if entry is not None:
        units = (units[entry],) + units[:entry] + units[entry + 1:]
    start = entry is None
    lay = _Layout(start, units, tuple(rbits), (), tuple(rbits))
    weights = _weights(view, c0, modes, lay, codes, lstm, tau, readout)
    cls = SuzgunStackLSTM if lstm else SuzgunStackRNN
    module = cls(K, lay.H, codes, K + 1, float(tau), gumbel, depth)
    module = load_exact(module, weights, BETA, dtype).eval()   # eval: no Gumbel noise

    def reader(logits: np.ndarray) -> np.ndarray:
        return np.asarray(logits) > 0

    relays = tuple(lay.relay(k) for k in lay.relay_bits)
    labels = (("start",) if start else ()) + tuple(_label(u) for u in units) + tuple(
        f"relay·bit{k}" for k in lay.relay_bits)
    abstraction = SuzgunController(labels=labels, cell="lstm" if lstm else "rnn", codes=codes,
                                   start=0 if start else None, units=units, modes=modes,
                                   bits=lay.relay_bits, reading_bits=tuple(rbits),
                                   relays=relays, rho=RHO if lstm else Fraction(1),
                                   symbol_of=tuple(range(G + 1)), state_of=tuple(range(view.Q)))
    Qs, Ks, Gs, Ws = sp.symbols("Q K G W")
    bound = Qs * (Gs + 1) ** 2 * Ks * (Gs + 1) + 1 + Ws
    info = {
        "model": model, "controller": "lstm" if lstm else "elman", "memory": "suzgun",
        "readout": "next_set", "layout": "held", "hidden_units": lay.H,
        "controller_units": len(units) + int(start), "start_unit": start,
        "relay_units": len(relays), "latch_units": 0, "stack_width": codes.shape[1],
        "units_with_test": sum(u.test is not None for u in units),
        "controller_states": len({u.c2 for u in units} | {c0}),
        "temperature": str(tau), "gumbel": gumbel, "bottom_marked": False,
        "position_bytes": limits.position_bytes(lay.H, "lstm" if lstm else "rnn",
                                                2 * codes.shape[1] + K + 1),
        "next_sets": {f"{_state_name(machine, p)}·{_stack_name(machine, X, G)}":
                      "".join(str(int(b)) for b in s) for (p, X), s in sorted(sets.items())},
        "step": ("one network step reads one input symbol and applies one push or pop; the "
                 "controller holds the top one or two stack symbols, the memory the rest"),
    }
    argument = ("every unit pre-activation is ±1/2 or beyond (one-hot input, one active unit, "
                "exact 0/1 readings) and every head pre-activation ±HEAD/2 = ±16; at β = 64 "
                "tanh(±32) is exactly ±1 and σ(±1024), softmax with gap 2048 exactly 0/1 in "
                "float32 and float64; y_t's logits are ±1024: σ > 1/2 exactly on the next set")
    if lstm:
        argument += ("; LSTM gates i = o = σ(1024) = 1, f = σ(−1024) = 0 exactly, units ±tanh 1 "
                     f"read through ρ = {RHO} (|ρ tanh 1 − 1| < 1e-12)")
    return CompiledNetwork(
        machine=target, module=module, target="stack_rnn", method=model, hidden_units=lay.H,
        bound=bound, params={"Q": view.Q, "K": K, "G": G, "W": codes.shape[1]},
        weights=weights, scale=sp.Integer(BETA),
        decoder=_held_decoder(view, modes, c0, lay, codes), reader=reader,
        margin=sp.Rational(1, 2), steps_per_symbol=1, scale_argument=argument,
        abstraction=abstraction, info=info, compiled_from=machine)


def _label(u: SuzgunUnit) -> str:
    cs = "|".join(f"c{c}" for c in u.cs)
    a = "|".join(str(a) for a in u.inputs)
    reads = "*" if u.reads is None else "|".join(str(R) for R in u.reads)
    return f"{cs}·{a}·{reads}"


def _unmark(decode, symbol_of: tuple[int, ...], state_of: tuple[int, ...]):
    """A decoder whose store codes and states are mapped back through the bottom marking."""
    sym = np.array(symbol_of + (-1,), dtype=np.int64)
    st = np.array(state_of + (-1,), dtype=np.int64)

    def run(states: np.ndarray) -> dict[str, np.ndarray]:
        out = dict(decode(states))
        for key in ("stack", "top", "stack_top"):
            if key in out:
                out[key] = sym[out[key]]
        out["state"] = st[out["state"]]
        return out

    return run


def compile_suzgun_stack_rnn(machine, dtype: torch.dtype = torch.float32, temperature: Any = 1,
                             gumbel: bool = False, depth: int | None = None,
                             readout: str | None = None) -> CompiledNetwork:
    """Compile a real-time deterministic stack machine into a `SuzgunStackRNN` (module
    docstring): ``temperature`` τ (a positive int or Fraction, folded into W_a), ``gumbel``
    (Gumbel noise while training; none in eval mode), ``depth`` (a fixed stack size; only for
    machines that never push). ``net.bound``: 1 start unit + one unit per (state × mode, input,
    reading) at most, modes |Γ| + 2 (the held top), + M relay units (M = code width).
    ``readout="next_set"`` (a real-time DPDA): y_t is the next-symbol set after each prefix with
    the end marker last (Suzgun et al. 2019 Table 1; module docstring, 7.), ``net.machine`` the
    `NextSetMachine` of ``machine``; CompileError when the set is not a function of (state, top
    of stack) on the reachable configurations."""
    return _compile(machine, False, dtype, temperature, gumbel, depth, readout)


def compile_suzgun_stack_lstm(machine, dtype: torch.dtype = torch.float32, temperature: Any = 1,
                              gumbel: bool = False, depth: int | None = None,
                              readout: str | None = None) -> CompiledNetwork:
    """As `compile_suzgun_stack_rnn` (``readout`` included), into a `SuzgunStackLSTM`
    (constant gates, the Elman unit in the cell gate; units ±tanh 1 read through ρ)."""
    return _compile(machine, True, dtype, temperature, gumbel, depth, readout)


# --- next-symbol sets (Suzgun et al. 2019 §4.1, Table 1) -------------------------------------------
READOUTS = (None, "next_set")


@dataclass(frozen=True)
class _NextSets:
    """Co-reachability summaries of a real-time deterministic stack recogniser (store codes as in
    `RealtimeTable`, G = ⊥), a least fixpoint over its moves (the pop summaries of pushdown
    reachability, Bouajjani, Esparza & Maler 1997): ``local[p, X]`` — from state p with X on top
    some continuation is accepted before X is popped; ``pops[p][X]`` — the bit mask of the states
    in which some continuation from (p, X on top) first pops X. For a stack γ the set of states
    q whose configuration (q, γ) is co-reachable is B(γ) (a bit mask): B(⊥) = {q : local[q, ⊥]},
    B(γX) = {q : local[q, X] or pops[q][X] ∩ B(γ) ≠ ∅}."""

    view: RealtimeTable
    local: np.ndarray
    pops: np.ndarray              # (Q, G + 1) int64 bit masks over states

    def accepts(self, p: Any, X: Any) -> Any:
        """Acceptance of (p, top X): the final states, or the empty stack (X = ⊥)."""
        v = self.view
        return (np.asarray(X) == v.G) if v.empty_stack else np.asarray(v.accepting, bool)[p]

    def above(self, X: Any, below: Any) -> Any:
        """B(γX) from X and B(γ) (arrays broadcast)."""
        X, below = np.asarray(X), np.asarray(below, dtype=np.int64)
        out = np.zeros(np.broadcast(X, below).shape, dtype=np.int64)
        for q in range(self.view.Q):
            on = self.local[q, X] | ((self.pops[q, X] & below) != 0)
            out |= np.where(on, np.int64(1) << q, 0)
        return out

    def sets(self, p: Any, X: Any, below: Any) -> np.ndarray:
        """(…, K + 1) bool: the next-symbol sets of configurations (state p, top X, B(stack
        below X) = ``below``; ⊥ has nothing below, 0): input a is in the set iff the machine
        has a move on it and the configuration after it is co-reachable; the last column (the
        end marker) iff (p, X) accepts."""
        v = self.view
        p, X, below = np.broadcast_arrays(np.asarray(p), np.asarray(X),
                                          np.asarray(below, dtype=np.int64))
        here = self.above(X, below)                                   # B(γX)
        out = np.zeros(p.shape + (v.K + 1,), dtype=bool)
        for (q, a, x), (q2, _, pe, ue, y) in v.trans.items():
            at = (p == q) & (X == x)
            if not at.any():
                continue
            op = op_name(pe, ue)
            if op == "noop":
                after = here
            elif op == "pop":
                after = below
            elif op == "replace":
                after = self.above(np.full_like(X, y), below)
            else:                                                     # push y on X
                after = self.above(np.full_like(X, y), here)
            out[..., a] |= at & ((after >> q2) & 1).astype(bool)
        out[..., v.K] = self.accepts(p, X)
        return out

    def live(self, p: Any, X: Any, below: Any) -> np.ndarray:
        """Whether the configurations are co-reachable (some continuation is accepted)."""
        return ((self.above(X, below) >> np.asarray(p)) & 1).astype(bool)

    def below_masks_run(self, stack: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """`below_masks` of a batch run (B, T+1, D) of a real-time machine, incrementally: one
        step changes only the cells at or above min(depth before, depth after), so each row
        keeps B(cells 0 … d) of its unchanged cells and extends them by the new ones (O(1)
        amortised per step instead of O(depth)). Dead rows (depth −1) give 0."""
        stack, depth = np.asarray(stack), np.asarray(depth)
        Bn, T1, D = stack.shape
        rows = np.arange(Bn)
        cells = np.zeros((Bn, max(D, 1)), dtype=np.int64)      # B(cells 0 … d)
        cells[:, 0] = self.above(np.full(Bn, self.view.G), 0)
        known = np.ones(Bn, dtype=np.int64)                     # cells[:, :known] are valid
        prev = np.zeros(Bn, dtype=np.int64)
        out = np.zeros((Bn, T1), dtype=np.int64)
        for t in range(T1):
            d = depth[:, t]
            alive = d >= 0
            known = np.where(alive, np.maximum(np.minimum(known, np.minimum(prev, d) + 1), 1), 1)
            while True:
                grow = alive & (known < d)                      # cells below the top: 0 … d − 1
                if not grow.any():
                    break
                r, k = rows[grow], known[grow]
                cells[r, k] = self.above(np.maximum(stack[r, t, k], 0), cells[r, k - 1])
                known[grow] += 1
            out[:, t] = np.where(alive & (d > 0), cells[rows, np.maximum(d - 1, 0)], 0)
            prev = np.where(alive, d, 0)
        return out

    def below_masks(self, stack: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """B(stack below the top) for (…, D) stacks (bottom first, ⊥ = G in cell 0, −1 above
        the top) of the given depths (symbols above ⊥; ⊥ itself has nothing below: 0)."""
        stack = np.asarray(stack)
        depth = np.asarray(depth)
        B = np.zeros(depth.shape, dtype=np.int64)
        cur = self.above(np.full(depth.shape, self.view.G), 0)        # B(⊥)
        for d in range(1, stack.shape[-1]):
            take = depth == d
            B = np.where(take, cur, B)
            if not (depth > d).any():
                break
            cur = self.above(np.maximum(stack[..., d], 0), cur)
        return B


def _summaries(view: RealtimeTable) -> _NextSets:
    """`_NextSets` of a recogniser's table: the least fixpoint of (for each move on (p, a, X)
    to p2) noop: local[p, X] ⇐ local[p2, X], pops ⊇ pops[p2][X]; replace by y: the same with y;
    pop: pops[p][X] ∋ p2; push y: local[p, X] ⇐ local[p2, y] or local[q, X] for some q in
    pops[p2][y], pops[p][X] ⊇ ∪ pops[q][X] over those q."""
    Q, G = view.Q, view.G
    if Q > 62:
        raise CompileError(f"readout 'next_set' handles machines of at most 62 states; this one "
                           f"has {Q}: minimise it first")
    local = np.zeros((Q, G + 1), dtype=bool)
    if view.empty_stack:
        local[:, G] = True
    else:
        local[:, :] = np.asarray(view.accepting, dtype=bool)[:, None]
    pops = np.zeros((Q, G + 1), dtype=np.int64)
    moves = [(p, X, p2, op_name(pe, ue), y) for (p, _, X), (p2, _, pe, ue, y)
             in view.trans.items()]
    changed = True
    while changed:
        changed = False
        for p, X, p2, op, y in moves:
            if op == "pop":
                lo, po = False, np.int64(1) << p2
            elif op in ("noop", "replace"):
                Z = X if op == "noop" else y
                lo, po = local[p2, Z], pops[p2, Z]
            else:
                lo, po = local[p2, y], np.int64(0)
                for q in range(Q):
                    if (pops[p2, y] >> q) & 1:
                        lo = lo or local[q, X]
                        po |= pops[q, X]
            if lo and not local[p, X]:
                local[p, X] = True
                changed = True
            if po & ~pops[p, X]:
                pops[p, X] |= po
                changed = True
    return _NextSets(view, local, pops)


def _next_set_table(view: RealtimeTable, machine, model: str
                    ) -> tuple[_NextSets, dict[tuple[int, int], tuple[bool, ...]]]:
    """The next-symbol set of every live reachable configuration as a function of (state, top):
    ``{(p, X): set}`` — or CompileError when two reachable co-reachable configurations with the
    same state and top have different sets (the readout reads only the controller, which holds
    the state and the top), naming two prefixes that lead there (also as ``error.prefixes``).

    Reachability runs over abstract configurations whose cells are (symbol, B(stack below it)):
    one *frame* per pushed cell and entry state, its heads (state, top) reachable before the
    cell is popped, its return states, and the heads (of the frames) that pushed it (the
    summary algorithm for pushdown reachability); each head keeps a shortest-found prefix."""
    if view.output != "accept" or view.kind != "stack":
        raise CompileError(f"{model}: readout 'next_set' needs a recogniser whose store is a stack "
                           f"(the next-symbol sets of its language, Suzgun et al. 2019 Table 1); "
                           f"{machine!r} is a {view.output!r} machine on a {view.kind}")
    for (p, a, X), (_, _, pe, _, _) in view.trans.items():
        if X == view.G and pe is not None:
            raise CompileError(f"{model}: {machine!r} pops the empty stack ⊥ (state {p}, input "
                               f"{a}); a stack machine never removes ⊥")
    ns = _summaries(view)
    G = view.G
    init = (-1, G, 0)
    heads: dict[tuple, dict[tuple[int, int], tuple]] = {init: {(view.q0, G): ()}}
    entry: dict[tuple, tuple] = {init: ()}
    callers: dict[tuple, set] = {init: set()}
    rets: dict[tuple, dict[int, tuple]] = {init: {}}
    todo = [(init, view.q0, G)]
    what = f"the next-symbol sets of {machine!r}"

    def add(f: tuple, p: int, X: int, path: tuple) -> None:
        if (p, X) not in heads[f]:
            heads[f][(p, X)] = path
            todo.append((f, p, X))

    while todo:
        f, p, X = todo.pop()
        below = f[2]
        path = heads[f][(p, X)]
        for a in range(view.K):
            mv = view.trans.get((p, a, X))
            if mv is None:
                continue
            p2, _, pe, ue, y = mv
            op = op_name(pe, ue)
            if op == "noop":
                add(f, p2, X, path + (a,))
            elif op == "replace":
                add(f, p2, y, path + (a,))
            elif op == "pop":
                if p2 not in rets[f]:
                    rets[f][p2] = path + (a,)
                    for cf, cp, cX, ca in list(callers[f]):
                        add(cf, p2, cX, heads[cf][(cp, cX)] + (ca,) + path + (a,))
            else:                                   # push y: a new frame (y, B(stack below y))
                g = (p2, y, int(ns.above(X, below)))
                if g not in heads:
                    limits.check(what, sum(len(h) for h in heads.values()) + 1, "max_units",
                                 hint="use a smaller machine")
                    heads[g], callers[g], rets[g] = {(p2, y): ()}, set(), {}
                    entry[g] = entry[f] + path + (a,)
                    todo.append((g, p2, y))
                call = (f, p, X, a)
                if call not in callers[g]:
                    callers[g].add(call)
                    for q, rpath in list(rets[g].items()):
                        add(f, q, X, path + (a,) + rpath)
    table: dict[tuple[int, int], tuple[bool, ...]] = {}
    seen: dict[tuple[int, int], tuple] = {}
    for f, hs in heads.items():
        for (p, X), path in hs.items():
            if not ns.live(p, X, f[2]):
                continue
            s = tuple(bool(v) for v in ns.sets(p, X, f[2]))
            prefix = entry[f] + path
            if (p, X) in table and table[(p, X)] != s:
                other = seen[(p, X)]
                a = next(i for i in range(len(s)) if s[i] != table[(p, X)][i])
                sym = (machine.alphabet.symbols[a] if a < view.K else "the end marker")
                err = CompileError(
                    f"{model}: readout 'next_set' needs the next-symbol set of {machine!r} to be "
                    f"a function of (state, top of stack), which the controller holds; after "
                    f"{_word(machine, other)} and after {_word(machine, prefix)} the machine is "
                    f"in state {_state_name(machine, p)} with top {_stack_name(machine, X, G)}, "
                    f"but {sym!r} may follow only one of them (it depends on the stack below "
                    "the top). Compile the machine's own output (no readout) instead")
                err.prefixes = (machine.alphabet.decode(list(other)),     # type: ignore[attr-defined]
                                machine.alphabet.decode(list(prefix)))
                raise err
            table[(p, X)] = s
            seen.setdefault((p, X), prefix)
    return ns, table


def _word(machine, ids: tuple) -> str:
    return repr("".join(map(str, machine.alphabet.decode(list(ids))))) if ids else "ε"


def _state_name(machine, p: int) -> str:
    states = getattr(machine, "states", None)
    try:
        return repr(tuple(states)[p])
    except (TypeError, IndexError):
        return str(p)


def _stack_name(machine, X: int, G: int) -> str:
    if X == G:
        return "⊥ (empty stack)"
    alpha = getattr(machine, "stack_alphabet", None)
    return repr(alpha.symbols[X]) if alpha is not None else str(X)


# The "held" layout of the Stack-RNN / Stack-LSTM for readout="next_set" (module docstring, 7.):
# the controller holds the top one or two stack symbols, the memory the stack below them. Mode X
# (0 … G): one held symbol X (G: the empty stack); mode G + 1 + Z·G + X: two held, X on top of
# Z (Z = G: nothing under X, the memory is empty).
def _held_modes(G: int) -> int:
    return (G + 1) + (G + 1) * G


def _held_top(mode: int, G: int) -> int:
    return mode if mode <= G else (mode - G - 1) % G


def _held_pair(Z: int, X: int, G: int) -> int:
    return G + 1 + Z * G + X


def _stack_below(view: RealtimeTable) -> dict[int, set]:
    """For each store symbol, the symbols that may lie directly under it (⊥ = G included): what a
    push put it on, or what lay under the symbol it replaced (a fixpoint; an over-approximation
    of the reachable stacks)."""
    below: dict[int, set] = {g: set() for g in range(view.G)}
    changed = True
    while changed:
        changed = False
        for (_, _, X), (_, _, pe, ue, y) in view.trans.items():
            op = op_name(pe, ue)
            new = {X} if op == "push" else below[X] if op == "replace" and X != view.G else None
            if new is not None and not new <= below[y]:
                below[y] |= new
                changed = True
    return below


def _held_moves(view: RealtimeTable) -> tuple[int, list[_Move]]:
    """The moves of the held layout from the reachable controller states: each machine move is one
    push or pop of the memory (module docstring, 7.); a move that pops a nonempty memory brings
    its top R (the reading, which the unit tests) into the controller, one move per R that may
    lie there (``_Move.X`` = R; G for moves that do not read)."""
    G = view.G
    modes = _held_modes(G)
    below = _stack_below(view)
    c0 = view.q0 * modes + G
    seen, todo, moves = {c0}, [c0], []
    while todo:
        c = todo.pop()
        p, mode = divmod(c, modes)
        two = mode > G
        Z, X = divmod(mode - G - 1, G) if two else (G, mode)
        for a in range(view.K):
            mv = view.trans.get((p, a, X))
            if mv is None:
                continue                                    # dead: no unit fires
            p2, _, pe, ue, y = mv
            op = op_name(pe, ue)
            steps: list[tuple[int, int, str, int]] = []     # (reading, mode after, op, pushed)
            if not two:
                if op == "push":                            # memory ← X (⊥: nothing to keep)
                    steps = [(G, y, "push", X) if X != G else (G, y, "pop", -1)]
                elif X == G:                                # noop on ⊥: the memory is empty
                    steps = [(G, G, "pop", -1)]
                else:                                       # noop / pop / replace: pop memory
                    for R in sorted(below[X]):
                        after = {"noop": _held_pair(R, X, G), "pop": R,
                                 "replace": _held_pair(R, y, G)}[op]
                        steps.append((R, after, "pop", -1))
            elif op == "pop" and Z != G:                    # top Z, memory top R under it
                steps = [(R, _held_pair(R, Z, G), "pop", -1) for R in sorted(below[Z])]
            else:
                after = {"noop": X, "replace": y, "pop": G,
                         "push": _held_pair(X, y, G)}[op]
                steps = [(G, after, "push", Z) if Z != G else (G, after, "pop", -1)]
            for R, m2, mop, code in steps:
                c2 = p2 * modes + m2
                moves.append(_Move(c, a, R, c2, mop, code, -1))
                if c2 not in seen:
                    seen.add(c2)
                    todo.append(c2)
    return modes, moves


def _held_decoder(view: RealtimeTable, modes: int, c0: int, lay: _Layout, codes: np.ndarray):
    """states → the machine's fields in the held layout: the state is the active unit's c2 //
    modes, the stack ⊥, the memory's cells (bottom first), then the one or two held symbols."""
    G, H, m = view.G, lay.H, codes.shape[1]
    target = _unit_targets(lay, c0, view.Q * modes)

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        c = _active_unit(states, target)
        dead = c < 0
        state = np.where(dead, -1, c // modes)
        if view.fields == "dfa":
            return {"state": state}
        mode = np.where(dead, G, c % modes)
        two = mode > G
        lower = np.where(two, (mode - G - 1) // max(G, 1), G)
        upper = np.where(two, (mode - G - 1) % max(G, 1), mode)
        n = np.rint(states[..., H + m]).astype(np.int64)
        contents = np.rint(states[..., H + m + 1:]).astype(np.int64)
        has_lo, has_up = lower != G, upper != G
        depth = np.where(dead, -1, n + has_lo + has_up)
        B, T1 = n.shape
        D = max(int(depth.max(initial=0)) + 1, 1)
        stack = np.full((B, T1, D), -1, dtype=np.int64)
        stack[..., 0] = G
        w = min(D - 1, contents.shape[2])
        i = np.arange(1, 1 + w)
        stack[..., 1:1 + w] = np.where(i < n[..., None] + 1, contents[..., :w], -1)
        for sym, on, pos in ((lower, has_lo, n + 1), (upper, has_up, n + 1 + has_lo)):
            b, t = np.nonzero(on & ~dead)
            ok = pos[b, t] < D
            stack[b[ok], t[ok], pos[b, t][ok]] = sym[b, t][ok]
        stack[dead] = -1
        top = np.where(dead, -1, np.take_along_axis(stack, np.maximum(depth, 0)[..., None],
                                                    axis=2)[..., 0])
        return {"state": state, "stack": stack, "depth": depth, "top": top}

    return decode


@dataclass(frozen=True)
class NextSetConfig:
    """A configuration of `NextSetMachine`: the machine's ``config`` and the co-reachability
    masks of its stack (`_NextSets`): ``below`` = B(the stack below the top), ``chain`` the
    masks further down as nested pairs (mask, chain) (None: none)."""

    config: Any
    below: int
    chain: Any = None


class NextSetMachine(Machine):
    """The next-symbol sets of a real-time DPDA's language (Suzgun et al. 2019 §4.1, Table 1):
    the same configurations and batch fields as ``machine``, but the output after each prefix u
    is the set of input symbols a such that u·a is a prefix of a word of L(machine), plus the
    end marker `END` when u ∈ L (``output_alphabet`` = the input symbols, then `END`).

    The sets are decided exactly from the whole configuration (state, stack) through the
    co-reachability summaries of `_summaries` (the stack read bottom-up, O(depth) per
    configuration), so they hold whether or not they are a function of (state, top). A
    configuration from which no word of L can be reached is dead (`dead_batch`): no word of L
    has that prefix, so Table 1 gives it no set. `compile_suzgun_stack_rnn(...,
    readout="next_set")` returns a network for this machine (``net.compiled_from`` is
    ``machine``), so ``pn.verify(machine, net)`` compares next-symbol sets."""

    output_kind = "next_set"

    def __init__(self, machine: DeterministicPushdown):
        if not isinstance(machine, DeterministicPushdown) or isinstance(machine, DPDT):
            raise InputError(f"NextSetMachine takes a real-time DPDA (a recogniser with a stack), "
                             f"got {machine!r}")
        from pdanet.automata.tasks.task import END

        try:
            view = realtime_table(machine)
        except CompileError as exc:
            raise InputError(f"NextSetMachine: {exc}") from None
        if END in machine.alphabet:
            raise InputError(f"{machine!r} reads the end marker {END!r} as input; rename it")
        self.machine = machine
        self.alphabet = machine.alphabet
        self.output_alphabet = Alphabet(tuple(machine.alphabet) + (END,))
        self.name = f"next_sets({getattr(machine, 'name', None) or machine!r})"
        self._key = ("next_sets", machine)
        self._cache("_ns", _summaries(view))

    def __repr__(self) -> str:
        return f"<NextSetMachine of {self.machine!r}>"

    @property
    def summaries(self) -> _NextSets:
        return self.__dict__["_ns"]

    def initial(self) -> NextSetConfig:
        return NextSetConfig(self.machine.initial(), 0, None)

    def step(self, config: NextSetConfig, symbol: Any) -> NextSetConfig:
        """The machine's step; the mask B(stack below the top) follows the stack: a push puts
        B(old stack) on top of the chain, a pop takes it off (O(1) per step)."""
        inner = self.machine.step(config.config, symbol)
        if self.machine.is_dead(inner):
            return NextSetConfig(inner, 0, None)
        d1, d2 = len(config.config.stack), len(inner.stack)
        if d2 > d1:                                             # push
            X = self._code(config.config.stack.top)            # ⊥: config.below is 0
            below = int(self.summaries.above(X, config.below))
            return NextSetConfig(inner, below, (config.below, config.chain))
        if d2 < d1:                                             # pop
            below, chain = config.chain if config.chain is not None else (0, None)
            return NextSetConfig(inner, below, chain)
        return NextSetConfig(inner, config.below, config.chain)

    def _code(self, symbol: Any) -> int:
        alpha = self.machine.stack_alphabet
        return alpha.index(symbol) if symbol in alpha else len(alpha)      # ⊥: G

    def _head(self, config: NextSetConfig) -> tuple[int, int, int]:
        inner = config.config
        return (self.machine.state_index(inner.state), self._code(inner.stack.top),
                config.below)

    def output(self, config: NextSetConfig) -> frozenset:
        if self.is_dead(config):
            return frozenset()
        row = self.summaries.sets(*self._head(config))
        return frozenset(x for x, on in zip(self.output_alphabet, row) if on)

    def is_dead(self, config: NextSetConfig) -> bool:
        if self.machine.is_dead(config.config):
            return True
        return not bool(self.summaries.live(*self._head(config)))

    def _sets(self, fields: dict) -> tuple[np.ndarray, np.ndarray]:
        state, top = np.asarray(fields["state"]), np.asarray(fields["top"])
        dead = state < 0
        p, X = np.maximum(state, 0), np.maximum(top, 0)
        stack, depth = np.asarray(fields["stack"]), np.asarray(fields["depth"])
        if stack.ndim == 3:
            below = self.summaries.below_masks_run(stack, np.where(dead, -1, depth))
        else:
            below = self.summaries.below_masks(stack, np.maximum(depth, 0))
        live = ~dead & self.summaries.live(p, X, below)
        sets = self.summaries.sets(p, X, below) & live[..., None]
        return sets, live

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """The machine's fields (``state``, ``stack``, ``depth``, ``top``) and ``output`` (B,
        T+1, K + 1) bool: the next-symbol sets, the end marker last (all False where dead)."""
        trace = self.machine.run_batch(ids, lengths)
        fields = dict(trace.fields)
        fields["output"] = self._sets(fields)[0]
        return BatchTrace(trace.lengths, fields)

    def dead_batch(self, fields: dict) -> np.ndarray:
        """Dead: blocked (state −1) or no word of the language has this prefix — exactly where
        the next-symbol set is empty (a live prefix is in L, so ends, or has a live successor)."""
        out = fields.get("output")
        if out is not None and np.asarray(out).ndim == 3:
            return ~np.asarray(out).any(-1)
        return ~self._sets(fields)[1]


# --- the Baby-NTM construction ---------------------------------------------------------------------
NTM_OPS = {"noop": NTM_NOOP, "push": POP_RIGHT, "pop": POP_LEFT}     # memory op → §3.3 channel
NTM_MODEL = "suzgun_baby_ntm"


@dataclass(frozen=True)
class _NTMTable:
    """A machine whose store fits the Baby-NTM: ``trans[(p, a, X)] = (p2, out, op, y)``, op
    noop / push / pop / replace, X and y memory symbols (X = G: the empty stack ⊥); ``bound``:
    the depth bound m (0: no store); ``output`` "accept", "symbol" or "next_set" (Dyck-(k, m));
    ``fields`` "pushdown", "dfa" or "dyck" (the machine's batch fields); ``type_of[g]``: the
    machine's store code of memory symbol g (Dyck: g = (type, depth), its bracket type)."""

    fields: str
    Q: int
    q0: int
    K: int
    G: int
    trans: dict
    output: str
    accepting: tuple
    empty_stack: bool
    n_out: int
    bound: int
    type_of: tuple
    realtime: RealtimeTable | None


def _unbounded(machine) -> UnboundedStackError:
    how = ("bound its depth first (pn.compile(machine.bounded(m), target='stack_rnn', "
           "model='suzgun_baby_ntm'): m − 1 rows) or " if hasattr(machine, "bounded") else "")
    return UnboundedStackError(
        f"{NTM_MODEL}: {machine!r} has an unbounded store but the Baby-NTM's memory has a fixed "
        f"number of rows; {how}compile it into a model whose stack is sized to each input: "
        "'suzgun_stack_rnn' or 'suzgun_stack_lstm' (Suzgun et al. 2019 §3.1–3.2)")


def _dyck_table(machine: DyckKM) -> _NTMTable:
    """Dyck-(k, m) as a one-state machine over memory symbols (type g, depth d) = g·m + d − 1:
    the depth travels with each symbol, so the held top tells whether an open is allowed."""
    k, m = machine.k, machine.m
    G = k * m
    what = f"compiling {machine!r} to {NTM_MODEL} ({G + 1:,} held tops × {2 * k:,} inputs)"
    limits.check(what, (G + 1) * 2 * k, "max_units", hint="use a smaller k or m")
    trans = {}
    for X in range(G + 1):
        d = 0 if X == G else X % m + 1
        for j in range(k):
            if d < m:
                trans[(0, j, X)] = (0, -1, "push", j * m + d)        # push (j, d + 1)
            if d > 0 and X // m == j:
                trans[(0, k + j, X)] = (0, -1, "pop", -1)
    return _NTMTable("dyck", 1, 0, 2 * k, G, trans, "next_set", (True,), False, 0, m,
                     tuple(g // m for g in range(G)) + (-1,), None)


def _ntm_table(machine) -> _NTMTable | PdanetError:
    """The machine as an `_NTMTable`, or the typed error saying why the Baby-NTM cannot hold it."""
    if isinstance(machine, DyckKM):
        return _dyck_table(machine)
    if isinstance(machine, PDA):
        return CompileError(
            f"{NTM_MODEL}: {machine!r} is nondeterministic; the Baby-NTM follows one run — "
            "compile it into the nondeterministic stack RNN of DuSell & Chiang (target 'ns_rnn')")
    if isinstance(machine, BoundedPDA):
        inner, bound = machine.machine, machine.m
    elif isinstance(machine, DFA):
        inner, bound = machine, 0
    elif isinstance(machine, (DeterministicPushdown, StoreTransducer)):
        return _unbounded(machine)
    else:
        return CompileError(
            f"{NTM_MODEL}: {machine!r} is not a DFA / Mealy machine, a depth-bounded DPDA or DPDT "
            "(machine.bounded(m)) or a Dyck-(k, m) generator, the machines whose store fits the "
            "Baby-NTM's fixed memory")
    try:
        view = realtime_table(inner)
    except CompileError as exc:
        return CompileError(f"{NTM_MODEL}: {exc}")
    trans = {}
    for (p, a, x), (p2, out, pe, ue, y) in view.trans.items():
        op = op_name(pe, ue)
        if x == view.G and op in ("pop", "replace"):
            return CompileError(f"{NTM_MODEL}: {machine!r} pops the empty stack ⊥ (state {p}, "
                                f"input {a}); a stack machine never removes ⊥")
        trans[(p, a, x)] = (p2, out, op, y)
    return _NTMTable(view.fields, view.Q, view.q0, view.K, view.G, trans, view.output,
                     view.accepting, view.empty_stack, view.n_out, bound,
                     tuple(range(view.G)) + (view.G,), view)


def requires_suzgun_baby_ntm(machine) -> str | PdanetError | None:
    """Why ``machine`` cannot be compiled into `SuzgunBabyNTM` (an error to raise), or None.
    Accepted: machines whose store fits a fixed memory — DFAs / Mealy machines, real-time
    depth-bounded DPDAs and DPDTs (`BoundedPDA`, ``machine.bounded(m)``) and Dyck-(k, m)
    (`DyckKM`). An unbounded stack gets `UnboundedStackError` naming the Suzgun stack models."""
    try:
        t = _ntm_table(machine)
    except PdanetError as exc:          # over pdanet.limits (a huge Dyck-(k, m))
        return exc
    return t if isinstance(t, PdanetError) else None


def _below(t: _NTMTable) -> dict[int, set]:
    """For each memory symbol, the symbols that may lie directly under it (⊥ = G included):
    what a push put it on, or what lay under the symbol it replaced (a fixpoint)."""
    below: dict[int, set] = {g: set() for g in range(t.G)}
    changed = True
    while changed:
        changed = False
        for (_, _, X), (_, _, op, y) in t.trans.items():
            new = {X} if op == "push" else below[X] if op == "replace" else None
            if new is not None and not new <= below[y]:
                below[y] |= new
                changed = True
    return below


def _ntm_moves(t: _NTMTable) -> list[_Move]:
    """Every move of the controller (machine state p, held top X) = p·(G + 1) + X from the
    reachable controller states (module docstring, Baby-NTM 2.): a pop's new top is the
    memory's row 0, read at the same step, so a pop has one move per symbol that may lie under
    X (``_Move.X`` = that reading; G for moves that do not read)."""
    G = t.G
    modes = G + 1
    below = _below(t)
    c0 = t.q0 * modes + G
    seen, todo, moves = {c0}, [c0], []
    while todo:
        c = todo.pop()
        p, X = divmod(c, modes)
        for a in range(t.K):
            mv = t.trans.get((p, a, X))
            if mv is None:
                continue                                    # dead: no unit fires
            p2, out, op, y = mv
            if op == "pop":                                 # POP_LEFT; the reading is the top
                steps = [(R, p2 * modes + R, "pop", -1) for R in sorted(below[X])]
            elif op == "noop":                              # NOOP
                steps = [(G, p2 * modes + X, "noop", -1)]
            elif X == G:                                    # push on ⊥: y held, memory empty
                steps = [(G, p2 * modes + y, "noop", -1)]
            elif op == "push":                              # POP_RIGHT writes the old top X
                steps = [(G, p2 * modes + y, "push", X)]
            else:                                           # replace: the held top changes
                steps = [(G, p2 * modes + y, "noop", -1)]
            for R, c2, memop, code in steps:
                moves.append(_Move(c, a, R, c2, memop, code, out if t.output == "symbol" else -1))
                if c2 not in seen:
                    seen.add(c2)
                    todo.append(c2)
    return moves


def _ntm_moves_memory(t: _NTMTable) -> list[_Move]:
    """The moves of the other layout (module docstring, Baby-NTM 5.): the top lies in row 0
    (mode U, controller state p·(G + 2)) unless a replace left it held (mode H_X, p·(G + 2) +
    1 + X, the memory holding the stack below X). ``_Move.X`` is the top: the reading in U (an
    over-approximation of the possible tops, as in `_moves`), the held X in H_X."""
    G = t.G
    modes = G + 2
    below = _below(t)
    c0 = t.q0 * modes + U
    tops: dict[int, set] = {c0: {G}}
    done: set = set()
    moves: list[_Move] = []
    todo = [c0]
    while todo:
        c = todo.pop()
        p, mode = divmod(c, modes)
        for X in sorted(tops[c]):
            for a in range(t.K):
                mv = t.trans.get((p, a, X))
                if mv is None or (c, a, X) in done:
                    continue
                done.add((c, a, X))
                p2, out, op, y = mv
                if mode == U:
                    mode2, memop, code, nxt = {
                        "noop": (U, "noop", -1, {X}), "push": (U, "push", y, {y}),
                        "pop": (U, "pop", -1, below.get(X, set())),
                        "replace": (1 + y, "pop", -1, {y})}[op]
                else:                                   # H_X: the memory holds the stack below X
                    mode2, memop, code, nxt = {
                        "noop": (mode, "noop", -1, {X}), "replace": (1 + y, "noop", -1, {y}),
                        "push": ((1 + y, "push", X, {y}) if X != G else (1 + y, "noop", -1, {y})),
                        "pop": (U, "noop", -1, below.get(X, set()))}[op]
                c2 = p2 * modes + mode2
                moves.append(_Move(c, a, X, c2, memop, code,
                                   out if t.output == "symbol" else -1))
                have = tops.setdefault(c2, set())
                if not nxt <= have:
                    have |= nxt
                    todo.append(c2)
    return moves


def _ntm_outputs(t: _NTMTable, c2s: list[int], memory: bool = False) -> np.ndarray:
    """(outputs, len(c2s)) 0/1: the output after entering each controller state (accept: the
    state accepts, or for empty-stack acceptance the held top is ⊥; next_set: the Dyck-(k, m)
    set from the held (type, depth))."""
    G, modes = t.G, t.G + 1 + int(memory)
    if t.output == "accept":
        return np.array([[int(c % modes == G) if t.empty_stack else int(t.accepting[c // modes])
                          for c in c2s]], dtype=np.int64).reshape(1, len(c2s))
    if memory:
        raise CompileError("the top-in-memory layout has no next-symbol sets")   # not chosen
    k, m = t.K // 2, t.bound
    out = np.zeros((2 * k + 1, len(c2s)), dtype=np.int64)
    for j, c in enumerate(c2s):
        X = c % modes
        d = 0 if X == G else X % m + 1
        out[:k, j] = d < m
        if X != G:
            out[k + X // m, j] = 1
        out[2 * k, j] = X == G
    return out


@dataclass(frozen=True, eq=False)
class BabyNTMController(Abstraction):
    """A compiled `SuzgunBabyNTM`. Hidden units: ``start`` (as in `SuzgunController`), the
    `SuzgunUnit` s ``units`` (±1; ``op`` the memory op "push" (POP_RIGHT), "pop" (POP_LEFT)
    or "noop" (NOOP); ``c2`` = p·``modes`` + mode: ``layout`` "held": mode X, the held top
    (G: ⊥); "memory": mode 0 = U, the top in row 0, mode 1 + X = X held), then
    ``relays`` (always 0; relay k carries bit ``bits[k]`` of the memory's row 0 from h̃).
    ``codes``: (G + 1, width) symbol codes (row G, ⊥ / an empty row, all zero); ``rows``: the
    memory's rows; ``type_of``: memory symbol → the machine's store code."""

    codes: np.ndarray = None  # type: ignore[assignment]
    start: int | None = 0
    units: tuple[SuzgunUnit, ...] = ()
    modes: int = 1
    bits: tuple[int, ...] = ()
    relays: tuple[int, ...] = ()
    rows: int = 1
    type_of: tuple[int, ...] = ()
    layout: str = "held"


def _ntm_weights(t: _NTMTable, c0: int, lay: _Layout, codes: np.ndarray, tau: Fraction,
                 memory: bool = False) -> dict:
    H, units = lay.H, lay.units
    W_ih, W_hh, bias, W_sh_bits, h0 = _recurrence(t.K, c0, lay, ONE)   # §3.3 h̃, h_t
    W_m = np.zeros((H, codes.shape[1]), dtype=np.int64)                  # §3.3 W_m M^(0)
    W_m[:, :W_sh_bits.shape[1]] = W_sh_bits
    w: dict[str, Any] = {
        "W_sh.weight": ExactWeight.of(W_m, scaled=False), "h0": ExactWeight.of(h0, scaled=False),
        "cell.weight_ih": ExactWeight.of(W_ih), "cell.weight_hh": ExactWeight.of(W_hh),
        "cell.bias_ih": ExactWeight.of(bias), "cell.bias_hh": ExactWeight.of(np.zeros(H, dtype=np.int64))}
    acts = np.zeros((5, len(units)), dtype=np.int64)                    # §3.3 a_t (five ops)
    for j, u in enumerate(units):
        acts[NTM_OPS[u.op], j] = 1
    w["W_a.weight"], w["W_a.bias"] = _head(lay, ONE, acts, np.zeros(5, dtype=np.int64), tau)
    vals = np.zeros((codes.shape[1], len(units)), dtype=np.int64)     # §3.3 n_t
    for j, u in enumerate(units):
        if u.push >= 0:
            vals[:, j] = codes[u.push]
    w["W_n.weight"], w["W_n.bias"] = _head(lay, ONE, vals, np.zeros(codes.shape[1], dtype=np.int64))
    if t.output == "symbol":                                          # §3.3 y_t
        out = np.zeros((t.n_out + 1, len(units)), dtype=np.int64)
        for j, u in enumerate(units):
            out[u.out if u.out >= 0 else t.n_out, j] = 1
        first = np.zeros(t.n_out + 1, dtype=np.int64)
        first[t.n_out] = 1
    else:
        out = _ntm_outputs(t, [u.c2 for u in units], memory)
        first = _ntm_outputs(t, [c0], memory)[:, 0]
    w["W_y.weight"], w["W_y.bias"] = _head(lay, ONE, out, first)
    return w


def _ntm_decoder(t: _NTMTable, lay: _Layout, codes: np.ndarray, c0: int, rows: int,
                 memory: bool = False):
    """states [h_t; M_t] → the machine's fields: the controller state is the active unit's c2
    (none: dead, −1), the stack is the memory's filled rows (row 0 just under the top) below the
    held top."""
    G, H, w = t.G, lay.H, codes.shape[1]
    modes = G + 1 + int(memory)
    target = _unit_targets(lay, c0, t.Q * modes)
    pow2 = 1 << np.arange(w - 1, -1, -1)
    lut = np.full(1 << w, -1, dtype=np.int32)
    lut[codes.astype(np.int64) @ pow2] = np.arange(G + 1)
    type_of = np.array(t.type_of + (-1,), dtype=np.int64)        # index −1: not a code → −1

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        B, T1 = states.shape[:2]
        c = _active_unit(states, target)
        dead = c < 0
        state = np.where(dead, -1, c // modes)
        if t.fields == "dfa":
            return {"state": state}
        mode = c % modes
        held = np.where(dead, G, np.where(mode == U, G, mode - 1) if memory else mode)
        bits = states[..., H:H + rows * w].reshape(B, T1, rows, w) > 0.5
        word = np.zeros((B, T1, rows), dtype=np.int32)
        for j in range(w):                                        # the code bits, not the rows
            word |= bits[..., j].astype(np.int32) << (w - 1 - j)
        mem = lut.take(word)                                      # (B, T1, rows), top first
        n = (mem != G).sum(-1)
        real = held != G
        depth = np.where(dead, -1, n + real)
        D = max(int(depth.max(initial=0)), 1)
        i = np.arange(D)
        below = np.take_along_axis(mem, np.clip(n[..., None] - 1 - i, 0, rows - 1), -1)
        syms = np.where(i < n[..., None], below,
                        np.where((i == n[..., None]) & real[..., None], held[..., None], -2))
        syms = np.where(dead[..., None], -2, syms)
        top_sym = np.take_along_axis(syms, np.clip(depth - 1, 0, D - 1)[..., None], -1)[..., 0]
        depth_top = np.where(depth > 0, top_sym, G)              # the top (G: ⊥)
        if t.fields == "dyck":
            stack = np.where(syms == -2, -1, type_of[np.where(syms == -2, -1, syms)])
            W = max(t.bound, 1)
            out = np.full((B, T1, W), -1, dtype=np.int64)
            out[..., :min(W, D)] = stack[..., :min(W, D)]
            return {"stack": out, "depth": depth, "state": np.where(dead, -1, 0),
                    "top": np.where(dead | (depth_top == G), -1, type_of[depth_top])}
        stack = np.full((B, T1, D + 1), -1, dtype=np.int64)
        stack[..., 0] = G
        stack[..., 1:] = np.where(syms == -2, -1, type_of[np.where(syms == -2, -1, syms)])
        stack[dead] = -1
        top = np.where(dead, -1, type_of[depth_top])
        return {"state": state, "stack": stack, "depth": depth, "top": top}

    return decode


LAYOUTS = ("auto", "held", "memory")


def _ntm_plan(t: _NTMTable, memory: bool, machine) -> tuple:
    """(modes, c0, codes, units, reading bits, start) of one layout (module docstring,
    Baby-NTM 1.–5.)."""
    G = t.G
    modes = G + 1 + int(memory)
    c0 = t.q0 * modes + (U if memory else G)
    moves = _ntm_moves_memory(t) if memory else _ntm_moves(t)
    what = f"compiling {machine!r} to {NTM_MODEL} (up to {len(moves) + 1:,} hidden units)"
    hint = "use a smaller machine (for a task, a smaller vocabulary) or a smaller depth bound"
    limits.check(what, len(moves) + 1, "max_units", hint=hint)
    codes = store_codes(G, "binary")
    limits.check(what, 32 * (len(moves) + 1) * (2 * (len(moves) + t.K) + codes.shape[1] + 8),
                 "max_bytes", hint=hint)
    # tests on the reading: every mode of the held layout (1 mode), mode U of the other
    codes, (units, rbits, _) = _choose_codes(moves, modes if memory else 1, codes)
    entry = _entry(c0, "symbol" if t.output == "symbol" else "accept", units)
    if entry is not None:
        units = (units[entry],) + units[:entry] + units[entry + 1:]
    return modes, c0, codes, units, tuple(rbits), entry is None


def compile_suzgun_baby_ntm(machine, dtype: torch.dtype = torch.float32, temperature: Any = 1,
                            gumbel: bool = False, size: int | None = None,
                            layout: str = "auto") -> CompiledNetwork:
    """Compile a machine whose store fits a fixed memory — a DFA / Mealy machine, a real-time
    depth-bounded DPDA or DPDT (`BoundedPDA`, ``machine.bounded(m)``) or Dyck-(k, m) — into a
    `SuzgunBabyNTM` (module docstring, "Baby-NTM construction"). ``layout`` "held": the top
    is held in the controller, the stack below it in rows 0 … m − 2 (row 0 just under the top;
    empty rows all 0, the code of ⊥); push = POP_RIGHT with n_t the old top's code, pop =
    POP_LEFT (the new top is row 0, read in the same step), noop / replace / push on ⊥ = NOOP.
    "memory": the top in row 0 of rows 0 … m − 1, held only after a replace (final-state
    recognisers, transducers, DFAs). "auto" (default): the layout with fewer hidden units.
    ``temperature`` τ (folded into W_a) and ``gumbel`` as for `compile_suzgun_stack_rnn`;
    ``size``: the memory's rows (default the fewest that hold the stack; e.g. 104 as in the
    paper's experiments, §4 — rows past the stack stay 0). ``net.bound``: 1 start unit + one
    unit per (controller state, input, reading) at most + W relay units (W the code width),
    controller states Q·(G + 1) (held) or Q·(G + 2) (memory); ``net.info["memory_layout"]``
    says how the stack lies in the rows."""
    t = _ntm_table(machine)
    if isinstance(t, PdanetError):
        raise t
    _check_compile_options(temperature, gumbel)
    if layout not in LAYOUTS:
        raise InputError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    can_memory = t.output == "symbol" or (t.output == "accept" and not t.empty_stack)
    if layout == "memory" and not can_memory:
        raise InputError(f"layout 'memory' cannot tell {machine!r}'s output (it depends on the "
                         "top after a pop: empty-stack acceptance, next-symbol sets); use "
                         "layout 'held' or 'auto'")
    plans = {}
    if layout in ("auto", "held"):
        plans[False] = _ntm_plan(t, False, machine)
    if layout == "memory" or (layout == "auto" and can_memory):
        plans[True] = _ntm_plan(t, True, machine)

    def hidden(plan: tuple) -> int:
        return len(plan[3]) + int(plan[5]) + len(plan[4])

    memory = min(plans, key=lambda k: (hidden(plans[k]), k))
    modes, c0, codes, units, rbits, start = plans[memory]
    tau = Fraction(temperature)
    rows = max(t.bound - int(not memory), 1)
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int) or size < rows:
            raise InputError(f"size must be an int ≥ {rows} (the rows that hold the stack of "
                             f"{machine!r}), got {size!r}")
        rows = size
    G = t.G
    lay = _Layout(start, units, rbits, (), rbits)
    weights = _ntm_weights(t, c0, lay, codes, tau, memory)
    n_out = {"accept": 1, "symbol": t.n_out + 1, "next_set": t.K + 1}[t.output]
    module = SuzgunBabyNTM(t.K, lay.H, codes.shape[1], n_out, rows, float(tau), gumbel)
    module = load_exact(module, weights, BETA, dtype).eval()    # eval: no Gumbel noise
    if t.output == "next_set":
        def reader(logits: np.ndarray) -> np.ndarray:
            return np.asarray(logits) > 0
    else:
        reader = _reader(t.realtime)
    relays = tuple(lay.relay(k) for k in lay.relay_bits)
    labels = (("start",) if start else ()) + tuple(_label(u) for u in units) + tuple(
        f"relay·bit{k}" for k in lay.relay_bits)
    abstraction = BabyNTMController(labels=labels, codes=codes, start=0 if start else None,
                                    units=units, modes=modes, bits=lay.relay_bits,
                                    relays=relays, rows=rows, type_of=t.type_of,
                                    layout="memory" if memory else "held")
    Qs, Ks, Gs, Ws = sp.symbols("Q K G W")
    bound = Qs * (Gs + 1 + int(memory)) * Ks * (Gs + 1) + 1 + Ws
    params = {"Q": t.Q, "K": t.K, "G": G, "W": codes.shape[1]}
    if memory:
        text = (f"the stack lies in memory rows 0 … {rows - 1}, top in row 0, deeper symbols in "
                "the next rows (rows past the stack, and the empty stack ⊥, hold 0) — except "
                "after a replace, when the new top is held in the controller and the rows hold "
                "the stack below it. push = POP_RIGHT ([0, a, b, …] then row 0 += n_t, n_t the "
                "pushed code; held: the held top's code), pop = POP_LEFT ([b, c, …, 0]; held: "
                "NOOP, the top is row 0 again), noop = NOOP, replace = POP_LEFT (held: NOOP)")
    else:
        text = (f"the machine's top is held in the controller (state × held top); the stack "
                f"below it lies in memory rows 0 … {rows - 1} (row 0 just under the top, deeper "
                "symbols in the next rows; rows past the stack, and the empty stack ⊥, hold 0). "
                "push = POP_RIGHT ([0, a, b, …] then row 0 += n_t, n_t the code of the old top), "
                "pop = POP_LEFT ([b, c, …, 0]; the new top is row 0, which h̃ reads in the same "
                "step), noop, replace and a push on ⊥ = NOOP (the held top changes)")
    text += ("; the last row is empty whenever the bound allows a push; ROTATE_RIGHT / "
             "ROTATE_LEFT are never chosen")
    info = {
        "model": NTM_MODEL, "controller": "elman", "memory": "baby_ntm",
        "layout": "memory" if memory else "held",
        "hidden_units": lay.H, "controller_units": len(units) + int(start),
        "start_unit": start, "relay_units": len(relays), "memory_rows": rows,
        "memory_width": codes.shape[1], "depth_bound": t.bound,
        "position_bytes": limits.position_bytes(lay.H, "rnn",
                                                2 * rows * codes.shape[1] + n_out),
        "memory_layout": text, "temperature": str(tau), "gumbel": gumbel,
        "step": "one network step reads one input symbol and applies one of the five ops",
    }
    argument = ("every unit pre-activation is ±1/2 or beyond (one-hot input, one active unit, "
                "exact 0/1 memory rows) and every head pre-activation ±HEAD/2 = ±16; at β = 64 "
                "tanh(±32) is exactly ±1, σ(±1024) exactly 0/1 and the softmax over the five "
                "ops (gap 2048) exactly one-hot in float32 and float64, so the memory rows stay "
                "exact 0/1 codes")
    return CompiledNetwork(
        machine=machine, module=module, target="stack_rnn", method=NTM_MODEL,
        hidden_units=lay.H, bound=bound, params=params, weights=weights,
        scale=sp.Integer(BETA), decoder=_ntm_decoder(t, lay, codes, c0, rows, memory),
        reader=reader, margin=sp.Rational(1, 2), steps_per_symbol=1, scale_argument=argument,
        abstraction=abstraction, info=info)


def _example_baby_ntm():
    from pdanet.automata.tasks.suzgun2019 import dyck_machine
    return dyck_machine(2).bounded(3)


EXAMPLE_SUZGUN_BABY_NTM = _example_baby_ntm()


def _example():
    from pdanet.automata.tasks.suzgun2019 import dyck_machine
    return dyck_machine(2)


EXAMPLE_SUZGUN_STACK_RNN = _example()
EXAMPLE_SUZGUN_STACK_LSTM = EXAMPLE_SUZGUN_STACK_RNN

__all__ = ["BETA", "EXAMPLE_SUZGUN_BABY_NTM", "EXAMPLE_SUZGUN_STACK_LSTM",
           "EXAMPLE_SUZGUN_STACK_RNN", "HEAD", "MODELS", "NTM_OPS", "READOUTS", "RHO",
           "BabyNTMController", "NextSetConfig", "NextSetMachine",
           "SuzgunBabyNTM", "SuzgunController", "SuzgunStackLSTM", "SuzgunStackRNN",
           "SuzgunUnit", "compile_suzgun_baby_ntm", "compile_suzgun_stack_lstm",
           "compile_suzgun_stack_rnn",
           "requires_suzgun_baby_ntm", "requires_suzgun_stack_lstm",
           "requires_suzgun_stack_rnn"]

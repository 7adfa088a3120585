"""Real-time DPDAs, DPDTs, Mealy DFAs and store transducers compiled into RNN controllers that
drive a differentiable memory (target ``"stack_rnn"``).

Memories (``memory=``): ``"grefenstette"`` — the neural Stack / Queue / DeQue of Grefenstette et
al. (2015), chosen by the machine's store (a pushdown machine uses the Stack); ``"joulin_mikolov"``
— the superposition stack (Joulin & Mikolov 2015; DuSell & Chiang 2022 App. A.2);
``"suzgun"`` — the push/pop stack of Suzgun et al. (2019) §3.1 (no no-op).

One network step = one input symbol (``steps_per_symbol = 1``). At step t the controller reads
``[x_t; r_{t-1}]`` (one-hot input, the memory's reading after step t-1; zero for an empty store)
and its state ``h_{t-1}``, and emits, as affine maps of ``h_t``, the memory's actions (push and pop
strengths exactly 0 or 1; a replace is pop + push in one Grefenstette step, Eq. 2), the pushed
vector (the code of a store symbol: nonzero binary by default, or one-hot) and the output logits.
The memory then steps and gives ``r_t``; logits may also read ``r_t`` (an empty-stack recogniser
accepts when ``r_t = 0``).

Controller (one-layer Elman, tanh). Controller states are ``c = (q, mode)``: ``mode`` is ``U`` (the
memory holds the machine's whole store) or, for the one-operation stacks, ``H_X``: the machine's
top ``X`` (or ⊥) is held in the controller and the memory holds the stack below it, so that
replace (and, for Suzgun's stack, noop) needs one memory operation per step (rules in
`realtime.one_op`).
Hidden unit j stands for a triple (c, a, R): "the controller was in c, read a, and the memory
reading was the code of R" (R = * when every possible reading acts alike). With ind(h) = (h+1)/2,

    z_j = x_t[a] + Σ_{i → c} ind(h_{t-1,i}) + m_R(r_{t-1}) − 5/2   (− 3/2 without R),
    m_R(r) = Σ_b (2 code(R)_b − 1) r_b − |code(R)|_1 + 1,

and h_t = tanh(β z). Each term is 0 or 1 and m_R(r) = 1 iff r = code(R) (else ≤ 0), so z = +1/2
for the one unit of the transition taken and z ≤ −1/2 for all others. Margin argument: with
β = 64, |β z| ≥ 32 and tanh(32) rounds to exactly ±1 in float32 and float64 (1 − tanh 32 < 2^-90),
so every unit is exactly ±1, every strength exactly 0 or 1, every reading exactly a code; the
network is then bit-exact at every length (no drift). A start unit (+1 only at t = 0) stands for
the initial controller state. No unit fires after a missing transition: the decoded state is dead.
A *linear* controller (h_t = one-hot x_t, no hidden nonlinearity) is used when one controller
state and one behaviour per input symbol suffice.

Padding (symbol −1) leaves every row's whole state (controller, reading and memory) unchanged.
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
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.store import StoreTransducer
from pdanet.constructions.base import CompiledNetwork, ExactWeight, load_exact
from pdanet.constructions.realtime import RealtimeTable, U, one_op, store_codes
from pdanet.constructions.realtime import table as realtime_table
from pdanet.constructions.stacks.superposition import superpose
from pdanet.constructions.table import register
from pdanet.errors import CompileError, InputError, UnboundedStackError

MEMORIES = ("grefenstette", "joulin_mikolov", "suzgun")
BETA = 64
MARGIN = Fraction(1, 2)


# --- the controller's transition table ----------------------------------------------------------
@dataclass(frozen=True)
class _Unit:
    c: int                 # controller state before
    a: int                 # input symbol
    R: int | None          # reading code condition (None = any)
    c2: int                # controller state after
    act: tuple             # memory actions (see _Plan.channels)
    push: tuple            # pushed codes per value slot (-1 none)
    out: int               # output symbol (-1 none)


@dataclass(frozen=True)
class _Plan:
    view: RealtimeTable
    memory: str
    modes: int             # 1 (U only) or G + 2
    c0: int
    units: tuple
    channels: tuple        # names of the action channels
    value_slots: int       # 1, or 2 for the deque (top, bottom)

    def q_of(self, c: int) -> int:
        return c // self.modes

    def mode_of(self, c: int) -> int:
        return c % self.modes


def _plan(view: RealtimeTable, memory: str) -> _Plan:
    G, single = view.G, memory != "grefenstette"
    modes = G + 2 if single else 1
    if single:
        channels = ("push", "noop", "pop") if memory == "joulin_mikolov" else ("push", "pop")
    elif view.kind == "deque":
        channels = ("push_top", "pop_top", "push_bottom", "pop_bottom")
    else:
        channels = ("push", "pop")
    slots = 2 if view.kind == "deque" else 1

    def result(c: int, a: int, R: int):
        p, mode = divmod(c, modes)
        X = R if mode == U else mode - 1
        mv = view.trans.get((p, a, X))
        if mv is None:
            return None
        p2, out, pe, ue, y = mv
        if single:
            mode2, op, code = one_op(memory, mode, G, R, (pe, ue, y))
            return (p2 * modes + mode2, tuple(int(ch == op) for ch in channels), (code,), out)
        if view.kind == "deque":
            act = (int(ue == "top"), int(pe == "top"), int(ue == "bottom"), int(pe == "bottom"))
            push = (y if ue == "top" else -1, y if ue == "bottom" else -1)
        else:
            act, push = (int(ue is not None), int(pe is not None)), (y,)
        return (p2, act, push, out)

    def next_reading(R: int, res: tuple, anything: frozenset) -> frozenset:
        """Readings possible after a move from reading R (an over-approximation)."""
        _, act, push, _ = res
        if view.kind == "deque":
            return anything | {y for y in push if y >= 0}
        y = push[0]
        pushes, pops = y >= 0, act[channels.index("pop")] == 1
        if view.kind == "queue":  # the reading is the front
            if pops:
                return anything | ({y} if pushes else set())
            return frozenset({y if R == G else R}) if pushes else frozenset({R})
        return frozenset({y}) if pushes else (anything if pops else frozenset({R}))

    c0 = view.q0 * modes
    C = view.Q * modes
    tops: dict[int, set] = {c0: {G}}
    pushed: set = set()
    changed = True
    while changed:  # over-approximate the readings possible in each controller state
        changed = False
        anything = frozenset(pushed | {G})
        for c in list(tops):
            for R in list(tops[c]):
                for a in range(view.K):
                    res = result(c, a, R)
                    if res is None:
                        continue
                    new_push = {y for y in res[2] if y >= 0} - pushed
                    if new_push:
                        pushed |= new_push
                        changed = True
                    nxt = next_reading(R, res, anything)
                    have = tops.setdefault(res[0], set())
                    if not nxt <= have:
                        have |= nxt
                        changed = True
    units = []
    for c in range(C):
        if c not in tops:
            continue
        for a in range(view.K):
            got = {R: result(c, a, R) for R in sorted(tops[c])}
            defined = {R: r for R, r in got.items() if r is not None}
            if not defined:
                continue
            same = len(set(defined.values())) == 1 and len(defined) == len(got)
            for R, (c2, act, push, out) in defined.items():
                units.append(_Unit(c, a, None if same else R, c2, act, push, out))
                if same:
                    break
    return _Plan(view, memory, modes, c0, tuple(units), channels, slots)


# --- codes ---------------------------------------------------------------------------------------
# --- the memories, in place --------------------------------------------------------------------
class _SymbolCodes:
    """Value vectors (…, m) → store symbol ids (float), thresholded at 1/2; −2 for no code."""

    def __init__(self, codes: np.ndarray):
        self.codes = np.asarray(codes)
        G, m = self.codes.shape[0] - 1, self.codes.shape[1]
        self.one_hot = m > 20
        self._cache: dict = {}
        if not self.one_hot:
            lut = np.full(1 << m, -2.0)
            lut[self.codes[:G] @ (1 << np.arange(m - 1, -1, -1))] = np.arange(G)
            self.lut = torch.tensor(lut)
            self.pow2 = torch.tensor([float(1 << k) for k in range(m - 1, -1, -1)])

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        bits = (v > 0.5).to(v.dtype)
        if self.one_hot:
            return torch.where(bits.sum(-1) == 1, bits.argmax(-1).to(v.dtype), -2.0)
        key = (v.dtype, v.device)
        if key not in self._cache:
            self._cache = {key: (self.pow2.to(v), self.lut.to(v))}
        pow2, lut = self._cache[key]
        return lut[(bits @ pow2).long()]


def _pack(alive: torch.Tensor, sym: torch.Tensor, reverse: bool = False
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per (b, k): the symbols of the alive cells in cell order (reversed with ``reverse``), as
    (B, K, D) with −1 padding (D = most alive cells), and the counts (B, K). ``alive`` (B, K, n),
    ``sym`` (B, K, n) or (B, 1, n). One scan for the alive cells, then work per alive cell only;
    no loop over cells."""
    B, K, n = alive.shape
    b, k, i = alive.nonzero(as_tuple=True)                    # row-major: grouped by (b, k)
    group = b * K + k
    size = torch.bincount(group, minlength=B * K)
    rank = torch.arange(len(group), device=alive.device) - (size.cumsum(0) - size)[group]
    if reverse:
        rank = size[group] - 1 - rank
    D = int(size.max()) if size.numel() else 0
    out = sym.new_full((B, K, D), -1.0)
    out[b, k, rank] = sym[b, k if sym.shape[1] > 1 else 0, i]
    return out, size.view(B, K).to(sym.dtype)


class _Memory:
    """A memory on preallocated buffers. ``step(act, value, valid)`` → reading; every step the
    alive mask (strength or occupancy > 1/2) goes into a block of ``BLOCK`` rows, and ``flush()``
    packs a block into the read-back (contents (B, K, D), sizes (B, K))."""

    BLOCK = 32

    def __init__(self, B: int, n: int, like: torch.Tensor, codes: _SymbolCodes):
        self.alive = torch.zeros(B, self.BLOCK, n, dtype=torch.bool, device=like.device)
        self.k, self.t, self.codes = 0, 0, codes
        self.grad = torch.is_grad_enabled()

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError


class _Stratified(_Memory):
    """Grefenstette et al. (2015) Stack (Eqs. 1–3) or Queue (Eqs. 1, 4–5): (B, T) strengths and
    (B, T, m) values, row i = the cell pushed at step i; step t touches only rows ≤ t. The sums
    Σ_{j>i} s_j (stack) or Σ_{j<i} s_j (queue) of a read are those of the next step's pop, so
    each step takes two cumulative sums."""

    def __init__(self, B: int, T: int, m: int, like: torch.Tensor, codes: _SymbolCodes,
                 queue: bool):
        super().__init__(B, T, like, codes)
        self.S = like.new_zeros(B, T)
        self.V = like.new_zeros(B, m, T)          # values, one column per cell
        self.C = like.new_full((B, T), -1.0)      # decoded symbol of each cell
        self.queue, self.before, self.decoded = queue, None, 0

    def _before(self, s: torch.Tensor) -> torch.Tensor:
        cs = s.cumsum(1)
        return cs - s if self.queue else cs[:, -1:] - cs   # Σ_{j<i} (queue) or Σ_{j>i} (stack)

    def idle(self, act: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        return act * valid.unsqueeze(1).to(act)          # d = u = 0 leaves the memory unchanged

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        t = self.t
        if self.grad:
            self.S, self.V = self.S.clone(), self.V.clone()
        if t:
            s = self.S[:, :t]                                               # Eq. 2 / 4, i < t
            s.sub_((act[:, 1:2] - self.before).clamp_(min=0)).clamp_(min=0)
        self.S[:, t] = act[:, 0]                                            # Eq. 2 / 4, i = t
        self.V[:, :, t] = value                                             # Eq. 1
        self.t = t + 1
        s = self.S[:, :t + 1]
        self.before = self._before(s)
        w = torch.minimum(s, (1 - self.before).clamp_(min=0))              # Eq. 3 / 5
        torch.gt(s, 0.5, out=self.alive[:, self.k, :t + 1])
        self.k += 1
        return torch.linalg.vecdot(w.unsqueeze(1), self.V[:, :, :t + 1])

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        t, k = self.t, self.k
        self.C[:, self.decoded:t] = self.codes(self.V[:, :, self.decoded:t].transpose(1, 2))
        self.decoded, self.k = t, 0
        return _pack(self.alive[:, :k, :t], self.C[:, None, :t])


class _Deque(_Stratified):
    """Grefenstette et al. (2015) DeQue (Eqs. 6–11): 2T rows, the 2t live ones in the middle."""

    def __init__(self, B: int, T: int, m: int, like: torch.Tensor, codes: _SymbolCodes):
        super().__init__(B, 2 * T, m, like, codes, False)
        self.N = T

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        t, N = self.t, self.N
        m = value.shape[1] // 2
        lo, hi = N - t, N + t
        if self.grad:
            self.S, self.V = self.S.clone(), self.V.clone()
        if t:
            s = self.S[:, lo:hi]
            cs = s.cumsum(1)
            s.sub_((act[:, 1:2] - (cs[:, -1:] - cs)).clamp_(min=0)).clamp_(min=0)   # Eq. 7
            cs = s.cumsum(1)
            s.sub_((act[:, 3:4] - (cs - s)).clamp_(min=0)).clamp_(min=0)           # Eq. 8
        self.S[:, lo - 1], self.S[:, hi] = act[:, 2], act[:, 0]                    # Eq. 9
        self.V[:, :, lo - 1], self.V[:, :, hi] = value[:, m:], value[:, :m]        # Eq. 6
        self.t = t + 1
        s = self.S[:, lo - 1:hi + 1]
        cs = s.cumsum(1)
        w = torch.stack([torch.minimum(s, (1 - (cs[:, -1:] - cs)).clamp_(min=0)),    # Eq. 10
                         torch.minimum(s, (1 - (cs - s)).clamp_(min=0))], 1)        # Eq. 11
        torch.gt(s, 0.5, out=self.alive[:, self.k, lo - 1:hi + 1])
        self.k += 1
        r = torch.linalg.vecdot(w.unsqueeze(2), self.V[:, None, :, lo - 1:hi + 1])  # (B, 2, m)
        return r.reshape(len(s), -1)

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        sl = slice(self.N - self.t, self.N + self.t)
        self.C[:, sl] = self.codes(self.V[:, :, sl].transpose(1, 2))
        k, self.k = self.k, 0
        return _pack(self.alive[:, :k, sl], self.C[:, None, sl])


class _Superposed(_Memory):
    """Joulin–Mikolov (with no-op) or Suzgun (push/pop only) stack, cells top first with the
    occupancy as one more channel (as in `SuperpositionStack`); only the first min(t+1, D) cells
    can be non-zero, and only those are updated. Cells move, so their symbols are decoded at
    every step."""

    def __init__(self, B: int, D: int, m: int, like: torch.Tensor, codes: _SymbolCodes,
                 noop: bool):
        super().__init__(B, D, like, codes)
        self.cells = like.new_zeros(B, D, m + 1)
        self.sym = like.new_full((B, self.BLOCK, D), -1.0)
        self.live, self.noop, self.m = 0, noop, m

    def idle(self, act: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        if not self.noop:
            return act                                    # held by `step` (no no-op action)
        keep = act.new_tensor([0.0, 1.0, 0.0])
        return torch.where(valid.unsqueeze(1), act, keep)

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        if self.grad:
            self.cells = self.cells.clone()
        self.live = L = min(self.live + 1, self.cells.shape[1])
        old = self.cells[:, :L]
        pushed = torch.cat([value, torch.ones_like(value[:, :1])], 1)
        new = superpose(old, pushed, act[:, 0], act[:, 1] if self.noop else None, act[:, -1])
        if valid is not None and not self.noop:
            new = torch.where(valid.view(-1, 1, 1), new, old)
        self.cells[:, :L] = new
        self.alive[:, self.k, :L] = new[..., self.m] > 0.5
        self.sym[:, self.k, :L] = self.codes(new[..., :self.m])
        self.k += 1
        return new[:, 0, :self.m]

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        k, self.k = self.k, 0
        return _pack(self.alive[:, :k, :self.live], self.sym[:, :k, :self.live], reverse=True)


@dataclass(frozen=True)
class ControllerBlocks:
    """A `StackRNN`'s weights by meaning: ``embedding`` (K, K) the input code (one-hot; for a
    linear controller (K, H), the controller state itself); ``weight_ih`` (H, K + r) on
    [x_t; r_{t-1}], ``weight_hh`` (H, H), ``bias_ih``, ``bias_hh``: the Elman controller (None
    when linear); ``h0``; ``actions_weight``/``actions_bias``: the memory's action channels
    (`StackRNN.channels`); ``values_weight``/``values_bias``: the pushed vector(s);
    ``out_h_weight``/``out_h_bias`` and ``out_r_weight``: logits = out_h(h_t) + out_r(r_t)."""

    embedding: Any
    h0: Any
    actions_weight: Any
    actions_bias: Any
    values_weight: Any
    values_bias: Any
    out_h_weight: Any
    out_h_bias: Any
    out_r_weight: Any
    weight_ih: Any = None
    weight_hh: Any = None
    bias_ih: Any = None
    bias_hh: Any = None


_CONTROLLER_KEYS = {"embedding": "embedding.weight", "h0": "h0",
                    "actions_weight": "actions.weight", "actions_bias": "actions.bias",
                    "values_weight": "values.weight", "values_bias": "values.bias",
                    "out_h_weight": "out_h.weight", "out_h_bias": "out_h.bias",
                    "out_r_weight": "out_r.weight", "weight_ih": "cell.weight_ih",
                    "weight_hh": "cell.weight_hh", "bias_ih": "cell.bias_ih",
                    "bias_hh": "cell.bias_hh"}


# --- the module ----------------------------------------------------------------------------------
class StackRNN(nn.Module):
    """Controller (Elman tanh, or linear) + a parameter-free memory. forward(ids (B, T), −1 padding)
    → (states (B, T+1, S), logits (B, T+1, O)) with states[t] = [h_t; r_t; n_t; c_t]: controller
    state, memory reading, and an exact read-back of the memory after step t — n_t the number of
    cells whose strength (Grefenstette) or occupancy (Joulin–Mikolov, Suzgun) exceeds 1/2, and c_t
    their values decoded to store symbol ids (bottom / front end first; −2 for a value that is no
    code; −1 padding to the most cells any step holds). The read-back is computed inside the loop
    from the memory's own strengths and values, so no (B, T+1, T·m) tensor is kept.

    Per step: two affine maps and a tanh for the controller, one for the actions and pushed value,
    and a handful of cumulative sums, clamps and one batched product over the live cells
    (the memories above, in place on preallocated buffers)."""

    def __init__(self, num_symbols: int, hidden: int, width: int, store: str, memory: str,
                 channels: tuple, num_outputs: int, linear: bool, depth: int | None = None,
                 codes: np.ndarray | None = None):
        super().__init__()
        self.store, self.memory, self.channels = store, memory, channels
        self.linear, self.depth, self.width = linear, depth, width
        slots = 2 if store == "deque" else 1
        self.reading_size = width * slots
        self.embedding = nn.Embedding(num_symbols, num_symbols if not linear else hidden)
        if not linear:
            self.cell = nn.RNNCell(num_symbols + self.reading_size, hidden, nonlinearity="tanh")
        self.h0 = nn.Parameter(torch.zeros(hidden))
        self.actions = nn.Linear(hidden, len(channels))
        self.values = nn.Linear(hidden, width * slots)
        self.out_h = nn.Linear(hidden, num_outputs)
        self.out_r = nn.Linear(self.reading_size, num_outputs, bias=False)
        if codes is None:
            codes = np.vstack([np.eye(width, dtype=np.int64), np.zeros((1, width), np.int64)])
        self.codes = _SymbolCodes(codes)
        self._trace: list | None = None

    def blocks(self, numpy: bool = False) -> ControllerBlocks:
        """The weights by meaning: tensors, or with ``numpy`` float64 arrays (detached)."""
        state = self.state_dict()
        if numpy:
            state = {k: v.detach().double().cpu().numpy() for k, v in state.items()}
        return ControllerBlocks(**{f: state.get(k) for f, k in _CONTROLLER_KEYS.items()})

    @staticmethod
    def state_dict_of(blocks: ControllerBlocks) -> dict[str, Any]:
        """The blocks keyed as the module's ``state_dict`` (None blocks left out)."""
        return {k: getattr(blocks, f) for f, k in _CONTROLLER_KEYS.items()
                if getattr(blocks, f) is not None}

    @torch.no_grad()
    def trace_actions(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The memory actions (B, T, channels) and pushed vectors (B, T, width·slots) that the
        controller emits at each step of ``forward(ids)``."""
        self._trace = []
        try:
            self.forward(ids)
            acts, vals = zip(*self._trace) if self._trace else ((), ())
        finally:
            self._trace = None
        B = torch.as_tensor(ids).shape[0]
        if not acts:
            return (self.h0.new_zeros(B, 0, len(self.channels)),
                    self.h0.new_zeros(B, 0, self.values.out_features))
        return torch.stack(acts, 1), torch.stack(vals, 1)

    def _memory(self, B: int, T: int, like: torch.Tensor):
        m = self.width
        if self.memory == "grefenstette":
            if self.store == "deque":
                return _Deque(B, max(T, 1), m, like, self.codes)
            return _Stratified(B, max(T, 1), m, like, self.codes, self.store == "queue")
        D = max(T, 1) if self.memory == "joulin_mikolov" else (
            self.depth if self.depth is not None else T + 1)
        return _Superposed(B, D, m, like, self.codes, self.memory == "joulin_mikolov")

    def controller(self, x: torch.Tensor):
        """The per-step controller map h_t = f(x_t-part, r_{t-1}, h_{t-1}) with the input part
        precomputed for all t (one matrix product)."""
        if self.linear:
            return x, lambda pre_t, r, h: pre_t
        K = self.embedding.embedding_dim
        W = self.cell.weight_ih
        pre = torch.matmul(x, W[:, :K].T) + (self.cell.bias_ih + self.cell.bias_hh)
        Wr, Wh = W[:, K:].T, self.cell.weight_hh.T
        return pre, lambda pre_t, r, h: torch.tanh(torch.addmm(torch.addmm(pre_t, r, Wr), h, Wh))

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(ids)
        if ids.dim() != 2:
            raise InputError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        ids = ids.to(self.h0.device)
        B, T = ids.shape
        valid = ids >= 0
        padded = (~valid).any(0).tolist()
        x = self.embedding(ids.clamp(min=0))
        pre, cell = self.controller(x)
        head_w = torch.cat([self.actions.weight, self.values.weight]).T
        head_b = torch.cat([self.actions.bias, self.values.bias])
        nA = len(self.channels)
        h = self.h0.view(1, -1).expand(B, -1)
        r = x.new_zeros(B, self.reading_size)
        mem = self._memory(B, T, x)
        hs, rs = [h], [r]
        blocks = [(x.new_zeros(B, 1, 0), x.new_zeros(B, 1))]
        for t in range(T):
            h_new = cell(pre[:, t], r, h)
            head = torch.addmm(head_b, h_new, head_w)
            act, value = head[:, :nA], head[:, nA:]
            v = None
            if padded[t]:                       # padding leaves the row's whole state unchanged
                v = valid[:, t]
                h_new = torch.where(v.unsqueeze(1), h_new, h)
                act = mem.idle(act, v)
            r = mem.step(act, value, v)
            if self._trace is not None:
                self._trace.append((act, value))
            h = h_new
            hs.append(h)
            rs.append(r)
            if mem.k == mem.BLOCK or t == T - 1:
                blocks.append(mem.flush())
        W = max(1, max(c.shape[2] for c, _ in blocks))
        contents = x.new_full((B, T + 1, W), -1.0)
        t0 = 0
        for c, _ in blocks:
            contents[:, t0:t0 + c.shape[1], :c.shape[2]] = c
            t0 += c.shape[1]
        sizes = torch.cat([n for _, n in blocks], 1)
        hs_t, rs_t = torch.stack(hs, 1), torch.stack(rs, 1)
        states = torch.cat([hs_t, rs_t, sizes.unsqueeze(2), contents], 2)
        return states, self.out_h(hs_t) + self.out_r(rs_t)

    @torch.no_grad()
    def forward_window(self, ids: torch.Tensor, cells: int = 3
                       ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`forward` for a stack memory in O(1) per step, or None where that is not exact.

        Returns (states (B, T+1, H + R + 1 + cells), logits): states[t] = [h_t; r_t; n_t; the
        symbol ids of the memory's top ``cells`` cells, top first, −1 below the bottom].

        Why it is exact: while every action is exactly 0 or 1 (Grefenstette: push d and pop u;
        Joulin–Mikolov / Suzgun: one-hot) and every value vector is finite, with pushed values
        exactly the code of a store symbol, every strength (occupancy) stays exactly 0 or 1, and
        the memory step is a discrete stack step: pop the top live cell (when u = 1), then push
        the value (when d = 1); the reading is exactly the code of the top live cell (0 when
        empty), since each weight of Eq. 3 (or the top cell of a superposition stack) is exactly
        0 or 1. So this method keeps the memory as an array of symbol ids with a size pointer per
        row, runs the same controller and readout ops as `forward` on the same inputs, and checks
        those conditions at every valid step; it returns None when one fails anywhere (then
        only `forward` tells what the network does). Queues and deques: None."""
        if self.store != "stack":
            return None
        ids = torch.as_tensor(ids).to(self.h0.device)
        if ids.dim() != 2:
            raise InputError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        B, T = ids.shape
        valid = ids >= 0
        valid_np = valid.cpu().numpy()
        padded = (~valid_np).any(0)
        x = self.embedding(ids.clamp(min=0))
        pre, cell = self.controller(x)
        head_w = torch.cat([self.actions.weight, self.values.weight]).T
        head_b = torch.cat([self.actions.bias, self.values.bias])
        nA = len(self.channels)
        i_push, i_pop = self.channels.index("push"), self.channels.index("pop")
        codes_np = np.asarray(self.codes.codes)
        G, m = codes_np.shape[0] - 1, codes_np.shape[1]
        codes = torch.as_tensor(codes_np, dtype=x.dtype, device=x.device)
        # the memory, as symbol ids (numpy: a handful of O(B) operations per step)
        rows = np.arange(B)
        mem = np.full((B, T + 1), -1, dtype=np.int64)
        n = np.zeros(B, dtype=np.int64)
        offs = np.arange(cells)
        ns = np.zeros((T + 1, B), dtype=np.int64)
        win = np.full((T + 1, B, cells), -1, dtype=np.int64)
        lut = {tuple(int(b) for b in codes_np[g]): g for g in range(G)}
        pow2 = 1 << np.arange(m - 1, -1, -1, dtype=np.int64)
        bits_lut = np.full(1 << m, -1, dtype=np.int64) if m <= 20 else None
        if bits_lut is not None:
            for key, g in lut.items():
                bits_lut[int(np.dot(key, pow2))] = g
        h = self.h0.view(1, -1).expand(B, -1)
        r = x.new_zeros(B, self.reading_size)
        hs = x.new_empty(T + 1, B, h.shape[1])
        rs = x.new_empty(T + 1, B, self.reading_size)
        heads = np.zeros((T, B, head_w.shape[1]), dtype=np.float64)
        syms = np.full((T, B), -1, dtype=np.int64)
        hs[0], rs[0] = h, r
        for t in range(T):
            h_new = cell(pre[:, t], r, h)
            head = torch.addmm(head_b, h_new, head_w)
            if padded[t]:
                h_new = torch.where(valid[:, t].unsqueeze(1), h_new, h)
            a = heads[t]
            a[:] = head.detach().cpu().double().numpy()
            v = valid_np[:, t]
            push = (a[:, i_push] == 1) & v
            pop = (a[:, i_pop] == 1) & v
            if push.any():
                bits = a[:, nA:] > 0.5
                if bits_lut is not None:
                    sym = bits_lut[bits.astype(np.int64) @ pow2]
                else:
                    sym = np.array([lut.get(tuple(int(b) for b in row), -1) for row in bits])
                syms[t] = sym
            n -= pop & (n > 0)
            if push.any():
                mem[rows[push], n[push]] = syms[t, push]
                n += push
            ridx = np.where(n > 0, mem[rows, np.maximum(n - 1, 0)], G)
            r_new = codes[torch.from_numpy(ridx)]
            r = torch.where(valid[:, t].unsqueeze(1), r_new, r) if padded[t] else r_new
            h = h_new
            hs[t + 1], rs[t + 1] = h, r
            ns[t + 1] = n
            pos = n[:, None] - 1 - offs
            win[t + 1] = np.where(pos >= 0, mem[rows[:, None], np.maximum(pos, 0)], -1)
        # the conditions that make the discrete memory exact, checked on every valid step at once
        act, value = heads[..., :nA], heads[..., nA:]
        v = valid_np.T
        exact = ((act == 0) | (act == 1)).all(-1) & np.isfinite(value).all(-1)
        if self.memory != "grefenstette":
            exact &= act.sum(-1) == 1
        pushed = act[..., i_push] == 1
        code_ok = (syms >= 0) & (value == codes_np[np.maximum(syms, 0)]).all(-1)
        exact &= ~pushed | code_ok
        if not exact[v].all():
            return None
        hs_t, rs_t = hs.transpose(0, 1), rs.transpose(0, 1)
        tail = torch.from_numpy(np.concatenate([ns.T[..., None], win.transpose(1, 0, 2)], 2))
        states = torch.cat([hs_t, rs_t, tail.to(device=x.device, dtype=x.dtype)], 2)
        return states, self.out_h(hs_t) + self.out_r(rs_t)


# --- weights -------------------------------------------------------------------------------------
def _weights(plan: _Plan, codes: np.ndarray, linear: bool) -> tuple[dict, int]:
    v, units = plan.view, plan.units
    K, m = v.K, codes.shape[1]
    slots = plan.value_slots
    Rsize = m * slots
    Fr = Fraction
    H = len(units) if linear else len(units) + 1
    off = 0 if linear else 1  # hidden index of unit j is j + off; index 0 = start unit
    # ind(h) = a h + b: tanh units (h+1)/2, linear units h
    a_ind, b_ind = (Fr(1), Fr(0)) if linear else (Fr(1, 2), Fr(1, 2))
    w: dict[str, Any] = {}
    if linear:
        emb = np.zeros((K, H), dtype=np.int64)
        for j, u in enumerate(units):
            emb[u.a, j] = 1
        w["embedding.weight"] = ExactWeight.of(emb, scaled=False)
        w["h0"] = ExactWeight.of(np.zeros(H, dtype=np.int64), scaled=False)
    else:
        w["embedding.weight"] = ExactWeight.of(np.eye(K, dtype=np.int64), scaled=False)
        into: dict[int, list] = {}
        for j, u in enumerate(units):
            into.setdefault(u.c2, []).append(j + 1)
        into.setdefault(plan.c0, []).append(0)
        W_ih = np.zeros((H, K + Rsize), dtype=object)
        W_hh = np.zeros((H, H), dtype=object)
        bias = np.zeros(H, dtype=object)
        W_ih[:], W_hh[:], bias[:] = Fr(0), Fr(0), Fr(0)
        bias[0] = Fr(-1, 2)                              # the start unit is off after t = 0
        for j, u in enumerate(units):
            i = j + 1
            W_ih[i, u.a] = Fr(1)
            for src in into.get(u.c, ()):
                W_hh[i, src] = Fr(1, 2)
            bias[i] = Fr(len(into.get(u.c, ())), 2) - (Fr(5, 2) if u.R is not None else Fr(3, 2))
            if u.R is not None:
                top = v.reads_top[plan.q_of(u.c)]
                base = K + (0 if (slots == 1 or top) else m)
                cR = codes[u.R]
                W_ih[i, base:base + m] = [Fr(int(2 * c - 1)) for c in cR]
                bias[i] += Fr(int(1 - cR.sum()))
        w["cell.weight_ih"] = ExactWeight.of(W_ih)
        w["cell.weight_hh"] = ExactWeight.of(W_hh)
        w["cell.bias_ih"] = ExactWeight.of(bias)
        w["cell.bias_hh"] = ExactWeight.of(np.zeros(H, dtype=np.int64))
        h0 = -np.ones(H, dtype=np.int64)
        h0[0] = 1
        w["h0"] = ExactWeight.of(h0, scaled=False)

    def affine(coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows (k, H) and bias (k,) of Σ_j coef[k, j] ind(h_{j+off})."""
        Wm = np.zeros((coef.shape[0], H), dtype=object)
        Wm[:] = Fr(0)
        Wm[:, off:] = coef * a_ind
        bvec = np.array([Fr(int(s)) * b_ind for s in coef.sum(1)], dtype=object)
        return Wm, bvec

    act = np.array([u.act for u in units], dtype=np.int64).T.reshape(len(plan.channels), -1)
    Wa, ba = affine(act)
    w["actions.weight"], w["actions.bias"] = ExactWeight.of(Wa, False), ExactWeight.of(ba, False)
    val = np.zeros((Rsize, len(units)), dtype=np.int64)
    for j, u in enumerate(units):
        for s, y in enumerate(u.push):
            if y >= 0:
                val[s * m:(s + 1) * m, j] = codes[y]
    Wv, bv = affine(val)
    w["values.weight"], w["values.bias"] = ExactWeight.of(Wv, False), ExactWeight.of(bv, False)
    W_r = np.zeros((1 if v.output == "accept" else v.n_out + 1, Rsize), dtype=np.int64)
    if v.output == "symbol":
        out = np.zeros((v.n_out + 1, len(units)), dtype=np.int64)
        for j, u in enumerate(units):
            if u.out >= 0:
                out[u.out, j] = 1
        Wo, bo = affine(out)
        bo[v.n_out] += Fr(1, 2)                       # "none" wins when no class is on
    else:
        def accepts(c: int) -> int:
            if v.empty_stack:
                return int(plan.mode_of(c) in (U, 1 + v.G))
            return int(v.accepting[plan.q_of(c)])

        out = np.array([[accepts(u.c2) for u in units]], dtype=np.int64)
        if linear:  # one controller state: its acceptance is a constant
            Wo = np.zeros((1, H), dtype=np.int64)
            bo = np.array([Fr(accepts(plan.c0)) - Fr(1, 2)], dtype=object)
        else:
            Wo, bo = affine(out)
            Wo[0, 0] = Fr(accepts(plan.c0), 2)       # the start unit
            bo[0] += Fr(accepts(plan.c0), 2) - Fr(1, 2)
        if v.empty_stack:
            W_r[0, :m] = -1
    w["out_h.weight"], w["out_h.bias"] = ExactWeight.of(Wo, False), ExactWeight.of(bo, False)
    w["out_r.weight"] = ExactWeight.of(W_r, False)
    return w, H


# --- decoding ------------------------------------------------------------------------------------
def _control_tables(plan: _Plan, H: int, linear: bool):
    """The controller-state reader shared by both decoders: ``control(states)`` gives the
    controller state c of each (B, T+1) position from its one active unit (−1: none, dead), and
    the tables ``q_of[c]`` (machine state) and ``held_of[c]`` (the top held in mode H_X, or −1)."""
    v = plan.view
    C = v.Q * plan.modes
    target = np.zeros((H, C), dtype=np.float32)
    off = 0 if linear else 1
    if not linear:
        target[0, plan.c0] = 1
    for j, u in enumerate(plan.units):
        target[j + off, u.c2] = 1
    q_of = np.array([plan.q_of(c) for c in range(C)] + [-1], dtype=np.int64)
    held_of = np.array([plan.mode_of(c) - 1 if 0 < plan.mode_of(c) <= v.G else -1
                        for c in range(C)] + [-1], dtype=np.int64)

    def control(states: np.ndarray) -> np.ndarray:
        if linear:
            return np.full(states.shape[:2], plan.c0, dtype=np.int64)
        hits = (states[..., :H] > 0).astype(np.float32) @ target
        return np.where(hits.max(-1) > 0.5, hits.argmax(-1), -1)

    return control, q_of, held_of


def _decoder(plan: _Plan, codes: np.ndarray, H: int, linear: bool):
    """states (B, T+1, S) → run_batch fields: the controller state from the one active unit, the
    store from the memory's read-back (see `StackRNN`), plus the top held in the controller in the
    one-operation modes H_X."""
    v = plan.view
    Rsize = codes.shape[1] * plan.value_slots
    control, q_of, held_of = _control_tables(plan, H, linear)

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        B, T1 = states.shape[:2]
        c = control(states)
        dead = c < 0
        state = np.where(dead, -1, q_of[c])
        if v.fields == "dfa":
            return {"state": state}
        n = np.rint(states[..., H + Rsize]).astype(np.int64)
        contents = np.rint(states[..., H + Rsize + 1:]).astype(np.int64)
        held = held_of[c]
        if v.fields == "store":
            W = max(int(np.where(dead, 0, n).max(initial=0)), 1)
            store = np.full((B, T1, W), -1, dtype=np.int64)
            w = min(W, contents.shape[2])
            store[..., :w] = contents[..., :w]
            store[dead] = -1
            return {"state": state, "store": store, "size": np.where(dead, -1, n)}
        depth = np.where(dead, -1, n + (held >= 0))
        D = max(int(depth.max(initial=0)) + 1, 1)
        stack = np.full((B, T1, D), -1, dtype=np.int64)
        stack[..., 0] = v.G
        w = min(D - 1, contents.shape[2])
        stack[..., 1:1 + w] = contents[..., :w]
        b, t = np.nonzero(held >= 0)
        pos = n[b, t] + 1
        ok = pos < D
        stack[b[ok], t[ok], pos[ok]] = held[b[ok], t[ok]]
        stack[dead] = -1
        top = np.where(dead, -1, np.take_along_axis(stack, np.maximum(depth, 0)[..., None],
                                                    axis=2)[..., 0])
        return {"state": state, "stack": stack, "depth": depth, "top": top}

    return decode


def _window_decoder(plan: _Plan, codes: np.ndarray, H: int, linear: bool):
    """`StackRNN.forward_window` states → ``state``, ``depth``, ``top`` and ``stack_top`` (the
    top cells of the decoded stack, top first: the held top in the modes H_X, then the memory's,
    then ⊥ = G, then −1), the fields of `DeterministicPushdown.run_batch_window`."""
    v = plan.view
    Rsize = codes.shape[1] * plan.value_slots
    control, q_of, held_of = _control_tables(plan, H, linear)

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        c = control(states)
        dead = c < 0
        state = np.where(dead, -1, q_of[c])
        n = np.rint(states[..., H + Rsize]).astype(np.int64)
        mw = np.rint(states[..., H + Rsize + 1:]).astype(np.int64)      # memory, top first
        cells = mw.shape[2]
        i = np.arange(cells)
        mem = np.where(i < n[..., None], mw, np.where(i == n[..., None], v.G, -1))
        held = held_of[c]
        shifted = np.concatenate([held[..., None], mem[..., :cells - 1]], 2)
        window = np.where((held >= 0)[..., None], shifted, mem)
        window[dead] = -1
        depth = np.where(dead, -1, n + (held >= 0))
        return {"state": state, "stack_top": window, "depth": depth,
                "top": np.where(dead, -1, window[..., 0])}

    return decode


def _reader(view: RealtimeTable):
    if view.output == "accept":
        return lambda logits: np.asarray(logits)[..., 0] > 0

    def read(logits: np.ndarray) -> np.ndarray:
        k = np.asarray(logits).argmax(-1)
        return np.where(k == view.n_out, -1, k)

    return read


# --- compile -------------------------------------------------------------------------------------
def check_size(machine: Any, plan: _Plan, linear: bool, code: str) -> None:
    """ResourceError (`pdanet.limits`) before the weights are built: H hidden units (one per
    (controller state, symbol, reading) that acts differently, plus the start unit) and about
    H·(K + r) + H² + H·(channels + r + outputs) parameters (r the code width), each held as an
    exact rational and as a float (32 bytes with temporaries)."""
    v = plan.view
    H = len(plan.units) + (0 if linear else 1)
    G = v.G
    width = max(G, 1) if code == "one_hot" else max(1, int(np.ceil(np.log2(G + 1))))
    r = width * plan.value_slots
    n_out = v.n_out + 1
    params = H * (v.K + r) + (0 if linear else H * H) + H * (len(plan.channels) + r + n_out)
    what = f"compiling {machine!r} to stack_rnn/{plan.memory} ({H:,} hidden units)"
    hint = ("use a smaller machine (for a task, a smaller vocabulary, e.g. "
            "tasks.get(name, vocab_size=16))")
    limits.check(what, H, "max_units", hint=hint)
    limits.check(f"{what}, {params:,} parameters", 32 * params, "max_bytes", hint=hint)


def compile_stack_rnn(machine, memory: str = "grefenstette", code: str = "binary",
                      controller: str = "auto", depth: int | None = None,
                      dtype: torch.dtype = torch.float32) -> CompiledNetwork:
    """Compile a real-time deterministic machine into a controller + memory network (see the
    module docstring). ``memory``: one of `MEMORIES`; ``code``: "binary" (nonzero binary codes,
    ⌈log2(|Γ|+1)⌉ wide) or "one_hot"; ``controller``: "auto" (linear when it suffices, else
    Elman), "elman" or "linear"; ``depth``: a fixed cell count for the Suzgun stack (default: sized
    to the input, T + 1 cells, so it never overflows)."""
    if memory not in MEMORIES:
        raise CompileError(f"memory {memory!r} is not one of {MEMORIES}; a BabyNTM has a fixed "
                           "size and holds no unbounded store")
    if controller not in ("auto", "elman", "linear"):
        raise InputError(f"controller must be 'auto', 'elman' or 'linear', got {controller!r}")
    view = realtime_table(machine)
    if view.kind != "stack" and memory != "grefenstette":
        raise CompileError(f"{machine!r} has a {view.kind}; only memory='grefenstette' provides "
                           "a neural Queue and DeQue")
    pushes = any(mv[3] is not None for mv in view.trans.values())
    if depth is not None:
        if memory != "suzgun":
            raise InputError("`depth` fixes the size of the Suzgun stack; use memory='suzgun'")
        if pushes:
            raise UnboundedStackError(
                f"{machine!r} has an unbounded stack but the Suzgun stack was fixed to {depth} "
                "cells; drop `depth` (the stack is then sized to each input), or bound the "
                "machine's depth with `.bounded(m)` and compile it to a finite-state target")
    plan = _plan(view, memory)
    cs = {u.c for u in plan.units} | {u.c2 for u in plan.units} | {plan.c0}
    linear_ok = (len(cs) == 1 and all(u.R is None for u in plan.units)
                 and sorted(u.a for u in plan.units) == list(range(view.K)))
    if controller == "linear" and not linear_ok:
        raise CompileError(f"{machine!r} needs more than one controller state or depends on the "
                           "memory reading; a linear controller does not suffice, use 'elman'")
    linear = controller == "linear" or (controller == "auto" and linear_ok)
    check_size(machine, plan, linear, code)
    codes = store_codes(view.G, code)
    weights, H = _weights(plan, codes, linear)
    n_out = 1 if view.output == "accept" else view.n_out + 1
    module = StackRNN(view.K, H, codes.shape[1], view.kind, memory, plan.channels, n_out,
                      linear, depth, codes)
    module = load_exact(module, weights, BETA, dtype)
    if view.fields == "pushdown":
        module.window_decoder = _window_decoder(plan, codes, H, linear)
    Csym = len(cs)
    Qs, Ks, Gs = sp.symbols("Q K G")
    modes_expr = 1 if memory == "grefenstette" else Gs + 2
    bound = Qs * modes_expr * Ks * (Gs + 1) + (0 if linear else 1)
    info = {
        "controller": "linear" if linear else "elman",
        "memory": memory,
        "store": view.kind,
        "hidden_units": H,
        "controller_states": Csym,
        "units_with_reading": sum(u.R is not None for u in plan.units),
        "wildcard_units": sum(u.R is None for u in plan.units),
        "num_states": view.Q,
        "num_inputs": view.K,
        "num_store_symbols": view.G,
        "code": code,
        "code_width": codes.shape[1],
        "reading_size": module.reading_size,
        "step": "one network step reads one input symbol and applies one memory step",
    }
    return CompiledNetwork(
        machine=machine, module=module, target="stack_rnn", method=memory, hidden_units=H,
        bound=bound, params={"Q": view.Q, "K": view.K, "G": view.G}, weights=weights,
        scale=sp.Integer(BETA), decoder=_decoder(plan, codes, H, linear),
        reader=_reader(view), margin=sp.Rational(1, 2), steps_per_symbol=1,
        scale_argument=("every pre-activation is ±1/2 or beyond (one-hot input, one active unit, "
                        "exact 0/1 readings); β = 64 gives |βz| ≥ 32 where tanh is exactly ±1 in "
                        "float32 and float64, so strengths, values and readings stay exact"),
        unit_labels=(() if linear else ("start",)) + tuple(
            f"c{u.c}·{u.a}·{'*' if u.R is None else u.R}" for u in plan.units),
        info=info)


def _make(memory: str):
    def fn(machine, dtype: torch.dtype = torch.float32, **options) -> CompiledNetwork:
        return compile_stack_rnn(machine, memory=memory, dtype=dtype, **options)
    fn.__name__ = f"compile_stack_rnn_{memory}"
    return fn


for _memory in MEMORIES:
    for _cls in (DPDA, DPDT, DFA, StoreTransducer):
        register(_cls, "stack_rnn", _memory, default=(_memory == "grefenstette"))(_make(_memory))


def _baby_ntm(machine, dtype: torch.dtype = torch.float32, **options) -> CompiledNetwork:
    raise UnboundedStackError(
        f"{machine!r} has an unbounded store but a BabyNTM has a fixed number of rows; use "
        "memory 'grefenstette', 'joulin_mikolov' or 'suzgun' (sized to each input)")


for _cls in (DPDA, DPDT, StoreTransducer):
    register(_cls, "stack_rnn", "baby_ntm")(_baby_ntm)


def _nondeterministic(machine, dtype: torch.dtype = torch.float32, **options):
    raise CompileError(
        f"{machine!r} is nondeterministic; a stack_rnn controller follows one run. Use the "
        "nondeterministic stack: pn.compile(machine, target='ns_rnn')")


for _memory in MEMORIES + ("baby_ntm",):
    register(PDA, "stack_rnn", _memory, default=(_memory == "grefenstette"))(_nondeterministic)


__all__ = ["BETA", "MEMORIES", "StackRNN", "compile_stack_rnn"]

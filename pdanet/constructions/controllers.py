"""Real-time DPDAs, DPDTs, Mealy DFAs and store transducers compiled into RNN controllers that
drive a differentiable memory (target ``"stack_rnn"``).

Memories (``memory=``): ``"grefenstette"`` — the neural Stack / Queue / DeQue of Grefenstette et
al. (2015), chosen by the machine's store (a pushdown machine uses the Stack); ``"joulin_mikolov"``
— the superposition stack (Joulin & Mikolov 2015; DuSell & Chiang 2022 App. A.2);
``"suzgun"`` — the push/pop stack of Suzgun et al. (2019) §3.1 (no no-op). The network runs the
public store class itself (`STORES`; `pdanet.constructions.stacks.protocol.Store`): the store
gives the controller's action encoding of each op (``actions``), its channels, value slots and
in-place run.

One network step = one input symbol (``steps_per_symbol = 1``). At step t the controller reads
``[x_t; r_{t-1}]`` (one-hot input, the memory's reading after step t-1; zero for an empty store)
and its state ``h_{t-1}``, and emits, as affine maps of ``h_t``, the memory's actions (push and pop
strengths exactly 0 or 1; a replace is pop + push in one Grefenstette step, Eq. 2), the pushed
vector (the code of a store symbol: nonzero binary by default, or one-hot) and the output logits.
The memory then steps and gives ``r_t``; logits may also read ``r_t`` (an empty-stack recogniser
accepts when ``r_t = 0``).

Controller (one-layer Elman, tanh). Controller states are ``c = (q, mode)``: ``mode`` is ``U`` (the
memory holds the machine's whole store) or, for a stack that cannot replace in one step
(`protocol.holds_top`: Joulin–Mikolov, Suzgun), ``H_X``: the machine's
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
from pdanet.constructions.abstraction import ControllerMemory, ControllerUnit
from pdanet.constructions.base import CompiledNetwork, ExactWeight, load_exact
from pdanet.constructions.modules import keyed, module_state, unkeyed
from pdanet.constructions.realtime import RealtimeTable, U, one_op, store_codes
from pdanet.constructions.realtime import table as realtime_table
from pdanet.constructions.stacks.grefenstette import NeuralDeQue, NeuralQueue, NeuralStack
from pdanet.constructions.stacks.protocol import Store, SymbolCodes, holds_top, op_of, pushed
from pdanet.constructions.stacks.superposition import SuperpositionStack
from pdanet.constructions.stacks.suzgun import SuzgunStack
from pdanet.errors import CompileError, InputError, UnboundedStackError

# (memory, the machine's store kind) → the store class the controller drives
STORES: dict[tuple[str, str], type] = {
    ("grefenstette", "stack"): NeuralStack, ("grefenstette", "queue"): NeuralQueue,
    ("grefenstette", "deque"): NeuralDeQue, ("joulin_mikolov", "stack"): SuperpositionStack,
    ("suzgun", "stack"): SuzgunStack,
}
MEMORIES = tuple(dict.fromkeys(memory for memory, _ in STORES))
BETA = 64
MARGIN = Fraction(1, 2)


def store_for(memory: str, kind: str, depth: int | None = None) -> Store:
    """The store of memory family ``memory`` that holds a ``kind`` (`STORES`), with ``depth``
    cells where given (CompileError where the family has no such store, InputError for a depth
    on a store sized by its run)."""
    cls = STORES.get((memory, kind))
    if cls is None:
        holders = ", ".join(f"{m!r} ({c.__name__})" for (m, k), c in STORES.items() if k == kind)
        raise CompileError(f"memory {memory!r} provides no {kind}; the memories with a {kind}: "
                           f"{holders}")
    if depth is None:
        return cls()
    if not cls.takes_depth:
        raise InputError(f"`depth` fixes the number of cells of a stack of fixed size; "
                         f"{cls.__name__} (memory {memory!r}) grows with its run")
    return cls(depth)


def read_back(blocks: list, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The store's read-back blocks (`BlockRun.flush`) joined: (sizes (B, K) — the number of
    live cells after each step —, contents (B, K, W) — their symbol ids, bottom first, −1
    padding), in ``like``'s dtype and device."""
    sizes = torch.cat([n for _, n in blocks], 1)
    W = max(1, max(c.shape[2] for c, _ in blocks))
    contents = like.new_full((*sizes.shape, W), -1.0)
    t0 = 0
    for c, _ in blocks:
        contents[:, t0:t0 + c.shape[1], :c.shape[2]] = c
        t0 += c.shape[1]
    return sizes, contents


def assemble_states(hs: torch.Tensor, rs: torch.Tensor, blocks: list) -> torch.Tensor:
    """[h_t; r_t; n_t; c_t] (B, T+1, ·) from the controller states (B, T+1, H), readings
    (B, T+1, r) and the store's read-back blocks (`read_back`): n_t the number of live
    cells, c_t their symbol ids (bottom first, −1 padding)."""
    sizes, contents = read_back(blocks, hs)
    return torch.cat([hs, rs, sizes.unsqueeze(2).to(hs), contents], 2)


class SymbolStack:
    """The discrete stack that `forward_window` runs beside a saturated controller: per batch row
    the symbol ids of its cells (bottom first) and a size pointer, a handful of O(B) numpy
    operations per step. ``codes``: the (G + 1, m) 0/1 code table (row G: the empty reading)."""

    def __init__(self, B: int, T: int, cells: int, codes: np.ndarray):
        self.codes = np.asarray(codes)
        self.G, m = self.codes.shape[0] - 1, self.codes.shape[1]
        self.rows, self.offs = np.arange(B), np.arange(cells)
        self.mem = np.full((B, T + 1), -1, dtype=np.int64)
        self.n = np.zeros(B, dtype=np.int64)
        self.ns = np.zeros((T + 1, B), dtype=np.int64)
        self.win = np.full((T + 1, B, cells), -1, dtype=np.int64)
        self.pow2 = 1 << np.arange(m - 1, -1, -1, dtype=np.int64)
        self.lut = None
        if m <= 20:
            self.lut = np.full(1 << m, -1, dtype=np.int64)
            self.lut[self.codes[:self.G].astype(np.int64) @ self.pow2] = np.arange(self.G)

    def symbols(self, values: np.ndarray) -> np.ndarray:
        """(B, m) value vectors → the symbol whose code their bits (> 1/2) spell, −1 for none."""
        bits = values > 0.5
        if self.lut is not None:
            return self.lut[bits.astype(np.int64) @ self.pow2]
        keys = {tuple(int(b) for b in self.codes[g]): g for g in range(self.G)}
        return np.array([keys.get(tuple(int(b) for b in row), -1) for row in bits])

    def step(self, t: int, push: np.ndarray, pop: np.ndarray, sym: np.ndarray) -> np.ndarray:
        """Step t (0-based): pop the top where ``pop``, then push ``sym`` where ``push``; records
        size and window after it and returns the top symbol per row (G where empty)."""
        n, rows = self.n, self.rows
        n -= pop & (n > 0)
        self.mem[rows[push], n[push]] = sym[push]
        n += push
        self.ns[t + 1] = n
        pos = n[:, None] - 1 - self.offs
        self.win[t + 1] = np.where(pos >= 0, self.mem[rows[:, None], np.maximum(pos, 0)], -1)
        return np.where(n > 0, self.mem[rows, np.maximum(n - 1, 0)], self.G)

    def tail(self, like: torch.Tensor) -> torch.Tensor:
        """[n_t; the top cells' symbol ids, top first, −1 below] as (B, T+1, 1 + cells)."""
        tail = np.concatenate([self.ns.T[..., None], self.win.transpose(1, 0, 2)], 2)
        return torch.from_numpy(tail).to(device=like.device, dtype=like.dtype)


# --- the controller's transition table ----------------------------------------------------------
@dataclass(frozen=True)
class _Unit:
    c: int                 # controller state before
    a: int                 # input symbol
    R: int | None          # reading code condition (None = any)
    c2: int                # controller state after
    act: tuple             # memory actions (`Store.actions`, in `Store.channels` order)
    push: tuple            # pushed codes per value slot (-1 none)
    out: int               # output symbol (-1 none)


@dataclass(frozen=True)
class _Plan:
    view: RealtimeTable
    store: Store
    modes: int             # 1 (U only) or G + 2
    c0: int
    units: tuple

    def q_of(self, c: int) -> int:
        return c // self.modes

    def mode_of(self, c: int) -> int:
        return c % self.modes

    def incoming(self) -> dict[int, list[int]]:
        """{controller state c: the hidden units whose firing means "now in c"} — unit 0 the
        start unit (the initial state), unit j + 1 the transition ``units[j]`` (into its c2)."""
        into: dict[int, list[int]] = {}
        for j, u in enumerate(self.units):
            into.setdefault(u.c2, []).append(j + 1)
        into.setdefault(self.c0, []).append(0)
        return into


def _plan(view: RealtimeTable, store: Store) -> _Plan:
    G, held = view.G, holds_top(store)
    modes = G + 2 if held else 1

    def result(c: int, a: int, R: int):
        """(c2, store op, pushed codes per slot, output) of the move from c on a with reading R."""
        p, mode = divmod(c, modes)
        X = R if mode == U else mode - 1
        mv = view.trans.get((p, a, X))
        if mv is None:
            return None
        p2, out, pe, ue, y = mv
        if held:
            mode2, op, y = one_op("noop" in store.ops, mode, G, R, (pe, ue, y))
            return (p2 * modes + mode2, op, pushed(store, op, y), out)
        op = op_of(store, pe, ue)
        if op is None:
            raise CompileError(f"{type(store).__name__} has no one-step op that pops at {pe} and "
                               f"pushes at {ue}")
        return (p2, op, pushed(store, op, y), out)

    def next_reading(R: int, res: tuple, anything: frozenset) -> frozenset:
        """Readings possible after a move from reading R (an over-approximation)."""
        _, op, push, _ = res
        if view.kind == "deque":
            return anything | {y for y in push if y >= 0}
        y = push[0]
        pushes, pops = y >= 0, store.ops[op][0] is not None
        if view.kind == "queue":  # the reading is the front
            if pops:
                return anything | ({y} if pushes else set())
            return frozenset({y if R == G else R}) if pushes else frozenset({R})
        return frozenset({y}) if pushes else (anything if pops else frozenset({R}))

    c0 = view.q0 * modes
    C = view.Q * modes
    tops: dict[int, set] = {c0: {G}}
    pushed_codes: set = set()
    changed = True
    while changed:  # over-approximate the readings possible in each controller state
        changed = False
        anything = frozenset(pushed_codes | {G})
        for c in list(tops):
            for R in list(tops[c]):
                for a in range(view.K):
                    res = result(c, a, R)
                    if res is None:
                        continue
                    new_push = {y for y in res[2] if y >= 0} - pushed_codes
                    if new_push:
                        pushed_codes |= new_push
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
            for R, (c2, op, push, out) in defined.items():
                units.append(_Unit(c, a, None if same else R, c2, store.actions(op), push, out))
                if same:
                    break
    return _Plan(view, store, modes, c0, tuple(units))


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
    and one step of the store's in-place run (`Store.run`: a handful of cumulative sums, clamps
    and one batched product over the live cells). ``store`` is the public store object (a
    `NeuralStack`, `NeuralQueue`, `NeuralDeQue`, `SuperpositionStack` or `SuzgunStack`) and
    ``codes`` the (G + 1, width) 0/1 symbol codes."""

    def __init__(self, num_symbols: int, hidden: int, store: Store, codes: np.ndarray,
                 num_outputs: int, linear: bool):
        super().__init__()
        codes = np.asarray(codes)
        self.store, self.linear, self.width = store, linear, codes.shape[1]
        self.reading_size = self.width * store.slots
        self.embedding = nn.Embedding(num_symbols, num_symbols if not linear else hidden)
        if not linear:
            self.cell = nn.RNNCell(num_symbols + self.reading_size, hidden, nonlinearity="tanh")
        self.h0 = nn.Parameter(torch.zeros(hidden))
        self.actions = nn.Linear(hidden, len(store.channels))
        self.values = nn.Linear(hidden, self.reading_size)
        self.out_h = nn.Linear(hidden, num_outputs)
        self.out_r = nn.Linear(self.reading_size, num_outputs, bias=False)
        self.codes = SymbolCodes(codes)
        self._trace: list | None = None

    @property
    def memory(self) -> str:
        """The store's memory family (`Store.name`)."""
        return self.store.name

    @property
    def channels(self) -> tuple[str, ...]:
        """The store's action channels (`Store.channels`), the rows of ``actions``."""
        return self.store.channels

    @property
    def depth(self) -> int | None:
        """The store's fixed cell count, or None (sized to each input)."""
        return getattr(self.store, "depth", None)

    def blocks(self, numpy: bool = False) -> ControllerBlocks:
        """The weights by meaning: tensors, or with ``numpy`` float64 arrays (detached)."""
        return unkeyed(ControllerBlocks, _CONTROLLER_KEYS, module_state(self, numpy))

    @staticmethod
    def state_dict_of(blocks: ControllerBlocks) -> dict[str, Any]:
        """The blocks keyed as the module's ``state_dict`` (None blocks left out)."""
        return keyed(blocks, _CONTROLLER_KEYS)

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
        """The store's in-place run for B rows and T steps (`Store.run`)."""
        return self.store.run(B, T, like, self.codes)

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
        hs_t, rs_t = torch.stack(hs, 1), torch.stack(rs, 1)
        return assemble_states(hs_t, rs_t, blocks), self.out_h(hs_t) + self.out_r(rs_t)

    @torch.no_grad()
    def forward_window(self, ids: torch.Tensor, cells: int = 3
                       ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`forward` for a stack memory in O(1) per step, or None where that is not exact.

        Returns (states (B, T+1, H + R + 1 + cells), logits): states[t] = [h_t; r_t; n_t; the
        symbol ids of the memory's top ``cells`` cells, top first, −1 below the bottom].

        Why it is exact: while every action row is exactly the encoding of one of the store's
        one-step ops (`Store.actions`: push d and pop u each 0 or 1 for Grefenstette; one-hot for
        Joulin–Mikolov and Suzgun) and every value vector is finite, with pushed values
        exactly the code of a store symbol, every strength (occupancy) stays exactly 0 or 1, and
        the memory step is a discrete stack step: pop the top live cell (when u = 1), then push
        the value (when d = 1); the reading is exactly the code of the top live cell (0 when
        empty), since each weight of Eq. 3 (or the top cell of a superposition stack) is exactly
        0 or 1. So this method keeps the memory as an array of symbol ids with a size pointer per
        row, runs the same controller and readout ops as `forward` on the same inputs, and checks
        those conditions at every valid step; it returns None when one fails anywhere (then
        only `forward` tells what the network does). Queues and deques: None."""
        if self.store.kind != "stack":
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
        codes = torch.as_tensor(codes_np, dtype=x.dtype, device=x.device)
        stack = SymbolStack(B, T, cells, codes_np)          # the memory, as symbol ids
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
                syms[t] = stack.symbols(a[:, nA:])
            ridx = stack.step(t, push, pop, syms[t])
            r_new = codes[torch.from_numpy(ridx)]
            r = torch.where(valid[:, t].unsqueeze(1), r_new, r) if padded[t] else r_new
            h = h_new
            hs[t + 1], rs[t + 1] = h, r
        # the conditions that make the discrete memory exact, checked on every valid step at once
        act, value = heads[..., :nA], heads[..., nA:]
        v = valid_np.T
        ops = np.array([self.store.actions(op) for op in self.store.ops], dtype=np.float64)
        exact = (act[..., None, :] == ops).all(-1).any(-1) & np.isfinite(value).all(-1)
        pushing = act[..., i_push] == 1
        code_ok = (syms >= 0) & (value == codes_np[np.maximum(syms, 0)]).all(-1)
        exact &= ~pushing | code_ok
        if not exact[v].all():
            return None
        hs_t, rs_t = hs.transpose(0, 1), rs.transpose(0, 1)
        states = torch.cat([hs_t, rs_t, stack.tail(x)], 2)
        return states, self.out_h(hs_t) + self.out_r(rs_t)


# --- weights -------------------------------------------------------------------------------------
def _weights(plan: _Plan, codes: np.ndarray, linear: bool) -> tuple[dict, int]:
    v, units = plan.view, plan.units
    K, m = v.K, codes.shape[1]
    slots = plan.store.slots
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
        into = plan.incoming()
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

    act = np.array([u.act for u in units], dtype=np.int64).T.reshape(len(plan.store.channels), -1)
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
DECODE_CHUNK = 1 << 22   # float64 values one decoding pass converts at a time (32 MB)


def active_units(states: np.ndarray, H: int, c_of_unit: np.ndarray) -> np.ndarray:
    """``c_of_unit[j]`` of the most active of the first H units of each (B, T+1) position of
    ``states`` when it is positive, else −1 (NaN counts as not positive). Positions are read in
    chunks of `DECODE_CHUNK` values, so the float64 working copy stays O(DECODE_CHUNK), not
    O(B·T·H) (for 2·10⁶ positions of 769 units the whole copy would be 12 GB)."""
    states = np.asarray(states)
    lead = states.shape[:-1]
    flat = states.reshape(-1, states.shape[-1])
    out = np.empty(flat.shape[0], dtype=np.int64)
    step = max(1, DECODE_CHUNK // max(H, 1))
    for lo in range(0, flat.shape[0], step):
        h = np.nan_to_num(np.asarray(flat[lo:lo + step, :H], dtype=np.float64), nan=-np.inf)
        j = h.argmax(-1)
        out[lo:lo + step] = np.where(h[np.arange(len(j)), j] > 0, c_of_unit[j], -1)
    return out.reshape(lead)


def _control_tables(plan: _Plan, H: int, linear: bool):
    """The controller-state reader shared by both decoders: ``control(states)`` gives the
    controller state c of each (B, T+1) position from its most active unit (−1: none positive,
    dead), and
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

    c_of_unit = target.argmax(1)          # the controller state each unit stands for

    def control(states: np.ndarray) -> np.ndarray:
        """Nearest configuration: the ideal states are one unit at +1 (the rest −1) or all −1
        (dead), so the nearest is the most active unit's state when it is positive, else dead.
        NaN counts as not positive."""
        if linear:
            return np.full(states.shape[:2], plan.c0, dtype=np.int64)
        return active_units(states, H, c_of_unit)

    return control, q_of, held_of


def _decoder(plan: _Plan, codes: np.ndarray, H: int, linear: bool):
    """states (B, T+1, S) → run_batch fields: the controller state from the one active unit, the
    store from the memory's read-back (see `StackRNN`), plus the top held in the controller in the
    one-operation modes H_X."""
    v = plan.view
    Rsize = codes.shape[1] * plan.store.slots
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
        stack, top = held_stack(contents, n, held, depth, dead, v.G)
        return {"state": state, "stack": stack, "depth": depth, "top": top}

    return decode


def held_stack(contents: np.ndarray, n: np.ndarray, held: np.ndarray, depth: np.ndarray,
               dead: np.ndarray, bottom: int) -> tuple[np.ndarray, np.ndarray]:
    """The decoded stacks (B, T+1, D) bottom first — ``bottom`` (⊥) in cell 0, the memory's
    ``n`` cells of ``contents`` above it, then the symbol the controller holds (``held`` ≥ 0;
    −1: none) — and their tops, −1 on dead rows; ``depth`` counts the symbols above ⊥."""
    B, T1 = n.shape
    D = max(int(depth.max(initial=0)) + 1, 1)
    stack = np.full((B, T1, D), -1, dtype=np.int64)
    stack[..., 0] = bottom
    w = min(D - 1, contents.shape[2])
    stack[..., 1:1 + w] = contents[..., :w]
    b, t = np.nonzero(held >= 0)
    pos = n[b, t] + 1
    ok = pos < D
    stack[b[ok], t[ok], pos[ok]] = held[b[ok], t[ok]]
    stack[dead] = -1
    top = np.where(dead, -1, np.take_along_axis(stack, np.maximum(depth, 0)[..., None],
                                                axis=2)[..., 0])
    return stack, top


def _window_decoder(plan: _Plan, codes: np.ndarray, H: int, linear: bool):
    """`StackRNN.forward_window` states → ``state``, ``depth``, ``top`` and ``stack_top`` (the
    top cells of the decoded stack, top first: the held top in the modes H_X, then the memory's,
    then ⊥ = G, then −1), the fields of `DeterministicPushdown.run_batch_window`."""
    v = plan.view
    Rsize = codes.shape[1] * plan.store.slots
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
def unit_label(u: ControllerUnit) -> str:
    """A unit's display label ``c{c}·{a}·{R}``: a = ε (−1) or ⊣ (−2, input used up) for the
    buffered model, R = * for any reading."""
    a = {-1: "ε", -2: "⊣"}.get(u.a, u.a)
    return f"c{u.c}·{a}·{'*' if u.R is None else u.R}"


def check_size(machine: Any, plan: _Plan, linear: bool, code: str) -> None:
    """ResourceError (`pdanet.limits`) before the weights are built: H hidden units (one per
    (controller state, symbol, reading) that acts differently, plus the start unit) and about
    H·(K + r) + H² + H·(channels + r + outputs) parameters (r the code width), each held as an
    exact rational and as a float (32 bytes with temporaries)."""
    v = plan.view
    H = len(plan.units) + (0 if linear else 1)
    G = v.G
    width = max(G, 1) if code == "one_hot" else max(1, int(np.ceil(np.log2(G + 1))))
    r = width * plan.store.slots
    n_out = v.n_out + 1
    params = H * (v.K + r) + (0 if linear else H * H) + H * (len(plan.store.channels) + r + n_out)
    what = f"compiling {machine!r} to stack_rnn/{plan.store.name} ({H:,} hidden units)"
    hint = ("compile it with model 'grefenstette_lstm' or 'grefenstette_rnn', which factor the "
            "symbols a machine copies (`pdanet.models.grefenstette.estimate(machine)` gives "
            "their size), or use a smaller machine (for a task, a smaller vocabulary, e.g. "
            "tasks.get(name, vocab_size=16))")
    limits.check(what, H, "max_units", hint=hint)
    limits.check(f"{what}, {params:,} parameters", 32 * params, "max_bytes", hint=hint)


def compile_stack_rnn(machine, memory: str = "grefenstette", code: str = "binary",
                      controller: str = "auto", depth: int | None = None,
                      dtype: torch.dtype = torch.float32) -> CompiledNetwork:
    """Compile a real-time deterministic machine into a controller + memory network (see the
    module docstring). ``memory``: one of `MEMORIES`; ``code``: "binary" (nonzero binary codes,
    ⌈log2(|Γ|+1)⌉ wide) or "one_hot"; ``controller``: "auto" (linear when it suffices, else
    Elman), "elman" or "linear"; ``depth``: a fixed cell count for a stack of fixed size (Suzgun,
    Joulin–Mikolov; default: sized to each input, so it never overflows). The store is
    ``STORES[memory, the machine's store kind]``; the network's module holds it (``.store``)."""
    if memory not in MEMORIES:
        raise CompileError(f"memory {memory!r} is not one of {MEMORIES}; a BabyNTM has a fixed "
                           "size and holds no unbounded store")
    if controller not in ("auto", "elman", "linear"):
        raise InputError(f"controller must be 'auto', 'elman' or 'linear', got {controller!r}")
    view = realtime_table(machine)
    store = store_for(memory, view.kind, depth)
    if depth is not None and any(mv[3] is not None for mv in view.trans.values()):
        raise UnboundedStackError(
            f"{machine!r} has an unbounded stack but the {type(store).__name__} was fixed to "
            f"{depth} cells; drop `depth` (the stack is then sized to each input), or bound the "
            "machine's depth with `.bounded(m)` and compile it to a finite-state target")
    plan = _plan(view, store)
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
    module = StackRNN(view.K, H, store, codes, n_out, linear)
    module = load_exact(module, weights, BETA, dtype)
    if view.fields == "pushdown":
        module.window_decoder = _window_decoder(plan, codes, H, linear)
    Csym = len(cs)
    units = tuple(ControllerUnit(u.c, u.a, u.R, u.c2) for u in plan.units)
    abstraction = ControllerMemory(
        labels=(() if linear else ("start",)) + tuple(unit_label(u) for u in units),
        memory=store.name, store=store.kind, code=code, codes=codes, linear=linear,
        start=None if linear else 0, units=units)
    Qs, Ks, Gs = sp.symbols("Q K G")
    modes_expr = Gs + 2 if plan.modes > 1 else 1
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
        "position_bytes": limits.position_bytes(H, "rnn", 2 * module.reading_size
                                                + view.n_out + 1),
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
        abstraction=abstraction, info=info)


__all__ = ["BETA", "DECODE_CHUNK", "MEMORIES", "StackRNN", "SymbolStack", "active_units",
           "assemble_states", "compile_stack_rnn", "read_back"]

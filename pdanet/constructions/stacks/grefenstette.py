"""Stratified memories of Grefenstette et al. (2015): neural Stack (Eqs. 1–3), Queue (Eqs. 1, 4–5)
and DeQue (Eqs. 6–11), batched over B and vectorised over cells.

Each step pops strength ``u`` (any u ≥ 0; u > 1 pops several cells, as Yogatama et al. note), then
pushes the value ``v`` with strength ``d``, then reads one unit of strength. Values are never
changed once written; only strengths move. The state is preallocated for ``max_time`` steps: rows
at or beyond the current time hold zero values and zero strengths, which leave every sum in the
equations unchanged. The modules hold no parameters — a controller produces the actions.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from pdanet.constructions.stacks.common import (
    at_time,
    default_dtype,
    expect_room,
    expect_shape,
    pop_front,
    pop_top,
    pop_with,
    prefix_exclusive,
    read_front_weights,
    read_top_weights,
    read_with,
    select_rows,
    weighted_rows,
)
from pdanet.constructions.stacks.protocol import BlockRun, StoreOps, pack
from pdanet.errors import InputError

_NOOP, _PUSH, _POP, _REPLACE = (None, None), (None, "top"), ("top", None), ("top", "top")


@dataclass(frozen=True)
class StratifiedState:
    """Stack/queue state after ``time`` steps: ``values`` V (B, N, m) and ``strengths`` s (B, N).

    Row i < time holds the vector pushed at step i+1 (bottom/front = row 0); rows ≥ time are zero.
    """

    values: torch.Tensor
    strengths: torch.Tensor
    time: int

    @property
    def capacity(self) -> int:
        return self.strengths.shape[1]


class StackActions(NamedTuple):
    """One step's actions (B,) / (B, m), or a sequence of them (B, T) / (B, T, m)."""

    push: torch.Tensor   # d_t: strength of the pushed value
    pop: torch.Tensor    # u_t ≥ 0: strength removed before the push
    value: torch.Tensor  # v_t: the pushed vector


class _StratifiedList(StoreOps, nn.Module):
    """Shared machinery of the Stack and the Queue: they differ only in which end pops and reads."""

    _name = "StratifiedList"
    _top_first = True
    name = "grefenstette"
    channels = ("push", "pop")

    @staticmethod
    def _pop(s: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @staticmethod
    def _read(s: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def init_state(self, batch: int, width: int, max_time: int, dtype: torch.dtype | None = None,
                   device: torch.device | str | None = None) -> StratifiedState:
        """The empty structure (V_0 is 0 × m, s_0 is empty) with room for ``max_time`` steps."""
        if max_time is None or max_time < 0:
            raise InputError(f"{self._name}: max_time must be a non-negative int, got {max_time!r}")
        dtype = default_dtype(dtype)
        return StratifiedState(torch.zeros(batch, max_time, width, dtype=dtype, device=device),
                               torch.zeros(batch, max_time, dtype=dtype, device=device), 0)

    def _check(self, state: StratifiedState, actions: StackActions, steps: tuple[int, ...]) -> None:
        B, N, m = state.values.shape
        if not isinstance(actions, StackActions):
            actions = StackActions(*actions)
        expect_shape(self._name, "push", actions.push, (B, *steps), state.values)
        expect_shape(self._name, "pop", actions.pop, (B, *steps), state.values)
        expect_shape(self._name, "value", actions.value, (B, *steps, m),
                     state.values)
        expect_room(self._name, state.time, steps[0] if steps else 1, N)

    def step(self, state: StratifiedState, actions: StackActions
             ) -> tuple[StratifiedState, torch.Tensor]:
        """One step: pop, push, read. Returns the new state and the reading r_t (B, m)."""
        actions = StackActions(*actions)
        self._check(state, actions, ())
        t, N = state.time, state.capacity
        s = self._pop(state.strengths[:, :t], actions.pop)                     # Eq. 2 / 4, i < t
        s = torch.cat([s, actions.push.unsqueeze(1)], 1)                       # Eq. 2 / 4, i = t
        values = torch.cat([state.values[:, :t], actions.value.unsqueeze(1),   # Eq. 1
                            state.values[:, t + 1:]], 1)
        reading = weighted_rows(self._read(s), values[:, :t + 1])              # Eq. 3 / 5
        return StratifiedState(values, F.pad(s, (0, N - t - 1)), t + 1), reading

    def scan(self, actions: StackActions, state: StratifiedState | None = None
             ) -> tuple[StratifiedState, torch.Tensor]:
        """Run T steps (actions with a time axis 1). Returns the final state and readings (B, T, m).

        All pushed values are known up front, so V (Eq. 1) is built once, each step only updates the
        strength vector, and the readings are one batched product of the (B, T, N) read weights
        with V.
        """
        actions = StackActions(*actions)
        if actions.push.dim() != 2:
            raise InputError(f"{self._name}: action 'push' must have shape (batch, time), got "
                             f"{tuple(actions.push.shape)}")
        B, T = actions.push.shape
        if state is None:
            state = self.init_state(B, actions.value.shape[-1], T, actions.value.dtype,
                                    actions.value.device)
        self._check(state, actions, (T,))
        t0, N = state.time, state.capacity
        values = torch.cat([state.values[:, :t0], actions.value, state.values[:, t0 + T:]], 1)
        if T == 0:
            return state, values.new_zeros(B, 0, values.shape[-1])
        # Work on the live strengths ordered from the end that pops and reads (the top of a stack,
        # the front of a queue), so Eqs. 2–5 need only prefix sums: no flips inside the loop.
        # The rest sums of a read (Eq. 3 / 5) are those of the next step's pop (Eq. 2 / 4,
        # before its push): one prefix sum per step serves both.
        top_first = self._top_first
        s = state.strengths[:, :t0]
        s = torch.flip(s, (1,)) if top_first else s
        rest = prefix_exclusive(s)
        weights = []
        for k in range(T):
            popped = pop_with(s, actions.pop[:, k, None], rest)                # Eq. 2 / 4, i < t
            d = actions.push[:, k:k + 1]                                       # Eq. 2 / 4, i = t
            s = torch.cat([d, popped] if top_first else [popped, d], 1)
            rest = prefix_exclusive(s)
            pad = (N - t0 - k - 1, 0) if top_first else (0, N - t0 - k - 1)
            weights.append(F.pad(read_with(s, rest), pad))                     # Eq. 3 / 5
        W = torch.stack(weights, 1)
        readings = torch.bmm(W, torch.flip(values, (1,)) if top_first else values)
        s = torch.flip(s, (1,)) if top_first else s
        return StratifiedState(values, F.pad(s, (0, N - t0 - T)), t0 + T), readings

    def forward(self, actions: StackActions, state: StratifiedState | None = None) -> torch.Tensor:
        """Readings (B, T, m) for a sequence of actions (see `scan`)."""
        return self.scan(actions, state)[1]

    def contents(self, state: StratifiedState, threshold: float = 0.5) -> list[torch.Tensor]:
        """Per batch element, the values (k, m) whose strength exceeds ``threshold``, in storage
        order (stack: bottom first; queue: front first). Meant for saturated states (s ≈ 0 or 1)."""
        return select_rows(state.values, state.strengths > threshold)

    def run(self, batch: int, steps: int, like: torch.Tensor, codes) -> StratifiedRun:
        """The in-place run of `steps` steps (`pdanet.constructions.stacks.protocol.Store`)."""
        return StratifiedRun(batch, steps, like, codes, top=self._top_first)


class NeuralStack(_StratifiedList):
    """Grefenstette et al. (2015) neural Stack, Eqs. 1–3: pops and reads at the top. As a
    `Store`: channels (push d, pop u); a replace is pop + push in one step (Eq. 2)."""

    _name = "NeuralStack"
    _pop = staticmethod(pop_top)
    _read = staticmethod(read_top_weights)
    ops = MappingProxyType({"noop": _NOOP, "push": _PUSH, "pop": _POP, "replace": _REPLACE})


class NeuralQueue(_StratifiedList):
    """Grefenstette et al. (2015) neural Queue, Eqs. 1, 4–5: pushes at the back, pops and reads at
    the front (row 0). As a `Store`: the front is the bottom end, pushes go to the top end."""

    _name = "NeuralQueue"
    _top_first = False
    _pop = staticmethod(pop_front)
    _read = staticmethod(read_front_weights)
    kind = "queue"
    reads = ("bottom",)
    ops = MappingProxyType({"noop": _NOOP, "push": _PUSH, "pop": ("bottom", None),
                            "replace": ("bottom", "top")})


@dataclass(frozen=True)
class DequeState:
    """DeQue state after ``time`` steps: ``values`` (B, 2N, m) and ``strengths`` (B, 2N).

    The 2·time live cells are the middle rows N−time … N+time−1 (bottom first); others are zero.
    """

    values: torch.Tensor
    strengths: torch.Tensor
    time: int

    @property
    def capacity(self) -> int:
        return self.strengths.shape[1] // 2

    def live(self) -> slice:
        return slice(self.capacity - self.time, self.capacity + self.time)


class DequeActions(NamedTuple):
    """One step's actions at both ends, (B,) / (B, m), or sequences (B, T) / (B, T, m)."""

    push_top: torch.Tensor
    pop_top: torch.Tensor
    value_top: torch.Tensor
    push_bottom: torch.Tensor
    pop_bottom: torch.Tensor
    value_bottom: torch.Tensor


class DequeReading(NamedTuple):
    """Readings at the top and at the bottom, each (B, m) or (B, T, m)."""

    top: torch.Tensor
    bottom: torch.Tensor


class NeuralDeQue(StoreOps, nn.Module):
    """Grefenstette et al. (2015) neural DeQue, Eqs. 6–11.

    Each step pops from the top (Eq. 7), then from the bottom (Eq. 8), pushes ``v_bot`` below and
    ``v_top`` above (Eqs. 6, 9), and reads one unit from each end (Eqs. 10, 11). Eq. 7 as printed
    stops the sums and the index range one cell short of the top (2(t−1)−1); we pop over all
    2(t−1) cells, which is what the surrounding text describes. As a `Store`: two value slots
    and two readings, (top, bottom).
    """

    _name = "NeuralDeQue"
    name, kind, slots = "grefenstette", "deque", 2
    channels = ("push_top", "pop_top", "push_bottom", "pop_bottom")
    reads = pushes = ("top", "bottom")
    ops = MappingProxyType({"noop": _NOOP, "push_top": _PUSH, "push_bottom": (None, "bottom"),
                            "pop_top": _POP, "pop_bottom": ("bottom", None)})

    def init_state(self, batch: int, width: int, max_time: int, dtype: torch.dtype | None = None,
                   device: torch.device | str | None = None) -> DequeState:
        if max_time is None or max_time < 0:
            raise InputError(f"{self._name}: max_time must be a non-negative int, got {max_time!r}")
        dtype = default_dtype(dtype)
        return DequeState(torch.zeros(batch, 2 * max_time, width, dtype=dtype, device=device),
                          torch.zeros(batch, 2 * max_time, dtype=dtype, device=device), 0)

    def _check(self, state: DequeState, actions: DequeActions, steps: tuple[int, ...]) -> None:
        B, _, m = state.values.shape
        for name in ("push_top", "pop_top", "push_bottom", "pop_bottom"):
            expect_shape(self._name, name, getattr(actions, name), (B, *steps), state.values)
        for name in ("value_top", "value_bottom"):
            expect_shape(self._name, name, getattr(actions, name), (B, *steps, m),
                         state.values)
        expect_room(self._name, state.time, steps[0] if steps else 1, state.capacity)

    @staticmethod
    def _strengths(s: torch.Tensor, a: DequeActions) -> torch.Tensor:
        s = pop_front(pop_top(s, a.pop_top), a.pop_bottom)                       # Eqs. 7, 8
        return torch.cat([a.push_bottom.unsqueeze(1), s, a.push_top.unsqueeze(1)], 1)  # Eq. 9

    def step(self, state: DequeState, actions: DequeActions) -> tuple[DequeState, DequeReading]:
        """One step; returns the new state and the readings at both ends (B, m)."""
        a = DequeActions(*actions)
        self._check(state, a, ())
        N, t = state.capacity, state.time
        live = state.live()
        s = self._strengths(state.strengths[:, live], a)
        values = torch.cat([a.value_bottom.unsqueeze(1), state.values[:, live],   # Eq. 6
                            a.value_top.unsqueeze(1)], 1)
        reading = DequeReading(weighted_rows(read_top_weights(s), values),        # Eq. 10
                               weighted_rows(read_front_weights(s), values))      # Eq. 11
        pad = (N - t - 1, N - t - 1)
        new = DequeState(torch.cat([state.values[:, :N - t - 1], values, state.values[:, N + t + 1:]],
                                   1), F.pad(s, pad), t + 1)
        return new, reading

    def scan(self, actions: DequeActions, state: DequeState | None = None
             ) -> tuple[DequeState, DequeReading]:
        """Run T steps; readings (B, T, m) at both ends from one batched product."""
        a = DequeActions(*actions)
        if a.push_top.dim() != 2:
            raise InputError(f"{self._name}: action 'push_top' must have shape (batch, time), got "
                             f"{tuple(a.push_top.shape)}")
        B, T = a.push_top.shape
        if state is None:
            state = self.init_state(B, a.value_top.shape[-1], T, a.value_top.dtype,
                                    a.value_top.device)
        self._check(state, a, (T,))
        N, t0 = state.capacity, state.time
        old = state.values
        values = torch.cat([old[:, :N - t0 - T], torch.flip(a.value_bottom, (1,)),
                            old[:, N - t0:N + t0], a.value_top, old[:, N + t0 + T:]], 1)
        s = state.strengths[:, state.live()]
        tops, bottoms = [], []
        for k in range(T):
            s = self._strengths(s, at_time(a, k))
            pad = (N - t0 - k - 1, N - t0 - k - 1)
            tops.append(F.pad(read_top_weights(s), pad))
            bottoms.append(F.pad(read_front_weights(s), pad))
        if T == 0:
            empty = values.new_zeros(B, 0, values.shape[-1])
            return state, DequeReading(empty, empty)
        readings = torch.bmm(torch.stack(tops + bottoms, 1), values)
        pad = (N - t0 - T, N - t0 - T)
        return (DequeState(values, F.pad(s, pad), t0 + T),
                DequeReading(readings[:, :T], readings[:, T:]))

    def forward(self, actions: DequeActions, state: DequeState | None = None) -> DequeReading:
        return self.scan(actions, state)[1]

    def contents(self, state: DequeState, threshold: float = 0.5) -> list[torch.Tensor]:
        """Per batch element, the values (k, m) whose strength exceeds ``threshold``, bottom first."""
        return select_rows(state.values, state.strengths > threshold)

    def run(self, batch: int, steps: int, like: torch.Tensor, codes) -> DequeRun:
        """The in-place run of `steps` steps (`pdanet.constructions.stacks.protocol.Store`)."""
        return DequeRun(batch, steps, like, codes)


# --- in-place runs (the `Store` protocol) ---------------------------------------------------------
def _rest(s: torch.Tensor, top: bool, cs: torch.Tensor | None = None) -> torch.Tensor:
    """Σ_{j>i} s_j (``top``) or Σ_{j<i} s_j along the last axis, from the cumulative sum ``cs``
    of ``s`` (computed when not given)."""
    cs = s.cumsum(-1) if cs is None else cs
    return cs[..., -1:] - cs if top else cs - s


class StratifiedRun(BlockRun):
    """`NeuralStack` (``top``) or `NeuralQueue` on preallocated buffers: (B, T) strengths S and
    (B, m, T) values V, column i = the cell pushed at step i; step t touches only columns ≤ t and
    writes in place. The rest sums Σ_{j>i} s_j (stack) or Σ_{j<i} s_j (queue) of a read are
    those of the next step's pop (Eq. 2 / 4 before the push), so each step takes one cumulative
    sum. Actions (push d, pop u); value (B, m)."""

    def __init__(self, batch: int, steps: int, like: torch.Tensor, codes, top: bool = True):
        T = max(steps, 1)
        super().__init__(batch, T, like, codes)
        m = self.codes.codes.shape[1]
        self.S = like.new_zeros(batch, T)
        self.V = like.new_zeros(batch, m, T)          # values, one column per cell
        self.C = like.new_full((batch, T), -1.0)      # decoded symbol of each cell
        self.top, self.rest, self.decoded = top, None, 0

    def idle(self, act: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        return act * valid.unsqueeze(1).to(act)          # d = u = 0 leaves the memory unchanged

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        t = self.t
        if self.grad:               # autograd: new tensors, never writes into ones it saved
            s = pop_with(self.S[:, :t], act[:, 1:2], self.rest) if t else self.S[:, :0]
            self.S = torch.cat([s, act[:, :1], self.S[:, t + 1:]], 1)     # Eq. 2 / 4
            self.V = self.V.clone()
        else:
            if t:
                pop_with(self.S[:, :t], act[:, 1:2], self.rest, inplace=True)   # Eq. 2 / 4, i < t
            self.S[:, t] = act[:, 0]                                          # Eq. 2 / 4, i = t
        self.V[:, :, t] = value                                               # Eq. 1
        self.t = t + 1
        s = self.S[:, :t + 1]
        self.rest = _rest(s, self.top)
        w = read_with(s, self.rest)                                       # Eq. 3 / 5
        torch.gt(s, 0.5, out=self.alive[:, self.k, :t + 1])
        self.k += 1
        return torch.linalg.vecdot(w.unsqueeze(1), self.V[:, :, :t + 1])

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        t, k = self.t, self.k
        self.C[:, self.decoded:t] = self.codes(self.V[:, :, self.decoded:t].transpose(1, 2))
        self.decoded, self.k = t, 0
        return pack(self.alive[:, :k, :t], self.C[:, None, :t])


class DequeRun(StratifiedRun):
    """`NeuralDeQue` on preallocated buffers (Eqs. 6–11): 2T columns, the 2t live ones in the
    middle. Actions (push_top, pop_top, push_bottom, pop_bottom); value [v_top; v_bot] (B, 2m);
    reading [top; bottom] (B, 2m)."""

    def __init__(self, batch: int, steps: int, like: torch.Tensor, codes):
        super().__init__(batch, 2 * max(steps, 1), like, codes)
        self.N = max(steps, 1)

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        t, N = self.t, self.N
        m = value.shape[1] // 2
        lo, hi = N - t, N + t
        s = self._pops(self.S[:, lo:hi], act, not self.grad) if t else self.S[:, lo:hi]
        if self.grad:               # autograd: new tensors, never writes into ones it saved
            self.S = torch.cat([self.S[:, :lo - 1], act[:, 2:3], s, act[:, :1],
                                self.S[:, hi + 1:]], 1)                         # Eq. 9
            self.V = self.V.clone()
        else:
            self.S[:, lo - 1], self.S[:, hi] = act[:, 2], act[:, 0]                # Eq. 9
        self.V[:, :, lo - 1], self.V[:, :, hi] = value[:, m:], value[:, :m]        # Eq. 6
        self.t = t + 1
        s = self.S[:, lo - 1:hi + 1]
        cs = s.cumsum(-1)
        w = torch.stack([read_with(s, _rest(s, True, cs)),                         # Eq. 10
                         read_with(s, _rest(s, False, cs))], 1)                    # Eq. 11
        torch.gt(s, 0.5, out=self.alive[:, self.k, lo - 1:hi + 1])
        self.k += 1
        r = torch.linalg.vecdot(w.unsqueeze(2), self.V[:, None, :, lo - 1:hi + 1])  # (B, 2, m)
        return r.reshape(len(s), -1)

    @staticmethod
    def _pops(s: torch.Tensor, act: torch.Tensor, inplace: bool) -> torch.Tensor:
        s = pop_with(s, act[:, 1:2], _rest(s, True), inplace)                  # Eq. 7
        return pop_with(s, act[:, 3:4], _rest(s, False), inplace)              # Eq. 8

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        live = slice(self.N - self.t, self.N + self.t)
        self.C[:, live] = self.codes(self.V[:, :, live].transpose(1, 2))
        k, self.k = self.k, 0
        return pack(self.alive[:, :k, live], self.C[:, None, live])


class StratifiedTape:
    """`NeuralStack` (``top``) or `NeuralQueue` for a hand-written backward through time: each
    `step` runs Eqs. 1–5 without autograd on preallocated buffers and keeps what `backward`
    needs; `backward` steps are taken in reverse order and give the gradients of (d_t, u_t, v_t)
    that autograd gives through the equations (relu's gradient 0 at 0, min's split in half on a
    tie), up to float rounding.

    Layout: column ``T − 1 − i`` holds stack cell i (the top is the lowest live column) and
    column i queue cell i, so in both the rest sums of a pop and a read (Eqs. 2–5: the strength
    above a stack cell, in front of a queue cell) are exclusive prefix sums along the columns.
    Every step works on all T columns: a column not yet pushed has strength 0 and value 0, which
    a pop keeps at 0 and a read weighs 0, and its gradient never reaches a live cell (the
    backward masks it where the pop's relu is 0). Buffers: ``S[t]``, ``R[t]`` (T + 1, B, T) the
    strengths after t steps and their rest sums; ``A[t]`` (u − rest, Eq. 2 / 4), ``Q[t]``
    (relu(1 − rest), Eq. 3 / 5) and ``W[t]`` (the read weights) of step t + 1, (T, B, T); ``V``
    (B, T, m) the values (Eq. 1). The first backward pass turns ``A`` and ``Q`` into its masks."""

    def __init__(self, batch: int, steps: int, width: int, like: torch.Tensor, top: bool = True):
        T = max(steps, 1)
        self.T, self.top = T, top
        z = like.new_zeros
        self.S, self.R = z(T + 1, batch, T), z(T + 1, batch, T)
        self.A, self.Q, self.W = z(T, batch, T), z(T, batch, T), z(T, batch, T)
        self.V = z(batch, T, width)
        self.one, self.half = like.new_tensor(1.0), like.new_tensor(0.5)
        self._S, self._R, self._A, self._Q, self._W = (x.unbind(0) for x in (self.S, self.R, self.A,
                                                                            self.Q, self.W))
        self._below, self._rest = self.S[..., :-1].unbind(0), self.R[..., 1:].unbind(0)
        self._W1, self._W2 = self.W.unsqueeze(2).unbind(0), self.W.unsqueeze(3).unbind(0)
        self._read = like.new_empty(batch, 1, width)
        self.gS = self.gV = self.VT = None
        self._K = self._Kq = self._pre = self._cut = ()
        self.U = self.neg = None

    def column(self, t: int) -> int:
        """The column of the cell pushed at step t + 1 (t = 0, 1, …)."""
        return self.T - 1 - t if self.top else t

    def step(self, t: int, d: torch.Tensor, u: torch.Tensor, v: torch.Tensor,
             out: torch.Tensor) -> None:
        """Step t + 1 with push d (B,), pop u (B, 1), value v (B, m); writes r_{t+1} into ``out``
        (B, 1, m)."""
        S1 = self._S[t + 1]
        a = torch.sub(u, self._R[t], out=self._A[t])
        torch.sub(self._S[t], torch.relu(a), out=S1).relu_()              # Eq. 2 / 4, i < t
        col = self.column(t)
        S1[:, col] = d                                                     # Eq. 2 / 4, i = t
        self.V[:, col] = v                                                 # Eq. 1
        torch.cumsum(self._below[t + 1], 1, out=self._rest[t + 1])         # rest sums
        q = torch.sub(self.one, self._R[t + 1], out=self._Q[t]).relu_()
        torch.minimum(S1, q, out=self._W[t])                               # Eq. 3 / 5
        out.copy_(torch.bmm(self._W1[t], self.V, out=self._read))

    def begin_backward(self) -> None:
        """Start a backward pass (before the last step's `backward`): zero the gradients and, once,
        derive for all steps at once the masks that the backward steps multiply by."""
        self.gS, self.gV = torch.zeros_like(self._S[0]), torch.zeros_like(self.V)
        if self.VT is not None:
            return
        T, S1, Q = self.T, self.S[1:], self.Q
        self.VT = self.V.transpose(1, 2).contiguous()
        # (Q and A are not needed after this: their buffers take Kq and cut)
        K = torch.heaviside(Q - S1, self.half)          # ∂min(s, q)/∂s: 1, 1/2 on a tie, 0
        Kq = torch.mul(1 - K, Q > 0, out=Q)             # ∂/∂q, then through q = relu(1 − rest)
        pre = (S1 > 0).to(S1.dtype)                     # s = relu(s − cut); not the pushed cell
        steps = torch.arange(T, device=S1.device)
        pre[steps, :, self.T - 1 - steps if self.top else steps] = 0
        cut = torch.mul(pre, self.A > 0, out=self.A)    # and cut = relu(u − rest)
        self._K, self._Kq, self._pre, self._cut = (x.unbind(0) for x in (K, Kq, pre, cut))
        self.U = torch.ones_like(Q[0, 0]).expand(T, T).tril(-1)   # g @ U: Σ_{i>j} g_i
        self.neg = -torch.ones_like(Q[0, 0])

    def backward(self, t: int, g_r: torch.Tensor, g_d: torch.Tensor, g_u: torch.Tensor,
                 g_v: torch.Tensor) -> None:
        """The backward of step t + 1, after those of the later steps: from the gradient ``g_r``
        (B, m) of its reading, writes ∂/∂d_t, ∂/∂u_t, ∂/∂v_t into ``g_d``, ``g_u`` (B,) and
        ``g_v`` (B, m), and keeps the gradient of the strengths before the step. The rest sums
        (exclusive prefix sums) pass their gradient back as one product with ``U``."""
        self.gV.addcmul_(self._W2[t], g_r.unsqueeze(1))                    # r = Σ_i w_i V_i
        g_w = torch.bmm(g_r.unsqueeze(1), self.VT).squeeze(1)
        g_s = torch.addcmul(self.gS, g_w, self._K[t])                      # w = min(s, q)
        g_s.addmm_(g_w.mul_(self._Kq[t]), self.U, alpha=-1)                # q = relu(1 − rest)
        col = self.column(t)
        g_d.copy_(g_s[:, col])
        g_v.copy_(self.gV[:, col])
        g_rest = g_s * self._cut[t]                                        # pop: Eq. 2 / 4
        torch.mv(g_rest, self.neg, out=g_u)
        torch.addmm(g_s.mul_(self._pre[t]), g_rest, self.U, out=self.gS)


__all__ = [
    "DequeActions",
    "DequeReading",
    "DequeRun",
    "DequeState",
    "NeuralDeQue",
    "NeuralQueue",
    "NeuralStack",
    "StackActions",
    "StratifiedRun",
    "StratifiedState",
    "StratifiedTape",
]

"""Superposition stack of Joulin & Mikolov (2015), as specified by DuSell & Chiang (2022, App. A.2).

Cells are stored top first: ``cells[:, 0]`` is the top. One step with action distribution
a = (a_push, a_noop, a_pop) and pushed vector v sets

    new[0] = a_push · v        + a_noop · old[0] + a_pop · old[1]
    new[i] = a_push · old[i−1] + a_noop · old[i] + a_pop · old[i+1]      (i > 0)

with cells below the stack reading 0 (DuSell & Chiang take the bottom value as 0, not −1). The
reading is the new top cell. With a depth limit K only K cells are kept and a push drops the
bottom one (Yogatama et al.); without one the stack keeps ``max_time`` cells, which never
overflow. Alongside the cells the state carries ``occupancy``: the same update applied to a
constant 1 pushed at every step, i.e. the probability that each cell holds an element. It does
not influence the readings; `contents` uses it to tell an empty cell from a pushed zero vector.

Readings only (``forward``) update the live band alone: after step k of a run of T steps only
the first L_k = min(live + k + 1, K, T − k) cells matter, since a cell deeper than the steps
left can never reach the top again and cells below the first live + k + 1 are still 0
(`live_band`). DuSell's implementation trims its stack to the same band. ``scan`` returns the
whole final state, so it updates every occupied cell.

As a `Store` (`pdanet.constructions.stacks.protocol`) the stack's one-step ops are push, no-op and
pop (a replace takes two steps); ``run`` is `SuperposedRun`, the same update in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from pdanet.constructions.stacks.common import (
    default_dtype,
    expect_room,
    expect_shape,
    select_rows,
)
from pdanet.constructions.stacks.protocol import BlockRun, StoreOps, pack
from pdanet.errors import InputError

PUSH, NOOP, POP = 0, 1, 2


@dataclass(frozen=True)
class SuperpositionState:
    """``cells`` (B, D, m), top first; ``occupancy`` (B, D); ``time`` steps taken."""

    cells: torch.Tensor
    occupancy: torch.Tensor
    time: int

    @property
    def depth(self) -> int:
        return self.cells.shape[1]


class SuperpositionActions(NamedTuple):
    """``ops`` (B, 3) = (push, no-op, pop) weights, usually a softmax; ``value`` (B, m).

    With a time axis: (B, T, 3) and (B, T, m).
    """

    ops: torch.Tensor
    value: torch.Tensor


def superpose(cells: torch.Tensor, value: torch.Tensor, push: torch.Tensor,
              noop: torch.Tensor | None, pop: torch.Tensor) -> torch.Tensor:
    """One superposition update of ``cells`` (B, D, m), top first, pushing ``value`` (B, m).

    ``push``, ``noop``, ``pop`` are (B,) weights; ``noop=None`` means no no-op term (Suzgun et al.).
    The cell below the bottom reads 0 and the bottom cell is dropped by a push.
    """
    down = torch.cat([value.unsqueeze(1), cells[:, :-1]], 1)        # what a push leaves in cell i
    up = F.pad(cells[:, 1:], (0, 0, 0, 1))                           # what a pop leaves in cell i
    new = torch.addcmul(push[:, None, None] * down, pop[:, None, None], up)
    if noop is not None:
        new = torch.addcmul(new, noop[:, None, None], cells)
    return new


def live_band(steps: int, live: int, depth: int) -> list[int]:
    """The cells that can still reach the top after each of ``steps`` steps: L_k = min(live + k
    + 1, depth, steps − k) for k < steps, starting from ``live`` occupied cells of ``depth``.

    A cell i at step k is read again only if the steps left (steps − 1 − k) can pop it to the top,
    so i < steps − k; cells at or below live + k + 1 are still 0. The band rises by one cell a
    step, plateaus at the depth limit and falls by one a step, so L_{k+1} ≤ L_k + 1 and
    L_{k−1} ≤ L_k + 1."""
    return [min(live + k + 1, depth, steps - k) for k in range(steps)]


def _weights(ops: torch.Tensor) -> torch.Tensor:
    """(B, T, 3) push/no-op/pop weights → (T, 3, B, 1), broadcasting over (cells, B, m)."""
    return ops.detach().permute(1, 2, 0).unsqueeze(-1).contiguous()


def _step_band(src: torch.Tensor, dst: torch.Tensor, a: torch.Tensor, L: int) -> None:
    """dst[i] = a[0]·src[i] + a[1]·src[i+1] + a[2]·src[i+2] for i < L (cells first, then B, m):
    ``src`` = [v, old cells…] so that is a_push·down + a_noop·old + a_pop·up."""
    torch.mul(src[:L], a[0], out=dst)
    dst.addcmul_(src[1:L + 1], a[1])
    dst.addcmul_(src[2:L + 2], a[2])


def _band_no_grad(ops: torch.Tensor, value: torch.Tensor, init: torch.Tensor,
                  lengths: list[int]) -> torch.Tensor:
    """Readings (B, T, m) of the band update on two ping-pong buffers (no autograd)."""
    B, T, m = value.shape
    A = _weights(ops)
    rows = max(lengths) + 2
    bufs = [value.new_zeros(rows, B, m), value.new_zeros(rows, B, m)]
    n = init.shape[1]
    bufs[0][0] = value[:, 0]
    bufs[0][1:1 + n] = init.transpose(0, 1)
    written = [1 + n, 1]              # rows past which each buffer is still all zero
    out = value.new_empty(T, B, m)
    cur, prev = 0, n                  # prev: the cells held in bufs[cur] (rows 1 … prev)
    for t, L in enumerate(lengths):
        src, dst = bufs[cur], bufs[1 - cur]
        _stale(src, prev, L + 2, written, cur)
        _step_band(src, dst[1:1 + L], A[t], L)
        written[1 - cur] = max(written[1 - cur], 1 + L)
        out[t] = dst[1]
        if t + 1 < T:
            dst[0] = value[:, t + 1]
        cur, prev = 1 - cur, L
    return out.transpose(0, 1)


def _stale(buf: torch.Tensor, held: int, need: int, written: list[int], i: int) -> None:
    """Zero rows held + 1 … need − 1 of ping-pong buffer ``buf`` (number ``i``) where an older,
    deeper band left values: rows past ``written[i]`` are still zero. The bands are unimodal, so
    this happens only after a resumed state's first cells."""
    stop = min(written[i], need)
    if stop > 1 + held:
        buf[1 + held:stop].zero_()
        if stop == written[i]:
            written[i] = 1 + held


class _BandReadings(torch.autograd.Function):
    """Readings of the band update, with the gradient of the same recurrence run backwards.

    Forward keeps one buffer per step (small ones: big fresh buffers cost a page fault per 4 KiB
    on first touch): P_k = [v_k, c_{k−1}[0 … L_k]] (cells first, then B, m), and step k writes
    c_k into P_{k+1}. Backward runs the adjoint g_{k−1}[i] = a_push·g_k[i+1] + a_noop·g_k[i] +
    a_pop·g_k[i−1] (+ the reading's gradient at i = 0) on two ping-pong buffers with a zero row on
    each side of the band, and per step ∂a_j[k] = Σ_i g_k[i]·P_k[i+j] (one batched product over
    a strided view of P_k) and ∂v_k = a_push[k]·g_k[0]."""

    @staticmethod
    def forward(ctx, ops, value, init, lengths):
        B, T, m = value.shape
        A = _weights(ops)
        n = init.shape[1]
        P = value.new_zeros(lengths[0] + 2, B, m)
        P[0] = value[:, 0]
        P[1:1 + n] = init.detach().transpose(0, 1)
        segments, readings = [P], []
        for t, L in enumerate(lengths):
            last = t + 1 == T
            Q = value.new_empty(2 if last else lengths[t + 1] + 2, B, m)
            if not last:
                Q[0] = value[:, t + 1]
            _step_band(P, Q[1:1 + L], A[t], L)
            if Q.shape[0] > 1 + L:
                Q[1 + L:].zero_()
            readings.append(Q[1])
            segments.append(Q)
            P = Q
        ctx.save_for_backward(A)
        ctx.segments, ctx.lengths, ctx.n = segments, lengths, n
        return torch.stack(readings, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (A,) = ctx.saved_tensors
        segments, lengths, n = ctx.segments, ctx.lengths, ctx.n
        del ctx.segments
        T, _, B, _ = A.shape
        m = segments[0].shape[-1]
        grad = grad.to(A.dtype)
        rows = max(max(lengths), n) + 3
        bufs = [A.new_zeros(rows, B, m), A.new_zeros(rows, B, m)]
        bufs[0][1] = grad[:, T - 1]                   # g_{T−1}: L_{T−1} = 1
        written = [2, 1]
        grad_ops = A.new_empty(T, B, 3)
        grad_v = A.new_empty(T, B, m)
        cur = 0
        for t in range(T - 1, -1, -1):
            src, L = bufs[cur], lengths[t]
            P = segments[t]
            # ∂a_j[t]: rows i < L of g_t against rows i + j of P_t.
            windows = P.as_strided((L * B, 3, m), (m, B * m, 1), P.storage_offset())
            torch.sum(torch.bmm(windows, src[1:1 + L].reshape(L * B, m, 1)).view(L, B, 3), 0,
                      out=grad_ops[t])
            torch.mul(src[1], A[t, 0], out=grad_v[t])
            Lp = lengths[t - 1] if t else n
            if t or n:
                _stale(src, L, Lp + 2, written, cur)
                dst = bufs[1 - cur][1:1 + Lp] if t else A.new_empty(n, B, m)
                torch.mul(src[2:2 + Lp], A[t, 0], out=dst)
                dst.addcmul_(src[1:1 + Lp], A[t, 1])
                dst.addcmul_(src[:Lp], A[t, 2])
                if t:
                    dst[0] += grad[:, t - 1]
                    written[1 - cur] = max(written[1 - cur], 1 + Lp)
                else:
                    g_init = dst
            cur = 1 - cur
        grad_init = g_init.transpose(0, 1) if n else A.new_zeros(B, 0, m)
        return grad_ops.transpose(0, 1), grad_v.transpose(0, 1), grad_init, None


def _band_readings(ops: torch.Tensor, value: torch.Tensor, cells: torch.Tensor, live: int
                  ) -> torch.Tensor:
    """Readings (B, T, m) of T superposition steps from ``cells`` (B, D, m, top first, the first
    ``live`` occupied), updating only the live band (`live_band`).

    ``ops`` (B, T, 3) = (push, no-op, pop) weights; ``value`` (B, T, m). Equal to the readings of
    `superpose` applied to all D cells; differentiable in ``ops``, ``value`` and ``cells``
    (first-order gradients, by the adjoint recurrence)."""
    B, T, m = value.shape
    if T == 0:
        return value.new_zeros(B, 0, m)
    lengths = live_band(T, live, cells.shape[1])
    init = cells[:, :min(live, lengths[0] + 1)]
    if torch.is_grad_enabled() and any(x.requires_grad for x in (ops, value, init)):
        return _BandReadings.apply(ops, value, init, lengths)
    return _band_no_grad(ops, value, init, lengths)


class _SuperposedStack(StoreOps, nn.Module):
    """Shared state handling of the superposition stacks (this module and `SuzgunStack`)."""

    _name = "SuperposedStack"
    _num_ops = 3
    takes_depth = True

    def _depth(self, max_time: int | None) -> int:
        raise NotImplementedError

    def _update(self, cells: torch.Tensor, value: torch.Tensor, ops: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def init_state(self, batch: int, width: int, max_time: int | None = None,
                   dtype: torch.dtype | None = None,
                   device: torch.device | str | None = None) -> SuperpositionState:
        """The empty stack (all cells 0)."""
        dtype = default_dtype(dtype)
        D = self._depth(max_time)
        return SuperpositionState(torch.zeros(batch, D, width, dtype=dtype, device=device),
                                  torch.zeros(batch, D, dtype=dtype, device=device), 0)

    def _grows_with_time(self) -> bool:
        """True when the cells were sized by max_time (then more steps would lose the bottom)."""
        return False

    def _check(self, state: SuperpositionState, actions, steps: tuple[int, ...]) -> None:
        B, D, m = state.cells.shape
        expect_shape(self._name, "ops", actions.ops, (B, *steps, self._num_ops), state.cells)
        expect_shape(self._name, "value", actions.value, (B, *steps, m), state.cells)
        if self._grows_with_time():
            expect_room(self._name, state.time, steps[0] if steps else 1, D)

    def _both(self, cells, occupancy, ops, value):
        stacked = torch.cat([cells, occupancy.unsqueeze(-1)], -1)
        new = self._update(stacked, torch.cat([value, torch.ones_like(value[:, :1])], -1), ops)
        return new[..., :-1], new[..., -1]

    def step(self, state: SuperpositionState, actions) -> tuple[SuperpositionState, torch.Tensor]:
        """One step; returns the new state and the reading (the new top cell, (B, m))."""
        actions = type(self)._actions(*actions)
        self._check(state, actions, ())
        cells, occupancy = self._both(state.cells, state.occupancy, actions.ops, actions.value)
        return SuperpositionState(cells, occupancy, state.time + 1), cells[:, 0]

    def scan(self, actions, state: SuperpositionState | None = None
             ) -> tuple[SuperpositionState, torch.Tensor]:
        """Run T steps; returns the final state and the readings (B, T, m).

        Only the cells that can be non-zero (the first min(time, D)) are updated at each step.
        """
        actions, state = self._prepare(actions, state)
        B, T = actions.ops.shape[:2]
        D, m = state.depth, state.cells.shape[-1]
        live = min(state.time, D)
        # Carry the occupancy as one more channel of the cells (it is pushed as a constant 1).
        cells = torch.cat([state.cells[:, :live], state.occupancy[:, :live, None]], -1)
        pushed = torch.cat([actions.value, torch.ones_like(actions.value[..., :1])], -1)
        readings = []
        for k in range(T):
            if live < D:                                  # one more cell can become non-zero
                live += 1
                cells = F.pad(cells, (0, 0, 0, 1))
            cells = self._update(cells, pushed[:, k], actions.ops[:, k])
            readings.append(cells[:, 0, :m])
        if T == 0:
            return state, state.cells.new_zeros(B, 0, m)
        final = SuperpositionState(torch.cat([cells[..., :m], state.cells[:, live:]], 1),
                                   torch.cat([cells[..., m], state.occupancy[:, live:]], 1),
                                   state.time + T)
        return final, torch.stack(readings, 1)

    def _prepare(self, actions, state: SuperpositionState | None):
        """Checked actions with a time axis, and the state (a fresh one sized for them if None)."""
        actions = type(self)._actions(*actions)
        if actions.ops.dim() != 3:
            raise InputError(f"{self._name}: action 'ops' must have shape (batch, time, "
                             f"{self._num_ops}), got {tuple(actions.ops.shape)}")
        B, T = actions.ops.shape[:2]
        if state is None:
            state = self.init_state(B, actions.value.shape[-1], T, actions.value.dtype,
                                    actions.value.device)
        self._check(state, actions, (T,))
        return actions, state

    # True when the actions are (push, no-op, pop) weights updating as `superpose`: readings
    # then come from the live band (`_band_readings`) and the run updates on two fixed buffers.
    _three_terms = False

    def forward(self, actions, state: SuperpositionState | None = None) -> torch.Tensor:
        """Readings (B, T, m) for a sequence of actions, equal to ``scan(actions, state)[1]``;
        computed on the live band only where the stack supports it (`_band_readings`)."""
        actions, state = self._prepare(actions, state)
        if not self._three_terms:
            return self.scan(actions, state)[1]
        return _band_readings(actions.ops, actions.value, state.cells,
                             min(state.time, state.depth))

    def contents(self, state: SuperpositionState, threshold: float = 0.5) -> list[torch.Tensor]:
        """Per batch element, the cells (k, m) whose occupancy exceeds ``threshold``, bottom first."""
        return select_rows(torch.flip(state.cells, (1,)), torch.flip(state.occupancy, (1,)) > threshold)

    def run(self, batch: int, steps: int, like: torch.Tensor, codes) -> SuperposedRun:
        """The in-place run of `steps` steps (`pdanet.constructions.stacks.protocol.Store`), with
        as many cells as `init_state(max_time=steps)` gives."""
        keep = self.actions("noop") if "noop" in self.ops else None
        return SuperposedRun(batch, self._depth(steps), like, codes, self._update, keep,
                             self._three_terms)


class SuperposedRun(BlockRun):
    """A superposition stack on preallocated buffers: cells top first with the occupancy as one
    more channel (as in `_SuperposedStack.scan`); only the first min(t+1, D) cells can be
    non-zero, and only those are updated, by the store's own ``update(cells, value, ops)``.
    ``keep``: the no-op's actions (padding rows take them), or None for a stack without a no-op
    (padding rows are then held by `step`). Cells move, so their symbols are decoded at every
    step. ``three_terms``: ``update`` is `superpose` with actions (push, no-op, pop); without
    autograd the step then runs the same products, in the same order, on two fixed buffers
    [pushed row, cells…, zero row] that take turns (no allocation, no copy of the cells)."""

    def __init__(self, batch: int, cells: int, like: torch.Tensor, codes, update, keep,
                 three_terms: bool = False):
        super().__init__(batch, cells, like, codes)
        self.m = self.codes.codes.shape[1]
        self.cells = like.new_zeros(batch, cells, self.m + 1)
        self.sym = like.new_full((batch, self.BLOCK, cells), -1.0)
        self.live, self.update, self.keep = 0, update, keep
        self.bufs = None
        if three_terms and not self.grad:
            self.bufs = [like.new_zeros(batch, cells + 2, self.m + 1) for _ in range(2)]
            for buf in self.bufs:
                buf[:, 0, self.m] = 1.0                   # the occupancy pushed with each value
            self.cells = None

    def idle(self, act: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        if self.keep is None:
            return act                                    # held by `step` (no no-op action)
        return torch.where(valid.unsqueeze(1), act, act.new_tensor(self.keep))

    def _step_buffers(self, act: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """`superpose` of the first L cells: push·down, + pop·up, + no-op·old. Cells below the
        first L are zero (they have never been written, or L is the depth and the buffer's last
        row is the zero read below the bottom)."""
        src, dst = self.bufs
        self.bufs = [dst, src]
        L = self.live
        src[:, 0, :self.m] = value
        new = dst[:, 1:1 + L]
        torch.mul(src[:, :L], act[:, PUSH, None, None], out=new)
        new.addcmul_(src[:, 2:2 + L], act[:, POP, None, None])
        new.addcmul_(src[:, 1:1 + L], act[:, NOOP, None, None])
        return new

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        D = self.sym.shape[2]
        self.live = L = min(self.live + 1, D)
        if self.bufs is not None:
            new = self._step_buffers(act, value)
            self.alive[:, self.k, :L] = new[..., self.m] > 0.5
            self.sym[:, self.k, :L] = self.codes(new[..., :self.m])
            self.k += 1
            return new[:, 0, :self.m].clone()             # the buffer is reused two steps on
        old = self.cells[:, :L]
        new = self.update(old, torch.cat([value, torch.ones_like(value[:, :1])], 1), act)
        if valid is not None and self.keep is None:
            new = torch.where(valid.view(-1, 1, 1), new, old)
        if self.grad:                     # a new tensor: autograd keeps the old cells
            self.cells = torch.cat([new, self.cells[:, L:]], 1)
        else:
            self.cells[:, :L] = new
        self.alive[:, self.k, :L] = new[..., self.m] > 0.5
        self.sym[:, self.k, :L] = self.codes(new[..., :self.m])
        self.k += 1
        return new[:, 0, :self.m]

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        k, self.k = self.k, 0
        return pack(self.alive[:, :k, :self.live], self.sym[:, :k, :self.live], reverse=True)


class SuperpositionStack(_SuperposedStack):
    """Joulin & Mikolov (2015) stack (DuSell & Chiang 2022, App. A.2); ``depth`` limits it to K cells."""

    _name = "SuperpositionStack"
    _num_ops = 3
    _three_terms = True
    _actions = SuperpositionActions
    name = "joulin_mikolov"
    channels = ("push", "noop", "pop")                    # PUSH, NOOP, POP
    ops = MappingProxyType({"noop": (None, None), "push": (None, "top"), "pop": ("top", None)})

    def __init__(self, depth: int | None = None):
        super().__init__()
        if depth is not None and depth < 1:
            raise InputError(f"SuperpositionStack: depth must be a positive int or None, got {depth!r}")
        self.depth = depth

    def _depth(self, max_time: int | None) -> int:
        if self.depth is not None:
            return self.depth
        if max_time is None:
            raise InputError("SuperpositionStack: without a depth limit, init_state needs max_time "
                             "(the stack keeps max_time cells)")
        return max(max_time, 1)

    def _grows_with_time(self) -> bool:
        return self.depth is None

    def _update(self, cells, value, ops):
        return superpose(cells, value, ops[:, PUSH], ops[:, NOOP], ops[:, POP])

    def extra_repr(self) -> str:
        return f"depth={self.depth}"


__all__ = [
    "NOOP",
    "POP",
    "PUSH",
    "SuperposedRun",
    "SuperpositionActions",
    "SuperpositionStack",
    "SuperpositionState",
    "live_band",
    "superpose",
]

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
        actions = type(self)._actions(*actions)
        if actions.ops.dim() != 3:
            raise InputError(f"{self._name}: action 'ops' must have shape (batch, time, "
                             f"{self._num_ops}), got {tuple(actions.ops.shape)}")
        B, T = actions.ops.shape[:2]
        if state is None:
            state = self.init_state(B, actions.value.shape[-1], T, actions.value.dtype,
                                    actions.value.device)
        self._check(state, actions, (T,))
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

    def forward(self, actions, state: SuperpositionState | None = None) -> torch.Tensor:
        """Readings (B, T, m) for a sequence of actions."""
        return self.scan(actions, state)[1]

    def contents(self, state: SuperpositionState, threshold: float = 0.5) -> list[torch.Tensor]:
        """Per batch element, the cells (k, m) whose occupancy exceeds ``threshold``, bottom first."""
        return select_rows(torch.flip(state.cells, (1,)), torch.flip(state.occupancy, (1,)) > threshold)

    def run(self, batch: int, steps: int, like: torch.Tensor, codes) -> SuperposedRun:
        """The in-place run of `steps` steps (`pdanet.constructions.stacks.protocol.Store`), with
        as many cells as `init_state(max_time=steps)` gives."""
        keep = self.actions("noop") if "noop" in self.ops else None
        return SuperposedRun(batch, self._depth(steps), like, codes, self._update, keep)


class SuperposedRun(BlockRun):
    """A superposition stack on preallocated buffers: cells top first with the occupancy as one
    more channel (as in `_SuperposedStack.scan`); only the first min(t+1, D) cells can be
    non-zero, and only those are updated, by the store's own ``update(cells, value, ops)``.
    ``keep``: the no-op's actions (padding rows take them), or None for a stack without a no-op
    (padding rows are then held by `step`). Cells move, so their symbols are decoded at every
    step."""

    def __init__(self, batch: int, cells: int, like: torch.Tensor, codes, update, keep):
        super().__init__(batch, cells, like, codes)
        self.m = self.codes.codes.shape[1]
        self.cells = like.new_zeros(batch, cells, self.m + 1)
        self.sym = like.new_full((batch, self.BLOCK, cells), -1.0)
        self.live, self.update, self.keep = 0, update, keep

    def idle(self, act: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        if self.keep is None:
            return act                                    # held by `step` (no no-op action)
        return torch.where(valid.unsqueeze(1), act, act.new_tensor(self.keep))

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        self.live = L = min(self.live + 1, self.cells.shape[1])
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
    "superpose",
]

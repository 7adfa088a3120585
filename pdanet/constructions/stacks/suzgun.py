"""Memories of Suzgun et al. (2019): the Stack-RNN / Stack-LSTM stack (§3.1–3.2) and the Baby-NTM
memory (§3.3). Both have a fixed number of cells and are read at cell 0.

Stack (cells top first, ``depth`` = k+1 cells, a = (a_push, a_pop), pushed value n):

    s_t[0] = a_push · n_t + a_pop · s_{t−1}[1]
    s_t[i] = a_push · s_{t−1}[i−1] + a_pop · s_{t−1}[i+1]        (cells past the bottom read 0)

Baby-NTM (memory M of ``size`` rows, five operations weighted by a):
M_t = Σ_i a_i · OP_i M_{t−1}, then M_t[0] += n_t, where on [a,b,c,d,e]
ROTATE_RIGHT → [e,a,b,c,d], ROTATE_LEFT → [b,c,d,e,a], NOOP → [a,b,c,d,e],
POP_LEFT → [b,c,d,e,0], POP_RIGHT → [0,a,b,c,d].
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from pdanet.constructions.stacks.common import default_dtype, expect_shape
from pdanet.constructions.stacks.superposition import (
    SuperpositionState,
    _SuperposedStack,
    superpose,
)
from pdanet.errors import InputError

S_PUSH, S_POP = 0, 1
ROTATE_RIGHT, ROTATE_LEFT, NTM_NOOP, POP_LEFT, POP_RIGHT = 0, 1, 2, 3, 4


class SuzgunActions(NamedTuple):
    """``ops`` (B, 2) = (push, pop) probabilities; ``value`` (B, m) = n_t. Time axis 1 for scans."""

    ops: torch.Tensor
    value: torch.Tensor


class SuzgunStack(_SuperposedStack):
    """Stack of Suzgun et al. (2019) §3.1 with ``depth`` cells; state as `SuperpositionState`.

    Differs from the Joulin–Mikolov stack only in having no no-op. The state's ``occupancy`` is
    the same update applied to a constant 1 (the probability that a cell holds an element).
    ``depth=None`` sizes the stack to each run: ``max_time + 1`` cells, which never overflow.
    As a `Store` its one-step ops are push and pop; its ``run`` is `SuperposedRun`.
    """

    _name = "SuzgunStack"
    _num_ops = 2
    _actions = SuzgunActions
    name = "suzgun"
    channels = ("push", "pop")                            # S_PUSH, S_POP
    ops = MappingProxyType({"push": (None, "top"), "pop": ("top", None)})

    def __init__(self, depth: int | None = None):
        super().__init__()
        if depth is not None and (not isinstance(depth, int) or depth < 1):
            raise InputError(f"SuzgunStack: depth must be a positive int or None, got {depth!r}")
        self.depth = depth

    def _depth(self, max_time: int | None) -> int:
        if self.depth is not None:
            return self.depth
        if max_time is None:
            raise InputError("SuzgunStack: without a depth, init_state needs max_time (the stack "
                             "keeps max_time + 1 cells)")
        return max_time + 1

    def _grows_with_time(self) -> bool:
        return self.depth is None

    def _update(self, cells, value, ops):
        return superpose(cells, value, ops[:, S_PUSH], None, ops[:, S_POP])

    def extra_repr(self) -> str:
        return f"depth={self.depth}"


@dataclass(frozen=True)
class MemoryState:
    """Baby-NTM memory ``memory`` (B, N, m) (row 0 is read and written) after ``time`` steps."""

    memory: torch.Tensor
    time: int


class BabyNTMActions(NamedTuple):
    """``ops`` (B, 5) weights in the order ROTATE_RIGHT, ROTATE_LEFT, NOOP, POP_LEFT, POP_RIGHT;
    ``value`` (B, m) = n_t added to row 0. Time axis 1 for scans."""

    ops: torch.Tensor
    value: torch.Tensor


class BabyNTM(nn.Module):
    """Baby-NTM memory of Suzgun et al. (2019) §3.3 with ``size`` rows; the reading is row 0."""

    _name = "BabyNTM"

    def __init__(self, size: int):
        super().__init__()
        if not isinstance(size, int) or size < 1:
            raise InputError(f"BabyNTM: size must be a positive int, got {size!r}")
        self.size = size

    def init_state(self, batch: int, width: int, max_time: int | None = None,
                   dtype: torch.dtype | None = None,
                   device: torch.device | str | None = None) -> MemoryState:
        """Zero memory (``max_time`` is not needed: the memory has a fixed size)."""
        return MemoryState(torch.zeros(batch, self.size, width, dtype=default_dtype(dtype),
                                       device=device), 0)

    def _check(self, state: MemoryState, actions: BabyNTMActions, steps: tuple[int, ...]) -> None:
        B, _, m = state.memory.shape
        expect_shape(self._name, "ops", actions.ops, (B, *steps, 5), state.memory)
        expect_shape(self._name, "value", actions.value, (B, *steps, m), state.memory)

    @staticmethod
    def _update(M: torch.Tensor, ops: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        w = ops[:, :, None, None]
        new = (w[:, ROTATE_RIGHT] * torch.roll(M, 1, 1) + w[:, ROTATE_LEFT] * torch.roll(M, -1, 1)
               + w[:, NTM_NOOP] * M + w[:, POP_LEFT] * F.pad(M[:, 1:], (0, 0, 0, 1))
               + w[:, POP_RIGHT] * F.pad(M[:, :-1], (0, 0, 1, 0)))
        return torch.cat([new[:, :1] + value.unsqueeze(1), new[:, 1:]], 1)   # M_t[0] += n_t

    def step(self, state: MemoryState, actions: BabyNTMActions) -> tuple[MemoryState, torch.Tensor]:
        """One step; returns the new memory and its row 0 (B, m)."""
        actions = BabyNTMActions(*actions)
        self._check(state, actions, ())
        M = self._update(state.memory, actions.ops, actions.value)
        return MemoryState(M, state.time + 1), M[:, 0]

    def scan(self, actions: BabyNTMActions, state: MemoryState | None = None
             ) -> tuple[MemoryState, torch.Tensor]:
        """Run T steps; returns the final memory and the readings (B, T, m)."""
        actions = BabyNTMActions(*actions)
        if actions.ops.dim() != 3:
            raise InputError(f"BabyNTM: action 'ops' must have shape (batch, time, 5), got "
                             f"{tuple(actions.ops.shape)}")
        B, T = actions.ops.shape[:2]
        if state is None:
            state = self.init_state(B, actions.value.shape[-1], T, actions.value.dtype,
                                    actions.value.device)
        self._check(state, actions, (T,))
        M, readings = state.memory, []
        for k in range(T):
            M = self._update(M, actions.ops[:, k], actions.value[:, k])
            readings.append(M[:, 0])
        if T == 0:
            return state, M.new_zeros(B, 0, M.shape[-1])
        return MemoryState(M, state.time + T), torch.stack(readings, 1)

    def forward(self, actions: BabyNTMActions, state: MemoryState | None = None) -> torch.Tensor:
        return self.scan(actions, state)[1]

    def contents(self, state: MemoryState, threshold: float = 0.5) -> list[torch.Tensor]:
        """Per batch element, the whole memory (N, m), row 0 first. A Baby-NTM memory has no
        notion of empty cells, so ``threshold`` is unused (kept for a uniform interface)."""
        return list(state.memory.unbind(0))

    def extra_repr(self) -> str:
        return f"size={self.size}"


__all__ = [
    "NTM_NOOP",
    "POP_LEFT",
    "POP_RIGHT",
    "ROTATE_LEFT",
    "ROTATE_RIGHT",
    "S_POP",
    "S_PUSH",
    "BabyNTM",
    "BabyNTMActions",
    "MemoryState",
    "SuperpositionState",
    "SuzgunActions",
    "SuzgunStack",
]

"""Input and output buffers of Hao et al. (2018) §2.3: neural queues (Grefenstette et al. Eqs. 4–5)
that let a controller take ε-steps.

The input buffer is read-only: it starts holding the whole input (strength 1 per symbol); each
step dequeues strength ``i_{t−1}`` from the front and then reads one unit from the front, giving
the controller's input x_t. Popping 0 re-reads the same symbol (an ε-step on the input).
The output buffer is write-only: each step enqueues the controller's output y_t with strength o_t
(0 = emit nothing, an ε-step on the output). After the last step, `OutputBuffer.drain` reads the
output sequence by repeatedly reading one unit from the front and dequeuing it.

Hao et al. print the left-over recursions as ι[j] = ReLU(ι[j−1] − i[j]) and ξ[j] = ReLU(ξ[j−1] −
i[j]); the queue they implement (Grefenstette et al. Eqs. 4–5) subtracts i[j−1], which we use.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from pdanet.constructions.stacks.common import (
    default_dtype,
    expect_room,
    expect_shape,
    pop_front,
    read_front_weights,
    select_rows,
    weighted_rows,
)
from pdanet.errors import InputError


@dataclass(frozen=True)
class BufferState:
    """Queue contents ``values`` (B, N, m) (front = row 0), ``strengths`` (B, N), ``time`` steps."""

    values: torch.Tensor
    strengths: torch.Tensor
    time: int

    @property
    def capacity(self) -> int:
        return self.strengths.shape[1]


class InputBuffer(nn.Module):
    """Read-only input queue of Hao et al. (2018) §2.3."""

    _name = "InputBuffer"

    def init_state(self, inputs: torch.Tensor, lengths: torch.Tensor | None = None) -> BufferState:
        """I_0 = ``inputs`` (B, n, m) with strength 1 per item; items at or past ``lengths[b]``
        (padding) get strength 0."""
        if inputs.dim() != 3:
            raise InputError(f"InputBuffer: inputs must have shape (batch, length, width), got "
                             f"{tuple(inputs.shape)}")
        B, n, _ = inputs.shape
        strengths = inputs.new_ones(B, n)
        if lengths is not None:
            lengths = torch.as_tensor(lengths, device=inputs.device)
            if tuple(lengths.shape) != (B,) or bool((lengths < 0).any()) or bool((lengths > n).any()):
                raise InputError(f"InputBuffer: lengths must be {B} integers in [0, {n}], got "
                                 f"{lengths.tolist()}")
            positions = torch.arange(n, device=inputs.device)
            strengths = (positions < lengths.unsqueeze(1)).to(inputs.dtype)
        return BufferState(inputs, strengths, 0)

    def step(self, state: BufferState, pop: torch.Tensor) -> tuple[BufferState, torch.Tensor]:
        """Dequeue strength ``pop`` (B,) = i_{t−1} ≥ 0, then read x_t (B, m) from the front."""
        expect_shape(self._name, "pop", pop, (state.strengths.shape[0],), state.strengths)
        s = pop_front(state.strengths, pop)                          # ι_t, i_t
        x = weighted_rows(read_front_weights(s), state.values)        # ξ_t, x_t
        return BufferState(state.values, s, state.time + 1), x

    def scan(self, pops: torch.Tensor, state: BufferState) -> tuple[BufferState, torch.Tensor]:
        """Run T steps with pop strengths ``pops`` (B, T); returns the state and inputs (B, T, m)."""
        expect_shape(self._name, "pops", pops, (state.strengths.shape[0], pops.shape[-1]),
                     state.strengths)
        s, weights = state.strengths, []
        for k in range(pops.shape[1]):
            s = pop_front(s, pops[:, k])
            weights.append(read_front_weights(s))
        if not weights:
            return state, state.values[:, :0]
        xs = torch.bmm(torch.stack(weights, 1), state.values)
        return BufferState(state.values, s, state.time + pops.shape[1]), xs

    def forward(self, inputs: torch.Tensor, pops: torch.Tensor,
                lengths: torch.Tensor | None = None) -> torch.Tensor:
        """The controller inputs x_1 … x_T (B, T, m) for pop strengths ``pops`` (B, T)."""
        return self.scan(pops, self.init_state(inputs, lengths))[1]

    def contents(self, state: BufferState, threshold: float = 0.5) -> list[torch.Tensor]:
        """Per batch element, the unread items (k, m) with strength above ``threshold``, front first."""
        return select_rows(state.values, state.strengths > threshold)


class OutputBuffer(nn.Module):
    """Write-only output queue of Hao et al. (2018) §2.3."""

    _name = "OutputBuffer"

    def init_state(self, batch: int, width: int, max_time: int, dtype: torch.dtype | None = None,
                   device: torch.device | str | None = None) -> BufferState:
        """The empty buffer with room for ``max_time`` writes."""
        if max_time is None or max_time < 0:
            raise InputError(f"OutputBuffer: max_time must be a non-negative int, got {max_time!r}")
        dtype = default_dtype(dtype)
        return BufferState(torch.zeros(batch, max_time, width, dtype=dtype, device=device),
                           torch.zeros(batch, max_time, dtype=dtype, device=device), 0)

    def step(self, state: BufferState, output: torch.Tensor, strength: torch.Tensor) -> BufferState:
        """Enqueue ``output`` (B, m) = y_t with strength ``strength`` (B,) = o_t. Write-only: the
        controller reads nothing back, so only the new state is returned."""
        B, N, m = state.values.shape
        expect_shape(self._name, "output", output, (B, m), state.values)
        expect_shape(self._name, "strength", strength, (B,), state.values)
        expect_room(self._name, state.time, 1, N)
        t = state.time
        values = torch.cat([state.values[:, :t], output.unsqueeze(1), state.values[:, t + 1:]], 1)
        strengths = torch.cat([state.strengths[:, :t], strength.unsqueeze(1),
                               state.strengths[:, t + 1:]], 1)
        return BufferState(values, strengths, t + 1)

    def scan(self, outputs: torch.Tensor, strengths: torch.Tensor,
             state: BufferState | None = None) -> BufferState:
        """Enqueue T outputs (B, T, m) with strengths (B, T) at once."""
        if outputs.dim() != 3:
            raise InputError(f"OutputBuffer: outputs must have shape (batch, time, width), got "
                             f"{tuple(outputs.shape)}")
        B, T, m = outputs.shape
        if state is None:
            state = self.init_state(B, m, T, outputs.dtype, outputs.device)
        expect_shape(self._name, "outputs", outputs, (B, T, state.values.shape[-1]),
                     state.values)
        expect_shape(self._name, "strengths", strengths, (B, T), state.values)
        expect_room(self._name, state.time, T, state.capacity)
        t = state.time
        values = torch.cat([state.values[:, :t], outputs, state.values[:, t + T:]], 1)
        s = torch.cat([state.strengths[:, :t], strengths, state.strengths[:, t + T:]], 1)
        return BufferState(values, s, t + T)

    def forward(self, outputs: torch.Tensor, strengths: torch.Tensor, steps: int) -> torch.Tensor:
        """Write the outputs, then drain ``steps`` items: (B, steps, m)."""
        return self.drain(self.scan(outputs, strengths), steps)

    def drain(self, state: BufferState, steps: int) -> torch.Tensor:
        """The final output sequence (B, steps, m): read one unit from the front, then dequeue it,
        ``steps`` times (the reads and dequeues of the input buffer, Eqs. 4–5)."""
        s, weights = state.strengths, []
        for k in range(steps):
            weights.append(read_front_weights(s))
            s = pop_front(s, torch.ones_like(s[:, 0]))
        if not weights:
            return state.values[:, :0]
        return torch.bmm(torch.stack(weights, 1), state.values)

    def contents(self, state: BufferState, threshold: float = 0.5) -> list[torch.Tensor]:
        """Per batch element, the written outputs (k, m) with strength above ``threshold``, in order."""
        return select_rows(state.values, state.strengths > threshold)


__all__ = ["BufferState", "InputBuffer", "OutputBuffer"]

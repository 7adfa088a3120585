"""A second-order (multiplicative) recurrent network, as used by Omlin & Giles (1996).

``h_t = σ(W[x_t] h_{t-1} + b)``: the input symbol selects a whole recurrent matrix. ``W`` is stored
either densely (``weight``, shape (|Σ|, H, H), trainable everywhere) or, for large machines, with a
fixed sparsity pattern: ``weight`` has shape (|Σ|, H) and entry (a, p) is the weight from unit p to
unit ``targets[a, p]`` under symbol a (``targets`` is a non-persistent structure buffer; -1 = no
edge). Both are followed by a linear readout. ``forward(ids)`` returns ``(states (B, T+1, H),
logits (B, T+1, O))``; padding (-1) is read as symbol 0.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from pdanet.constructions.modules import keyed, module_state, unkeyed
from pdanet.errors import InputError


@dataclass(frozen=True)
class SecondOrderBlocks:
    """A `SecondOrderRNN`'s weights by meaning: ``weight`` W (|Σ|, H, H) dense or (|Σ|, H) on
    the fixed pattern, ``bias`` b (H,), ``h0`` (H,), ``readout_weight`` (O, H),
    ``readout_bias`` (O,)."""

    weight: Any
    bias: Any
    h0: Any
    readout_weight: Any
    readout_bias: Any


# SecondOrderBlocks field -> the module's state_dict key (only this module spells them)
_KEYS = {"weight": "weight", "bias": "bias", "h0": "h0", "readout_weight": "readout.weight",
         "readout_bias": "readout.bias"}


def second_order_state_dict(blocks: SecondOrderBlocks) -> dict[str, Any]:
    """The blocks keyed as `SecondOrderRNN`'s ``state_dict``: what a construction hands to
    `load_exact`."""
    return keyed(blocks, _KEYS)


class SecondOrderRNN(nn.Module):
    """``h_t = σ(W[x_t] h_{t-1} + b)`` with a linear readout (dense or fixed-pattern sparse W)."""

    def __init__(self, num_symbols: int, hidden_size: int, num_outputs: int,
                 targets: torch.Tensor | None = None):
        super().__init__()
        for name, v in (("num_symbols", num_symbols), ("hidden_size", hidden_size),
                        ("num_outputs", num_outputs)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise InputError(f"{name}={v!r} must be a positive integer")
        self.num_symbols, self.hidden_size = num_symbols, hidden_size
        if targets is None:
            self.weight = nn.Parameter(torch.zeros(num_symbols, hidden_size, hidden_size))
            self.register_buffer("targets", None, persistent=False)
        else:
            targets = torch.as_tensor(targets, dtype=torch.long)
            if tuple(targets.shape) != (num_symbols, hidden_size):
                raise InputError(f"targets must have shape {(num_symbols, hidden_size)}, got "
                                 f"{tuple(targets.shape)}")
            self.weight = nn.Parameter(torch.zeros(num_symbols, hidden_size))
            self.register_buffer("targets", targets, persistent=False)
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.h0 = nn.Parameter(torch.zeros(hidden_size))
        self.readout = nn.Linear(hidden_size, num_outputs)

    def blocks(self, numpy: bool = False) -> SecondOrderBlocks:
        """The weights by meaning: tensors, or with ``numpy`` float64 arrays (detached)."""
        return unkeyed(SecondOrderBlocks, _KEYS, module_state(self, numpy))

    @property
    def sparse(self) -> bool:
        return self.targets is not None

    def step(self, h: torch.Tensor, symbol_ids: torch.Tensor) -> torch.Tensor:
        """One update from states ``h`` (B, H) on symbols (B,)."""
        a = symbol_ids.clamp(min=0)
        if not self.sparse:  # rows grouped by symbol: one (rows, H) @ (H, H) product per symbol
            order = torch.argsort(a, stable=True)
            counts = torch.bincount(a, minlength=self.num_symbols).tolist()
            parts = torch.split(h[order], counts)
            z_sorted = torch.cat([p @ self.weight[s].T for s, p in enumerate(parts)])
            z = torch.empty_like(z_sorted).index_copy(0, order, z_sorted)
        else:
            H = self.hidden_size
            tgt = self.targets[a]  # (B, H): where each source unit sends its value
            vals = self.weight[a] * h
            z = torch.zeros(h.shape[0], H + 1, dtype=h.dtype, device=h.device)
            z.scatter_add_(1, torch.where(tgt >= 0, tgt, H), vals)
            z = z[:, :H]
        return torch.sigmoid(z + self.bias)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (B, T), padding -1 → (states (B, T+1, H), logits (B, T+1, O))."""
        ids = torch.as_tensor(ids)
        B, T = ids.shape
        h = self.h0.unsqueeze(0).expand(B, -1)
        out = [h]
        for t in range(T):
            h = self.step(h, ids[:, t])
            out.append(h)
        states = torch.stack(out, dim=1)
        return states, self.readout(states)


__all__ = ["SecondOrderBlocks", "SecondOrderRNN", "second_order_state_dict"]

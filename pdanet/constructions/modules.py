"""Standard torch modules that compiled recurrent networks are loaded into.

`RecurrentNet` = ``nn.Embedding`` (each symbol's input code) → ``nn.RNN`` (tanh) or ``nn.LSTM``
(one layer, batch first) → linear readout, optionally factored through a small output code
(``readout`` then ``out_embedding``) so that huge output alphabets need no |Out|×H matrix.
The initial state is a learnable ``h0`` (and ``c0``), because constructions rarely start at zero.
Its ``state_dict`` keys are what `ExactWeight` names refer to, and a user can copy them into their
own ``nn.RNN``/``nn.LSTM`` (``rnn.*`` keys are exactly PyTorch's).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

from pdanet.errors import InputError


@dataclass(frozen=True)
class RecurrentBlocks:
    """A `RecurrentNet`'s weights by meaning (PyTorch's gate order i, f, g, o for an LSTM):
    ``embedding`` (K, input) the input code of each symbol; ``weight_ih`` (gates·H, input),
    ``weight_hh`` (gates·H, H), ``bias_ih``, ``bias_hh`` (gates·H,): the recurrence; ``h0`` (and
    ``c0``) the initial state; ``readout_weight`` (O or code, H), ``readout_bias``: the readout,
    followed by ``out_weight`` (O, code), ``out_bias`` when it is factored through an output
    code. Entries are whatever the caller asked for (tensors, float64 arrays, `ExactWeight`s)."""

    embedding: Any
    weight_ih: Any
    weight_hh: Any
    bias_ih: Any
    bias_hh: Any
    h0: Any
    readout_weight: Any
    readout_bias: Any
    c0: Any = None
    out_weight: Any = None
    out_bias: Any = None

    @property
    def bias(self) -> Any:
        """b_ih + b_hh: the recurrence's whole bias."""
        return self.bias_ih + self.bias_hh


# RecurrentBlocks field -> the module's state_dict key (only this module spells them)
_KEYS = {"embedding": "embedding.weight", "weight_ih": "rnn.weight_ih_l0",
         "weight_hh": "rnn.weight_hh_l0", "bias_ih": "rnn.bias_ih_l0", "bias_hh": "rnn.bias_hh_l0",
         "h0": "h0", "c0": "c0", "readout_weight": "readout.weight", "readout_bias": "readout.bias",
         "out_weight": "out_embedding.weight", "out_bias": "out_embedding.bias"}


def module_state(module: nn.Module, numpy: bool = False) -> dict[str, Any]:
    """``module.state_dict()``: tensors, or with ``numpy`` detached float64 arrays (what the
    modules' ``blocks(numpy)`` read)."""
    state = module.state_dict()
    if numpy:
        state = {k: v.detach().double().cpu().numpy() for k, v in state.items()}
    return state


def keyed(blocks: Any, keys: Mapping[str, str]) -> dict[str, Any]:
    """A module's blocks (a dataclass of weights by meaning) keyed as its ``state_dict`` by
    ``keys`` (field → key), None blocks left out: what a construction hands to `load_exact`."""
    return {keys[f.name]: getattr(blocks, f.name) for f in fields(blocks)
            if getattr(blocks, f.name) is not None}


def unkeyed(cls: type, keys: Mapping[str, str], state: Mapping[str, Any]) -> Any:
    """The inverse of `keyed`: a state dict (or exact weights) as ``cls`` blocks by meaning."""
    return cls(**{f: state.get(k) for f, k in keys.items()})


def recurrent_state_dict(blocks: RecurrentBlocks) -> dict[str, Any]:
    """`RecurrentNet`'s blocks keyed as its ``state_dict`` (`keyed`)."""
    return keyed(blocks, _KEYS)


def recurrent_blocks(state: Mapping[str, Any]) -> RecurrentBlocks:
    """The inverse of `recurrent_state_dict`: a state dict (or exact weights) by meaning."""
    return unkeyed(RecurrentBlocks, _KEYS, state)


class RecurrentNet(nn.Module):
    """Embedding → one-layer ``nn.RNN``/``nn.LSTM`` → (factored) linear readout."""

    def __init__(self, cell: str, num_symbols: int, input_size: int, hidden_size: int,
                 num_outputs: int, readout_code: int | None = None):
        super().__init__()
        if cell not in ("rnn", "lstm"):
            raise InputError(f"cell must be 'rnn' or 'lstm', got {cell!r}")
        for name, v in (("num_symbols", num_symbols), ("input_size", input_size),
                        ("hidden_size", hidden_size), ("num_outputs", num_outputs),
                        ("readout_code", 1 if readout_code is None else readout_code)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise InputError(f"{name}={v!r} must be a positive integer")
        self.cell = cell
        self.embedding = nn.Embedding(num_symbols, input_size)
        if cell == "rnn":
            self.rnn = nn.RNN(input_size, hidden_size, batch_first=True, nonlinearity="tanh")
        else:
            self.rnn = nn.LSTM(input_size, hidden_size, batch_first=True)
            self.c0 = nn.Parameter(torch.zeros(hidden_size))
        self.h0 = nn.Parameter(torch.zeros(hidden_size))
        if readout_code is None:
            self.readout = nn.Linear(hidden_size, num_outputs)
            self.out_embedding = None
        else:
            self.readout = nn.Linear(hidden_size, readout_code)
            self.out_embedding = nn.Linear(readout_code, num_outputs)

    @property
    def hidden_size(self) -> int:
        return self.rnn.hidden_size

    def blocks(self, numpy: bool = False) -> RecurrentBlocks:
        """The weights by meaning: tensors, or with ``numpy`` float64 arrays (detached)."""
        return recurrent_blocks(module_state(self, numpy))

    def preactivations(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """The recurrence's pre-activations x·W_ihᵀ + h·W_hhᵀ + b_ih + b_hh (…, gates·H) for
        inputs x (…, input) and previous states h (…, H), in x's dtype (differentiable; for an
        LSTM the gate blocks i, f, g, o)."""
        rnn, dt = self.rnn, x.dtype
        return (x @ rnn.weight_ih_l0.to(dt).T + h @ rnn.weight_hh_l0.to(dt).T
                + rnn.bias_ih_l0.to(dt) + rnn.bias_hh_l0.to(dt))

    def column_logits(self, h: torch.Tensor) -> torch.Tensor:
        """The logits of states stored by column, h (H, N) → (O, N): W·h + b per readout layer
        (what `logits` computes, transposed)."""
        z = torch.addmm(self.readout.bias[:, None], self.readout.weight, h)
        if self.out_embedding is not None:
            z = torch.addmm(self.out_embedding.bias[:, None], self.out_embedding.weight, z)
        return z

    def initial_state(self, batch: int) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        h0 = self.h0.view(1, 1, -1).expand(1, batch, -1).contiguous()
        if self.cell == "rnn":
            return h0
        return h0, self.c0.view(1, 1, -1).expand(1, batch, -1).contiguous()

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        z = self.readout(states)
        return self.out_embedding(z) if self.out_embedding is not None else z

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (B, T), padding -1 → (states (B, T+1, H), logits (B, T+1, O)); T may be 0."""
        ids = torch.as_tensor(ids)
        B = ids.shape[0]
        first = self.h0.view(1, 1, -1).expand(B, 1, -1)
        if ids.shape[1] == 0:  # torch's RNN refuses empty sequences: only the initial state
            return first, self.logits(first)
        x = self.embedding(ids.clamp(min=0))
        out, _ = self.rnn(x, self.initial_state(B))
        states = torch.cat([first, out], dim=1)
        return states, self.logits(states)

    def step(self, state, symbol_ids: torch.Tensor):
        """One step from an explicit state ((h) or (h, c), each (B, H)); returns the new state."""
        x = self.embedding(symbol_ids.clamp(min=0)).unsqueeze(1)
        if self.cell == "rnn":
            _, h = self.rnn(x, state.unsqueeze(0))
            return h[0]
        h, c = state
        _, (h2, c2) = self.rnn(x, (h.unsqueeze(0), c.unsqueeze(0)))
        return h2[0], c2[0]


__all__ = ["RecurrentBlocks", "RecurrentNet", "module_state", "recurrent_blocks",
           "recurrent_state_dict"]

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
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from pdanet import limits
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




# SparseRecurrentNet's sparse blocks (each held as values and (2, nnz) indices)
SPARSE_BLOCKS = ("weight_ih", "weight_hh", "share_out", "share_in")


@dataclass(frozen=True)
class SparseBlocks:
    """A `SparseRecurrentNet`'s weights by meaning: ``embedding`` (K, input); for each sparse
    block B of `SPARSE_BLOCKS` (see the class) ``B_values`` (nnz,) and ``B_indices`` (2, nnz)
    int64 (row, column); ``bias_ih``, ``bias_hh`` (gates·H,); ``h0`` (and ``c0``);
    ``readout_weight`` (O, H) and ``readout_bias``."""

    embedding: Any
    weight_ih_values: Any
    weight_ih_indices: Any
    weight_hh_values: Any
    weight_hh_indices: Any
    share_out_values: Any
    share_out_indices: Any
    share_in_values: Any
    share_in_indices: Any
    bias_ih: Any
    bias_hh: Any
    h0: Any
    readout_weight: Any
    readout_bias: Any
    c0: Any = None


# SparseBlocks field -> SparseRecurrentNet's state_dict key
_SPARSE_KEYS = {"embedding": "embedding.weight",
                **{f"{b}_{part}": f"rnn.{b}_{part}" for b in SPARSE_BLOCKS
                   for part in ("values", "indices")},
                "bias_ih": "rnn.bias_ih_l0", "bias_hh": "rnn.bias_hh_l0", "h0": "h0", "c0": "c0",
                "readout_weight": "readout.weight", "readout_bias": "readout.bias"}


def sparse_state_dict(blocks: SparseBlocks) -> dict[str, Any]:
    """`SparseRecurrentNet`'s blocks keyed as its ``state_dict`` (`keyed`)."""
    return keyed(blocks, _SPARSE_KEYS)


def sparse_blocks(state: Mapping[str, Any]) -> SparseBlocks:
    """The inverse of `sparse_state_dict`: a state dict (or exact weights) by meaning."""
    return unkeyed(SparseBlocks, _SPARSE_KEYS, state)


class SparseRecurrentNet(nn.Module):
    """`RecurrentNet`'s recurrence with sparse weights: embedding → one-layer tanh RNN or LSTM
    (PyTorch's equations and gate order i, f, g, o) → linear readout, where the recurrent
    weight is held as W_hh = S + G·F — S a sparse (gates·H, H) matrix, G a sparse
    (gates·H, R) matrix and F a sparse (R, H) matrix: R *shared sums* F·h, each added (times
    G's entry) to every row that reads the same columns with the same weight — and W_ih as a
    sparse (gates·H, input) matrix. As a linear map this is exactly the dense recurrence whose
    W_hh entries are S + G·F (`dense_blocks`).

    Each sparse block ``B`` is two tensors in the state dict: ``rnn.B_values`` (nnz,) and
    ``rnn.B_indices`` (2, nnz) int64 (row, column) — a sparse safetensors layout that any reader
    can rebuild as ``torch.sparse_coo_tensor(indices, values, shape)``; shapes are those named
    above. The dense blocks keep `RecurrentNet`'s keys (``embedding.weight``, ``rnn.bias_ih_l0``,
    ``rnn.bias_hh_l0``, ``h0``, ``c0``, ``readout.*``).

    Floats: every weight entry is the same float as the dense module's (a shared entry of
    W_hh is the float G_rk·F_kj, with F's entries 1 in compiled networks); what differs is the
    order of summation — the products S·h, F·h and G·(F·h) are summed separately (CSR
    products in row order) and a shared sum is multiplied once by G's entry instead of once per
    column — so pre-activations agree with the dense module's up to float rounding, not bit for
    bit. Runs in float32 or float64 (sparse products in half precision are not supported on
    the CPU: InputError). ``forward`` and ``step`` run without gradients (a compiled network's
    weights are set, not trained); ``blocks()`` densifies W_ih and W_hh for readers of dense
    blocks (certifiers), within `pdanet.limits`.
    """

    def __init__(self, cell: str, num_symbols: int, input_size: int, hidden_size: int,
                 num_outputs: int, shared: int, indices: Mapping[str, Any]):
        super().__init__()
        if cell not in ("rnn", "lstm"):
            raise InputError(f"cell must be 'rnn' or 'lstm', got {cell!r}")
        for name, v in (("num_symbols", num_symbols), ("input_size", input_size),
                        ("hidden_size", hidden_size), ("num_outputs", num_outputs)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise InputError(f"{name}={v!r} must be a positive integer")
        if isinstance(shared, bool) or not isinstance(shared, numbers.Integral) or shared < 0:
            raise InputError(f"shared={shared!r} must be a non-negative integer")
        self.cell = cell
        self.embedding = nn.Embedding(num_symbols, input_size)
        gates = (1 if cell == "rnn" else 4) * hidden_size
        self.shapes = {"weight_ih": (gates, input_size), "weight_hh": (gates, hidden_size),
                       "share_out": (gates, shared), "share_in": (shared, hidden_size)}
        if set(indices) != set(SPARSE_BLOCKS):
            raise InputError(f"indices must give the blocks {SPARSE_BLOCKS}, got "
                             f"{sorted(indices)}")
        self.rnn = nn.Module()
        for name in SPARSE_BLOCKS:
            idx = torch.as_tensor(np.asarray(indices[name]), dtype=torch.int64)
            rows, cols = self.shapes[name]
            if idx.ndim != 2 or idx.shape[0] != 2:
                raise InputError(f"indices[{name!r}] must have shape (2, nnz), got "
                                 f"{tuple(idx.shape)}")
            if idx.numel() and (int(idx.min()) < 0 or int(idx[0].max()) >= rows
                                or int(idx[1].max()) >= cols):
                raise InputError(f"indices[{name!r}] fall outside its shape {(rows, cols)}")
            self.rnn.register_buffer(f"{name}_indices", idx)
            self.rnn.register_parameter(f"{name}_values",
                                        nn.Parameter(torch.zeros(idx.shape[1])))
        self.rnn.bias_ih_l0 = nn.Parameter(torch.zeros(gates))
        self.rnn.bias_hh_l0 = nn.Parameter(torch.zeros(gates))
        self.h0 = nn.Parameter(torch.zeros(hidden_size))
        if cell == "lstm":
            self.c0 = nn.Parameter(torch.zeros(hidden_size))
        self.readout = nn.Linear(hidden_size, num_outputs)
        self.out_embedding = None
        self._hidden_size = hidden_size

    @property
    def hidden_size(self) -> int:
        return self._hidden_size

    def sparse(self, name: str, layout: str = "csr") -> torch.Tensor:
        """Sparse block ``name`` (`SPARSE_BLOCKS`) as a torch sparse tensor (``layout`` "csr" or
        "coo"; duplicate indices summed)."""
        rnn = self.rnn
        values = getattr(rnn, f"{name}_values")
        coo = torch.sparse_coo_tensor(getattr(rnn, f"{name}_indices"), values.detach(),
                                      self.shapes[name], dtype=values.dtype,
                                      device=values.device, check_invariants=True).coalesce()
        if layout == "coo":
            return coo
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)     # "CSR support is in beta"
            return coo.to_sparse_csr()

    def dense_entries(self) -> int:
        """Entries of the dense W_ih and W_hh (what `dense_blocks` allocates)."""
        gates, H = self.shapes["weight_hh"]
        return gates * (H + self.shapes["weight_ih"][1])

    def dense_weights(self, name: str) -> torch.Tensor:
        """W_ih (``name`` "weight_ih") or W_hh = S + G·F ("weight_hh") as a dense tensor."""
        if name == "weight_ih":
            return self.sparse("weight_ih", "coo").to_dense()
        if name != "weight_hh":
            raise InputError(f"dense_weights takes 'weight_ih' or 'weight_hh', got {name!r}")
        W = self.sparse("weight_hh", "coo").to_dense()
        if self.shapes["share_in"][0]:
            W += torch.sparse.mm(self.sparse("share_out", "coo"),
                                 self.sparse("share_in", "coo").to_dense())
        return W

    def blocks(self, numpy: bool = False) -> RecurrentBlocks:
        """The weights by meaning with W_ih and W_hh densified (as `RecurrentNet.blocks`); only
        for networks whose dense W_ih and W_hh fit in `pdanet.limits` (ResourceError else)."""
        entries = self.dense_entries()
        limits.check(f"densifying a sparse {self.cell} of {self.hidden_size:,} units",
                     8 * entries, "max_bytes", hint="use the sparse blocks (`sparse`)")
        state = {k: v for k, v in self.state_dict().items()
                 if not k.startswith("rnn.") or k in ("rnn.bias_ih_l0", "rnn.bias_hh_l0")}
        with torch.no_grad():
            state["rnn.weight_ih_l0"] = self.dense_weights("weight_ih")
            state["rnn.weight_hh_l0"] = self.dense_weights("weight_hh")
        if numpy:
            state = {k: v.detach().double().cpu().numpy() for k, v in state.items()}
        return recurrent_blocks(state)

    def _check_dtype(self) -> torch.dtype:
        dtype = self.h0.dtype
        if dtype not in (torch.float32, torch.float64):
            raise InputError(f"a sparse recurrent network runs in float32 or float64, not "
                             f"{str(dtype).replace('torch.', '')}: convert it with "
                             "net.with_scale(dtype='float32')")
        return dtype

    def _operators(self) -> tuple:
        """(W, F or None, bias) for one run: W = [S | G | W_ih] as one CSR matrix
        (gates·H, H + R + input), so that a step is one sparse product W·[h; F·h; x]."""
        self._check_dtype()
        parts = [self.sparse("weight_hh", "coo")]
        R = self.shapes["share_in"][0]
        if R:
            parts.append(self.sparse("share_out", "coo"))
        parts.append(self.sparse("weight_ih", "coo"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)     # "CSR support is in beta"
            W = torch.cat(parts, dim=1).coalesce().to_sparse_csr()
        F = self.sparse("share_in") if R else None
        bias = (self.rnn.bias_ih_l0 + self.rnn.bias_hh_l0).detach()
        return W, F, bias

    @staticmethod
    def _pre(ops: tuple, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """Pre-activations by column: x (input, B), h (H, B) → (gates·H, B)."""
        W, F, bias = ops
        v = torch.cat([h, F @ h, x] if F is not None else [h, x])
        z = W @ v
        z += bias[:, None]
        return z

    def preactivations(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """x·W_ihᵀ + h·W_hhᵀ + b_ih + b_hh (…, gates·H) for x (…, input), h (…, H) (as
        `RecurrentNet.preactivations`; not differentiable)."""
        ops = self._operators()
        lead = x.shape[:-1]
        dt = ops[0].dtype
        z = self._pre(ops, x.reshape(-1, x.shape[-1]).T.to(dt), h.reshape(-1, h.shape[-1]).T.to(dt))
        return z.T.reshape(*lead, -1).to(x.dtype)

    def column_logits(self, h: torch.Tensor) -> torch.Tensor:
        """The logits of states stored by column, h (H, N) → (O, N)."""
        return torch.addmm(self.readout.bias[:, None], self.readout.weight, h)

    def initial_state(self, batch: int):
        h0 = self.h0.view(1, 1, -1).expand(1, batch, -1).contiguous()
        if self.cell == "rnn":
            return h0
        return h0, self.c0.view(1, 1, -1).expand(1, batch, -1).contiguous()

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        return self.readout(states)

    def _cell(self, ops: tuple, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None):
        """One step by column: x (input, B), h and c (H, B) → new (h, c)."""
        z = self._pre(ops, x, h)
        if self.cell == "rnn":
            return torch.tanh(z), None
        gi, gf, gg, go = z.chunk(4, dim=0)
        c = torch.sigmoid(gf) * c + torch.sigmoid(gi) * torch.tanh(gg)
        return torch.sigmoid(go) * torch.tanh(c), c

    @torch.no_grad()
    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids (B, T), padding -1 → (states (B, T+1, H), logits (B, T+1, O)) as
        `RecurrentNet.forward` (states: h; padding positions run on symbol 0, as there).
        ResourceError, before anything is allocated, when the states (B·(T+1)·H floats) would
        exceed `pdanet.limits`' ``max_bytes`` (``pn.verify``: lower ``max_batch_steps``)."""
        ids = torch.as_tensor(ids)
        B, T = ids.shape
        H = self.hidden_size
        limits.check(f"running a sparse {self.cell} of {H:,} units on {B:,} strings of "
                     f"{T:,} symbols", 2 * B * (T + 1) * H * self.h0.element_size(),
                     "max_bytes", hint=f"run fewer strings at a time (pn.verify: "
                     f"max_batch_steps ≤ {max(1, limits.current().max_bytes // (2 * H * 4)):,})")
        ops = self._operators()
        states = torch.empty(B, T + 1, H, dtype=self.h0.dtype, device=self.h0.device)
        states[:, 0] = self.h0
        h = self.h0[:, None].expand(H, B).contiguous()
        c = self.c0[:, None].expand(H, B).contiguous() if self.cell == "lstm" else None
        emb = self.embedding.weight
        clamped = ids.clamp(min=0)
        for t in range(T):
            h, c = self._cell(ops, emb[clamped[:, t]].T, h, c)
            states[:, t + 1] = h.T
        return states, self.logits(states)

    @torch.no_grad()
    def step(self, state, symbol_ids: torch.Tensor):
        """One step from an explicit state ((h) or (h, c), each (B, H)); the new state."""
        ops = self._operators()
        x = self.embedding.weight[symbol_ids.clamp(min=0)].T
        if self.cell == "rnn":
            return self._cell(ops, x, state.T, None)[0].T
        h, c = state
        h2, c2 = self._cell(ops, x, h.T, c.T)
        return h2.T, c2.T


__all__ = ["SPARSE_BLOCKS", "RecurrentBlocks", "RecurrentNet", "SparseBlocks", "SparseRecurrentNet",
           "module_state", "recurrent_blocks", "recurrent_state_dict", "sparse_blocks",
           "sparse_state_dict"]

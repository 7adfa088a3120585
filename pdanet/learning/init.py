"""Initialise a learner from a compiled network.

`initialize(model, net)` copies the weights of a compiled real-time recurrent network
(`RecurrentNet`: embedding → one-layer ``nn.RNN``/``nn.LSTM`` → linear readout) into a model of
equal or larger size: a user's `RecurrentNet`, or `LearnerRNN` (the same architecture with a plain
``nn.Linear`` readout). Layout of the result, with h the compiled and H ≥ h the model's units,
e the compiled and E ≥ e the model's embedding width:

- compiled units are units 0..h-1 (in every LSTM gate block i, f, g, o), compiled embedding
  dimensions are 0..e-1, compiled symbols keep their indices, compiled outputs are rows 0..O-1;
- every other weight (extra units, extra embedding dimensions, extra symbols, extra outputs) is
  drawn from N(0, ``extra_std``²);
- with ``isolate=True`` (default) every connection *into* a compiled unit or a compiled output from
  an extra unit or an extra embedding dimension is exactly zero, so the initialised model computes
  exactly what the compiled network computes (up to float rounding) on the machine's symbols;
  connections from compiled units into extra units stay small random. With ``isolate=False`` those
  connections are small random too;
- the initial state ``h0`` (``c0``) is copied; extra entries are zero.

``noise=σ`` adds Gaussian noise of standard deviation σ·max|W| to the copied block of every tensor
W (max over that block); ``scale=β'`` rebuilds the float weights at another saturation scale from
the exact weights (`CompiledNetwork.float_weights`). A factored readout (``readout`` then
``out_embedding``) is multiplied out when the model's readout is one plain ``nn.Linear``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.modules import (
    RecurrentBlocks,
    RecurrentNet,
    recurrent_blocks,
    recurrent_state_dict,
)
from pdanet.errors import CompileError, InputError

_CELLS = {"rnn": "rnn", "elman": "rnn", "tanh": "rnn", "lstm": "lstm"}


class LearnerRNN(RecurrentNet):
    """Embedding → one-layer ``nn.RNN`` (tanh) or ``nn.LSTM`` → ``nn.Linear`` readout.

    ``cell``: "rnn" (or "elman") or "lstm"; ``input_size`` defaults to ``num_symbols`` (as wide as a
    one-hot input). ``forward(ids)`` returns ``(states (B, T+1, H), logits (B, T+1, O))`` like every
    compiled module; ``states`` are the hidden vectors h (not the LSTM cells). The initial state
    ``h0`` (``c0``) is a learnable parameter, zero by default, because compiled networks rarely
    start at zero.
    """

    def __init__(self, cell: str, num_symbols: int, hidden_size: int, num_outputs: int,
                 input_size: int | None = None):
        if cell not in _CELLS:
            raise InputError(f"cell must be one of {sorted(_CELLS)}, got {cell!r}")
        for label, v in (("num_symbols", num_symbols), ("hidden_size", hidden_size),
                         ("num_outputs", num_outputs)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"{label} must be a positive int, got {v!r}")
        super().__init__(_CELLS[cell], num_symbols,
                         num_symbols if input_size is None else input_size, hidden_size,
                         num_outputs)

    @classmethod
    def like(cls, net: CompiledNetwork, hidden_size: int | None = None,
             input_size: int | None = None) -> LearnerRNN:
        """A learner shaped to hold `net`: same cell, symbols, outputs and embedding width;
        ``hidden_size`` defaults to the compiled network's."""
        src = _source(net)
        return cls(src.cell, src.embedding.num_embeddings,
                   src.hidden_size if hidden_size is None else hidden_size, _num_outputs(src),
                   src.embedding.embedding_dim if input_size is None else input_size)


def _source(net: CompiledNetwork) -> RecurrentNet:
    module = getattr(net, "module", None)
    if not isinstance(module, RecurrentNet):
        raise CompileError(
            f"initialize copies real-time Elman/LSTM networks (a RecurrentNet module); "
            f"{getattr(net, 'construction', type(net).__name__)} uses "
            f"{type(module).__name__}. Compile with target='elman' or 'lstm'"
        )
    if getattr(net, "steps_per_symbol", 1) != 1:
        raise CompileError(
            f"{net.construction} takes {net.steps_per_symbol} network steps per symbol; a learner "
            "reads one symbol per step. Use a real-time construction"
        )
    return module


def _num_outputs(module: nn.Module) -> int:
    last = module.out_embedding if getattr(module, "out_embedding", None) is not None \
        else module.readout
    return last.out_features


def _target_parts(model: nn.Module) -> tuple[str, nn.Embedding, nn.Module, nn.Linear, Any]:
    """(cell, embedding, rnn, readout, out_embedding) of a RecurrentNet-like model."""
    emb, rnn, ro = (getattr(model, a, None) for a in ("embedding", "rnn", "readout"))
    if not (isinstance(emb, nn.Embedding) and isinstance(rnn, (nn.RNN, nn.LSTM))
            and isinstance(ro, nn.Linear)):
        raise InputError(
            f"initialize needs a model with `embedding` (nn.Embedding), `rnn` (nn.RNN or nn.LSTM) "
            f"and `readout` (nn.Linear), such as LearnerRNN or RecurrentNet; got "
            f"{type(model).__name__}"
        )
    if rnn.num_layers != 1 or rnn.bidirectional or getattr(rnn, "proj_size", 0):
        raise CompileError("the model's rnn must be one unidirectional layer without projection")
    if isinstance(rnn, nn.RNN) and rnn.nonlinearity != "tanh":
        raise CompileError("the model's nn.RNN must use nonlinearity='tanh'")
    cell = "lstm" if isinstance(rnn, nn.LSTM) else "rnn"
    return cell, emb, rnn, ro, getattr(model, "out_embedding", None)


def initialize(model: nn.Module, net: CompiledNetwork, noise: float = 0.0, scale: Any = None,
               seed: int | None = None, extra_std: float = 0.01, isolate: bool = True
               ) -> nn.Module:
    """Copy `net` into `model` (in place; returns it). See the module docstring for the layout.

    Raises CompileError when the model cannot hold the network (another cell type, fewer hidden
    units, embedding dimensions, symbols or outputs, no learnable ``h0``/``c0`` where the compiled
    initial state is nonzero, a factored model readout too narrow to copy the readout into).
    """
    if not (isinstance(noise, (int, float)) and noise >= 0):
        raise InputError(f"noise must be a number ≥ 0 (a multiple of each tensor's max |weight|), "
                         f"got {noise!r}")
    if not (isinstance(extra_std, (int, float)) and extra_std >= 0):
        raise InputError(f"extra_std must be a number ≥ 0, got {extra_std!r}")
    src = _source(net)
    cell, emb, rnn, ro, out_emb = _target_parts(model)
    if cell != src.cell:
        raise CompileError(f"the compiled network is an {src.cell!r} network; the model's cell is "
                           f"{cell!r}. Build the model with cell={src.cell!r}")
    w = recurrent_blocks(net.float_weights(scale, torch.float64))
    h, H = src.hidden_size, rnn.hidden_size
    e, E = src.embedding.embedding_dim, emb.embedding_dim
    s, S = src.embedding.num_embeddings, emb.num_embeddings
    o = _num_outputs(src)
    _need("hidden units", h, H, "hidden_size")
    _need("embedding dimensions", e, E, "input_size")
    _need("symbols", s, S, "num_symbols")
    _need("outputs", o, _num_outputs(model), "num_outputs")

    gen = torch.Generator().manual_seed(int(seed) if seed is not None else
                                        int(torch.randint(0, 2**31 - 1, ()).item()))
    dtype = next(model.parameters()).dtype

    def rand(shape) -> torch.Tensor:
        return torch.randn(shape, generator=gen, dtype=torch.float64) * extra_std

    def noisy(block: torch.Tensor, whole: torch.Tensor | None = None) -> torch.Tensor:
        if noise == 0 or block.numel() == 0:
            return block
        peak = float((block if whole is None else whole).abs().max())
        return block + torch.randn(block.shape, generator=gen, dtype=torch.float64) * noise * peak

    def place(big_shape, block: torch.Tensor, zero_rows: slice | None, zero_cols: slice | None):
        """A (rand) tensor of big_shape holding `block` top-left; with isolate, the given
        rows × extra columns (into compiled units) are set to zero."""
        out = rand(big_shape)
        idx = tuple(slice(0, n) for n in block.shape)
        out[idx] = noisy(block)
        if isolate and zero_rows is not None and zero_cols is not None:
            out[zero_rows, zero_cols] = 0.0
        return out

    gates = 4 if cell == "lstm" else 1

    def matrix(block: torch.Tensor, cols_src: int, cols_dst: int) -> torch.Tensor:
        """A recurrence matrix (gates·H, cols_dst) holding each gate's compiled rows."""
        big = rand((gates * H, cols_dst))
        for g in range(gates):
            big[g * H:g * H + h, :cols_src] = noisy(block[g * h:(g + 1) * h], block)
            if isolate:
                big[g * H:g * H + h, cols_src:] = 0.0       # extra dims/units → compiled units
        return big

    def vector(block: torch.Tensor) -> torch.Tensor:
        big = rand((gates * H,))
        for g in range(gates):
            big[g * H:g * H + h] = noisy(block[g * h:(g + 1) * h], block)
        return big

    have = recurrent_blocks({**dict(model.named_parameters()), **dict(model.named_buffers())})

    def initial(part: str, block: torch.Tensor | None, present: Any) -> torch.Tensor | None:
        """The model's initial ``part`` (h or c): the compiled one, then zeros; None when the
        model has none (allowed only when the compiled one is zero)."""
        name = f"{part}0"
        if block is None:
            return None
        if not isinstance(present, torch.Tensor):
            if bool(block.abs().max() > 0):
                raise CompileError(f"the compiled network starts from a nonzero {name}; the model "
                                   f"has no `{name}` parameter. Use LearnerRNN")
            return None
        big = torch.zeros(H, dtype=torch.float64)
        big[:h] = noisy(block)
        return big

    # embedding: (S, E); extra dimensions of compiled symbols feed only extra units (zeroed below)
    new = recurrent_state_dict(RecurrentBlocks(
        embedding=place((S, E), w.embedding, None, None),
        weight_ih=matrix(w.weight_ih, e, E), weight_hh=matrix(w.weight_hh, h, H),
        bias_ih=vector(w.bias_ih), bias_hh=vector(w.bias_hh),
        h0=initial("h", w.h0, have.h0),
        c0=initial("c", w.c0, have.c0) if cell == "lstm" else None,
        **_readout(w, src, ro, out_emb, h, H, o, place)))
    with torch.no_grad():
        params = dict(model.named_parameters())
        params.update(dict(model.named_buffers()))
        for name, value in new.items():
            params[name].copy_(value.to(dtype))
    return model


def _need(what: str, have: int, got: int, arg: str) -> None:
    if got < have:
        raise CompileError(f"the compiled network has {have} {what}; the model has only {got}. "
                           f"Build the model with {arg} ≥ {have}")


def _readout(w: RecurrentBlocks, src, ro: nn.Linear, out_emb, h: int, H: int, o: int, place
             ) -> dict[str, torch.Tensor]:
    """Readout blocks for the model (`RecurrentBlocks` fields): dense (O×H) or factored
    (code r) as the model is built."""
    O_model = ro.out_features if out_emb is None else out_emb.out_features
    F, f0 = w.readout_weight, w.readout_bias                         # (r, h), (r,)
    if src.out_embedding is not None:
        Oe, oe = w.out_weight, w.out_bias                            # (o, r), (o,)
    else:
        Oe, oe = torch.eye(o, dtype=torch.float64), torch.zeros(o, dtype=torch.float64)
    rows = slice(0, o)
    if out_emb is None:                                               # multiply the factors out
        return {"readout_weight": place((O_model, H), Oe @ F, rows, slice(h, H)),
                "readout_bias": place((O_model,), Oe @ f0 + oe, None, None)}
    r, R = F.shape[0], ro.out_features
    if R < r:
        raise CompileError(f"the compiled readout goes through a code of width {r} (or is dense "
                           f"with {r} outputs); the model's factored readout has width {R}. Build "
                           f"the model with readout_code ≥ {r}, or without readout_code")
    return {"readout_weight": place((R, H), F, slice(0, r), slice(h, H)),
            "readout_bias": place((R,), f0, None, None),
            "out_weight": place((O_model, R), Oe, rows, slice(r, R)),
            "out_bias": place((O_model,), oe, None, None)}


__all__ = ["LearnerRNN", "initialize"]

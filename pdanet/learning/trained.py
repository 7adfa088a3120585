"""Check a trained model against the machine it was initialised from.

`as_network(model, net)` wraps a model that `initialize` filled from the compiled network `net`
(compiled units first) as a `CompiledNetwork`: the model computes, `net`'s decoder reads the
compiled units of the model's state, and `net`'s reader reads the model's logits. `pn.verify` on
the result then reports the first string and step where training moved the model away from the
machine, or that it still agrees.

For a stack network (`StackRNN`, from `stack_learner`) the model's state [h; r; n; c] is cut to
the compiled layout: the compiled controller units, the compiled code bits of each reading slot,
and the memory's read-back (cell count and each cell's symbol, read by thresholding every value
bit at 1/2 — the nearest 0/1 vector — with −2, a symbol no machine has, for a vector that is no
symbol's code). The controller state decodes to the nearest configuration: the state of the most
active unit when some unit is positive, else dead.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.controllers import StackRNN
from pdanet.constructions.modules import RecurrentNet
from pdanet.errors import InputError


class _CompiledView(nn.Module):
    """The model's forward, with states cut to the compiled units (and, for a network whose
    decoder reads LSTM cells, the cells recomputed from the model's own gates)."""

    def __init__(self, model: RecurrentNet, units: int, with_cells: bool):
        super().__init__()
        self.model, self.units, self.with_cells = model, units, with_cells

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        states, logits = self.model(ids)
        h = states[..., : self.units]
        if not self.with_cells:
            return h, logits
        H = self.model.hidden_size
        x = self.model.embedding(torch.as_tensor(ids).clamp(min=0))
        pre = self.model.preactivations(x, states[:, :-1])  # gates (i, f, g, o) at every step
        i, f, g = torch.sigmoid(pre[..., :H]), torch.sigmoid(pre[..., H:2 * H]), \
            torch.tanh(pre[..., 2 * H:3 * H])
        c = self.model.c0.expand(ids.shape[0], H)
        cells = [c]
        for t in range(ids.shape[1]):                      # c_t = f c_{t-1} + i g
            c = f[:, t] * c + i[:, t] * g[:, t]
            cells.append(c)
        cells_t = torch.stack(cells, dim=1)[..., : self.units]
        return torch.cat([h, cells_t], dim=-1), logits


class _StackView(nn.Module):
    """A larger `StackRNN`'s forward, with states and logits cut to the compiled layout."""

    def __init__(self, model: StackRNN, src: StackRNN):
        super().__init__()
        self.model = model
        h, H = src.h0.shape[0], model.h0.shape[0]
        m, M = src.width, model.width
        keep = list(range(h)) + [H + k * M + i for k in range(src.store.slots) for i in range(m)]
        self.register_buffer("keep", torch.tensor(keep, dtype=torch.long), persistent=False)
        self.tail, self.outputs = H + model.reading_size, src.out_h.out_features

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        states, logits = self.model(ids)
        cut = torch.cat([states.index_select(-1, self.keep), states[..., self.tail:]], -1)
        return cut, logits[..., :self.outputs]


def as_network(model: nn.Module, net: CompiledNetwork) -> CompiledNetwork:
    """`net` with `model` in place of its module (see the module docstring)."""
    if isinstance(net.module, StackRNN):
        src = net.module
        if not isinstance(model, StackRNN) or type(model.store) is not type(src.store):
            raise InputError(f"{net.construction} runs a {type(src.store).__name__}; as_network "
                             f"needs a StackRNN with the same store (stack_learner(net)), got "
                             f"{type(model).__name__}")
        for what, have, got in (("hidden units", src.h0.shape[0], model.h0.shape[0]),
                                ("code bits", src.width, model.width),
                                ("outputs", src.out_h.out_features, model.out_h.out_features)):
            if got < have:
                raise InputError(f"the model has {got} {what}, fewer than the {have} compiled ones")
        return replace(net, module=_StackView(model, src))
    if not isinstance(model, RecurrentNet):
        raise InputError(f"as_network needs a RecurrentNet-style model, got {type(model).__name__}")
    src = net.module
    if not isinstance(src, RecurrentNet) or src.cell != model.cell:
        raise InputError(f"{net.construction} and the model have different cells")
    if model.hidden_size < src.hidden_size:
        raise InputError(
            f"the model has {model.hidden_size} units, fewer than the {src.hidden_size} compiled ones")
    with torch.no_grad():
        width = src(torch.zeros((1, 1), dtype=torch.long))[0].shape[-1]
    with_cells = width == 2 * src.hidden_size
    return replace(net, module=_CompiledView(model, src.hidden_size, with_cells))


__all__ = ["as_network"]

"""The model of a protocol and its three initialisations.

``model`` names a paper model (`pdanet.models`: compiled with ``pn.compile(machine,
target="stack_rnn", model=NAME)``; ``hao_buffered`` with target ``"buffered_stack_rnn"``) or a
plain recurrent network (``"lstm"``, ``"elman"``: `pdanet.learning.LearnerRNN` of the compiled
network's size). Every initialisation has the compiled network's architecture and size:

- ``"random"``: the paper's random initialisation — every torch layer re-drawn by its own
  ``reset_parameters`` (PyTorch's defaults, as the modules' constructors draw them), the learned
  initial state h_0 from N(0, 0.1²) for the Grefenstette models (§3.4: "initialised randomly")
  and zero elsewhere (c_0 always zero);
- ``"compiled"``: the compiled weights (the network provably computes the task's machine);
- ``"compiled+noise"``: the compiled weights, each moved by U(−ρ·δ*, ρ·δ*) with δ* the certified
  weight-noise tolerance (`pdanet.learning.initialize` with ``noise=ρ``); available where
  `pdanet.learning.initialize` certifies a tolerance for the module (elsewhere `InputError`
  says why).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from pdanet.constructions.base import CompiledNetwork
from pdanet.errors import InputError, PdanetError
from pdanet.experiments.protocols import INITS

PLAIN = ("lstm", "elman")


def compile_model(machine, model: str) -> CompiledNetwork:
    """The compiled network of `model` for `machine` (see the module docstring). A
    `pdanet.models.suzgun.NextSetMachine` (a DPDA's next-symbol sets, Suzgun et al. 2019
    Table 1) compiles its DPDA with ``readout="next_set"`` (the Suzgun stack models)."""
    from pdanet.constructions import compile as compile_net
    from pdanet.models.suzgun import MODELS as SUZGUN_STACK_MODELS
    from pdanet.models.suzgun import NextSetMachine

    if isinstance(machine, NextSetMachine):
        if model not in SUZGUN_STACK_MODELS:
            raise InputError(f"next-symbol set targets compile into {SUZGUN_STACK_MODELS} "
                             f"(readout='next_set'), not {model!r}")
        return compile_net(machine.machine, target="stack_rnn", model=model, readout="next_set")
    if model in PLAIN:
        return compile_net(machine, target=model)
    if model == "hao_buffered":
        return compile_net(machine, target="buffered_stack_rnn", model=model)
    return compile_net(machine, target="stack_rnn", model=model)


def _randomise(model: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    grefenstette = type(model).__name__.startswith("Grefenstette")
    with torch.no_grad():
        for sub in model.modules():
            if sub is not model and hasattr(sub, "reset_parameters"):
                sub.reset_parameters()
        for sub in model.modules():
            if hasattr(sub, "reset_parameters") and sub is not model:
                continue
            for name, prm in sub.named_parameters(recurse=False):
                if name == "h0" and grefenstette:
                    prm.copy_(torch.randn(prm.shape, dtype=prm.dtype) * 0.1)
                else:
                    prm.zero_()
    return model


def build(net: CompiledNetwork, model: str, init: str, noise: float = 0.0, seed: int = 0
          ) -> nn.Module:
    """A trainable module for `net` initialised by `init` (see the module docstring), in
    training mode."""
    from pdanet.learning.init import LearnerRNN, initialize

    if init not in INITS:
        raise InputError(f"init must be one of {INITS}, got {init!r}")
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not noise >= 0:
        raise InputError(f"noise must be a number ≥ 0 (a fraction of the certified tolerance), "
                         f"got {noise!r}")
    if init != "compiled+noise" and noise:
        raise InputError(f"noise={noise} applies to init='compiled+noise' only")
    if model in PLAIN:
        torch.manual_seed(seed)
        learner = LearnerRNN.like(net)
        if init != "random":
            initialize(learner, net, noise=float(noise), seed=seed)
        return learner.train()
    module = copy.deepcopy(net.module).float()
    if init == "random":
        return _randomise(module, seed).train()
    if init == "compiled+noise":
        try:
            initialize(module, net, noise=float(noise), seed=seed)
        except PdanetError as exc:
            raise InputError(f"init='compiled+noise' needs a certified weight tolerance for "
                             f"{type(module).__name__} on this task, which "
                             f"pdanet.learning.initialize does not give ({type(exc).__name__}: "
                             f"{exc}); use init='compiled'") from None
    return module.train()


__all__ = ["PLAIN", "build", "compile_model"]

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

``noise=ρ`` perturbs every copied weight by an independent draw from U(−ρ·δ*, ρ·δ*), where δ* is
the network's certified weight-noise tolerance (`weight_tolerance`): for ρ < 1 the initialised
model provably computes what the compiled network computes; ρ ≥ 1 gives no guarantee.
``peak_noise=σ`` is the older, uncertified scaling: Gaussian noise of standard deviation
σ·max|W| on the copied block of every tensor W (at β = 77 even σ = 0.01 breaks most networks).
``scale=β'`` rebuilds the float weights at another saturation scale from the exact weights
(`CompiledNetwork.float_weights`). A factored readout (``readout`` then ``out_embedding``) is
multiplied out when the model's readout is one plain ``nn.Linear``.

Compiled stack networks (target ``"stack_rnn"``, module `StackRNN`) are copied into a `StackRNN`
with the same store (`stack_learner` builds one): at least as many hidden units, symbols and
outputs, and store values at least as wide (the compiled codes padded with zero bits). Compiled
units, symbols, outputs and code bits come first; extra controller units are small random, with
``isolate`` no extra unit or extra reading bit feeds a compiled unit, a memory action, a compiled
code bit of the pushed value or a compiled output; the pushed value's extra bits start at zero
(every stored value keeps its code), so the model runs the compiled network's memory operations.
The compiled readout's logits are only ±1/2 (they are not scaled by β), so the task's own
cross-entropy is far from zero there and Adam moves the readout even at the compiled weights;
``readout_scale=γ`` multiplies the copied ``out_h``/``out_r`` by γ (the same outputs; with γ = β
the loss is ≈ 0 and fine-tuning keeps the network exact).

The source papers' own models (``pn.compile(machine, target=…, model=NAME)``, every NAME of
`pdanet.constructions.table.MODELS`) are copied into a module of the same class and sizes
(`paper_learner(net)` builds a fresh one; another class, other parameter shapes or another
symbol-code table: CompileError), every weight as compiled plus U(−ρδ*, ρδ*) for ``noise=ρ``
except the initial state; their δ* is `pdanet.learning.paper_init`'s bounded-length proof.

Weight-noise tolerance (`weight_tolerance`). δ* is the largest δ for which a proof covers every
network obtained by changing each weight of the compiled network by at most δ (absolutely):

- Elman and LSTM (`RecurrentNet`): the box induction of `pdanet.verify.certify.box` (the same
  explored configurations, centres, kernel model and readout check) with every pre-activation
  enclosure widened by δ·L_i, L_i = ‖x‖₁ + E·δ + Σ_j max|h_j| + 2 + ‖W_ih[i]‖₁ (the largest L1
  norm of unit i's inputs, its two biases, and the embedding's own noise through W_ih), every
  logit by δ·(Σ_j max|h_j| + 1) per readout layer, and the initial state moved by δ; δ* is found
  by bisection, and the δ returned is one whose induction was checked. It is cautious for LSTMs
  whose cells are held by a forget gate at 1 (Dyck-(2, 3), Hewitt et al.: δ* ≈ 6e-5 while noise
  first breaks the network near 100·δ*): any noise makes such a cell drift, so an all-lengths
  proof only tolerates what rounding absorbs (``min_length`` accepts a bounded-length proof).
- Stack RNNs (Grefenstette, Joulin–Mikolov and Suzgun memories, Elman controller; float32): at the
  compiled weights every controller pre-activation is a half-integer times β (|βz| ≥ 32,
  checked over every one-unit state, input and reading code), and tanh rounds to exactly ±1 for
  |βz| ≥ θ (`pdanet.verify.intervals.saturation`). A controller unit's pre-activation moves by at
  most δ·L (L its input L1 norm as above, plus ‖W_hh[i]‖₁ for the noise of h0) plus rounding, so
  for δ < (32 − θ − rounding)/L every state is again exactly the compiled ±1 vector; the memory
  heads then see exact inputs. The memory heads (``actions``, ``values``) are affine maps with no
  squashing: any change of their weights leaves strengths off {0, 1}, and ghost strengths
  accumulate with the length, so no length-free tolerance exists for them — their tolerance is 0
  (``fixed``) and ``initialize`` adds no noise there. The logits must keep the readout margin
  (computed over every one-unit state and reading): δ·(H + 1 + r) below it (half of it for an
  argmax readout). A linear controller's embedding is its state: fixed too.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.controllers import _CONTROLLER_KEYS, ControllerBlocks, StackRNN
from pdanet.constructions.modules import (
    RecurrentBlocks,
    RecurrentNet,
    recurrent_blocks,
    recurrent_state_dict,
    unkeyed,
)
from pdanet.errors import CertificationError, CompileError, InputError
from pdanet.learning.paper_init import (
    initialize_paper,
    is_paper_network,
    paper_learner,
    paper_tolerance,
)
from pdanet.verify import intervals as iv
from pdanet.verify.certify.box import _U64 as U64
from pdanet.verify.certify.box import Boxes, _Pass
from pdanet.verify.certify.core import Certificate, FailingCase, begin, overflow_free
from pdanet.verify.certify.induction import prove

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
               seed: int | None = None, extra_std: float = 0.01, isolate: bool = True,
               peak_noise: float = 0.0, tolerance: WeightTolerance | None = None,
               readout_scale: float = 1.0) -> nn.Module:
    """Copy `net` into `model` (in place; returns it). See the module docstring for the layout
    and the noise: ``noise=ρ`` draws each copied weight's change from U(−ρ·δ*, ρ·δ*) (δ* from
    ``tolerance``, else `weight_tolerance` of the network at ``scale``); ``peak_noise=σ`` is the
    uncertified Gaussian σ·max|W| scaling. ``readout_scale=γ`` (stack networks) multiplies the
    copied readout (``out_h``, ``out_r``) by γ > 0: the same outputs, logits γ times larger.

    Raises CompileError when the model cannot hold the network (another cell type or store, fewer
    hidden units, embedding dimensions, symbols, outputs or code bits, no learnable ``h0``/``c0``
    where the compiled initial state is nonzero, a factored model readout too narrow to copy the
    readout into); InputError for a bad argument.
    """
    for label, v in (("noise", noise), ("peak_noise", peak_noise), ("extra_std", extra_std)):
        if isinstance(v, bool) or not (isinstance(v, (int, float)) and v >= 0):
            what = {"noise": " (a fraction ρ of the weight tolerance δ*)",
                    "peak_noise": " (a multiple of each tensor's max |weight|)"}.get(label, "")
            raise InputError(f"{label} must be a number ≥ 0{what}, got {v!r}")
    if noise and peak_noise:
        raise InputError("give `noise` (relative to the certified tolerance) or `peak_noise` "
                         "(relative to max |W|), not both")
    if tolerance is not None and not isinstance(tolerance, WeightTolerance):
        raise InputError(f"tolerance must be a WeightTolerance (weight_tolerance(net)), got "
                         f"{type(tolerance).__name__}")
    if isinstance(readout_scale, bool) or not (isinstance(readout_scale, (int, float))
                                               and 0 < readout_scale < math.inf):
        raise InputError(f"readout_scale must be a finite number > 0, got {readout_scale!r}")
    if is_paper_network(net):
        if scale is not None or peak_noise or readout_scale != 1:
            raise InputError("a paper model is copied as compiled: scale, peak_noise and "
                             "readout_scale do not apply (give noise=ρ, relative to δ*)")
        return initialize_paper(model, net, noise, seed, tolerance)
    if isinstance(getattr(net, "module", None), StackRNN):
        return _initialize_stack(model, net, noise, scale, seed, extra_std, isolate, peak_noise,
                                 tolerance, float(readout_scale))
    if readout_scale != 1:
        raise InputError("readout_scale applies to stack networks, whose readout is unscaled; an "
                         "Elman/LSTM readout is already at the saturation scale β")
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

    gen = _generator(seed)
    dtype = next(model.parameters()).dtype
    bound = _noise_bound(net, noise, scale, tolerance)

    def rand(shape) -> torch.Tensor:
        return torch.randn(shape, generator=gen, dtype=torch.float64) * extra_std

    def noisy(block: torch.Tensor, whole: torch.Tensor | None = None) -> torch.Tensor:
        if block.numel() == 0:
            return block
        if peak_noise:
            peak = float((block if whole is None else whole).abs().max())
            return block + torch.randn(block.shape, generator=gen,
                                       dtype=torch.float64) * peak_noise * peak
        return _bounded_noise(block, bound, gen, dtype)

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


def _generator(seed: int | None) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) if seed is not None else
                                         int(torch.randint(0, 2**31 - 1, ()).item()))


def _noise_bound(net: CompiledNetwork, noise: float, scale: Any,
                 tolerance: WeightTolerance | None) -> float:
    """ρ·δ*: the largest change of a weight that ``noise=ρ`` draws."""
    if not noise:
        return 0.0
    if tolerance is None:
        tolerance = weight_tolerance(net if scale is None else net.with_scale(scale))
    return float(noise) * tolerance.delta


def _bounded_noise(block: torch.Tensor, bound: float, gen: torch.Generator,
                   dtype: torch.dtype) -> torch.Tensor:
    """`block` (float64) with each entry moved by U(−bound, bound), so that in the model's
    ``dtype`` every entry is within ``bound`` of the unperturbed one (an entry that rounding
    would carry past the bound keeps its value)."""
    if bound <= 0:
        return block
    base = block.to(dtype).double()
    step = (torch.rand(block.shape, generator=gen, dtype=torch.float64) * 2 - 1) * bound
    new = (base + step).to(dtype).double()
    return torch.where((new - base).abs() <= bound, new, base)


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

# --- stack networks -----------------------------------------------------------------------------
def stack_learner(net: CompiledNetwork, hidden_size: int | None = None,
                  code_width: int | None = None, num_symbols: int | None = None,
                  num_outputs: int | None = None) -> StackRNN:
    """A `StackRNN` shaped to hold the compiled stack network `net`: the same store (a new object
    of its class and depth) and controller kind, at least its hidden units, symbols and outputs
    (defaults: the compiled sizes), and store values ``code_width`` bits wide (default: the
    compiled code width; the compiled codes padded with zero bits)."""
    mod = net.module if isinstance(getattr(net, "module", None), StackRNN) else None
    if mod is None:
        raise CompileError(f"stack_learner needs a compiled stack network (target='stack_rnn'); "
                           f"{getattr(net, 'construction', type(net).__name__)} is not one")
    codes = np.asarray(mod.codes.codes)
    K, O = mod.embedding.num_embeddings, mod.out_h.out_features
    H = mod.h0.shape[0]
    sizes = {"hidden_size": (hidden_size, H), "code_width": (code_width, codes.shape[1]),
             "num_symbols": (num_symbols, K), "num_outputs": (num_outputs, O)}
    got = {}
    for label, (v, have) in sizes.items():
        v = have if v is None else v
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{label} must be a positive int, got {v!r}")
        _need({"hidden_size": "hidden units", "code_width": "code bits",
               "num_symbols": "symbols", "num_outputs": "outputs"}[label], have, v, label)
        got[label] = v
    M = got["code_width"]
    binary = not (codes.sum(1)[:-1] == 1).all()
    if binary and M > 20 and M > codes.shape[1]:
        raise CompileError(f"binary store codes are read through a 2^width table up to 20 bits; "
                           f"code_width={M} is too wide. Use code_width ≤ 20")
    wide = np.zeros((codes.shape[0], M), dtype=codes.dtype)
    wide[:, :codes.shape[1]] = codes
    if mod.linear and got["hidden_size"] < got["num_symbols"]:
        raise CompileError("a linear controller's state is its input's embedding; give "
                           "hidden_size ≥ num_symbols")
    store = type(mod.store)() if mod.depth is None else type(mod.store)(mod.depth)
    return StackRNN(got["num_symbols"], got["hidden_size"], store, wide, got["num_outputs"],
                    mod.linear)


def _initialize_stack(model: nn.Module, net: CompiledNetwork, noise: float, scale: Any,
                      seed: int | None, extra_std: float, isolate: bool, peak_noise: float,
                      tolerance: WeightTolerance | None, readout_scale: float) -> nn.Module:
    src: StackRNN = net.module
    if not isinstance(model, StackRNN):
        raise InputError(f"a compiled stack network is copied into a StackRNN (stack_learner(net) "
                         f"builds one); got {type(model).__name__}")
    if type(model.store) is not type(src.store) or model.depth != src.depth:
        raise CompileError(f"the compiled network runs a {type(src.store).__name__} "
                           f"(depth {src.depth}); the model runs a {type(model.store).__name__} "
                           f"(depth {model.depth}). Build the model with stack_learner(net)")
    if model.linear != src.linear:
        raise CompileError(f"the compiled controller is {'linear' if src.linear else 'Elman'}; the "
                           "model's is not. Build the model with stack_learner(net)")
    codes, mcodes = np.asarray(src.codes.codes), np.asarray(model.codes.codes)
    m, M = codes.shape[1], mcodes.shape[1]
    _need("code bits", m, M, "code_width")
    if mcodes.shape[0] != codes.shape[0] or not (np.array_equal(mcodes[:, :m], codes)
                                                 and not mcodes[:, m:].any()):
        raise CompileError("the model's store codes are not the compiled codes padded with zero "
                           "bits; build the model with stack_learner(net, code_width=...)")
    K, Km = src.embedding.num_embeddings, model.embedding.num_embeddings
    h, H = src.h0.shape[0], model.h0.shape[0]
    o, O = src.out_h.out_features, model.out_h.out_features
    _need("hidden units", h, H, "hidden_size")
    _need("symbols", K, Km, "num_symbols")
    _need("outputs", o, O, "num_outputs")
    slots = src.store.slots
    e = src.embedding.embedding_dim                   # K, or h for a linear controller
    w = vars(unkeyed(ControllerBlocks, _CONTROLLER_KEYS, net.float_weights(scale, torch.float64)))
    w = {k: v for k, v in w.items() if v is not None}
    for name in ("out_h_weight", "out_h_bias", "out_r_weight"):
        w[name] = w[name] * readout_scale
    gen = _generator(seed)
    dtype = model.h0.dtype
    tol = None
    if noise:
        tol = tolerance or weight_tolerance(net if scale is None else net.with_scale(scale))
    bound = float(noise) * tol.delta if tol is not None else 0.0
    fixed = set(tol.fixed) if tol is not None else set()

    def rand(shape) -> torch.Tensor:
        return torch.randn(shape, generator=gen, dtype=torch.float64) * extra_std

    def noisy(name: str, block: torch.Tensor) -> torch.Tensor:
        if block.numel() == 0 or name in fixed:
            return block
        if peak_noise:
            return block + torch.randn(block.shape, generator=gen, dtype=torch.float64) \
                * peak_noise * float(block.abs().max())
        return _bounded_noise(block, bound, gen, dtype)

    def bits(n_src: int, n_dst: int, off_src: int = 0, off_dst: int = 0) -> list:
        """(source index, model index) pairs of reading/value bits, slot by slot."""
        return [(off_src + k * n_src + i, off_dst + k * n_dst + i)
                for k in range(slots) for i in range(min(n_src, m))]

    new: dict[str, torch.Tensor] = {}
    # embedding: compiled block top-left
    E_dst = model.embedding.embedding_dim
    emb = rand((Km, E_dst))
    emb[:K, :e] = noisy("embedding", w["embedding"])
    new["embedding"] = emb
    if not src.linear:
        Kd = model.embedding.embedding_dim
        wih = rand((H, Kd + M * slots))
        block = noisy("weight_ih", w["weight_ih"])
        if isolate:
            wih[:h] = 0.0
        wih[:h, :K] = block[:, :K]
        for i_src, i_dst in bits(m, M, K, Kd):
            wih[:h, i_dst] = block[:, i_src]
        new["weight_ih"] = wih
        whh = rand((H, H))
        whh[:h, :h] = noisy("weight_hh", w["weight_hh"])
        if isolate:
            whh[:h, h:] = 0.0
        new["weight_hh"] = whh
        for name in ("bias_ih", "bias_hh"):
            b = rand((H,))
            b[:h] = noisy(name, w[name])
            new[name] = b
    h0 = torch.zeros(H, dtype=torch.float64)
    h0[:h] = noisy("h0", w["h0"])
    new["h0"] = h0

    def head(name: str, rows_src: list, rows_total: int, extra_rows: str) -> None:
        """A head (rows_total, H) and bias: compiled rows where `rows_src` maps them."""
        W = rand((rows_total, H)) if extra_rows == "random" else \
            torch.zeros((rows_total, H), dtype=torch.float64)
        b = rand((rows_total,)) if extra_rows == "random" else \
            torch.zeros(rows_total, dtype=torch.float64)
        Wb, bb = noisy(f"{name}_weight", w[f"{name}_weight"]), noisy(f"{name}_bias", w[f"{name}_bias"])
        for r_src, r_dst in rows_src:
            W[r_dst] = 0.0 if isolate else W[r_dst]
            W[r_dst, :h] = Wb[r_src]
            b[r_dst] = bb[r_src]
        new[f"{name}_weight"], new[f"{name}_bias"] = W, b

    nA = len(src.channels)
    head("actions", [(i, i) for i in range(nA)], nA, "zero")
    head("values", bits(m, M), M * slots, "zero")   # extra bits: zero, every value keeps its code
    head("out_h", [(i, i) for i in range(o)], O, "random")
    wr = rand((O, M * slots))
    block = noisy("out_r_weight", w["out_r_weight"])
    if isolate:
        wr[:o] = 0.0
    for i_src, i_dst in bits(m, M):
        wr[:o, i_dst] = block[:, i_src]
    new["out_r_weight"] = wr
    keyed_new = StackRNN.state_dict_of(ControllerBlocks(**{
        f: new.get(f) for f in ControllerBlocks.__dataclass_fields__}))
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, value in keyed_new.items():
            params[name].copy_(value.to(dtype))
    return model


# --- weight-noise tolerance ---------------------------------------------------------------------
@dataclass(frozen=True)
class WeightTolerance:
    """δ* of a compiled network (module docstring): changing every weight by at most ``delta``
    (absolutely, each independently), except the weight blocks named in ``fixed`` (fields of the
    module's ``blocks()``, or parameter names for a paper model; ``fixed_parameters`` spells them
    as parameter names, for
    ``fit(freeze=...)``), which must not change, leaves a network that computes exactly what the compiled one computes — at every
    length (``max_length`` None) or for ``max_length`` steps. ``argument`` says why (which proof,
    which margin, which input norm L). ``float(t)`` is ``delta``."""

    delta: float
    fixed: tuple[str, ...]
    max_length: int | None
    argument: str
    dtype: str
    details: dict = field(default_factory=dict, compare=False)

    def __float__(self) -> float:
        return self.delta

    @property
    def fixed_parameters(self) -> tuple[str, ...]:
        """``fixed`` as the parameter names of a `StackRNN` or a paper model (empty for other
        networks)."""
        if not self.fixed:
            return ()
        if "parameters" in self.details:          # a paper model: already parameter names
            return tuple(self.details["parameters"])
        blocks = ControllerBlocks(**{f: (True if f in self.fixed else None)
                                     for f in ControllerBlocks.__dataclass_fields__})
        return tuple(StackRNN.state_dict_of(blocks))


class _NoisyBoxes(Boxes):
    """The box family of `pdanet.verify.certify.box` for every network within δ of the compiled
    weights: each pre-activation enclosure widened by δ·L_i, each logit by δ·(Σ|h| + 1) per
    readout layer, the initial state moved by δ (module docstring)."""

    delta = 0.0

    @property
    def s0(self) -> np.ndarray:
        s0 = self._s0
        return s0 + np.where(s0 >= self.E0, 1.0, -1.0) * self.delta

    @s0.setter
    def s0(self, value: np.ndarray) -> None:
        self._s0 = value

    def step(self, R: np.ndarray, kernel: str, stage: str):
        # `Boxes.step` with the enclosure of every pre-activation widened by δ·L_i
        E, W, H, dtype, d = self.E, self.W, self.H, self.dtype, self.delta
        R = R[:, 0]
        S = E.shape[1]
        u = iv.unit_roundoff(dtype)
        W_hh, W_ih, b, emb = W.weight_hh, W.weight_ih, W.bias, W.embedding
        n_terms = W_hh.shape[1] + W_ih.shape[1] + 2
        zrad = np.abs(W_hh) @ R[:H]
        hmax = np.abs(E[:, :H]).max(axis=0) + R[:H]
        absWhh_h = np.abs(W_hh) @ hmax
        err_coef = iv.gamma(n_terms, u) + iv.gamma(n_terms + 2, U64)
        row_ih = np.abs(W_ih).sum(1)
        dev, drift, settled = np.zeros(S), np.zeros(S), np.zeros(S)
        cases = 0
        zc_all = E[:, :H] @ W_hh.T
        for a in range(len(self.machine.alphabet)):
            tgt = self.abst.node_succ[:, a]
            live = tgt >= 0
            if not live.any():
                continue
            rows = np.nonzero(live)[0]
            x = emb[a]
            widen = d * (np.abs(x).sum() + emb.shape[1] * d + hmax.sum() + 2.0) + d * row_ih
            absum = absWhh_h + np.abs(W_ih) @ np.abs(x) + np.abs(b) + widen
            err = err_coef * absum + n_terms * iv.tiny(dtype)
            err = np.where(overflow_free(absum, err_coef, dtype), err, np.nan)
            mid = zc_all[rows] + (W_ih @ x + b)[None, :]
            rad = (zrad + err + widen)[None, :] + iv.gamma(2, U64) * np.abs(mid)
            z = iv.Interval(mid - rad, mid + rad)
            T = E[tgt[live]]
            cases += len(rows)
            out = self.image(z, rows, T, R, kernel, settled, drift)
            d_all = np.maximum(out.hi - T, T - out.lo)
            dev = np.maximum(dev, d_all.max(axis=0))        # NaN propagates: the pass fails
        return _Pass(dev[:, None], drift, settled, {}, cases)

    def _readout_rows(self, rows: np.ndarray, R_h: np.ndarray):
        W, dtype, d = self.W, self.dtype, self.delta
        h = iv.Interval.around(self.E[rows, :self.H], R_h)
        u = iv.unit_roundoff(dtype)

        def noisy(Wm: np.ndarray, x: iv.Interval, bias: np.ndarray) -> iv.Interval:
            z = iv.affine(Wm, x, bias, dtype)
            w = d * (x.mag.sum(1, keepdims=True) + 1.0) * (1 + 2 * iv.gamma(Wm.shape[1] + 2, u))
            return iv.Interval(z.lo - w, z.hi + w)

        z = noisy(W.readout_weight, h, W.readout_bias)
        if W.out_weight is not None:  # factored, or multiplied out by `initialize`: both covered
            z = noisy(W.out_weight, z, W.out_bias)
            flat = noisy(W.out_weight @ W.readout_weight, h,
                         W.out_weight @ W.readout_bias + W.out_bias)
            z = iv.Interval(np.minimum(z.lo, flat.lo), np.maximum(z.hi, flat.hi))
        if not (np.isfinite(z.lo).all() and np.isfinite(z.hi).all()):
            return _readout_failure(), math.nan
        expected = self.fields["output"][rows]
        if self.machine.output_kind in ("accept", "next_set"):
            exp = expected.reshape(len(rows), -1).astype(bool)
            slack = np.where(exp, z.lo, -z.hi)
        else:
            y = np.where(expected < 0, z.lo.shape[1] - 1, expected)
            r_idx = np.arange(len(rows))
            others = z.hi.copy()
            others[r_idx, y] = -np.inf
            slack = z.lo[r_idx, y] - others.max(axis=1)
        worst = float(np.min(slack))
        return (None if worst > 0 else _readout_failure()), worst


def _readout_failure() -> FailingCase:
    return FailingCase("readout", "a perturbed readout", None, -1, "logit", (math.nan, math.nan),
                       (0.0, math.inf))


def _recurrent_tolerance(net: CompiledNetwork, rel_tol: float, min_length: int | None
                         ) -> WeightTolerance:
    machine = net.machine
    run = begin(machine, net, None, "ulp")
    if isinstance(run, Certificate):
        raise CertificationError(f"no weight tolerance: {run.failing}")
    fam = _NoisyBoxes(machine, run.net, 200_000, 1024, None)
    bad = fam.rejection()
    if bad is not None:
        raise CertificationError(f"no weight tolerance: the box centres are not what the "
                                 f"network's decoder reads ({bad})")
    run = replace(run, configs=len(fam.E))

    def proof(delta: float) -> Certificate | None:
        fam.delta = delta
        cert = prove(fam, run, None, retry=True)
        if not cert.ok:
            return None
        if min_length is None:
            return cert if cert.all_lengths or not base.all_lengths else None
        return cert if cert.all_lengths or (cert.max_length or 0) >= min_length else None

    fam.delta = 0.0
    base = prove(fam, run, None, retry=True)
    if not base.ok:
        raise CertificationError(f"no weight tolerance: {net.construction} does not certify "
                                 f"for {machine!r} even without noise ({base.failing})")
    lo, lo_cert, hi = 0.0, base, 1.0
    while (c := proof(hi)) is not None and hi < 1e6:
        lo, lo_cert, hi = hi, c, hi * 4
    if lo == 0.0:
        for _ in range(60):
            hi /= 4
            if (c := proof(hi)) is not None:
                lo, lo_cert, hi = hi, c, hi * 4
                break
    while lo > 0 and hi - lo > rel_tol * lo:
        mid = (lo + hi) / 2
        if (c := proof(mid)) is not None:
            lo, lo_cert = mid, c
        else:
            hi = mid
    reach = ("every length" if lo_cert.all_lengths else f"{lo_cert.max_length:,} steps")
    return WeightTolerance(
        delta=lo, fixed=(), max_length=None if lo_cert.all_lengths else lo_cert.max_length,
        dtype=str(net.dtype).replace("torch.", ""),
        argument=(f"box induction (pdanet.verify.certify.box, kernel model {lo_cert.kernel}, "
                  f"cap ε = {lo_cert.eps:g}) over {len(fam.E)} explored configurations with "
                  f"every pre-activation widened by δ·L_i and every logit by δ·(Σ|h| + 1): "
                  f"agreement with the machine for {reach} at δ = {lo:.4g}"),
        details={"certificate": lo_cert})


def _ideal_readings(codes: np.ndarray, slots: int) -> np.ndarray:
    """Every reading the memory can give: per slot, a symbol's code or 0 (empty)."""
    one = np.unique(np.concatenate([codes, np.zeros((1, codes.shape[1]))]).astype(np.float64),
                    axis=0)
    return np.array([np.concatenate(c) for c in itertools.product(one, repeat=slots)])


def _stack_tolerance(net: CompiledNetwork) -> WeightTolerance:
    mod: StackRNN = net.module
    if net.dtype != torch.float32:
        raise CertificationError(
            f"the stack RNN's tolerance rests on tanh rounding to exactly ±1, checked for float32 "
            f"kernels only; {net.construction} runs in {net.dtype}. Compile with "
            "dtype=torch.float32")
    B = mod.blocks(numpy=True)
    u = iv.unit_roundoff(torch.float32)
    H = B.h0.shape[0]
    emb = B.embedding
    readings = _ideal_readings(np.asarray(mod.codes.codes), mod.store.slots)   # (Rn, r)
    r = readings.shape[1]
    fixed = ["actions_weight", "actions_bias", "values_weight", "values_bias"]
    if mod.linear:
        fixed.append("embedding")
        states = np.concatenate([B.h0[None], emb])
    else:
        states = np.concatenate([B.h0[None], 2 * np.eye(H) - 1])              # one unit on
    bounds, notes = [], []
    if not mod.linear:
        K, Ein = emb.shape
        Wx, Wr = B.weight_ih[:, :Ein], B.weight_ih[:, Ein:]
        b = B.bias_ih + B.bias_hh
        # every (one-unit state, input, reading): the compiled pre-activations (H,)
        z = (states @ B.weight_hh.T)[:, None, None, :] + (emb @ Wx.T)[None, :, None, :] \
            + (readings @ Wr.T)[None, None, :, :] + b
        zmin = np.abs(z).reshape(-1, H).min(0)
        sat = iv.saturation(torch.float32, upto=2 * float(np.abs(z).max()) + 64)
        A = np.abs(B.weight_ih).sum(1) + np.abs(B.weight_hh).sum(1) + np.abs(b)
        L = (np.abs(emb).sum(1).max() + 1 + np.abs(Wx).sum(1) + r + H + 2
             + np.abs(B.weight_hh).sum(1))
        rnd = iv.gamma(Ein + r + H + 5, u) * (2 * A + L)
        d_ctrl = float(((zmin - sat.tanh - rnd) / L).min())
        bounds += [d_ctrl, 1.0 / (K * Ein)]
        notes.append(f"controller: |βz| ≥ {zmin.min():g} at the compiled weights, tanh is "
                     f"exactly ±1 beyond {sat.tanh:.4g}, L = {L.max():g}")
    logits = (states @ B.out_h_weight.T + B.out_h_bias)[:, None, :] \
        + (readings @ B.out_r_weight.T)[None, :, :]
    logits = logits.reshape(-1, logits.shape[-1])
    if logits.shape[1] == 1:                       # accept: the sign of the one logit
        need = np.abs(logits[:, 0]).min()
    else:                                          # the argmax: half the gap to the runner-up
        top2 = np.sort(logits, axis=1)[:, -2:]
        need = (top2[:, 1] - top2[:, 0]).min() / 2
    L_out = float((np.abs(B.out_h_weight).sum(1) + H + 1 + r).max())
    rnd_out = iv.gamma(H + r + 3, u) * (np.abs(logits).max() + L_out)
    bounds.append(float((need - rnd_out) / L_out))
    notes.append(f"readout: margin {need:g}, L = {L_out:g}")
    delta = max(0.0, min(bounds))
    return WeightTolerance(
        delta=delta, fixed=tuple(fixed), max_length=None, dtype="float32",
        argument=("exact saturation (module docstring): every controller state stays the "
                  "compiled ±1 vector, so memory heads, memory and readings are bit-identical, "
                  "and each logit keeps its sign/argmax; " + "; ".join(notes)
                  + "; the memory heads have no tolerance (affine, unsquashed)"),
        details={"bounds": bounds})


def weight_tolerance(net: CompiledNetwork, rel_tol: float = 0.05,
                     min_length: int | None = None, max_length: int = 8) -> WeightTolerance:
    """δ*: the largest per-weight perturbation under which `net` provably computes what it
    computes now (module docstring, "Weight-noise tolerance"). Elman/LSTM networks: by a box
    induction with weight noise (bisection to ``rel_tol``); stack RNNs: from their exact
    saturation. ``min_length`` (Elman/LSTM): accept a proof that covers at least that many steps
    (LSTM cells held by a forget gate at 1 drift under any noise, so an all-lengths proof only
    tolerates noise that rounding absorbs); None: as many as the noiseless certificate covers.
    The source papers' models (``pn.compile(…, model=NAME)``): a bounded-length proof over every
    live string of length ≤ ``max_length`` (`pdanet.learning.paper_init`; no all-lengths
    argument), with the initial state fixed.
    CompileError for another network; CertificationError when no proof applies."""
    if min_length is not None and (isinstance(min_length, bool) or not isinstance(min_length, int)
                                   or min_length < 1):
        raise InputError(f"min_length must be None or a positive int, got {min_length!r}")
    if not (isinstance(rel_tol, (int, float)) and 0 < rel_tol < 1):
        raise InputError(f"rel_tol must be a number in (0, 1), got {rel_tol!r}")
    module = getattr(net, "module", None)
    if is_paper_network(net):
        t = paper_tolerance(net, max_length=max_length, rel_tol=float(rel_tol))
        return WeightTolerance(delta=t.delta, fixed=t.fixed, max_length=t.max_length,
                               argument=t.argument, dtype="float32", details=t.details)
    if isinstance(module, StackRNN):
        return _stack_tolerance(net)
    _source(net)
    return _recurrent_tolerance(net, float(rel_tol), min_length)


__all__ = ["LearnerRNN", "WeightTolerance", "initialize", "paper_learner", "stack_learner",
           "weight_tolerance"]

"""`CompiledNetwork`, exact weights, and the `compile` registry.

A compiled network pairs a machine with a torch module whose parameters were set by hand. The
module's ``forward(ids)`` takes a (B, T) LongTensor of symbol indices (padding -1) and returns
``(states, logits)``: ``states`` of shape (B, T+1, S) is the network's state before any input
(index 0) and after each symbol, and ``logits`` of shape (B, T+1, O) the readout at those times.

Exact weights: ``weights[name]`` is an `ExactWeight` — an integer array over one common
denominator, flagged ``scaled`` when it is multiplied by the saturation scale β. Names are the
module's ``state_dict`` keys, so the float module is exactly ``{name: w.to_float(β)}`` and a network
can be rebuilt at another β or dtype without recompiling (`CompiledNetwork.with_scale`).
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp
import torch

from pdanet.automata.base import Machine
from pdanet.constructions.abstraction import Abstraction
from pdanet.errors import CompileError, InputError

BETA = sp.Symbol("beta")  # the saturation scale as a symbol (`ExactWeight.to_sympy`)
ONE = sp.Integer(1)


@dataclass(frozen=True)
class ExactWeight:
    """An exact weight block: ``numer / denom`` (times β when ``scaled``)."""

    numer: np.ndarray
    denom: int = 1
    scaled: bool = True

    @classmethod
    def of(cls, values: Any, scaled: bool = True) -> ExactWeight:
        """From ints, Fractions or sympy Rationals (any nested sequence or array). Numerators
        are int64 when they fit, else Python ints (an object array): a common denominator of
        exact float logarithms is a large power of two."""
        arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
        if arr.dtype != object and np.issubdtype(arr.dtype, np.integer):
            return cls(arr.astype(np.int64), 1, scaled)
        flat = [Fraction(str(v)) if isinstance(v, sp.Basic) else Fraction(v) for v in arr.ravel()]
        denom = math.lcm(1, *(f.denominator for f in flat))
        ints = [f.numerator * (denom // f.denominator) for f in flat]
        fits = all(-(2**63) <= v < 2**63 for v in ints)
        numer = np.array(ints, dtype=np.int64 if fits else object).reshape(arr.shape)
        return cls(numer, denom, scaled)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.numer.shape)

    def to_float(self, beta: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        scale = float(beta) if self.scaled else 1.0
        if self.numer.dtype == object:   # each entry rounded once from its exact value
            exact = [float(Fraction(int(v), self.denom)) for v in self.numer.ravel()]
            values = np.array(exact, dtype=np.float64).reshape(self.numer.shape) * scale
        else:
            values = self.numer.astype(np.float64) * (scale / self.denom)
        return torch.as_tensor(values, dtype=dtype)

    def to_sympy(self, beta: Any = BETA) -> sp.Matrix:
        """A sympy matrix (for small blocks): the exact rationals, times β when scaled."""
        if self.numer.size > 100_000:
            raise InputError(f"block of {self.numer.size} entries is too large for sympy")
        mat = sp.Matrix(np.atleast_2d(self.numer).tolist()) / self.denom
        return mat * beta if self.scaled else mat

    def rationals(self) -> np.ndarray:
        """Object array of Fractions (exact, unscaled)."""
        return np.vectorize(lambda v: Fraction(int(v), self.denom), otypes=[object])(self.numer)


def _ids_tensor(ids: torch.Tensor | np.ndarray) -> torch.Tensor:
    return ids if isinstance(ids, torch.Tensor) else torch.as_tensor(np.asarray(ids))


DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64,
                                  "float16": torch.float16, "bfloat16": torch.bfloat16}


def as_dtype(dtype: Any, what: str = "dtype") -> torch.dtype:
    """A floating torch dtype from a torch dtype or one of the names in `DTYPES` ("float32", …);
    InputError naming `what` for anything else."""
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in DTYPES:
        return DTYPES[dtype.removeprefix("torch.")]
    raise InputError(f"{what}={dtype!r} is not a floating dtype; give one of "
                     f"{', '.join(DTYPES)} (as a string or a torch dtype)")


def as_scale(value: Any, what: str = "scale") -> sp.Rational:
    """The saturation scale β as an exact positive rational.

    Accepted: integers, floats, Fractions, numpy and sympy numbers that are finite and
    > 0 (a float is taken at its exact value's simplest rational, as `sympy.nsimplify` does).
    Refused with InputError naming `what`: booleans, strings, zero, negatives, inf and NaN.
    """
    if isinstance(value, (bool, np.bool_, sp.logic.boolalg.Boolean)):
        raise InputError(f"{what}={value!r} is a boolean; give a positive number such as 77")
    if isinstance(value, sp.Basic):
        if not (value.is_number and value.is_real and value.is_finite):
            raise InputError(f"{what}={value} must be a finite positive real number")
        beta = sp.nsimplify(value, rational=True)
    elif isinstance(value, numbers.Integral):
        beta = sp.Integer(int(value))
    elif isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise InputError(f"{what}={value!r} must be finite and > 0")
        beta = sp.nsimplify(value, rational=True)
    else:
        raise InputError(f"{what}={value!r} is not a number; give a positive number such as 77 "
                         "or sympy.Rational(153, 2)")
    if not isinstance(beta, sp.Rational) or not beta > 0:
        raise InputError(f"{what}={value!r} must be finite and > 0 (it multiplies every scaled "
                         "weight)")
    try:
        finite = math.isfinite(float(beta))
    except OverflowError:
        finite = False
    if not finite:
        raise InputError(f"{what}={value!r} is too large for floating-point weights")
    return beta


def _finite_floats(floats: Mapping[str, torch.Tensor], beta: Any, dtype: torch.dtype
                   ) -> dict[str, torch.Tensor]:
    """`floats`, after checking that no weight overflowed `dtype` (InputError naming the block)."""
    for name, t in floats.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise InputError(f"weight block {name!r} overflows {_dtype_name(dtype)} at scale β = "
                             f"{beta}: use a smaller scale or a wider dtype such as float64")
    return dict(floats)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# integer options of the constructions -> their smallest value (None always means the default)
INT_OPTIONS: dict[str, int] = {"max_dense": 1, "low": 1, "window": 1, "max_length": 1,
                               "hidden_size": 1, "neg": 1}
BOOL_OPTIONS = ("reachable_only", "sparse")


def check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate the common construction options by name (InputError naming the option):
    ``scale`` (see `as_scale`; None = the construction's choice), integer options (`INT_OPTIONS`:
    an int, not a bool, at least the minimum; None = default) and flags (`BOOL_OPTIONS`: a bool;
    None = default). Returns the options with ``scale`` made exact."""
    out = dict(options)
    if out.get("scale") is not None:
        out["scale"] = as_scale(out["scale"])
    for name, low in INT_OPTIONS.items():
        v = out.get(name)
        if v is None:
            continue
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise InputError(f"option {name}={v!r} must be an integer (None for the default)")
        if v < low:
            raise InputError(f"option {name}={v!r} must be at least {low} (None for the default)")
        out[name] = int(v)
    for name in BOOL_OPTIONS:
        v = out.get(name)
        if v is not None and not isinstance(v, (bool, np.bool_)):
            raise InputError(f"option {name}={v!r} must be True or False")
    return out


@dataclass(frozen=True)
class CompiledNetwork:
    """A machine and the network compiled from it (see the module docstring for the contract).

    ``decoder(states)`` maps a float state array (B, T+1, S) to the machine's configuration fields
    (the abstraction map; the same field names as `Machine.run_batch`), and ``reader(logits)`` maps
    the readout logits to the machine's output format. ``bound`` is the unit count as a sympy
    expression of ``params``; ``margin`` is c in the readout guarantee (allowed logits ≥ β·c,
    disallowed ≤ -β·c). ``encoder(fields)`` is the inverse direction, used by certification: the
    ideal full recurrent state (…, S) of configurations given as machine fields at one time step
    (for an LSTM, S = 2H: ``[h; c]``).

    ``abstraction`` (`pdanet.constructions.abstraction`) says what the hidden units mean: it is
    what certifiers, plots and decoders read. ``unit_labels`` is ``abstraction.labels`` (when the
    abstraction has no labels, the given ``unit_labels`` become its labels). ``info`` is
    free-form descriptive metadata, for display only. ``compiled_from`` is the machine that
    ``machine`` was converted from before compiling (e.g. a DPDA compiled to ``ns_rnn`` through
    its weighted PDA), which `pdanet.verify` and `pdanet.certify` accept in its place; None
    when ``machine`` is what the user compiled.
    """

    machine: Machine
    module: torch.nn.Module
    target: str
    method: str
    hidden_units: int
    bound: sp.Expr
    params: Mapping[str, int]
    weights: Mapping[str, ExactWeight]
    scale: sp.Rational
    decoder: Callable[[np.ndarray], dict[str, np.ndarray]]
    reader: Callable[[np.ndarray], np.ndarray]
    margin: sp.Rational = ONE
    steps_per_symbol: int = 1
    scale_argument: str = ""
    unit_labels: Sequence[str] = ()
    info: Mapping[str, Any] = field(default_factory=dict)
    abstraction: Abstraction = field(default_factory=Abstraction)
    compiled_from: Machine | None = None

    def __post_init__(self) -> None:
        labels, given = tuple(self.abstraction.labels), tuple(self.unit_labels)
        if given and not labels:
            object.__setattr__(self, "abstraction", replace(self.abstraction, labels=given))
        else:
            object.__setattr__(self, "unit_labels", labels)

    @property
    def construction(self) -> str:
        return f"{self.target}/{self.method}"

    @property
    def bound_value(self) -> int:
        return int(self.bound.subs({sp.Symbol(k): v for k, v in self.params.items()}))

    @property
    def dtype(self) -> torch.dtype:
        return next(iter(self.module.state_dict().values())).dtype

    def encode(self, strings: Sequence) -> tuple[torch.Tensor, np.ndarray]:
        """Symbol indices (B, T) padded with -1, and lengths."""
        ids, lengths = self.machine.encode(strings)
        return torch.as_tensor(ids), lengths

    @torch.no_grad()
    def forward(self, ids: torch.Tensor | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """The module on (B, T) ids; for T = 0 (only empty strings) the initial states and
        readout, shape (B, 1, …)."""
        return _run_module(self.module, _ids_tensor(ids))

    @torch.no_grad()
    def forward_decoded(self, ids: torch.Tensor | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """(states, logits) where the states may be only the part that `decode` reads: the
        module's own ``forward_decoded`` when it has one (the Dyck LSTMs return the cells c
        alone, where the stack lives), else `forward`. What the verifier runs."""
        fast = getattr(self.module, "forward_decoded", None)
        return _run_module(fast or self.module, _ids_tensor(ids))

    def decode(self, states: torch.Tensor | np.ndarray) -> dict[str, np.ndarray]:
        if isinstance(states, torch.Tensor):
            states = states.detach().cpu().numpy()
        return self.decoder(states)

    def readout(self, logits: torch.Tensor | np.ndarray) -> np.ndarray:
        if isinstance(logits, torch.Tensor):
            logits = logits.detach().cpu().numpy()
        return self.reader(logits)

    def run(self, string) -> dict[str, np.ndarray]:
        """Decoded configurations and outputs of one string (a str or a sequence of symbols),
        for inspection; the empty string gives the initial configuration and output."""
        if string is None or isinstance(string, (bytes, bytearray, numbers.Number)):
            raise InputError(f"net.run takes one string (a str or a list of symbols), got "
                             f"{type(string).__name__}")
        ids, _ = self.encode([string])
        states, logits = self.forward(ids)
        fields = self.decode(states)
        fields["output"] = self.readout(logits)
        return {k: v[0] for k, v in fields.items()}

    def float_weights(self, scale: Any = None, dtype: torch.dtype | None = None
                      ) -> dict[str, torch.Tensor]:
        beta = self.scale if scale is None else as_scale(scale)
        dtype = self.dtype if dtype is None else as_dtype(dtype)
        return _finite_floats({name: w.to_float(beta, dtype) for name, w in self.weights.items()},
                              beta, dtype)

    def with_scale(self, scale: Any = None, dtype: torch.dtype | None = None) -> CompiledNetwork:
        """The same construction with another saturation scale β (finite, > 0; see `as_scale`)
        and/or dtype (see `as_dtype`)."""
        beta = self.scale if scale is None else as_scale(scale)
        dtype = self.dtype if dtype is None else as_dtype(dtype)
        module = copy.deepcopy(self.module).to(dtype)
        module.load_state_dict(self.float_weights(beta, dtype), strict=True)
        return replace(self, module=module, scale=beta)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.module.state_dict()

    def summary(self) -> str:
        return (
            f"{self.construction} for {self.machine!r}: {self.hidden_units} units "
            f"(bound {self.bound} = {self.bound_value}), β = {self.scale}, margin {self.margin}"
        )


def load_exact(module: torch.nn.Module, weights: Mapping[str, ExactWeight], scale: Any,
               dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """Set every parameter and buffer of `module` from exact weights (all keys must match)."""
    module = module.to(dtype)
    floats = _finite_floats({name: w.to_float(scale, dtype) for name, w in weights.items()},
                            scale, dtype)
    expected = set(module.state_dict())
    if set(floats) != expected:
        raise CompileError(
            f"exact weights do not cover the module: missing {sorted(expected - set(floats))}, "
            f"extra {sorted(set(floats) - expected)}"
        )
    module.load_state_dict(floats, strict=True)
    for p in module.parameters():
        p.requires_grad_(True)
    return module


def _run_module(fn: Callable[[torch.Tensor], Any], ids: torch.Tensor) -> Any:
    """``fn(ids)``; for ids of shape (B, 0) the first time step of a run on one padding symbol
    (index 0 of every module's output is the state before any input)."""
    if ids.ndim == 2 and ids.shape[1] == 0:
        states, logits = fn(torch.full((ids.shape[0], 1), -1, dtype=torch.long))
        return states[:, :1], logits[:, :1]
    return fn(ids)


__all__ = ["CompiledNetwork", "ExactWeight", "as_dtype", "as_scale", "check_options", "load_exact"]

"""Exact recurrent language models of probabilistic finite-state machines.

A deterministic PFSA (`pdanet.automata.probabilistic.PFSA`), or a depth-bounded probabilistic
DPDA through its explicit PFSA (`BoundedPDPDA.to_pfsa`), becomes an Elman or LSTM network whose
softmax output after every prefix is the machine's next-symbol distribution over Σ ∪ {EOS}
(Svete & Cotterell 2023: Heaviside/saturated Elman LMs are deterministic PFSAs; their Minsky
construction reads the log-probabilities out of one-hot state units).

The recurrent part is Minsky's construction exactly as for DFAs (`dfa_rnn.compile_minsky` /
`dfa_rnn.compile_lstm` on `PFSA.to_dfa`, transitions of probability 0 left out): one unit per
(state entered, last symbol) pair, at most one on; the start is its own unit, or "every unit
off" when no transition enters it (`dfa_rnn.PairUnits`). The readout is factored through one
*code* unit per PFSA state that a unit can stand for (``readout`` then ``out_embedding``):

- code z_q = [the current state is q], read linearly from the units: for Elman
  z_q = Σ_{u enters q} (h_u + 1)/2 (units are ±1), for the LSTM z_q = Σ_{u enters q} h_u / t
  with t = tanh(1), the value of an on unit (off units are ≈ 0); the state "every unit off"
  stands for has z = 1 - Σ_u (…);
- logits ℓ_o = Σ_q z_q · L[q, o] with L[q, o] = ln p(o | q) for possible symbols, and the
  finite *floor* F for impossible ones (probability 0; the machine has no such move).

The floor is the integer F = ⌊ln(floor_mass / (|Σ| + 1))⌋, so that in every state the softmax
puts total mass < ``floor_mass`` on impossible symbols and every possible symbol's
log-probability is off by < floor_mass nats from the floor alone. The logarithms are exact
rationals within 2⁻¹²⁰ of ln p (computed with mpmath), so the float weights are each rounded
once from them. In the ideal (saturated) run every code is exactly 0 or 1, so the logits are
the rounded L[q, ·]: the network's log-softmax equals ln p up to the dtype's rounding.

β (the saturation scale of the recurrent part) defaults to a value at which both float32 and
float64 kernels saturate in the ideal run — Elman: every pre-activation has magnitude ≥ β =
max(24, ⌈ln(4L - 1)⌉) and tanh(x) rounds to ±1 beyond |x| ≈ 19.1 (float64); LSTM: every gate's
|pre-activation| ≥ β/4 with β = max(160, ⌈4 ln(48L - 1)⌉), and σ(x) rounds to 1 beyond x ≈ 36.7
— so that the units are exactly their ideal values and the log-likelihood matches to rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy as sp
import torch

from pdanet.automata.probabilistic import PFSA, BoundedPDPDA, ProbabilisticDPDA
from pdanet.constructions.abstraction import RecurrentUnits
from pdanet.constructions.base import (
    CompiledNetwork,
    ExactWeight,
    as_dtype,
    as_scale,
    load_exact,
)
from pdanet.constructions.dfa_rnn import compile_lstm, compile_minsky, pair_units
from pdanet.constructions.modules import RecurrentNet, recurrent_blocks, recurrent_state_dict
from pdanet.errors import CompileError, InputError, UnboundedStackError

#: the default bound on the softmax mass of impossible symbols in any state
DEFAULT_FLOOR_MASS = 1e-20
ELMAN_MIN_SCALE = 24
LSTM_MIN_SCALE = 160
LOG_BITS = 120


@dataclass(frozen=True, eq=False)
class LMUnits(RecurrentUnits):
    """A Minsky language-model network: the `RecurrentUnits` of the DFA construction, and a
    readout through one code unit per PFSA state (``code_states[c]`` = the PFSA state index of
    code c). ``floor`` is the logit F of impossible symbols, ``floor_mass`` the bound it gives
    on their softmax mass; ``on_value`` is the value of an on hidden unit that the codes divide
    by (1 for Elman, read as (h + 1)/2; tanh(1) for the LSTM)."""

    floor: int = -50
    floor_mass: float = DEFAULT_FLOOR_MASS
    code_states: tuple[int, ...] = ()
    on_value: Fraction = Fraction(1)


@dataclass(frozen=True)
class SoftmaxReader:
    """Logits (…, |Σ|+1) → the next-symbol distribution (float64 softmax), EOS last: what the
    machine's ``output`` field holds."""

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        z = np.asarray(logits, dtype=np.float64)
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)


def exact_log(p: Fraction | float, bits: int = LOG_BITS) -> Fraction:
    """ln p (p > 0) as a Fraction within 2^-bits · max(1, |ln p|) of the true value (mpmath
    at ``bits`` + 20 bits of precision; a float p is taken at its exact value)."""
    f = Fraction(p)
    if f <= 0:
        raise InputError(f"ln of {p!r}: the probability must be positive")
    with mpmath.workprec(bits + 20):
        v = mpmath.log(mpmath.mpf(f.numerator) / mpmath.mpf(f.denominator))
        sign, man, exp, _ = v._mpf_
    return (-1) ** int(sign) * Fraction(int(man)) * (Fraction(2) ** int(exp))


def lm_floor(symbols: int, floor_mass: float) -> int:
    """F = ⌊ln(floor_mass / (symbols + 1))⌋: then (symbols + 1)·e^F ≤ floor_mass."""
    if isinstance(floor_mass, bool) or not isinstance(floor_mass, (int, float)) or \
            not (0 < float(floor_mass) < 1):
        raise InputError(f"floor_mass={floor_mass!r} must be a number in (0, 1): the largest "
                         "softmax mass allowed on impossible symbols")
    return math.floor(math.log(float(floor_mass)) - math.log(symbols + 1))


def as_pfsa(machine: Any, target: str) -> tuple[PFSA, Any]:
    """(the PFSA to compile, the machine it came from or None): a PFSA as is, a
    `BoundedPDPDA` through ``to_pfsa()``; UnboundedStackError for an unbounded
    ProbabilisticDPDA, CompileError for anything else."""
    if isinstance(machine, PFSA):
        return machine, None
    if isinstance(machine, BoundedPDPDA):
        return machine.to_pfsa(), machine
    if isinstance(machine, ProbabilisticDPDA):
        raise UnboundedStackError(
            f"{machine!r} has an unbounded stack: bound its depth with `.bounded(m)` (overflow="
            f"'refuse' or 'renormalise') before compiling to an {target} language model")
    raise CompileError(f"the {target} language-model construction takes a PFSA or a bounded "
                       f"ProbabilisticDPDA, got {type(machine).__name__}")


def compile_lm_elman(machine: Any, dtype: torch.dtype = torch.float32, scale: Any = None,
                     floor_mass: float = DEFAULT_FLOOR_MASS, max_dense: int | None = None
                     ) -> CompiledNetwork:
    """Minsky's Elman language model of a PFSA or bounded PDPDA (module docstring): a tanh
    ``nn.RNN`` of P ≤ Q·|Σ| units whose softmax readout is the machine's next-symbol
    distribution; ``floor_mass`` bounds the softmax mass of impossible symbols."""
    return _compile(machine, "rnn", dtype, scale, floor_mass, max_dense)


def compile_lm_lstm(machine: Any, dtype: torch.dtype = torch.float32, scale: Any = None,
                    floor_mass: float = DEFAULT_FLOOR_MASS, max_dense: int | None = None
                    ) -> CompiledNetwork:
    """Minsky's LSTM language model of a PFSA or bounded PDPDA (module docstring; the units and
    gates of `dfa_rnn.compile_lstm`, the initial on unit at tanh(1) like every on unit)."""
    return _compile(machine, "lstm", dtype, scale, floor_mass, max_dense)


def _compile(machine: Any, cell: str, dtype: torch.dtype, scale: Any, floor_mass: float,
             max_dense: int | None) -> CompiledNetwork:
    target = "elman" if cell == "rnn" else "lstm"
    dtype = as_dtype(dtype)
    pfsa, source = as_pfsa(machine, target)
    floor = lm_floor(len(pfsa.alphabet), floor_mass)
    dfa = pfsa.to_dfa()
    build = compile_minsky if cell == "rnn" else compile_lstm
    base = build(dfa, dtype=torch.float64, scale=None, max_dense=max_dense)
    least = ELMAN_MIN_SCALE if cell == "rnn" else LSTM_MIN_SCALE
    beta = as_scale(scale) if scale is not None else sp.Max(base.scale, least)
    units = pair_units(dfa)
    N, k = units.size, len(pfsa.alphabet)
    codes = sorted(set(units.tau[units.tau >= 0].tolist()))
    if units.off >= 0 and units.off not in codes:
        codes.append(units.off)
    C = len(codes)
    on = Fraction(1) if cell == "rnn" else Fraction(math.tanh(1.0))
    R1 = np.full((C, N), Fraction(0), dtype=object)
    r1 = np.full(C, Fraction(0), dtype=object)
    for c, q in enumerate(codes):
        if q == units.off:       # "every unit off": z = 1 - Σ_u value_u
            R1[c, :] = Fraction(-1, 2) if cell == "rnn" else -1 / on
            r1[c] = 1 - Fraction(N, 2) if cell == "rnn" else Fraction(1)
            continue
        enter = units.tau == q
        R1[c, enter] = Fraction(1, 2) if cell == "rnn" else 1 / on
        r1[c] = Fraction(int(enter.sum()), 2) if cell == "rnn" else Fraction(0)
    L = np.full((k + 1, C), Fraction(floor), dtype=object)
    for c, q in enumerate(codes):
        for o in range(k + 1):
            p = pfsa._rows[q, o]
            if p != 0:
                L[o, c] = exact_log(p)
    blocks = recurrent_blocks(base.weights)
    h0 = blocks.h0
    if cell == "lstm" and units.initial >= 0:  # the initial on unit at tanh(1), as every on unit
        start = np.full(N, Fraction(0), dtype=object)
        start[units.initial] = on
        h0 = ExactWeight.of(start, scaled=False)
    weights = recurrent_state_dict(replace(
        blocks, h0=h0,
        readout_weight=ExactWeight.of(R1, scaled=False),
        readout_bias=ExactWeight.of(r1, scaled=False),
        out_weight=ExactWeight.of(L, scaled=False),
        out_bias=ExactWeight(np.zeros(k + 1, dtype=np.int64), 1, scaled=False)))
    module = load_exact(RecurrentNet(cell, k, k, N, k + 1, readout_code=C), weights, beta, dtype)
    argument = (
        f"{base.scale_argument.rsplit(' Chosen', 1)[0]} Chosen β = {beta} (at least {least}, so "
        "that the float kernels saturate to the ideal unit values in the ideal run). Readout: "
        f"one code per PFSA state (exactly 0/1 in the ideal run), logits ln p(· | state) with "
        f"the floor F = {floor} for impossible symbols ((|Σ|+1)·e^F ≤ {floor_mass:g}).")
    abst = LMUnits(labels=tuple(base.abstraction.labels), cell=cell, floor=floor,
                   floor_mass=float(floor_mass), code_states=tuple(int(q) for q in codes),
                   on_value=on)
    info = dict(base.info)
    info.update({"floor": floor, "floor_mass": float(floor_mass), "code_units": C,
                 "pfsa_states": pfsa.num_states})
    return CompiledNetwork(
        machine=pfsa, module=module, target=target, method="minsky_lm", hidden_units=N,
        bound=base.bound, params=dict(base.params), weights=weights, scale=beta,
        decoder=base.decoder, reader=SoftmaxReader(), margin=base.margin,
        scale_argument=argument, abstraction=abst, info=info, compiled_from=source)


__all__ = ["DEFAULT_FLOOR_MASS", "LMUnits", "SoftmaxReader", "as_pfsa", "compile_lm_elman",
           "compile_lm_lstm", "exact_log", "lm_floor"]

"""Compile a weighted real-time PDA into an RNS-RNN (DuSell & Chiang 2021, §2.4, §3).

The controller is an input embedding: step t's action tensor depends only on the symbol read, so
the embedding row of symbol a holds ``log Δ[a][q, x → r, v]`` = log w of the transition
``(q, x) —a / w→ (r, v)`` (RNS-RNN actions are unnormalised weights, §3.1: Δ = exp(·)) and the
declared constant ``-L`` (``neg``) where there is no transition. The padding row (symbol -1) is
the identity: ``replace x by x`` with weight 1 in every (state, top). `NondeterministicStack`
then runs Lang's algorithm, so its reading at every step is the machine's reading.

Error bound of the ``-L`` stand-in for log 0: each run through a missing transition gets an extra
factor ≤ e^{-L}; with K = Q(2G+1) moves per configuration and transition weights in
[w_min, w_max], the spurious mass relative to the true mass of an n-step prefix is at most
``exp(n·log(K·w_max/w_min) - L)`` (`error_bound`); in floating point, e^{-L} for L = 10⁴ is an
exact zero, so a prefix with surviving runs is computed as if the stand-in were -∞. A prefix
with no surviving run has log string-sum ≤ -L·(1 - o(1)) < -L/2: the module reports it as dead
(reading all zeros, output False).

Comparison is by tolerance since readings are real: `compare_readings` returns the first
(string, step, field, expected, got) where the network and Lang's algorithm (float64) differ,
and ``pn.verify(net.machine, net)`` compares the decoded ``"reading"`` with the weighted PDA's
``"reading"`` (within rtol/atol) and the readout with its ``"output"`` (exactly).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp
import torch
from torch import nn

from pdanet.automata import semiring as srm
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.weighted import WeightedPDA
from pdanet.constructions.abstraction import NSChart
from pdanet.constructions.base import CompiledNetwork, ExactWeight, load_exact
from pdanet.constructions.modules import keyed, module_state, unkeyed
from pdanet.constructions.stacks.ns import NondeterministicStack
from pdanet.errors import CompileError, InputError

NEG = 10_000


@dataclass(frozen=True)
class NSBlocks:
    """An `NSRNNNet`'s weights by meaning: ``embedding`` (|Σ| + 1, Q·G·Q·(2G+1)) the log action
    weights of each symbol (last row: padding), ``log_final`` (Q·G,) the log final weight of
    each (state, top)."""

    embedding: Any
    log_final: Any


# NSBlocks field -> the module's state_dict key (only this module spells them)
_KEYS = {"embedding": "embedding.weight", "log_final": "log_final"}


def ns_state_dict(blocks: NSBlocks) -> dict[str, Any]:
    """The blocks keyed as `NSRNNNet`'s ``state_dict`` (what `load_exact` takes)."""
    return keyed(blocks, _KEYS)


class NSRNNNet(nn.Module):
    """Embedding controller → `NondeterministicStack`. forward(ids (B, T), -1 padding) returns
    (states (B, T+1, Q·G) = the RNS readings, logits (B, T+1, 1) = log accepting weight of
    each prefix)."""

    def __init__(self, num_symbols: int, num_states: int, num_stack: int, start: int,
                 window: int | None = None, neg: float = NEG):
        super().__init__()
        Q, G = num_states, num_stack
        self.Q, self.G, self.neg = Q, G, neg
        self.embedding = nn.Embedding(num_symbols + 1, Q * G * Q * (2 * G + 1))
        self.register_buffer("log_final", torch.zeros(Q * G))
        self.stack = NondeterministicStack(Q, G, "rns", window, start)

    def blocks(self, numpy: bool = False) -> NSBlocks:
        """The weights by meaning: tensors, or with ``numpy`` float64 arrays (detached)."""
        return unkeyed(NSBlocks, _KEYS, module_state(self, numpy))

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(ids)
        if ids.dim() != 2:
            raise InputError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        pad = self.embedding.num_embeddings - 1
        idx = torch.where(ids < 0, torch.full_like(ids, pad), ids)
        B, T = ids.shape
        lact = self.embedding(idx).view(B, T, self.Q, self.G, self.Q, 2 * self.G + 1)
        res = self.stack(lact)
        flat = res.log_alpha.reshape(B, T + 1, -1)
        logits = torch.logsumexp(flat + self.log_final, dim=-1, keepdim=True)
        alive = (res.log_norm > -self.neg / 2)[..., None]
        states = res.reading.reshape(B, T + 1, -1) * alive
        return states, logits


def error_bound(machine: WeightedPDA, n: int, neg: float = NEG) -> float:
    """Upper bound on the relative error of a prefix weight of length n caused by -L for log 0."""
    W = machine.weight_tensor(srm.REAL)
    pos = W[W > 0]
    if pos.size == 0:
        return 0.0
    K = machine.num_states * (2 * machine.num_stack + 1)
    return math.exp(min(0.0, n * math.log(K * pos.max() / pos.min()) - neg))


def _exact_log(w: float) -> Fraction:
    """log w as an exact rational: 0 for w = 1, else the float64 logarithm as a rational."""
    return Fraction(0) if w == 1 else Fraction(math.log(w))


def compile_weighted(machine: WeightedPDA, dtype: torch.dtype = torch.float32,
                     window: int | None = None, neg: int = NEG, **options) -> CompiledNetwork:
    """RNS-RNN with an embedding controller whose readings equal the machine's (module
    docstring). ``window``: D of §5.1 (exact when D ≥ the string length)."""
    if options:
        raise CompileError(f"unknown options {sorted(options)} for ns_rnn/embedding; "
                           "accepted: window, neg")
    if not isinstance(neg, int) or neg < 100:
        raise CompileError(f"neg (L, the stand-in for -log 0) must be an integer ≥ 100, got {neg!r}")
    Q, G = machine.num_states, machine.num_stack
    S = len(machine.alphabet)
    O = 2 * G + 1
    W = machine.weight_tensor(srm.REAL)
    emb = np.empty((S + 1, Q, G, Q, O), dtype=object)
    emb.fill(Fraction(-neg))
    for idx in zip(*np.nonzero(W > 0)):
        emb[idx] = _exact_log(float(W[idx]))
    for q in range(Q):                                   # padding row: identity
        for x in range(G):
            emb[S, q, x, q, G + x] = Fraction(0)
    final = machine.final_weights(srm.BOOLEAN).reshape(-1)
    weights = ns_state_dict(NSBlocks(
        embedding=ExactWeight.of(emb.reshape(S + 1, -1), scaled=False),
        log_final=ExactWeight.of(np.where(final, 0, -neg).astype(np.int64), scaled=False)))
    module = NSRNNNet(S, Q, G, machine.states.index(machine.start), window, neg)
    module = load_exact(module, weights, 1, dtype)

    def decoder(states: np.ndarray) -> dict:
        return {"reading": np.asarray(states, dtype=np.float64).reshape(
            states.shape[:2] + (Q, G))}

    def reader(logits: np.ndarray) -> np.ndarray:
        return np.asarray(logits)[..., 0] > -neg / 2

    return CompiledNetwork(
        machine=machine, module=module, target="ns_rnn", method="embedding",
        hidden_units=Q * G, bound=sp.Symbol("Q") * sp.Symbol("G"), params={"Q": Q, "G": G},
        weights=weights, scale=sp.Integer(1), decoder=decoder, reader=reader,
        scale_argument="no saturation: log-weights are exact; -L stands in for log 0",
        abstraction=NSChart(labels=tuple(f"({machine.states[q]!r},{machine.stack_symbol(y)!r})"
                                         for q in range(Q) for y in range(G)),
                            neg=neg, window=window),
        info={"error_bound": "exp(n·log(K·w_max/w_min) − L)"})


def compile_dpda(machine: DPDA, dtype: torch.dtype = torch.float32, **options) -> CompiledNetwork:
    """A real-time DPDA as a weighted PDA with weight one per transition. The network's
    ``machine`` is that weighted PDA (its fields are readings); ``compiled_from`` is
    the DPDA, which `pdanet.verify` accepts in its place."""
    return _from(machine, compile_weighted(WeightedPDA.from_pda(machine), dtype=dtype, **options))


def compile_pda(machine: PDA, dtype: torch.dtype = torch.float32, **options) -> CompiledNetwork:
    """A real-time PDA as a weighted PDA with weight one per transition (``machine`` and
    ``compiled_from`` as for a DPDA)."""
    return _from(machine, compile_weighted(WeightedPDA.from_pda(machine), dtype=dtype, **options))


def _from(source: Any, net: CompiledNetwork) -> CompiledNetwork:
    """The network, noting the machine it was converted from (``compiled_from``)."""
    return replace(net, compiled_from=source)


@dataclass(frozen=True)
class Disagreement:
    """The first place where network and machine differ."""

    string: tuple
    step: int
    field: str
    expected: Any
    got: Any


def compare_readings(machine: Any, net: CompiledNetwork, strings: Sequence, rtol: float = 1e-5,
                     atol: float = 1e-5, batch_size: int = 64,
                     cache: dict | None = None) -> Disagreement | None:
    """Run `strings` through `net` and through Lang's algorithm (`WeightedPDA.run_batch`,
    float64) and return the first disagreement, or None. Strings are batched by length; "first"
    is the shortest failing string (ties: given order), then its first failing step, then the
    field order ``output`` (alive or not, exact), ``reading`` (``|got − expected| ≤ atol +
    rtol·|expected|``), ``log_weight`` (same tolerance, where finite). Pass the same `cache`
    dict to several calls (e.g. a float64 and a float32 network) to run Lang's algorithm once."""
    wpda = machine if isinstance(machine, WeightedPDA) else WeightedPDA.from_pda(machine)
    window = net.abstraction.window if isinstance(net.abstraction, NSChart) else None
    cache = {} if cache is None else cache
    strings = [tuple(wpda.alphabet.split(s)) if isinstance(s, str) else tuple(s) for s in strings]
    order = sorted(range(len(strings)), key=lambda j: (len(strings[j]), j))
    for start in range(0, len(order), batch_size):
        chunk = [strings[j] for j in order[start:start + batch_size]]
        ids, lengths = wpda.encode(chunk)
        key = (id(wpda), window, tuple(chunk))
        if key not in cache:
            cache[key] = wpda.run_batch(ids, lengths, window=window)
        exp = cache[key]
        with torch.no_grad():
            states, logits = net.forward(torch.as_tensor(ids))
        got = {"output": np.asarray(net.readout(logits), dtype=bool),
               "reading": net.decode(states)["reading"],
               "log_weight": logits.detach().cpu().numpy()[..., 0].astype(np.float64)}
        e_lw = exp["log_weight"]
        with np.errstate(invalid="ignore"):
            bad = {"output": got["output"] != exp["output"],
                   "reading": ~np.isclose(got["reading"], exp["reading"], rtol,
                                          atol).all((-1, -2)),
                   "log_weight": np.isfinite(e_lw) & ~(np.abs(got["log_weight"] - e_lw)
                                                       <= atol + rtol * np.abs(e_lw))}
        valid = np.arange(ids.shape[1] + 1)[None, :] <= lengths[:, None]
        anyb = valid & (bad["output"] | bad["reading"] | bad["log_weight"])
        if anyb.any():
            b = int(anyb.any(axis=1).argmax())
            t = int(anyb[b].argmax())
            field = next(f for f in ("output", "reading", "log_weight") if bad[f][b, t])
            return Disagreement(chunk[b], t, field, exp[field][b, t], got[field][b, t])
    return None


__all__ = ["NEG", "Disagreement", "NSBlocks", "NSRNNNet", "compare_readings", "compile_weighted",
           "error_bound", "ns_state_dict"]

"""Compile a weighted real-time PDA into an RNS-RNN (DuSell & Chiang 2021, §2.4, §3).

The controller is an input embedding: step t's action tensor depends only on the symbol read, so
the embedding row of symbol a holds ``log Δ[a][q, x → r, v]`` = log w of the transition
``(q, x) —a / w→ (r, v)`` (RNS-RNN actions are unnormalised weights, §3.1: Δ = exp(·)) and the
declared constant ``-L`` (``neg``) where there is no transition. `NondeterministicStack` then
runs Lang's algorithm, so its reading at every step is the machine's reading.

The machine's ⊥ is the bottom of a stack that runs may empty again (push on ⊥, pop back to ⊥,
stay on ⊥), which the paper's equations do not allow: their initial ⊥ is never on top after
step 1 and no run pops back to it (`pdanet.constructions.stacks.ns`). Two encodings:

- ``bottom="paper"`` (default without a window): the stack of the paper's equations with a
  marked lowest symbol. Network stack symbols: the paper's ⊥ (index 0, the initial bottom), the
  machine's symbols Z (indices 1..G−1) and their marked copies Ẑ (index G + Z), with ⊥̂ = index
  G standing for the machine's empty stack. The machine stack ⊥ Z₁ … Z_k is the network stack
  ⊥ Ẑ₁ Z₂ … Z_k (⊥ ⊥̂ when k = 0): the marked symbol is always the lowest one above the paper's
  ⊥. Each transition becomes one network action, so runs and weights correspond one to one:
  push y on ⊥ (step 1: network top ⊥) → push ŷ, on ⊥̂ → replace by ŷ; the ⊥ → ⊥ no-op → push ⊥̂
  (step 1), replace ⊥̂ by ⊥̂; on Z / Ẑ: push y → push y; replace by y → y / ŷ; pop → pop /
  replace by ⊥̂. The reading over (state, network top) is decoded to (state, machine top) by
  adding Z and Ẑ (and ⊥, ⊥̂). 2·Q·G units (the network has 2G stack symbols).
- ``bottom="extended"`` (the default with a window): the stack's extended convention, whose ⊥
  is the machine's, Q·G units. The paper's window (§5.1) drops every run whose marked lowest
  symbol (pushed at step 1) is on top after step D, while the machine's windowed reading
  (`WeightedPDA.run_batch` with ``window``) keeps runs that return to the bottom, so no encoding
  in the paper's equations has the machine's windowed reading; a window with
  ``bottom="paper"`` is refused (CompileError).

The padding row (symbol -1) is the identity: ``replace x by x`` with weight 1 in every (state,
top) (under "paper", from the initial ⊥: push ⊥̂, the only move at step 1).

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
    each prefix). ``num_stack`` G counts the network's stack symbols (2× the machine's under
    the "paper" encoding, module docstring); ``bottom`` the stack's convention."""

    def __init__(self, num_symbols: int, num_states: int, num_stack: int, start: int,
                 window: int | None = None, neg: float = NEG, bottom: str = "extended"):
        super().__init__()
        Q, G = num_states, num_stack
        self.Q, self.G, self.neg = Q, G, neg
        self.embedding = nn.Embedding(num_symbols + 1, Q * G * Q * (2 * G + 1))
        self.register_buffer("log_final", torch.zeros(Q * G))
        self.stack = NondeterministicStack(Q, G, "rns", window, start, bottom=bottom)

    @property
    def machine_stack(self) -> int:
        """The machine's stack symbols (⊥ included) that the network encodes."""
        return self.G // 2 if self.stack.bottom == "paper" else self.G

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


def error_bound(machine: WeightedPDA, n: int, neg: float = NEG,
                num_stack: int | None = None) -> float:
    """Upper bound on the relative error of a prefix weight of length n caused by -L for log 0;
    ``num_stack``: the network's stack symbols (K = Q(2·num_stack+1) action entries per (state,
    top); the machine's by default)."""
    W = machine.weight_tensor(srm.REAL)
    pos = W[W > 0]
    if pos.size == 0:
        return 0.0
    K = machine.num_states * (2 * (num_stack or machine.num_stack) + 1)
    return math.exp(min(0.0, n * math.log(K * pos.max() / pos.min()) - neg))


def _exact_log(w: float) -> Fraction:
    """log w as an exact rational: 0 for w = 1, else the float64 logarithm as a rational."""
    return Fraction(0) if w == 1 else Fraction(math.log(w))


def _paper_embedding(W: np.ndarray, neg: int) -> np.ndarray:
    """The embedding (|Σ|+1, Q, 2G, Q, 4G+1) of the "paper" encoding (module docstring) of the
    real weight tensor W (|Σ|, Q, G, Q, 2G+1), as Fractions."""
    S, Q, G = W.shape[:3]
    G2 = 2 * G
    push, repl, pop = (lambda y: y), (lambda y: G2 + y), 2 * G2
    emb = np.empty((S + 1, Q, G2, Q, 2 * G2 + 1), dtype=object)
    emb.fill(Fraction(-neg))
    for a, q, x, r, o in zip(*np.nonzero(W > 0)):
        lw = _exact_log(float(W[a, q, x, r, o]))
        kind, y = ("push", o) if o < G else ("replace", o - G) if o < 2 * G else ("pop", 0)
        if x == 0 and kind == "push":                   # push y on the empty stack
            moves = [(0, push(G + y)), (G, repl(G + y))]
        elif x == 0:                                    # the ⊥ → ⊥ no-op
            moves = [(0, push(G)), (G, repl(G))]
        elif kind == "push":
            moves = [(x, push(y)), (G + x, push(y))]
        elif kind == "replace":
            moves = [(x, repl(y)), (G + x, repl(G + y))]
        else:                                           # pop: the marked symbol leaves ⊥̂
            moves = [(x, pop), (G + x, repl(G))]
        for top, op in moves:
            emb[a, q, top, r, op] = lw
    for q in range(Q):                                  # padding row: identity
        emb[S, q, 0, q, push(G)] = Fraction(0)
        for j in range(1, G2):
            emb[S, q, j, q, repl(j)] = Fraction(0)
    return emb


def compile_weighted(machine: WeightedPDA, dtype: torch.dtype = torch.float32,
                     window: int | None = None, neg: int = NEG, bottom: str | None = None,
                     **options) -> CompiledNetwork:
    """RNS-RNN with an embedding controller whose readings equal the machine's (module
    docstring). ``window``: D of §5.1 (exact when D ≥ the string length); ``bottom``: "paper"
    (the default without a window) or "extended" (the default, and the only one, with a
    window), the encoding of the machine's ⊥ (module docstring)."""
    if options:
        raise CompileError(f"unknown options {sorted(options)} for ns_rnn/embedding; "
                           "accepted: window, neg, bottom")
    if not isinstance(neg, int) or neg < 100:
        raise CompileError(f"neg (L, the stand-in for -log 0) must be an integer ≥ 100, got {neg!r}")
    if bottom is None:
        bottom = "paper" if window is None else "extended"
    if bottom not in ("paper", "extended"):
        raise CompileError(f"bottom must be 'paper' or 'extended', got {bottom!r}")
    if bottom == "paper" and window is not None:
        raise CompileError(
            "bottom='paper' with a window: the paper's window drops every run whose lowest "
            "stack symbol is on top more than D steps after it was pushed, so no network in "
            "the paper's equations has the machine's windowed reading; use bottom='extended' "
            "(the default with a window) or no window")
    Q, G = machine.num_states, machine.num_stack
    S = len(machine.alphabet)
    W = machine.weight_tensor(srm.REAL)
    if bottom == "paper":
        emb = _paper_embedding(W, neg)
        G2 = 2 * G
    else:
        O = 2 * G + 1
        G2 = G
        emb = np.empty((S + 1, Q, G, Q, O), dtype=object)
        emb.fill(Fraction(-neg))
        for idx in zip(*np.nonzero(W > 0)):
            emb[idx] = _exact_log(float(W[idx]))
        for q in range(Q):                               # padding row: identity
            for x in range(G):
                emb[S, q, x, q, G + x] = Fraction(0)
    final = machine.final_weights(srm.BOOLEAN).reshape(Q, G)
    final = np.concatenate([final, final], axis=1) if bottom == "paper" else final
    weights = ns_state_dict(NSBlocks(
        embedding=ExactWeight.of(emb.reshape(S + 1, -1), scaled=False),
        log_final=ExactWeight.of(np.where(final.reshape(-1), 0, -neg).astype(np.int64),
                                 scaled=False)))
    module = NSRNNNet(S, Q, G2, machine.states.index(machine.start), window, neg, bottom)
    module = load_exact(module, weights, 1, dtype)

    def decoder(states: np.ndarray) -> dict:
        r = np.asarray(states, dtype=np.float64).reshape(states.shape[:2] + (Q, G2 // G, G))
        return {"reading": r.sum(axis=-2)}             # Z and its mark Ẑ: the machine's Z

    def reader(logits: np.ndarray) -> np.ndarray:
        return np.asarray(logits)[..., 0] > -neg / 2

    def label(q: int, j: int) -> str:
        if bottom == "extended":
            return f"({machine.states[q]!r},{machine.stack_symbol(j)!r})"
        sym = "⊥₀" if j == 0 else repr(machine.stack_symbol(j % G)) + ("̂" if j >= G else "")
        return f"({machine.states[q]!r},{sym})"

    units = sp.Symbol("Q") * sp.Symbol("G")
    return CompiledNetwork(
        machine=machine, module=module, target="ns_rnn", method="embedding",
        hidden_units=Q * G2, bound=units if bottom == "extended" else 2 * units,
        params={"Q": Q, "G": G}, weights=weights, scale=sp.Integer(1), decoder=decoder,
        reader=reader,
        scale_argument="no saturation: log-weights are exact; -L stands in for log 0",
        abstraction=NSChart(labels=tuple(label(q, j) for q in range(Q) for j in range(G2)),
                            neg=neg, window=window),
        info={"error_bound": "exp(n·log(K·w_max/w_min) − L), K = Q(2·G_net+1)",
              "bottom": bottom})


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

"""The RNS-RNN as an exact language model of a probabilistic real-time weighted PDA (DuSell &
Chiang 2021, §3; the reading is their Eq. 5 in its §3.2 form, over (state, top) pairs). The
head reads r_t directly; the paper's output y_t = W_hy h_t + b_hy (§2.1) reads it through the
controller's LSTM, whose input at step t+1 is r_t — here there is no LSTM: the action tensor
of each step is the embedding of the symbol read (`pdanet.constructions.ns`).

Probabilistic PDA. A real-time `WeightedPDA` in the real (or log) semiring is read as a
generative model: in a configuration with state q and top γ (γ may be ⊥) it emits a and moves
by ``(q, γ) —a / w→ (r, v)`` with probability w, or stops with probability

    ρ(q, γ) = 1 − Σ_{a, r, v} w(q, γ —a→ r, v)      (the stop probability: what the row leaves).

It is *probabilistic* when, for every (q, γ) that some run reaches (`reachable_heads`), the row
sums to at most 1 and ρ(q, γ) = 0 unless (q, γ) is final under the machine's acceptance
(`WeightedPDA.final_weights`: an accepting state, and ⊥ on top for ``empty_stack``); rows no run
reaches are ignored (their reading is always 0). The probability of a string w = a1…an is

    p(w) = Σ_{runs π reading w} weight(π) · ρ(end of π),

a distribution over Σ* (it sums to at most 1; to 1 when the model stops with probability 1).

Exact head. Let α_t(q, γ) be the total weight of the runs on the prefix a1…at that end in state
q with top γ (Lang's algorithm, `WeightedPDA.chart`) and r_t = α_t / Σ α_t the RNS-RNN reading
(DuSell & Chiang 2021, Eq. 5 as §3.2 changes it). Then

    p(a | a1…at) = Σ_{q,γ} r_t(q, γ) · P(a | q, γ),   p(EOS | a1…at) = Σ_{q,γ} r_t(q, γ) · ρ(q, γ),

with P(a | q, γ) = Σ_{r,v} w(q, γ —a→ r, v). Proof: every run on a1…at a_{t+1} is a run π on
the prefix followed by one transition whose weight depends only on (state, top) at the end of π,
so the prefix weight Z_{t+1} = Σ_π weight(π)·P(a_{t+1} | end of π) = Σ_{q,γ} α_t(q,γ)·P(a_{t+1}|q,γ),
and likewise p(w) = Σ_{q,γ} α_n(q,γ)·ρ(q,γ); p(w) = ∏_t (Z_{t+1}/Z_t) · p(w)/Z_n, and each ratio
is the formula above divided through by Z_t = Σ α_t. So the head is a linear map of the reading
(``head`` (Q·G, |Σ|+1), EOS last), and the product of the network's next-symbol probabilities
(EOS included) is p(w) exactly, up to floating-point rounding.

Bottom convention. The identity needs α_t over *all* runs, including those that pop back to ⊥
or stay on it. That is the machine's reading under ``bottom="paper"`` (the paper's equations
with the machine's ⊥ encoded by a marked lowest symbol, `pdanet.constructions.ns`) and under
``bottom="extended"`` (the stack's bottom level); the paper's equations with the machine's ⊥ as
the network's ⊥ (or the authors' "reachable" convention) drop every run whose stack returns to
⊥, so the reading misses that mass and no linear head is exact. A window (§5.1) drops runs too:
it is refused (CompileError).

Softmax head. The paper's output layer is a softmax of an affine map (DuSell & Chiang 2021, §2.1:
logits y_t = W_hy h_t + b_hy); from the same reading we take W = ln P(· | q, γ) (ln ρ for EOS),
floored at ``floor`` where the probability is 0, and b = 0. On a reading that is one-hot (the
prefix determines (q, γ)) it is exact up to the floor's mass ≤ (|Σ|+1)·e^floor; on a mixture it
is the normalised *geometric* mean Π_i P_i^{r_i} / Z instead of the arithmetic mean Σ_i r_i P_i,
which is never better in expected cross-entropy when the next symbol follows the machine
(Gibbs' inequality): its gap, KL(exact ‖ softmax) per symbol, is what
`benchmarks/bench_ns_lm.py` reports.

Verification. `PDALanguageModel` is the machine side: the exact next-symbol distributions above
from Lang's forward weights, the prefix probability, sampling by running the generative model.
An ns_lm network's abstraction is `NSLMChart` (its reading is an `NSChart`'s; its outputs are
distributions), and `pdanet.verify.distribution.verify_lm` compares it position by position,
in nats, with the `PDALanguageModel` of the machine it was compiled from.

The task machines (`dusell_lm_machine`) are real-time probabilistic PDAs whose string
probabilities are those of DuSell & Chiang's PCFGs (`pdanet.automata.tasks.dusell2021`); the
grammars' ε-rules are folded into the next emission (or the stop probability), so no ε-arc is
needed. Marked reversal and Dyck are deterministic (one-hot readings); unmarked and padded
reversal guess the middle. Greibach's hardest CFL has a `WeightedCFG` whose weights do not
normalise (a distribution only given the length) with left-recursive rules: its machine
(`pdanet.automata.tasks.dusell2021.hardest_cfl_lm`) is a real-time weighted PDA built for that
grammar (18 states, stack symbols ( and [), weighted by λ^|w| and locally normalised by weight
pushing with completion weights solved by Newton's method; its p(w) is proportional to the
grammar's weight times λ^|w|, so p(w | |w|), the papers' quantity, is the grammar's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
import sympy as sp
import torch
from torch import nn

from pdanet.automata import semiring as srm
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.base import BatchTrace
from pdanet.automata.probabilistic import _count, _LanguageModel
from pdanet.automata.tasks.dusell2021 import (
    dusell_dyck_grammar,
    hardest_cfl_lm,
    marked_reversal_grammar,
    padded_reversal_grammar,
    unmarked_reversal_grammar,
)
from pdanet.automata.tasks.task import BLANK
from pdanet.automata.weighted import WeightedPDA, valid_ops_mask
from pdanet.constructions.abstraction import NSChart
from pdanet.constructions.base import CompiledNetwork, ExactWeight, as_dtype, load_exact
from pdanet.constructions.ns import NEG, compile_weighted
from pdanet.errors import AutomatonError, CompileError, InputError

HEADS = ("exact", "softmax")
#: how far a row of float probabilities may sum above one, or leave stop mass where it may not
TOLERANCE = 1e-9
#: the softmax head's logit for a probability of 0
DEFAULT_FLOOR = -20


# --- the machine as a language model ------------------------------------------------------------

def reachable_heads(machine: WeightedPDA) -> np.ndarray:
    """(Q, G) bool: the (state, top) pairs that some run from (start, ⊥) reaches (transitions of
    weight > 0). Saturation over heads and pop summaries: S(q, x) is the set of states in which
    the cell that is x on top at (q, x) gets popped; a push of y from (q, x) to r reaches (r, y)
    and, for each r' in S(r, y), (r', x) again."""
    machine.require_realtime("reachable_heads")
    W = machine.weight_tensor(srm.REAL)
    Q, G = machine.num_states, machine.num_stack
    moves: dict = {}
    for _, q, x, r, o in zip(*np.nonzero(W > 0)):
        moves.setdefault((int(q), int(x)), set()).add((int(r), int(o)))
    start = machine.states.index(machine.start)
    reach = {(start, 0)}
    summ: dict = {}
    changed = True
    while changed:
        changed = False
        for head in sorted(reach):
            q, x = head
            mine = summ.setdefault(head, set())
            before = (len(reach), len(mine))
            for r, o in moves.get(head, ()):
                if o == 2 * G:                                   # pop: returns in state r
                    mine.add(r)
                    continue
                y = o if o < G else o - G
                reach.add((r, y))
                below = summ.get((r, y), set())
                if o < G:                                        # push y on x
                    for r2 in list(below):
                        reach.add((r2, x))
                        mine |= summ.get((r2, x), set())
                else:                                            # replace x by y (same cell)
                    mine |= below
            changed |= (len(reach), len(mine)) != before
    out = np.zeros((Q, G), dtype=bool)
    for q, x in reach:
        out[q, x] = True
    return out


def lm_rows(machine: WeightedPDA, tolerance: float = TOLERANCE) -> tuple[np.ndarray, np.ndarray]:
    """The machine's emission and stop probabilities as exact Fractions of its float64 weights:
    ``emit`` (Q, G, |Σ|) = P(a | q, γ) and ``stop`` (Q, G) = ρ(q, γ) (module docstring; 0 on
    unreachable rows, and where the deficit is at most `tolerance`: the rounding of weights such
    as 1/3 + 2/3 in float64). AutomatonError for ε-arcs, a semiring other than real/log, a row
    whose probabilities sum above 1 (+ `tolerance`), or a reachable non-final row that leaves
    stop mass (> `tolerance`); CompileError for anything but a `WeightedPDA`."""
    if not isinstance(machine, WeightedPDA):
        raise CompileError(f"an NS-RNN language model is compiled from a WeightedPDA, got "
                           f"{type(machine).__name__}; convert it with WeightedPDA.from_pda and "
                           "give its transitions probabilities")
    machine.require_realtime("the NS-RNN language model")
    if machine.semiring.name not in ("real", "log"):
        raise AutomatonError(f"{machine!r} has weights in the {machine.semiring.name} semiring; "
                             "a probabilistic PDA needs probabilities (real) or log-probabilities")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) \
            or not 0 <= tolerance < 1e-3:
        raise InputError(f"tolerance must be a number in [0, 1e-3), got {tolerance!r}")
    W = machine.weight_tensor(srm.REAL)
    S, Q, G = W.shape[:3]
    emit = np.empty((Q, G, S), dtype=object)
    stop = np.empty((Q, G), dtype=object)
    final = machine.final_weights(srm.BOOLEAN)
    reach = reachable_heads(machine)
    for q in range(Q):
        for x in range(G):
            for a in range(S):
                emit[q, x, a] = sum((Fraction(float(w)) for w in W[a, q, x].ravel() if w > 0),
                                    Fraction(0))
            total = sum(emit[q, x], Fraction(0))
            where = f"configuration (state {machine.states[q]!r}, top {machine.stack_symbol(x)!r})"
            if total > 1 + Fraction(tolerance):
                raise AutomatonError(
                    f"{where}: its transitions' probabilities sum to {float(total)!r} > 1; a "
                    "probabilistic PDA's rows (emissions plus stop) sum to 1: divide them by the sum")
            rest = max(Fraction(0), 1 - total)
            if reach[q, x] and not final[q, x] and rest > Fraction(tolerance):
                raise AutomatonError(
                    f"{where}: its transitions' probabilities sum to {float(total)!r} < 1, and the "
                    f"missing {float(rest)!r} would be stop mass in a configuration that does not "
                    "accept; make the row sum to 1, or make the configuration final")
            # a deficit within the tolerance is the rounding of float weights: no stop mass
            stop[q, x] = rest if reach[q, x] and final[q, x] and rest > tolerance else Fraction(0)
    return emit, stop


def _head_rows(emit: np.ndarray, stop: np.ndarray, paper: bool) -> np.ndarray:
    """(Q·G_net, |Σ|+1) Fractions: row (q, j) holds P(· | q, γ) and ρ(q, γ) for the machine's
    γ that network symbol j stands for (j mod G under the "paper" encoding: ⊥₀, Z, ⊥̂, Ẑ)."""
    Q, G, S = emit.shape
    Gn = 2 * G if paper else G
    out = np.empty((Q, Gn, S + 1), dtype=object)
    for q in range(Q):
        for j in range(Gn):
            out[q, j, :S] = emit[q, j % G]
            out[q, j, S] = stop[q, j % G]
    return out.reshape(Q * Gn, S + 1)


@dataclass(frozen=True)
class PDALMConfig:
    """A configuration of `PDALanguageModel`: the prefix read so far (the distribution after it
    depends on the forward weights over every run on it, a function of the whole prefix)."""

    prefix: tuple = ()


class PDALanguageModel(_LanguageModel):
    """A probabilistic real-time `WeightedPDA` read as a language model (module docstring): after
    every prefix a1…at the next-symbol distribution over Σ ∪ {EOS} (EOS last)

        p(a | a1…at) = Σ_{q,γ} α_t(q, γ) P(a | q, γ) / Σ_{q,γ} α_t(q, γ),   EOS: ρ(q, γ),

    with α_t the forward weights over (state, top) of Lang's algorithm (`WeightedPDA.chart`,
    `WeightedPDA.log_alpha_batch`; Butoi et al. 2022 / DuSell & Chiang 2021, Eq. 4) and the rows
    P, ρ of `lm_rows`. The prefix probability is Σ α_t (the product of the next-symbol
    probabilities telescopes to it) and p(w) = Σ α_n ρ. A prefix of probability 0 is dead: its
    distribution is the zero vector. Exact arithmetic (Fractions of the machine's float64
    weights, `semiring.RATIONAL`) in `exact_row` and `prob` for a machine in the real semiring;
    float64 in log space (no underflow on long prefixes) in `output`, `run_batch`, `logprob`.
    `sample` runs the generative model (a run with its stack), O(|w|) per string. Errors: those of `lm_rows` (a machine that is not a probabilistic real-time PDA).
    ``pdanet.verify.distribution.verify_lm`` compares an ``ns_lm`` network with this model of
    the machine it was compiled from."""

    fixed_width_fields = True

    def __init__(self, machine: WeightedPDA, tolerance: float = TOLERANCE):
        emit, stop = lm_rows(machine, tolerance)
        self.machine = machine
        self.tolerance = float(tolerance)
        self.alphabet = machine.alphabet
        self.output_alphabet = self._eos_alphabet()
        self.name = f"{machine.name or 'pda'}_lm"
        rows = _head_rows(emit, stop, paper=False)                   # (Q·G, |Σ|+1) Fractions
        self._exact_rows = rows
        self._rows = np.vectorize(float, otypes=[np.float64])(rows)

    @cached_property
    def _key(self) -> tuple:
        return (self.machine, self.tolerance)

    def __repr__(self) -> str:
        return f"PDALanguageModel({self.machine!r})"

    @property
    def is_exact(self) -> bool:
        return self.machine.semiring.name == "real"

    def to_dict(self) -> dict:
        raise InputError("a PDALanguageModel is a view of its WeightedPDA: save the machine "
                         "(`.machine.save(path)`) and rebuild the view with "
                         "PDALanguageModel(machine)")

    # --- the Machine protocol ----------------------------------------------------------------
    def initial(self) -> PDALMConfig:
        return PDALMConfig(())

    def step(self, config: PDALMConfig, symbol: Any) -> PDALMConfig:
        self.alphabet.index(symbol)
        return PDALMConfig(config.prefix + (symbol,))

    def is_dead(self, config: PDALMConfig) -> bool:
        """True when no run of positive weight reads the prefix (its probability is 0)."""
        return not bool(self.machine.forward_weights(config.prefix, srm.BOOLEAN)[-1].any())

    def _alpha(self, prefix: tuple) -> np.ndarray:
        """α_n (Q·G,) of the prefix: exact Fractions (real semiring) or float64."""
        sr = srm.RATIONAL if self.is_exact else srm.REAL
        return self.machine.forward_weights(prefix, sr)[-1].reshape(-1)

    def exact_row(self, config: PDALMConfig) -> tuple:
        """p(· | prefix) over Σ ∪ {EOS}: Fractions for a real-semiring machine (exact forward
        weights), floats otherwise; zeros for a prefix of probability 0."""
        alpha = self._alpha(config.prefix)
        total = sum(alpha, Fraction(0) if self.is_exact else 0.0)
        if total == 0:
            return (Fraction(0),) * (len(self.alphabet) + 1)
        rows = self._exact_rows if self.is_exact else self._rows
        return tuple(sum((alpha[i] * rows[i, o] for i in range(len(alpha))),
                         Fraction(0) if self.is_exact else 0.0) / total
                     for o in range(rows.shape[1]))

    def output(self, config: PDALMConfig) -> np.ndarray:
        """p(· | prefix) as float64 (EOS last), from the log-space forward weights."""
        ids, lengths = self.encode([config.prefix])
        return self.run_batch(ids, lengths)["output"][0, -1]

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None):
        """Fields ``output`` (B, T+1, |Σ|+1) float64 next-symbol distributions (zeros after a
        prefix of probability 0), ``reading`` (B, T+1, Q, G) the normalised forward weights and
        ``log_prefix`` (B, T+1) ln p(prefix) (−inf for 0); rows past a string's length repeat its
        last value."""
        ids, lengths = self.check_ids(ids, lengths)
        la = self.machine.log_alpha_batch(ids, lengths)
        B, T1, Q, G = la.shape
        flat = la.reshape(B, T1, Q * G)
        top = flat.max(axis=-1, keepdims=True)
        live = np.isfinite(top)
        with np.errstate(invalid="ignore", divide="ignore"):
            e = np.where(live, np.exp(flat - np.where(live, top, 0.0)), 0.0)
            z = e.sum(axis=-1, keepdims=True)
            reading = np.where(live, e / np.where(live, z, 1.0), 0.0)
            log_prefix = np.where(live[..., 0], (top + np.log(np.where(live, z, 1.0)))[..., 0],
                                  -np.inf)
        return BatchTrace(lengths, {"output": reading @ self._rows,
                                    "reading": reading.reshape(B, T1, Q, G),
                                    "log_prefix": log_prefix})

    # --- sampling: runs of the generative model -----------------------------------------------
    @cached_property
    def _moves(self) -> dict:
        """{(q, x): (outcomes (k, 3) int rows (symbol, state, op), their probabilities, stop)}
        over the reachable (state, top) pairs (op: push y → y, replace y → G+y, pop → 2G)."""
        W = self.machine.weight_tensor(srm.REAL)
        Q, G = self.machine.num_states, self.machine.num_stack
        W = np.where(valid_ops_mask(G)[None, None, :, None, :], W, 0.0)
        stop = self._rows[:, -1].reshape(Q, G)
        out = {}
        for q, x in zip(*np.nonzero(reachable_heads(self.machine))):
            a, r, o = np.nonzero(W[:, q, x] > 0)
            out[int(q), int(x)] = (np.stack([a, r, o], axis=1), W[a, q, x, r, o], stop[q, x])
        return out

    def _walk(self, rng: np.random.Generator, limit: int, eos: bool) -> tuple[tuple, bool]:
        """One run from (start, ⊥): in configuration (q, stack) a move (emitting its symbol) or,
        with ``eos``, the stop, drawn with their probabilities; without ``eos`` the moves alone,
        renormalised. (symbols, stopped): ends at the stop, at a configuration with no move
        (without ``eos``), or after `limit` symbols (stopped False)."""
        G = self.machine.num_stack
        q, stack, out = self.machine.states.index(self.machine.start), [0], []
        syms = self.alphabet.symbols
        while len(out) < limit:
            outcomes, probs, stop = self._moves[q, stack[-1]]
            weights = np.append(probs, stop if eos else 0.0)
            if not weights.sum() > 0:
                return tuple(out), True
            i = int(rng.choice(len(weights), p=weights / weights.sum()))
            if i == len(probs):
                return tuple(out), True
            a, q, o = (int(v) for v in outcomes[i])
            if o < G:
                stack.append(o)
            elif o < 2 * G:
                stack[-1] = o - G
            else:
                stack.pop()
            out.append(syms[a])
        return tuple(out), False

    def _sample(self, n: int, rng: Any, max_length: int) -> list[tuple]:
        """n strings drawn from p(w) by running the generative model (a run's string has the
        marginal p(w): module docstring), O(|w|) each; InputError past ``max_length`` symbols."""
        n, max_length = _count(n, "n"), _count(max_length, "max_length")
        rng = np.random.default_rng(rng)
        out = []
        for _ in range(n):
            w, stopped = self._walk(rng, max_length, eos=True)
            if not stopped:
                raise InputError(f"a sampled string reached max_length={max_length} symbols "
                                 "without EOS; raise max_length")
            out.append(w)
        return out

    def live_walks(self, n: int, length: Any, rng: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """(ids (n, length) padded with -1, lengths): prefixes of runs that never stop, each
        move drawn with its probability renormalised over the moves of its configuration (so
        every prefix has positive probability); a walk ends early in a configuration with no
        move (only the stop)."""
        n, length = _count(n, "n"), _count(length, "length")
        rng = np.random.default_rng(rng)
        ids = np.full((n, length), -1, dtype=np.int64)
        lengths = np.zeros(n, dtype=np.int64)
        for b in range(n):
            w, _ = self._walk(rng, length, eos=False)
            ids[b, :len(w)] = [self.alphabet.index(a) for a in w]
            lengths[b] = len(w)
        return ids, lengths

    # --- string probabilities -----------------------------------------------------------------
    def prob(self, string: Any, eos: bool = True) -> Fraction | float:
        """p(string) = Σ_{q,γ} α_n(q, γ) ρ(q, γ) (with ``eos``), or the prefix probability
        Σ α_n (without it): a Fraction for a real-semiring machine, else a float."""
        symbols = self.alphabet.split(string)
        alpha = self._alpha(symbols)
        zero = Fraction(0) if self.is_exact else 0.0
        if not eos:
            return sum(alpha, zero)
        rows = self._exact_rows if self.is_exact else self._rows
        return sum((alpha[i] * rows[i, -1] for i in range(len(alpha))), zero)

    def logprob(self, string: Any, eos: bool = True) -> float:
        """ln p(string) (−inf for probability 0) in float64 log space (no underflow)."""
        symbols = self.alphabet.split(string)
        ids, lengths = self.encode([symbols])
        tr = self.run_batch(ids, lengths)
        lp = float(tr["log_prefix"][0, -1])
        if not eos or lp == -math.inf:
            return lp
        p = float(tr["output"][0, -1, -1])
        return lp + math.log(p) if p > 0 else -math.inf


def as_language_model(machine: Any, tolerance: float = TOLERANCE) -> Any:
    """`machine` as a next-symbol language model: a `WeightedPDA` through `PDALanguageModel`,
    anything else (a PFSA, a bounded PDPDA, an adapter already) as it is."""
    return PDALanguageModel(machine, tolerance) if isinstance(machine, WeightedPDA) else machine


@dataclass(frozen=True, eq=False)
class NSLMChart(NSChart):
    """An ``ns_lm`` network: the `NSChart` of its RNS-RNN and a next-symbol head on the reading
    (``head`` "exact" or "softmax", ``floor`` the softmax head's logit for probability 0, None
    for the exact head). Its outputs are distributions: `pdanet.verify` compares them with
    `verify_lm` against the machine's `PDALanguageModel`."""

    head: str = "exact"
    floor: int | None = None


class NSLMNet(nn.Module):
    """`NSRNNNet` (``ns``) → a head on its reading. forward(ids (B, T), -1 padding) returns
    (states (B, T+1, Q·G) = the RNS readings, logits (B, T+1, |Σ|+1) = ln p(next symbol |
    prefix), EOS last). ``head`` "exact": logits = ln(reading @ ``head.weight``ᵀ) (−inf for a
    prefix of probability 0); "softmax": log_softmax(reading @ ``head.weight``ᵀ + ``head.bias``)."""

    def __init__(self, ns: nn.Module, num_symbols: int, kind: str):
        super().__init__()
        self.ns, self.kind = ns, kind
        self.head = nn.Linear(ns.Q * ns.G, num_symbols + 1, bias=kind == "softmax")

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        states, _ = self.ns(ids)
        return states, self.log_probs(states)

    def log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """The head alone: readings (…, Q·G) → ln p(next symbol) (…, |Σ|+1)."""
        if self.kind == "exact":     # p = r_t · P (r_t: Eq. 5 as in §3.2), then its log
            return torch.log((states @ self.head.weight.t()).clamp_min(0.0))
        return torch.log_softmax(self.head(states), dim=-1)      # §2.1: y_t = W r_t + b


class LogProbReader:
    """Logits (…, |Σ|+1) = log-probabilities → the next-symbol distribution (float64), EOS last;
    zeros where the prefix has probability 0."""

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        return np.exp(np.asarray(logits, dtype=np.float64))


def compile_ns_lm(machine: WeightedPDA, dtype: torch.dtype = torch.float32, head: str = "exact",
                  floor: int = DEFAULT_FLOOR, neg: int = NEG, bottom: str = "paper",
                  tolerance: float = TOLERANCE, **options) -> CompiledNetwork:
    """The RNS-RNN of `compile_weighted` (the stack driven by the machine's transitions) with a
    next-symbol head on its reading (module docstring): ``head`` "exact" (p linear in the
    reading; exact) or "softmax" (the paper's output layer with weights ln P, floored at the
    integer ``floor`` < 0). ``bottom`` "paper" or "extended" (both exact; module docstring);
    ``neg`` the stand-in L for −ln 0 (`pdanet.constructions.ns`; a prefix whose probability is
    below e^(−L/2) reads as dead: probability 0). The network's ``logits`` are ln p(next symbol
    | prefix); `string_log_probs` sums them into ln p(w). Errors: `lm_rows`; CompileError for a
    window, an unknown head or bottom, a floor that is not a negative integer."""
    if options:
        hint = " (a window drops runs: no head on it is exact)" if "window" in options else ""
        raise CompileError(f"unknown options {sorted(options)} for ns_lm; accepted: head, floor, "
                           f"neg, bottom, tolerance{hint}")
    if head not in HEADS:
        raise CompileError(f"head must be one of {HEADS}, got {head!r}")
    if bottom not in ("paper", "extended"):
        raise CompileError(f"bottom must be 'paper' or 'extended' (the conventions whose reading "
                           f"counts runs that return to ⊥), got {bottom!r}")
    if isinstance(floor, bool) or not isinstance(floor, int) or floor >= 0:
        raise CompileError(f"floor (the softmax head's logit for probability 0) must be a "
                           f"negative integer, got {floor!r}")
    dtype = as_dtype(dtype)
    emit, stop = lm_rows(machine, tolerance)
    base = compile_weighted(machine, dtype=dtype, neg=neg, bottom=bottom)
    S = len(machine.alphabet)
    rows = _head_rows(emit, stop, bottom == "paper")               # (Q·G_net, |Σ|+1)
    weights = {"ns." + k: w for k, w in base.weights.items()}
    if head == "exact":
        weights["head.weight"] = ExactWeight.of(rows.T, scaled=False)
    else:
        logs = np.vectorize(lambda p: Fraction(math.log(p)) if p > 0 else Fraction(floor),
                            otypes=[object])(rows.T)
        logs = np.vectorize(lambda v: max(v, Fraction(floor)), otypes=[object])(logs)
        weights["head.weight"] = ExactWeight.of(logs, scaled=False)
        weights["head.bias"] = ExactWeight.of(np.zeros(S + 1, dtype=np.int64), scaled=False)
    module = load_exact(NSLMNet(base.module, S, head), weights, 1, dtype)
    Q, G = machine.num_states, machine.num_stack
    return CompiledNetwork(
        machine=machine, module=module, target="ns_lm", method=head,
        hidden_units=base.hidden_units, bound=base.bound, params={"Q": Q, "G": G},
        weights=weights, scale=sp.Integer(1), decoder=base.decoder, reader=LogProbReader(),
        scale_argument="no saturation: the reading is exact; the head is linear (or a softmax)",
        abstraction=NSLMChart(**{f.name: getattr(base.abstraction, f.name)
                                 for f in fields(base.abstraction)},
                              head=head, floor=floor if head == "softmax" else None),
        info={"head": head, "bottom": bottom, "floor": floor if head == "softmax" else None,
              "tolerance": float(tolerance),
              "output": "ln p(next symbol | prefix) over Σ then EOS"})


# --- scoring -----------------------------------------------------------------------------------

def sum_log_probs(logp: torch.Tensor, ids: torch.Tensor, lengths: Any) -> np.ndarray:
    """Per-string ln p(w) (float64) from per-position log-probabilities ``logp`` (B, T+1,
    |Σ|+1), EOS last, of the strings ``ids`` (B, T) (-1 padding) of the given lengths."""
    logp = logp.double()
    lengths = torch.as_tensor(np.asarray(lengths))
    B, n = ids.shape
    steps = torch.gather(logp[:, :n], 2, ids.clamp_min(0)[..., None])[..., 0]
    mask = torch.arange(n)[None, :] < lengths[:, None]
    total = torch.where(mask, steps, torch.zeros_like(steps)).sum(dim=1)
    return (total + logp[torch.arange(B), lengths, -1]).numpy()


def string_log_probs(net: CompiledNetwork, strings: Sequence, batch_size: int = 64) -> np.ndarray:
    """ln p(w) under the network (float64 sums of its per-position log-probabilities, the EOS
    one last) for each string; −inf where some factor is 0."""
    if net.target != "ns_lm":
        raise InputError(f"string_log_probs takes an ns_lm network, got {net.construction}")
    strings = list(strings)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    out = np.empty(len(strings))
    order = sorted(range(len(strings)), key=lambda i: len(strings[i]))
    for lo in range(0, len(order), batch_size):
        idx = order[lo:lo + batch_size]
        ids, lengths = net.encode([strings[i] for i in idx])
        out[idx] = sum_log_probs(net.forward(ids)[1], ids, lengths)
    return out


def cross_entropy(net: CompiledNetwork, strings: Sequence) -> float:
    """The network's cross-entropy on `strings` in nats per symbol, one EOS counted per string
    (DuSell & Chiang's convention): −Σ ln p(w) / Σ (|w| + 1)."""
    strings = list(strings)
    if not strings:
        raise InputError("no strings given")
    return float(-string_log_probs(net, strings).sum() / sum(len(s) + 1 for s in strings))


# --- DuSell & Chiang's tasks as probabilistic real-time PDAs -----------------------------------

def _marked(g, syms: tuple, marker: Any) -> WeightedPDA:
    """S → x S x | marker: push w, read the marker, pop w^R; stop on ⊥ after the marker."""
    p_end = g.probability("S", (marker,))
    t: dict = {}
    for top in (BOTTOM,) + syms:
        for x in syms:
            t[("push", top, x, "push", "push", x)] = g.probability("S", (x, "S", x))
        t[("push", top, marker, "pop", "replace", top)] = p_end
    for x in syms:
        t[("pop", x, x, "pop", "pop", None)] = 1
    return WeightedPDA(("push", "pop"), syms + (marker,), syms, t, "push", accepting=("pop",),
                       empty_stack=True, name="marked_reversal_lm")


def _unmarked(g, syms: tuple) -> WeightedPDA:
    """S → x S x | ε: the ε-rule is folded into the first pop (or the stop on ⊥)."""
    p_end = g.probability("S", ())
    t: dict = {}
    for top in (BOTTOM,) + syms:
        for x in syms:
            t[("push", top, x, "push", "push", x)] = g.probability("S", (x, "S", x))
    for x in syms:
        t[("push", x, x, "pop", "pop", None)] = p_end
        t[("pop", x, x, "pop", "pop", None)] = 1
    return WeightedPDA(("push", "pop"), syms, syms, t, "push", accepting=("push", "pop"),
                       empty_stack=True, name="unmarked_reversal_lm")


def _padded(g, syms: tuple) -> WeightedPDA:
    """S → x S x | P; P → A_c; A_c → c A_c | ε: state pad_c emits the padding; ending it is
    folded into the first pop (or the stop on ⊥)."""
    p_end = g.probability("S", ("P",))
    pads = {c: ("pad", c) for c in syms}
    choose = {c: g.probability("P", (pads[c],)) for c in syms}
    more = {c: g.probability(pads[c], (c, pads[c])) for c in syms}
    done = {c: g.probability(pads[c], ()) for c in syms}
    no_pad = p_end * sum(choose[c] * done[c] for c in syms)
    t: dict = {}
    for top in (BOTTOM,) + syms:
        for x in syms:
            t[("push", top, x, "push", "push", x)] = g.probability("S", (x, "S", x))
            t[("push", top, x, f"pad_{x}", "replace", top)] = p_end * choose[x] * more[x]
            t[(f"pad_{x}", top, x, f"pad_{x}", "replace", top)] = more[x]
    for x in syms:
        t[("push", x, x, "pop", "pop", None)] = no_pad
        for c in syms:
            t[(f"pad_{c}", x, x, "pop", "pop", None)] = done[c]
        t[("pop", x, x, "pop", "pop", None)] = 1
    states = ("push",) + tuple(f"pad_{c}" for c in syms) + ("pop",)
    return WeightedPDA(states, syms, syms, t, "push", accepting=states, empty_stack=True,
                       name="padded_reversal_lm")


def _dyck(g) -> WeightedPDA:
    """S → S T | T; T → l S r | l r, deterministically: reading l pushes it with probability
    P(T → l …) and enters state open; there the choice between l r and l S r is made by the
    next symbol (r with P(l r) / P(l …), else the first bracket of the inner S); state after (a
    T ended): another T with probability s, else close the enclosing bracket (or stop on ⊥)."""
    syms = tuple(g.terminals)
    pairs = [(syms[i], syms[i + 1]) for i in range(0, len(syms), 2)]
    s = g.probability("S", ("S", "T"))
    opens = tuple(lo for lo, _ in pairs)
    start = {lo: g.probability("T", (lo, "S", hi)) + g.probability("T", (lo, hi))
             for lo, hi in pairs}
    t: dict = {}
    for top in (BOTTOM,) + opens:
        for lo in opens:
            t[("after", top, lo, "open", "push", lo)] = s * start[lo]
            if top is BOTTOM:
                t[("start", top, lo, "open", "push", lo)] = start[lo]
    for lo, hi in pairs:
        leaf = g.probability("T", (lo, hi)) / start[lo]
        t[("open", lo, hi, "after", "pop", None)] = leaf
        for lo2 in opens:
            t[("open", lo, lo2, "open", "push", lo2)] = (1 - leaf) * start[lo2]
        t[("after", lo, hi, "after", "pop", None)] = 1 - s
    t = {k: w for k, w in t.items() if w}
    return WeightedPDA(("start", "open", "after"), syms, opens, t, "start", accepting=("after",),
                       empty_stack=True, name=f"{g.name}_lm")


LM_TASKS = ("marked_reversal", "unmarked_reversal", "padded_reversal", "dyck", "hardest_cfl")


def dusell_lm_machine(task: str, **params: Any) -> tuple[WeightedPDA, Any]:
    """(probabilistic real-time PDA, PCFG) for one of DuSell & Chiang's tasks (`LM_TASKS`): the
    machine's p(w) (module docstring) is the PCFG's p_G(w) for every string. ``params`` go to
    the task's grammar function (`marked_reversal_grammar` with ``alphabet``, ``marker``,
    ``p_end``, ``mean_length``; `unmarked_reversal_grammar`; `padded_reversal_grammar`;
    `dusell_dyck_grammar` with ``k``, …). For ``"hardest_cfl"`` (`hardest_cfl_lm`, with
    ``length_weight`` and the parameters of `hardest_cfl_grammar`) the PCFG is the authors'
    weighted grammar renormalised with the length weight λ: p(w) ∝ weight_G(w)·λ^|w|, so
    p(w | |w|) is the grammar's, which is what DuSell & Chiang's metric uses."""
    if task == "marked_reversal":
        g = marked_reversal_grammar(**params)
        marker = params.get("marker", BLANK)
        syms = tuple(x for x in g.terminals if x != marker)
        return _marked(g, syms, marker), g
    if task == "unmarked_reversal":
        g = unmarked_reversal_grammar(**params)
        return _unmarked(g, tuple(g.terminals)), g
    if task == "padded_reversal":
        g = padded_reversal_grammar(**params)
        return _padded(g, tuple(g.terminals)), g
    if task == "dyck":
        g = dusell_dyck_grammar(**params)
        return _dyck(g), g
    if task == "hardest_cfl":
        return hardest_cfl_lm(**params)
    raise InputError(f"unknown task {task!r}; choose one of {LM_TASKS}")


def example_lm_machine() -> WeightedPDA:
    """A small probabilistic real-time PDA: DuSell & Chiang's marked reversal over {0, 1} and the
    marker (`dusell_lm_machine`), with p_end = 1/4 so that short strings end."""
    return dusell_lm_machine("marked_reversal", p_end=Fraction(1, 4))[0]


__all__ = ["HEADS", "LM_TASKS", "NSLMChart", "NSLMNet", "PDALMConfig", "PDALanguageModel",
           "as_language_model", "compile_ns_lm", "cross_entropy", "dusell_lm_machine",
           "example_lm_machine", "lm_rows", "reachable_heads", "string_log_probs",
           "sum_log_probs"]

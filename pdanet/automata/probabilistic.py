"""Probabilistic machines: deterministic probabilistic FSAs (`PFSA`) and real-time probabilistic
DPDAs (`ProbabilisticDPDA`), with depth-bounded versions (`BoundedPDPDA`) that are finite-state.

A probabilistic machine is a *language model*: after every prefix it outputs the distribution of
the next symbol over Σ ∪ {EOS} (``output_kind == "distribution"``; the output vector is in the
order of ``output_alphabet`` = the input symbols, then `EOS` last). The probability of a string
w = a1…an is ∏ p(a_t | a1…a_{t-1}) · p(EOS | w) (Svete & Cotterell 2023, §2: a deterministic
PFSA with final weights). A symbol of probability 0 leads to the dead configuration (output: the
zero vector), which no string of positive probability reaches.

Weights. Probabilities are Fractions (or ints), kept exact, or floats; an entry that is a bool,
negative, NaN or infinite is refused (AutomatonError naming the state and symbol), and every
state's row (its symbols' probabilities plus its EOS probability) must sum to one: exactly when
every entry of the row is exact, within `FLOAT_TOLERANCE` otherwise (AutomatonError naming the
state and the sum). A probability of 0 is the same as a missing transition (it is dropped).

Determinism. One target per (state, symbol) (per (state, symbol, top) for a PDPDA): a value
giving several targets raises DeterminismError. A ProbabilisticDPDA is real-time: an ε-move
(`EPSILON` as the symbol) raises AutomatonError. Its moves follow the `DPDA` conventions
(pushed strings top first, `BOTTOM` never removed); the distribution depends on (state, top).

Depth bounds. ``pdpda.bounded(m, overflow=…)`` keeps the configurations of depth ≤ m. A move
that would go deeper is the *overflow* mass of its configuration; ``overflow="refuse"``
(default) requires that no reachable configuration has any (`BoundedPDPDA.to_pfsa` raises
AutomatonError naming the configuration and the symbol), ``overflow="renormalise"`` drops the
overflowing moves and divides the rest of the row by the mass left (the distribution
conditioned on staying within depth m, locally at each configuration).
"""

from __future__ import annotations

import math
import numbers
import os
from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import (
    BatchTrace,
    Machine,
    StateIndexed,
    hold_after_length,
    index_states,
    short_name,
)
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA, BoundedPDA, PDAConfig
from pdanet.automata.spec import FORMAT_VERSION, _state, _sym, _syms
from pdanet.errors import AutomatonError, DeterminismError, InputError, SearchBoundError

EOS = "<EOS>"
#: how far a row of float probabilities may sum from one (rows of exact entries sum to one exactly)
FLOAT_TOLERANCE = 1e-9
OVERFLOW_MODES = ("refuse", "renormalise")
DEFAULT_MAX_LENGTH = 100_000


# --- probabilities ---------------------------------------------------------------------------

def probability(value: Any, where: str) -> Fraction | float:
    """A probability as a Fraction (ints, Fractions, sympy/numpy rationals) or a float;
    AutomatonError naming `where` for a bool, a non-number, NaN, ±inf, or a negative value."""
    if isinstance(value, (bool, np.bool_)):
        raise AutomatonError(f"{where}: probability {value!r} is a boolean; give a number in "
                             "[0, 1] (a Fraction for exact weights)")
    if isinstance(value, (numbers.Rational, np.integer)):
        p: Fraction | float = Fraction(int(value.numerator), int(value.denominator)) \
            if isinstance(value, numbers.Rational) else Fraction(int(value))
    elif isinstance(value, (numbers.Real, np.floating)):
        p = float(value)
        if not math.isfinite(p):
            raise AutomatonError(f"{where}: probability {value!r} is not finite")
    elif hasattr(value, "is_Rational") and getattr(value, "is_Rational", False):  # sympy
        p = Fraction(int(value.p), int(value.q))
    else:
        raise AutomatonError(f"{where}: probability {value!r} is not a number; give a Fraction, "
                             "an int or a float in [0, 1]")
    if p < 0:
        raise AutomatonError(f"{where}: probability {value!r} is negative; probabilities are in "
                             "[0, 1]")
    if p > 1:
        raise AutomatonError(f"{where}: probability {value!r} is greater than 1")
    return p


def check_row(values: Iterable[Fraction | float], where: str) -> None:
    """AutomatonError unless the row sums to one (exactly for exact rows, within
    `FLOAT_TOLERANCE` when some entry is a float); the message names `where` and the sum."""
    values = list(values)
    exact = all(isinstance(v, Fraction) for v in values)
    total = sum(values, Fraction(0)) if exact else math.fsum(float(v) for v in values)
    if exact and total == 1:
        return
    if not exact and abs(total - 1.0) <= FLOAT_TOLERANCE:
        return
    shown = str(total) if exact else repr(total)
    how = "exactly (its entries are exact)" if exact else f"within {FLOAT_TOLERANCE:g}"
    raise AutomatonError(f"{where}: the next-symbol probabilities (EOS included) sum to {shown}, "
                         f"not to 1 {how}; fix the weights of this row (or normalise it)")


def _as_text(p: Fraction | float) -> str | float:
    """A probability in a machine file: exact ones as the string "n/d" (or "n"), floats as JSON
    numbers."""
    return str(p) if isinstance(p, Fraction) else float(p)


def _float_rows(rows: np.ndarray) -> np.ndarray:
    return np.vectorize(float, otypes=[np.float64])(rows) if rows.size else \
        np.zeros(rows.shape, dtype=np.float64)


def _dumps(d: dict) -> str:
    """JSON text: `pdanet.automata.spec.format_json`."""
    from pdanet.automata.spec import format_json

    return format_json(d)


class _LanguageModel(Machine):
    """What the probabilistic machines share: the output alphabet (Σ then EOS), string
    probabilities, sampling, and saving (their file kinds are written here, read by
    `pdanet.automata.io`)."""

    output_kind = "distribution"

    def _eos_alphabet(self) -> Alphabet:
        eos = EOS if EOS not in self.alphabet else "<EOS#>"
        return Alphabet(tuple(self.alphabet) + (eos,))

    @property
    def eos(self) -> Hashable:
        """The end-of-string symbol: the last symbol of ``output_alphabet``."""
        return self.output_alphabet.symbols[-1]

    def exact_row(self, config: Any) -> tuple:
        """The next-symbol probabilities in `config` as given (Fractions or floats), in the order
        of ``output_alphabet``; zeros for the dead configuration."""
        raise NotImplementedError

    @property
    def is_exact(self) -> bool:
        raise NotImplementedError

    def output(self, config: Any) -> np.ndarray:
        """The next-symbol distribution in `config` as a float64 vector (EOS last)."""
        return np.array([float(p) for p in self.exact_row(config)], dtype=np.float64)

    def next_distribution(self, prefix: Any) -> dict:
        """{symbol: p(symbol | prefix)} over Σ ∪ {EOS}, exact where the weights are;
        InputError for a prefix of probability 0 (it has no next-symbol distribution)."""
        symbols = self.alphabet.split(prefix)
        config = self.run(symbols)
        if self.is_dead(config):
            raise InputError(f"the prefix {self.alphabet.format(symbols)!r} has probability 0: "
                             "it has no next-symbol distribution")
        return dict(zip(self.output_alphabet.symbols, self.exact_row(config)))

    def prob(self, string: Any, eos: bool = True) -> Fraction | float:
        """p(string) = ∏ p(a_t | prefix) (· p(EOS | string) with ``eos``; without it the prefix
        probability): a Fraction when every factor is exact, else a float."""
        symbols = self.alphabet.split(string)
        config = self.initial()
        total: Fraction | float = Fraction(1)
        k = len(self.alphabet)
        for sym in symbols:
            if self.is_dead(config):
                return Fraction(0)
            total = total * self.exact_row(config)[self.alphabet.index(sym)]
            config = self.step(config, sym)
        if eos:
            total = total * (self.exact_row(config)[k] if not self.is_dead(config) else 0)
        return total

    def logprob(self, string: Any, eos: bool = True) -> float:
        """ln p(string) (natural logarithm; -inf for probability 0), summed factor by factor so
        that long strings do not underflow; with ``eos`` the EOS factor is included."""
        symbols = self.alphabet.split(string)
        config = self.initial()
        total = 0.0
        k = len(self.alphabet)
        for sym in symbols + ((None,) if eos else ()):
            if self.is_dead(config):
                return -math.inf
            p = self.exact_row(config)[k if sym is None else self.alphabet.index(sym)]
            if p == 0:
                return -math.inf
            total += _log(p)
            if sym is not None:
                config = self.step(config, sym)
        return total

    def sample(self, n: int, rng: np.random.Generator | int | None = None, *walk: Any,
               max_length: int = DEFAULT_MAX_LENGTH, **walk_options: Any) -> Any:
        """n strings (tuples of symbols) drawn from the machine's distribution, symbol by
        symbol until EOS. InputError when a string reaches ``max_length`` symbols without EOS
        (a machine whose strings are that long, or that puts mass on infinite strings).

        Called as ``sample(n, length, rng)`` — the verifier's protocol for random live strings
        (`pdanet.verify.strings`) — it returns `live_walks` instead; that protocol's options
        (e.g. ``busy``, for stack machines) do not apply to walks of a language model and are
        ignored."""
        if walk:
            return self.live_walks(n, rng, walk[0])
        if walk_options:
            raise InputError(f"sample() got unexpected options {sorted(walk_options)}")
        return self._sample(n, rng, max_length)

    def live_walks(self, n: int, length: Any, rng: np.random.Generator | int | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
        """(ids (n, length) padded with -1, lengths): walks of up to `length` symbols, each
        drawn from the next-symbol distribution without EOS (renormalised), so every prefix has
        positive probability; a walk stops early in a configuration whose only continuation is
        EOS."""
        n, length = _count(n, "n"), _count(length, "length")
        rng = np.random.default_rng(rng)
        k = len(self.alphabet)
        ids = np.full((n, length), -1, dtype=np.int64)
        lengths = np.zeros(n, dtype=np.int64)
        for b in range(n):
            config = self.initial()
            for t in range(length):
                row = self.output(config)[:k]
                if not row.sum() > 0:
                    break
                a = int(rng.choice(k, p=row / row.sum()))
                ids[b, t] = a
                lengths[b] = t + 1
                config = self.step(config, self.alphabet.symbols[a])
        return ids, lengths

    def _sample(self, n: int, rng: np.random.Generator | int | None, max_length: int
                ) -> list[tuple]:
        n = _count(n, "n")
        max_length = _count(max_length, "max_length")
        rng = np.random.default_rng(rng)
        k = len(self.alphabet)
        syms = self.alphabet.symbols
        out = []
        for _ in range(n):
            config, string = self.initial(), []
            while True:
                row = self.output(config)
                a = int(rng.choice(k + 1, p=row / row.sum()))
                if a == k:
                    break
                if len(string) >= max_length:
                    raise InputError(f"a sampled string reached max_length={max_length} symbols "
                                     "without EOS; raise max_length")
                string.append(syms[a])
                config = self.step(config, syms[a])
            out.append(tuple(string))
        return out

    def to_dict(self) -> dict:
        raise NotImplementedError

    def dumps(self) -> str:
        """The machine as JSON text (see `to_dict`)."""
        return _dumps(self.to_dict())

    def save(self, path: str | os.PathLike) -> None:
        """Write the machine file (read back by `pdanet.load`)."""
        try:
            data = self.dumps().encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{self!r} has a name, state or symbol that UTF-8 cannot store; "
                             "rename it") from None
        Path(path).write_bytes(data)


def _count(v: Any, name: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
        raise InputError(f"{name}={v!r} must be a non-negative integer")
    return int(v)


def _log(p: Fraction | float) -> float:
    """ln p as a float, accurate for Fractions too small for a float."""
    if isinstance(p, Fraction):
        return math.log(p.numerator) - math.log(p.denominator)
    return math.log(p)


# --- PFSA ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PFSAConfig:
    """A PFSA configuration: the current state (None = dead: a prefix of probability 0)."""

    state: Hashable | None


class PFSA(StateIndexed, _LanguageModel):
    """A deterministic probabilistic finite-state automaton (immutable, validated).

    ``transitions`` maps (q, a) to (target, p): in state q the next symbol is a with probability
    p, after which the state is the target. ``final`` maps q to p(EOS | q) (missing: 0). Every
    state's row — its transitions' probabilities and its EOS probability — sums to one (see the
    module docstring for exactness, tolerance and the errors). Svete & Cotterell (2023), Def. 2.3
    (deterministic, with final weights as the EOS probability).
    """

    fixed_width_fields = True
    file_kind = "pfsa"

    def __init__(self, states: Iterable[Hashable], alphabet: Alphabet | Iterable[Hashable] | str,
                 transitions: Mapping[tuple[Hashable, Hashable], Any], start: Hashable,
                 final: Mapping[Hashable, Any] | None = None, name: str | None = None):
        self.states, index = index_states(states, none_is_dead=True)
        self._state_index = index
        self.alphabet = Alphabet.of(alphabet)
        self.output_alphabet = self._eos_alphabet()
        self.name = name
        if start not in index:
            raise AutomatonError(f"start state {start!r} is not among the declared states; add "
                                 "it to `states`")
        self.start = start
        n, k = len(self.states), len(self.alphabet)
        table = np.full((n, k), -1, dtype=np.int64)
        rows = np.full((n, k + 1), Fraction(0), dtype=object)
        trans: dict = {}
        for key, value in dict(transitions).items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise AutomatonError(f"transition key {key!r} must be a pair (state, symbol)")
            q, a = key
            if q not in index:
                raise AutomatonError(f"transition {key!r} leaves undeclared state {q!r}")
            if a is EPSILON or a not in self.alphabet:
                raise AutomatonError(f"transition {key!r} reads {a!r}, which is not in the "
                                     f"alphabet {self.alphabet!r} (a PFSA has no ε-moves)")
            if isinstance(value, (dict, set, frozenset, list)):
                raise DeterminismError(
                    f"transition {key!r} gives several targets {value!r}: a PFSA is "
                    "deterministic, one (target, probability) pair per (state, symbol)")
            if not (isinstance(value, tuple) and len(value) == 2):
                raise AutomatonError(f"transition {key!r} must map to a pair (target, "
                                     f"probability), got {value!r}")
            target, p = value
            if target not in index:
                raise AutomatonError(f"transition {key!r} goes to undeclared state {target!r}")
            p = probability(p, f"transition {key!r}")
            if p == 0:
                continue
            trans[(q, a)] = (target, p)
            table[index[q], self.alphabet.index(a)] = index[target]
            rows[index[q], self.alphabet.index(a)] = p
        fin: dict = {}
        for q, p in dict(final or {}).items():
            if q not in index:
                raise AutomatonError(f"final (EOS) probability given for undeclared state {q!r}")
            p = probability(p, f"EOS probability of state {q!r}")
            if p != 0:
                fin[q] = p
                rows[index[q], k] = p
        for i, q in enumerate(self.states):
            check_row(rows[i], f"state {q!r}")
        self.transitions = trans
        self.final = fin
        self.table = table
        self.table.setflags(write=False)
        self._rows = rows
        self.probs = _float_rows(rows)
        self.probs.setflags(write=False)

    # identity ------------------------------------------------------------------------------
    @cached_property
    def _key(self) -> tuple:
        return (self.states, self.alphabet, frozenset(self.transitions.items()), self.start,
                frozenset(self.final.items()))

    def __repr__(self) -> str:
        label = f" {short_name(self.name)!r}" if self.name else ""
        return f"<PFSA{label}: {len(self.states)} states, {len(self.alphabet)} symbols>"

    @property
    def is_exact(self) -> bool:
        """True when every probability is a Fraction (exact arithmetic throughout)."""
        return all(isinstance(p, Fraction) for p in self._rows.ravel())

    @cached_property
    def log_probs(self) -> np.ndarray:
        """(n, |Σ|+1) natural logarithms of ``probs`` (-inf where 0)."""
        with np.errstate(divide="ignore"):
            out = np.log(self.probs)
        out.setflags(write=False)
        return out

    # protocol -------------------------------------------------------------------------------
    def initial(self) -> PFSAConfig:
        return PFSAConfig(self.start)

    def step(self, config: PFSAConfig, symbol: Hashable) -> PFSAConfig:
        if symbol not in self.alphabet:
            self.alphabet.index(symbol)  # InputError naming the symbol
        if config.state is None:
            return config
        move = self.transitions.get((config.state, symbol))
        return PFSAConfig(None if move is None else move[0])

    def exact_row(self, config: PFSAConfig) -> tuple:
        if config.state is None:
            return (Fraction(0),) * (len(self.alphabet) + 1)
        return tuple(self._rows[self._state_index[config.state]])

    def output(self, config: PFSAConfig) -> np.ndarray:
        if config.state is None:
            return np.zeros(len(self.alphabet) + 1)
        return self.probs[self._state_index[config.state]].copy()

    def is_dead(self, config: PFSAConfig) -> bool:
        return config.state is None

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """Fields ``state`` (index, -1 dead) and ``output`` (B, T+1, |Σ|+1) float64 (zeros
        where dead)."""
        ids, lengths = self.check_ids(ids, lengths)
        B, T = ids.shape
        states = np.empty((B, T + 1), dtype=np.int64)
        cur = np.full(B, self._state_index[self.start], dtype=np.int64)
        states[:, 0] = cur
        for t in range(T):
            active = (t < lengths) & (cur >= 0)
            nxt = self.table[np.maximum(cur, 0), np.where(active, ids[:, t], 0)]
            cur = np.where(active, nxt, cur)
            states[:, t + 1] = cur
        states = hold_after_length(states, lengths)
        table = np.vstack([self.probs, np.zeros((1, self.probs.shape[1]))])
        out = table[np.where(states >= 0, states, len(self.states))]
        return BatchTrace(lengths, {"state": states, "output": out})

    # conversions ------------------------------------------------------------------------------
    def to_dfa(self) -> DFA:
        """The underlying automaton: the same states (in order) and transitions of positive
        probability, accepting the states whose EOS probability is positive."""
        trans = {k: v[0] for k, v in self.transitions.items()}
        return DFA(self.states, self.alphabet, trans, self.start, list(self.final),
                   name=self.name)

    def to_dict(self) -> dict:
        """The JSON-ready dict of the machine file (kind ``"pfsa"``): states, alphabet, start,
        ``final`` rows {state, probability} and ``transitions`` rows {source, symbol, target,
        probability}; exact probabilities are written as strings "n/d", floats as numbers."""
        d: dict[str, Any] = {"format": FORMAT_VERSION, "kind": "pfsa"}
        if self.name is not None:
            d["name"] = str(self.name)
        d["states"] = [_state(q) for q in self.states]
        d["alphabet"] = _syms(self.alphabet, "symbol")
        d["start"] = _state(self.start)
        d["final"] = [{"state": _state(q), "probability": _as_text(self.final[q])}
                      for q in self.states if q in self.final]
        order = {q: i for i, q in enumerate(self.states)}
        keys = sorted(self.transitions, key=lambda k: (order[k[0]], self.alphabet.index(k[1])))
        d["transitions"] = [{"source": _state(q), "symbol": _sym(a, "symbol"),
                             "target": _state(self.transitions[(q, a)][0]),
                             "probability": _as_text(self.transitions[(q, a)][1])}
                            for q, a in keys]
        return d

    def _sample(self, n: int, rng: np.random.Generator | int | None, max_length: int
                ) -> list[tuple]:
        """`sample` for a PFSA, vectorised over the strings."""
        n = _count(n, "n")
        max_length = _count(max_length, "max_length")
        rng = np.random.default_rng(rng)
        k = len(self.alphabet)
        cdf = np.cumsum(self.probs / self.probs.sum(axis=1, keepdims=True), axis=1)
        cdf[:, -1] = 1.0
        state = np.full(n, self._state_index[self.start], dtype=np.int64)
        running = np.ones(n, dtype=bool)
        columns: list[np.ndarray] = []
        while running.any():
            u = rng.random(n)
            a = (cdf[state] <= u[:, None]).sum(axis=1)
            a = np.where(running, np.minimum(a, k), k)
            stop = a == k
            if len(columns) >= max_length and (running & ~stop).any():
                raise InputError(f"a sampled string reached max_length={max_length} symbols "
                                 "without EOS; raise max_length")
            columns.append(np.where(running & ~stop, a, -1))
            running &= ~stop
            state = np.where(running, self.table[state, np.minimum(a, k - 1)], state)
        ids = np.stack(columns, axis=1) if columns else np.zeros((n, 0), np.int64)
        syms = self.alphabet.symbols
        return [tuple(syms[i] for i in row if i >= 0) for row in ids.tolist()]

    @classmethod
    def random(cls, states: int, symbols: int | str | Iterable[Hashable],
               rng: np.random.Generator | int | None = None, *, exact: bool = False,
               density: float = 0.7, eos_zero: float = 0.25, denominator: int = 12,
               name: str | None = None) -> PFSA:
        """A random PFSA on states 0..states-1 over `symbols` (a count: "a", "b", …; or the
        symbols). Each state gets a transition on each symbol with probability ``density`` (at
        least one, unless it ends surely), a uniformly random target, and an EOS probability
        that is 0 with probability ``eos_zero``; row weights are random integers 1..
        ``denominator`` normalised — Fractions with ``exact``, else floats. Every state that
        could not reach a state with EOS > 0 gets EOS > 0, so every string ends with
        probability 1 (the PFSA is tight)."""
        n = _count(states, "states")
        if n < 1:
            raise InputError("a random PFSA needs at least one state")
        if isinstance(symbols, (int, np.integer)) and not isinstance(symbols, bool):
            if not 1 <= symbols <= 26:
                raise InputError(f"symbols={symbols!r}: give 1..26, or the symbols themselves")
            symbols = "abcdefghijklmnopqrstuvwxyz"[: int(symbols)]
        alphabet = Alphabet.of(symbols)
        k = len(alphabet)
        if not (0 <= density <= 1 and 0 <= eos_zero <= 1):
            raise InputError("density and eos_zero are probabilities in [0, 1]")
        rng = np.random.default_rng(rng)
        has = rng.random((n, k)) < density
        for q in np.nonzero(~has.any(axis=1))[0]:
            has[q, rng.integers(k)] = True
        eos = rng.random(n) >= eos_zero
        targets = rng.integers(n, size=(n, k))
        # tightness: every state must reach a state with EOS > 0
        while True:
            good = eos.copy()
            while True:
                reach = good | (has & good[targets]).any(axis=1)
                if (reach == good).all():
                    break
                good = reach
            if good.all():
                break
            eos[np.nonzero(~good)[0][0]] = True
        weights = rng.integers(1, denominator + 1, size=(n, k + 1)) * \
            np.concatenate([has, eos[:, None]], axis=1)
        trans, final = {}, {}
        for q in range(n):
            total = int(weights[q].sum())
            row = [Fraction(int(w), total) if exact else float(w) / total for w in weights[q]]
            for a in range(k):
                if weights[q, a]:
                    trans[(q, alphabet.symbols[a])] = (int(targets[q, a]), row[a])
            if weights[q, k]:
                final[q] = row[k]
        return cls(range(n), alphabet, trans, 0, final, name=name)


# --- probabilistic DPDA -------------------------------------------------------------------------

class ProbabilisticDPDA(StateIndexed, _LanguageModel):
    """A real-time probabilistic DPDA (immutable, validated).

    ``transitions`` maps (q, a, X) to (q2, γ, p): in state q with X on top (a stack symbol or
    `BOTTOM`), the next symbol is a with probability p, and reading it pops X, pushes γ (top
    first, as `DPDA`) and goes to q2. ``final`` maps (q, X) to p(EOS | q, X). The distribution
    depends on (state, top) only and each (state, top) row that occurs sums to one; a
    configuration whose (state, top) has no row is dead (probability 0 of anything). The moves
    form a `DPDA` (``.dpda``), which validates them. The probabilistic PDA of a PCFG in
    Greibach normal form read top-down is of this kind (e.g. `marked_reversal`).
    """

    file_kind = "pdpda"

    def __init__(self, states: Iterable[Hashable], input_alphabet: Any, stack_alphabet: Any,
                 transitions: Mapping[tuple, Any], start: Hashable,
                 final: Mapping[tuple, Any] | None = None, name: str | None = None):
        moves: dict = {}
        probs: dict = {}
        for key, value in dict(transitions).items():
            if not (isinstance(key, tuple) and len(key) == 3):
                raise AutomatonError(f"transition key {key!r} must be a triple (state, input "
                                     "symbol, stack top)")
            if key[1] is EPSILON:
                raise AutomatonError(
                    f"transition {key!r} is an ε-move: a ProbabilisticDPDA is real-time (every "
                    "move reads one symbol, whose probability it carries); remove the ε-move "
                    "(e.g. fold it into the moves before it)")
            if isinstance(value, (dict, set, frozenset, list)):
                raise DeterminismError(
                    f"transition {key!r} gives several moves {value!r}: a ProbabilisticDPDA is "
                    "deterministic, one (target, pushed string, probability) per (state, symbol, "
                    "top)")
            if not (isinstance(value, tuple) and len(value) == 3):
                raise AutomatonError(f"transition {key!r} must map to a triple (target, pushed "
                                     f"string, probability), got {value!r}")
            p = probability(value[2], f"transition {key!r}")
            if p != 0:
                moves[key] = (value[0], value[1])
                probs[key] = p
        self.dpda = DPDA(states, input_alphabet, stack_alphabet, moves, start, name=name)
        self.states, self._state_index = self.dpda.states, self.dpda._state_index
        self.alphabet = self.dpda.alphabet
        self.stack_alphabet = self.dpda.stack_alphabet
        self.output_alphabet = self._eos_alphabet()
        self.start, self.name = start, name
        fin: dict = {}
        for key, p in dict(final or {}).items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise AutomatonError(f"final (EOS) key {key!r} must be a pair (state, top)")
            q, x = key
            if q not in self._state_index:
                raise AutomatonError(f"EOS probability given for undeclared state {q!r}")
            if x is not BOTTOM and x not in self.stack_alphabet:
                raise AutomatonError(f"EOS probability of {key!r}: top {x!r} is neither BOTTOM "
                                     f"nor in the stack alphabet {self.stack_alphabet!r}")
            p = probability(p, f"EOS probability of (state {q!r}, top {x!r})")
            if p != 0:
                fin[key] = p
        n, k, G = len(self.states), len(self.alphabet), len(self.stack_alphabet)
        rows = np.full((n, G + 1, k + 1), Fraction(0), dtype=object)
        growth = np.full((n, G + 1, k), -2, dtype=np.int64)  # -2: no move
        seen = np.zeros((n, G + 1), dtype=bool)
        trans = {}
        for key, (q2, gamma) in moves.items():
            q, a, x = key
            i, j = self._state_index[q], self._top(x)
            rows[i, j, self.alphabet.index(a)] = probs[key]
            growth[i, j, self.alphabet.index(a)] = len(self.dpda.transitions[key][1]) - 1
            seen[i, j] = True
            trans[key] = (q2, self.dpda.transitions[key][1], probs[key])
        for (q, x), p in fin.items():
            i, j = self._state_index[q], self._top(x)
            rows[i, j, k] = p
            seen[i, j] = True
        for i, j in zip(*np.nonzero(seen)):
            x = BOTTOM if j == G else self.stack_alphabet.symbols[j]
            check_row(rows[i, j], f"(state {self.states[i]!r}, top {_sym_text(x)})")
        self.transitions = trans
        self.final = fin
        self._rows = rows
        self.probs = _float_rows(rows)
        self.probs.setflags(write=False)
        self.growth = growth
        self.growth.setflags(write=False)

    def _top(self, x: Hashable) -> int:
        return len(self.stack_alphabet) if x is BOTTOM else self.stack_alphabet.index(x)

    @cached_property
    def _key(self) -> tuple:
        return (self.states, self.alphabet, self.stack_alphabet,
                frozenset(self.transitions.items()), self.start, frozenset(self.final.items()))

    def __repr__(self) -> str:
        label = f" {short_name(self.name)!r}" if self.name else ""
        return (f"<ProbabilisticDPDA{label}: {len(self.states)} states, {len(self.alphabet)} "
                f"input symbols, {len(self.stack_alphabet)} stack symbols>")

    @property
    def is_exact(self) -> bool:
        return all(isinstance(p, Fraction) for p in self._rows.ravel())

    @property
    def is_realtime(self) -> bool:
        return True

    # protocol ----------------------------------------------------------------------------------
    def initial(self) -> PDAConfig:
        return self.dpda.initial()

    def step(self, config: PDAConfig, symbol: Hashable) -> PDAConfig:
        return self.dpda.step(config, symbol)

    def is_dead(self, config: PDAConfig) -> bool:
        return config.state is None

    def exact_row(self, config: PDAConfig) -> tuple:
        if config.state is None:
            return (Fraction(0),) * (len(self.alphabet) + 1)
        return tuple(self._rows[self._state_index[config.state], self._top(config.top)])

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """The `DPDA` fields (``state``, ``stack``, ``depth``, ``top``) and ``output`` (B, T+1,
        |Σ|+1) float64: the row of (state, top), zeros where dead."""
        trace = self.dpda.run_batch(ids, lengths)
        fields = {k: trace.fields[k] for k in ("state", "stack", "depth", "top")}
        fields["output"] = _lookup_rows(self.probs, fields["state"], fields["top"])
        return BatchTrace(trace.lengths, fields)

    def to_dict(self) -> dict:
        """The JSON-ready dict (kind ``"pdpda"``): states, input and stack alphabets, start,
        ``final`` rows {state, top, probability} and ``transitions`` rows {source, symbol, pop,
        target, push (top first), probability}; exact probabilities as strings "n/d"."""
        d: dict[str, Any] = {"format": FORMAT_VERSION, "kind": "pdpda"}
        if self.name is not None:
            d["name"] = str(self.name)
        d["states"] = [_state(q) for q in self.states]
        d["input_alphabet"] = _syms(self.alphabet, "input symbol")
        d["stack_alphabet"] = _syms(self.stack_alphabet, "stack symbol")
        d["start"] = _state(self.start)
        order = {q: i for i, q in enumerate(self.states)}
        d["final"] = [{"state": _state(q), "top": _sym(x, "stack symbol"),
                       "probability": _as_text(self.final[(q, x)])}
                      for q, x in sorted(self.final, key=lambda k: (order[k[0]], self._top(k[1])))]
        keys = sorted(self.transitions, key=lambda k: (order[k[0]], self.alphabet.index(k[1]),
                                                       self._top(k[2])))
        d["transitions"] = [
            {"source": _state(q), "symbol": _sym(a, "input symbol"),
             "pop": _sym(x, "stack symbol"), "target": _state(self.transitions[(q, a, x)][0]),
             "push": _syms(self.transitions[(q, a, x)][1], "stack symbol"),
             "probability": _as_text(self.transitions[(q, a, x)][2])}
            for q, a, x in keys]
        return d

    def bounded(self, m: int, overflow: str = "refuse") -> BoundedPDPDA:
        """The machine restricted to stack depth ≤ m (`BoundedPDPDA`; ``overflow`` is
        "refuse" or "renormalise", see the module docstring)."""
        return BoundedPDPDA(self, m, overflow)


def _sym_text(x: Hashable) -> str:
    return "⊥" if x is BOTTOM else repr(x)


def _lookup_rows(table: np.ndarray, state: np.ndarray, top: np.ndarray) -> np.ndarray:
    """table[state, top] for (B, T+1) index arrays, zeros where state < 0."""
    live = state >= 0
    out = table[np.maximum(state, 0), np.maximum(top, 0)]
    return np.where(live[..., None], out, 0.0)


class BoundedPDPDA(_LanguageModel):
    """A `ProbabilisticDPDA` restricted to stack depth ≤ m: a finite-state language model.

    Configurations are those of the machine of depth ≤ m; a move past depth m leads to the dead
    configuration. Its distribution in a configuration of depth d is the machine's row of
    (state, top), except under ``overflow="renormalise"`` where the moves that would end deeper
    than m (depth d - 1 + |γ| > m) are dropped and the row divided by the mass left. Under
    ``overflow="refuse"`` such moves must have probability 0 in every reachable configuration,
    which `to_pfsa` checks. `to_pfsa` builds the explicit PFSA over the reachable configurations
    (breadth first, initial first), which the language-model constructions compile.
    """

    def __init__(self, machine: ProbabilisticDPDA, m: int, overflow: str = "refuse"):
        if not isinstance(machine, ProbabilisticDPDA):
            raise InputError(f"BoundedPDPDA takes a ProbabilisticDPDA, got "
                             f"{type(machine).__name__}")
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)) or m < 1:
            raise InputError(f"the depth bound must be an integer m ≥ 1, got m={m!r}")
        if overflow not in OVERFLOW_MODES:
            raise InputError(f"overflow={overflow!r} must be one of {OVERFLOW_MODES}")
        self.machine, self.m, self.overflow = machine, int(m), overflow
        self.alphabet = machine.alphabet
        self.output_alphabet = machine.output_alphabet
        self.stack_alphabet = machine.stack_alphabet
        self.name = f"{machine.name or 'pdpda'}[depth≤{self.m}]"

    @property
    def _key(self) -> tuple:
        return (self.machine, self.m, self.overflow)

    def __repr__(self) -> str:
        return f"<BoundedPDPDA m={self.m} overflow={self.overflow!r} of {self.machine!r}>"

    @property
    def is_exact(self) -> bool:
        return self.machine.is_exact

    @cached_property
    def _slack_rows(self) -> list[np.ndarray]:
        """_slack_rows[s][q, x]: the exact row at slack s = m - depth (s ≥ max growth: the
        machine's own row), renormalised when overflow="renormalise"."""
        M = self.machine
        gmax = int(max(M.growth.max(initial=0), 0))
        out = []
        for s in range(gmax + 1):
            rows = M._rows.copy()
            if self.overflow == "renormalise":
                over = M.growth > s
                rows[..., :-1] = np.where(over, Fraction(0), rows[..., :-1])
                for i, j in zip(*np.nonzero(over.any(axis=2))):
                    total = sum(rows[i, j], Fraction(0))
                    if total != 0:
                        rows[i, j] = np.array([v / total for v in rows[i, j]], dtype=object)
            out.append(rows)
        return out

    @cached_property
    def _float_slack_rows(self) -> np.ndarray:
        return np.stack([_float_rows(r) for r in self._slack_rows])

    def _clip(self, config: PDAConfig) -> PDAConfig:
        if config.state is not None and config.depth > self.m:
            return self.machine.dpda.dead_config()
        return config

    def initial(self) -> PDAConfig:
        return self._clip(self.machine.initial())

    def step(self, config: PDAConfig, symbol: Hashable) -> PDAConfig:
        return self._clip(self.machine.step(config, symbol))

    def is_dead(self, config: PDAConfig) -> bool:
        return config.state is None

    def exact_row(self, config: PDAConfig) -> tuple:
        if config.state is None:
            return (Fraction(0),) * (len(self.alphabet) + 1)
        rows = self._slack_rows
        s = min(self.m - config.depth, len(rows) - 1)
        return tuple(rows[s][self.machine.state_index(config.state),
                             self.machine._top(config.top)])

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """The machine's fields with every row dead (-1; output zeros) from the first time its
        depth exceeds m; ``stack`` has width m + 1; ``output`` from the (renormalised) rows."""
        ids, lengths = self.check_ids(ids, lengths)
        trace = BoundedPDA(self.machine.dpda, self.m).run_batch(ids, lengths)
        fields = {k: trace.fields[k] for k in ("state", "stack", "depth", "top")}
        table = self._float_slack_rows
        s = np.clip(self.m - fields["depth"], 0, table.shape[0] - 1)
        live = fields["state"] >= 0
        out = table[s, np.maximum(fields["state"], 0), np.maximum(fields["top"], 0)]
        fields["output"] = np.where(live[..., None], out, 0.0)
        return BatchTrace(trace.lengths, fields)

    def to_pfsa(self, max_states: int = 1_000_000) -> PFSA:
        """The explicit PFSA (built once): states are the reachable configurations
        (`PDAConfig`, depth ≤ m) in breadth-first order, with the bounded machine's rows.
        AutomatonError when a reachable configuration puts positive probability on a move past
        depth m under overflow="refuse" (naming it and the symbol), or has no mass left under
        "renormalise"; SearchBoundError beyond ``max_states`` configurations."""
        cached = self.__dict__.get("_pfsa")
        if cached is not None:
            return cached
        syms = self.alphabet.symbols
        k = len(syms)
        start = self.initial()
        order, seen = [start], {start}
        queue = deque([start])
        trans: dict = {}
        final: dict = {}
        while queue:
            c = queue.popleft()
            row = self.exact_row(c)
            if all(p == 0 for p in row):
                raise AutomatonError(
                    f"configuration {c!r} (reached within depth {self.m}) has no next-symbol "
                    "distribution: every move from it overflows or its (state, top) has no row")
            for a in range(k):
                if row[a] == 0:
                    continue
                c2 = self.step(c, syms[a])
                if c2.state is None:
                    raise AutomatonError(
                        f"configuration {c!r} reads {syms[a]!r} with probability {row[a]} but "
                        f"the move goes past depth {self.m}; use overflow='renormalise' or a "
                        "larger depth bound")
                trans[(c, syms[a])] = (c2, row[a])
                if c2 not in seen:
                    seen.add(c2)
                    order.append(c2)
                    queue.append(c2)
                    if len(order) > max_states:
                        raise SearchBoundError(
                            f"{self!r} has more than max_states={max_states} reachable "
                            "configurations; raise max_states or lower the depth bound")
            if row[k] != 0:
                final[c] = row[k]
        return self._cache("_pfsa", PFSA(order, self.alphabet, trans, start, final,
                                         name=self.name))


def marked_reversal(p_stop: Any = Fraction(1, 4), symbols: str | Iterable[Hashable] = "ab",
                    marker: Hashable = "#", name: str | None = "marked_reversal"
                    ) -> ProbabilisticDPDA:
    """The probabilistic DPDA of w # wᴿ (the PCFG S → a S a | b S b | #, top-down).

    In state "push" every symbol a ∈ `symbols` has probability (1 - p_stop)/|symbols| and is
    pushed; the marker has probability p_stop and moves to "pop" (stack unchanged). In "pop" the
    next symbol is the top, with probability 1, and is popped; at BOTTOM the next symbol is EOS.
    So |w| is geometric: P(|w| = n) = (1 - p_stop)ⁿ p_stop, and each string w # wᴿ has
    probability ((1 - p_stop)/|symbols|)^|w| · p_stop. Exact when p_stop is a Fraction.
    """
    p = probability(p_stop, "p_stop")
    if not 0 < p < 1:
        raise InputError(f"p_stop={p_stop!r} must be strictly between 0 and 1")
    alpha = Alphabet.of(symbols)
    if marker in alpha:
        raise InputError(f"the marker {marker!r} is one of the symbols {alpha!r}")
    each = (1 - p) / len(alpha)
    tops = list(alpha) + [BOTTOM]
    trans: dict = {}
    for x in tops:
        for a in alpha:
            trans[("push", a, x)] = ("push", (a, x), each)
        trans[("push", marker, x)] = ("pop", (x,), p)
    for a in alpha:
        trans[("pop", a, a)] = ("pop", (), 1 if isinstance(p, Fraction) else 1.0)
    return ProbabilisticDPDA(["push", "pop"], tuple(alpha) + (marker,), tuple(alpha), trans,
                             "push", {("pop", BOTTOM): 1}, name=name)


__all__ = ["EOS", "FLOAT_TOLERANCE", "OVERFLOW_MODES", "PFSA", "BoundedPDPDA", "PFSAConfig",
           "ProbabilisticDPDA", "check_row", "marked_reversal", "probability"]

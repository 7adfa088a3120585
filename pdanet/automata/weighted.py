"""Weighted pushdown automata (real-time, or with ε-arcs) and transducers, and Lang's algorithm
as the stack WFA of DuSell & Chiang (2021) §2.4 (Eqs. 1–5), with the memory limit of §5.1.

A `WeightedPDA` transition ``(q, x) —a / w→ (r, v)``: in state q with x on top (a stack symbol or
`BOTTOM`), reading the input symbol a, go to r with weight w and do exactly one stack operation
v: ``("push", y)`` pushes y, ``("replace", y)`` replaces the top by y (``("replace", x)`` is a
no-op; on `BOTTOM` only ``("replace", BOTTOM)`` is allowed), ``("pop", None)`` pops x (never
`BOTTOM`). It is written as a key ``(q, x, a, r, op, y) -> w``. A run is a sequence of
transitions from ``(start, ⊥)``; its weight is the ⊗-product of its transition weights.

ε-arcs. A key with ``a = EPSILON`` is an ε-arc: it reads nothing and does its one stack operation.
A run on a string may take ε-arcs anywhere (before the first symbol, between symbols, after the
last); the string's weight is the ⊕ over all accepting runs that read it. With cycles of ε-arcs
there are infinitely many such runs and the weight is an infinite sum, defined as the closure
(the least solution in the closed semiring; `DivergenceError` where it diverges). A machine with
ε-arcs is not real-time (`is_realtime` is False): Lang's chart, `run_batch` and the NS-RNN compiler
need one input symbol per step, and raise AutomatonError on it; convert it first with
`pdanet.automata.weighted_epsilon.remove_epsilon` (same weight on every nonempty string), or
weigh single strings with `pdanet.automata.weighted_epsilon.string_weight`.

Acceptance. ``accepting=None`` counts every run (the NS-RNN's string sum: the total weight of all
runs on the string, whatever configuration they end in); a set of states counts the runs ending
in one of them; ``empty_stack=True`` further requires the stack to be just `BOTTOM`.

Lang's algorithm (`lang`). Stack symbols are indexed with `BOTTOM` = 0. For 0 ≤ i < t ≤ n,
``gamma[i, t][q, x, r, y]`` is the weight of the runs over steps i+1..t that push y (≠ ⊥) at step
i+1 on top of x in state q, never expose x again, and end in state r with that cell (replaced to
y) on top (Eq. 2). ``alpha[t][r, y]`` is the total weight of runs on the first t symbols ending in
state r with top y (Eqs. 3–4, the sum over i starting at 0). Runs that return to the bottom of the
stack are counted by a bottom level: ``alpha[t][r, ⊥] = β[t][r]`` with β[0] = 1 at the start
state and β[t][r] = ⊕_s β[t−1][s] ⊗ Δ[t][s,⊥→r,⊥] ⊕ ⊕_{k,u,s,z} β[k][u] ⊗ γ[k→t−1][u,⊥→s,z] ⊗
Δ[t][s,z→r,ε] (the paper's model has no such runs when Δ never pops to ⊥ nor replaces ⊥).
The reading (RNS-RNN §3.2) is ``alpha[t] / Σ alpha[t]`` over (state, top) pairs (all zeros when
no run survives). With a window D (§5.1) only ``gamma[i, t]`` with t − i ≤ D are kept: a run
counts iff after every step the top symbol, unless ⊥, was pushed at most D steps before.

Two implementations: `WeightedPDA.chart` in any semiring (exact with Fractions; the oracle,
checked against `brute_force`), and `lang_log_batch`, vectorised over strings, states and
symbols in float64 with one normaliser per chart column (used by `run_batch`, fast enough for
hundreds of strings of length 100).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from pdanet.automata import semiring as srm
from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import BatchTrace, Frozen, Machine, index_states
from pdanet.automata.pda import stack_op
from pdanet.errors import AutomatonError, InputError

OPS = ("push", "replace", "pop")


def op_index(op: str, y: int, G: int) -> int:
    """Position of an operation on the Op axis (size 2G+1): push y → y, replace y → G+y, pop → 2G."""
    return {"push": y, "replace": G + y, "pop": 2 * G}[op]


def valid_ops_mask(G: int) -> np.ndarray:
    """(G, 2G+1) bool: which operations a top x (0 = ⊥) allows: push y ≠ ⊥; replace y ≠ ⊥ from
    x ≠ ⊥, replace ⊥ by ⊥; pop x ≠ ⊥."""
    m = np.zeros((G, 2 * G + 1), dtype=bool)
    m[:, 1:G] = True
    m[1:, G + 1:2 * G] = True
    m[0, G] = True
    m[1:, 2 * G] = True
    return m


@dataclass(frozen=True)
class WPDAConfig:
    """A configuration of the Machine protocol: the prefix read so far (the weighted state of
    the machine after it is a function of the prefix; see `WeightedPDA.chart`)."""

    prefix: tuple = ()


@dataclass(frozen=True)
class Chart:
    """Lang's chart of one string: ``gamma`` (n+1, n+1, Q, G, Q, G), ``alpha`` (n+1, Q, G) in
    ``semiring``, the action tensors ``delta`` (n, Q, G, Q, 2G+1) (index t-1 for step t) and the
    window (None = unlimited)."""

    gamma: np.ndarray
    alpha: np.ndarray
    delta: np.ndarray
    semiring: srm.Semiring
    window: int | None


@dataclass(frozen=True)
class BestRun:
    """The Viterbi run: its log-weight and its transitions in time order (keys
    ``(q, x, a, r, op, y)``); ``weight`` is -inf and ``transitions`` empty when no run counts."""

    weight: float
    transitions: tuple


class WeightedPDA(Machine):
    """A weighted PDA, real-time unless it has ε-arcs (see the module docstring for the
    semantics).

    Weights are values of ``semiring`` (log-weights for "log"/"viterbi", costs for "tropical").
    Undeclared states or symbols, bad operations and invalid weights raise AutomatonError naming
    the transition. ε-arcs (input symbol `EPSILON`) are allowed; see `is_realtime`.
    """

    output_kind = "accept"
    output_alphabet = None

    def __init__(self, states: Iterable[Hashable], input_alphabet: Any, stack_alphabet: Any,
                 transitions: Mapping[tuple, Any], start: Hashable,
                 semiring: srm.Semiring | str = "real", accepting: Iterable[Hashable] | None = None,
                 empty_stack: bool = False, name: str | None = None):
        self.states, self._state_index = index_states(states, none_is_dead=True)
        self.alphabet = Alphabet.of(input_alphabet)
        self.stack_alphabet = Alphabet.of(stack_alphabet)
        self.semiring = srm.get(semiring)
        if start not in self._state_index:
            raise AutomatonError(f"start state {start!r} is not among the declared states")
        self.start = start
        if accepting is not None:
            accepting = frozenset(accepting)
            for q in accepting:
                if q not in self._state_index:
                    raise AutomatonError(f"accepting state {q!r} is not among the declared states")
        self.accepting = accepting
        self.empty_stack = bool(empty_stack)
        self.name = name
        self.transitions = {self._check_key(k): self._check_weight(k, w)
                            for k, w in dict(transitions).items()}

    @cached_property
    def _key(self) -> tuple:
        return (self.states, self.alphabet, self.stack_alphabet, self.semiring, self.start,
                self.accepting, self.empty_stack, frozenset(self.transitions.items()))

    # --- validation ---------------------------------------------------------------------------
    def _check_key(self, key: Any) -> tuple:
        if not (isinstance(key, tuple) and len(key) == 6):
            raise AutomatonError(f"transition key {key!r} must be (q, top, input symbol, r, op, y)")
        q, x, a, r, op, y = key
        where = f"transition {key!r}"
        for s in (q, r):
            if s not in self._state_index:
                raise AutomatonError(f"{where}: state {s!r} is not declared; add it to `states`")
        if a is not EPSILON and a not in self.alphabet:
            raise AutomatonError(f"{where}: input symbol {a!r} is not in {self.alphabet!r}")
        if x is not BOTTOM and x not in self.stack_alphabet:
            raise AutomatonError(f"{where}: top {x!r} is neither BOTTOM nor a stack symbol")
        if op not in OPS:
            raise AutomatonError(f"{where}: operation {op!r} is not one of {OPS}")
        if op == "pop":
            if y is not None and y is not EPSILON:
                raise AutomatonError(f"{where}: a pop takes y = None, got {y!r}")
            if x is BOTTOM:
                raise AutomatonError(f"{where}: BOTTOM cannot be popped")
            return (q, x, a, r, op, None)
        if x is BOTTOM and op == "replace":
            if y is not BOTTOM:
                raise AutomatonError(f"{where}: BOTTOM can only be 'replaced' by BOTTOM (a no-op)")
            return key
        if y is BOTTOM or y not in self.stack_alphabet:
            raise AutomatonError(f"{where}: {op} symbol {y!r} is not in the stack alphabet "
                                 f"{self.stack_alphabet!r}")
        return key

    def _check_weight(self, key: tuple, w: Any) -> Any:
        try:
            return self.semiring.check(w, f"transition {key!r}")
        except InputError as exc:
            raise AutomatonError(str(exc)) from None

    # --- identity -----------------------------------------------------------------------------
    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        eps = "" if self.is_realtime else ", with ε-arcs"
        return (f"<WeightedPDA{label}: {len(self.states)} states, {len(self.alphabet)} input "
                f"symbols, {len(self.stack_alphabet)} stack symbols, {self.semiring.name}{eps}>")

    @cached_property
    def is_realtime(self) -> bool:
        """True when no transition is an ε-arc (every step reads one input symbol)."""
        return not any(k[2] is EPSILON for k in self.transitions)

    @cached_property
    def epsilon_arcs(self) -> dict:
        """The ε-arcs ``{(q, x, EPSILON, r, op, y): w}`` (empty for a real-time machine)."""
        return {k: w for k, w in self.transitions.items() if k[2] is EPSILON}

    def require_realtime(self, what: str) -> None:
        """AutomatonError when the machine has ε-arcs (`what` needs one input symbol per step)."""
        if not self.is_realtime:
            arc = next(iter(self.epsilon_arcs))
            raise AutomatonError(
                f"{what} needs a real-time weighted PDA, but {self!r} has "
                f"{len(self.epsilon_arcs)} ε-arc(s), e.g. {arc!r}: call "
                "pdanet.automata.weighted_epsilon.remove_epsilon(m) first (same weight on every "
                "nonempty string), or weighted_epsilon.string_weight(m, s) for one string")

    @property
    def num_states(self) -> int:
        return len(self.states)

    @property
    def num_stack(self) -> int:
        """G = |Γ| + 1 (stack symbols with BOTTOM at index 0)."""
        return len(self.stack_alphabet) + 1

    def stack_index(self, x: Hashable) -> int:
        return 0 if x is BOTTOM else 1 + self.stack_alphabet.index(x)

    def stack_symbol(self, j: int) -> Hashable:
        return BOTTOM if j == 0 else self.stack_alphabet.symbols[j - 1]

    # --- tensors ------------------------------------------------------------------------------
    def weight_tensor(self, semiring: srm.Semiring | str | None = None) -> np.ndarray:
        """W[a, q, x, r, op] (|Σ|, Q, G, Q, 2G+1) in `semiring` (the machine's by default).
        AutomatonError on a machine with ε-arcs (see `require_realtime`)."""
        self.require_realtime("the weight tensor (Lang's chart, run_batch, the NS-RNN compiler)")
        sr = self.semiring if semiring is None else srm.get(semiring)
        Q, G = self.num_states, self.num_stack
        W = sr.array((len(self.alphabet), Q, G, Q, 2 * G + 1))
        for (q, x, a, r, op, y), w in self.transitions.items():
            yi = 0 if op == "pop" else self.stack_index(y)
            idx = (self.alphabet.index(a), self._state_index[q], self.stack_index(x),
                   self._state_index[r], op_index(op, yi, G))
            W[idx] = srm.convert(np.array([w], dtype=self.semiring.dtype), self.semiring, sr)[0]
        return W

    def final_weights(self, semiring: srm.Semiring | str | None = None) -> np.ndarray:
        """(Q, G) one where a configuration (state, top) counts towards acceptance, else zero."""
        sr = self.semiring if semiring is None else srm.get(semiring)
        mask = np.ones((self.num_states, self.num_stack), dtype=bool)
        if self.accepting is not None:
            rows = np.array([q in self.accepting for q in self.states])
            mask &= rows[:, None]
        if self.empty_stack:
            mask[:, 1:] = False
        out = sr.array(mask.shape)
        out[mask] = sr.one
        return out

    # --- Lang's algorithm ---------------------------------------------------------------------
    def chart(self, string: Any, semiring: srm.Semiring | str | None = None,
              window: int | None = None) -> Chart:
        """Lang's chart of `string` (Eqs. 2–4 with the bottom level; window D of §5.1)."""
        sr = self.semiring if semiring is None else srm.get(semiring)
        ids = self._ids(string)
        if window is not None and (not isinstance(window, (int, np.integer)) or window < 1):
            raise InputError(f"window must be a positive integer or None, got {window!r}")
        W = self._weights_in(sr)
        Q, G = self.num_states, self.num_stack
        n = len(ids)
        delta = W[ids] if n else sr.array((0, Q, G, Q, 2 * G + 1))
        gamma = sr.array((n + 1, n + 1, Q, G, Q, G))
        alpha = sr.array((n + 1, Q, G))
        alpha[0, self._state_index[self.start], 0] = sr.one
        for t in range(1, n + 1):
            push, repl, pop = delta[t - 1, ..., :G], delta[t - 1, ..., G:2 * G], delta[t - 1, ..., 2 * G]
            lo = 0 if window is None else max(0, t - window)
            col = sr.array((t - lo, Q, G, Q, G))
            col[t - 1 - lo] = push                                              # Eq. 2, push
            if t - 1 > lo:                                                      # Eq. 2, replace
                col[: t - 1 - lo] = sr.plus(col[: t - 1 - lo], sr.einsum(
                    "iqxsz,szry->iqxry", gamma[lo:t - 1, t - 1], repl))
            if t - 2 > lo:                                                      # Eq. 2, pop
                X = sr.einsum("kuysz,szr->kuyr", gamma[lo + 1:t - 1, t - 1], pop)
                col[: t - 2 - lo] = sr.plus(col[: t - 2 - lo], sr.einsum(
                    "ikqxuy,kuyr->iqxry", gamma[lo:t - 2, lo + 1:t - 1], X))
            col[..., 0] = sr.zero
            gamma[lo:t, t] = col
            a = sr.einsum("iqx,iqxry->ry", alpha[lo:t], col)                    # Eq. 4
            beta = sr.einsum("s,sr->r", alpha[t - 1, :, 0], repl[:, 0, :, 0])   # bottom level
            klo = 0 if window is None else max(0, t - 1 - window)
            if t - 1 > klo:
                Xb = sr.einsum("kusz,szr->kur", gamma[klo:t - 1, t - 1, :, 0], pop)
                beta = sr.plus(beta, sr.einsum("ku,kur->r", alpha[klo:t - 1, :, 0], Xb))
            a[:, 0] = beta
            alpha[t] = a
        return Chart(gamma, alpha, delta, sr, window)

    def _weights_in(self, sr: srm.Semiring) -> np.ndarray:
        cache = self.__dict__.setdefault("_wcache", {})
        if sr.name not in cache:
            W = self.weight_tensor(sr)
            for x, opi in np.argwhere(~valid_ops_mask(self.num_stack)):
                W[:, :, x, :, opi] = sr.zero
            cache[sr.name] = W
        return cache[sr.name]

    def _ids(self, string: Any) -> np.ndarray:
        if isinstance(string, np.ndarray):
            return string.astype(np.int64)
        return self.alphabet.encode(string)

    def forward_weights(self, string: Any, semiring=None, window: int | None = None) -> np.ndarray:
        """alpha (n+1, Q, G): the weight of reaching (state, top) after each prefix."""
        return self.chart(string, semiring, window).alpha

    def prefix_weights(self, string: Any, semiring=None, window: int | None = None) -> np.ndarray:
        """(n+1,): the accepting weight of every prefix (the string sum at each step)."""
        ch = self.chart(string, semiring, window)
        sr = ch.semiring
        return sr.einsum("tqx,qx->t", ch.alpha, self.final_weights(sr))

    def string_sum(self, string: Any, semiring=None, window: int | None = None) -> Any:
        """The total weight of the accepting runs on `string` (O(n³))."""
        return self.prefix_weights(string, semiring, window)[-1]

    def accepts(self, string: Any) -> bool:
        """Membership: some accepting run has nonzero weight (boolean semiring, O(n³))."""
        return bool(self.string_sum(string, srm.BOOLEAN))

    def reading(self, string: Any, semiring=None, window: int | None = None,
                states: bool = True) -> np.ndarray:
        """The reading after each prefix: alpha normalised over (state, top) (RNS-RNN §3.2,
        shape (n+1, Q, G)) or, with ``states=False``, over tops (Eq. 5, shape (n+1, G)). Exact
        Fractions in the rational semiring, float64 otherwise; zeros where no run survives."""
        sr = srm.REAL if semiring is None else srm.get(semiring)
        alpha = self.chart(string, sr, window).alpha
        if sr is srm.RATIONAL:
            vals = alpha if states else alpha.sum(axis=1)
        else:
            lowered = np.vectorize(sr.lower, otypes=[np.float64])(alpha) if alpha.size else \
                np.zeros(alpha.shape)
            vals = lowered if states else lowered.sum(axis=1)
        flat = vals.reshape(vals.shape[0], -1)
        tot = flat.sum(axis=1)
        out = np.zeros(flat.shape, dtype=object if sr is srm.RATIONAL else np.float64)
        for t in range(flat.shape[0]):
            if tot[t] != 0:
                out[t] = flat[t] / tot[t]
        return out.reshape(vals.shape)

    # --- Viterbi ------------------------------------------------------------------------------
    def best_run(self, string: Any, window: int | None = None) -> BestRun:
        """The highest-weight accepting run (max-times in log space) and its transitions."""
        sr = srm.VITERBI
        ch = self.chart(string, sr, window)
        n = ch.alpha.shape[0] - 1
        final = ch.alpha[n] + self.final_weights(sr)
        if not np.isfinite(final.max()):
            return BestRun(-math.inf, ())
        r, y = np.unravel_index(int(np.argmax(final)), final.shape)
        ids = self._ids(string)
        ops: list = []
        self._trace_alpha(ch, ids, n, int(r), int(y), ops)
        return BestRun(float(final.max()), tuple(ops))

    def _op_key(self, ids, t, q, x, r, opi) -> tuple:
        G = self.num_stack
        if opi == 2 * G:
            op, y = "pop", None
        elif opi >= G:
            op, y = "replace", self.stack_symbol(opi - G)
        else:
            op, y = "push", self.stack_symbol(opi)
        return (self.states[q], self.stack_symbol(x), self.alphabet.symbols[ids[t - 1]],
                self.states[r], op, y)

    def _lo(self, ch: Chart, t: int) -> int:
        return 0 if ch.window is None else max(0, t - ch.window)

    def _trace_alpha(self, ch, ids, t, r, y, ops) -> None:
        if y == 0:
            return self._trace_beta(ch, ids, t, r, ops)
        lo = self._lo(ch, t)
        cand = ch.alpha[lo:t] + ch.gamma[lo:t, t][..., r, y]
        i, q, x = np.unravel_index(int(np.argmax(cand)), cand.shape)
        self._trace_alpha(ch, ids, lo + int(i), int(q), int(x), ops)
        self._trace_gamma(ch, ids, lo + int(i), t, int(q), int(x), r, y, ops)

    def _trace_beta(self, ch, ids, t, r, ops) -> None:
        if t == 0:
            return
        G = self.num_stack
        d = ch.delta[t - 1]
        best = (ch.alpha[t - 1, :, 0] + d[:, 0, r, G], "repl")
        s = int(np.argmax(best[0]))
        bval = best[0][s]
        klo = 0 if ch.window is None else max(0, t - 1 - ch.window)
        if t - 1 > klo:
            cand = (ch.alpha[klo:t - 1, :, 0][:, :, None, None]
                    + ch.gamma[klo:t - 1, t - 1, :, 0] + d[:, :, r, 2 * G][None, None])
            if cand.max() > bval:
                k, u, s2, z = np.unravel_index(int(np.argmax(cand)), cand.shape)
                self._trace_beta(ch, ids, klo + int(k), int(u), ops)
                self._trace_gamma(ch, ids, klo + int(k), t - 1, int(u), 0, int(s2), int(z), ops)
                ops.append(self._op_key(ids, t, int(s2), int(z), r, 2 * G))
                return
        self._trace_beta(ch, ids, t - 1, s, ops)
        ops.append(self._op_key(ids, t, s, 0, r, G))
        return

    def _trace_gamma(self, ch, ids, i, t, q, x, r, y, ops) -> None:
        G = self.num_stack
        d = ch.delta[t - 1]
        options = []
        if i == t - 1:
            options.append((d[q, x, r, y], ("push",)))
        if i <= t - 2:
            cand = ch.gamma[i, t - 1, q, x] + d[:, :, r, G + y]
            s, z = np.unravel_index(int(np.argmax(cand)), cand.shape)
            options.append((cand[s, z], ("repl", int(s), int(z))))
        if i <= t - 3:
            cand = (ch.gamma[i, i + 1:t - 1, q, x, :, y][:, :, None, None]
                    + ch.gamma[i + 1:t - 1, t - 1, :, y] + d[:, :, r, 2 * G][None, None])
            k, u, s, z = np.unravel_index(int(np.argmax(cand)), cand.shape)
            options.append((cand[k, u, s, z], ("pop", i + 1 + int(k), int(u), int(s), int(z))))
        _, how = max(options, key=lambda o: o[0])
        if how[0] == "push":
            ops.append(self._op_key(ids, t, q, x, r, y))
        elif how[0] == "repl":
            _, s, z = how
            self._trace_gamma(ch, ids, i, t - 1, q, x, s, z, ops)
            ops.append(self._op_key(ids, t, s, z, r, G + y))
        else:
            _, k, u, s, z = how
            self._trace_gamma(ch, ids, i, k, q, x, u, y, ops)
            self._trace_gamma(ch, ids, k, t - 1, u, y, s, z, ops)
            ops.append(self._op_key(ids, t, s, z, r, 2 * G))

    # --- brute force --------------------------------------------------------------------------
    def brute_force(self, string: Any, semiring=None, window: int | None = None) -> np.ndarray:
        """alpha (n+1, Q, G) by explicit simulation of all runs (configurations with the push
        time of every cell; exponential — an oracle for short strings)."""
        sr = self.semiring if semiring is None else srm.get(semiring)
        W = self._weights_in(sr)
        ids = self._ids(string)
        Q, G = self.num_states, self.num_stack
        configs = {(self._state_index[self.start], ((0, -1),)): sr.one}
        alpha = sr.array((len(ids) + 1, Q, G))
        self._tally(alpha[0], configs, sr)
        for t, a in enumerate(ids, start=1):
            new: dict = {}
            for (q, stack), w in configs.items():
                x = stack[-1][0]
                for r in range(Q):
                    for opi in range(2 * G + 1):
                        wt = W[a, q, x, r, opi]
                        if sr.is_zero(wt):
                            continue
                        if opi == 2 * G:
                            st = stack[:-1]
                        elif opi >= G:
                            st = stack[:-1] + ((opi - G, stack[-1][1]),)
                        else:
                            st = stack + ((opi, t - 1),)
                        if window is not None and st[-1][0] != 0 and t - st[-1][1] > window:
                            continue
                        key = (r, st)
                        v = sr.times(w, wt)
                        new[key] = sr.plus(new[key], v) if key in new else v
            configs = new
            self._tally(alpha[t], configs, sr)
        return alpha

    @staticmethod
    def _tally(row: np.ndarray, configs: dict, sr: srm.Semiring) -> None:
        for (q, stack), w in configs.items():
            row[q, stack[-1][0]] = sr.plus(row[q, stack[-1][0]], w)

    # --- Machine protocol ---------------------------------------------------------------------
    def initial(self) -> WPDAConfig:
        return WPDAConfig(())

    def step(self, config: WPDAConfig, symbol: Hashable) -> WPDAConfig:
        self.alphabet.index(symbol)
        return WPDAConfig(config.prefix + (symbol,))

    def output(self, config: WPDAConfig) -> bool:
        return self.accepts(config.prefix)

    def is_dead(self, config: WPDAConfig) -> bool:
        """True when no run survives the prefix (no configuration has nonzero weight)."""
        return not bool(self.forward_weights(config.prefix, srm.BOOLEAN)[-1].any())

    def dead_batch(self, fields: dict) -> np.ndarray:
        """Dead positions of a `run_batch` trace: no run survives (the reading is all zeros)."""
        rd = np.asarray(fields["reading"])
        return ~(rd.reshape(rd.shape[:-2] + (-1,)) > 0).any(axis=-1)

    def log_alpha_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None,
                        window: int | None = None) -> np.ndarray:
        """log alpha (B, T+1, Q, G) float64 of a padded batch by `lang_log_batch` (rows past a
        string's length repeat its last value); strings are grouped by length."""
        ids, lengths = self.check_ids(ids, lengths)
        B, T = ids.shape
        Q, G = self.num_states, self.num_stack
        if window is not None and (isinstance(window, bool) or
                                   not isinstance(window, (int, np.integer)) or window < 1):
            raise InputError(f"window must be a positive integer or None, got {window!r}")
        W = self._weights_in(srm.LOG)
        pad = np.full((1,) + W.shape[1:], -np.inf)                  # padding: identity moves
        for q in range(Q):
            for x in range(G):
                pad[0, q, x, q, G + x] = 0.0
        W = np.concatenate([W, pad])
        out = np.full((B, T + 1, Q, G), -np.inf)
        order = np.argsort(lengths, kind="stable")
        per_row = lambda n: G * Q * G * Q * (n + 1) ** 2
        lo = 0
        while lo < B:
            hi = lo + 1
            while hi < B and (hi - lo + 1) * per_row(int(lengths[order[hi]])) <= _CHUNK:
                hi += 1
            rows = order[lo:hi]
            n = int(lengths[rows].max())
            sub = np.where(np.arange(n)[None, :] < lengths[rows, None], ids[rows, :n], len(W) - 1)
            la = lang_log_batch(W[sub], self._state_index[self.start], window)
            for j, b in enumerate(rows):
                k = int(lengths[b])
                out[b, : k + 1], out[b, k + 1:] = la[j, : k + 1], la[j, k]
            lo = hi
        return out

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None,
                  window: int | None = None) -> BatchTrace:
        """Fields ``reading`` (B, T+1, Q, G) float64 (RNS reading, zeros where no run survives),
        ``log_weight`` (B, T+1) the log accepting weight of each prefix (-inf for zero) and
        ``output`` (bool, weight > 0); from `lang_log_batch` (float64, batched over strings);
        rows past a string's length repeat its last value."""
        ids, lengths = self.check_ids(ids, lengths)
        alpha = self.log_alpha_batch(ids, lengths, window)
        B, T1 = alpha.shape[:2]
        flat = alpha.reshape(B, T1, -1)
        tot = _logsumexp(flat)
        ok = np.isfinite(tot)
        with np.errstate(invalid="ignore"):
            rd = np.where(ok[..., None], np.exp(flat - np.where(ok, tot, 0.0)[..., None]), 0.0)
        logw = _logsumexp(flat + self.final_weights(srm.LOG).reshape(-1))
        return BatchTrace(lengths, {"reading": rd.reshape(alpha.shape), "log_weight": logw,
                                    "output": np.isfinite(logw)})

    # --- conversion ---------------------------------------------------------------------------
    @classmethod
    def from_pda(cls, pda: Any, semiring: srm.Semiring | str = "real",
                 name: str | None = None) -> WeightedPDA:
        """A real-time `DPDA`/`PDA` with weight one per transition. Each move is normalised to one
        operation (noop = replace the top by itself); a move pushing two or more symbols or an
        ε-move raises AutomatonError. Final-state acceptance keeps the accepting states;
        empty-stack acceptance becomes ``empty_stack=True``."""
        sr = srm.get(semiring)
        trans: dict = {}
        for (q, a, x), value in pda.transitions.items():
            moves = value if isinstance(value, (set, frozenset)) else [value]
            for q2, gamma in moves:
                trans[_one_op_key(q, a, x, q2, gamma)] = sr.one
        final = pda.acceptance == "final_state"
        return cls(pda.states, pda.alphabet, pda.stack_alphabet, trans, pda.start, sr,
                   accepting=pda.accepting if final else None, empty_stack=not final,
                   name=name or pda.name)


def _one_op_key(q, a, x, q2, gamma, out: tuple | None = None) -> tuple:
    where = f"transition ({q!r}, {a!r}, {x!r}) → ({q2!r}, {gamma!r})"
    if a is EPSILON:
        raise AutomatonError(
            f"{where} is an ε-move; the weighted PDA is real-time: remove ε-moves first (fold each "
            "ε-chain into the input move before it)")
    try:
        kind, y = stack_op(x, gamma)
    except AutomatonError:
        raise AutomatonError(
            f"{where} pushes {len(gamma)} symbols; a real-time weighted PDA does one stack "
            "operation per step: rewrite it to push at most one symbol per move (e.g. push one "
            "compound symbol)") from None
    if kind == "noop":
        key = (q, x, a, q2, "replace", x)
    elif kind == "pop":
        key = (q, x, a, q2, "pop", None)
    else:
        key = (q, x, a, q2, kind, y)
    return key if out is None else key + (out,)


_CHUNK = 1 << 23          # numbers in one batch's chart (64 MiB of float64)


def _logsumexp(a: np.ndarray) -> np.ndarray:
    """log Σ exp over the last axis (−inf for all −inf)."""
    m = a.max(axis=-1)
    ms = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - ms[..., None]).sum(axis=-1)) + ms


def lang_log_batch(log_delta: np.ndarray, start: int, window: int | None = None) -> np.ndarray:
    """Lang's algorithm (Eqs. 2–4 with the bottom level; window D of §5.1) for a batch of action
    sequences ``log_delta`` (B, n, Q, G, Q, 2G+1) (natural logs, −inf for zero, invalid
    operations ignored), vectorised over strings, states and symbols in float64; returns log
    alpha (B, n+1, Q, G).

    The chart holds γ[i→t] scaled by e^{P[i]−P[t]} with one normaliser P[t] per column (column
    maximum 1), so the pop term γ[i→k]·γ[k→t−1] needs no rescaling; α is kept as log α − P."""
    B, n, Q, G = log_delta.shape[:4]
    QG = Q * G
    ld = np.where(valid_ops_mask(G)[None, None, None, :, None, :], log_delta, -np.inf)
    m = ld.max(axis=(2, 3, 4, 5)) if n else np.zeros((B, 0))
    m = np.where(np.isfinite(m), m, 0.0)
    d = np.exp(ld - m[:, :, None, None, None, None])
    F = np.zeros((B, G, n + 1, Q, G, n + 1, Q))          # F[b, y, i, q, x, k, u] = E[i→k]
    v = np.full((B, n + 1, Q, G), -np.inf)               # log α − P
    v[:, 0, start, 0] = 0.0
    P = np.zeros((B, n + 1))
    prev = None
    for t in range(1, n + 1):
        lo = 0 if window is None else max(0, t - window)
        plo = 0 if window is None else max(0, t - 1 - window)
        dt = d[:, t - 1]
        col = np.zeros((B, t - lo, Q, G, Q, G))
        col[:, -1] = dt[..., :G]                                             # push
        Y = dt[:, :, 0, :, G][:, None]                                       # ⊥ → ⊥
        if t >= 2:
            rep = np.einsum("bkqxsz,bszry->bkqxry", prev[:, lo - plo:], dt[..., G:2 * G])
            col[:, :-1] += rep                                               # replace
            X = np.einsum("bkuysz,bszr->bkuyr", prev, dt[..., 2 * G])        # (B, K, U, Y, R)
            rows = t - 2 - lo
            if rows > 0:                                                     # pop
                Xk = np.ascontiguousarray(X[:, lo + 1 - plo:].transpose(0, 3, 1, 2, 4))
                Xk = Xk.reshape(B * G, rows * Q, Q)
                n_p = 1 if rows < 24 else 4                  # row pieces: skip the zero part
                cuts = [lo + rows * j // n_p for j in range(n_p + 1)]
                for r0, r1 in itertools.pairwise(cuts):      # rows r0..r1−1, columns > r0
                    blk = F[:, :, r0:r1, :, :, r0 + 1:t - 1, :]
                    s = blk.strides
                    A = np.lib.stride_tricks.as_strided(
                        blk, (B * G, (r1 - r0) * QG, (t - 2 - r0) * Q), (s[1], s[4], s[6]))
                    pop = np.matmul(A, Xk[:, (r0 - lo) * Q:])
                    col[:, r0 - lo:r1 - lo] += pop.reshape(B, G, r1 - r0, Q, G, Q).transpose(
                        0, 2, 3, 4, 5, 1)
            Y = np.concatenate([X[:, :, :, 0], Y], axis=1)
        col[..., 0] = 0.0
        sc = col.max(axis=(1, 2, 3, 4, 5))
        sc = np.where(sc > 0, sc, 1.0)
        E = col / sc[:, None, None, None, None, None]
        P[:, t] = P[:, t - 1] + m[:, t - 1] + np.log(sc)
        F[:, :, lo:t, :, :, t, :] = E.transpose(0, 5, 1, 2, 3, 4)
        vr = v[:, plo:t]
        wm = vr.max(axis=(1, 2, 3))
        wm = np.where(np.isfinite(wm), wm, 0.0)
        ev = np.exp(vr - wm[:, None, None, None])
        acc = np.einsum("biqx,biqxry->bry", ev[:, lo - plo:], E)                 # Eq. 4
        acc[:, :, 0] = np.einsum("biu,biur->br", ev[..., 0], Y) / sc[:, None]    # bottom level
        with np.errstate(divide="ignore"):
            v[:, t] = np.log(acc) + wm[:, None, None]
        prev = E
    return v + P[:, :, None, None]


class WeightedPDT(Frozen):
    """A weighted real-time pushdown transducer: a `WeightedPDA` whose transitions also emit an
    output string. Keys ``(q, x, a, r, op, y, out)`` with ``out`` a tuple of output symbols (()
    for ε). `weight(w, v)` is the total weight of the accepting runs on w that emit v,
    `total_weight(w)` that of all accepting runs on w, and `best(w)` the output of the Viterbi
    run (the best *run*, not the best output summed over runs) with its log-weight."""

    def __init__(self, states, input_alphabet, output_alphabet, stack_alphabet,
                 transitions: Mapping[tuple, Any], start, semiring="real", accepting=None,
                 empty_stack: bool = False, name: str | None = None):
        self.output_alphabet = Alphabet.of(output_alphabet)
        self.semiring = srm.get(semiring)
        trans: dict = {}
        for key, w in dict(transitions).items():
            if not (isinstance(key, tuple) and len(key) == 7):
                raise AutomatonError(f"transducer key {key!r} must be (q, top, a, r, op, y, out)")
            if key[2] is EPSILON:
                raise AutomatonError(f"transducer transition {key!r} is an ε-move; the weighted "
                                     "transducer is real-time (one input symbol per step)")
            out = key[6]
            out = () if out is EPSILON or out is None else \
                (tuple(out) if isinstance(out, (tuple, list)) else (out,))
            for s in out:
                if s not in self.output_alphabet:
                    raise AutomatonError(f"transducer transition {key!r} emits {s!r}, which is "
                                         f"not in the output alphabet {self.output_alphabet!r}")
            trans[key[:6] + (out,)] = w
        self.transitions = trans
        merged: dict = {}
        self._best_out: dict = {}
        for key, w in trans.items():
            base = key[:6]
            merged[base] = self.semiring.plus(merged[base], w) if base in merged else w
        self.pda = WeightedPDA(states, input_alphabet, stack_alphabet, merged, start,
                               self.semiring, accepting, empty_stack, name)
        for key, w in trans.items():
            base = self.pda._check_key(key[:6])
            v = srm.LOG.lift(self.semiring.lower(w)) if self.semiring is not srm.LOG else w
            if base not in self._best_out or v > self._best_out[base][0]:
                self._best_out[base] = (v, key[6])
        self._args = (states, input_alphabet, stack_alphabet, start, accepting, empty_stack)

    @cached_property
    def _key(self) -> tuple:
        return (self.pda, self.output_alphabet, frozenset(self.transitions.items()))

    def __repr__(self) -> str:
        return f"<WeightedPDT wrapping {self.pda!r}>"

    def total_weight(self, string: Any, semiring=None) -> Any:
        return self.pda.string_sum(string, semiring)

    def weight(self, string: Any, output: Sequence, semiring=None) -> Any:
        """Weight of (string, output): Lang's algorithm on the product with output positions."""
        states, ins, stack, start, accepting, empty = self._args
        out = tuple(self.output_alphabet.split(output) if isinstance(output, str) else output)
        m = len(out)
        trans: dict = {}
        for (q, x, a, r, op, y, o), w in self.transitions.items():
            for j in range(m - len(o) + 1):
                if out[j:j + len(o)] == o:
                    k = ((q, j), x, a, (r, j + len(o)), op, y)
                    trans[k] = self.semiring.plus(trans[k], w) if k in trans else w
        acc = [(q, m) for q in (accepting if accepting is not None else states)]
        prod = WeightedPDA([(q, j) for q in states for j in range(m + 1)], ins, stack, trans,
                           (start, 0), self.semiring, acc, empty)
        return prod.string_sum(string, semiring)

    def best(self, string: Any) -> tuple[tuple, float]:
        """(output of the Viterbi run, its log-weight); ((), -inf) when no run is accepted."""
        run = self.pda.best_run(string)
        out: list = []
        for key in run.transitions:
            out.extend(self._best_out[key][1])
        return tuple(out), run.weight

    @classmethod
    def from_dpdt(cls, dpdt: Any, semiring="real") -> WeightedPDT:
        """A real-time `DPDT` with weight one per transition (its domain: accepting states when
        it has some, else every run that does not block)."""
        sr = srm.get(semiring)
        trans = {_one_op_key(q, a, x, q2, g, tuple(o)): sr.one
                 for (q, a, x), (q2, o, g) in dpdt.transitions.items()}
        return cls(dpdt.states, dpdt.alphabet, dpdt.output_alphabet, dpdt.stack_alphabet, trans,
                   dpdt.start, sr, accepting=dpdt.accepting or None, name=dpdt.name)


def hardest_cfl_realtime() -> WeightedPDA:
    """A real-time weighted PDA (weights one) for Greibach's hardest CFL without ``$``
    (`tasks.get("hardest_cfl", dollar=False)`; DuSell & Chiang's variant with ``$`` is
    `tasks.get("hardest_cfl", realtime=True)`): blocks ``x , y , z ;`` where y is a comma-free
    segment between two consecutive commas and the concatenated y's are in D_2. States: b
    (block start), x, y, z; accepting: b with the empty stack. Runs = the ways to choose each y."""
    opens, closes = ("(", "["), (")", "]")
    sym = ("(", ")", "[", "]", ",", ";")
    tops = (BOTTOM,) + opens
    t: dict = {}
    for x in tops:
        for a in ("(", ")", "[", "]"):
            t[("b", x, a, "x", "replace", x)] = 1.0
            t[("x", x, a, "x", "replace", x)] = 1.0
            t[("z", x, a, "z", "replace", x)] = 1.0
        for s in ("b", "x"):
            t[(s, x, ",", "x", "replace", x)] = 1.0
            t[(s, x, ",", "y", "replace", x)] = 1.0
        t[("z", x, ",", "z", "replace", x)] = 1.0
        t[("z", x, ";", "b", "replace", x)] = 1.0
        t[("y", x, ",", "z", "replace", x)] = 1.0
        for o in opens:
            t[("y", x, o, "y", "push", o)] = 1.0
    for o, c in zip(opens, closes):
        t[("y", o, c, "y", "pop", None)] = 1.0
    return WeightedPDA(("b", "x", "y", "z"), sym, opens, t, "b", "real", accepting=("b",),
                       empty_stack=True, name="hardest_cfl_realtime")


__all__ = [
    "OPS",
    "BestRun",
    "Chart",
    "WPDAConfig",
    "WeightedPDA",
    "WeightedPDT",
    "hardest_cfl_realtime",
    "lang_log_batch",
    "op_index",
    "valid_ops_mask",
]

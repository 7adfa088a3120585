"""Exact string probabilities under a task's grammar, for the cross-entropy figures of DuSell &
Chiang (2020, 2021): the inside weight of a string (all derivations summed), its probability
given its length, and the per-symbol cross-entropy of the true distribution (their lower bound).

DuSell & Chiang sample a length l uniformly from a set of valid lengths, then a string of length l
with probability proportional to its grammar weight; so the true probability of w is

    p(w) = p(l) · p_G(w) / Σ_{|w'| = l} p_G(w'),   p(l) = 1 / (number of valid lengths),

and the lower bound they report is the cross-entropy of this p with itself on the test strings,
in nats per symbol counting one end-of-string symbol per string. A grammar may have rule weights
that do not sum to one per nonterminal (`WeightedCFG`; the authors' hardest-CFL grammar has such
rules): only the weight of a string relative to the other strings of its length matters here.
The inside algorithm is the textbook one (Baker 1979; Lari & Young 1990) extended to ε- and unary
rules: same-span dependencies are one linear system, solved once per grammar.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from pdanet.automata.grammar import CFG, GrammarError, _body
from pdanet.errors import InputError


class WeightedCFG(CFG):
    """A CFG whose rules carry positive weights that need not sum to one per nonterminal.

    ``rules`` is ``{(lhs, body): weight}``. Its distribution is defined only for strings of a
    given length (each string's weight, the product of its rules' weights summed over its
    derivations, divided by the total weight of that length), which is how length-conditioned
    samplers and `log_probability_given_length` use it."""

    def __init__(self, nonterminals: Iterable[Hashable], terminals: Any, rules: Mapping,
                 start: Hashable, name: str | None = None):
        if not isinstance(rules, Mapping):
            raise GrammarError("WeightedCFG rules must be a mapping {(lhs, body): weight}")
        weights: dict = {}
        for key, val in rules.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise GrammarError(f"rule key {key!r} must be a pair (lhs, body)")
            weights[(key[0], _body(key[1]))] = val
        super().__init__(nonterminals, terminals, list(weights), start, name)
        ws = []
        for r in self.rules:
            w = weights[(r.lhs, r.body)]
            if isinstance(w, bool) or not isinstance(w, (int, float, Fraction, np.floating,
                                                         np.integer)) \
                    or not (w > 0) or not math.isfinite(float(w)):
                raise GrammarError(f"rule {r}: weight {w!r} is not a positive finite number")
            ws.append(w)
        self._weights = tuple(ws)

    weights = property(lambda self: self._weights)

    def rule_weights(self) -> tuple:
        return self._weights

    def weight(self, lhs: Hashable, body: Any) -> Any:
        """The weight of the rule lhs → body (0 when there is no such rule)."""
        b = _body(body)
        for r, w in zip(self.rules, self._weights):
            if r.lhs == lhs and r.body == b:
                return w
        return 0

    def _key(self) -> tuple:
        return super()._key() + (frozenset(zip(self.rules, self._weights)),)

    def _rule_text(self, i: int) -> str:
        return f"{self.rules[i]}  [{self._weights[i]}]"


def _check_grammar(grammar: Any) -> CFG:
    if not isinstance(grammar, CFG):
        raise InputError(f"expected a grammar (CFG, PCFG or WeightedCFG), got "
                         f"{type(grammar).__name__}; use pdanet.automata.tasks.grammar(name)")
    return grammar


def _null_weights(g: CFG, weights: list[float], index: dict) -> np.ndarray:
    """The total weight with which each nonterminal derives ε (least fixed point, by iteration)."""
    null = np.zeros(len(index))
    for _ in range(10_000):
        new = np.zeros(len(index))
        for r, rule in enumerate(g.rules):
            v = weights[r]
            for x in rule.body:
                v = v * null[index[x]] if x in index else 0.0
                if v == 0.0:
                    break
            new[index[rule.lhs]] += v
        if np.array_equal(new, null):
            return null
        if not np.all(np.isfinite(new)) or new.max(initial=0.0) > 1e300:
            break
        null = new
    if np.allclose(new, null, rtol=1e-15, atol=0.0):
        return new
    raise InputError(f"the ε-weights of grammar {g.name or g!r} do not converge; the inside "
                     "weights are infinite")


def inside(grammar: CFG, string: Sequence[Hashable]) -> float:
    """The total weight of the derivations of `string` from the start symbol: the sum over its
    parse trees of the product of their rules' weights (``grammar.rule_weights()``; for a PCFG, the
    probability p_G(string)). float64; 0.0 for a string outside the language."""
    g = _check_grammar(grammar)
    w = tuple(string)
    for x in w:
        if x not in g.terminals:
            raise InputError(f"symbol {x!r} is not a terminal of grammar {g.name or g!r}; its "
                             f"terminals are {list(g.terminals)}")
    nts = list(g.nonterminals)
    index = {a: i for i, a in enumerate(nts)}
    weights = [float(x) for x in g.rule_weights()]
    null = _null_weights(g, weights, index)
    A = len(nts)
    # same-span system: x = b + M x, M[a, c] = Σ rules a → α c β with α, β ⇒ ε
    M = np.zeros((A, A))
    for r, rule in enumerate(g.rules):
        for t, x in enumerate(rule.body):
            if x not in index:
                continue
            v = weights[r]
            for s, y in enumerate(rule.body):
                if s != t:
                    v = v * null[index[y]] if y in index else 0.0
            M[index[rule.lhs], index[x]] += v
    try:
        solve = np.linalg.inv(np.eye(A) - M)
    except np.linalg.LinAlgError:
        raise InputError(f"grammar {g.name or g!r} has unary/ε cycles of total weight 1; the "
                         "inside weights are infinite") from None
    if np.any(solve < -1e-12):
        raise InputError(f"grammar {g.name or g!r} has unary/ε cycles of weight ≥ 1; the inside "
                         "weights are infinite")
    n = len(w)
    ins = np.zeros((A, n + 1, n + 1))
    for i in range(n + 1):
        ins[:, i, i] = null
    rules = [(index[rule.lhs], weights[r], rule.body) for r, rule in enumerate(g.rules)]
    # items[r][t][i, j]: weight of body[:t] deriving w[i:j]
    items = []
    for _, _, body in rules:
        its = np.zeros((len(body) + 1, n + 1, n + 1))
        for i in range(n + 1):
            v = 1.0
            its[0, i, i] = 1.0
            for t, x in enumerate(body):
                v = v * null[index[x]] if x in index else 0.0
                its[t + 1, i, i] = v
        items.append(its)

    def fill(its, body, i, j, full: bool) -> None:
        lo = i if full else i + 1
        for t, x in enumerate(body):
            if x in index:
                col = ins[index[x], lo:j + 1, j]
                its[t + 1, i, j] = float(np.dot(its[t, i, lo:j + 1], col))
            else:
                its[t + 1, i, j] = its[t, i, j - 1] if w[j - 1] == x else 0.0

    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            b = np.zeros(A)
            for (lhs, wt, body), its in zip(rules, items):
                if body:
                    fill(its, body, i, j, full=False)
                    b[lhs] += wt * its[len(body), i, j]
            ins[:, i, j] = solve @ b
            for (_, _, body), its in zip(rules, items):
                if body:
                    fill(its, body, i, j, full=True)
    return float(ins[index[g.start], 0, n])


def log_probability_given_length(grammar: CFG, string: Sequence[Hashable]) -> float:
    """log p_G(w) − log Σ_{|w'| = |w|} p_G(w'): the natural log of the probability of `string`
    among the strings of its length (-inf outside the language). The denominator comes from the
    grammar's length table (`CFG.length_table`, weighted), an independent computation."""
    g = _check_grammar(grammar)
    w = tuple(string)
    p = inside(g, w)
    if p == 0.0:
        return -math.inf
    total = g.length_table(len(w), weighted=True).total(len(w))
    return math.log(p) - float(total)


def cross_entropy_lower_bound(grammar: CFG, strings: Iterable[Sequence[Hashable]],
                              num_lengths: int) -> float:
    """DuSell & Chiang's lower bound on a language model's cross-entropy on `strings`, in nats per
    symbol: the true distribution's cross-entropy with itself,
    (Σ_w −log p(w)) / Σ_w (|w| + 1), with p(w) = p_G(w | |w|) / `num_lengths` (the length drawn
    uniformly from `num_lengths` valid lengths) and one end-of-string symbol per string. A model's
    cross-entropy minus this is the figure their tables report."""
    g = _check_grammar(grammar)
    if isinstance(num_lengths, bool) or not isinstance(num_lengths, (int, np.integer)) \
            or num_lengths < 1:
        raise InputError(f"num_lengths must be a positive integer, got {num_lengths!r}")
    total_nll, total_len = 0.0, 0
    for s in strings:
        lp = log_probability_given_length(g, s)
        if lp == -math.inf:
            raise InputError(f"string {''.join(map(str, s))!r} has probability 0 under grammar "
                             f"{g.name or g!r}")
        total_nll += -lp + math.log(num_lengths)
        total_len += len(s) + 1
    if total_len == 0:
        raise InputError("no strings given")
    return total_nll / total_len


__all__ = ["WeightedCFG", "cross_entropy_lower_bound", "inside", "log_probability_given_length"]

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

Normalising a weighted grammar or PDA. A `WeightedCFG` whose weights do not normalise has, for a
length weight λ > 0 small enough, a finite partition function Z_A(λ) = Σ_{A ⇒* u} weight·λ^|u|
per nonterminal (the least solution of a monotone polynomial system, found by Newton's method
from 0: Etessami & Yannakakis 2009, Esparza, Kiefer & Luttenberger 2010). `normalise_grammar`
turns it into the PCFG p(A → α) = w(A → α)·λ^{#terminals of α}·Π_{B ∈ α} Z_B / Z_A (Chi 1999;
Smith & Johnson 2007): p(w) = weight(w)·λ^|w| / Z_S, so p(w | |w|) is the grammar's. `push_weights`
does the same for a real-time weighted PDA whose pops of each stack symbol return to one state
(weight pushing, Mohri 2009, with the completion weights of (state, top) pairs).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.grammar import CFG, PCFG, GrammarError, _body
from pdanet.automata.weighted import WeightedPDA
from pdanet.errors import AutomatonError, InputError


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


# --- partition functions and local normalisation ------------------------------------------------

#: Newton's method stops when an iterate changes by at most this much (relative) ...
NEWTON_TOLERANCE = 1e-15
#: ... or after this many iterations
NEWTON_STEPS = 200


def solve_monotone(terms: Sequence[tuple[int, float, tuple[int, ...]]], n: int,
                   what: str) -> tuple[np.ndarray, float]:
    """The least nonnegative solution of x = f(x), f_i(x) = Σ_{(i, c, js) in terms} c·Π_{j ∈ js}
    x_j (c ≥ 0: a monotone system of polynomials), by Newton's method from x = 0 (monotone and
    convergent to the least solution when it is finite: Esparza, Kiefer & Luttenberger 2010), in
    float64; then (x, residual) with residual = max_i |f_i(x) − x_i| / max(x_i, tiny). InputError
    (naming `what`) when the iterates diverge — the least solution is infinite."""
    rows = np.array([t[0] for t in terms], dtype=np.int64)
    coef = np.array([float(t[1]) for t in terms], dtype=np.float64)
    facs = [tuple(t[2]) for t in terms]

    def f_and_jac(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = np.zeros(n)
        jac = np.zeros((n, n))
        for i, c, js in zip(rows, coef, facs):
            vals = [x[j] for j in js]
            f[i] += c * math.prod(vals)
            for k, j in enumerate(js):
                jac[i, j] += c * math.prod(vals[:k] + vals[k + 1:])
        return f, jac

    x = np.zeros(n)
    for _ in range(NEWTON_STEPS):
        f, jac = f_and_jac(x)
        try:
            step = np.linalg.solve(np.eye(n) - jac, f - x)
        except np.linalg.LinAlgError:
            step = f - x                                   # a fixed-point step instead
        new = x + step
        if not np.all(np.isfinite(new)) or np.any(new < -1e-12) or new.max(initial=0.0) > 1e150:
            raise InputError(f"{what}: the weights' total diverges (Newton's iterates leave the "
                             "nonnegative reals); take a smaller length weight")
        new = np.maximum(new, 0.0)
        done = np.all(np.abs(new - x) <= NEWTON_TOLERANCE * np.maximum(np.abs(new), 1e-300))
        x = new
        if done:
            break
    f, _ = f_and_jac(x)
    if np.any(np.abs(f - x) > 1e-9 * np.maximum(x, 1e-300)):
        raise InputError(f"{what}: Newton's method did not converge (the total is infinite or "
                         "critical); take a smaller length weight")
    residual = float(np.max(np.abs(f - x) / np.maximum(x, 1e-300), initial=0.0))
    return x, residual


def _check_length_weight(length_weight: Any) -> Fraction | float:
    if isinstance(length_weight, bool) or not isinstance(length_weight, (int, float, Fraction)) \
            or not 0 < length_weight or not math.isfinite(float(length_weight)):
        raise InputError(f"length_weight must be a positive number, got {length_weight!r}")
    return length_weight


def partition_function(grammar: CFG, length_weight: Any = 1) -> tuple[dict, float]:
    """({nonterminal: Z_A}, residual): Z_A = Σ over the derivations A ⇒* u of their weight
    times λ^|u| (λ = `length_weight`; module docstring), float64 by `solve_monotone`. InputError
    where it is infinite."""
    g = _check_grammar(grammar)
    lam = float(_check_length_weight(length_weight))
    index = {a: i for i, a in enumerate(g.nonterminals)}
    terms = []
    for rule, w in zip(g.rules, g.rule_weights()):
        k = sum(1 for x in rule.body if x not in index)
        terms.append((index[rule.lhs], float(w) * lam ** k,
                      tuple(index[x] for x in rule.body if x in index)))
    z, residual = solve_monotone(terms, len(index), f"grammar {g.name or g!r} with λ = {lam}")
    if np.any(z <= 0):
        dead = [a for a, i in index.items() if z[i] <= 0]
        raise InputError(f"nonterminals {dead} derive no terminal string; remove them")
    return {a: float(z[i]) for a, i in index.items()}, residual


def normalise_grammar(grammar: CFG, length_weight: Any = 1,
                      name: str | None = None) -> PCFG:
    """The PCFG with p(w) = weight(w)·λ^|w| / Z_S for every string (module docstring: Chi 1999's
    renormalisation with the partition function of `partition_function`), float probabilities;
    the distribution given the length is the grammar's. InputError where Z is infinite."""
    g = _check_grammar(grammar)
    z, _ = partition_function(g, length_weight)
    lam = float(length_weight)
    rules = {}
    for rule, w in zip(g.rules, g.rule_weights()):
        p = float(w) / z[rule.lhs]
        for x in rule.body:
            p *= z.get(x, lam)
        rules[(rule.lhs, rule.body)] = p
    total: dict = {}
    for (lhs, _), p in rules.items():
        total[lhs] = total.get(lhs, 0.0) + p
    # the sums are 1 up to the residual of Z: divide it out (a single rule gets exactly 1)
    rules = {(lhs, body): p / total[lhs] for (lhs, body), p in rules.items()}
    return PCFG(g.nonterminals, g.terminals, rules, g.start, name=name or g.name)


def push_weights(machine: WeightedPDA) -> tuple[WeightedPDA, float]:
    """(probabilistic real-time `WeightedPDA`, residual): the local normalisation of a real-time
    weighted PDA (real or rational semiring, ``empty_stack=True`` with accepting states) in
    which every pop of a stack symbol y goes to one state ret(y) (and a replace keeps ret).

    Completion weights β(q, x): for x ≠ ⊥ the weight of the runs from (q, x) until that cell is
    popped (then in ret of its symbol), for ⊥ until acceptance,

        β(q, x) = Σ_{pop} w + Σ_{replace by y, to r} w β(r, y) + Σ_{push y, to r} w β(r, y) β(ret(y), x)
                  + [x = ⊥, q accepting],

    solved by `solve_monotone`. Each transition's weight becomes w·β(after)/β(q, x) (a push:
    w·β(r, y)·β(ret(y), x)/β(q, x); a pop: w/β(q, x)) and the stop of an accepting (q, ⊥) is
    1/β(q, ⊥): every row sums to one, a run's weight telescopes to its old weight over
    β(start, ⊥), so p(w) = weight(w)/β(start, ⊥) (weight pushing, Mohri 2009). Rows with
    β = 0 (from which no run accepts) are dropped. AutomatonError for ε-arcs, another semiring
    or acceptance, or pops of one symbol into two states; InputError where β is infinite."""
    if not isinstance(machine, WeightedPDA):
        raise InputError(f"push_weights takes a WeightedPDA, got {type(machine).__name__}")
    machine.require_realtime("push_weights")
    if machine.semiring.name not in ("real", "rational"):
        raise AutomatonError(f"{machine!r}: push_weights needs weights in the real or rational "
                             f"semiring, not {machine.semiring.name}")
    if not machine.empty_stack or machine.accepting is None:
        raise AutomatonError(f"{machine!r}: push_weights needs acceptance by accepting states "
                             "with the empty stack (empty_stack=True, accepting=...)")
    ret: dict = {}
    for (q, x, a, r, op, y), w in machine.transitions.items():
        if op == "pop" and w and ret.setdefault(x, r) != r:
            raise AutomatonError(f"{machine!r}: stack symbol {x!r} is popped into states "
                                 f"{ret[x]!r} and {r!r}; push_weights needs one return "
                                 "state per stack symbol")
    for (q, x, a, r, op, y), w in machine.transitions.items():
        if op == "replace" and w and x in ret and y in ret and ret[x] != ret[y]:
            raise AutomatonError(f"{machine!r}: replacing {x!r} by {y!r} changes the state the "
                                 "cell is popped into; push_weights needs it unchanged")
    tops = (BOTTOM,) + tuple(machine.stack_alphabet.symbols)
    index = {(q, x): i for i, (q, x) in enumerate((q, x) for q in machine.states for x in tops)}
    terms = []
    for q in machine.accepting:
        terms.append((index[q, BOTTOM], 1.0, ()))
    for (q, x, a, r, op, y), w in machine.transitions.items():
        if not w:
            continue
        i, w = index[q, x], float(w)
        if op == "pop":
            terms.append((i, w, ()))
        elif op == "replace":
            terms.append((i, w, (index[r, y],)))
        elif y in ret:
            terms.append((i, w, (index[r, y], index[ret[y], x])))
    beta, residual = solve_monotone(terms, len(index), f"{machine!r}")
    b = {k: beta[i] for k, i in index.items()}
    out: dict = {}
    for (q, x, a, r, op, y), w in machine.transitions.items():
        if not w or b[q, x] <= 0:
            continue
        if op == "pop":
            p = float(w) / b[q, x]
        elif op == "replace":
            p = float(w) * b[r, y] / b[q, x]
        else:
            p = float(w) * b[r, y] * b[ret[y], x] / b[q, x] if y in ret else 0.0
        if p > 0:
            out[(q, x, a, r, op, y)] = p
    pushed = WeightedPDA(machine.states, machine.alphabet, machine.stack_alphabet, out,
                         machine.start, "real", accepting=machine.accepting, empty_stack=True,
                         name=machine.name)
    return pushed, residual


__all__ = ["NEWTON_STEPS", "NEWTON_TOLERANCE", "WeightedCFG", "cross_entropy_lower_bound",
           "inside", "log_probability_given_length", "normalise_grammar", "partition_function",
           "push_weights", "solve_monotone"]

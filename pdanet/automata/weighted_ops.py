"""Weighted algorithms over closed semirings: the star of a matrix (Lehmann 1977), the allsum
(partition function) of a weighted context-free grammar, and the PCFG → weighted PDA construction.

`closure(M, semiring)` is M* = I ⊕ M ⊕ M² ⊕ … by Lehmann's algorithm (Lehmann 1977, "Algebraic
structures for transitive closure"; Floyd–Warshall–Kleene elimination), in O(n³) semiring
operations. The scalar star it needs is x* = 1/(1 − x) in the real and rational semirings (x < 1),
−log(1 − eˣ) in the log semiring (x < 0), one in the boolean semiring, one (log 0) in the
Viterbi (max-times) semiring when x ≤ 0 (weight ≤ 1), and one (cost 0) in the tropical (min-plus)
semiring when x ≥ 0. A pivot outside these ranges means that the cycles through that position
have total weight ≥ 1 (in the tropical semiring: a negative cycle, whose shortest distance is
−inf), so the series diverges: a `DivergenceError` names the positions of those cycles. For a nonnegative real matrix the pivots are all < 1 exactly
when the spectral radius is < 1 (I − M is then a nonsingular M-matrix), and M* = (I − M)⁻¹.

`allsum(grammar, weights)` is the total weight of all derivations of a weighted CFG (the
partition function Z of the start symbol): the least nonnegative solution of the polynomial system
Z_A = ⊕_{A → X₁…X_k} w(A → X₁…X_k) ⊗ Z_{X₁} ⊗ … ⊗ Z_{X_k} (terminals weigh one). When no
nonterminal can reach itself (finite support) it is evaluated exactly bottom-up (Fractions stay
Fractions); otherwise by Newton's method from zero in float64 (Esparza, Kiefer & Luttenberger
2010: monotone convergence to the least fixpoint), with a convergence check.

`wpda_to_wcfg(m)` / `wpda_allsum(m)`: the weighted triple construction of a real-time
`WeightedPDA` and the allsum of the machine (the total weight of its accepting runs over all
strings) as the allsum of that grammar; a `WeightedPDA` that never pushes is a weighted finite
automaton (pdanet has no separate weighted FSA class).

`pcfg_to_wpda(pcfg)` is the top-down (leftmost-derivation) PDA of a grammar whose rule bodies all
begin with a terminal, made real-time: one input symbol and one stack operation per step. General
PCFGs (ε-rules, rules beginning with a nonterminal) need Greibach normal form first, which is not
provided here.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from pdanet.automata import semiring as srm
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.grammar import CFG, PCFG, GrammarError
from pdanet.automata.weighted import WeightedPDA
from pdanet.errors import DivergenceError, InputError

# --- closure ----------------------------------------------------------------------------------

def _star(sr: srm.Semiring, v: Any) -> Any:
    """The scalar star v* = ⊕_n vⁿ, or None when it diverges."""
    if sr is srm.BOOLEAN:
        return True
    if sr is srm.REAL or sr is srm.RATIONAL:
        if v >= 1:
            return None
        return (Fraction(1) / (1 - v)) if sr is srm.RATIONAL else 1.0 / (1.0 - float(v))
    if sr is srm.LOG:
        if v >= 0:
            return None
        return -math.log1p(-math.exp(v)) if v > -math.inf else 0.0
    if sr is srm.VITERBI:
        return None if v > 0 else 0.0
    if sr is srm.TROPICAL:
        return None if v < 0 else 0.0
    raise InputError(f"no star is defined for semiring {sr.name!r}; use one of "
                     f"{sorted(srm.SEMIRINGS)}")


def _reach(support: np.ndarray) -> np.ndarray:
    """Transitive closure (paths of length ≥ 1) of a boolean adjacency matrix (Warshall)."""
    R = np.array(support, dtype=bool)
    for k in range(R.shape[0]):
        R |= np.outer(R[:, k], R[k, :])
    return R


def _cycle_names(support: np.ndarray, k: int, labels: Any) -> list:
    """The positions ≤ k on a cycle with position k (its strongly connected component among
    positions 0..k), as labels."""
    sub = _reach(support[: k + 1, : k + 1])
    comp = [j for j in range(k + 1) if j == k or (sub[k, j] and sub[j, k])]
    return [labels[j] for j in comp]


def closure(M: Any, semiring: srm.Semiring | str = "real", labels: Any = None) -> np.ndarray:
    """The star M* = I ⊕ M ⊕ M² ⊕ … of a square matrix of `semiring` values (Lehmann 1977).

    ``M[i, j]`` is the weight of the edge i → j; ``M*[i, j]`` is the ⊕ over all paths from i to j
    (the empty path included) of the ⊗ of their edge weights. Real: (I − M)⁻¹ (float64); rational:
    exact; log and Viterbi: natural-log weights (log-sum-exp, resp. max, over paths); boolean:
    reflexive–transitive closure; tropical: shortest distances (min over paths of the summed
    costs; +inf where there is no path). `labels` (one per row) name positions in error messages.

    Raises DivergenceError naming the positions of a cycle whose weights sum to ≥ 1 (spectral
    radius ≥ 1 for real weights; a cycle of weight > 1 in the Viterbi semiring; a cycle of
    negative cost in the tropical semiring), and InputError for
    a matrix that is not square or holds values that are not weights of the semiring.
    """
    sr = srm.get(semiring)
    arr = np.asarray(M, dtype=object if sr is srm.RATIONAL else None)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise InputError(f"closure needs a square matrix, got shape {arr.shape}")
    n = arr.shape[0]
    if labels is None:
        labels = list(range(n))
    elif len(labels) != n:
        raise InputError(f"{len(labels)} labels for a {n}×{n} matrix")
    A = sr.array((n, n))
    for i in range(n):
        for j in range(n):
            A[i, j] = sr.check(arr[i, j], f"closure: entry [{labels[i]!r}, {labels[j]!r}]")
    support = ~np.asarray(sr.is_zero(A), dtype=bool)
    for k in range(n):
        s = _star(sr, A[k, k])
        if s is None:
            names = _cycle_names(support, k, labels)
            if sr is srm.TROPICAL:
                raise DivergenceError(
                    f"closure does not converge: a negative cycle — the cycles through "
                    f"{labels[k]!r} within {names} have total cost {float(A[k, k]):g} < 0 in "
                    "the tropical semiring, so shortest distances through them are −inf; make every cycle's "
                    "cost ≥ 0")
            raise DivergenceError(
                f"closure does not converge: weights on a cycle sum to ≥ 1 — the cycles through "
                f"{labels[k]!r} within {names} have total weight ≥ 1 in the {sr.name} semiring"
                + (" (spectral radius ≥ 1)" if sr in (srm.REAL, srm.RATIONAL, srm.LOG) else "")
                + "; scale those weights down so every cycle sum is < 1")
        col = sr.times(A[:, k], s)
        A = sr.plus(A, sr.times(col[:, None], A[k, :][None, :]))
    for i in range(n):
        A[i, i] = sr.plus(A[i, i], sr.one)
    if sr is srm.REAL and not np.all(np.isfinite(A)):
        raise DivergenceError("closure does not converge: weights on a cycle sum to ≥ 1 (the "
                              "spectral radius is 1 up to float64 rounding); scale weights down")
    return A


# --- allsum of a weighted CFG -----------------------------------------------------------------

def _rule_weights(grammar: CFG, weights: Any) -> list:
    rules = grammar.rules
    if weights is None:
        if not isinstance(grammar, PCFG):
            raise InputError("allsum of a CFG needs rule weights: pass `weights` (one per rule, "
                             "or {(lhs, body): weight}) or use a PCFG")
        return list(grammar.probabilities)
    if isinstance(weights, Mapping):
        out = []
        for r in rules:
            w = weights.get((r.lhs, r.body), weights.get(r, 0))
            out.append(w)
        known = {(r.lhs, r.body) for r in rules} | set(rules)
        for key in weights:
            if key not in known:
                raise InputError(f"weight given for {key!r}, which is not a rule of the grammar")
    else:
        out = list(weights)
        if len(out) != len(rules):
            raise InputError(f"{len(out)} weights for {len(rules)} rules; give one per rule")
    for r, w in zip(rules, out):
        srm.REAL.check(w, f"rule {r}")
    return out


def _dependency(grammar: CFG) -> np.ndarray:
    nts = grammar.nonterminals
    idx = {a: i for i, a in enumerate(nts)}
    D = np.zeros((len(nts), len(nts)), dtype=bool)
    for r in grammar.rules:
        for x in r.body:
            if x in idx:
                D[idx[r.lhs], idx[x]] = True
    return D


def allsum(grammar: CFG, weights: Any = None, symbol: Hashable | None = None,
           tol: float = 1e-12, max_iter: int = 500) -> Any:
    """The total weight Z of all derivations from the start symbol (or `symbol`) of a weighted CFG.

    Rule weights are the PCFG's probabilities, or `weights` (nonnegative reals, one per rule in
    ``grammar.rules`` order, or ``{(lhs, body): w}``, absent rules weighing 0). Z is the least
    nonnegative fixpoint of Z_A = Σ_{A → β} w · Π_{X ∈ β} Z_X (a terminal weighs one). For a PCFG,
    Z ≤ 1, and Z = 1 exactly when the grammar is consistent (loses no mass to infinite
    derivations).

    Finite support (no nonterminal reaches itself): exact bottom-up evaluation, a Fraction when
    every weight is an int or Fraction. Otherwise Newton's method from 0 in float64, stopped when
    the largest Newton step and residual are ≤ `tol` (relative); at a critical point (Z = 1 for a
    consistent PCFG on the edge, e.g. S → S S [1/2] | a [1/2]) Newton converges linearly, one bit
    per step, and float64 cancellation limits the accuracy to about √ε ≈ 1e-8. DivergenceError (naming the nonterminals of the diverging cycle) when the system has
    no finite solution, e.g. S → a S [0.6] | b S [0.5] | c [1].
    """
    w = _rule_weights(grammar, weights)
    nts = grammar.nonterminals
    idx = {a: i for i, a in enumerate(nts)}
    if symbol is None:
        symbol = grammar.start
    if symbol not in idx:
        raise InputError(f"{symbol!r} is not a nonterminal of {grammar!r}")
    D = _dependency(grammar)
    R = _reach(D)
    if not R.diagonal().any():
        return _allsum_exact(grammar, w)[symbol]
    Z = _allsum_newton(grammar, w, R, tol, max_iter)
    if weights is None and isinstance(grammar, PCFG):
        Z = np.minimum(Z, 1.0)     # a PCFG's derivations have total probability ≤ 1
    return float(Z[idx[symbol]])


def _allsum_exact(grammar: CFG, w: list) -> dict:
    exact = all(isinstance(x, (int, Fraction, np.integer)) and not isinstance(x, bool) for x in w)
    one = Fraction(1) if exact else 1.0
    Z: dict = {}
    pending = list(grammar.nonterminals)
    while pending:
        rest = []
        for a in pending:
            rules = [(i, r) for i, r in enumerate(grammar.rules) if r.lhs == a]
            if all(x in Z or not grammar.is_nonterminal(x) for _, r in rules for x in r.body):
                total = 0 * one
                for i, r in rules:
                    term = Fraction(w[i]) if exact else float(w[i])
                    for x in r.body:
                        if grammar.is_nonterminal(x):
                            term = term * Z[x]
                    total = total + term
                Z[a] = total
            else:
                rest.append(a)
        pending = rest
    return Z


def _allsum_newton(grammar: CFG, w: list, R: np.ndarray, tol: float, max_iter: int) -> np.ndarray:
    nts = grammar.nonterminals
    idx = {a: i for i, a in enumerate(nts)}
    n = len(nts)
    rules = [(idx[r.lhs], float(wi), [idx[x] for x in r.body if x in idx])
             for r, wi in zip(grammar.rules, w) if wi != 0]
    productive: set = set()                     # Z_A = 0 exactly for the others: drop them so
    changed = True                              # that Newton's system is clean
    while changed:
        changed = False
        for a, _, body in rules:
            if a not in productive and all(b in productive for b in body):
                productive.add(a)
                changed = True
    rules = [(a, wi, body) for a, wi, body in rules if all(b in productive for b in body)]

    def f_and_jacobian(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f = np.zeros(n)
        J = np.zeros((n, n))
        for a, wi, body in rules:
            vals = x[body]
            f[a] += wi * float(np.prod(vals))
            for j, b in enumerate(body):
                J[a, b] += wi * float(np.prod(np.delete(vals, j)))
        return f, J

    def diverge(x: np.ndarray, why: str) -> DivergenceError:
        _, J = f_and_jacobian(np.where(np.isfinite(x), x, 0.0))
        worst, names = -1.0, list(nts)
        seen: set = set()
        for i in range(n):
            comp = [j for j in range(n) if j == i or (R[i, j] and R[j, i])]
            if i in seen or not R[i, i]:
                continue
            seen.update(comp)
            rho = float(np.max(np.abs(np.linalg.eigvals(J[np.ix_(comp, comp)]))))
            if rho > worst:
                worst, names = rho, [nts[j] for j in comp]
        return DivergenceError(
            f"allsum does not converge: weights on a cycle sum to ≥ 1 — the derivations through "
            f"nonterminals {names} have unbounded total weight ({why}); scale their rule weights "
            "down")

    x = np.zeros(n)
    for _ in range(max_iter):
        f, J = f_and_jacobian(x)
        res = f - x
        A = np.eye(n) - J
        rho = float(np.max(np.abs(np.linalg.eigvals(J)))) if n else 0.0
        # at a critical fixpoint (spectral radius 1 there) the iterates reach it with a residual
        # f(x) − x of order (error)², while the Jacobian becomes singular to rounding
        settled = np.abs(res).max(initial=0.0) <= 1e-12 * (1.0 + x.max(initial=0.0))
        if rho > 1 + 1e-9:
            if settled:
                return x
            raise diverge(x, f"the spectral radius of the Jacobian reaches {rho:.6g} > 1 below "
                             "the fixpoint")
        try:
            step = np.linalg.solve(A, res)
        except np.linalg.LinAlgError:
            step = None
        if step is None or not np.all(np.isfinite(step)) or np.any(step < -1e-9 * (1 + x)):
            if settled:
                return x
            raise diverge(x, f"the Newton step fails: the Jacobian's spectral radius is "
                             f"{rho:.6g} ≥ 1 below the fixpoint")
        x = x + np.maximum(step, 0.0)
        if not np.all(np.isfinite(x)) or x.max(initial=0.0) > 1e300:
            raise diverge(x, "the iterates grow without bound")
        scale = 1.0 + x.max(initial=0.0)
        if np.abs(step).max(initial=0.0) <= tol * scale:
            f2, _ = f_and_jacobian(x)
            if np.abs(f2 - x).max(initial=0.0) <= 1e3 * tol * scale:
                return x
    f, _ = f_and_jacobian(x)
    if np.abs(f - x).max(initial=0.0) <= 1e-12 * (1.0 + x.max(initial=0.0)):
        return x                   # a critical fixpoint, reached linearly
    raise diverge(x, f"Newton's method did not converge in {max_iter} steps")


# --- allsum of a weighted PDA -----------------------------------------------------------------

def wpda_to_wcfg(m: WeightedPDA) -> tuple[CFG, list]:
    """The weighted CFG of a `WeightedPDA` (the triple construction, Hopcroft & Ullman 1979
    Thm. 5.4, weighted): every string's total rule weight over its derivations equals the PDA's
    string weight (weights lowered to nonnegative reals). Returns ``(grammar, weights)`` with one
    weight per rule; the grammar is trimmed to productive nonterminals (an empty language gives
    a grammar with the one rule ``("B", start) → ("B", start)`` of weight 0).

    Nonterminals: ``("pop", q, y, r)`` — runs from q with y (≠ ⊥) on top that end by popping that
    cell, arriving in r; ``("keep", q, y)`` — runs from q with y on top that never pop it and end
    accepting; ``("B", q)`` — runs from q on the bottom level that end accepting (start symbol
    ``("B", start)``). A transition reading a with weight w gives, e.g. for a push of z into s:
    ``("pop", q, y, r) → a ("pop", s, z, t) ("pop", t, y, r)``, ``("keep", q, y) → a ("keep", s, z)``
    and ``("keep", q, y) → a ("pop", s, z, t) ("keep", t, y)``, each with weight w.
    """
    if not isinstance(m, WeightedPDA):
        raise InputError(f"expected a WeightedPDA, got {type(m).__name__}")
    m.require_realtime("wpda_to_wcfg (every rule body starts with the symbol read)")
    sr = m.semiring
    G = m.num_stack
    states = m.states
    final = m.final_weights(srm.BOOLEAN)
    rules: dict = {}                   # every body is () or (input symbol, nonterminals...)
    exact = sr is srm.RATIONAL

    def add(lhs, body, w):
        rules[(lhs, body)] = rules.get((lhs, body), 0) + w

    def sym(j):
        return m.stack_symbol(j)

    for (q, x, a, r, op, y), wv in m.transitions.items():
        w = Fraction(wv) if exact else float(sr.lower(wv))
        if w == 0:
            continue
        if x is BOTTOM:
            if op == "replace":
                add(("B", q), (a, ("B", r)), w)
            else:                                                 # push y onto ⊥
                add(("B", q), (a, ("keep", r, y)), w)
                for t in states:
                    add(("B", q), (a, ("pop", r, y, t), ("B", t)), w)
            continue
        for u in states:                                          # ("pop", q, x, u)
            if op == "pop":
                if u == r:
                    add(("pop", q, x, u), (a,), w)
            elif op == "replace":
                add(("pop", q, x, u), (a, ("pop", r, y, u)), w)
            else:
                for t in states:
                    add(("pop", q, x, u), (a, ("pop", r, y, t), ("pop", t, x, u)), w)
        if op == "replace":                                       # ("keep", q, x)
            add(("keep", q, x), (a, ("keep", r, y)), w)
        elif op == "push":
            add(("keep", q, x), (a, ("keep", r, y)), w)
            for t in states:
                add(("keep", q, x), (a, ("pop", r, y, t), ("keep", t, x)), w)
    for i, q in enumerate(states):
        if final[i, 0]:
            add(("B", q), (), Fraction(1) if exact else 1.0)
        for j in range(1, G):
            if final[i, j]:
                add(("keep", q, sym(j)), (), Fraction(1) if exact else 1.0)
    productive: set = set()
    changed = True
    while changed:
        changed = False
        for (lhs, body) in rules:
            if lhs not in productive and all(b in productive for b in body[1:]):
                productive.add(lhs)
                changed = True
    start = ("B", m.start)
    kept = [(lhs, body, w) for (lhs, body), w in rules.items()
            if lhs in productive and all(b in productive for b in body[1:])]
    if start not in productive:
        kept = [(start, (start,), 0)]
    nts = list(dict.fromkeys([start] + [lhs for lhs, _, _ in kept]))
    g = CFG(nts, m.alphabet, [(lhs, body) for lhs, body, _ in kept], start,
            name=f"wcfg({m.name})" if m.name else None)
    return g, [w for _, _, w in kept]


def wpda_allsum(m: WeightedPDA, tol: float = 1e-12, max_iter: int = 500) -> Any:
    """The total weight of all accepting runs of a `WeightedPDA` over all strings (its allsum),
    as a nonnegative real: `allsum` of `wpda_to_wcfg` (exact Fraction for a rational machine of
    finite support, else float64 by Newton's method). The acceptance is the machine's (see
    `pdanet.automata.weighted`); a machine that never pushes is a weighted finite automaton,
    whose allsum is α (Σ_a M_a)* β. DivergenceError naming the summary nonterminals of the
    cycle whose weights sum to ≥ 1."""
    g, w = wpda_to_wcfg(m)
    if w == [0]:
        return Fraction(0) if m.semiring is srm.RATIONAL else 0.0
    return allsum(g, w, tol=tol, max_iter=max_iter)


# --- PCFG → weighted PDA ----------------------------------------------------------------------

DONE = ("done",)


def pcfg_to_wpda(pcfg: PCFG, semiring: srm.Semiring | str = "real",
                 name: str | None = None) -> WeightedPDA:
    """A real-time `WeightedPDA` whose weight on every nonempty string is the PCFG's probability
    of the string (the sum over its derivations); the top-down PDA of a CFG (Hopcroft & Ullman
    1979 Thm. 5.3) for grammars in a Greibach-like form.

    The grammar must have every rule body begin with a terminal (A → a X₁…X_k, each Xᵢ a terminal
    or nonterminal); the one ε-rule allowed is start → ε when the start symbol occurs in no body.
    The real-time `WeightedPDA` has no ε-moves, so a rule A → B… or A → ε (anywhere else) raises
    GrammarError: put the grammar in Greibach normal form first. The empty string gets weight 0
    (a real-time machine reads one symbol per step); its probability is ``p(start → ε)``.

    Construction (leftmost derivations ↔ runs, one to one). States: ``("sym", X)``, "X is the
    next symbol to derive", for every symbol X, and `DONE`. Stack symbols: the nonempty proper
    suffixes of X₂…X_k over the rules A → a X₁ X₂…X_k (symbols still to derive; the most recent
    suffix on top). In state ("sym", A) reading a, the rule A → a X₁ X₂…X_k (probability p) goes to
    ("sym", X₁) and pushes X₂…X_k (a no-op when k = 1); A → a (k = 0) continues with the pending
    suffix on top: to ("sym", Y₁) replacing Y₁…Y_m by Y₂…Y_m (a pop when m = 1), or to `DONE` on
    ⊥. A terminal state ("sym", b) reads b with weight one and continues the same way. Accepting:
    `DONE` with the empty stack. Weights are `semiring` values of the probabilities.
    """
    if not isinstance(pcfg, PCFG):
        raise InputError(f"pcfg_to_wpda needs a PCFG, got {type(pcfg).__name__}")
    sr = srm.get(semiring)
    S = pcfg.start
    for r in pcfg.rules:
        if not r.body:
            if r.lhs == S and not any(S in r2.body for r2 in pcfg.rules):
                continue
            raise GrammarError(f"rule {r} is an ε-rule; the weighted PDA is real-time (no "
                               "ε-moves): rewrite the grammar in Greibach normal form (only "
                               "start → ε is allowed, with the start symbol in no body)")
        if pcfg.is_nonterminal(r.body[0]):
            raise GrammarError(f"rule {r} begins with the nonterminal {r.body[0]!r}; the weighted "
                               "PDA is real-time (no ε-moves), so every rule body must begin with "
                               "a terminal: rewrite the grammar in Greibach normal form")
    terms = pcfg.terminals.symbols
    symbols = tuple(pcfg.nonterminals) + tuple(terms)
    pending = sorted({r.body[2:][i:] for r in pcfg.rules for i in range(len(r.body[2:]))
                      if r.body[2:][i:]}, key=repr)
    tops = (BOTTOM,) + tuple(pending)
    trans: dict = {}

    def add(key: tuple, p: Any) -> None:
        v = sr.lift(p) if sr is not srm.RATIONAL else Fraction(p)
        trans[key] = sr.plus(trans[key], v) if key in trans else v

    def finish(q: tuple, a: Hashable, p: Any) -> None:
        """Reading a in state q ends the current symbol: continue with the pending suffix."""
        add((q, BOTTOM, a, DONE, "replace", BOTTOM), p)
        for t in pending:
            if len(t) == 1:
                add((q, t, a, ("sym", t[0]), "pop", None), p)
            else:
                add((q, t, a, ("sym", t[0]), "replace", t[1:]), p)

    for r, p in zip(pcfg.rules, pcfg.probabilities):
        if not r.body:
            continue
        q, a, rest = ("sym", r.lhs), r.body[0], r.body[1:]
        if not rest:
            finish(q, a, p)
            continue
        for x in tops:
            if len(rest) == 1:
                add((q, x, a, ("sym", rest[0]), "replace", x), p)
            else:
                add((q, x, a, ("sym", rest[0]), "push", rest[1:]), p)
    for b in terms:
        finish(("sym", b), b, 1)
    states = tuple(("sym", x) for x in symbols) + (DONE,)
    return WeightedPDA(states, terms, pending, trans, ("sym", S), sr, accepting=(DONE,),
                       empty_stack=True, name=name or (f"wpda({pcfg.name})" if pcfg.name else None))


__all__ = ["DONE", "DivergenceError", "allsum", "closure", "pcfg_to_wpda", "wpda_allsum",
           "wpda_to_wcfg"]

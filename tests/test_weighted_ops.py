"""Lehmann closure, grammar allsum and PCFG → weighted PDA, against brute-force oracles."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.grammar import CFG, PCFG, GrammarError
from pdanet.automata.weighted_ops import (
    DONE,
    DivergenceError,
    allsum,
    closure,
    pcfg_to_wpda,
    wpda_allsum,
)
from pdanet.errors import InputError

SET = settings(max_examples=30, deadline=None)


# --- closure ----------------------------------------------------------------------------------

@st.composite
def small_matrices(draw, lo=1, hi=4, scale=0.9):
    """A nonnegative matrix with row sums ≤ scale (spectral radius < 1), some zeros."""
    n = draw(st.integers(lo, hi))
    cells = draw(st.lists(st.integers(0, 4), min_size=n * n, max_size=n * n))
    M = np.array(cells, dtype=float).reshape(n, n)
    rows = M.sum(axis=1, keepdims=True)
    return np.where(rows > 0, M / np.maximum(rows, 1) * scale / 4 * np.minimum(rows, 4), 0.0)


@SET
@given(small_matrices())
def test_real_closure_is_the_geometric_series(M):
    star = closure(M, "real")
    series, power = np.zeros_like(M), np.eye(len(M))
    for _ in range(600):
        series += power
        power = power @ M
    assert np.allclose(star, series, rtol=1e-9, atol=1e-12)
    assert np.allclose(star, np.linalg.inv(np.eye(len(M)) - M))


@SET
@given(small_matrices())
def test_rational_closure_is_exact_inverse(M):
    F = np.array([[Fraction(v).limit_denominator(1000) for v in row] for row in M], dtype=object)
    star = closure(F, "rational")
    n = len(F)
    ident = np.array([[Fraction(int(i == j)) for j in range(n)] for i in range(n)], dtype=object)
    assert ((ident - F).dot(star) == ident).all()
    assert all(isinstance(v, Fraction) for v in star.ravel())


def _paths(n: int, max_len: int):
    """All paths (node sequences) with at most max_len edges in the complete graph on n nodes."""
    for length in range(max_len + 1):
        yield from itertools.product(range(n), repeat=length + 1)


@SET
@given(st.integers(1, 4).flatmap(lambda n: st.lists(st.booleans(), min_size=n * n,
                                                    max_size=n * n)))
def test_boolean_closure_is_reachability(cells):
    n = math.isqrt(len(cells))
    M = np.array(cells, dtype=bool).reshape(n, n)
    star = closure(M, "boolean")
    want = np.zeros((n, n), dtype=bool)
    for p in _paths(n, n):                     # a reachable node is reachable in ≤ n − 1 edges
        if all(M[a, b] for a, b in itertools.pairwise(p)):
            want[p[0], p[-1]] = True
    assert (star == want).all()


@SET
@given(st.integers(1, 3).flatmap(lambda n: st.lists(
    st.one_of(st.just(-math.inf), st.floats(-3.0, 0.0)), min_size=n * n, max_size=n * n)))
def test_viterbi_closure_is_the_best_path(cells):
    n = math.isqrt(len(cells))
    M = np.array(cells).reshape(n, n)               # log-weights ≤ 0: cycles never help
    star = closure(M, "viterbi")
    want = np.full((n, n), -math.inf)
    for p in _paths(n, n + 1):
        w = sum(M[a, b] for a, b in itertools.pairwise(p))
        want[p[0], p[-1]] = max(want[p[0], p[-1]], w)
    assert np.allclose(star, want)


@SET
@given(small_matrices())
def test_log_closure_matches_real(M):
    with np.errstate(divide="ignore"):
        L = np.log(M)
        want = np.log(closure(M, "real"))
    assert np.allclose(closure(L, "log"), want)


@SET
@given(small_matrices(lo=2, scale=1.0), st.floats(1.0, 3.0))
def test_divergence_iff_spectral_radius_at_least_one(M, factor):
    M = M * factor
    rho = float(np.max(np.abs(np.linalg.eigvals(M))))
    if abs(rho - 1) < 1e-6:
        return
    if rho > 1:
        with pytest.raises(DivergenceError, match="does not converge"):
            closure(M)
    else:
        assert np.allclose(closure(M), np.linalg.inv(np.eye(len(M)) - M))


def test_divergence_names_the_cycle():
    M = [[0.1, 0.5, 0.0], [0.0, 0.0, 2.0], [0.0, 0.5, 0.0]]       # q → r → q has weight 1
    with pytest.raises(DivergenceError, match=r"'r'.*\['q', 'r'\]"):
        closure(M, labels=["p", "q", "r"])
    with pytest.raises(DivergenceError, match="viterbi"):
        closure(np.log([[0.5, 2.0], [0.6, 0.1]]), "viterbi")         # cycle weight 1.2 > 1
    with pytest.raises(DivergenceError):
        closure([[Fraction(1)]], "rational")
    assert closure(np.log([[0.5, 2.0], [0.5, 0.1]]), "viterbi")[0, 0] == 0.0   # cycle weight 1


def test_closure_bad_input():
    with pytest.raises(InputError, match="square"):
        closure([[0.1, 0.2]])
    with pytest.raises(InputError, match="negative"):
        closure([[-0.1]])
    with pytest.raises(InputError, match="not a boolean"):
        closure([[0.5]], "boolean")
    with pytest.raises(InputError, match="labels"):
        closure([[0.5]], labels=["a", "b"])
    with pytest.raises(InputError, match="unknown semiring"):
        closure([[0.5]], "tropic")


# --- allsum -----------------------------------------------------------------------------------

@st.composite
def acyclic_grammars(draw):
    """A weighted CFG over N0 > N1 > N2 (rules of Ni use only Nj, j > i): finite support."""
    nts = ["N0", "N1", "N2"]
    rules, weights = [], []
    for i, a in enumerate(nts):
        bodies = set()
        for _ in range(draw(st.integers(1, 3))):
            body = tuple(draw(st.lists(st.sampled_from(["a", "b"] + nts[i + 1:]), max_size=3)))
            bodies.add(body)
        for body in sorted(bodies):
            rules.append((a, body))
            weights.append(Fraction(draw(st.integers(1, 9)), draw(st.integers(1, 6))))
    return CFG(nts, "ab", rules, "N0"), weights


def _tree_weights(g, w, a):
    """The weight of every derivation tree from a, listed one by one (finite support)."""
    out = []
    for r, wr in zip(g.rules, w):
        if r.lhs != a:
            continue
        parts = [_tree_weights(g, w, x) if g.is_nonterminal(x) else [1] for x in r.body]
        for combo in itertools.product(*parts):
            out.append(wr * math.prod(combo))
    return out


@SET
@given(acyclic_grammars())
def test_allsum_exact_on_finite_support(gw):
    g, w = gw
    z = allsum(g, w)
    assert isinstance(z, Fraction)
    assert z == sum(_tree_weights(g, w, "N0"))
    assert allsum(g, {(r.lhs, r.body): x for r, x in zip(g.rules, w)}, symbol="N1") == \
        sum(_tree_weights(g, w, "N1"))


@SET
@given(st.floats(0.01, 0.95), st.floats(0.01, 5.0))
def test_allsum_geometric_closed_form(p, q):
    g = CFG(["S"], "ab", [("S", ("a", "S")), ("S", ("b",))], "S")
    assert allsum(g, [p, q]) == pytest.approx(q / (1 - p), rel=1e-9)


@SET
@given(st.floats(0.02, 0.98))
def test_allsum_branching_closed_form(p):
    """S → S S [p] | a [1 − p]: Z is the least root of p Z² − Z + 1 − p = 0, min(1, (1−p)/p)."""
    g = PCFG(["S"], "a", {("S", ("S", "S")): p, ("S", ("a",)): 1 - p}, "S")
    assert allsum(g) == pytest.approx(min(1.0, (1 - p) / p), abs=1e-7)


@st.composite
def recursive_pcfgs(draw):
    nts = ["S", "A"]
    rules = {}
    for a in nts:
        bodies = {tuple(draw(st.lists(st.sampled_from(["a"] + nts), max_size=2)))
                  for _ in range(draw(st.integers(1, 3)))}
        bodies.add(("a",))
        ws = [draw(st.integers(1, 5)) for _ in bodies]
        for body, x in zip(sorted(bodies), ws):
            rules[(a, body)] = Fraction(x, sum(ws))
    return PCFG(nts, "a", rules, "S")


@SET
@given(recursive_pcfgs())
def test_allsum_newton_matches_kleene_iteration(g):
    idx = {"S": 0, "A": 1}
    z = np.zeros(2)
    for _ in range(8000):                       # fixed-point (Kleene) iteration from zero
        new = np.zeros(2)
        for r, p in zip(g.rules, g.probabilities):
            new[idx[r.lhs]] += float(p) * math.prod(z[idx[x]] for x in r.body if x in idx)
        z = new
    got = allsum(g)
    assert got <= 1 + 1e-9
    assert got == pytest.approx(z[0], abs=1e-3)            # Kleene converges slowly when critical
    assert allsum(g, symbol="A") == pytest.approx(z[1], abs=1e-3)


def test_allsum_divergence_names_the_nonterminals():
    g = CFG(["S", "T"], "abc", [("S", ("a", "S")), ("S", ("b", "S")), ("S", ("T",)),
                                 ("T", ("c",))], "S")
    with pytest.raises(DivergenceError, match=r"does not converge.*\['S'\]"):
        allsum(g, [0.6, 0.5, 1, 1])
    h = CFG(["S"], "a", [("S", ("S", "S")), ("S", ("a",))], "S")
    with pytest.raises(DivergenceError, match=r"\['S'\]"):
        allsum(h, [0.6, 0.5])                           # 0.6 Z² − Z + 0.5 has no real root
    assert allsum(h, [0.5, 0.5]) == pytest.approx(1.0, abs=1e-7)


def test_allsum_bad_input():
    g = CFG(["S"], "a", [("S", ("a",))], "S")
    with pytest.raises(InputError, match="needs rule weights"):
        allsum(g)
    with pytest.raises(InputError, match="one per rule"):
        allsum(g, [1, 2])
    with pytest.raises(InputError, match="negative"):
        allsum(g, [-1])
    with pytest.raises(InputError, match="not a rule"):
        allsum(g, {("S", ("b",)): 1})
    with pytest.raises(InputError, match="not a nonterminal"):
        allsum(g, [1], symbol="T")


# --- PCFG → weighted PDA ----------------------------------------------------------------------

@st.composite
def gnf_pcfgs(draw):
    """A PCFG whose every rule body begins with a terminal (0–3 more symbols)."""
    nts = ["S", "A", "B"]
    rules = {}
    for a in nts:
        bodies = {(draw(st.sampled_from("ab")),)
                  + tuple(draw(st.lists(st.sampled_from(["a", "b"] + nts), max_size=3)))
                  for _ in range(draw(st.integers(1, 3)))}
        ws = [draw(st.integers(1, 4)) for _ in bodies]
        for body, x in zip(sorted(bodies), ws):
            rules[(a, body)] = Fraction(x, sum(ws))
    return PCFG(nts, "ab", rules, "S")


def _derivation_sums(g: PCFG, max_len: int) -> dict:
    """String → total probability of its leftmost derivations, by enumerating the derivations
    (every symbol here yields ≥ 1 terminal, so a form longer than max_len is dropped)."""
    out: dict = {}
    todo = [((), (g.start,), Fraction(1))]
    while todo:
        done, form, w = todo.pop()
        while form and not g.is_nonterminal(form[0]):
            done, form = done + (form[0],), form[1:]
        if len(done) + len(form) > max_len:
            continue
        if not form:
            out[done] = out.get(done, 0) + w
            continue
        for r, p in zip(g.rules, g.probabilities):
            if r.lhs == form[0]:
                todo.append((done, r.body + form[1:], w * p))
    return out


@settings(max_examples=15, deadline=None)
@given(gnf_pcfgs())
def test_pcfg_to_wpda_string_weights(g):
    m = pcfg_to_wpda(g)
    want = _derivation_sums(g, 6)
    for n in range(1, 7):
        for w in itertools.product("ab", repeat=n):
            assert m.string_sum(w) == pytest.approx(float(want.get(w, 0)), rel=1e-12, abs=0), w
    assert m.string_sum(()) == 0
    some = max(want, key=len, default=None)
    if some is not None:                              # exact in the rational semiring
        assert pcfg_to_wpda(g, "rational").string_sum(some) == want[some]


def test_pcfg_to_wpda_length_six_and_real_semiring():
    g = PCFG.parse("""
        S -> a S B [1/3] | b A [1/3] | a [1/3]
        A -> a [1/2] | b S A [1/2]
        B -> b [3/4] | a B B [1/4]
    """)
    want = _derivation_sums(g, 6)
    exact, real = pcfg_to_wpda(g, "rational"), pcfg_to_wpda(g)
    for w in itertools.product("ab", repeat=6):
        assert real.string_sum(w) == pytest.approx(float(want.get(w, 0)), rel=1e-12, abs=0)
    for w in [tuple("aab"), tuple("bbaba"), tuple("aaabbb"), tuple("abaabb")]:
        assert exact.string_sum(w) == want.get(w, 0)
        assert real.string_sum(w) == pytest.approx(float(want.get(w, 0)), abs=1e-15)
        assert real.string_sum(w, "log") == pytest.approx(math.log(want[w]) if w in want
                                                          else -math.inf)
    assert DONE in real.states and real.empty_stack
    assert any(want.values())


def test_pcfg_to_wpda_start_epsilon():
    g = PCFG.parse("Z -> a S [1/2] | ε [1/2]\nS -> a S [1/4] | b [3/4]")
    m = pcfg_to_wpda(g, "rational")
    assert m.string_sum("ab") == Fraction(3, 8)
    assert m.string_sum("aab") == Fraction(3, 32)
    assert m.string_sum("") == 0


def test_pcfg_to_wpda_bad_input():
    with pytest.raises(GrammarError, match="begins with the nonterminal 'A'"):
        pcfg_to_wpda(PCFG.parse("S -> A b [1]\nA -> a [1]"))
    with pytest.raises(GrammarError, match="ε-rule"):
        pcfg_to_wpda(PCFG.parse("S -> a S [1/2] | ε [1/2]"))
    with pytest.raises(InputError, match="needs a PCFG"):
        pcfg_to_wpda(CFG(["S"], "a", [("S", ("a",))], "S"))


# --- allsum of a weighted PDA -----------------------------------------------------------------

@st.composite
def small_wpdas(draw, dag=False, scale=Fraction(1, 4)):
    """A WeightedPDA over {a, b} with stack symbol A. Weights: every (state, top) has outgoing
    total ≤ `scale`, so runs of length n weigh ≤ scaleⁿ in all. `dag`: moves only to a later
    state (finite support)."""
    Q = draw(st.integers(1, 3))
    trans: dict = {}
    from pdanet.automata.alphabet import BOTTOM
    for q in range(Q):
        for x in (BOTTOM, "A"):
            keys = set()
            for _ in range(draw(st.integers(0, 3))):
                r = draw(st.integers(q + 1, Q) if dag else st.integers(0, Q - 1))
                if r >= Q:
                    continue
                a = draw(st.sampled_from("ab"))
                ops = [("push", "A"), ("replace", BOTTOM if x is BOTTOM else "A")]
                ops += [] if x is BOTTOM else [("pop", None)]
                op, y = draw(st.sampled_from(ops))
                keys.add((q, x, a, r, op, y))
            ws = [draw(st.integers(1, 5)) for _ in keys]
            for k, w in zip(sorted(keys, key=repr), ws):
                trans[k] = Fraction(w, sum(ws)) * scale
    mode = draw(st.sampled_from(["all", "final", "empty"]))
    acc = None if mode == "all" else [q for q in range(Q) if draw(st.booleans())]
    from pdanet.automata.weighted import WeightedPDA
    return WeightedPDA(range(Q), "ab", ["A"], trans, 0, "rational", accepting=acc,
                       empty_stack=mode == "empty")


def _string_total(m, max_len: int):
    return sum(m.string_sum(w, "real") for n in range(max_len + 1)
               for w in itertools.product("ab", repeat=n))


@settings(max_examples=25, deadline=None)
@given(small_wpdas(dag=True))
def test_wpda_allsum_exact_on_finite_support(m):
    got = wpda_allsum(m)
    assert isinstance(got, Fraction)
    want = sum(m.string_sum(w) for n in range(len(m.states))
               for w in itertools.product("ab", repeat=n))
    assert got == want


@settings(max_examples=25, deadline=None)
@given(small_wpdas())
def test_wpda_allsum_bounds_the_string_sums(m):
    got = float(wpda_allsum(m))
    low = _string_total(m, 5)
    assert low - 1e-12 <= got <= low + 0.25 ** 6 / 0.75 + 1e-12


@settings(max_examples=20, deadline=None)
@given(gnf_pcfgs())
def test_wpda_allsum_of_pcfg_machine_is_the_partition_function(g):
    assert wpda_allsum(pcfg_to_wpda(g)) == pytest.approx(allsum(g), abs=1e-7)


def test_wpda_allsum_geometric_and_divergent():
    from pdanet.automata.alphabet import BOTTOM
    from pdanet.automata.weighted import WeightedPDA
    for p, q in [(0.3, 0.2), (0.5, 0.49)]:
        t = {(0, BOTTOM, "a", 0, "replace", BOTTOM): p, (0, BOTTOM, "b", 0, "replace", BOTTOM): q}
        m = WeightedPDA([0], "ab", [], t, 0, accepting=[0])
        assert wpda_allsum(m) == pytest.approx(1 / (1 - p - q), rel=1e-9)
    t[(0, BOTTOM, "b", 0, "replace", BOTTOM)] = 0.6
    with pytest.raises(DivergenceError, match="does not converge"):
        wpda_allsum(WeightedPDA([0], "ab", [], t, 0, accepting=[0]))
    # aⁿ bⁿ with weight pⁿ·(1−p)…: push A on a, pop on b; Σ_n (p q)ⁿ = 1 / (1 − p q)
    t = {(0, BOTTOM, "a", 0, "push", "A"): 0.5, (0, "A", "a", 0, "push", "A"): 0.5,
         (0, "A", "b", 1, "pop", None): 0.8, (1, "A", "b", 1, "pop", None): 0.8}
    m = WeightedPDA([0, 1], "ab", ["A"], t, 0, accepting=[0, 1], empty_stack=True)
    assert wpda_allsum(m) == pytest.approx(1 / (1 - 0.4), rel=1e-9)
    empty = WeightedPDA([0, 1], "ab", ["A"], {}, 0, accepting=[1])
    assert wpda_allsum(empty) == 0.0
    with pytest.raises(InputError, match="WeightedPDA"):
        wpda_allsum(PCFG.parse("S -> a [1]"))

"""Weighted PDAs with ε-arcs: ε-removal preserves every nonempty string's weight (against the
configuration-closure reference), geometric ε-cycles, divergence, refusals, NS-RNN compilation."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata import BOTTOM, EPSILON
from pdanet.automata import semiring as S
from pdanet.automata.weighted import WeightedPDA
from pdanet.automata.weighted_epsilon import INIT, remove_epsilon, string_weight
from pdanet.errors import (
    AutomatonError,
    CompileError,
    DivergenceError,
    InputError,
    SearchBoundError,
)

E = EPSILON
STACK = ("a", "b")


def _sym(j):
    return BOTTOM if j == 0 else STACK[j - 1]


def _ops(x, k):
    """The valid (op, y) of a top x with k stack symbols."""
    out = [("push", _sym(j)) for j in range(1, k + 1)]
    if x is BOTTOM:
        return out + [("replace", BOTTOM)]
    return out + [("replace", _sym(j)) for j in range(1, k + 1)] + [("pop", None)]


@st.composite
def eps_wpda(draw):
    """≤ 3 states, ≤ 2 stack symbols, rational weights; some input arcs and 1–3 ε-arcs of
    weight ≤ 1/4 (so ε-cycles converge)."""
    Q = draw(st.integers(1, 3))
    k = draw(st.integers(1, 2))
    tops = [_sym(j) for j in range(k + 1)]
    trans = {}
    for a in "xy":
        for q in range(Q):
            for x in tops:
                for r in range(Q):
                    for op, y in _ops(x, k):
                        if draw(st.integers(0, 5)) == 0:
                            trans[(q, x, a, r, op, y)] = Fraction(draw(st.integers(1, 3)), 2)
    arcs = [(q, x, E, r, op, y) for q in range(Q) for x in tops for r in range(Q)
            for op, y in _ops(x, k)]
    for key in draw(st.lists(st.sampled_from(arcs), min_size=1, max_size=3, unique=True)):
        trans[key] = Fraction(1, draw(st.integers(4, 9)))
    acc = draw(st.sampled_from([None, {0}, {Q - 1}]))
    return WeightedPDA(range(Q), "xy", STACK[:k], trans, 0, "rational", accepting=acc,
                       empty_stack=draw(st.booleans()))


STRINGS = [s for n in range(1, 6) for s in itertools.product("xy", repeat=n)]


def realtime_weight(n: WeightedPDA, s) -> object:
    """A real-time machine's string weight by its own brute-force simulation."""
    sr = n.semiring
    alpha = n.brute_force(s)
    return sr.sum(sr.times(alpha[-1], n.final_weights()))


def _handled(m, semiring):
    try:
        return remove_epsilon(m, semiring)
    except AutomatonError as exc:
        assert "not handled" in str(exc)
        return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(eps_wpda(), st.sampled_from(["rational", "real", "log"]))
def test_removal_preserves_every_weight(m, semiring):
    n = _handled(m, semiring)
    assume(n is not None)
    assert n.is_realtime and not m.is_realtime and n.semiring.name == semiring
    try:
        want = [string_weight(m, s, max_height=len(s) + 4, max_configs=400) for s in STRINGS]
    except SearchBoundError:                # dead ε-push loops: no finite reference
        assume(False)
    for s, w in zip(STRINGS, want):
        got = realtime_weight(n, s)
        if semiring == "rational":
            assert got == w, (s, got, w)                        # exact
        elif semiring == "real":
            assert math.isclose(got, float(w), rel_tol=1e-9, abs_tol=1e-300), (s, got, w)
        else:
            assert math.isclose(math.exp(got), float(w), rel_tol=1e-9, abs_tol=1e-300), s
    assert realtime_weight(n, ()) == n.semiring.zero            # stated: ε weighs zero
    assert n.string_sum(()) == n.semiring.zero
    if semiring == "rational":                                  # the support, by Lang's chart
        support = remove_epsilon(m, "boolean")
        for s, w in zip(STRINGS[:14], want):
            assert support.accepts(s) == (w != 0), s


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(eps_wpda())
def test_removal_in_the_tropical_semiring_keeps_the_cheapest_run(m):
    n = _handled(m, "tropical")
    assume(n is not None)
    try:
        want = [string_weight(m, s, "tropical", max_height=len(s) + 4, max_configs=400)
                for s in STRINGS[:14]]
    except SearchBoundError:
        assume(False)
    # tropical = −log of the Viterbi (max-times) weight: the best run, cycles never help
    for s, w in zip(STRINGS[:14], want):
        got = realtime_weight(n, s)
        assert got == w or math.isclose(got, w, rel_tol=1e-12), (s, got, w)
        best = string_weight(m, s, "viterbi", max_height=len(s) + 4)
        assert (w == math.inf and best == -math.inf) or math.isclose(-w, best, abs_tol=1e-12)


def test_reference_enumerates_runs_on_an_acyclic_machine():
    """string_weight against explicit run enumeration where ε-arcs form no cycle."""
    t = {(0, BOTTOM, "x", 0, "push", "a"): Fraction(1, 2),
         (0, "a", E, 1, "replace", "b"): Fraction(1, 3),
         (1, "b", "y", 0, "pop", None): Fraction(2, 3),
         (0, BOTTOM, E, 1, "replace", BOTTOM): Fraction(1, 5),
         (1, BOTTOM, "x", 0, "push", "b"): Fraction(1, 7),
         (0, "b", E, 1, "replace", "b"): Fraction(1, 4)}
    m = WeightedPDA([0, 1], "xy", "ab", t, 0, "rational", accepting={0})
    n = remove_epsilon(m)

    def runs(q, st, rest):
        """Total weight of the runs from (q, stack) that read `rest` and end accepting."""
        total = Fraction(int(not rest and q == 0))
        for key, w in t.items():
            if (key[0], key[1]) != (q, st[-1]) or (key[2] is not E and key[2] != rest[:1]):
                continue
            st2 = st + (key[5],) if key[4] == "push" else \
                st[:-1] if key[4] == "pop" else st[:-1] + (key[5],)
            total += w * runs(key[3], st2, rest if key[2] is E else rest[1:])
        return total

    for s in [""] + ["".join(s) for s in STRINGS]:
        want = runs(0, (BOTTOM,), s)
        assert string_weight(m, s) == want, s
        if s:
            assert realtime_weight(n, s) == want, s


# --- geometric ε-cycles -----------------------------------------------------------------------

def geometric(p: Fraction, q: Fraction, semiring="rational", push=False) -> WeightedPDA:
    """0 —x/1→ 1; an ε-cycle 1 —ε/p→ 2 —ε/q→ 1 (replace, or push a then pop it); 1 —y/1→ 0;
    accepting {1}. weight(x (y x)^k) = (1/(1 − pq))^(k+1)."""
    if push:
        cyc = {(1, BOTTOM, E, 2, "push", "a"): p, (2, "a", E, 1, "pop", None): q}
    else:
        cyc = {(1, BOTTOM, E, 2, "replace", BOTTOM): p, (2, BOTTOM, E, 1, "replace", BOTTOM): q}
    t = {(0, BOTTOM, "x", 1, "replace", BOTTOM): 1, (1, BOTTOM, "y", 0, "replace", BOTTOM): 1,
         **cyc}
    sr = S.get(semiring)
    t = {k: (sr.lift(v) if semiring != "rational" else Fraction(v)) for k, v in t.items()}
    return WeightedPDA([0, 1, 2], "xy", "a", t, 0, sr, accepting={1})


@pytest.mark.parametrize("push", [False, True])
def test_geometric_series_closed_form(push):
    p, q = Fraction(2, 3), Fraction(3, 5)                  # pq = 2/5: Σ (pq)^k = 5/3
    m = geometric(p, q, push=push)
    n = remove_epsilon(m)
    for k in range(3):
        s = "x" + "yx" * k
        want = Fraction(5, 3) ** (k + 1)
        assert string_weight(m, s) == want == n.string_sum(s)
        assert n.string_sum(s + "y") == 0 == string_weight(m, s + "y")
    log = remove_epsilon(geometric(p, q, "log", push=push))
    assert math.isclose(log.string_sum("xyx"), 2 * math.log(5 / 3), rel_tol=1e-12)
    real = remove_epsilon(m, "real")
    assert math.isclose(real.string_sum("x"), 5 / 3, rel_tol=1e-12)
    trop = remove_epsilon(m, "tropical")                  # the cheapest run takes no ε-cycle
    assert trop.string_sum("xyx") == 0.0


@pytest.mark.parametrize("push", [False, True])
@pytest.mark.parametrize("semiring", ["rational", "real", "log"])
def test_divergent_epsilon_cycle_is_named(push, semiring):
    m = geometric(Fraction(2), Fraction(1, 2), semiring, push=push)   # pq = 1: Σ 1 diverges
    arc = (1, BOTTOM, E, 2, "push", "a") if push else (1, BOTTOM, E, 2, "replace", BOTTOM)
    with pytest.raises(DivergenceError, match="ε-arcs") as info:
        remove_epsilon(m)
    assert repr(arc) in str(info.value) and "(state 1, top ⊥)" in str(info.value)
    over = geometric(Fraction(3), Fraction(1, 2), semiring, push=push)  # pq = 3/2 > 1
    with pytest.raises(DivergenceError, match="ε-arcs"):
        remove_epsilon(over)
    if semiring != "rational":
        return
    with pytest.raises(DivergenceError, match="cycle"):
        string_weight(m, "x")
    neg = geometric(Fraction(2), Fraction(1, 2), "tropical", push=push)   # cost −log 1 = 0
    assert remove_epsilon(neg).string_sum("x") == 0.0
    cheap = {k: (v - 1.0 if k[2] is E else v) for k, v in neg.transitions.items()}
    negative = WeightedPDA(neg.states, "xy", "a", cheap, 0, "tropical", accepting={1})
    with pytest.raises(DivergenceError, match="negative cycle"):
        remove_epsilon(negative)


# --- refusals and typed errors ----------------------------------------------------------------

def test_realtime_only_operations_refuse_epsilon_machines():
    m = geometric(Fraction(1, 2), Fraction(1, 2))
    assert not m.is_realtime and "ε-arcs" in repr(m) and len(m.epsilon_arcs) == 2
    for call in (lambda: m.chart("x"), lambda: m.string_sum("x"), lambda: m.accepts("x"),
                 lambda: m.run_batch(*m.encode(["x"])), lambda: m.best_run("x"),
                 lambda: pn.wpda_to_wcfg(m)):
        with pytest.raises(AutomatonError, match="remove_epsilon"):
            call()
    with pytest.raises(CompileError, match="remove_epsilon"):
        pn.compile(m, target="ns_rnn")
    n = remove_epsilon(m)
    assert n.is_realtime and remove_epsilon(n) is n and INIT in n.states
    with pytest.raises(InputError):
        remove_epsilon("not a machine")
    with pytest.raises(InputError):
        string_weight(m, "xz")


def test_epsilon_pop_chains_are_refused_with_the_arc():
    t = {(0, BOTTOM, "x", 0, "push", "a"): 1, (0, "a", "x", 0, "push", "a"): 1,
         (0, "a", "y", 1, "pop", None): 1, (1, "a", E, 1, "pop", None): Fraction(1, 2)}
    m = WeightedPDA([0, 1], "xy", "a", t, 0, "rational", accepting={1}, empty_stack=True)
    with pytest.raises(AutomatonError, match=r"not handled") as info:
        remove_epsilon(m)
    assert "(0, 'a', 'y', 1, 'pop', None)" in str(info.value)
    assert string_weight(m, "xxxy") == Fraction(1, 4)       # the reference still weighs it


def test_unbounded_epsilon_push_nesting_is_refused():
    # ε: (1, a) pushes a and goes back to 1, or pops a: pop computations nest without bound
    t = {(0, BOTTOM, "x", 1, "push", "a"): 1, (1, "a", E, 1, "push", "a"): Fraction(1, 4),
         (1, "a", E, 2, "pop", None): Fraction(1, 2), (2, "a", E, 2, "pop", None): Fraction(1, 2),
         (2, BOTTOM, "y", 2, "replace", BOTTOM): 1}
    m = WeightedPDA([0, 1, 2], "xy", "a", t, 0, "rational", accepting={2})
    with pytest.raises(AutomatonError, match="nest without bound"):
        remove_epsilon(m)
    with pytest.raises(SearchBoundError):
        string_weight(m, "xy", max_height=5)


def test_one_epsilon_push_per_step_is_kept():
    """An ε-push after a replace, and ε-pushes/pops around a pop, in one step each."""
    t = {(0, BOTTOM, "x", 1, "replace", BOTTOM): Fraction(1, 2),
         (1, BOTTOM, E, 0, "push", "a"): Fraction(1, 3),          # x then push: one push
         (0, "a", "x", 2, "push", "b"): Fraction(1, 5),
         (2, "b", E, 0, "pop", None): Fraction(1, 7),              # push b then pop it: no-op
         (0, "a", "y", 3, "pop", None): 1,
         (3, BOTTOM, E, 0, "replace", BOTTOM): Fraction(1, 11)}
    m = WeightedPDA([0, 1, 2, 3], "xy", "ab", t, 0, "rational", accepting={0, 3})
    n = remove_epsilon(m)
    for s in STRINGS:
        assert realtime_weight(n, s) == string_weight(m, s), s
    assert string_weight(m, "xxy") == Fraction(1, 2) * Fraction(1, 3) * Fraction(1, 5) \
        * Fraction(1, 7) * 1 * (1 + Fraction(1, 11))


# --- the NS-RNN compiler ------------------------------------------------------------------------

def test_removed_machine_compiles_to_ns_rnn_and_verifies():
    import torch

    m = geometric(Fraction(2, 3), Fraction(3, 5), "real", push=True)
    n = remove_epsilon(m)
    net = pn.compile(n, target="ns_rnn", dtype=torch.float64)
    rep = pn.verify(n, net, max_length=5, samples=20, sample_lengths=(6, 12), long_length=20,
                    long_samples=2)
    assert rep.ok, rep.counterexample
    ids, lengths = n.encode(["xyx", "x", "xy"])
    logw = n.run_batch(ids, lengths)["log_weight"]
    assert np.allclose(np.exp(logw[[0, 1], [3, 1]]), [(5 / 3) ** 2, 5 / 3], rtol=1e-12)
    with torch.no_grad():
        _, logits = net.forward(torch.as_tensor(ids))
    assert np.allclose(np.exp(logits[0, 3, 0].item()), (5 / 3) ** 2, rtol=1e-9)

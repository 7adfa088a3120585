"""Weighted PDAs: Lang's algorithm, windows, Viterbi, transducers against brute force (exact)."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata import BOTTOM, EPSILON, PDA, tasks
from pdanet.automata import semiring as S
from pdanet.automata.weighted import (
    WeightedPDA,
    WeightedPDT,
    hardest_cfl_realtime,
    valid_ops_mask,
)
from pdanet.errors import AutomatonError

STACK = ("a", "b")


def _sym(j):
    return BOTTOM if j == 0 else STACK[j - 1]


@st.composite
def small_wpda(draw):
    Q = draw(st.integers(1, 2))
    m = draw(st.integers(1, 2))
    G = m + 1
    valid = valid_ops_mask(G)
    trans = {}
    for a in "xy":
        for q in range(Q):
            for x in range(G):
                for r in range(Q):
                    for o in range(2 * G + 1):
                        if valid[x, o] and draw(st.booleans()):
                            op, y = ("pop", None) if o == 2 * G else \
                                ("replace", _sym(o - G)) if o >= G else ("push", _sym(o))
                            trans[(q, _sym(x), a, r, op, y)] = Fraction(draw(st.integers(1, 3)), 2)
    acc = draw(st.sampled_from([None, {0}]))
    return WeightedPDA(range(Q), "xy", STACK[:m], trans, 0, "rational", accepting=acc,
                       empty_stack=draw(st.booleans()))


strings = st.text(alphabet="xy", max_size=6)


@settings(max_examples=40, deadline=None)
@given(small_wpda(), strings, st.sampled_from([None, 1, 2, 3]))
def test_lang_equals_brute_force_exactly(m, s, window):
    assert np.array_equal(m.chart(s, window=window).alpha, m.brute_force(s, window=window))


@settings(max_examples=25, deadline=None)
@given(small_wpda(), strings)
def test_string_sum_reading_and_viterbi(m, s):
    bf = m.brute_force(s)
    final = m.final_weights()
    assert m.string_sum(s) == (bf[-1] * final).sum()
    assert m.accepts(s) == ((bf[-1] * final).sum() > 0)
    rd = m.reading(s, S.RATIONAL)
    for t in range(len(s) + 1):
        tot = bf[t].sum()
        assert np.array_equal(rd[t], bf[t] / tot if tot else bf[t] * 0)
    best = m.best_run(s)
    vit = m.brute_force(s, S.VITERBI)[-1] + m.final_weights(S.VITERBI)
    assert np.isclose(best.weight, vit.max()) or best.weight == vit.max() == -np.inf
    if best.transitions:                  # replay the run: it is valid and has that weight
        state, stack, logw = m.start, [BOTTOM], 0.0
        for sym, (q, x, a, r, op, y) in zip(s, best.transitions):
            assert (q, x, a) == (state, stack[-1], sym)
            logw += np.log(float(m.transitions[(q, x, a, r, op, y)]))
            if op == "push":
                stack.append(y)
            elif op == "pop":
                stack.pop()
            else:
                stack[-1] = y
            state = r
        assert len(best.transitions) == len(s) and np.isclose(logw, best.weight)


def test_window_at_least_length_is_exact():
    m = WeightedPDA.from_pda(tasks.get("unmarked_reversal"), "real")
    s = "0110011001100110"
    assert np.array_equal(m.chart(s, window=len(s)).alpha, m.chart(s).alpha)
    assert m.string_sum(s, window=2) == 0 and m.string_sum(s) == 1


@pytest.mark.parametrize("name", ["marked_reversal", "unmarked_reversal", "padded_reversal",
                                  "dyck2"])
def test_boolean_membership_matches_the_pda(name):
    pda = tasks.get(name)
    m = WeightedPDA.from_pda(pda, "boolean")
    syms = pda.alphabet.symbols
    for n in range(6 if len(syms) < 4 else 5):
        for s in itertools.product(syms, repeat=n):
            assert m.accepts(s) == pda.accepts(s), s


def test_hardest_cfl_realtime_matches_reference():
    m = hardest_cfl_realtime()
    ref = tasks.reference("hardest_cfl", dollar=False)
    rng = np.random.default_rng(0)
    cases = [tuple(rng.choice(list("()[],;"), n)) for n in range(12) for _ in range(30)]
    cases += tasks.sample("hardest_cfl", 20, range(6, 20), rng=0, dollar=False)
    for s in cases:
        assert m.accepts(s) == ref(s), s


def test_hardest_cfl_task_has_the_realtime_machine():
    m = tasks.get("hardest_cfl", realtime=True, dollar=False)
    assert isinstance(m, WeightedPDA) and m.transitions == hardest_cfl_realtime().transitions
    assert tasks.get("hardest_cfl") is not None and not isinstance(tasks.get("hardest_cfl"),
                                                                     WeightedPDA)


@settings(max_examples=30, deadline=None)
@given(small_wpda(), st.lists(st.text(alphabet="xy", max_size=9), min_size=1, max_size=4),
       st.sampled_from([None, 1, 2, 4]))
def test_batched_float64_lang_equals_exact_chart(m, batch, window):
    """lang_log_batch (float64, batched, scaled) against the exact rational chart."""
    ids, lengths = m.encode(batch)
    la = m.log_alpha_batch(ids, lengths, window)
    tr = m.run_batch(ids, lengths, window)
    final = m.final_weights()
    for b, s in enumerate(batch):
        exact = m.chart(s, window=window).alpha
        n = len(s)
        want = np.array([[[float(v) for v in row] for row in tab] for tab in exact])
        with np.errstate(divide="ignore"):
            assert np.allclose(np.exp(la[b, :n + 1]), want, rtol=1e-12, atol=0)
        assert (la[b, n + 1:] == la[b, n]).all()                 # rows past the length hold
        sums = [float((exact[t] * final).sum()) for t in range(n + 1)]
        assert np.allclose(np.exp(tr["log_weight"][b, :n + 1]), sums, rtol=1e-12, atol=0)
        assert (tr["output"][b, :n + 1] == (np.array(sums) > 0)).all()
        rd = m.reading(s, S.RATIONAL, window)
        assert np.allclose(tr["reading"][b, :n + 1],
                           np.array(rd, dtype=float).reshape(tr["reading"][b, :n + 1].shape))


def test_batched_lang_on_long_strings_matches_semiring_chart():
    m = WeightedPDA.from_pda(tasks.get("unmarked_reversal"))
    rng = np.random.default_rng(1)
    batch = tasks.sample("unmarked_reversal", 3, [30, 36], rng=1) + \
        [tuple(rng.choice(["0", "1"], 33))]
    ids, lengths = m.encode(batch)
    la = m.log_alpha_batch(ids, lengths)
    for b, s in enumerate(batch):
        ref = m.chart(s, S.LOG).alpha
        fin = np.isfinite(ref)
        assert (np.isfinite(la[b, :len(s) + 1]) == fin).all()
        assert np.allclose(la[b, :len(s) + 1][fin], ref[fin], rtol=1e-12, atol=1e-12)


def test_bad_machines_are_typed_errors():
    ok = {(0, BOTTOM, "x", 0, "push", "a"): 1.0}
    eps_m = WeightedPDA([0], "x", "a", {(0, BOTTOM, EPSILON, 0, "push", "a"): 1.0}, 0)
    with pytest.raises(AutomatonError, match="remove_epsilon"):
        eps_m.string_sum("x")
    with pytest.raises(AutomatonError, match="negative"):
        WeightedPDA([0], "x", "a", {(0, BOTTOM, "x", 0, "push", "a"): -0.5}, 0)
    with pytest.raises(AutomatonError, match="not declared"):
        WeightedPDA([0], "x", "a", {(0, BOTTOM, "x", 7, "push", "a"): 1.0}, 0)
    with pytest.raises(AutomatonError, match="BOTTOM cannot be popped"):
        WeightedPDA([0], "x", "a", {(0, BOTTOM, "x", 0, "pop", None): 1.0}, 0)
    with pytest.raises(AutomatonError, match="stack alphabet"):
        WeightedPDA([0], "x", "a", {(0, BOTTOM, "x", 0, "push", "zz"): 1.0}, 0)
    assert WeightedPDA([0], "x", "a", {(0, BOTTOM, "x", 0, "push", "a"): -0.5}, 0, "log")
    assert WeightedPDA([0], "x", "a", ok, 0).string_sum("x") == 1.0
    eps = PDA([0], "x", "a", {(0, EPSILON, BOTTOM): (0, ("a", BOTTOM))}, 0)
    with pytest.raises(AutomatonError, match="ε-move"):
        WeightedPDA.from_pda(eps)
    long = PDA([0], "x", "a", {(0, "x", BOTTOM): (0, ("a", "a", BOTTOM))}, 0)
    with pytest.raises(AutomatonError, match="one stack operation"):
        WeightedPDA.from_pda(long)


def test_weighted_pdt_against_enumeration():
    # reads x/y, pushes them, then may start popping, emitting what it pops (nondeterministically)
    t = {}
    for a in "xy":
        for top in (BOTTOM, "x", "y"):
            t[(0, top, a, 0, "push", a, ())] = Fraction(1, 2)
            t[(0, top, a, 0, "push", a, ("c",))] = Fraction(1, 3)
        for top in ("x", "y"):
            t[(0, top, a, 1, "pop", None, (top,))] = Fraction(1)
            t[(1, top, a, 1, "pop", None, (top, top))] = Fraction(1, 5)
    pdt = WeightedPDT([0, 1], "xy", "xyc", ("x", "y"), {k: float(v) for k, v in t.items()}, 0)
    for s in ["xy", "xyx", "xxy"]:
        runs = {}
        keys = list(t)
        for combo in itertools.product(keys, repeat=len(s)):
            state, stack, w, out = 0, [BOTTOM], Fraction(1), []
            for sym, (q, x, a, r, op, y, o) in zip(s, combo):
                if (q, x, a) != (state, stack[-1], sym):
                    break
                w *= t[(q, x, a, r, op, y, o)]
                stack = stack + [y] if op == "push" else stack[:-1]
                state = r
                out += list(o)
            else:
                runs[tuple(out)] = runs.get(tuple(out), 0) + w
        assert np.isclose(pdt.total_weight(s), float(sum(runs.values())))
        for out, w in runs.items():
            assert np.isclose(pdt.weight(s, out), float(w))
        assert pdt.weight(s, ("c",) * 9) == 0
        best_out, _ = pdt.best(s)
        assert best_out in runs


def test_from_dpdt_transduces_like_the_dpdt():
    dpdt = tasks.get("reversal")
    w = WeightedPDT.from_dpdt(dpdt)
    for s in tasks.sample("reversal", 3, [4, 6], rng=0):
        out = dpdt.transduce(s)
        assert w.weight(s, out) == 1
        assert w.best(s)[0] == out

"""`intersect`: PDA/DPDA ∩ regular language (product construction), checked against brute force."""

from __future__ import annotations

import re
from itertools import product

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.dfa import DFA
from pdanet.automata.intersection import ProductStart, intersect
from pdanet.automata.nfa import NFA
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.pdt import DPDT
from pdanet.errors import EpsilonLoopError, InputError

SIGMA = "ab"
GAMMA = "AB"
MAXLEN = 6
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def strings(alphabet: str = SIGMA, n: int = MAXLEN):
    for k in range(n + 1):
        for w in product(alphabet, repeat=k):
            yield "".join(w)


def assert_intersection(pushdown, regular, inter, oracle=None, alphabet: str = SIGMA,
                        n: int = MAXLEN) -> int:
    """Every string up to length n: inter accepts it iff both operands do. Returns how many are
    accepted (so a test can check it is not trivially empty)."""
    oracle = oracle or regular.accepts
    count = 0
    for w in strings(alphabet, n):
        want = pushdown.accepts(w) and oracle(w)
        assert inter.accepts(w) == want, (w, pushdown.accepts(w), oracle(w))
        count += want
    return count


# --- strategies ----------------------------------------------------------------------------------
def _gamma(draw, x):
    """A pushed string for top x: length 0–2 (BOTTOM re-pushed under at most one symbol)."""
    ys = draw(st.lists(st.sampled_from(GAMMA), max_size=1 if x is BOTTOM else 2))
    return (*ys, BOTTOM) if x is BOTTOM else tuple(ys)


@st.composite
def pdas(draw, acceptance=None):
    n = draw(st.integers(1, 3))
    states = list(range(n))
    acceptance = acceptance or draw(st.sampled_from(["final_state", "empty_stack"]))
    trans: dict = {}
    keys = [(q, a, x) for q in states for a in [*SIGMA, EPSILON] for x in [*GAMMA, BOTTOM]]
    for key in draw(st.lists(st.sampled_from(keys), max_size=10, unique=True)):
        _, a, x = key
        moves = set()
        for _ in range(draw(st.integers(1, 2))):
            g = _gamma(draw, x)
            if a is EPSILON:  # ε-moves never grow the stack: closures stay finite
                g = g[-1:] if x is BOTTOM else g[:1]
            moves.add((draw(st.sampled_from(states)), g))
        trans[key] = moves
    acc = draw(st.sets(st.sampled_from(states))) if acceptance == "final_state" else ()
    return PDA(states, SIGMA, GAMMA, trans, 0, acc, acceptance=acceptance)


@st.composite
def dpdas(draw, acceptance=None):
    n = draw(st.integers(1, 3))
    states = list(range(n))
    acceptance = acceptance or draw(st.sampled_from(["final_state", "empty_stack"]))
    trans: dict = {}
    for q in states:
        for x in [*GAMMA, BOTTOM]:
            kind = draw(st.sampled_from(["none", "read", "read", "read", "eps"]))
            reads = [EPSILON] if kind == "eps" else list(SIGMA) if kind == "read" else []
            for a in reads:
                if kind == "read" and draw(st.integers(0, 3)) == 0:
                    continue
                g = _gamma(draw, x)
                trans[(q, a, x)] = (draw(st.sampled_from(states)), g)
    acc = draw(st.sets(st.sampled_from(states), min_size=1)) if acceptance == "final_state" \
        else ()
    try:
        return DPDA(states, SIGMA, GAMMA, trans, 0, acc, acceptance=acceptance)
    except EpsilonLoopError:
        assume(False)


@st.composite
def dfas(draw, alphabet: str = SIGMA):
    n = draw(st.integers(1, 3))
    trans = {}
    for q in range(n):
        for a in alphabet:
            t = draw(st.sampled_from([-1, *range(n), *range(n)]))  # -1: missing (dead state)
            if t >= 0:
                trans[(q, a)] = t
    return DFA(range(n), alphabet, trans, 0, draw(st.sets(st.integers(0, n - 1), min_size=1)))


@st.composite
def nfas(draw):
    n = draw(st.integers(1, 3))
    keys = [(q, a) for q in range(n) for a in [*SIGMA, EPSILON]]
    trans = {k: draw(st.sets(st.integers(0, n - 1), max_size=2))
             for k in draw(st.lists(st.sampled_from(keys), max_size=8, unique=True))}
    starts = draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=2))
    return NFA(range(n), SIGMA, trans, starts, draw(st.sets(st.integers(0, n - 1), min_size=1)))


# --- hypothesis against brute force ------------------------------------------------------------
@SETTINGS
@given(pdas(), dfas())
def test_pda_dfa_agrees_with_brute_force(p, r):
    inter = intersect(p, r)
    assert isinstance(inter, PDA)
    assert inter.acceptance == "final_state"
    assert_intersection(p, r, inter)


@SETTINGS
@given(pdas(), nfas())
def test_pda_nfa_carries_epsilon_moves(p, r):
    inter = intersect(p, r)
    assert isinstance(inter, PDA)
    assert_intersection(p, r, inter)


@SETTINGS
@given(dpdas(), dfas())
def test_dpda_dfa_stays_deterministic(p, r):
    inter = intersect(p, r)
    assert isinstance(inter, DPDA)
    assert_intersection(p, r, inter)
    # the batched simulation agrees with the step-by-step one
    ws = list(strings(n=4))
    ids, lengths = inter.encode(ws)
    out = inter.run_batch(ids, lengths)["output"]
    assert [bool(out[i, lengths[i]]) for i in range(len(ws))] == [inter.accepts(w) for w in ws]


@SETTINGS
@given(dpdas(), nfas())
def test_dpda_nfa_is_determinised(p, r):
    inter = intersect(p, r)
    assert isinstance(inter, DPDA)
    assert_intersection(p, r, inter)


def sigma_star(cls, acceptance: str) -> PDA | DPDA:
    """A one-state machine accepting every string over SIGMA (its stack stays at BOTTOM)."""
    trans = {("s", a, BOTTOM): ("s", (BOTTOM,)) for a in SIGMA}
    return cls(["s"], SIGMA, GAMMA, trans, "s", ["s"] if acceptance == "final_state" else [],
               acceptance=acceptance)


@SETTINGS
@given(st.sampled_from([PDA, DPDA]), st.sampled_from(["final_state", "empty_stack"]),
       st.one_of(nfas(), dfas()))
def test_universal_pushdown_gives_the_regular_language(cls, acceptance, r):
    """Σ* ∩ L(R) = L(R): every (ε-closed) move of the finite automaton is carried over."""
    inter = intersect(sigma_star(cls, acceptance), r)
    assert isinstance(inter, cls)
    for w in strings():
        assert inter.accepts(w) == r.accepts(w), w


@SETTINGS
@given(pdas(), st.sampled_from(["a*b*", "(ab)*", "(a|b)*a", "b?(a|ba)*", ""]))
def test_regex_operand(p, pattern):
    inter = intersect(p, pattern)
    assert_intersection(p, None, inter, oracle=lambda w: re.fullmatch(pattern, w) is not None)


@SETTINGS
@given(pdas(), dfas())
def test_operands_in_either_order(p, r):
    assert intersect(r, p) == intersect(p, r)


# --- worked examples -----------------------------------------------------------------------------
def anbn(acceptance: str = "final_state") -> DPDA:
    """{aⁿbⁿ : n ≥ 0}, by final state or by empty stack."""
    trans = {("p", "a", BOTTOM): ("p", ("A", BOTTOM)), ("p", "a", "A"): ("p", ("A", "A")),
             ("p", "b", "A"): ("q", ()), ("q", "b", "A"): ("q", ())}
    if acceptance == "final_state":
        trans[("s", "a", BOTTOM)] = ("p", ("A", BOTTOM))
        trans[("q", EPSILON, BOTTOM)] = ("f", (BOTTOM,))
        del trans[("p", "a", BOTTOM)]
        return DPDA("spqf", "ab", "A", trans, "s", "sf")
    return DPDA("pq", "ab", "A", trans, "p", acceptance="empty_stack")


@pytest.mark.parametrize("acceptance", ["final_state", "empty_stack"])
def test_anbn_with_even_lengths(acceptance):
    p = anbn(acceptance)
    assert p.accepts("") and p.accepts("aabb") and not p.accepts("aab")
    inter = intersect(p, "(aa)*(bb)*")
    assert isinstance(inter, DPDA) and inter.acceptance == "final_state"
    accepted = [w for w in strings(n=8) if inter.accepts(w)]
    assert accepted == ["", "aabb", "aaaabbbb"]


def test_empty_stack_product_marks_the_symbol_on_bottom():
    inter = intersect(anbn("empty_stack"), "a*b*")
    assert set(inter.stack_alphabet) == {"A₀", "A₁"}
    assert all(len(q) == 3 for q in inter.states)
    assert inter.accepting == {q for q in inter.states if q[2]}


def test_nondeterministic_palindromes_with_a_regex():
    """Even palindromes over {a, b} (guess the middle) ∩ a*b*a* = {aⁱ b²ʲ aⁱ}."""
    trans: dict = {}
    for s in "ab":
        for x in ["a", "b", BOTTOM]:
            trans[("push", s, x)] = {("push", (s, x))}
        trans[("pop", s, s)] = {("pop", ())}
    for x in ["a", "b", BOTTOM]:
        trans.setdefault(("push", EPSILON, x), set()).add(("pop", (x,)))
    pal = PDA(["push", "pop"], "ab", "ab", trans, "push", acceptance="empty_stack")
    inter = intersect(pal, "a*b*a*")
    want = {w for w in strings(n=8)
            if w == w[::-1] and len(w) % 2 == 0 and re.fullmatch("a*b*a*", w)}
    assert {w for w in strings(n=8) if inter.accepts(w)} == want
    assert "abba" in want and "aabbaa" in want


def test_nfa_with_several_start_states_gets_a_fresh_start():
    r = NFA([0, 1], "ab", {(0, "a"): 0, (1, "b"): 1}, [0, 1], [0, 1])  # a* | b*
    p = PDA(["s"], "ab", "A", {("s", "a", BOTTOM): ("s", (BOTTOM,)),
                               ("s", "b", BOTTOM): ("s", (BOTTOM,))}, "s", ["s"])
    inter = intersect(p, r)
    assert isinstance(inter.start, ProductStart)
    assert_intersection(p, r, inter, n=5)


def test_symbols_outside_the_regular_alphabet_are_rejected():
    p = PDA(["s"], "abc", "A", {("s", c, BOTTOM): ("s", (BOTTOM,)) for c in "abc"}, "s", ["s"])
    r = DFA([0], "ab", {(0, "a"): 0, (0, "b"): 0}, 0, [0])
    inter = intersect(p, r)
    assert inter.alphabet == p.alphabet
    for w in strings("abc", 4):
        assert inter.accepts(w) == ("c" not in w)


def test_finite_automata_alone_use_the_dfa_product():
    r1 = DFA([0, 1], "ab", {(0, "a"): 1, (1, "a"): 0, (0, "b"): 0, (1, "b"): 1}, 0, [0])
    r2 = NFA([0, 1], "ab", {(0, "a"): {0, 1}, (0, "b"): 0}, 0, [1])
    inter = intersect(r1, r2)
    assert isinstance(inter, DFA)
    for w in strings():
        assert inter.accepts(w) == (r1.accepts(w) and r2.accepts(w))


def test_name():
    assert intersect(anbn(), "a*b*", name="x").name == "x"
    assert "∩" in intersect(anbn(), "a*b*").name


# --- bad input ---------------------------------------------------------------------------------
def test_two_pushdown_machines_are_refused():
    p = anbn()
    q = PDA(["s"], "ab", "A", {}, "s", ["s"])
    for a, b in [(p, q), (q, p), (p, p), (q, q)]:
        with pytest.raises(InputError, match="need not be context-free") as info:
            intersect(a, b)
        assert "undecidable" in str(info.value)


def test_bad_operands():
    p = anbn()
    mealy = DFA([0], "ab", {(0, "a"): 0, (0, "b"): 0}, 0, outputs={(0, "a"): "x", (0, "b"): "y"})
    with pytest.raises(InputError, match="Mealy"):
        intersect(p, mealy)
    with pytest.raises(InputError, match="regular language"):
        intersect(p, 3)
    with pytest.raises(InputError, match="pushdown machine"):
        intersect("a*", "b*")
    with pytest.raises(InputError, match="position"):
        intersect(p, "a(b")  # the regex parser names the bad position
    with pytest.raises(InputError, match="name"):
        intersect(p, "a*", name=3)
    t = DPDT(["q"], "ab", "xy", "A", {("q", "a", BOTTOM): ("q", "x", (BOTTOM,))}, "q")
    with pytest.raises(InputError, match="transducer"):
        intersect(t, "a*")


@pytest.mark.parametrize("acceptance", ["final_state", "empty_stack"])
def test_product_saves_and_loads(tmp_path, acceptance):
    from pdanet.automata.io import load

    inter = intersect(anbn(acceptance), "a*b*")
    path = str(tmp_path / "product.json")
    inter.save(path)
    again = load(path)
    assert isinstance(again, DPDA)
    assert [again.accepts(w) for w in strings()] == [inter.accepts(w) for w in strings()]


def test_empty_stack_with_non_string_stack_symbols_keeps_pairs():
    trans = {("p", "a", BOTTOM): ("p", (7, BOTTOM)), ("p", "a", 7): ("p", (7, 7)),
             ("p", "b", 7): ("q", ()), ("q", "b", 7): ("q", ())}
    p = PDA(["p", "q"], "ab", [7], trans, "p", acceptance="empty_stack")
    r = NFA([0, 1], "ab", {(0, "a"): 1, (1, "a"): 0, (0, "b"): 0, (1, "b"): 1}, 0, [0])
    inter = intersect(p, r)
    assert set(inter.stack_alphabet) == {(7, 0), (7, 1)}
    assert inter.max_configs == p.max_configs * 2
    assert assert_intersection(p, r, inter, n=8) == 3  # ε, aabb, aaaabbbb


def test_a_product_compiles_and_verifies():
    """w # wᴿ ∩ 0*#(0|1)*: a real-time DPDA again, so it compiles to a stack RNN and verifies."""
    m = pn.intersect(pn.tasks.get("marked_reversal"), "0*#(0|1)*")
    assert m.accepts("00#00") and not m.accepts("01#10")
    net = pn.compile(m, target="stack_rnn")
    assert pn.verify(m, net, max_length=6, samples=20, long_samples=0).ok

"""Finite-state transducers: translation and the rational operations, checked against brute-force
relations on all input strings up to length 4 (outputs bounded) of small random FSTs."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import EPSILON
from pdanet.automata.dfa import DFA
from pdanet.automata.fst import FST
from pdanet.automata.nfa import NFA
from pdanet.errors import AutomatonError, EpsilonLoopError, FrozenMachineError, InputError

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
L = 4  # output bound of the brute-force relations


def strings(alphabet, max_length):
    for n in range(max_length + 1):
        yield from itertools.product(tuple(alphabet), repeat=n)


@st.composite
def fsts(draw, inp="ab", out="xy", max_states=3, eps_output=True):
    n = draw(st.integers(1, max_states))
    outputs = st.lists(st.sampled_from(out), max_size=2).map(tuple)
    trans = {}
    for q in range(n):
        for a in list(inp) + [EPSILON]:
            ys = outputs if (a is not EPSILON or eps_output) else st.just(())
            moves = draw(st.lists(st.tuples(st.integers(0, n - 1), ys),
                                  max_size=2 if a is not EPSILON else 1))
            if moves:
                trans[(q, a)] = moves
    start = draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=2))
    accepting = draw(st.sets(st.integers(0, n - 1)))
    return FST(range(n), inp, out, trans, start, accepting)


def oracle(t: FST, x, bound) -> set:
    """All outputs of length ≤ bound of paths reading x: search over (state, position, output)."""
    x = tuple(x)
    seen, found = set(), set()
    todo = [(q, 0, ()) for q in t.starts]
    while todo:
        conf = todo.pop()
        if conf in seen:
            continue
        seen.add(conf)
        q, i, out = conf
        if i == len(x) and q in t.accepting:
            found.add(out)
        for (p, a), moves in t.transitions.items():
            if p != q:
                continue
            if a is EPSILON:
                j = i
            elif i < len(x) and a == x[i]:
                j = i + 1
            else:
                continue
            for r, y in moves:
                if len(out) + len(y) <= bound:
                    todo.append((r, j, out + y))
    return found


def output_lengths(t: FST, x, cap) -> set:
    """Lengths (capped at `cap`) of the outputs of accepting paths reading x."""
    x = tuple(x)
    seen, found = set(), set()
    todo = [(q, 0, 0) for q in t.starts]
    while todo:
        conf = todo.pop()
        if conf in seen:
            continue
        seen.add(conf)
        q, i, k = conf
        if i == len(x) and q in t.accepting:
            found.add(k)
        for (p, a), moves in t.transitions.items():
            if p == q and (a is EPSILON or (i < len(x) and a == x[i])):
                for r, y in moves:
                    todo.append((r, i if a is EPSILON else i + 1, min(cap, k + len(y))))
    return found


def in_domain(t: FST, x) -> bool:
    return bool(output_lengths(t, x, 0))


# --- translation --------------------------------------------------------------------------------
@SETTINGS
@given(fsts())
def test_translate_matches_oracle(t):
    for x in strings("ab", 4):
        assert t.translate(x, max_length=L) == oracle(t, x, L)
        # without a productive ε-cycle on an accepting path, every output is at most this long
        bound = t.num_states * (len(x) + 1) * 2
        lengths = output_lengths(t, x, bound + 1)
        if bound + 1 in lengths:
            with pytest.raises(EpsilonLoopError, match="pass max_length"):
                t.translate(x)
        else:
            full = t.translate(x)
            assert {len(y) for y in full} == lengths
            assert {y for y in full if len(y) <= L} == oracle(t, x, L)
        assert t.accepts(x) == in_domain(t, x)


@SETTINGS
@given(fsts())
def test_domain(t):
    nfa = t.domain()
    assert isinstance(nfa, NFA)
    for x in strings("ab", 5):
        assert nfa.accepts(x) == in_domain(t, x)


# --- operations ---------------------------------------------------------------------------------
@SETTINGS
@given(fsts(), fsts())
def test_union(t1, t2):
    u = t1.union(t2)
    for x in strings("ab", 4):
        assert u.translate(x, max_length=L) == oracle(t1, x, L) | oracle(t2, x, L)


@SETTINGS
@given(fsts(), fsts())
def test_concatenate(t1, t2):
    c = t1.concatenate(t2)
    for x in strings("ab", 4):
        want = {y1 + y2 for k in range(len(x) + 1)
                for y1 in oracle(t1, x[:k], L) for y2 in oracle(t2, x[k:], L)
                if len(y1) + len(y2) <= L}
        assert c.translate(x, max_length=L) == want


def star_oracle(t, x, bound) -> set:
    """Outputs ≤ bound of R* on x: S[j] (outputs for the prefix x[:j]) to a fixpoint."""
    n = len(x)
    s = [set() for _ in range(n + 1)]
    s[0].add(())
    pieces = {(i, j): oracle(t, x[i:j], bound) for i in range(n + 1) for j in range(i, n + 1)}
    changed = True
    while changed:
        changed = False
        for i in range(n + 1):
            for j in range(i, n + 1):
                for y in list(s[i]):
                    for z in pieces[(i, j)]:
                        if len(y) + len(z) <= bound and y + z not in s[j]:
                            s[j].add(y + z)
                            changed = True
    return s[n]


@SETTINGS
@given(fsts())
def test_star(t):
    s = t.star()
    for x in strings("ab", 4):
        assert s.translate(x, max_length=L) == star_oracle(t, x, L)


@SETTINGS
@given(fsts(inp="ab", out="xy"), fsts(inp="xy", out="ab"))
def test_compose(t1, t2):
    c = t1.compose(t2)
    assert c.alphabet == t1.alphabet and c.output_alphabet == t2.output_alphabet
    for x in strings("ab", 4):
        try:
            middle = t1.translate(x)
        except EpsilonLoopError:
            continue  # T1(x) infinite: not brute-forceable this way
        want = set().union(*(oracle(t2, y, L) for y in middle))
        assert c.translate(x, max_length=L) == want


@SETTINGS
@given(fsts(inp="ab", out="xy", eps_output=False), fsts(inp="xy", out="ab"))
def test_compose_domain_finite(t1, t2):
    """With no output on T1's ε-moves, T1(x) is always finite: the check covers every x."""
    c = t1.compose(t2)
    for x in strings("ab", 4):
        want = set().union(*(oracle(t2, y, L) for y in t1.translate(x)))
        assert c.translate(x, max_length=L) == want


@SETTINGS
@given(fsts())
def test_invert(t):
    inv = t.invert()
    assert inv.alphabet == t.output_alphabet and inv.output_alphabet == t.alphabet
    rel = {(x, y) for x in strings("ab", 4) for y in oracle(t, x, L)}
    inv_rel = {(x, y) for y in strings("xy", L) for x in inv.translate(y, max_length=4)}
    assert rel == inv_rel
    assert inv.invert().translate("ab", max_length=L) == t.translate("ab", max_length=L)


@st.composite
def dfas(draw):
    n = draw(st.integers(1, 4))
    trans = {}
    for q in range(n):
        for a in "ab":
            r = draw(st.integers(-1, n - 1))
            if r >= 0:
                trans[(q, a)] = r
    return DFA(range(n), "ab", trans, 0, draw(st.sets(st.integers(0, n - 1))))


@SETTINGS
@given(dfas())
def test_from_dfa_is_identity(dfa):
    t = FST.from_dfa(dfa)
    nt = FST.from_dfa(NFA.from_dfa(dfa))
    for x in strings("ab", 5):
        want = {x} if dfa.accepts(x) else set()
        assert t.translate(x) == want
        assert nt.translate(x) == want


# --- examples and errors ------------------------------------------------------------------------
def test_epsilon_output_loop_needs_max_length():
    t = FST([0, 1], "a", "x", {(0, "a"): (1, "x"), (1, EPSILON): (1, "x")}, 0, [1])
    with pytest.raises(EpsilonLoopError, match=r"1 --ε:x--> 1"):
        t.translate("a")
    assert t.translate("a", max_length=3) == {("x",), ("x", "x"), ("x", "x", "x")}
    assert t.translate("") == frozenset()  # the loop is not on an accepting path for ""
    # a productive loop that no accepting path passes through is harmless
    dead = FST([0, 1], "a", "x", {(0, "a"): [(0, "x"), (1, ())], (1, EPSILON): (1, "x")}, 0, [0])
    assert dead.translate("aa") == {("x", "x")}


def test_star_of_epsilon_output_is_infinite():
    t = FST([0, 1], "a", "x", {(0, EPSILON): (1, "x")}, 0, [1])
    with pytest.raises(EpsilonLoopError):
        t.star().translate("")
    assert t.star().translate("", max_length=2) == {(), ("x",), ("x", "x")}


def test_multi_symbol_outputs_and_immutability():
    t = FST(["p"], "ab", "xy", {("p", "a"): ("p", ["x", "y"]), ("p", "b"): {("p", EPSILON)}},
            "p", ["p"], name="swap")
    assert t.translate("aba") == {("x", "y", "x", "y")}
    with pytest.raises(EpsilonLoopError):  # b ↦ ε: the inverse inserts any number of b's
        t.invert().translate("xyxy")
    assert t.invert().translate("xyxy", max_length=4) == {
        w for w in strings("ab", 4) if w.count("a") == 2}
    assert t == FST(["p"], "ab", "xy", {("p", "a"): [("p", ("x", "y"))], ("p", "b"): ("p", None)},
                    "p", ["p"])
    with pytest.raises(FrozenMachineError):
        t.accepting = frozenset()


@pytest.mark.parametrize("kwargs, match", [
    ({"transitions": {(0, "c"): (0, "x")}}, "neither in the input alphabet"),
    ({"transitions": {(5, "a"): (0, "x")}}, "undeclared state 5"),
    ({"transitions": {(0, "a"): (7, "x")}}, "undeclared state 7"),
    ({"transitions": {(0, "a"): (0, "z")}}, "not in the output alphabet"),
    ({"transitions": {(0, "a"): (0, ["x", EPSILON])}}, "not in the output alphabet"),
    ({"transitions": {(0, "a"): 0}}, "set or list of moves"),
    ({"transitions": {(0, "a"): [0]}}, "must be a pair"),
    ({"transitions": {0: (0, "x")}}, "must be a pair"),
    ({"start": 3}, "start state"),
    ({"start": []}, "at least one start state"),
    ({"accepting": [9]}, "accepting state 9"),
])
def test_malformed(kwargs, match):
    args = {"states": [0], "input_alphabet": "ab", "output_alphabet": "xy", "transitions": {},
            "start": 0, "accepting": [0]}
    args.update(kwargs)
    with pytest.raises(AutomatonError, match=match):
        FST(**args)


def test_merged_alphabets():
    ta = FST([0, 1], "a", "x", {(0, "a"): (1, "x")}, 0, [1])
    tb = FST([0, 1], "b", "y", {(0, "b"): (1, "y")}, 0, [1])
    u, c = ta.union(tb), ta.concatenate(tb)
    assert list(u.alphabet) == ["a", "b"] and list(u.output_alphabet) == ["x", "y"]
    assert u.translate("a") == {("x",)} and u.translate("b") == {("y",)}
    assert c.translate("ab") == {("x", "y")} and c.translate("ba") == frozenset()
    assert ta.star().translate("aaa") == {("x", "x", "x")}
    # composition through a symbol the second machine cannot read blocks
    assert ta.compose(FST([0], "y", "a", {(0, "y"): (0, "a")}, 0, [0])).translate("a") == set()


def test_bad_arguments():
    t = FST([0], "a", "x", {(0, "a"): (0, "x")}, 0, [0])
    with pytest.raises(InputError, match="not in the alphabet"):
        t.translate("b")
    for bad in (-1, 1.5, True):
        with pytest.raises(InputError, match="max_length"):
            t.translate("a", max_length=bad)
    for op in (t.union, t.concatenate, t.compose):
        with pytest.raises(InputError, match="takes an FST"):
            op(NFA([0], "a", {}, 0))
    with pytest.raises(InputError, match="DFA or an NFA"):
        FST.from_dfa(t)


def test_not_compilable():
    from pdanet.constructions.table import compile as compile_machine
    from pdanet.errors import CompileError

    t = FST([0], "a", "x", {(0, "a"): (0, "x")}, 0, [0])
    with pytest.raises(CompileError, match="nondeterministic transducer"):
        compile_machine(t, target="lstm")

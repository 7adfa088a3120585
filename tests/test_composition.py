"""compose(DPDT, FST) and compose(FST, DPDT) against running the two machines one after the other,
on every input string up to length 6 of random small machines."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.composition import PushdownRelation, compose, sequential_form
from pdanet.automata.dfa import DFA
from pdanet.automata.fst import FST
from pdanet.automata.pdt import DPDT
from pdanet.automata.tasks.hao2018 import reversal_machine
from pdanet.errors import DeterminismError, EpsilonLoopError, InputError

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
STACK = ("X", "Y")


def strings(alphabet: str, max_length: int):
    for n in range(max_length + 1):
        yield from itertools.product(alphabet, repeat=n)


def _out(rng, outputs: str) -> tuple:
    return tuple(rng.choice(list(outputs), size=rng.choice(3, p=[0.3, 0.5, 0.2])))


def random_dpdt(seed: int, inputs: str, outputs: str, n_states: int = 3) -> DPDT:
    """A random DPDT: per (state, top) read moves (each symbol with probability 0.85), an ε-move
    to a later state (so no ε-cycle; probability 0.2) or nothing (0.05); each move emits 0–2
    symbols and pops, keeps, pushes or replaces; each state accepting with probability 0.6."""
    rng = np.random.default_rng(seed)
    trans: dict = {}
    for q in range(n_states):
        for s in (*STACK, BOTTOM):
            if s is BOTTOM:
                gammas = [(BOTTOM,)] + [(y, BOTTOM) for y in STACK]
            else:
                gammas = [(), (s,)] + [(y, s) for y in STACK] + [(y,) for y in STACK]
            kind = rng.choice(3, p=[0.75, 0.2, 0.05])
            if kind == 1 and q + 1 < n_states:
                trans[(q, EPSILON, s)] = (int(rng.integers(q + 1, n_states)), _out(rng, outputs),
                                          gammas[rng.integers(len(gammas))])
            elif kind == 0:
                for a in inputs:
                    if rng.random() < 0.85:
                        trans[(q, a, s)] = (int(rng.integers(n_states)), _out(rng, outputs),
                                            gammas[rng.integers(len(gammas))])
    accepting = [q for q in range(n_states) if rng.random() < 0.6]
    return DPDT(range(n_states), inputs, outputs, STACK, trans, 0, accepting)


def random_fst(seed: int, inputs: str, outputs: str, deterministic: bool,
               n_states: int = 3) -> FST:
    """A random FST; deterministic: one start state, no ε-input move, ≤ 1 move per symbol (each
    present with probability 0.9); else 0–2 moves per symbol and 0–1 ε-input moves."""
    rng = np.random.default_rng(seed)
    trans: dict = {}
    for p in range(n_states):
        for a in (*inputs, EPSILON):
            if deterministic:
                k = int(a is not EPSILON and rng.random() < 0.9)
            else:
                k = int(rng.choice(2, p=[0.7, 0.3])) if a is EPSILON else int(rng.integers(3))
            trans[(p, a)] = [(int(rng.integers(n_states)), _out(rng, outputs)) for _ in range(k)]
    starts = [0] if deterministic else [0] + [q for q in range(1, n_states) if rng.random() < 0.3]
    accepting = [q for q in range(n_states) if rng.random() < 0.7]
    return FST(range(n_states), inputs, outputs, trans, starts, accepting)


SEEDS = st.integers(0, 2**32 - 1)


def dpdts(inputs: str, outputs: str):
    return SEEDS.map(lambda seed: random_dpdt(seed, inputs, outputs))


def fsts(inputs: str, outputs: str, deterministic: bool):
    return SEEDS.map(lambda seed: random_fst(seed, inputs, outputs, deterministic))


def dpdt_outputs(m: DPDT, x) -> set:
    try:
        return {m.transduce(x)}
    except InputError:
        return set()


# --- DPDT, then FST -------------------------------------------------------------------------------
@SETTINGS
@given(dpdts("ab", "cd"), fsts("cd", "ef", deterministic=True))
def test_dpdt_then_sequential_fst_is_a_dpdt_with_the_same_relation(d, f):
    c = compose(d, f)
    assert isinstance(c, DPDT)
    assert c.alphabet == d.alphabet and c.output_alphabet == f.output_alphabet
    for x in strings("ab", 6):
        want = {z for y in dpdt_outputs(d, x) for z in f.translate(y)}
        assert dpdt_outputs(c, x) == want, x


@SETTINGS
@given(dpdts("ab", "cd"), fsts("cd", "ef", deterministic=False))
def test_dpdt_then_any_fst_agrees_with_running_both(d, f):
    c = compose(d, f)
    form = sequential_form(f)
    assert isinstance(c, DPDT) == (not isinstance(form, str))
    for x in strings("ab", 5):
        want = {z for y in dpdt_outputs(d, x) for z in f.translate(y, max_length=5)}
        if isinstance(c, DPDT):
            got = {z for z in dpdt_outputs(c, x) if len(z) <= 5}
        else:
            got = c.translate(x, max_length=5)
            assert c.accepts(x) == bool(
                {y for y in dpdt_outputs(d, x) if f.accepts(y)})
        assert got == want, x


def test_dpdt_then_fst_example_reversal_then_homomorphism():
    """Reversal w #^|w| -> #^|w| w^R followed by a ↦ xx, b ↦ y, # ↦ ε."""
    d = reversal_machine("ab")
    h = FST([0], "ab#", "xy", {(0, "a"): [(0, ("x", "x"))], (0, "b"): [(0, "y")],
                               (0, "#"): [(0, ())]}, 0, [0])
    c = compose(d, h)
    assert c.transduce("ab##") == ("y", "x", "x")
    assert c.transduce("") == ()
    with pytest.raises(InputError):
        c.transduce("ab#")
    assert not c.is_realtime or c.output_kind == "string"


def test_ε_move_output_the_fst_cannot_read_blocks_the_run():
    """The DPDT's final ε-move emits b, which the FST cannot read: no translation, though the
    DPDT has no accepting states (every run that does not block is in its domain)."""
    d = DPDT(["r", "e"], "a", "ab", [], {("r", "a", BOTTOM): ("e", "a", (BOTTOM,)),
                                        ("e", EPSILON, BOTTOM): ("r", "b", (BOTTOM,))}, "r")
    f = FST([0], "ab", "a", {(0, "a"): [(0, "a")]}, 0, [0])
    c = compose(d, f)
    assert d.transduce("a") == ("a", "b")
    assert c.transduce("") == ()
    with pytest.raises(InputError):
        c.transduce("a")


def test_empty_fst_relation_gives_an_empty_domain():
    d = reversal_machine("ab")
    f = FST([0], "ab#", "ab#", {(0, "a"): [(0, "a")]}, 0, [])
    c = compose(d, f)
    assert isinstance(c, DPDT)
    for x in strings("ab#", 4):
        assert dpdt_outputs(c, x) == set()


def test_nondeterministic_fst_gives_a_pushdown_relation():
    d = reversal_machine("ab")
    # every symbol copied, and optionally a z after each one
    f = FST([0], "ab#", "ab#z", {(0, "a"): [(0, "a"), (0, ("a", "z"))], (0, "b"): [(0, "b")],
                                 (0, "#"): [(0, "#")]}, 0, [0])
    c = compose(d, f)
    assert isinstance(c, PushdownRelation) and c.output_kind == "relation"
    assert c.translate("ab##") == {tuple("##ba"), tuple("##baz")}
    assert c.translate("ab#") == frozenset() and not c.accepts("ab#") and c.accepts("ab##")
    assert c == compose(d, f) and hash(c) == hash(compose(d, f))
    loop = FST([0], "ab#", "ab#", {(0, "#"): [(0, "#")], (0, EPSILON): [(0, "a")]}, 0, [0])
    r = compose(reversal_machine("ab"), loop)
    assert isinstance(r, PushdownRelation)
    with pytest.raises(EpsilonLoopError, match="max_length"):
        r.translate("")
    assert r.translate("", max_length=2) == {(), ("a",), ("a", "a")}
    with pytest.raises(InputError):
        r.translate("abc")
    with pytest.raises(InputError, match="max_length"):
        r.translate("a#", max_length=-1)
    # the DPDT emits b, which this FST does not read: no translation, as for a DPDT result
    only_a = FST([0], "a#", "a", {(0, "a"): [(0, "a"), (0, ())], (0, "#"): [(0, ())]}, 0, [0])
    r = compose(reversal_machine("ab"), only_a)
    assert isinstance(r, PushdownRelation)
    assert r.translate("a#") == {(), ("a",)} and r.translate("b#") == frozenset()
    assert not r.accepts("b#") and r.accepts("a#")


def test_useless_nondeterminism_is_trimmed():
    d = reversal_machine("ab")
    f = FST([0, 1], "ab#", "ab#", {(0, "a"): [(0, "a"), (1, "b")], (0, "b"): [(0, "b")],
                                   (0, "#"): [(0, "#")]}, [0, 1], [0])
    assert not isinstance(sequential_form(f), str)
    c = compose(d, f)
    assert isinstance(c, DPDT) and c.transduce("ab##") == tuple("##ba")


# --- FST, then DPDT -------------------------------------------------------------------------------
@SETTINGS
@given(fsts("ab", "cd", deterministic=True), dpdts("cd", "ef"))
def test_sequential_fst_then_dpdt_is_a_dpdt_with_the_same_relation(f, d):
    c = compose(f, d)
    assert isinstance(c, DPDT)
    assert c.alphabet == f.alphabet and c.output_alphabet == d.output_alphabet
    for x in strings("ab", 6):
        want = {z for y in f.translate(x) for z in dpdt_outputs(d, y)}
        assert dpdt_outputs(c, x) == want, x


def test_fst_then_dpdt_example_and_realtime():
    d = reversal_machine("ab")
    double = FST([0], "ab#", "ab#", {(0, "a"): [(0, ("a", "a"))], (0, "b"): [(0, "b")],
                                     (0, "#"): [(0, ("#", "#"))]}, 0, [0])
    c = compose(double, d)
    assert c.transduce("a#") == tuple("##aa")
    assert not c.is_realtime
    ident = FST.from_dfa(DFA([0], "ab#", {(0, a): 0 for a in "ab#"}, 0, accepting=[0]))
    c = compose(ident, d)
    assert c.is_realtime and c.transduce("ab##") == tuple("##ba")


def test_nondeterministic_fst_first_raises_determinism_error():
    d = reversal_machine("ab")
    f = FST([0], "ab", "ab", {(0, "a"): [(0, "a"), (0, "b")]}, 0, [0])
    with pytest.raises(DeterminismError, match="sequential"):
        compose(f, d)
    g = FST([0, 1], "ab", "ab", {(0, EPSILON): [(1, ())], (1, "a"): [(0, "a")]}, 0, [0, 1])
    with pytest.raises(DeterminismError, match="ε"):
        compose(g, d)


def test_bad_pairs_raise_input_errors():
    d = reversal_machine("ab")
    f = FST([0], "a", "a", {}, 0, [0])
    with pytest.raises(InputError, match="FST.*compose|first.compose"):
        compose(f, f)
    with pytest.raises(InputError, match="two stacks"):
        compose(d, d)
    with pytest.raises(InputError, match="DPDT"):
        compose("x", f)
    with pytest.raises(InputError, match="PushdownRelation"):
        PushdownRelation(f, d)


def test_letter_to_letter_composition_stays_real_time_and_compiles():
    """Reverse String followed by the bit flip 0 ↔ 1 (# kept): a real-time DPDT emitting one
    symbol per step, which compiles to a stack RNN that verifies."""
    d = reversal_machine("01")
    flip = FST([0], "01#", "01#", {(0, "0"): [(0, "1")], (0, "1"): [(0, "0")],
                                   (0, "#"): [(0, "#")]}, 0, [0])
    for c in (compose(d, flip), compose(flip, d)):
        assert c.is_realtime and c.output_kind == "symbol"
    assert compose(d, flip).transduce("011###") == tuple("###001")
    assert compose(flip, d).transduce("011###") == tuple("###001")
    pytest.importorskip("torch")
    import pdanet as pn

    c = compose(d, flip)
    report = pn.verify(c, pn.compile(c, target="stack_rnn"), max_length=8, samples=20,
                       long_samples=0)
    assert report.ok, report

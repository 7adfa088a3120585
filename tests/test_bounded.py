"""BoundedPDA: a DPDA/DPDT restricted to stack depth ≤ m, and its lazily built DFA."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.bounded import BoundedPDA, DyckKM
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA, PDA, PDAConfig
from pdanet.automata.pdt import DPDT
from pdanet.errors import CompileError, InputError, SearchBoundError

Z, E = BOTTOM, EPSILON


def anbn() -> DPDA:
    return DPDA(["p", "q"], "ab", "A", {
        ("p", "a", Z): ("p", ("A", Z)), ("p", "a", "A"): ("p", ("A", "A")),
        ("p", "b", "A"): ("q", ()), ("q", "b", "A"): ("q", ()),
    }, "p", acceptance="empty_stack")


def random_dpda(data) -> DPDA:
    """A random small real-time DPDA: ≤4 states, ≤3 stack symbols, ≤3 input symbols."""
    n = data.draw(st.integers(1, 4))
    inputs = "abc"[: data.draw(st.integers(1, 3))]
    stack = "XYW"[: data.draw(st.integers(1, 3))]
    trans = {}
    for q in range(n):
        for x in list(stack) + [Z]:
            for a in inputs:
                if data.draw(st.integers(0, 4)) > 0:
                    body = tuple(data.draw(st.lists(st.sampled_from(stack), max_size=3)))
                    if x is Z:
                        body = body[:2] + (Z,)
                    trans[(q, a, x)] = (data.draw(st.integers(0, n - 1)), body)
    acceptance = data.draw(st.sampled_from(["final_state", "empty_stack"]))
    accepting = data.draw(st.sets(st.integers(0, n - 1))) if acceptance == "final_state" else ()
    return DPDA(range(n), inputs, stack, trans, 0, accepting, acceptance)


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(1, 3))
def test_bounded_dfa_agrees_within_the_bound(data, m):
    d = random_dpda(data)
    b = d.bounded(m)
    dfa = b.to_dfa()
    for w in itertools.product(d.alphabet.symbols, repeat=5):
        profile = d.depth_profile(w)
        for t in range(len(w) + 1):
            prefix = w[:t]
            live = [p for p in profile[: t + 1] if p is not None]
            if all(p <= m for p in live):
                assert dfa.accepts(prefix) == d.accepts(prefix)
                assert b.run(prefix) == d.run(prefix)
            else:  # went deeper than m: dead for good
                assert b.run(prefix).state is None and not dfa.accepts(prefix)
                assert dfa.run(prefix).state is None


@settings(max_examples=40, deadline=None)
@given(st.data(), st.integers(1, 3))
def test_bounded_run_batch_agrees_with_trace(data, m):
    d = random_dpda(data)
    b = BoundedPDA(d, m)
    strings = data.draw(st.lists(st.text(alphabet="".join(d.alphabet.symbols), max_size=8),
                                 min_size=1, max_size=6))
    tr = b.run_batch(*b.encode(strings))
    assert tr["stack"].shape[2] == m + 1
    for i, w in enumerate(strings):
        for t, s in enumerate(b.trace(w)):
            c = s.config
            assert tr["state"][i, t] == (-1 if c.state is None else d.state_index(c.state))
            assert tr["depth"][i, t] == c.depth
            assert tr["output"][i, t] == s.output
            codes = [d.stack_code(x) for x in c.stack]
            assert tr["stack"][i, t, : len(codes)].tolist() == codes
            assert (tr["stack"][i, t, len(codes):] == -1).all()


def test_dfa_is_built_lazily_and_once():
    b = anbn().bounded(3)
    assert b._dfa is None
    dfa = b.to_dfa()
    assert isinstance(dfa, DFA) and b.to_dfa() is dfa
    assert dfa.states[0] == PDAConfig("p", (Z,))
    assert b.num_configs == 7  # p with depth 0..3, q with depth 0..2
    assert dfa.accepts("aaabbb") and not dfa.accepts("aaaabbbb") and not dfa.accepts("aab")


def test_bounded_transducer_gives_mealy_dfa():
    trans = {}
    for s in "01":
        for top in ["0", "1", Z]:
            trans[("q0", s, top)] = ("q0", "#", (s, top))
        trans[("q0", "#", s)] = ("q1", s, ())
        trans[("q1", "#", s)] = ("q1", s, ())
    rev = DPDT(["q0", "q1"], "01#", "01#", "01", trans, "q0")
    mealy = rev.bounded(3).to_dfa()
    assert mealy.is_mealy and mealy.output_alphabet == rev.output_alphabet
    for n in range(1, 4):
        for w in map("".join, itertools.product("01", repeat=n)):
            x = w + "#" * n
            assert mealy.outputs(x) == rev.outputs(x)
    assert mealy.run("0000").state is None


def test_bounded_transducer_with_string_outputs_uses_tuples():
    m = DPDT(["p"], "a", "xy", "A", {("p", "a", Z): ("p", ("x", "y"), ("A", Z)),
                                     ("p", "a", "A"): ("p", (), ("A", "A"))}, "p")
    mealy = m.bounded(2).to_dfa()
    assert mealy.outputs("aa")[1:] == [("x", "y"), ()]
    assert mealy.run("aaa").state is None


def test_dead_initial_configuration():
    d = DPDA(["s", "p"], "a", "A", {("s", E, Z): ("p", ("A", "A", Z))}, "s")
    b = d.bounded(1)
    assert b.initial().state is None and b.to_dfa().num_states == 1
    assert not b.to_dfa().accepts("")


def test_bad_bounds():
    for m in (0, -1, 1.5, True):
        with pytest.raises(InputError, match="m ≥ 1"):
            anbn().bounded(m)
    pda = PDA(["p"], "a", "A", {("p", "a", Z): {("p", (Z,)), ("p", ("A", Z))}}, "p")
    with pytest.raises(CompileError, match="nondeterministic stack"):
        BoundedPDA(pda, 2)
    with pytest.raises(CompileError, match="nondeterministic stack"):
        pda.bounded(2)
    with pytest.raises(InputError, match="DPDA or DPDT"):
        BoundedPDA(DyckKM(2, 2), 2)
    with pytest.raises(SearchBoundError, match="max_states=3"):
        anbn().bounded(5).to_dfa(max_states=3)


def test_identity():
    assert anbn().bounded(2) == anbn().bounded(2) and hash(anbn().bounded(2)) == hash(
        anbn().bounded(2))
    assert anbn().bounded(2) != anbn().bounded(3)
    assert np.array_equal(anbn().bounded(2).run_batch(*anbn().encode(["aaa"]))["output"],
                          [[True, False, False, False]])

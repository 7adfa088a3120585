"""DPDT (Hao et al. 2018): transduction, output formats, batched simulation, normal form."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pdt import DPDT, PDTConfig
from pdanet.errors import AutomatonError, DeterminismError, EpsilonLoopError, InputError

Z, E = BOTTOM, EPSILON


def reversal() -> DPDT:
    """Hao et al. (2018) Fig. 3: f(w #^|w|) = #^|w| w^R. Push each symbol of w emitting #, then pop
    one symbol per # and emit it."""
    trans = {}
    for s in "01":
        for top in ["0", "1", Z]:
            trans[("q0", s, top)] = ("q0", "#", (s, top))
        trans[("q0", "#", s)] = ("q1", s, ())
        trans[("q1", "#", s)] = ("q1", s, ())
    return DPDT(["q0", "q1"], "01#", "01#", "01", trans, "q0", name="reversal")


def test_reversal_transducer_matches_reference():
    m = reversal()
    assert m.output_kind == "symbol" and m.is_realtime and m.is_normal
    for n in range(7):
        for w in map("".join, itertools.product("01", repeat=n)):
            if n == 0:
                continue
            assert m.transduce(w + "#" * n) == tuple("#" * n + w[::-1]), w
            assert m.depth_profile(w + "#" * n) == list(range(n + 1)) + list(range(n - 1, -1, -1))


def test_reversal_batch_output():
    m = reversal()
    strings = ["01##", "110###", "1#"]
    tr = m.run_batch(*m.encode(strings))
    assert tr["output"].shape == (3, 7)
    for b, w in enumerate(strings):
        decoded = m.output_alphabet.decode(tr["output"][b, 1: len(w) + 1])
        assert decoded == m.transduce(w)
        assert tr["output"][b, 0] == -1


def test_blocking_and_accepting_are_reported():
    m = reversal()
    with pytest.raises(InputError, match="blocks at position 0"):
        m.transduce("##")
    assert not m.accepts("##") and m.accepts("0")
    strict = DPDT(m.states, m.alphabet, m.output_alphabet, m.stack_alphabet, m.transitions, "q0",
                  accepting={"q1"})
    with pytest.raises(InputError, match="not accepting"):
        strict.transduce("01")
    assert strict.transduce("01##") == tuple("##10")
    assert strict.to_dpda().accepts("0#") and not strict.to_dpda().accepts("0")
    assert m.to_dpda().accepts("0") and not m.to_dpda().accepts("#")


def test_multi_symbol_and_epsilon_outputs():
    # each a pushes A and emits "xy"; on b an ε-chain pops every A, emitting one z per A
    m = DPDT(["p", "c", "d"], "ab", "xyz", "A", {
        ("p", "a", Z): ("p", ("x", "y"), ("A", Z)), ("p", "a", "A"): ("p", ("x", "y"), ("A", "A")),
        ("p", "b", "A"): ("c", E, ("A",)), ("c", E, "A"): ("c", "z", ()),
        ("c", E, Z): ("d", (), (Z,)),
    }, "p")
    assert m.output_kind == "string"
    assert m.transduce("aab") == tuple("xyxyzz")
    assert m.run("aab") == PDTConfig("d", (Z,), ("z", "z"))
    assert m.output(m.run("aaab")) == ("z", "z", "z")
    tr = m.run_batch(*m.encode(["aaab", "ab", "b"]))
    assert tr["output"].shape == (3, 5, 3)  # W = 3: the most one step emitted
    assert tr["output"][0, 4].tolist() == [2, 2, 2]
    assert tr["output"][0, 1].tolist() == [0, 1, -1]
    assert tr["state"][2, 1] == -1 and tr["output"][2, 1].tolist() == [-1, -1, -1]


def test_initial_closure_emits():
    m = DPDT(["s", "p"], "a", "ox", "A", {("s", E, Z): ("p", "o", (Z,)),
                                          ("p", "a", Z): ("p", "x", (Z,))}, "s")
    assert m.initial().emitted == ("o",) and m.transduce("aa") == ("o", "x", "x")
    assert m.output_kind == "string"  # an ε-move emits, so a step's emission is a string
    assert m.run_batch(*m.encode(["a"]))["output"][0].tolist() == [[0], [1]]


def random_dpdt(data, eps: bool) -> DPDT:
    n = data.draw(st.integers(1, 4))
    inputs = "abc"[: data.draw(st.integers(1, 3))]
    stack = "XYW"[: data.draw(st.integers(1, 3))]
    outs = "uv"
    trans = {}
    for q in range(n):
        for x in list(stack) + [Z]:
            keys = [(q, E, x)] if eps and data.draw(st.integers(0, 4)) == 0 else \
                [(q, a, x) for a in inputs if data.draw(st.integers(0, 4)) > 0]
            for key in keys:
                body = tuple(data.draw(st.lists(st.sampled_from(stack), max_size=3)))
                if x is Z:
                    body = body[:2] + (Z,)
                y = tuple(data.draw(st.lists(st.sampled_from(outs), max_size=2 if eps else 1)))
                trans[key] = (data.draw(st.integers(0, n - 1)), y, body)
    return DPDT(range(n), inputs, outs, stack, trans, 0)


def _check_batch(m: DPDT, strings):
    tr = m.run_batch(*m.encode(strings))
    for b, w in enumerate(strings):
        steps = m.trace(w)
        for t, s in enumerate(steps):
            c = s.config
            assert tr["state"][b, t] == (-1 if c.state is None else m.state_index(c.state))
            assert tr["depth"][b, t] == c.depth
            out = tr["output"][b, t]
            if m.output_kind == "symbol":
                assert out == (-1 if s.output is None else m.output_alphabet.index(s.output))
            else:
                assert m.output_alphabet.decode(out) == s.output
                assert (out[len(s.output):] == -1).all()


@settings(max_examples=60, deadline=None)
@given(st.data(), st.booleans())
def test_run_batch_agrees_with_trace(data, eps):
    try:
        m = random_dpdt(data, eps)
    except EpsilonLoopError:
        assume(False)
    strings = data.draw(st.lists(st.text(alphabet="".join(m.alphabet.symbols), max_size=7),
                                 min_size=1, max_size=5))
    _check_batch(m, strings)
    _check_batch(m.normal_form(), strings)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_normal_form_preserves_transduction(data):
    m = random_dpdt(data, eps=False)
    nf = m.normal_form()
    assert nf.is_normal and nf.output_kind == m.output_kind
    for n in range(5):
        for w in itertools.product(m.alphabet.symbols, repeat=n):
            assert nf.outputs(w) == m.outputs(w)


def test_bad_transducers():
    base = dict(states=["p"], input_alphabet="a", output_alphabet="x", stack_alphabet="A",
                start="p")
    with pytest.raises(AutomatonError, match="emits 'y'"):
        DPDT(transitions={("p", "a", Z): ("p", "y", (Z,))}, **base)
    with pytest.raises(AutomatonError, match="triple"):
        DPDT(transitions={("p", "a", Z): ("p", (Z,))}, **base)
    with pytest.raises(DeterminismError):
        DPDT(transitions={("p", "a", Z): ("p", "x", (Z,)), ("p", E, Z): ("p", "x", (Z,))}, **base)
    with pytest.raises(EpsilonLoopError):
        DPDT(transitions={("p", E, Z): ("p", "x", (Z,))}, **base)
    with pytest.raises(InputError, match="'b'"):
        reversal().transduce("0b")
    with pytest.raises(InputError):
        reversal().run_batch(np.array([[3]]))


def test_identity():
    assert reversal() == reversal() and hash(reversal()) == hash(reversal())
    assert reversal() != reversal().to_dpda()

"""DPDA: validation, ε-closure semantics, ε-loop detection, normal form, batched simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pda import DPDA, STACK_OPS, PDAConfig, find_epsilon_loops, stack_op
from pdanet.errors import AutomatonError, DeterminismError, EpsilonLoopError, InputError

Z, E = BOTTOM, EPSILON


def anbn() -> DPDA:
    """a^n b^n (n ≥ 0), accepted by empty stack."""
    return DPDA(["p", "q"], "ab", "A", {
        ("p", "a", Z): ("p", ("A", Z)), ("p", "a", "A"): ("p", ("A", "A")),
        ("p", "b", "A"): ("q", ()), ("q", "b", "A"): ("q", ()),
    }, "p", acceptance="empty_stack", name="anbn")


def anbn_final() -> DPDA:
    """a^n b^n (n ≥ 1) by final state, with an ε-move to the final state on BOTTOM."""
    return DPDA(["p", "q", "f"], "ab", "A", {
        ("p", "a", Z): ("p", ("A", Z)), ("p", "a", "A"): ("p", ("A", "A")),
        ("p", "b", "A"): ("q", ()), ("q", "b", "A"): ("q", ()), ("q", E, Z): ("f", (Z,)),
    }, "p", accepting={"f"})


def random_dpda(data, eps: bool = False, max_push: int = 3) -> DPDA:
    """A random small DPDA: ≤4 states, ≤3 stack symbols, ≤3 input symbols; real-time unless
    `eps` (then some (state, top) pairs get a single ε-move instead of input moves)."""
    n = data.draw(st.integers(1, 4), label="states")
    k = data.draw(st.integers(1, 3), label="inputs")
    g = data.draw(st.integers(1, 3), label="stack symbols")
    states, inputs, stack = list(range(n)), "abc"[:k], "XYW"[:g]
    trans = {}
    for q in states:
        for x in list(stack) + [Z]:
            if eps and data.draw(st.integers(0, 4)) == 0:
                keys = [(q, E, x)]
            else:
                keys = [(q, a, x) for a in inputs if data.draw(st.integers(0, 4)) > 0]
            for key in keys:
                q2 = data.draw(st.sampled_from(states))
                body = tuple(data.draw(st.lists(st.sampled_from(stack), max_size=max_push)))
                if x is Z:
                    body = body[: max_push - 1] + (Z,)
                trans[key] = (q2, body)
    acceptance = data.draw(st.sampled_from(["final_state", "empty_stack"]))
    accepting = data.draw(st.sets(st.sampled_from(states))) if acceptance == "final_state" else ()
    return DPDA(states, inputs, stack, trans, 0, accepting, acceptance)


def all_strings(alphabet, length):
    return ["".join(p) for p in itertools.product(alphabet, repeat=length)]


def build_or_skip(data, **kw):
    from hypothesis import assume

    try:
        return random_dpda(data, **kw)
    except EpsilonLoopError:
        assume(False)


# --- semantics -----------------------------------------------------------------------------------
def test_anbn_membership_and_profile():
    d = anbn()
    for n in range(5):
        for m in range(5):
            assert d.accepts("a" * n + "b" * m) == (n == m)
    assert not d.accepts("abab")
    assert d.depth_profile("aabbb") == [0, 1, 2, 1, 0, None]
    assert d.run("aab") == PDAConfig("q", (Z, "A"))
    assert d.run("ba") == PDAConfig(None, ())
    assert d.is_realtime and d.is_normal


def test_closure_end_acceptance_with_epsilon_moves():
    d = anbn_final()
    assert not d.is_realtime
    assert [d.accepts(w) for w in ["", "ab", "aabb", "aab", "abb"]] == [False, True, True, False,
                                                                        False]
    # the ε-move is taken right after the last b: the configuration is its closure end
    assert d.run("ab") == PDAConfig("f", (Z,))


def test_initial_epsilon_closure():
    d = DPDA(["s", "p"], "a", "A", {("s", E, Z): ("p", ("A", Z)), ("p", "a", "A"): ("p", ())},
             "s", acceptance="empty_stack")
    assert d.initial() == PDAConfig("p", (Z, "A"))
    assert d.accepts("a") and not d.accepts("")
    tr = d.run_batch(*d.encode(["a", ""]))
    assert tr["depth"][:, 0].tolist() == [1, 1]
    assert tr["output"][0].tolist() == [False, True]


def test_push_orientation_first_symbol_on_top():
    d = DPDA(["p"], "a", "XY", {("p", "a", Z): ("p", ("X", "Y", Z))}, "p")
    assert d.run("a").stack == (Z, "Y", "X")
    tr = d.run_batch(*d.encode(["a"]))
    assert tr["stack"][0, 1].tolist() == [d.bottom_code, 1, 0]
    assert tr["top"][0, 1] == 0


# --- ε-loops -------------------------------------------------------------------------------------
def test_epsilon_self_loop_is_rejected():
    with pytest.raises(EpsilonLoopError, match=r"\('p', ε, 'A'\) → \('p', \('A', 'A'\)\)"):
        DPDA(["p"], "a", "A", {("p", E, Z): ("p", ("A", Z)), ("p", E, "A"): ("p", ("A", "A"))},
             "p")


def test_epsilon_loop_through_push_and_pop_is_rejected():
    # push Y, pop Y, back at (q, X) forever
    with pytest.raises(EpsilonLoopError):
        DPDA(["q", "r"], "a", "XY", {
            ("q", "a", Z): ("q", ("X", Z)), ("q", E, "X"): ("r", ("Y", "X")),
            ("r", E, "Y"): ("q", ()),
        }, "q")


def test_terminating_epsilon_pops_are_accepted():
    d = DPDA(["p", "c"], "ab", "A", {
        ("p", "a", Z): ("p", ("A", Z)), ("p", "a", "A"): ("p", ("A", "A")),
        ("p", "b", "A"): ("c", ("A",)), ("c", E, "A"): ("c", ()),
    }, "p")
    assert d.epsilon_loops() == []
    assert d.run("aaab") == PDAConfig("c", (Z,))
    tr = d.run_batch(*d.encode(["aaab"]))
    assert tr["depth"][0].tolist() == [0, 1, 2, 3, 0]


def test_unreachable_loop_is_allowed():
    d = DPDA(["p", "dead"], "a", "A", {("p", "a", Z): ("p", (Z,)), ("dead", E, Z): ("dead", (Z,))},
             "p", {"p"})
    assert d.accepts("aa")
    # a loop on a stack symbol that is never pushed cannot be entered either
    DPDA(["p"], "a", "AB", {("p", "a", Z): ("p", ("A", Z)), ("p", E, "B"): ("p", ("B",))}, "p")


def _eps_run_length(trans, state, stack, limit):
    """Brute force: follow ε-moves from (state, stack); the number of moves, or None past limit."""
    for steps in range(limit + 1):
        move = trans.get((state, E, stack[-1]))
        if move is None:
            return steps
        state, stack = move[0], stack[:-1] + move[1][::-1]
    return None


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_epsilon_loop_analysis_matches_brute_force(data):
    n = data.draw(st.integers(1, 3))
    stack = "XY"
    trans = {}
    for q in range(n):
        for x in list(stack) + [Z]:
            if data.draw(st.booleans()):
                body = tuple(data.draw(st.lists(st.sampled_from(stack), max_size=2)))
                target = data.draw(st.integers(0, n - 1))
                trans[(q, E, x)] = (target, body + ((Z,) if x is Z else ()))
    eps = {(q, x): [v] for (q, _, x), v in trans.items()}
    loops = find_epsilon_loops(eps)
    looping_nodes = {node for comp in loops for node in comp}
    limit = 300
    for q in range(n):
        for x in list(stack) + [Z]:
            for below in [(), ("X",), ("Y", "X"), ("X", "X", "Y")]:
                st_ = (Z,) if x is Z else (Z,) + below + (x,)
                steps = _eps_run_length(trans, q, st_, limit)
                if (q, x) in looping_nodes:  # a cycle node loops from every stack
                    assert steps is None
            if not loops:  # no cycle: every ε-run ends (short runs, small stacks)
                assert _eps_run_length(trans, q, (Z, "X", x) if x is not Z else (Z,), limit) \
                    is not None


# --- normal form ---------------------------------------------------------------------------------
def test_stack_op_classification():
    assert stack_op("X", ()) == ("pop", None)
    assert stack_op("X", ("X",)) == ("noop", None)
    assert stack_op("X", ("Y",)) == ("replace", "Y")
    assert stack_op("X", ("Y", "X")) == ("push", "Y")
    assert stack_op(Z, ("Y", Z)) == ("push", "Y")
    with pytest.raises(AutomatonError, match="normal_form"):
        stack_op("X", ("Y", "Y"))


def test_normal_form_splits_long_pushes():
    d = DPDA(["p"], "ab", "XY", {("p", "a", Z): ("p", ("X", "Y", Z)),
                                 ("p", "b", "Y"): ("p", ("X", "X")), ("p", "b", "X"): ("p", ())},
             "p", acceptance="empty_stack")
    nf = d.normal_form()
    assert not d.is_normal and nf.is_normal and not nf.is_realtime
    assert all(nf.op(key)[0] in STACK_OPS for key in nf.transitions)
    with pytest.raises(AutomatonError, match="normal_form"):
        d.op(("p", "a", Z))
    for w in ["a", "ab", "abb", "abbb", "abbbb", "aa"]:
        assert nf.run(w) == d.run(w)
    assert nf.normal_form() == nf


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_normal_form_preserves_language(data):
    d = random_dpda(data)
    nf = d.normal_form()
    assert nf.is_normal
    if all(len(g) <= 1 or (len(g) == 2 and g[1] == k[2]) for k, (_, g) in d.transitions.items()):
        assert nf.is_realtime and nf == d
    for w in all_strings(d.alphabet.symbols, 6):
        assert nf.outputs(w) == d.outputs(w), w  # all prefixes up to length 6


# --- batched simulation --------------------------------------------------------------------------
def _check_batch_against_trace(d: DPDA, strings):
    ids, lengths = d.encode(strings)
    tr = d.run_batch(ids, lengths)
    T = ids.shape[1]
    for b, w in enumerate(strings):
        steps = d.trace(w)
        for t in range(T + 1):
            c = steps[min(t, len(steps) - 1)].config
            if c.state is None:
                assert tr["state"][b, t] == -1 and tr["depth"][b, t] == -1
                assert tr["top"][b, t] == -1 and (tr["stack"][b, t] == -1).all()
            else:
                assert tr["state"][b, t] == d.state_index(c.state)
                assert tr["depth"][b, t] == c.depth
                codes = [d.stack_code(s) for s in c.stack]
                row = tr["stack"][b, t]
                assert row[: len(codes)].tolist() == codes and (row[len(codes):] == -1).all()
                assert tr["top"][b, t] == codes[-1]
            assert tr["output"][b, t] == d.output(c)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_run_batch_agrees_with_run(data):
    d = random_dpda(data)
    strings = data.draw(st.lists(st.text(alphabet="".join(d.alphabet.symbols), max_size=8),
                                 min_size=1, max_size=6))
    _check_batch_against_trace(d, strings)
    _check_batch_against_trace(d.normal_form(), strings)  # with ε-moves


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_run_batch_agrees_with_run_epsilon(data):
    d = build_or_skip(data, eps=True)
    strings = data.draw(st.lists(st.text(alphabet="".join(d.alphabet.symbols), max_size=7),
                                 min_size=1, max_size=6))
    _check_batch_against_trace(d, strings)


# --- identity ------------------------------------------------------------------------------------
def test_hashable_and_comparable():
    assert anbn() == anbn() and hash(anbn()) == hash(anbn())
    assert anbn() != anbn_final()
    assert len({anbn(), anbn(), anbn_final()}) == 2
    d = anbn()
    d.transitions[("p", "a", Z)] = ("q", (Z,))  # a copy: the machine is unchanged
    assert d == anbn() and d.accepts("ab")


# --- bad input -----------------------------------------------------------------------------------
GOOD = {("p", "a", Z): ("p", ("A", Z))}


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(start="nope"), AutomatonError, "start state 'nope'"),
    (dict(accepting={"r"}), AutomatonError, "accepting state 'r'"),
    (dict(transitions={("r", "a", Z): ("p", (Z,))}), AutomatonError, "undeclared state 'r'"),
    (dict(transitions={("p", "a", Z): ("r", (Z,))}), AutomatonError, "undeclared state 'r'"),
    (dict(transitions={("p", "z", Z): ("p", (Z,))}), AutomatonError, "reads 'z'"),
    (dict(transitions={("p", "a", "Q"): ("p", ())}), AutomatonError, "top 'Q'"),
    (dict(transitions={("p", "a", Z): ("p", ("Q", Z))}), AutomatonError, "pushes 'Q'"),
    (dict(transitions={("p", "a", Z): ("p", ())}), AutomatonError, "does not re-push"),
    (dict(transitions={("p", "a", Z): ("p", (Z, "A", Z))}), AutomatonError, "above other"),
    (dict(transitions={("p", "a", "A"): ("p", ("A", Z))}), AutomatonError, "pushes BOTTOM"),
    (dict(transitions={("p", "a"): ("p", ())}), AutomatonError, "triple"),
    (dict(transitions={("p", "a", Z): "p"}), AutomatonError, "pair"),
    (dict(acceptance="by_magic"), AutomatonError, "by_magic"),
    (dict(acceptance="empty_stack", accepting={"p"}), AutomatonError, "empty_stack"),
    (dict(transitions={("p", "a", Z): [("p", (Z,)), ("p", ("A", Z))]}), DeterminismError,
     "2 targets"),
    (dict(transitions={("p", "a", Z): ("p", (Z,)), ("p", E, Z): ("p", ("A", Z))}),
     DeterminismError, r"\('p', ε, ⊥\) and \('p', 'a', ⊥\)"),
])
def test_bad_machines(kwargs, error, match):
    args = dict(states=["p"], input_alphabet="a", stack_alphabet="A", transitions=GOOD, start="p")
    args.update(kwargs)
    with pytest.raises(error, match=match):
        DPDA(**args)


def test_duplicate_state():
    with pytest.raises(AutomatonError, match="twice"):
        DPDA(["p", "p"], "a", "A", GOOD, "p")


def test_bad_inputs_to_a_machine():
    d = anbn()
    with pytest.raises(InputError, match="'c'"):
        d.accepts("abc")
    with pytest.raises(InputError, match="'c'"):
        d.step(d.initial(), "c")
    with pytest.raises(InputError, match="outside the alphabet"):
        d.run_batch(np.array([[0, 5]]))
    with pytest.raises(AutomatonError, match="not a transition"):
        d.op(("q", "a", Z))

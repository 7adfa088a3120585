"""Nondeterministic PDA: breadth-first configuration sets against a brute-force search."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pda import DPDA, PDA, PDAConfig
from pdanet.errors import AutomatonError, CompileError, InputError, SearchBoundError

Z, E = BOTTOM, EPSILON


def even_palindromes() -> PDA:
    """w w^R over {a, b}: push in p, guess the middle by an ε-move, pop matching symbols in r."""
    trans = {}
    for a in "ab":
        for x in ["a", "b", Z]:
            trans[("p", a, x)] = {("p", (a, x))}
        trans[("r", a, a)] = {("r", ())}
    for x in ["a", "b", Z]:
        trans[("p", E, x)] = {("r", (x,))}
    trans[("r", E, Z)] = {("f", (Z,))}
    return PDA(["p", "r", "f"], "ab", "ab", trans, "p", {"f"})


def test_even_palindromes():
    m = even_palindromes()
    for n in range(7):
        for w in map("".join, itertools.product("ab", repeat=n)):
            assert m.accepts(w) == (n % 2 == 0 and w == w[::-1]), w
    assert not m.is_deterministic and not m.is_realtime


def random_pda(data) -> PDA:
    """≤4 states, ≤2 stack symbols, ≤2 inputs; several moves per key; ε-moves never push, so
    every ε-closure is finite."""
    n = data.draw(st.integers(1, 4))
    k = data.draw(st.integers(1, 2))
    stack = "XY"[: data.draw(st.integers(1, 2))]
    states, inputs = list(range(n)), "ab"[:k]
    trans = {}
    for q in states:
        for x in list(stack) + [Z]:
            for a in list(inputs) + [E]:
                moves = set()
                for _ in range(data.draw(st.integers(0, 2))):
                    size = 1 if a is E else 2
                    body = tuple(data.draw(st.lists(st.sampled_from(stack), max_size=size)))
                    if x is Z:
                        body = body[:size - 1] + (Z,)
                    moves.add((data.draw(st.sampled_from(states)), body))
                if moves:
                    trans[(q, a, x)] = moves
    acceptance = data.draw(st.sampled_from(["final_state", "empty_stack"]))
    accepting = data.draw(st.sets(st.sampled_from(states))) if acceptance == "final_state" else ()
    return PDA(states, inputs, stack, trans, 0, accepting, acceptance)


def brute_force_configs(m: PDA, word: str) -> set:
    """Every configuration some computation reaches after reading all of `word` (depth-first search
    over (configuration, position) pairs, straight from the transition relation)."""
    found: set = set()
    seen: set = set()

    def visit(state, stack, i):
        if (state, stack, i) in seen:
            return
        seen.add((state, stack, i))
        if i == len(word):
            found.add(PDAConfig(state, stack))
        for a in ([word[i]] if i < len(word) else []) + [E]:
            for q2, gamma in m.transitions.get((state, a, stack[-1]), ()):
                visit(q2, stack[:-1] + tuple(reversed(gamma)), i + (a is not E))

    visit(m.start, (Z,), 0)
    return found


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_bfs_agrees_with_brute_force(data):
    m = random_pda(data)
    for n in range(5):
        for w in map("".join, itertools.product(m.alphabet.symbols, repeat=n)):
            expected = brute_force_configs(m, w)
            assert m.run(w) == expected, w
            accepted = any(
                c.state in m.accepting if m.acceptance == "final_state" else c.stack == (Z,)
                for c in expected
            )
            assert m.accepts(w) == accepted


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_run_batch_agrees_with_accepts(data):
    m = random_pda(data)
    strings = data.draw(st.lists(st.text(alphabet="".join(m.alphabet.symbols), max_size=5),
                                 min_size=1, max_size=4))
    tr = m.run_batch(*m.encode(strings))
    for b, w in enumerate(strings):
        assert tr["output"][b].tolist()[: len(w) + 1] == m.outputs(w)
        assert tr["num_configs"][b, len(w)] == len(m.run(w))


def test_deterministic_pda_agrees_with_dpda():
    trans = {("p", "a", Z): ("p", ("A", Z)), ("p", "a", "A"): ("p", ("A", "A")),
             ("p", "b", "A"): ("q", ()), ("q", "b", "A"): ("q", ())}
    d = DPDA(["p", "q"], "ab", "A", trans, "p", acceptance="empty_stack")
    m = PDA(["p", "q"], "ab", "A", trans, "p", acceptance="empty_stack")
    assert m.is_deterministic and m.is_realtime
    for n in range(7):
        for w in map("".join, itertools.product("ab", repeat=n)):
            assert m.accepts(w) == d.accepts(w)
            assert m.run(w) == ({d.run(w)} if d.run(w).state is not None else set())


def test_search_bound_is_reported_not_silent():
    m = PDA(["p"], "a", "A", {("p", E, Z): {("p", ("A", Z))}, ("p", E, "A"): {("p", ("A", "A"))}},
            "p", max_configs=50)
    with pytest.raises(SearchBoundError, match="max_configs=50"):
        m.accepts("")


def test_identity():
    assert even_palindromes() == even_palindromes()
    assert hash(even_palindromes()) == hash(even_palindromes())
    assert even_palindromes() != PDA(["p"], "a", "A", {}, "p")


def test_bad_input():
    with pytest.raises(CompileError, match="nondeterministic stack"):
        even_palindromes().bounded(3)
    with pytest.raises(InputError, match="max_configs"):
        PDA(["p"], "a", "A", {}, "p", max_configs=0)
    with pytest.raises(AutomatonError, match="pair"):
        PDA(["p"], "a", "A", {("p", "a", Z): {"p"}}, "p")
    with pytest.raises(AutomatonError, match="undeclared state 'r'"):
        PDA(["p"], "a", "A", {("p", "a", Z): {("r", (Z,))}}, "p")
    with pytest.raises(AutomatonError, match="start state"):
        PDA(["p"], "a", "A", {}, "s")
    with pytest.raises(InputError, match="'c'"):
        even_palindromes().accepts("abc")
    with pytest.raises(InputError):
        even_palindromes().run_batch(np.array([[0, 7]]))

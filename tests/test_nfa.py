"""NFA (ε-closure, simulation, subset construction) and regular expressions → minimal DFAs,
checked against a run-search oracle and Python's `re.fullmatch`."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import EPSILON
from pdanet.automata.dfa import DFA
from pdanet.automata.nfa import NFA
from pdanet.automata.regex import parse_regex, regex_to_dfa, regex_to_nfa
from pdanet.constructions.table import compile as compile_machine
from pdanet.errors import AutomatonError, CompileError, InputError

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def strings(alphabet, max_length):
    for n in range(max_length + 1):
        yield from itertools.product(tuple(alphabet), repeat=n)


@st.composite
def nfas(draw, max_states=6, alphabet="ab"):
    n = draw(st.integers(1, max_states))
    states = range(n)
    trans = {}
    for q in states:
        for a in list(alphabet) + [EPSILON]:
            targets = draw(st.sets(st.integers(0, n - 1), max_size=3))
            if targets:
                trans[(q, a)] = targets
    start = draw(st.one_of(st.integers(0, n - 1),
                           st.sets(st.integers(0, n - 1), min_size=1, max_size=n)))
    accepting = draw(st.sets(st.integers(0, n - 1)))
    return NFA(states, alphabet, trans, start, accepting)


def oracle_accepts(nfa: NFA, word) -> bool:
    """Search over (state, position) pairs: some run reads all of `word` and ends accepting."""
    seen = set()
    todo = [(q, 0) for q in nfa.starts]
    while todo:
        q, i = todo.pop()
        if (q, i) in seen:
            continue
        seen.add((q, i))
        if i == len(word) and q in nfa.accepting:
            return True
        todo.extend((r, i) for r in nfa.transitions.get((q, EPSILON), ()))
        if i < len(word):
            todo.extend((r, i + 1) for r in nfa.transitions.get((q, word[i]), ()))
    return False


# --- NFA --------------------------------------------------------------------------------------

def example() -> NFA:
    """Strings over {a, b} whose second-to-last symbol is a, with a detour through ε-moves."""
    return NFA("pqrs", "ab",
               {("p", "a"): {"p", "q"}, ("p", "b"): "p", ("q", EPSILON): "s",
                ("s", "a"): "r", ("s", "b"): "r"},
               "p", {"r"})


def test_example_nfa():
    n = example()
    for w in strings("ab", 6):
        assert n.accepts(w) == (len(w) >= 2 and w[-2] == "a")
    assert n.epsilon_closure("q") == frozenset({"q", "s"})
    assert n.initial() == frozenset({"p"})
    assert n.run("a") == frozenset({"p", "q", "s"})
    d = n.determinise()
    assert isinstance(d, DFA) and d.num_states == 4
    assert d.start == frozenset({"p"})
    assert all(isinstance(q, frozenset) and q for q in d.states)


@given(nfas())
@SETTINGS
def test_determinise_agrees_with_nfa_simulation(n):
    d = n.determinise()
    for w in strings(n.alphabet, 6):
        expected = oracle_accepts(n, w)
        assert n.accepts(w) == expected
        assert d.accepts(w) == expected
    assert d.reachable() == d  # only reachable subsets
    assert frozenset() not in d.states


@given(nfas())
@SETTINGS
def test_epsilon_closure_is_closed(n):
    for q in n.states:
        closure = n.epsilon_closure(q)
        assert q in closure
        for p in closure:
            assert n.transitions.get((p, EPSILON), frozenset()) <= closure
        assert n.epsilon_closure(closure) == closure


@given(nfas())
@SETTINGS
def test_dfa_as_nfa_round_trip(n):
    d = n.determinise().relabel()
    back = NFA.from_dfa(d)
    assert back.determinise().equivalent(d)


def test_single_target_means_a_singleton():
    a = NFA([0, 1], "a", {(0, "a"): 1}, 0, {1})
    b = NFA([0, 1], "a", {(0, "a"): {1}}, {0}, {1})
    assert a == b and hash(a) == hash(b)
    assert a != NFA([0, 1], "a", {(0, "a"): {0, 1}}, 0, {1})


def test_tuple_states_are_states_not_sets():
    s, t = ("x", 1), ("y", 2)
    n = NFA([s, t], "a", {(s, "a"): t}, s, {t})
    assert n.starts == frozenset({s}) and n.accepts("a")


@pytest.mark.parametrize("kwargs, message", [
    ({"transitions": {(9, "a"): 0}}, "undeclared state 9"),
    ({"transitions": {(0, "a"): {0, 9}}}, "9"),
    ({"transitions": {(0, "z"): 0}}, "'z'"),
    ({"transitions": {0: 0}}, "pair"),
    ({"start": 7}, "start state 7"),
    ({"start": {0, 7}}, "7"),
    ({"start": set()}, "at least one start"),
    ({"accepting": {5}}, "accepting state 5"),
    ({"states": [0, 0]}, "declared twice"),
])
def test_malformed_nfas(kwargs, message):
    spec = {"states": [0, 1], "alphabet": "ab", "transitions": {(0, "a"): {0, 1}}, "start": 0,
            "accepting": {1}}
    spec.update(kwargs)
    with pytest.raises(AutomatonError, match=message):
        NFA(**spec)


def test_unknown_symbol_in_accepts():
    with pytest.raises(InputError, match="'c'"):
        example().accepts("abc")


def test_nfa_is_not_compiled():
    with pytest.raises(CompileError, match="NFA"):
        compile_machine(example(), target="elman")
    assert "`.determinise()`" in NFA.compile_hint


def test_compile_error_says_to_determinise():
    with pytest.raises(CompileError, match=r"\.determinise\(\)"):
        compile_machine(example(), target="elman")


# --- regular expressions ----------------------------------------------------------------------

def regexes(symbols="ab"):
    """Random patterns in a syntax both `re` and ours read alike (every compound parenthesised)."""
    leaves = st.sampled_from(list(symbols) + [".", "()"])

    def extend(children):
        return st.one_of(
            st.tuples(children, children).map(lambda t: f"({t[0]}{t[1]})"),
            st.tuples(children, children).map(lambda t: f"({t[0]}|{t[1]})"),
            st.tuples(children, st.sampled_from("*+?")).map(lambda t: f"({t[0]}){t[1]}"),
        )

    return st.recursive(leaves, extend, max_leaves=8)


@given(regexes(), st.lists(st.text("ab", max_size=12), max_size=20))
@SETTINGS
def test_regex_agrees_with_python_re(pattern, extra):
    d = regex_to_dfa(pattern, "ab")
    nfa = regex_to_nfa(pattern, "ab")
    words = ["".join(w) for w in strings("ab", 5)] + extra
    for w in words:
        expected = re.fullmatch(pattern, w) is not None
        assert d.accepts(w) == expected, (pattern, w)
        assert nfa.accepts(w) == expected
    assert d.minimize() == d  # already minimal, in canonical numbering


@pytest.mark.parametrize("pattern", ["(a|b)*abb", "a*b+a?", "(ab|ba)*", "a|", "", ".a.", "((a))"])
def test_fixed_regexes_against_re(pattern):
    d = regex_to_dfa(pattern, "ab")
    for w in strings("ab", 7):
        assert d.accepts(w) == (re.fullmatch(pattern, "".join(w)) is not None)


def test_regex_minimal_sizes_and_equal_languages():
    assert regex_to_dfa("(a|b)*abb", "ab").num_states == 4
    assert regex_to_dfa("(a|b)*", "ab") == regex_to_dfa(".*", "ab") == regex_to_dfa("(a*b*)*", "ab")
    assert regex_to_dfa("a**", "ab") == regex_to_dfa("a*", "ab")
    assert regex_to_dfa("b", "abc").language(3) == [("b",)]


def test_escapes_and_metachar_symbols():
    d = regex_to_dfa(r"\(\**\|", "(*|a")
    assert d.accepts("(|") and d.accepts("(***|")
    assert not d.accepts("(") and not d.accepts("a|")
    assert regex_to_dfa(r"\.", ".a").language(2) == [(".",)]


@pytest.mark.parametrize("pattern, position, words", [
    ("(ab", 0, "never closed"),
    ("a(b|(a)", 1, "never closed"),
    ("ab)", 2, "unmatched"),
    ("*a", 0, "nothing to repeat"),
    ("a|+", 2, "nothing to repeat"),
    ("(*)", 1, "nothing to repeat"),
    ("abc", 2, "'c' is not in the alphabet"),
    ("a\\", 1, "lone"),
])
def test_regex_syntax_errors_name_the_position(pattern, position, words):
    with pytest.raises(InputError, match=rf"position {position}: .*{words}"):
        regex_to_dfa(pattern, "ab")


def test_regex_needs_single_character_symbols():
    with pytest.raises(InputError, match="single characters"):
        regex_to_dfa("a", ["a", "bc"])
    with pytest.raises(InputError, match="str"):
        parse_regex(["a"], "ab")

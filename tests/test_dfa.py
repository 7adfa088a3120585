"""DFA: validation, simulation, and the operations (complete, trim, minimise, equivalence,
products, complement, language enumeration), checked against brute-force oracles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdanet.automata.dfa import DFA, DFAConfig
from pdanet.errors import AutomatonError, DeterminismError, InputError

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --- strategies and oracles -------------------------------------------------------------------

@st.composite
def dfas(draw, min_states=2, max_states=12, alphabets=("ab", "abc"), mealy=False,
         partial=True):
    """Random DFAs over 2-3 symbols; with `partial`, some transitions are missing."""
    n = draw(st.integers(min_states, max_states))
    alphabet = draw(st.sampled_from(alphabets))
    low = -1 if partial and draw(st.booleans()) else 0
    targets = st.integers(low, n - 1)
    row = st.lists(targets, min_size=len(alphabet), max_size=len(alphabet))
    table = np.array(draw(st.lists(row, min_size=n, max_size=n)), dtype=np.int64)
    accepting = draw(st.sets(st.integers(0, n - 1)))
    start = draw(st.integers(0, n - 1))
    if not mealy:
        return DFA.from_table(table, alphabet, start, accepting)
    out = np.array(draw(st.lists(st.lists(st.integers(0, 2), min_size=len(alphabet),
                                          max_size=len(alphabet)), min_size=n, max_size=n)))
    return DFA.from_table(table, alphabet, start, accepting, out_table=out,
                          output_alphabet="xyz")


def strings(alphabet, max_length):
    """All strings over the alphabet up to max_length, in length-lexicographic order."""
    syms = tuple(alphabet)
    for n in range(max_length + 1):
        yield from itertools.product(syms, repeat=n)


def table_accepts(dfa: DFA, word) -> bool:
    """Oracle independent of `run`: follow the numpy table by hand."""
    q = dfa.state_index(dfa.start)
    for s in word:
        q = int(dfa.table[q, dfa.alphabet.index(s)])
        if q < 0:
            return False
    return bool(dfa.accepting_mask[q])


def same_language(a: DFA, b: DFA, max_length: int) -> bool:
    return all(a.accepts(w) == b.accepts(w) for w in strings(a.alphabet, max_length))


# --- construction and validation --------------------------------------------------------------

def div3() -> DFA:
    """Binary numbers (most significant bit first) divisible by 3, with 6 states (3 redundant)."""
    return DFA(range(6), "01", {(q, str(b)): (2 * q + b) % 6 for q in range(6) for b in (0, 1)},
               0, {0, 3})


def test_basic_run_and_accepts():
    d = div3()
    for v in range(64):
        assert d.accepts(format(v, "b")) == (v % 3 == 0)
    assert d.run("11") == DFAConfig(3, None)
    assert d.is_complete and not d.is_mealy and d.num_states == 6


@pytest.mark.parametrize("kwargs, message", [
    ({"transitions": {(0, "a"): 9}}, "undeclared state 9"),
    ({"transitions": {(9, "a"): 0}}, "undeclared state 9"),
    ({"transitions": {(0, "z"): 0}}, "'z'"),
    ({"transitions": {0: 0}}, "pair"),
    ({"accepting": {7}}, "accepting state 7"),
    ({"start": 5}, "start state 5"),
    ({"states": [0, 1, 1]}, "declared twice"),
])
def test_malformed_dfas(kwargs, message):
    spec = {"states": [0, 1], "alphabet": "ab", "transitions": {(0, "a"): 1}, "start": 0,
            "accepting": {1}}
    spec.update(kwargs)
    with pytest.raises(AutomatonError, match=message):
        DFA(**spec)


@pytest.mark.parametrize("target", [{0, 1}, [0, 1], frozenset({1})])
def test_set_valued_target_points_to_nfa(target):
    with pytest.raises(DeterminismError, match=r"NFA\(\.\.\.\)`? and call `\.determinise\(\)"):
        DFA([0, 1], "ab", {(0, "a"): target}, 0)


def test_frozenset_states_are_allowed_as_targets():
    s, t = frozenset({1}), frozenset({1, 2})
    d = DFA([s, t], "a", {(s, "a"): t, (t, "a"): t}, s, {t})
    assert d.accepts("a") and not d.accepts("")


def test_mealy_missing_output():
    with pytest.raises(AutomatonError, match=r"\(0, 'b'\) has no output"):
        DFA([0], "ab", {(0, "a"): 0, (0, "b"): 0}, 0, outputs={(0, "a"): "x"})


def test_mealy_output_for_undefined_transition_and_unknown_output():
    with pytest.raises(AutomatonError, match="undefined transition"):
        DFA([0], "ab", {(0, "a"): 0}, 0, outputs={(0, "a"): "x", (0, "b"): "y"})
    with pytest.raises(AutomatonError, match="not in the output alphabet"):
        DFA([0], "a", {(0, "a"): 0}, 0, outputs={(0, "a"): "q"}, output_alphabet="xy")


def test_output_alphabet_without_outputs():
    with pytest.raises(AutomatonError, match="no outputs"):
        DFA([0], "a", {(0, "a"): 0}, 0, output_alphabet="xy")


def test_unknown_symbol_in_run():
    d = div3()
    with pytest.raises(InputError, match="'2'"):
        d.run("0120")
    with pytest.raises(InputError, match="'2'"):
        d.step(d.initial(), "2")
    with pytest.raises(InputError, match="outside the alphabet"):
        d.run_batch(np.array([[0, 5]]))


def test_hashable_and_comparable():
    assert div3() == div3() and hash(div3()) == hash(div3())
    assert div3() != div3().complement()
    assert len({div3(), div3(), div3().minimize()}) == 2


# --- run_batch against run/output -------------------------------------------------------------

def _check_batch(d: DFA, words):
    ids, lengths = d.encode(words)
    trace = d.run_batch(ids, lengths)
    for b, w in enumerate(words):
        steps = d.trace(w)
        for t in range(ids.shape[1] + 1):
            step = steps[min(t, len(w))]  # rows past the length repeat the last one
            q = step.config.state
            assert trace["state"][b, t] == (-1 if q is None else d.state_index(q))
            got = trace["output"][b, t]
            if d.output_kind == "accept":
                assert bool(got) == step.output
            elif d.output_kind == "symbol":
                expected = step.output
                assert got == (-1 if expected is None else d.output_alphabet.index(expected))
            else:
                allowed = {d.output_alphabet.symbol(i) for i in np.flatnonzero(got)}
                assert allowed == step.output


@given(st.data())
@SETTINGS
def test_run_batch_agrees_with_run_step_by_step(data):
    d = data.draw(st.one_of(dfas(), dfas(mealy=True)))
    if not d.is_mealy and data.draw(st.booleans()):
        d = d.with_output_kind("next_set")
    words = data.draw(st.lists(st.lists(st.sampled_from(d.alphabet.symbols), max_size=8),
                               min_size=1, max_size=6))
    _check_batch(d, [tuple(w) for w in words])


def test_next_set_output_of_a_partial_dfa():
    d = DFA([0, 1, 2], "ab", {(0, "a"): 1, (0, "b"): 2, (1, "b"): 0}, 0, {0})
    g = d.with_output_kind("next_set")
    assert g.output(g.initial()) == frozenset({"a", "$"})  # 'b' leads to a state that cannot accept
    assert g.output(g.run("a")) == frozenset({"b"})
    assert g.accepts("ab") and not g.accepts("a")


# --- complete, reachable, co-reachable, trim, relabel -----------------------------------------

@given(dfas())
@SETTINGS
def test_complete_adds_a_sink_only_when_needed(d):
    c = d.complete()
    assert c.is_complete
    if d.is_complete:
        assert c is d
    else:
        assert c.num_states == d.num_states + 1
        sink = c.states[-1]
        assert sink not in d.states and sink not in c.accepting
        assert all(c.transitions[(sink, a)] == sink for a in c.alphabet)
        for key, target in d.transitions.items():
            assert c.transitions[key] == target
    assert same_language(c, d, 6)


def test_complete_names_the_sink():
    d = DFA(["p", "dead"], "a", {("p", "a"): "dead"}, "p")
    assert d.complete().states[-1] == "dead2"
    assert DFA([0, 5], "a", {}, 0).complete().states[-1] == 6


def test_complete_a_mealy_machine_needs_an_output():
    m = DFA([0], "ab", {(0, "a"): 0}, 0, outputs={(0, "a"): "x"})
    with pytest.raises(AutomatonError, match="complete\\(output="):
        m.complete()
    c = m.complete(output="z")
    assert c.is_complete and "z" in c.output_alphabet
    assert c.outputs("ab") == [None, "x", "z"]


def _search(start: set, edges: dict) -> set:
    """Graph search over a dict node -> set of successors."""
    seen, todo = set(start), list(start)
    while todo:
        for r in edges.get(todo.pop(), ()):
            if r not in seen:
                seen.add(r)
                todo.append(r)
    return seen


@given(dfas())
@SETTINGS
def test_reachable_coreachable_trim(d):
    forward: dict = {}
    backward: dict = {}
    for (q, _), r in d.transitions.items():
        forward.setdefault(q, set()).add(r)
        backward.setdefault(r, set()).add(q)
    reach = _search({d.start}, forward)
    live = _search(set(d.accepting), backward)
    r = d.reachable()
    assert set(r.states) == reach
    assert [q for q in d.states if q in reach] == list(r.states)  # declared order kept
    co = d.coreachable()
    assert set(co.states) == live | {d.start}
    t = d.trim()
    assert set(t.states) == (reach & live) | {d.start}
    for x in (r, co, t):
        assert same_language(x, d, 6)
        assert set(x.transitions.values()) <= set(x.states)


@given(dfas())
@SETTINGS
def test_relabel(d):
    r = d.relabel()
    assert r.states == tuple(range(d.num_states))
    assert np.array_equal(r.table, d.table)
    assert r.start == d.state_index(d.start)
    assert same_language(r, d, 5)


# --- minimisation -----------------------------------------------------------------------------

@given(dfas())
@SETTINGS
def test_minimize_preserves_language_and_is_idempotent(d):
    m = d.minimize()
    for w in strings(d.alphabet, 7):
        assert m.accepts(w) == table_accepts(d, w)
    mm = m.minimize()
    assert mm.num_states == m.num_states
    assert mm == m  # canonical numbering: the same DFA again
    assert m.num_states <= d.trim().num_states
    assert m.states == tuple(range(m.num_states)) and m.start == 0


@given(dfas())
@SETTINGS
def test_minimize_is_canonical(d):
    """Equivalent inputs (completed, relabelled, with a copy of every state) minimise equally."""
    n = d.num_states
    doubled = np.vstack([d.table, np.where(d.table >= 0, d.table + n, -1)])
    doubled[:n, 0] = np.where(d.table[:, 0] >= 0, d.table[:, 0] + n, -1)  # jump to the copy
    acc = list(d.accepting_mask.nonzero()[0]) + [q + n for q in d.accepting_mask.nonzero()[0]]
    copy = DFA.from_table(doubled, d.alphabet, d.state_index(d.start), acc)
    assert same_language(copy, d, 5)
    m = d.minimize()
    assert d.complete().minimize() == m
    assert d.relabel().minimize() == m
    assert copy.minimize() == m


def _nerode_classes(d: DFA) -> tuple[int, bool]:
    """Myhill–Nerode classes by brute force: prefixes up to length n reach every reachable state
    (and the dead state); suffixes up to length n separate every pair of inequivalent states."""
    n = d.num_states
    suffixes = list(strings(d.alphabet, n))
    signatures = {tuple(d.accepts(u + z) for z in suffixes) for u in strings(d.alphabet, n)}
    has_dead = any(not any(s) for s in signatures)
    return len(signatures), has_dead


@given(dfas(max_states=5, alphabets=("ab",)))
@settings(max_examples=30, deadline=None)
def test_minimal_size_is_the_number_of_nerode_classes(d):
    classes, has_dead = _nerode_classes(d)
    m = d.minimize()
    # the trim minimal DFA leaves the dead class implicit, unless it is the only class
    assert m.num_states == (classes - 1 if has_dead and classes > 1 else classes)
    if classes > 1:
        assert m.complete().num_states == classes


def test_minimize_known_example():
    m = div3().minimize()
    assert m.num_states == 3
    assert m.accepting == frozenset({0})
    assert m.transitions == {(0, "0"): 0, (0, "1"): 1, (1, "0"): 2, (1, "1"): 0,
                             (2, "0"): 1, (2, "1"): 2}


def test_minimize_empty_language():
    d = DFA(range(3), "ab", {(0, "a"): 1, (1, "b"): 2, (2, "a"): 0}, 0, ())
    m = d.minimize()
    assert m.num_states == 1 and not m.transitions and not m.accepting


def _mealy_outputs(d: DFA, w) -> tuple:
    return tuple(d.outputs(w)), d.accepts(w)


@given(dfas(mealy=True, max_states=8))
@SETTINGS
def test_minimize_mealy_preserves_outputs(d):
    m = d.minimize()
    assert m.is_mealy and m.output_alphabet == d.output_alphabet
    for w in strings(d.alphabet, 6):
        assert _mealy_outputs(m, w) == _mealy_outputs(d, w)
    assert m.minimize() == m
    assert m.num_states <= d.reachable().num_states
    assert d.equivalent(m) and m.counterexample(d) is None


def test_minimize_mealy_merges_by_output_rows():
    # states 0 and 1 behave alike (emit x on a, y on b, loop); state 2 emits y on a
    trans = {(q, s): (q + 1) % 3 for q in range(3) for s in "ab"}
    outs = {(0, "a"): "x", (0, "b"): "y", (1, "a"): "x", (1, "b"): "y",
            (2, "a"): "y", (2, "b"): "y"}
    d = DFA(range(3), "ab", trans, 0, outputs=outs)
    assert d.minimize().num_states == 3  # the cycle position matters: 0 → 1 → 2
    same = {(q, s): "x" for q in range(3) for s in "ab"}
    assert DFA(range(3), "ab", trans, 0, outputs=same).minimize().num_states == 1


# --- equivalence and counterexamples ----------------------------------------------------------

@given(st.data())
@settings(max_examples=60, deadline=None)
def test_equivalent_agrees_with_brute_force(data):
    a = data.draw(dfas(max_states=4, alphabets=("ab",)))
    b = data.draw(st.one_of(dfas(max_states=4, alphabets=("ab",)),
                            st.just(a.minimize()), st.just(a.complete().relabel())))
    # completed, the machines have na + 1 and nb + 1 states: if they differ, they differ on a
    # string of length ≤ na + nb
    bound = a.num_states + b.num_states
    brute = next((w for w in strings(a.alphabet, bound) if a.accepts(w) != b.accepts(w)), None)
    cex = a.counterexample(b)
    assert (cex is None) == (brute is None) == a.equivalent(b)
    if cex is not None:
        assert a.accepts(cex) != b.accepts(cex)
        assert len(cex) == len(brute)  # shortest


@given(dfas(mealy=True, max_states=4, alphabets=("ab",)), dfas(mealy=True, max_states=4,
                                                                  alphabets=("ab",)))
@settings(max_examples=100, deadline=None)
def test_mealy_counterexample_is_shortest(a, b):
    brute = next((w for w in strings(a.alphabet, 8)
                  if _mealy_outputs(a, w) != _mealy_outputs(b, w)), None)
    cex = a.counterexample(b)
    if brute is None:
        assert cex is None
    else:
        assert cex is not None and len(cex) == len(brute)
        assert _mealy_outputs(a, cex) != _mealy_outputs(b, cex)


def test_mealy_missing_transition_differs_from_an_output():
    a = DFA([0], "ab", {(0, "a"): 0}, 0, outputs={(0, "a"): "x"})
    b = DFA([0, 1], "ab", {(0, "a"): 0, (0, "b"): 1}, 0, outputs={(0, "a"): "x", (0, "b"): "x"})
    assert a.outputs("b") == [None, None] and b.outputs("b") == [None, "x"]
    assert a.counterexample(b) == ("b",) and b.counterexample(a) == ("b",)
    # outputs are compared by symbol, not by index into each machine's output alphabet
    c = DFA([0], "ab", {(0, "a"): 0}, 0, outputs={(0, "a"): "x"}, output_alphabet="yx")
    assert a.equivalent(c)


def test_equivalence_with_reordered_alphabet():
    a = DFA([0, 1], "ab", {(0, "a"): 1, (1, "b"): 0}, 0, {0})
    b = DFA([0, 1], "ba", {(0, "a"): 1, (1, "b"): 0}, 0, {0})
    assert a.equivalent(b)
    c = DFA([0, 1], "ba", {(0, "b"): 1, (1, "a"): 0}, 0, {0})
    assert a.counterexample(c) == ("a", "b")


def test_equivalence_needs_the_same_alphabet():
    with pytest.raises(InputError, match="alphabets differ"):
        div3().equivalent(DFA([0], "ab", {}, 0))
    with pytest.raises(InputError, match="Mealy"):
        div3().equivalent(DFA([0], "01", {(0, "0"): 0}, 0, outputs={(0, "0"): "x"}))


# --- products, complement, language -----------------------------------------------------------

OPS = {"and": lambda x, y: x and y, "or": lambda x, y: x or y,
       "xor": lambda x, y: x != y, "diff": lambda x, y: x and not y}


@given(st.data(), st.sampled_from(sorted(OPS)))
@SETTINGS
def test_product_agrees_with_boolean_combination(data, mode):
    a = data.draw(dfas(max_states=6, alphabets=("ab",)))
    b = data.draw(dfas(max_states=6, alphabets=("ab",)))
    p = a.product(b, mode)
    for w in strings(a.alphabet, 6):
        assert p.accepts(w) == OPS[mode](a.accepts(w), b.accepts(w))
    assert all(isinstance(q, tuple) and len(q) == 2 for q in p.states)


def test_named_products():
    a, b = div3(), DFA([0, 1], "01", {(0, "0"): 1, (0, "1"): 0, (1, "0"): 1, (1, "1"): 0}, 0, {1})
    for w in strings("01", 6):
        x, y = a.accepts(w), b.accepts(w)
        assert a.intersection(b).accepts(w) == (x and y)
        assert a.union(b).accepts(w) == (x or y)
        assert a.difference(b).accepts(w) == (x and not y)
        assert a.symmetric_difference(b).accepts(w) == (x != y)
    with pytest.raises(InputError, match="mode"):
        a.product(b, "nand")


@given(dfas())
@SETTINGS
def test_complement(d):
    c = d.complement()
    assert c.is_complete
    for w in strings(d.alphabet, 6):
        assert c.accepts(w) == (not d.accepts(w))
    assert c.complement().equivalent(d)
    assert d.union(c).minimize().num_states == 1  # Σ*


@given(dfas(max_states=6))
@SETTINGS
def test_language_enumeration(d):
    brute = [w for w in strings(d.alphabet, 5) if table_accepts(d, w)]
    assert d.language(5) == brute
    assert d.language(0) == ([()] if d.accepts(()) else [])


def test_language_order_and_errors():
    d = DFA([0, 1], "ba", {(0, "a"): 1, (0, "b"): 1, (1, "a"): 1}, 0, {1})
    assert d.language(2) == [("b",), ("a",), ("b", "a"), ("a", "a")]  # alphabet order: b < a
    with pytest.raises(InputError, match="max_length"):
        d.language(-1)


def test_mealy_machines_have_no_complement_or_product():
    m = DFA([0], "a", {(0, "a"): 0}, 0, outputs={(0, "a"): "x"})
    with pytest.raises(InputError, match="Mealy"):
        m.complement()
    with pytest.raises(InputError, match="Mealy"):
        m.product(m)


# --- scale ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_operations_on_ten_thousand_states():
    """A mod-500 counter over 20 symbols, blown up to 10,000 states by 20 copies of each state."""
    k, base, copies = 20, 500, 20
    n = base * copies
    rng = np.random.default_rng(0)
    step = rng.integers(0, base, size=k)  # symbol c adds step[c] modulo `base`
    q = np.arange(n)
    residue = q % base
    target_res = (residue[:, None] + step[None, :]) % base
    table = target_res + base * rng.integers(0, copies, size=(n, k))
    accepting = np.flatnonzero(residue % 7 == 0)
    big = DFA.from_table(table, [f"s{c}" for c in range(k)], 0, accepting)
    m = big.minimize()
    small = DFA.from_table(target_res[:base], big.alphabet, 0, np.flatnonzero(
        np.arange(base) % 7 == 0)).minimize()
    assert m == small
    assert big.equivalent(m) and big.counterexample(big.complement()) == ()
    words = rng.integers(0, k, size=(200, 50))
    assert np.array_equal(big.run_batch(words)["output"], m.run_batch(words)["output"])
    assert big.intersection(m).trim().num_states == big.num_states

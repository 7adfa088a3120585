"""The tasks of Delétang et al. (2023) and Butoi et al. (2025): each machine agrees with its
independent reference function (exhaustively on short strings, on samples and their perturbations,
and on random strings), compiles to its default network target and passes verification."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata import tasks as T
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA
from pdanet.automata.tasks import butoi2024 as B
from pdanet.automata.tasks import deletang2023 as D
from pdanet.errors import InputError
from tests.test_tasks import perturb

# task -> (parameters, lengths to sample, longest exhaustively checked length)
CASES = {
    "repeat_01": ({}, [0, 2, 10, 20], 8),
    "even_pairs": ({}, [0, 1, 2, 7, 16], 8),
    "cycle_navigation": ({}, [1, 2, 9, 16], 5),
    "modular_arithmetic_simple": ({}, [3, 5, 9, 15], 4),
    "majority": ({}, [1, 2, 7, 16], 8),
    "stack_manipulation": ({}, [1, 3, 4, 9, 16], 5),
    "modular_arithmetic_brackets": ({}, [3, 7, 12, 20], 5),
    "solve_equation": ({"modulus": 2}, [5, 9, 14, 20], 5),
}
NEW = set(CASES)




def test_tasks_are_registered_with_their_sources():
    assert NEW <= set(T.names())
    for name in NEW:
        t = T.task(name)
        assert t.kind == "recognise" and t.description
        assert "Delétang et al. (2023)" in t.paper or "Butoi et al. (2025)" in t.paper
        module = t.machine_factory.__module__.rsplit(".", 1)[1]
        assert module in ("deletang2023", "butoi2024")
        assert t.sampler.__module__ == t.reference.__module__ == t.machine_factory.__module__


@pytest.mark.parametrize("name", sorted(CASES))
def test_machine_agrees_with_reference_exhaustively_on_short_strings(name):
    params, _, longest = CASES[name]
    machine, ref = T.get(name, **params), T.reference(name, **params)
    symbols = tuple(machine.alphabet)
    members = 0
    for n in range(longest + 1):
        for s in itertools.product(symbols, repeat=n):
            e = ref(s)
            assert isinstance(e, bool)
            members += e
            assert T.apply(machine, s) == e, s
    assert members > 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_machine_agrees_with_reference_on_samples_and_perturbations(name):
    params, lengths, _ = CASES[name]
    machine, ref = T.get(name, **params), T.reference(name, **params)
    rng = np.random.default_rng(sum(map(ord, name)))
    symbols = tuple(machine.alphabet)
    samples = T.sample(name, 40, lengths, rng, **params)
    assert {len(s) for s in samples} <= set(lengths)
    changed = 0
    for s in samples:
        assert ref(s) is True and machine.accepts(s), s
        for p in perturb(s, symbols, rng):
            changed += not ref(p)
            assert T.apply(machine, p) == ref(p), p
    assert changed > 0


PARAMS = {
    "cycle_navigation": st.fixed_dictionaries({"size": st.integers(1, 7)}),
    "modular_arithmetic_simple": st.fixed_dictionaries({"modulus": st.integers(1, 7)}),
    "modular_arithmetic_brackets": st.fixed_dictionaries(
        {"modulus": st.integers(1, 6), "mult": st.booleans()}),
    "solve_equation": st.fixed_dictionaries({"modulus": st.integers(1, 6), "mult": st.booleans()}),
}


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_machine_agrees_with_reference_on_random_and_mutated_strings(name, data):
    """Random parameters; random strings over the alphabet and mutated members of random lengths
    (the members reach the deep stacks that short exhaustive strings miss)."""
    params = data.draw(PARAMS.get(name, st.just({})))
    machine, ref = T.get(name, **params), T.reference(name, **params)
    symbols = tuple(machine.alphabet)
    s = tuple(data.draw(st.lists(st.sampled_from(symbols), max_size=12)))
    assert T.apply(machine, s) == ref(s), s
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lengths = [L for L in range(25) if _has_members(name, L)]
    member = T.sample(name, 1, lengths, rng, **params)[0]
    assert ref(member) and machine.accepts(member), member
    for p in perturb(member, symbols, rng):
        assert T.apply(machine, p) == ref(p), p


def _has_members(name: str, L: int) -> bool:
    return {"repeat_01": L % 2 == 0, "cycle_navigation": L >= 1,
            "modular_arithmetic_simple": L >= 3 and L % 2 == 1, "majority": L >= 1,
            "stack_manipulation": L >= 1 and L != 2, "modular_arithmetic_brackets": L >= 3,
            "solve_equation": L >= 5}.get(name, True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_length_said_to_have_members_has_one_and_the_others_raise(name):
    params, _, longest = CASES[name]
    ref = T.reference(name, **params)
    symbols = tuple(T.get(name, **params).alphabet)
    for L in range(longest + 1):
        exists = any(ref(s) for s in itertools.product(symbols, repeat=L))
        assert exists == _has_members(name, L), L
        if not exists:
            with pytest.raises(InputError):
                T.sample(name, 1, L, 0, **params)


def test_paper_examples():
    assert T.reference("modular_arithmetic_simple")(tuple("1+2-4=4"))   # Delétang et al. (2023)
    assert not T.reference("modular_arithmetic_simple")(tuple("1+2-4=3"))
    assert T.reference("modular_arithmetic_simple")(tuple("1+2*3=4"))   # left to right: 3*3 = 9
    assert T.reference("even_pairs")(tuple("00110"))                    # "aabba": ab, ba
    assert not T.reference("even_pairs")(tuple("0011"))
    assert T.reference("cycle_navigation")(tuple(">><=1"))
    assert T.reference("cycle_navigation")(tuple("<4"))
    ops = ("0", "1", "PUSH", "1", "POP", "POP", "#", "0")
    assert T.reference("stack_manipulation")(ops)
    assert not T.reference("stack_manipulation")(("POP", "#"))          # pop on the empty stack
    assert T.reference("stack_manipulation")(("1", "0", "#", "0", "1"))   # top first
    brackets = T.reference("modular_arithmetic_brackets")
    assert brackets(tuple("(1+(2-3))=0")) and brackets(tuple("(-3)=2")) and brackets(tuple("-3=2"))
    assert not brackets(tuple("((3))=3")) and not brackets(tuple("(1+2+3)=1"))
    assert not brackets(tuple("(1*2)=2"))                               # * only with mult=True
    assert T.reference("modular_arithmetic_brackets", mult=True)(tuple("((4*4)-(-1))=2"))
    solve = T.reference("solve_equation")
    assert solve(tuple("(x+(2-3))=4#0")) and not solve(tuple("(x+(2-3))=4#1"))
    assert solve(tuple("(-x-1)=2#2")) and not solve(tuple("(1+2)=3#0"))
    assert not solve(tuple("(x+x)=2#1"))                                # one unknown only
    for name, s in [("modular_arithmetic_brackets", "((3))=3"), ("solve_equation", "(x+x)=2#1"),
                    ("modular_arithmetic_brackets", "(1+(2-3))=0")]:
        assert T.get(name).accepts(tuple(s)) == T.reference(name)(tuple(s))


def test_machines_are_real_time_and_of_the_expected_kind():
    kinds = {"repeat_01": DFA, "even_pairs": DFA, "cycle_navigation": DFA,
             "modular_arithmetic_simple": DFA, "majority": DPDA, "stack_manipulation": DPDA,
             "modular_arithmetic_brackets": DPDA, "solve_equation": DPDA}
    for name, kind in kinds.items():
        m = T.get(name)
        assert type(m) is kind
        if kind is DPDA:
            assert all(x in m.alphabet for (_, x, _) in m.transitions), name  # no ε-moves


def test_samplers_are_reproducible_and_check_their_arguments():
    for name, (params, lengths, _) in CASES.items():
        a = T.sample(name, 10, lengths, np.random.default_rng(1), **params)
        assert a == T.sample(name, 10, lengths, np.random.default_rng(1), **params)
        assert all(isinstance(s, tuple) and len(s) in lengths for s in a)
    with pytest.raises(InputError, match="odd"):
        T.sample("repeat_01", 1, 3, 0)
    with pytest.raises(InputError, match="length 2"):
        T.sample("stack_manipulation", 1, 2, 0)
    with pytest.raises(InputError, match="modulus"):
        T.get("modular_arithmetic_brackets", modulus=0)
    with pytest.raises(InputError, match="modulus"):
        T.sample("solve_equation", 1, 7, 0, modulus=11)
    with pytest.raises(InputError, match="mult"):
        T.reference("solve_equation", mult="yes")(("x",))
    with pytest.raises(InputError, match="cycle size"):
        T.get("cycle_navigation", size=True)
    with pytest.raises(InputError, match="non-negative"):
        T.sample("majority", 2, [-1], 0)


def test_marked_copy_reference_and_sampler():
    """Butoi et al.'s Marked Copy recogniser reference (w#w, context-sensitive) and sampler; the
    registered `marked_copy` task is Delétang et al.'s transduction w# → w (a queue)."""
    ref = B.marked_copy_reference
    assert ref(tuple("01#01")) and ref(("#",)) and not ref(tuple("01#10"))
    assert not ref(tuple("0#0#0")) and not ref(tuple("2#2")) and not ref(())
    rng = np.random.default_rng(4)
    strings = B.marked_copy_sampler(30, [1, 5, 11], rng)
    assert all(ref(s) and len(s) in (1, 5, 11) for s in strings)
    # exhaustive: exactly 2^k members of length 2k + 1
    for L in range(8):
        count = sum(ref(s) for s in itertools.product("01#", repeat=L))
        assert count == (2 ** (L // 2) if L % 2 else 0)
    with pytest.raises(InputError, match="odd"):
        B.marked_copy_sampler(1, 4, rng)


def test_solve_equation_sampler_replaces_one_digit():
    for s in D.solve_equation_sampler(30, [5, 11, 17], np.random.default_rng(2), mult=True):
        assert s.count(D.UNKNOWN) == 1 and s[-2] == D.ANSWER
        assert D.solve_equation_reference(s, mult=True)


# --- compiled networks ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, max_length", [
    ("repeat_01", 8), ("even_pairs", 8), ("cycle_navigation", 5),
    ("modular_arithmetic_simple", 5), ("majority", 8), ("stack_manipulation", 6),
    ("modular_arithmetic_brackets", 5), ("solve_equation", 4)])
def test_compiles_to_the_default_target_and_verifies(name, max_length):
    pytest.importorskip("torch")
    import pdanet as pn

    m = T.get(name)
    net = pn.compile(m) if isinstance(m, DFA) else pn.compile(m, target="stack_rnn")
    report = pn.verify(m, net, max_length=max_length, samples=20, long_samples=0)
    assert report.ok, report

"""Named tasks: every machine agrees with its task's independent reference function — on sampled
strings, on perturbed (mostly negative) strings and exhaustively on short strings."""

from __future__ import annotations

import collections
import dataclasses
import itertools

import numpy as np
import pytest

from pdanet.automata import tasks as T
from pdanet.automata.bounded import DyckKM
from pdanet.automata.dfa import DFA
from pdanet.errors import InputError

# task -> (machine parameters, lengths to sample, longest exhaustively checked length)
CASES = {
    "reversal": ({}, [0, 2, 6, 12], 6),
    "string_reversal": ({"alphabet": "abc"}, [2, 8], 5),
    "cumulative_xor": ({}, [0, 5, 16], 8),
    "delayed_xor": ({}, [1, 7, 16], 8),
    "parenthesis_prediction": ({}, [2, 6, 12, 20], 6),
    "boolean_formula": ({}, [1, 3, 7, 15], 5),
    "agreement": ({}, [3, 6, 9, 12, 15], 3),
    "marked_reversal": ({}, [1, 5, 11], 7),
    "w_wr_marked": ({}, [1, 5, 11], 5),
    "w_phi_wr": ({}, [1, 5, 11], 4),
    "unmarked_reversal": ({}, [0, 4, 10], 8),
    "padded_reversal": ({}, [0, 3, 8, 11], 8),
    "dyck2": ({}, [0, 4, 12], 6),
    "hardest_cfl": ({}, [6, 9, 14], 5),  # no member is shorter than 6 (",$(),;")
    "sequence_copy": ({"vocab_size": 2, "max_length": 4}, [0, 4, 8], 6),
    "sequence_reversal": ({"vocab_size": 3}, [0, 4, 10], 5),
    "bigram_flip": ({"vocab_size": 3}, [1, 5, 11], 5),
    "dyck": ({"k": 2, "m": 2}, [0, 4, 10], 6),
    "parity": ({}, [0, 5, 13], 8),
    "modular_counter": ({"modulus": 4, "residue": 1}, [0, 5, 13], 8),
    "repeat_01": ({}, [0, 2, 10], 8),
    "even_pairs": ({}, [0, 5, 13], 8),
    "cycle_navigation": ({}, [1, 5, 13], 5),
    "modular_arithmetic_simple": ({}, [3, 7, 13], 4),
    "majority": ({}, [1, 5, 13], 8),
    "stack_manipulation": ({}, [1, 4, 9, 13], 5),
    "modular_arithmetic_brackets": ({}, [3, 7, 12], 4),
    "solve_equation": ({"modulus": 2}, [5, 9, 14], 5),
    "reverse_string": ({}, [0, 2, 8, 12], 8),
    "duplicate_string": ({}, [0, 3, 9, 12], 8),
    "odds_first": ({}, [0, 2, 8, 12], 8),
    "marked_copy": ({}, [1, 5, 11], 8),
    "svo_sov": ({"vocab_size": 3}, [4, 8, 12], 6),
    "gender_conjugation": ({"vocab_size": 4}, [4, 7, 12], 5),
}
for _k in range(1, 7):
    CASES[f"dyck{_k}"] = ({}, [0, 2, 8, 14], {1: 8, 2: 6, 3: 4, 4: 4, 5: 3, 6: 3}[_k])

REQUIRED = {
    "reversal", "cumulative_xor", "delayed_xor", "parenthesis_prediction", "boolean_formula",
    "agreement", "marked_reversal", "unmarked_reversal", "padded_reversal", "dyck2",
    "hardest_cfl", "dyck1", "dyck3", "dyck4", "dyck5", "dyck6", "w_phi_wr", "w_wr_marked",
    "string_reversal", "sequence_copy", "sequence_reversal", "bigram_flip", "dyck", "parity",
    "modular_counter",
}


def test_registry_lists_every_task_and_each_case_is_tested():
    assert REQUIRED <= set(T.names())
    assert set(T.names()) == set(CASES)
    for name in T.names():
        t = T.task(name)
        assert t.paper and t.description and t.kind in ("recognise", "transduce")
        with pytest.raises(dataclasses.FrozenInstanceError):
            t.name = "x"  # type: ignore[misc]
    with pytest.raises(InputError, match="no task named 'nope'"):
        T.get("nope")


def test_registry_is_one_explicit_list_of_tasks_from_the_paper_modules():
    from pdanet.automata.tasks import registry

    listed = [t.name for t in registry.TASKS]
    assert len(set(listed)) == len(listed) and sorted(listed) == T.names()
    papers = {"hao2018", "grefenstette2015", "suzgun2019", "dusell2021", "hewitt2020", "folklore",
              "deletang2023", "butoi2024"}
    for t in registry.TASKS:
        assert T.task(t.name) is t
        for f in (t.machine_factory, t.sampler, t.reference, t.grammar):
            if f is None:
                continue
            module = getattr(f, "func", f).__module__.rsplit(".", 1)
            assert module[0] == "pdanet.automata.tasks", (t.name, f)
            assert module[1] in papers | {"sampling"}, (t.name, f)


def perturb(s: tuple, symbols: tuple, rng: np.random.Generator) -> list[tuple]:
    """Substitute, delete, insert and swap at random positions."""
    out = []
    if s:
        i = int(rng.integers(len(s)))
        out.append(s[:i] + (symbols[int(rng.integers(len(symbols)))],) + s[i + 1:])
        out.append(s[:i] + s[i + 1:])
        if len(s) > 1:
            j = int(rng.integers(len(s) - 1))
            out.append(s[:j] + (s[j + 1], s[j]) + s[j + 2:])
    i = int(rng.integers(len(s) + 1))
    out.append(s[:i] + (symbols[int(rng.integers(len(symbols)))],) + s[i:])
    return out


def _machine(name):
    params = CASES[name][0]
    return T.get(name, **params), T.reference(name, **params), params


@pytest.mark.parametrize("name", sorted(CASES))
def test_machine_agrees_with_reference_on_samples_and_perturbations(name):
    machine, ref, params = _machine(name)
    assert machine is not None
    rng = np.random.default_rng(sum(map(ord, name)))
    samples = T.sample(name, 40, CASES[name][1], rng, **params)
    symbols = tuple(machine.alphabet)
    positives = changed = 0
    for s in samples:
        expected = ref(s)
        # samples are in the task's language / the transduction's domain (parity and the
        # modular counter sample all bit strings: members and non-members)
        if name not in ("parity", "modular_counter"):
            assert expected not in (None, False), s
        assert T.apply(machine, s) == expected, s
        for p in perturb(s, symbols, rng):
            e = ref(p)
            changed += e != expected  # mostly non-members / outside the domain
            assert T.apply(machine, p) == e, p
        positives += 1
    assert positives == 40 and changed > 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_machine_agrees_with_reference_exhaustively_on_short_strings(name):
    machine, ref, _ = _machine(name)
    symbols = tuple(machine.alphabet)
    members = 0
    for n in range(CASES[name][2] + 1):
        for s in itertools.product(symbols, repeat=n):
            e = ref(s)
            members += e not in (None, False)
            assert T.apply(machine, s) == e, s
    assert members > 0 or name == "hardest_cfl"


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if T.task(n).kind == "transduce"])
def test_transducers_emit_the_reference_output_and_refuse_outside_the_domain(name):
    machine, ref, params = _machine(name)
    rng = np.random.default_rng(7)
    for s in T.sample(name, 10, CASES[name][1], rng, **params):
        steps = ref(s)
        if hasattr(machine, "transduce"):
            assert machine.transduce(s) == tuple(y for y in steps if y is not None)
        else:  # Mealy DFA: one output per step
            assert tuple(machine.outputs(s)[1:]) == steps
    if hasattr(machine, "transduce") and name not in ("cumulative_xor", "delayed_xor"):
        bad = next(s for n in range(1, 6) for s in itertools.product(tuple(machine.alphabet),
                                                                     repeat=n) if ref(s) is None)
        with pytest.raises(InputError, match="domain"):
            machine.transduce(bad)


@pytest.mark.parametrize("name", [n for n in sorted(CASES)
                                  if T.task(n).kind == "recognise" and n != "dyck"])
def test_batched_simulation_agrees_with_reference(name):
    machine, ref, params = _machine(name)
    rng = np.random.default_rng(11)
    strings = T.sample(name, 12, CASES[name][1], rng, **params)
    strings += [p for s in strings for p in perturb(s, tuple(machine.alphabet), rng)]
    ids, lengths = machine.encode(strings)
    out = machine.run_batch(ids, lengths)["output"]
    got = out[np.arange(len(strings)), lengths]
    assert [bool(x) for x in got] == [ref(s) for s in strings]


def test_dyck_km_task_is_the_existing_generator():
    m = T.get("dyck", k=3, m=4)
    assert isinstance(m, DyckKM) and (m.k, m.m) == (3, 4)
    for s in T.sample("dyck", 20, [8, 10], 0, k=3, m=4):
        assert T.reference("dyck", k=3, m=4)(s) and m.accepts(s)
        assert max(itertools.accumulate(1 if x in m.opens else -1 for x in s)) <= 4


# --- samplers ------------------------------------------------------------------------------------
def test_samplers_give_requested_lengths_and_are_reproducible():
    for name in sorted(CASES):
        params, lengths, _ = CASES[name]
        a = T.sample(name, 15, lengths, np.random.default_rng(5), **params)
        b = T.sample(name, 15, lengths, np.random.default_rng(5), **params)
        assert a == b
        assert all(len(s) in lengths for s in a)
        assert all(isinstance(s, tuple) for s in a)


def test_samplers_reject_impossible_lengths():
    with pytest.raises(InputError, match="odd"):
        T.sample("reversal", 3, 5, 0)
    with pytest.raises(InputError, match="no string of length 3"):
        T.sample("dyck2", 3, 3, 0)
    with pytest.raises(InputError, match="non-negative"):
        T.sample("parity", 3, [-1], 0)


@pytest.mark.parametrize("k, L", [(1, 8), (2, 6), (3, 4)])
def test_dyck_sampler_is_uniform_over_the_words_of_a_length(k, L):
    """Every Dyck-k word of length L (enumerated) is drawn, each about equally often."""
    words = [w for w in itertools.product(T.dyck_machine(k).alphabet.symbols, repeat=L)
             if T.dyck_reference(w, k)]
    assert len(words) == T.dyck_unambiguous_grammar(k).count(L)
    draws = 400 * len(words)
    freq = collections.Counter(T.sample(f"dyck{k}", draws, L, np.random.default_rng(k)))
    assert set(freq) == set(words)
    p = 1 / len(words)
    sd = (draws * p * (1 - p)) ** 0.5
    assert all(abs(freq[w] - draws * p) <= 5 * sd for w in words), freq


def test_task_grammars_agree_with_references():
    rng = np.random.default_rng(3)
    cases = [("dyck2", {}, "()[]", 6), ("marked_reversal", {}, "01#", 5),
             ("unmarked_reversal", {}, "01", 6), ("padded_reversal", {}, "01", 6),
             ("boolean_formula", {}, ("T", "F", "∨", "∧"), 5), ("w_phi_wr", {}, "abc#xyz", 4),
             ("hardest_cfl", {}, T.HARDEST_ALPHABET, 4),
             ("hardest_cfl", {"dollar": False}, T.HARDEST_ALPHABET_NO_DOLLAR, 4)]
    for name, params, alphabet, n in cases:
        g = T.grammar(name, **params)
        ref = T.reference(name, **params)
        for L in range(n + 1):
            for s in itertools.product(tuple(alphabet), repeat=L):
                r = ref(s)
                assert g.generates(s) == (r not in (None, False)), (name, s)
        # the paper's rejection sampler draws members too
        for _ in range(5):
            s = g.sample(rng, 0, 30) if name != "hardest_cfl" or params else \
                g.sample_length(rng, 12, weighted=True)
            assert ref(s) not in (None, False)


def test_hardest_cfl_reference_on_hand_made_examples():
    ref = T.reference("hardest_cfl", dollar=False)
    assert ref(()) and ref(tuple(",(,;,),;"))           # y1 = "(", y2 = ")"
    assert ref(tuple("(,[],);"))                        # x = "(", y = "[]", z = ")"
    assert not ref(tuple(",(,;"))                       # unbalanced
    assert ref(tuple(",),,(,;,),;"))                    # choose y1 = "(" (second segment)
    assert not ref(tuple(",(,")) and not ref(tuple(";"))
    pda = T.get("hardest_cfl", dollar=False)
    for s in (",(,;,),;", "(,[],);", ",(,;", ",),,(,;,),;"):
        assert pda.accepts(s) == ref(tuple(s))


def test_agreement_paper_grammar_and_machine():
    g = T.grammar("agreement")
    ref = T.reference("agreement")
    good = ["the", "lobster", "in", "the", "lobsters", "that", "have", "slept", "has"]
    bad = ["the", "lobster", "in", "the", "lobsters", "have"]
    obj = ["the", "lobsters", "that", "the", "lobster", "has", "devoured", "have"]
    assert ref(good) and not ref(bad) and ref(obj)
    assert not ref(["the", "lobster", "that", "have", "slept", "has"])
    m = T.get("agreement")
    assert m.accepts(good) and not m.accepts(bad) and m.accepts(obj)
    # rejection and depth-bounded samplers of the paper's grammar give sentences
    rng = np.random.default_rng(0)
    for _ in range(10):
        assert ref(g.sample(rng, 1, 25)) and ref(g.sample_depth(rng, 8))


def test_sequence_copy_is_a_queue_transducer_unless_bounded():
    from pdanet.automata.store import StoreTransducer

    default = T.get("sequence_copy", vocab_size=2)
    assert isinstance(default, StoreTransducer) and default.store == "queue"
    assert default.outputs(("s0", "s1", "#", "#"))[-2:] == ["s0", "s1"]
    assert "queue" in T.task("sequence_copy").description
    m = T.get("sequence_copy", vocab_size=2, max_length=2)
    assert isinstance(m, DFA)
    assert T.apply(m, ("s0", "s1", "#", "#")) == ("#", "#", "s0", "s1")
    assert T.apply(m, ("s0", "s1", "s0", "#", "#", "#")) is None  # longer than the bound
    with pytest.raises(InputError, match="too many states"):
        T.get("sequence_copy", vocab_size=128, max_length=3)


def test_task_machines_do_not_depend_on_the_hash_seed():
    """Every task's machine lists its states in the same order whatever PYTHONHASHSEED is (the
    compiled units follow that order, so weights would otherwise change from run to run)."""
    import os
    import subprocess
    import sys

    code = ("import hashlib; from pdanet.automata import tasks as T\n"
            "for n in T.names():\n"
            "    m = T.get(n)\n"
            "    print(n, hashlib.md5(repr(getattr(m, 'states', None)).encode()).hexdigest())")
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}, timeout=300, check=True
                           ).stdout for seed in ("1", "2")]
    assert outs[0] and outs[0] == outs[1]

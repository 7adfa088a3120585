"""Machines are immutable once built, and compare and hash by their structure.

Registry-wide: every concrete `Machine` subclass of pdanet (and `NFA`, `WeightedPDT`) refuses
attribute assignment and deletion after construction with `FrozenMachineError`, and equal machines
built separately are equal with equal hashes.
"""

from __future__ import annotations

import copy
import inspect
import pickle
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
import pdanet.automata  # registers every machine class
from pdanet.automata.alphabet import BOTTOM as Z
from pdanet.automata.alphabet import EPSILON as E
from pdanet.automata.base import Machine
from pdanet.automata.probabilistic import PFSA, marked_reversal
from pdanet.errors import AutomatonError, FrozenMachineError

TASKS = [n for n in pn.tasks.names() if pn.tasks.get(n) is not None]


def _dfa(accepting=(0,)):
    return pn.DFA([0, 1], "ab", {(0, "a"): 1, (1, "b"): 0}, 0, accepting)


def _nfa(accepting=(1,)):
    return pn.NFA([0, 1], "ab", {(0, "a"): {0, 1}, (1, "b"): 0}, 0, accepting)


def _dpda(push="A"):
    return pn.DPDA(["p", "q"], "ab", "AB", {
        ("p", "a", Z): ("p", (push, Z)), ("p", "a", push): ("p", (push, push)),
        ("p", "b", push): ("q", ()), ("q", "b", push): ("q", ()),
    }, "p", acceptance="empty_stack")


def _pda(final="f"):
    trans = {("p", "a", Z): {("p", ("a", Z))}, ("p", E, Z): {("f", (Z,))}}
    return pn.PDA(["p", "f", "g"], "ab", "ab", trans, "p", {final})


def _dpdt(out="x"):
    return pn.DPDT(["q"], "ab", "xy", "A", {("q", "a", Z): ("q", out, ("A", Z))}, "q")


def _wpda(w=0.5):
    return pn.WeightedPDA([0], "x", "a", {(0, Z, "x", 0, "push", "a"): w}, 0)


def _wpdt(out="x"):
    return pn.WeightedPDT([0], "x", "xy", "a", {(0, Z, "x", 0, "push", "a", out): 0.5}, 0)


def _task(name):
    return lambda: pn.tasks.get(name)


# (build, build a different machine of the same class)
EXAMPLES = {
    "DFA": (_dfa, lambda: _dfa(accepting=(1,))),
    "NFA": (_nfa, lambda: _nfa(accepting=(0,))),
    "DPDA": (_dpda, lambda: _dpda(push="B")),
    "PDA": (_pda, lambda: _pda(final="g")),
    "DPDT": (_dpdt, lambda: _dpdt(out="y")),
    "WeightedPDA": (_wpda, lambda: _wpda(w=0.25)),
    "WeightedPDT": (_wpdt, lambda: _wpdt(out="y")),
    "DyckKM": (lambda: pn.DyckKM(2, 3), lambda: pn.DyckKM(2, 4)),
    "BoundedPDA": (lambda: _dpda().bounded(3), lambda: _dpda().bounded(4)),
}
EXAMPLES["StoreTransducer"] = (lambda: pn.tasks.get("sequence_copy", store="queue"),
                               lambda: pn.tasks.get("sequence_copy", store="deque"))
EXAMPLES["PFSA"] = (
    lambda: PFSA([0, 1], "ab", {(0, "a"): (1, Fraction(1, 2)), (1, "b"): (0, 1)}, 0,
                 {0: Fraction(1, 2)}),
    lambda: PFSA([0, 1], "ab", {(0, "a"): (1, Fraction(1, 3)), (1, "b"): (0, 1)}, 0,
                 {0: Fraction(2, 3)}))
EXAMPLES["ProbabilisticDPDA"] = (marked_reversal, lambda: marked_reversal(Fraction(1, 3)))
EXAMPLES["BoundedPDPDA"] = (lambda: marked_reversal().bounded(3, "renormalise"),
                            lambda: marked_reversal().bounded(3))


def _pda_lm(task="marked_reversal"):
    from pdanet.constructions.ns_lm import PDALanguageModel, dusell_lm_machine

    return PDALanguageModel(dusell_lm_machine(task)[0])


EXAMPLES["PDALanguageModel"] = (_pda_lm, lambda: _pda_lm("dyck"))


def _next_sets(task="dyck2"):
    from pdanet.models.suzgun import NextSetMachine

    return NextSetMachine(pn.tasks.get(task))


EXAMPLES["NextSetMachine"] = (_next_sets, lambda: _next_sets("dyck3"))
for _name in TASKS:          # a class met only through a task: equality of two builds only
    EXAMPLES.setdefault(type(pn.tasks.get(_name)).__name__, (_task(_name), None))


def _concrete_machine_classes() -> set[type]:
    found: set[type] = set()
    todo = [Machine]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("pdanet.") and not inspect.isabstract(sub):
                found.add(sub)
    return found


def _instances():
    out = [(name, build()) for name, (build, _) in EXAMPLES.items()]
    out += [(f"task {n}", pn.tasks.get(n)) for n in TASKS]
    return out


INSTANCES = _instances()
IDS = [name for name, _ in INSTANCES]


def test_every_machine_class_has_an_example():
    names = {cls.__name__ for cls in _concrete_machine_classes()}
    assert names <= set(EXAMPLES), f"add an example of {sorted(names - set(EXAMPLES))}"


def test_frozen_machine_error_is_an_automaton_error():
    assert issubclass(FrozenMachineError, AutomatonError)
    assert "FrozenMachineError" in pn.errors.__all__


@pytest.mark.parametrize("m", [m for _, m in INSTANCES], ids=IDS)
def test_attributes_cannot_be_set_or_deleted(m):
    public = "alphabet" if hasattr(m, "alphabet") else "output_alphabet"
    before = getattr(m, public)
    with pytest.raises(FrozenMachineError, match=f"'{public}'.*{type(m).__name__}"):
        setattr(m, public, None)
    with pytest.raises(FrozenMachineError, match=f"delete attribute '{public}'"):
        delattr(m, public)
    with pytest.raises(FrozenMachineError, match="'name'"):
        m.name = "renamed"
    with pytest.raises(FrozenMachineError, match="set attribute 'brand_new'"):
        m.brand_new = 1
    with pytest.raises(FrozenMachineError, match="delete attribute 'brand_new'"):
        del m.brand_new
    assert getattr(m, public) is before and not hasattr(m, "brand_new")


@pytest.mark.parametrize("m", [m for _, m in INSTANCES], ids=IDS)
def test_copies_are_equal_frozen_and_hash_alike(m):
    for c in (copy.copy(m), copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        assert c == m and hash(c) == hash(m)
        with pytest.raises(FrozenMachineError):
            c.name = "renamed"
    assert "_hash" not in pickle.loads(pickle.dumps(m)).__dict__   # string hashes are per process


@pytest.mark.parametrize("name", list(EXAMPLES), ids=list(EXAMPLES))
def test_equal_when_built_alike_and_different_when_changed(name):
    build, changed = EXAMPLES[name]
    a, b = build(), build()
    assert a is not b and a == b and hash(a) == hash(b) and a.__ne__(b) is False
    assert len({a, b}) == 1
    if changed is not None:
        c = changed()
        assert type(c) is type(a) and c != a and a != c
        assert len({a, c}) == 2


def test_different_types_are_never_equal():
    assert _dfa() != _nfa() and _dpda() != _dpda().bounded(3)
    assert _dfa() != "not a machine"


def test_stale_cache_scenario_is_refused():
    d = _dfa()
    assert d.accepting_mask.tolist() == [True, False]          # a cached mask exists
    with pytest.raises(FrozenMachineError, match="construct a new DFA"):
        d.accepting = frozenset({1})
    ids, lengths = d.encode(["", "ab", "a"])
    assert d.run_batch(ids, lengths)["output"][:, -1].tolist() == [d.accepts(s) for s in
                                                                  ["", "ab", "a"]]


def test_cached_properties_and_caches_still_work():
    d = _dfa()
    assert d.accepting_mask is d.accepting_mask
    b = _dpda().bounded(3)
    assert b.to_dfa() is b.to_dfa()
    n = _nfa()
    assert n.determinise() == n.determinise()


DFAS = st.integers(1, 4).flatmap(lambda n: st.tuples(
    st.just(n),
    st.dictionaries(st.tuples(st.integers(0, n - 1), st.sampled_from("ab")),
                    st.integers(0, n - 1)),
    st.frozensets(st.integers(0, n - 1)),
))


@settings(max_examples=200, deadline=None)
@given(DFAS, DFAS)
def test_equal_random_dfas_hash_alike(x, y):
    a = pn.DFA(range(x[0]), "ab", x[1], 0, x[2])
    b = pn.DFA(range(y[0]), "ab", y[1], 0, y[2])
    a2 = pn.DFA(range(x[0]), "ab", dict(reversed(list(x[1].items()))), 0, set(x[2]))
    assert a == a2 and hash(a) == hash(a2)
    assert (a == b) == (x == y)
    if a == b:
        assert hash(a) == hash(b)

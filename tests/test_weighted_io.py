"""Weighted PDAs and PDTs in machine files (kinds ``wpda``/``wpdt``) and drawings: round trips on
random machines in every semiring (exact weights kept exact, ε-arcs), the file's rows checked
against the machine's transitions, string weights of every short string unchanged, typed errors
naming the bad field, and diagrams that show the weights."""

from __future__ import annotations

import io as _io
import itertools
import json
import math
import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata import BOTTOM, EPSILON
from pdanet.automata import io as mio
from pdanet.automata.draw import state_graph, to_networkx
from pdanet.automata.weighted import WeightedPDA, WeightedPDT, hardest_cfl_realtime
from pdanet.automata.weighted_epsilon import string_weight
from pdanet.cli import main
from pdanet.errors import AutomatonError, SpecError

STACK = ("A", "B")
SEMIRINGS = ("real", "rational", "log", "viterbi", "tropical", "boolean")


def _ops(x, k):
    """The valid (op, y) of a top x with k stack symbols."""
    ys = STACK[:k]
    out = [("push", y) for y in ys]
    if x is BOTTOM:
        return out + [("replace", BOTTOM)]
    return out + [("replace", y) for y in ys] + [("pop", None)]


def _weight(rng: random.Random, semiring: str):
    if semiring == "real":
        return rng.choice([0.0, 1.0, rng.random(), rng.uniform(0, 5)])
    if semiring == "rational":
        return Fraction(rng.randint(0, 7), rng.randint(1, 9))
    if semiring in ("log", "viterbi"):
        return rng.choice([-math.inf, 0.0, rng.uniform(-4, 2)])
    if semiring == "tropical":
        return rng.choice([math.inf, 0.0, rng.uniform(-2, 4)])
    return rng.random() < 0.7


def _random_trans(rng, Q, k, semiring, out_alphabet=None):
    tops = [BOTTOM] + list(STACK[:k])
    trans = {}
    for a in "ab":
        for q in range(Q):
            for x in tops:
                for r in range(Q):
                    for op, y in _ops(x, k):
                        if rng.random() < 0.25:
                            key = (q, x, a, r, op, y)
                            if out_alphabet is not None:
                                n = rng.randint(0, 2)
                                key += (tuple(rng.choice(out_alphabet) for _ in range(n)),)
                            trans[key] = _weight(rng, semiring)
    return trans


def _random_wpda(seed: int, semiring: str, eps: bool) -> WeightedPDA:
    rng = random.Random(seed)
    Q, k = rng.randint(1, 3), rng.randint(1, 2)
    trans = _random_trans(rng, Q, k, semiring)
    if eps:  # ε-arcs that move to a higher state and never push: finitely many ε-runs
        tops = [BOTTOM] + list(STACK[:k])
        for _ in range(rng.randint(1, 2)):
            q = rng.randrange(Q)
            x = rng.choice(tops)
            op, y = rng.choice([o for o in _ops(x, k) if o[0] != "push"])
            trans[(q, x, EPSILON, min(q + 1, Q - 1), op, y)] = (
                Fraction(1, rng.randint(2, 5)) if semiring == "rational" else
                _weight(rng, semiring))
    acc = rng.choice([None, [0], [Q - 1], []])
    name = rng.choice([None, "w", "wpda ⊗"])
    return WeightedPDA(range(Q), "ab", STACK[:k], trans, 0, semiring, accepting=acc,
                       empty_stack=rng.random() < 0.4, name=name)


def _key_of_row(row: dict, kind: str) -> tuple:
    """A transition key rebuilt from a file row, independently of the reader."""
    def sym(v):
        return EPSILON if v in ("ε", None) else BOTTOM if v == "⊥" else v

    key = (row["source"], sym(row["top"]), sym(row["symbol"]), row["target"], row["op"],
           sym(row["operand"]) if row["op"] != "pop" else None)
    if kind == "wpdt":
        o = row["output"]
        key += (tuple(o) if isinstance(o, list) else () if o == "ε" else (o,),)
    return key


def _value_of_row(v, semiring: str):
    if semiring == "boolean":
        assert isinstance(v, bool)
        return v
    if semiring == "rational":
        assert isinstance(v, str)  # exact weights are written "n/d"
        return Fraction(v)
    if isinstance(v, str):
        assert v in ("inf", "-inf")
        return float(v)
    assert isinstance(v, float)  # float weights are JSON numbers
    return v


def _check_rows(machine, text: str, kind: str) -> None:
    """Every row of the file is a transition of the machine with its weight, and back."""
    d = json.loads(text)
    assert d["kind"] == kind and d["semiring"] == _pda(machine).semiring.name
    got = {_key_of_row(row, kind): _value_of_row(row["weight"], d["semiring"])
           for row in d["transitions"]}
    assert len(got) == len(d["transitions"])
    want = {k: _pda(machine).semiring.check(w, "test") for k, w in machine.transitions.items()}
    assert got == want


def _pda(machine):
    return machine.pda if isinstance(machine, WeightedPDT) else machine


def _strings(n: int):
    for length in range(n + 1):
        yield from itertools.product("ab", repeat=length)


def _takes_epsilon() -> bool:
    """Whether WeightedPDA accepts ε-arcs (when it does not, only real-time machines are drawn)."""
    try:
        WeightedPDA(["p"], "a", [], {("p", BOTTOM, EPSILON, "p", "replace", BOTTOM): 0.5}, "p")
    except AutomatonError:
        return False
    return True


EPS_OK = _takes_epsilon()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), semiring=st.sampled_from(SEMIRINGS),
       eps=st.booleans() if EPS_OK else st.just(False))
def test_wpda_round_trip(seed, semiring, eps, tmp_path_factory):
    m = _random_wpda(seed, semiring, eps)
    text = mio.dumps(m)
    _check_rows(m, text, "wpda")
    back = mio.loads(text)
    assert back == m and mio.dumps(back) == text
    assert back.accepting == m.accepting and back.empty_stack == m.empty_stack
    assert back.semiring is m.semiring and back.name == m.name
    path = tmp_path_factory.mktemp("w") / "m.json"
    mio.save(m, path)
    assert pn.load(path) == m and mio.kind_of(m) == "wpda"
    assert mio.from_dict(mio.to_dict(m)) == m
    # every string up to length 3 (real-time: Lang's chart; with ε-arcs: exact closure)
    if m.is_realtime:
        for s in _strings(3):
            w0, w1 = m.string_sum(s), back.string_sum(s)
            assert w0 == w1 or (math.isnan(w0) and math.isnan(w1))
    elif semiring == "rational":
        for s in _strings(2):
            assert string_weight(m, s) == string_weight(back, s)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), semiring=st.sampled_from(("real", "rational", "log")))
def test_wpdt_round_trip(seed, semiring):
    rng = random.Random(seed)
    Q, k = rng.randint(1, 3), rng.randint(1, 2)
    trans = _random_trans(rng, Q, k, semiring, out_alphabet=("x", "y"))
    t = WeightedPDT(range(Q), "ab", "xy", STACK[:k], trans, 0, semiring,
                    accepting=rng.choice([None, [0]]), empty_stack=rng.random() < 0.4,
                    name=rng.choice([None, "t"]))
    text = mio.dumps(t)
    _check_rows(t, text, "wpdt")
    back = mio.loads(text)
    assert isinstance(back, WeightedPDT) and back == t and mio.dumps(back) == text
    assert mio.kind_of(t) == "wpdt"
    for s in _strings(2):
        assert back.total_weight(s) == t.total_weight(s)
        for v in itertools.chain.from_iterable(itertools.product("xy", repeat=n)
                                               for n in range(3)):
            assert back.weight(s, v) == t.weight(s, v)


@pytest.mark.skipif(not EPS_OK, reason="WeightedPDA takes no ε-arcs")
def test_exact_weights_and_epsilon_text():
    a = Fraction(3, 8)
    m = WeightedPDA(["p", "q"], "ab", ["A"], {
        ("p", BOTTOM, "a", "p", "push", "A"): a,
        ("p", "A", "b", "q", "pop", None): Fraction(1, 3),
        ("q", BOTTOM, EPSILON, "p", "replace", BOTTOM): Fraction(1, 2),
    }, "p", "rational", accepting=["q"], empty_stack=True, name="exact")
    text = mio.dumps(m)
    rows = json.loads(text)["transitions"]
    assert {"source": "p", "symbol": "a", "top": "⊥", "target": "p", "op": "push",
            "operand": "A", "weight": "3/8"} in rows
    assert {"source": "q", "symbol": "ε", "top": "⊥", "target": "p", "op": "replace",
            "operand": "⊥", "weight": "1/2"} in rows
    assert any(r["op"] == "pop" and "operand" not in r for r in rows)
    back = mio.loads(text)
    assert back == m and back.transitions[("p", BOTTOM, "a", "p", "push", "A")] == a
    assert isinstance(back.transitions[("p", BOTTOM, "a", "p", "push", "A")], Fraction)
    # "n/d" and integers are read in any float semiring too; null accepting = every run counts
    d = json.loads(text)
    d.update(semiring="real", accepting=None)
    d["transitions"][0]["weight"] = 2
    real = mio.from_dict(d)
    assert real.semiring.name == "real" and real.accepting is None
    assert sorted(real.transitions.values()) == [1 / 3, 0.5, 2.0]
    # the hardest CFL machine of the weighted module round-trips
    h = hardest_cfl_realtime()
    assert mio.loads(mio.dumps(h)) == h


def _base(kind: str = "wpda") -> dict:
    d = {"format": 1, "kind": kind, "semiring": "real", "states": ["p", "q"],
         "input_alphabet": ["a"], "stack_alphabet": ["A"], "start": "p", "accepting": ["q"],
         "empty_stack": False,
         "transitions": [{"source": "p", "symbol": "a", "top": "⊥", "target": "q",
                          "op": "push", "operand": "A", "weight": 0.5}]}
    if kind == "wpdt":
        d["output_alphabet"] = ["x"]
        d["transitions"][0]["output"] = "x"
    return d


def _row(**fields) -> dict:
    row = dict(_base()["transitions"][0])
    row.update(fields)
    return {k: v for k, v in row.items() if v is not _DROP}


_DROP = object()
T0 = "$.transitions[0]"


@pytest.mark.parametrize("change,path,message", [
    ({"semiring": "complex"}, "$.semiring", "complex"),
    ({"empty_stack": 1}, "$.empty_stack", "true or false"),
    ({"accepting": ["r"]}, "$.accepting[0]", "unknown state"),
    ({"accepting": "q"}, "$.accepting", "JSON list"),
    ({"colour": "red"}, "$.colour", "unknown field"),
    ({"transitions": [_row(weight=-1.0)]}, f"{T0}.weight", "transition ('p', ⊥, 'a', 'q'"),
    ({"transitions": [_row(weight="1/0")]}, f"{T0}.weight", "denominator zero"),
    ({"transitions": [_row(weight=True)]}, f"{T0}.weight", "a boolean"),
    ({"transitions": [_row(weight="heavy")]}, f"{T0}.weight", "'heavy'"),
    ({"transitions": [_row(weight=[1])]}, f"{T0}.weight", "a list"),
    ({"transitions": [_row(weight="inf")]}, f"{T0}.weight", "not finite"),
    ({"transitions": [_row(op="shift")]}, f"{T0}.op", "'shift'"),
    ({"transitions": [_row(operand=_DROP)]}, f"{T0}.operand", "missing"),
    ({"transitions": [_row(operand="⊥")]}, f"{T0}.operand", "⊥ is not allowed"),
    ({"transitions": [_row(operand="Z")]}, f"{T0}.operand", "unknown stack symbol"),
    ({"transitions": [_row(op="pop", operand=_DROP)]}, f"{T0}.op", "cannot be popped"),
    ({"transitions": [_row(op="pop", top="A", operand="A")]}, f"{T0}.operand", "no operand"),
    ({"transitions": [_row(op="replace", operand="A")]}, f"{T0}.operand", "replaced only"),
    ({"transitions": [_row(top="A", op="replace", operand="⊥")]}, f"{T0}.operand",
     "replaced only"),
    ({"transitions": [_row(symbol="b")]}, f"{T0}.symbol", "unknown input symbol"),
    ({"transitions": [_row(top="Z")]}, f"{T0}.top", "unknown stack symbol"),
    ({"transitions": [_row(weight=_DROP)]}, f"{T0}.weight", "missing"),
    ({"transitions": [_row(), _row(weight=0.25)]}, "$.transitions[1]", "second row"),
])
def test_bad_wpda_files(change, path, message):
    d = _base()
    d.update(change)
    with pytest.raises(SpecError) as info:
        mio.from_dict(d, source="bad.json")
    assert info.value.path == path
    assert message in str(info.value) and "bad.json" in str(info.value)


@pytest.mark.parametrize("semiring,weight,message", [
    ("boolean", 1, "true or false"),
    ("rational", "inf", "not a number"),
    ("rational", "-1/2", "negative"),
    ("log", "+inf", "+inf"),
    ("tropical", "-inf", "-inf"),
    ("real", "1e999", "not a number"),
])
def test_bad_weights_per_semiring(semiring, weight, message):
    d = _base()
    d["semiring"] = semiring
    d["transitions"][0]["weight"] = weight
    with pytest.raises(SpecError) as info:
        mio.from_dict(d)
    assert info.value.path == f"{T0}.weight" and message in str(info.value)
    assert "transition ('p', ⊥, 'a', 'q', 'push', 'A')" in str(info.value)


def test_infinite_weights_round_trip():
    for semiring, zero in (("log", "-inf"), ("viterbi", "-inf"), ("tropical", "inf")):
        d = _base()
        d["semiring"] = semiring
        d["transitions"][0]["weight"] = zero
        m = mio.from_dict(d)
        assert m.transitions[("p", BOTTOM, "a", "q", "push", "A")] == float(zero)
        text = mio.dumps(m)
        assert json.loads(text)["transitions"][0]["weight"] == zero and mio.loads(text) == m
    d = _base()
    d["semiring"] = "boolean"
    d["transitions"][0]["weight"] = False
    m = mio.from_dict(d)
    assert json.loads(mio.dumps(m))["transitions"][0]["weight"] is False


def test_bad_wpdt_files():
    d = _base("wpdt")
    assert isinstance(mio.from_dict(d), WeightedPDT)
    for output, path in ((["x", "z"], f"{T0}.output[1]"), ("z", f"{T0}.output"),
                         (3, f"{T0}.output")):
        d = _base("wpdt")
        d["transitions"][0]["output"] = output
        with pytest.raises(SpecError) as info:
            mio.from_dict(d)
        assert info.value.path == path
    d = _base("wpdt")
    del d["output_alphabet"]
    with pytest.raises(SpecError, match="output_alphabet"):
        mio.from_dict(d)
    d = _base("wpdt")
    del d["transitions"][0]["output"]
    with pytest.raises(SpecError) as info:
        mio.from_dict(d)
    assert info.value.path == f"{T0}.output"
    # an ε input symbol: read, and the transducer's own rule decides (refused at the row, or kept)
    d = _base("wpdt")
    d["transitions"].append(dict(d["transitions"][0], symbol="ε", target="p"))
    try:
        t = mio.from_dict(d)
    except SpecError as exc:
        assert exc.path == "$.transitions[1]" and "ε" in str(exc)
    else:
        assert mio.loads(mio.dumps(t)) == t


@pytest.mark.skipif(not EPS_OK, reason="WeightedPDA takes no ε-arcs")
def test_draw_shows_weights(tmp_path):
    m = WeightedPDA(["p", "q"], "ab", ["A"], {
        ("p", BOTTOM, "a", "p", "push", "A"): Fraction(3, 8),
        ("p", "A", "b", "q", "pop", None): Fraction(1, 3),
        ("q", BOTTOM, EPSILON, "p", "replace", BOTTOM): Fraction(1, 2),
    }, "p", "rational", accepting=["q"], empty_stack=True, name="exact")
    src = pn.draw(m).source
    for label in ("a, ⊥ → push A / 3/8", "b, A → pop / 1/3", "ε, ⊥ → replace ⊥ / 1/2"):
        assert label in src, label
    assert "exact (rational weights, empty stack)" in src
    g = state_graph(m)
    assert g.kind == "wpda" and g.accepting == frozenset({"q"})
    edges = to_networkx(m).edges(data=True)
    assert {(u, v, e["weight"], e["op"]) for u, v, e in edges} >= {
        ("p", "p", Fraction(3, 8), "push"), ("p", "q", Fraction(1, 3), "pop")}
    real = WeightedPDA(["p"], "a", ["A"], {("p", BOTTOM, "a", "p", "push", "A"): 0.123456},
                       "p", accepting=None)
    assert "a, ⊥ → push A / 0.1235" in pn.draw(real).source
    assert state_graph(real).accepting == frozenset({"p"})  # every run counts
    t = WeightedPDT(["p"], "a", "xy", ["A"], {("p", BOTTOM, "a", "p", "push", "A", ("x", "y")):
                                             0.5, ("p", "A", "a", "p", "pop", None, ()): 2.0},
                    "p")
    src = pn.draw(t).source
    assert "a : xy, ⊥ → push A / 0.5" in src and "a : ε, A → pop / 2" in src
    # the command line draws a saved file
    path = tmp_path / "w.json"
    mio.save(m, path)
    out = _io.StringIO()
    assert main(["draw", str(path)], out=out) == 0
    assert "a, ⊥ → push A / 3/8" in out.getvalue()

"""Machine files: JSON round trips for every kind, SpecError paths, JFLAP import."""

from __future__ import annotations

import copy
import itertools
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.bounded import DyckKM
from pdanet.automata.dfa import DFA
from pdanet.automata.store import StoreTransducer
from pdanet.automata.io import (
    FORMAT_VERSION,
    dumps,
    from_dict,
    load,
    load_jflap,
    loads,
    save,
    to_dict,
)
from pdanet.errors import InputError, SpecError

DATA = Path(__file__).parent / "data"


def _optional(module: str, name: str):
    mod = pytest.importorskip(f"pdanet.automata.{module}")
    if not hasattr(mod, name):
        pytest.skip(f"pdanet.automata.{module}.{name} not available")
    return getattr(mod, name)


def strings(alphabet, max_len):
    for n in range(max_len + 1):
        yield from itertools.product(alphabet, repeat=n)


# --------------------------------------------------------------------------------------------
# random DFAs and Mealy machines
# --------------------------------------------------------------------------------------------
@st.composite
def dfas(draw):
    n = draw(st.integers(1, 5))
    named = draw(st.booleans())
    states = [f"s{i}" for i in range(n)] if named else list(range(n))
    states = draw(st.permutations(states))
    alphabet = draw(st.sampled_from(["ab", "abc", "01", ["x", "yy", "zzz"], [0, 1, 2]]))
    alphabet = list(alphabet)
    trans = {}
    for q in states:
        for a in alphabet:
            if draw(st.booleans()) or draw(st.booleans()):
                trans[(q, a)] = draw(st.sampled_from(states))
    start = draw(st.sampled_from(states))
    accepting = draw(st.sets(st.sampled_from(states)))
    name = draw(st.one_of(st.none(), st.text("abc-_ ", min_size=1, max_size=6)))
    mode = draw(st.sampled_from(["accept", "next_set", "mealy"]))
    if mode == "mealy":
        outs = draw(st.sampled_from([["0", "1"], ["u", "vv"], [7, 8]]))
        outputs = {key: draw(st.sampled_from(outs)) for key in trans}
        return DFA(states, alphabet, trans, start, accepting, outputs=outputs,
                   output_alphabet=outs, name=name)
    return DFA(states, alphabet, trans, start, accepting, output_kind=mode, name=name)


@settings(max_examples=150)
@given(dfas())
def test_dfa_round_trip(machine):
    data = to_dict(machine)
    assert data["format"] == FORMAT_VERSION
    assert data["kind"] == ("mealy" if machine.is_mealy else "dfa")
    again = loads(dumps(machine))
    assert again == machine
    assert again.name == machine.name
    # the JSON text is plain JSON and survives a generic JSON round trip
    assert from_dict(json.loads(json.dumps(data))) == machine
    for w in strings(list(machine.alphabet), 3):
        assert again.outputs(w) == machine.outputs(w)


def test_save_load_file(tmp_path):
    m = DFA(["p", "q"], "ab", {("p", "a"): "q", ("q", "b"): "p"}, "p", {"p"},
            outputs={("p", "a"): "x", ("q", "b"): "y"}, name="flip")
    path = tmp_path / "m.json"
    save(m, path)
    text = path.read_text(encoding="utf-8")
    assert json.loads(text)["kind"] == "mealy"
    assert load(path) == m
    assert load(str(path)).name == "flip"


def test_dyck_round_trip(tmp_path):
    for k, m in [(1, 1), (2, 3), (100000, 3)]:
        d = DyckKM(k, m)
        assert to_dict(d) == {"format": 1, "kind": "dyck", "k": k, "m": m}
        save(d, tmp_path / "d.json")
        assert load(tmp_path / "d.json") == d


def test_tuple_states_are_lists():
    m = DFA([(0, "x"), (1, ("y", 2))], "a", {((0, "x"), "a"): (1, ("y", 2))}, (0, "x"),
            [(1, ("y", 2))])
    data = to_dict(m)
    assert data["states"] == [[0, "x"], [1, ["y", 2]]]
    assert data["transitions"][0]["target"] == [1, ["y", 2]]
    assert loads(dumps(m)) == m


def test_unsavable_values():
    m = DFA([frozenset({0}), 1], "a", {(1, "a"): 1}, 1)
    with pytest.raises(InputError, match=r"state frozenset\(\{0\}\)"):
        to_dict(m)
    with pytest.raises(InputError, match="reserved"):
        to_dict(DFA([0], ["ε"], {}, 0))
    with pytest.raises(InputError, match="no file format"):
        to_dict(object())


# --------------------------------------------------------------------------------------------
# broken files: the error names the JSON path of the bad field
# --------------------------------------------------------------------------------------------
GOOD = {
    "format": 1, "kind": "dfa", "states": ["q0", "q1"], "alphabet": ["a", "b"], "start": "q0",
    "accepting": ["q1"],
    "transitions": [{"source": "q0", "symbol": "a", "target": "q1"},
                    {"source": "q1", "symbol": "b", "target": "q0"}],
}


def _broken(edit):
    d = copy.deepcopy(GOOD)
    edit(d)
    return d


BROKEN = [
    (lambda d: d.pop("format"), "$.format", "missing"),
    (lambda d: d.update(format=2), "$.format", "unsupported format"),
    (lambda d: d.update(kind="turing"), "$.kind", "expected one of"),
    (lambda d: d.pop("states"), "$.states", "missing required field"),
    (lambda d: d.update(states="q0 q1"), "$.states", "expected a JSON list, got a string"),
    (lambda d: d["states"].append("q0"), "$.states[2]", "declared twice"),
    (lambda d: d["states"].append(1.5), "$.states[2]", "got a number"),
    (lambda d: d["alphabet"].append("ε"), "$.alphabet[2]", "reserved"),
    (lambda d: d["alphabet"].append(" c"), "$.alphabet[2]", "whitespace"),
    (lambda d: d.update(start="q9"), "$.start", "unknown state 'q9'"),
    (lambda d: d["accepting"].append("q7"), "$.accepting[1]", "unknown state 'q7'"),
    (lambda d: d["transitions"][1].update(target="q5"), "$.transitions[1].target",
     "unknown state 'q5'"),
    (lambda d: d["transitions"][0].update(symbol="c"), "$.transitions[0].symbol",
     "unknown symbol 'c'"),
    (lambda d: d["transitions"][0].update(symbol=None), "$.transitions[0].symbol",
     "ε is not allowed"),
    (lambda d: d["transitions"][1].pop("source"), "$.transitions[1].source", "missing"),
    (lambda d: d["transitions"][0].update(tagret="q1"), "$.transitions[0].tagret",
     "unknown field"),
    (lambda d: d["transitions"].append({"source": "q0", "symbol": "a", "target": "q0"}),
     "$.transitions[2]", "use kind 'nfa'"),
    (lambda d: d["transitions"].append(["q0", "a", "q0"]), "$.transitions[2]",
     "expected a JSON object, got a list"),
    (lambda d: d.update(output_kind="symbol"), "$.output_kind", "expected one of"),
    (lambda d: d.update(name=3), "$.name", "expected a string"),
    (lambda d: d.update(extra=1), "$.extra", "unknown field"),
]


@pytest.mark.parametrize("edit, path, fragment", BROKEN)
def test_spec_error_paths(edit, path, fragment):
    data = _broken(edit)
    with pytest.raises(SpecError) as info:
        from_dict(data)
    assert info.value.path == path
    assert fragment in str(info.value)
    # the unbroken file loads and behaves as written
    good = from_dict(copy.deepcopy(GOOD))
    assert good.accepts("a") and not good.accepts("ab") and good.accepts("aba")


def test_spec_error_mealy_and_dyck():
    mealy = {"format": 1, "kind": "mealy", "states": [0], "alphabet": ["a"], "start": 0,
             "output_alphabet": ["x"],
             "transitions": [{"source": 0, "symbol": "a", "target": 0, "output": "y"}]}
    with pytest.raises(SpecError) as info:
        from_dict(mealy)
    assert info.value.path == "$.transitions[0].output"
    mealy["transitions"][0]["output"] = "x"
    assert from_dict(mealy).outputs("aa") == [None, "x", "x"]
    with pytest.raises(SpecError) as info:
        from_dict({"format": 1, "kind": "dyck", "k": 2, "m": 0})
    assert info.value.path == "$.m"
    with pytest.raises(SpecError) as info:
        from_dict({"format": 1, "kind": "dyck", "k": "2", "m": 1})
    assert info.value.path == "$.k"
    with pytest.raises(SpecError) as info:
        from_dict([1, 2])
    assert info.value.path == "$"


def test_malformed_json_line_and_column(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "format": 1,\n  "kind": "dfa",,\n}\n', encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load(path)
    assert info.value.path == "$"
    assert "line 3, column 17" in str(info.value)
    assert str(path) in str(info.value)
    with pytest.raises(InputError, match="does not exist"):
        load(tmp_path / "missing.json")


# --------------------------------------------------------------------------------------------
# JFLAP
# --------------------------------------------------------------------------------------------
def test_jflap_dfa():
    m = load_jflap(DATA / "even_a.jff")
    assert isinstance(m, DFA) and set(m.states) == {"even", "odd"}
    assert m.start == "even" and m.accepting == {"even"}
    for w in strings("ab", 6):
        assert m.accepts(w) == (w.count("a") % 2 == 0)
    assert load(DATA / "even_a.jff") == m  # load() dispatches on the suffix


def test_jflap_mealy():
    m = load_jflap(DATA / "mealy_flip.jff")
    assert m.is_mealy
    assert m.outputs("0110") == [None, "1", "0", "0", "1"]


def test_jflap_errors():
    with pytest.raises(SpecError) as info:
        load_jflap(DATA / "bad_target.jff")
    assert info.value.path == "/structure/automaton/transition[1]/to"
    assert "unknown state id '7'" in str(info.value)


def test_jflap_malformed_xml(tmp_path):
    path = tmp_path / "x.jff"
    path.write_text("<structure><type>fa</type>\n<automaton></structure>", encoding="utf-8")
    with pytest.raises(SpecError, match="malformed XML at line 2"):
        load_jflap(path)
    path.write_text("<structure><type>turing</type></structure>", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_jflap(path)
    assert info.value.path == "/structure/type"


def test_jflap_nfa():
    NFA = _optional("nfa", "NFA")
    m = load_jflap(DATA / "ends_ab.jff")
    assert isinstance(m, NFA)
    assert m.transitions[("q0", EPSILON)] == {"q1"}
    for w in strings("ab", 6):
        assert m.accepts(w) == ("".join(w).endswith("ab"))
    assert loads(dumps(m)).transitions == m.transitions


def test_jflap_dpda():
    DPDA = _optional("pda", "DPDA")
    m = load_jflap(DATA / "anbn.jff")
    assert isinstance(m, DPDA)
    # JFLAP's push "AZ" leaves A on top of Z (= ⊥)
    assert m.transitions[("q0", "a", BOTTOM)] == ("q1", ("A", BOTTOM))
    for w in strings("ab", 8):
        s = "".join(w)
        n = len(s) // 2
        assert m.accepts(w) == (s == "a" * n + "b" * n), s


def test_jflap_pda_empty_pop():
    PDA = _optional("pda", "PDA")
    m = load_jflap(DATA / "even_palindromes.jff")
    assert isinstance(m, PDA)
    # an empty JFLAP pop is expanded over every stack symbol and pushes it back
    assert m.transitions[("push", "a", BOTTOM)] == {("push", ("a", BOTTOM))}
    assert m.transitions[("push", "a", "b")] == {("push", ("a", "b"))}
    for w in strings("ab", 6):
        s = "".join(w)
        assert m.accepts(w) == (len(s) % 2 == 0 and s == s[::-1]), s


# --------------------------------------------------------------------------------------------
# pushdown kinds
# --------------------------------------------------------------------------------------------
def _anbn_dpda(DPDA, acceptance="final_state"):
    trans = {
        ("q0", "a", BOTTOM): ("q1", ("A", BOTTOM)),
        ("q1", "a", "A"): ("q1", ("A", "A")),
        ("q1", "b", "A"): ("q2", ()),
        ("q2", "b", "A"): ("q2", ()),
        ("q2", EPSILON, BOTTOM): ("q3", (BOTTOM,)),
    }
    return DPDA(["q0", "q1", "q2", "q3"], "ab", ["A"], trans, "q0", ["q0", "q3"],
                acceptance=acceptance, name="anbn")


def test_dpda_round_trip(tmp_path):
    DPDA = _optional("pda", "DPDA")
    m = _anbn_dpda(DPDA)
    data = to_dict(m)
    assert data["kind"] == "dpda" and data["acceptance"] == "final_state"
    row = data["transitions"][0]
    assert row == {"source": "q0", "symbol": "a", "pop": "⊥", "target": "q1", "push": ["A", "⊥"]}
    save(m, tmp_path / "p.json")
    again = load(tmp_path / "p.json")
    assert isinstance(again, DPDA) and again.transitions == m.transitions
    for w in strings("ab", 6):
        assert again.accepts(w) == m.accepts(w)
    # null is accepted for ε
    eps_rows = [row for row in data["transitions"] if row["symbol"] == "ε"]
    assert len(eps_rows) == 1
    eps_rows[0]["symbol"] = None
    assert from_dict(data).transitions == m.transitions


def test_dpda_spec_errors():
    DPDA = _optional("pda", "DPDA")
    data = to_dict(_anbn_dpda(DPDA))
    bad = copy.deepcopy(data)
    bad["transitions"][1]["push"] = ["A", "B"]
    with pytest.raises(SpecError) as info:
        from_dict(bad)
    assert info.value.path == "$.transitions[1].push[1]"
    bad = copy.deepcopy(data)
    bad["transitions"][2]["push"] = "A"
    with pytest.raises(SpecError) as info:
        from_dict(bad)
    assert info.value.path == "$.transitions[2].push"
    bad = copy.deepcopy(data)
    bad["transitions"][0]["pop"] = None
    with pytest.raises(SpecError) as info:
        from_dict(bad)
    assert info.value.path == "$.transitions[0].pop"
    bad = copy.deepcopy(data)
    bad["acceptance"] = "final"
    with pytest.raises(SpecError) as info:
        from_dict(bad)
    assert info.value.path == "$.acceptance"


def test_pda_round_trip():
    PDA = _optional("pda", "PDA")
    m = load_jflap(DATA / "even_palindromes.jff")
    data = to_dict(m)
    assert data["kind"] == "pda"
    again = from_dict(data)
    assert isinstance(again, PDA) and again.transitions == m.transitions
    for w in strings("ab", 4):
        assert again.accepts(w) == m.accepts(w)


def test_dpdt_round_trip():
    DPDT = _optional("pdt", "DPDT")
    # string reversal of Hao et al. (2018), Figure 3: w #^|w| ↦ #^|w| w^R
    trans = {}
    for x in "ab":
        for s in ("a", "b", BOTTOM):
            trans[("q0", x, s)] = ("q0", "#", (x, s))
    for s in "ab":
        trans[("q0", "#", s)] = ("q1", s, ())
        trans[("q1", "#", s)] = ("q1", s, ())
    m = DPDT(["q0", "q1"], "ab#", "ab#", "ab", trans, "q0", ["q1"], name="reversal")
    data = to_dict(m)
    assert data["kind"] == "dpdt"
    again = loads(dumps(m))
    assert isinstance(again, DPDT) and again.transitions == m.transitions
    for w in ["ab##", "abb###", "a#"]:
        assert again.outputs(w) == m.outputs(w)


def test_nfa_round_trip_several_starts():
    NFA = _optional("nfa", "NFA")
    m = NFA(["a0", "a1", 2], "xy", {("a0", EPSILON): {"a1", 2}, ("a1", "x"): {"a1", 2},
                                    (2, "y"): {"a0"}}, ["a0", 2], [2], name="n")
    data = to_dict(m)
    assert data["start"] == ["a0", 2]
    assert sum(1 for row in data["transitions"] if row["source"] == "a1") == 2
    again = loads(dumps(m))
    assert again == m and again.name == "n"
    for w in strings("xy", 4):
        assert again.accepts(w) == m.accepts(w)
    data["start"] = []
    with pytest.raises(SpecError) as info:
        from_dict(data)
    assert info.value.path == "$.start"


def test_dpdt_multi_symbol_outputs():
    DPDT = _optional("pdt", "DPDT")
    trans = {("q", "a", BOTTOM): ("q", ("x", "y"), (BOTTOM,)),
             ("q", "b", BOTTOM): ("q", EPSILON, (BOTTOM,))}
    m = DPDT(["q"], "ab", "xy", [], trans, "q")
    data = to_dict(m)
    outs = {row["symbol"]: row["output"] for row in data["transitions"]}
    assert outs == {"a": ["x", "y"], "b": "ε"}
    again = from_dict(data)
    assert again == m and again.transduce("aba") == m.transduce("aba") == ("x", "y", "x", "y")
    data["transitions"][0]["output"] = ["x", "z"]
    with pytest.raises(SpecError) as info:
        from_dict(data)
    assert info.value.path == "$.transitions[0].output[1]"


def test_bottom_discipline_paths():
    DPDA = _optional("pda", "DPDA")
    data = to_dict(_anbn_dpda(DPDA))
    rows = data["transitions"]
    i = next(j for j, row in enumerate(rows) if row["pop"] == "⊥" and row["symbol"] == "a")
    bad = copy.deepcopy(data)
    bad["transitions"][i]["push"] = ["A"]
    with pytest.raises(SpecError) as info:
        from_dict(bad)
    assert info.value.path == f"$.transitions[{i}].push" and "push it back" in str(info.value)
    j = next(j for j, row in enumerate(rows) if row["pop"] == "A" and row["push"])
    bad = copy.deepcopy(data)
    bad["transitions"][j]["push"] = ["⊥", "A"]
    with pytest.raises(SpecError) as info:
        from_dict(bad)
    assert info.value.path == f"$.transitions[{j}].push[0]"


def test_jflap_pda_popping_z_for_good(tmp_path):
    _optional("pda", "PDA")
    text = (DATA / "anbn.jff").read_text(encoding="utf-8").replace(
        "<read/><pop>Z</pop><push>Z</push>", "<read/><pop>Z</pop><push/>")
    path = tmp_path / "drop_z.jff"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_jflap(path)
    assert info.value.path == "/structure/automaton/transition[5]/pop"


def test_documented_examples_load():
    """Every JSON example in docs/spec-format.md loads, and a kind's example behaves as named."""
    import re

    doc = (Path(__file__).parent.parent / "docs" / "spec-format.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", doc, flags=re.DOTALL)
    kinds = {}
    for block in blocks:
        data = json.loads(block)
        kind = data["kind"]
        try:
            kinds[kind] = from_dict(data)
        except InputError as exc:  # a machine class not available in this installation
            assert "not available" in str(exc)
    assert {"dfa", "mealy", "dyck"} <= set(kinds)
    assert kinds["dfa"].accepts("abab") and not kinds["dfa"].accepts("ab")
    assert kinds["mealy"].outputs("0110")[1:] == ["0", "1", "0", "0"]
    assert kinds["dyck"] == DyckKM(2, 3)
    if "nfa" in kinds:
        assert kinds["nfa"].accepts("bab") and not kinds["nfa"].accepts("ba")
    if "dpda" in kinds:
        assert kinds["dpda"].accepts("aabb") and not kinds["dpda"].accepts("aab")
    if "pda" in kinds:
        assert kinds["pda"].accepts("abba") and not kinds["pda"].accepts("abab")
    if "dpdt" in kinds:
        assert kinds["dpdt"].transduce("ab##") == tuple("##ba")


def _small_params(factory) -> dict:
    import inspect

    params = inspect.signature(factory).parameters
    return {"vocab_size": 6} if "vocab_size" in params else {}


def test_named_tasks_round_trip(tmp_path):
    tasks = pytest.importorskip("pdanet.automata.tasks")
    seen = set()
    for name in tasks.names():
        params = _small_params(tasks.task(name).machine_factory)
        m = tasks.get(name, **params)
        if isinstance(m, StoreTransducer):
            continue  # store transducers (queues, deques) have no file format
        path = tmp_path / f"{name}.json"
        save(m, path)
        again = load(path)
        assert again == m, name
        assert type(again) is type(m)
        seen.add(to_dict(m)["kind"])
        rng = random.Random(name)
        symbols = list(m.alphabet)
        for _ in range(30):
            s = tuple(rng.choice(symbols) for _ in range(rng.randrange(9)))
            assert tasks.apply(again, s) == tasks.apply(m, s), (name, s)
    assert {"dfa", "mealy", "dpda", "pda", "dpdt", "dyck"} <= seen

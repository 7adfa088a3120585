"""Machine files: JSON round trips for every kind, SpecError paths, JFLAP import, and the
automata-lib / pyformlang converters."""

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
from pdanet.automata.io import (
    FORMAT_VERSION,
    dumps,
    from_automata_lib,
    from_dict,
    from_pyformlang,
    load,
    load_jflap,
    loads,
    save,
    to_dict,
)
from pdanet.automata.store import StoreTransducer
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


def _jflap_rows(path):
    """(initial id, final ids, rows (from, to, read, pop, push)) of a JFLAP PDA file, read with
    ElementTree directly (independent of `load_jflap`)."""
    import xml.etree.ElementTree as ET

    auto = ET.parse(path).getroot().find("automaton")
    start = next(s.get("id") for s in auto.findall("state") if s.find("initial") is not None)
    finals = {s.get("id") for s in auto.findall("state") if s.find("final") is not None}
    rows = [tuple((t.findtext(tag) or "").strip() for tag in ("from", "to", "read", "pop", "push"))
            for t in auto.findall("transition")]
    return start, finals, rows


def _jflap_accepts(start, finals, rows, word) -> bool:
    """JFLAP's PDA semantics by brute force: the stack is a string, top first, starting as "Z";
    a move applies when the stack starts with its pop string (an empty pop always applies) and
    replaces that prefix by its push string; accept by final state after the whole input. Rows
    reading nothing must not grow the stack (so every closure is finite)."""

    def closure(configs):
        seen, todo = set(configs), list(configs)
        while todo:
            q, stack = todo.pop()
            for f, t, rd, pop, push in rows:
                if f == q and not rd and stack.startswith(pop):
                    c = (t, push + stack[len(pop):])
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
        return seen

    configs = closure({(start, "Z")})
    for a in word:
        configs = closure({(t, push + stack[len(pop):]) for q, stack in configs
                           for f, t, rd, pop, push in rows
                           if f == q and rd == a and stack.startswith(pop)})
    return any(q in finals for q, _ in configs)


_Z_FIXTURES = {
    "anbn_pop_z.jff": ("ab", lambda s: len(s) > 0 and s == "a" * (len(s) // 2) + "b" * (len(s) // 2)),
    "equal_ab_z.jff": ("ab", lambda s: s.count("a") == s.count("b")),
    "a_then_bs.jff": ("ab", lambda s: s[:1] == "a" and set(s[1:]) <= {"b"}),
    "marked_z.jff": ("ac", lambda s: s.count("c") == 1 and set(s) <= {"a", "c"}
                     and s.index("c") == len(s) // 2 and len(s) % 2 == 1),
    "anbn.jff": ("ab", lambda s: s == "a" * (len(s) // 2) + "b" * (len(s) // 2)),
    "even_palindromes.jff": ("ab", lambda s: len(s) % 2 == 0 and s == s[::-1]),
}


@pytest.mark.parametrize("name", sorted(_Z_FIXTURES))
def test_jflap_pda_z_pops_match_jflap_semantics(name):
    _optional("pda", "PDA")
    m = load_jflap(DATA / name)
    alphabet, language = _Z_FIXTURES[name]
    start, finals, rows = _jflap_rows(DATA / name)
    for w in strings(alphabet, 6):
        s = "".join(w)
        assert m.accepts(w) == _jflap_accepts(start, finals, rows, s) == language(s), (name, s)


def test_jflap_pda_z_convention():
    DPDA = _optional("pda", "DPDA")
    PDA = _optional("pda", "PDA")
    # Z only ever pushed back at the bottom: Z is ⊥ and the file's states are kept
    kept = load_jflap(DATA / "anbn.jff")
    assert "init" not in kept.states and "Z" not in kept.stack_alphabet
    # Z popped for good: a fresh start state pushes Z over ⊥ (⊥ = JFLAP's empty stack)
    m = load_jflap(DATA / "anbn_pop_z.jff")
    assert isinstance(m, DPDA) and m.start == "init" and "Z" in m.stack_alphabet
    assert m.transitions[("init", EPSILON, BOTTOM)] == ("q0", ("Z", BOTTOM))
    assert m.transitions[("q2", EPSILON, "Z")] == ("q3", ())
    # an empty pop applies on the empty stack too (expanded over ⊥)
    m = load_jflap(DATA / "a_then_bs.jff")
    assert isinstance(m, DPDA)
    assert m.transitions[("q1", "b", BOTTOM)] == ("q1", (BOTTOM,))
    assert isinstance(load_jflap(DATA / "equal_ab_z.jff"), PDA)


def test_jflap_fresh_start_name_avoids_clash(tmp_path):
    _optional("pda", "PDA")
    text = (DATA / "anbn_pop_z.jff").read_text(encoding="utf-8").replace('name="q1"', 'name="init"')
    path = tmp_path / "clash.jff"
    path.write_text(text, encoding="utf-8")
    m = load_jflap(path)
    assert m.start == "init'" and "init" in m.states
    for w in strings("ab", 6):
        s = "".join(w)
        assert m.accepts(w) == (len(s) > 0 and s == "a" * (len(s) // 2) + "b" * (len(s) // 2))


def test_jflap_pda_multi_symbol_pop_refused(tmp_path):
    _optional("pda", "PDA")
    text = (DATA / "anbn_pop_z.jff").read_text(encoding="utf-8").replace(
        "<pop>A</pop>", "<pop>AA</pop>", 1)
    path = tmp_path / "pop2.jff"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_jflap(path)
    assert info.value.path == "/structure/automaton/transition[2]/pop"
    assert "one symbol per transition" in str(info.value)


def _write_jflap_pda(path, n, finals, rows):
    """A JFLAP 7 style .jff file (state 0 initial)."""
    out = [('<?xml version="1.0" encoding="UTF-8" standalone="no"?>'
            "<!--Created with JFLAP 7.1.--><structure>&#13;"),
           "\t<type>pda</type>&#13;", "\t<automaton>&#13;"]
    for i in range(n):
        flags = ("<initial/>" if i == 0 else "") + ("<final/>" if i in finals else "")
        out.append(f'\t\t<state id="{i}" name="q{i}"><x>{i}.0</x><y>0.0</y>{flags}</state>&#13;')
    for f, t, rd, pop, push in rows:
        cells = "".join(f"<{tag}>{v}</{tag}>" if v else f"<{tag}/>"
                        for tag, v in (("read", rd), ("pop", pop), ("push", push)))
        out.append(f"\t\t<transition><from>{f}</from><to>{t}</to>{cells}</transition>&#13;")
    out += ["\t</automaton>&#13;", "</structure>"]
    path.write_text("\n".join(out), encoding="utf-8")


@st.composite
def _jflap_pdas(draw):
    n = draw(st.integers(1, 3))
    finals = draw(st.sets(st.integers(0, n - 1)))
    row = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.sampled_from(["", "a", "b"]),
                    st.sampled_from(["", "A", "Z"]),
                    st.text(alphabet="AZ", max_size=2)).filter(
        lambda r: r[2] or len(r[4]) <= len(r[3]))  # ε-moves never grow the stack
    rows = draw(st.lists(row, max_size=7, unique=True))
    return n, finals, rows


@settings(max_examples=30, deadline=None)
@given(_jflap_pdas())
def test_jflap_random_pdas_match_jflap_semantics(machine):
    _optional("pda", "PDA")
    import tempfile

    n, finals, rows = machine
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "random.jff"
        _write_jflap_pda(path, n, finals, rows)
        m = load_jflap(path)
    srows = [(str(f), str(t), rd, pop, push) for f, t, rd, pop, push in rows]
    for w in strings("ab", 6):
        s = "".join(w)
        # a symbol no transition reads is outside the imported alphabet: JFLAP rejects it
        got = m.accepts(w) if set(w) <= set(m.alphabet) else False
        assert got == _jflap_accepts("0", {str(q) for q in finals}, srows, s), (rows, s)


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


# --------------------------------------------------------------------------------------------
# automata-lib and pyformlang objects (tiny stand-ins with those libraries' attribute names)
# --------------------------------------------------------------------------------------------
class _ALibFA:
    """automata-lib's DFA/NFA attributes: transitions[q][a] is a state or a set ("" is ε)."""

    def __init__(self, states, transitions, initial_state, final_states):
        self.states, self.input_symbols = frozenset(states), frozenset("ab")
        self.transitions, self.initial_state = transitions, initial_state
        self.final_states, self.allow_partial = frozenset(final_states), True


class _ALibPDA:
    """automata-lib's DPDA/NPDA attributes: transitions[q][a][X] is (q2, push) or a set."""

    def __init__(self, states, transitions, initial_state, final_states, acceptance_mode):
        self.states, self.input_symbols = frozenset(states), frozenset("ab")
        self.stack_symbols, self.initial_stack_symbol = frozenset("AZ"), "Z"
        self.transitions, self.initial_state = transitions, initial_state
        self.final_states, self.acceptance_mode = frozenset(final_states), acceptance_mode


class _PflObj:
    """pyformlang's State / Symbol / StackSymbol: a named value."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return type(self) is type(other) and self.value == other.value

    def __hash__(self):
        return hash(self.value)


class Epsilon(_PflObj):
    def __init__(self):
        super().__init__("epsilon")


class _PflFA:
    """pyformlang's finite automata: states, symbols, start_states, final_states, to_dict()."""

    def __init__(self, states, table, starts, finals):
        self.states = {_PflObj(q) for q in states}
        self.symbols = {_PflObj("a"), _PflObj("b")}
        self.start_states = {_PflObj(q) for q in starts}
        self.final_states = {_PflObj(q) for q in finals}
        self._table = table

    def to_dict(self):
        return {_PflObj(q): {(Epsilon() if a == "" else _PflObj(a)):
                             ({_PflObj(t) for t in ts} if isinstance(ts, set) else _PflObj(ts))
                             for a, ts in row.items()} for q, row in self._table.items()}


class _PflPDA:
    """pyformlang's PDA: states, input_symbols, stack_symbols, start_state, final_states,
    _start_stack_symbol and to_dict() {(q, a, X): {(q2, (Y1, …)), …}}."""

    def __init__(self, states, rows, start, finals, z="Z"):
        self.states = {_PflObj(q) for q in states}
        self.input_symbols = {_PflObj("a"), _PflObj("b")}
        self.stack_symbols = {_PflObj("A"), _PflObj(z)}
        self.start_state, self.final_states = _PflObj(start), {_PflObj(q) for q in finals}
        self._start_stack_symbol = None if z is None else _PflObj(z)
        self._rows = rows

    def to_dict(self):
        out: dict = {}
        for q, a, x, t, push in self._rows:
            key = (_PflObj(q), Epsilon() if a == "" else _PflObj(a), _PflObj(x))
            out.setdefault(key, set()).add((_PflObj(t), tuple(_PflObj(y) for y in push)))
        return out


def _textbook_accepts(start, finals, rows, mode, word) -> bool:
    """A PDA by brute force: stack a tuple, top first, starting as ("Z",); a move pops its one
    symbol and pushes its tuple; the empty stack blocks. ``mode`` final_state / empty_stack /
    both (either). Rows reading nothing must not grow the stack."""

    def closure(configs):
        seen, todo = set(configs), list(configs)
        while todo:
            q, stack = todo.pop()
            for f, rd, x, t, push in rows:
                if f == q and rd == "" and stack[:1] == (x,):
                    c = (t, tuple(push) + stack[1:])
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
        return seen

    configs = closure({(start, ("Z",))})
    for a in word:
        configs = closure({(t, tuple(push) + stack[1:]) for q, stack in configs
                           for f, rd, x, t, push in rows if f == q and rd == a and stack[:1] == (x,)})
    return any((mode != "empty_stack" and q in finals) or (mode != "final_state" and not stack)
               for q, stack in configs)


def _nfa_accepts(starts, finals, moves, word) -> bool:
    def closure(qs):
        qs, todo = set(qs), list(qs)
        while todo:
            q = todo.pop()
            for f, a, t in moves:
                if f == q and a == "" and t not in qs:
                    qs.add(t)
                    todo.append(t)
        return qs

    qs = closure(starts)
    for c in word:
        qs = closure({t for f, a, t in moves if f in qs and a == c})
    return bool(qs & set(finals))


_pda_row = st.tuples(st.integers(0, 2), st.sampled_from(["", "a", "b"]), st.sampled_from("AZ"),
                     st.integers(0, 2), st.text(alphabet="AZ", max_size=2)).filter(
    lambda r: r[1] or len(r[4]) <= 1)  # ε-moves never grow the stack


@st.composite
def _pdas(draw):
    return draw(st.sets(st.integers(0, 2))), draw(st.lists(_pda_row, max_size=8, unique=True))


def _alib_table(rows, deterministic):
    table: dict = {}
    for q, a, x, t, push in rows:
        slot = table.setdefault(q, {}).setdefault(a, {})
        if deterministic:
            slot[x] = (t, push)  # push as a string, read one symbol per character
        else:
            slot.setdefault(x, set()).add((t, tuple(push)))
    return table


@settings(max_examples=30, deadline=None)
@given(_pdas(), st.sampled_from(["final_state", "empty_stack", "both"]), st.booleans())
def test_from_automata_lib_pushdown_matches_textbook(machine, mode, deterministic):
    _optional("pda", "PDA")
    finals, rows = machine
    if deterministic:  # automata-lib DPDA: one move per key, no ε-move beside an input move
        seen, eps = set(), {(q, x) for q, a, x, *_ in rows if a == ""}
        rows = [r for r in rows if r[:3] not in seen and not seen.add(r[:3])
                and (r[1] == "" or (r[0], r[2]) not in eps)]
    obj = _ALibPDA(range(3), _alib_table(rows, deterministic), 0, finals, mode)
    m = from_automata_lib(obj)
    for w in strings("ab", 6):
        assert m.accepts(w) == _textbook_accepts(0, finals, rows, mode, w), (rows, mode, w)


@settings(max_examples=30, deadline=None)
@given(_pdas(), st.sampled_from([None, "final_state", "empty_stack"]))
def test_from_pyformlang_pda_matches_textbook(machine, acceptance):
    _optional("pda", "PDA")
    finals, rows = machine
    m = from_pyformlang(_PflPDA(range(3), rows, 0, finals), acceptance=acceptance)
    mode = acceptance or ("final_state" if finals else "empty_stack")
    for w in strings("ab", 6):
        assert m.accepts(w) == _textbook_accepts(0, finals, rows, mode, w), (rows, mode, w)


_fa_moves = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["", "a", "b"]),
                               st.integers(0, 2)), max_size=8, unique=True)


@settings(max_examples=30, deadline=None)
@given(_fa_moves, st.sets(st.integers(0, 2)), st.sets(st.integers(0, 2), min_size=1, max_size=2))
def test_from_finite_automata_match_brute_force(moves, finals, starts):
    sets: dict = {}
    for q, a, t in moves:
        sets.setdefault(q, {}).setdefault(a, set()).add(t)
    # automata-lib: one start state; single targets written as plain states (a DFA's table)
    one = min(starts)
    alib = {q: {a: (next(iter(ts)) if len(ts) == 1 and a else ts) for a, ts in row.items()}
            for q, row in sets.items()}
    m = from_automata_lib(_ALibFA(range(3), alib, one, finals))
    p = from_pyformlang(_PflFA(range(3), sets, starts, finals))
    for w in strings("ab", 6):
        assert m.accepts(w) == _nfa_accepts({one}, finals, moves, w), (moves, w)
        assert p.accepts(w) == _nfa_accepts(starts, finals, moves, w), (moves, w)


def test_from_automata_lib_documented_dpda():
    DPDA = _optional("pda", "DPDA")
    # the DPDA of automata-lib's documentation (a^n b^n, n >= 1): '0' never leaves, so '0' is ⊥
    obj = _ALibPDA({"q0", "q1", "q2", "q3"}, {
        "q0": {"a": {"0": ("q1", ("1", "0"))}},
        "q1": {"a": {"1": ("q1", ("1", "1"))}, "b": {"1": ("q2", "")}},
        "q2": {"b": {"1": ("q2", "")}, "": {"0": ("q3", ("0",))}},
    }, "q0", {"q3"}, "final_state")
    obj.stack_symbols, obj.initial_stack_symbol = frozenset("01"), "0"
    m = from_automata_lib(obj)
    assert isinstance(m, DPDA) and set(m.states) == {"q0", "q1", "q2", "q3"}
    assert m.transitions[("q0", "a", BOTTOM)] == ("q1", ("1", BOTTOM))
    for w in strings("ab", 8):
        s = "".join(w)
        n = len(s) // 2
        assert m.accepts(w) == (n > 0 and s == "a" * n + "b" * n), s
    # the same machine accepting by empty stack: '0' is popped for good, so it stays a symbol
    obj.transitions["q2"][""]["0"] = ("q3", "")
    obj.acceptance_mode, obj.final_states = "empty_stack", frozenset()
    m = from_automata_lib(obj)
    assert m.start == "init" and "0" in m.stack_alphabet
    for w in strings("ab", 8):
        s = "".join(w)
        n = len(s) // 2
        assert m.accepts(w) == (n > 0 and s == "a" * n + "b" * n), s


def test_from_pyformlang_empty_stack_inferred():
    _optional("pda", "PDA")
    rows = [("p", "a", "Z", "p", ("A", "Z")), ("p", "a", "A", "p", ("A", "A")),
            ("p", "b", "A", "r", ()), ("r", "b", "A", "r", ()), ("r", "", "Z", "r", ())]
    m = from_pyformlang(_PflPDA(["p", "r"], rows, "p", []))  # no final states: empty stack
    for w in strings("ab", 8):
        s = "".join(w)
        n = len(s) // 2
        assert m.accepts(w) == (n > 0 and s == "a" * n + "b" * n), s
    assert not from_pyformlang(_PflPDA(["p", "r"], rows, "p", []), "final_state").accepts("ab")


def test_converters_bad_input():
    class Nothing:
        pass

    with pytest.raises(InputError, match="'states'"):
        from_automata_lib(Nothing())
    with pytest.raises(InputError, match="acceptance_mode"):
        from_automata_lib(_ALibPDA([0], {}, 0, [], "accept"))
    with pytest.raises(InputError, match="expected \\(state, push\\) moves"):
        from_automata_lib(_ALibPDA([0], {0: {"a": {"Z": {"oops"}}}}, 0, [], "final_state"))
    with pytest.raises(InputError, match="neither a declared state"):
        from_automata_lib(_ALibFA([0], {0: {"a": 7}}, 0, []))
    with pytest.raises(InputError, match="acceptance"):
        from_pyformlang(_PflPDA([0], [], 0, []), acceptance="both")
    with pytest.raises(InputError, match="PDAs only"):
        from_pyformlang(_PflFA([0], {}, [0], []), acceptance="final_state")
    with pytest.raises(InputError, match="start stack symbol"):
        from_pyformlang(_PflPDA([0], [], 0, [], z=None))

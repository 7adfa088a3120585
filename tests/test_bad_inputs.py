"""Every bad input gets a clear typed error; nothing is silently accepted (API and machine files).

One regression test per reported defect: each asserts the error type from `pdanet.errors` and that
the message names the offending thing (field path, symbol, option, file) and says what to do.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import torch

import pdanet as pn
from pdanet import limits
from pdanet.automata.alphabet import Alphabet
from pdanet.automata.io import loads
from pdanet.automata.nfa import NFA
from pdanet.automata.regex import MAX_DEPTH, parse_regex, regex_to_dfa
from pdanet.automata.store import StoreTransducer
from pdanet.errors import (
    CompileError,
    InputError,
    PdanetError,
    ResourceError,
    SpecError,
)
from pdanet.export import WeightsFileError, read_weights

DATA = Path(__file__).parent / "data"

DFA_SPEC = {
    "format": 1, "kind": "dfa", "states": [0, 1], "alphabet": ["a", "b"], "start": 0,
    "accepting": [0],
    "transitions": [{"source": 0, "symbol": "a", "target": 1},
                    {"source": 1, "symbol": "a", "target": 0}],
}


@pytest.fixture(scope="module")
def parity():
    """Even number of a's over {a, b}: accepts the empty string."""
    return pn.DFA(states=[0, 1], alphabet="ab",
                  transitions={(0, "a"): 1, (1, "a"): 0, (0, "b"): 0, (1, "b"): 1},
                  start=0, accepting={0})


@pytest.fixture(scope="module")
def net(parity):
    return pn.compile(parity, target="lstm")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- JSON spec files -----------------------------------------------------------------------------


def test_huge_integer_literal_names_the_path(tmp_path):
    text = json.dumps(DFA_SPEC).replace('"start": 0', '"start": ' + "9" * 5000)
    with pytest.raises(SpecError, match=r"\$\.start: .*5,000 digits") as exc:
        pn.load(_write(tmp_path, "big.json", text))
    assert exc.value.path == "$.start"
    assert "big.json" in str(exc.value)


def test_huge_dyck_parameter_is_refused_by_type(tmp_path):
    text = '{"format": 1, "kind": "dyck", "k": ' + "1" * 5000 + ', "m": 2}'
    with pytest.raises(SpecError, match=r"\$\.k"):
        pn.load(_write(tmp_path, "k.json", text))


def test_deep_json_nesting(tmp_path):
    text = '{"format": 1, "kind": "dfa", "states": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(SpecError, match=r"^\$: JSON nested too deeply.*deep\.json"):
        pn.load(_write(tmp_path, "deep.json", text))


def test_deeply_nested_state_is_refused():
    spec = dict(DFA_SPEC, states=[0, 1, json.loads("[" * 200 + "]" * 200)])
    with pytest.raises(SpecError, match=r"\$\.states\[2\](\[0\])+: a state nested more than"):
        loads(json.dumps(spec))


@pytest.mark.parametrize("value, got", [(True, "boolean"), (1.0, "number"), ("1", "string"),
                                        (None, "null")])
def test_format_is_strictly_the_integer_1(value, got):
    with pytest.raises(SpecError, match=rf"\$\.format: expected the integer 1, got .*{got}"):
        loads(json.dumps(dict(DFA_SPEC, format=value)))


def test_duplicate_fields_are_refused():
    text = json.dumps(DFA_SPEC)[:-1] + ', "start": 1}'
    with pytest.raises(SpecError, match=r"\$\.start: field 'start' occurs twice"):
        loads(text)
    row = '{"source": 0, "symbol": "b", "target": 0, "target": 1}'
    text = json.dumps(DFA_SPEC).replace('"transitions": [', '"transitions": [' + row + ", ")
    with pytest.raises(SpecError, match=r"\$\.transitions\[0\]\.target: .*twice"):
        loads(text)


def test_description_must_be_text():
    with pytest.raises(SpecError, match=r"\$\.description"):
        loads(json.dumps(dict(DFA_SPEC, description=[1, 2])))
    assert loads(json.dumps(dict(DFA_SPEC, description="parity"))).num_states == 2


# --- JFLAP -------------------------------------------------------------------------------------


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<structure><type>fa</type><automaton>&lol3;</automaton></structure>"""

XXE = """<?xml version="1.0"?>
<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<structure><type>&xxe;</type></structure>"""


@pytest.mark.parametrize("text", [BILLION_LAUGHS, XXE, "<!DOCTYPE structure><structure/>"],
                         ids=["billion_laughs", "xxe", "bare_doctype"])
def test_jflap_dtd_and_entities_are_refused(tmp_path, text):
    path = _write(tmp_path, "evil.jff", text)
    with pytest.raises(SpecError, match="refused: entity declarations / DTD are not allowed") \
            as exc:
        pn.load(path)
    assert "evil.jff" in str(exc.value)
    assert "malformed" not in str(exc.value)


@pytest.mark.parametrize("tag, old, new", [
    ("read", "<read>b</read>", "<read> </read>"),
    ("read", "<read>b</read>", "<read>\n\t</read>"),
])
def test_jflap_whitespace_read_is_not_epsilon(tmp_path, tag, old, new):
    text = (DATA / "ends_ab.jff").read_text().replace(old, new, 1)
    with pytest.raises(SpecError, match=rf"transition\[2\]/{tag}: <{tag}> holds only whitespace"):
        pn.load(_write(tmp_path, "ws.jff", text))


def test_jflap_whitespace_inside_push_is_refused(tmp_path):
    text = (DATA / "anbn.jff").read_text().replace("<push>AZ</push>", "<push>A Z</push>", 1)
    with pytest.raises(SpecError, match=r"transition\[1\]/push: .*holds whitespace"):
        pn.load(_write(tmp_path, "ws.jff", text))


def test_jflap_surrounding_whitespace_is_ignored(tmp_path):
    text = (DATA / "ends_ab.jff").read_text().replace("<read>b</read>", "<read>\n b \n</read>")
    assert pn.load(_write(tmp_path, "pretty.jff", text)) == pn.load(DATA / "ends_ab.jff")


def test_jflap_reserved_symbol_names_the_file(tmp_path):
    text = (DATA / "ends_ab.jff").read_text().replace("<read>b</read>", "<read>ε</read>")
    with pytest.raises(SpecError, match=r"'ε' is reserved.*eps\.jff"):
        pn.load(_write(tmp_path, "eps.jff", text))


# --- alphabets -----------------------------------------------------------------------------------


@pytest.mark.parametrize("symbol, message", [
    ("ε", "'ε' is reserved"), ("⊥", "'⊥' is reserved"), ("", "empty"), (None, "None"),
    (True, "boolean"),
])
def test_api_alphabet_refuses_reserved_symbols_at_construction(symbol, message):
    with pytest.raises(InputError, match=message):
        pn.DFA(states=[0], alphabet=["a", symbol], transitions={}, start=0)


def test_ambiguous_text_over_compound_alphabet_is_refused():
    m = pn.DFA(states=[0, 1], alphabet=["a", "b", "ab"],
               transitions={(0, "a"): 0, (0, "b"): 0, (0, "ab"): 1}, start=0, accepting={1})
    with pytest.raises(InputError, match="'ab' is a symbol and also a concatenation.*list of "
                                         "symbols"):
        m.accepts("ab")
    assert m.accepts(["ab"]) and not m.accepts(["a", "b"])
    assert not m.accepts("a b")  # whitespace separates symbols: unambiguous
    with pytest.raises(InputError, match="separated by whitespace"):
        m.accepts("ba")


def test_compound_detection():
    a = Alphabet(["x", "yz", "xyz", "zz", "q"])
    assert a.is_compound("xyz") and not a.is_compound("zz") and not a.is_compound("q")


@pytest.mark.parametrize("bad", [None, 5, b"ab", {"a": 1}])
def test_strings_of_the_wrong_type(parity, bad):
    with pytest.raises(InputError, match="a string is a str or a sequence of symbols"):
        parity.run(bad)


# --- compiled networks ---------------------------------------------------------------------------


def test_empty_alphabet_is_a_compile_error():
    m = pn.DFA(states=[0], alphabet="", transitions={}, start=0, accepting={0})
    assert m.accepts("")  # a fine machine ...
    with pytest.raises(CompileError, match="empty input alphabet"):  # ... but no network reads it
        pn.compile(m, target="lstm")


@pytest.mark.parametrize("target, method", [("lstm", None), ("elman", None),
                                            ("elman", "compressed"), ("second_order", None)])
def test_run_on_the_empty_string(parity, target, method):
    net = pn.compile(parity, target=target, method=method)
    out = net.run("")
    assert out["output"].tolist() == [True]  # parity accepts ε
    assert out["state"].tolist() == [0]
    assert net.run([])["output"].tolist() == [True]
    states, logits = net.forward(torch.zeros((3, 0), dtype=torch.long))
    assert states.shape[:2] == (3, 1) and logits.shape[:2] == (3, 1)


def test_run_on_the_empty_string_dyck():
    net = pn.compile(pn.DyckKM(2, 2), target="lstm")
    assert net.run("")["output"].shape[0] == 1


@pytest.mark.parametrize("bad", [None, 3, b"ab"])
def test_run_on_a_non_string(net, bad):
    with pytest.raises(InputError, match="one string"):
        net.run(bad)


@pytest.mark.parametrize("name, dtype", [("float32", torch.float32), ("float64", torch.float64),
                                         ("torch.float64", torch.float64)])
def test_compile_accepts_dtype_names(parity, name, dtype):
    assert pn.compile(parity, target="lstm", dtype=name).dtype == dtype


@pytest.mark.parametrize("bad", ["float", "int64", torch.int64, 32, None])
def test_compile_refuses_other_dtypes(parity, bad):
    with pytest.raises(InputError, match="not a floating dtype"):
        pn.compile(parity, target="lstm", dtype=bad)


@pytest.mark.parametrize("bad, message", [
    (0, "> 0"), (-8, "> 0"), (math.inf, "finite"), (math.nan, "finite"), ("abc", "not a number"),
    (True, "boolean"), (sp.oo, "finite"), (sp.nan, "finite"), (10 ** 400, "too large"),
], ids=["0", "-8", "inf", "nan", "abc", "True", "sympy_oo", "sympy_nan", "10**400"])
def test_with_scale_refuses_bad_scales(net, bad, message):
    with pytest.raises(InputError, match=message):
        net.with_scale(bad)


@pytest.mark.parametrize("good", [7, 7.5, Fraction(15, 2), sp.Rational(15, 2), np.int64(7)])
def test_with_scale_accepts_positive_numbers(net, good):
    assert net.with_scale(good).scale == sp.nsimplify(good, rational=True)


def test_scale_that_overflows_the_dtype_names_the_block(parity):
    with pytest.raises(InputError, match="weight block .* overflows float16"):
        pn.compile(parity, target="lstm", dtype="float16", scale=10 ** 6)


@pytest.mark.parametrize("options, message", [
    ({"hidden_size": 0}, "hidden_size=0 must be at least 1"),
    ({"hidden_size": 4}, "does not take the option"),
    ({"max_dense": True}, "max_dense=True must be an integer"),
    ({"max_dense": 0}, "max_dense=0 must be at least 1"),
    ({"max_dense": 2.5}, "must be an integer"),
    ({"reachable_only": 1}, "reachable_only=1 must be True or False"),
    ({"scale": 0}, "scale=0 must be finite and > 0"),
    ({"scale": "77"}, "not a number"),
    ({"colour": "red"}, "does not take the option"),
])
def test_compile_validates_options(parity, options, message):
    with pytest.raises(InputError, match=message):
        pn.compile(parity, target="elman", **options)


def test_compile_unknown_option_on_forwarding_builders():
    with pytest.raises(InputError, match="colour"):
        pn.compile(pn.DyckKM(2, 2), target="lstm", colour="red")


def test_learner_hidden_size_zero_is_not_default(net):
    from pdanet.learning.init import LearnerRNN

    assert LearnerRNN.like(net).hidden_size == net.hidden_units
    for bad in (0, -1, True):
        with pytest.raises(InputError, match="hidden_size"):
            LearnerRNN.like(net, hidden_size=bad)


# --- weight files --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def weights_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("w") / "dyck.safetensors"
    pn.save_network(pn.compile(pn.DyckKM(2, 3), target="lstm"), path)
    return path


def _rewrite(src: Path, dst: Path, **changes) -> Path:
    from safetensors.torch import save_file

    tensors, meta = read_weights(src)
    meta = {k: v for k, v in (meta | changes).items() if v is not None}
    save_file(tensors, str(dst), metadata=meta)
    return dst


@pytest.mark.parametrize("changes, message", [
    ({"dtype": "int64"}, "field 'dtype' is 'int64'; a pdanet network has a floating dtype"),
    ({"dtype": "bool"}, "field 'dtype'"),
    ({"scale": "0"}, "field 'scale' is '0'; the scale must be finite and > 0"),
    ({"scale": "-77"}, "field 'scale' is '-77'; the scale must be finite and > 0"),
    ({"scale": "nan"}, "field 'scale'"),
    ({"scale": "1" * 5000}, "field 'scale' .*too long"),
    ({"machine_spec": json.dumps({"format": 1, "kind": "dyck", "k": 10 ** 9, "m": 3})},
     "field 'machine_spec' describes a machine with k = 1000000000"),
    ({"machine_spec": None, "task": "dyck", "task_params": json.dumps({"k": 10 ** 9, "m": 3})},
     "field 'task_params' describes a machine with k = 1000000000"),
    ({"machine_spec": None, "task": "dyck", "task_params": "[1]"}, "field 'task_params' must be"),
    ({"params": "[1, 2"}, "field 'params'"),
    ({"params": '{"k": true}'}, "field 'params'"),
    ({"hidden_units": "abc"}, "field 'hidden_units'"),
    ({"steps_per_symbol": "7"}, "field 'steps_per_symbol'"),
])
def test_weights_metadata_is_validated(tmp_path, weights_file, changes, message):
    path = _rewrite(weights_file, tmp_path / "bad.safetensors", **changes)
    with pytest.raises(WeightsFileError, match=message) as exc:
        pn.load_network(path)
    assert "bad.safetensors" in str(exc.value)


# --- regular expressions, determinisation, drawing -------------------------------------------


def test_deep_regex_is_an_input_error():
    with pytest.raises(InputError, match=f"nest more than {MAX_DEPTH} deep"):
        regex_to_dfa("(" * 2000 + "a" + ")" * 2000, "ab")
    assert regex_to_dfa("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH, "ab").accepts("a")


def test_stacked_repetitions_collapse():
    assert parse_regex("a" + "*+?" * 10_000, "ab").kind == "star"
    assert parse_regex("a+?", "ab").kind == "star"
    assert parse_regex("a??", "ab").kind == "opt"
    d = regex_to_dfa("a+" + "+" * 5000, "ab")
    assert d.accepts("aaa") and not d.accepts("")


def test_exponential_regex_hits_the_state_limit():
    pattern = "(a|b)*a" + "(a|b)" * 20  # 2^21 DFA states
    with limits.raised(max_states=500), \
            pytest.raises(ResourceError, match="determinising .*max_states") as exc:
        regex_to_dfa(pattern, "ab")
    assert "(a|b)*a(a|b)" in str(exc.value)
    assert regex_to_dfa("(a|b)*a" + "(a|b)" * 3, "ab").num_states == 16


def test_determinisation_work_limit():
    n = NFA(range(3), "ab", {(0, "a"): {0, 1}, (0, "b"): 0, (1, "a"): 2, (1, "b"): 2}, 0, {2})
    with limits.raised(max_configs=3), pytest.raises(ResourceError, match="max_configs"):
        n.determinise()


def test_draw_guards_large_machines():
    rng = np.random.default_rng(0)
    m = pn.DFA.from_table(rng.integers(0, 300, (300, 2)), "ab", 0, [1])
    with limits.raised(max_states=100):
        with pytest.raises(ResourceError, match=r"drawing .*max_states=\.\.\.") as exc:
            pn.draw(m)
        with pytest.raises(ResourceError):
            pn.to_networkx(m)
    assert ".minimize()" in str(exc.value)
    assert len(pn.to_networkx(m)) == 300


def test_errors_are_pdanet_errors():
    for cls in (SpecError, InputError, CompileError, ResourceError, WeightsFileError):
        assert issubclass(cls, PdanetError)


# --- more strictness -------------------------------------------------------------------------


def test_lone_surrogates_are_refused():
    spec = dict(DFA_SPEC, states=[0, "\ud800"])
    with pytest.raises(SpecError, match=r"\$\.states\[1\]: .*lone surrogate"):
        loads(json.dumps(spec))
    with pytest.raises(SpecError, match=r"\$\.name: .*lone surrogate"):
        loads(json.dumps(dict(DFA_SPEC, name="x\udfff")))


def test_save_refuses_unencodable_names(tmp_path):
    m = pn.DFA(states=[0, "\ud800"], alphabet="a", transitions={}, start=0)
    with pytest.raises(InputError, match="lone surrogate"):
        m.save(tmp_path / "m.json")


def test_odd_field_names_get_bracketed_paths():
    with pytest.raises(SpecError, match=r'^\$\["a b"\]: unknown field'):
        loads(json.dumps(dict(DFA_SPEC, **{"a b": 1})))


def test_boolean_states_are_refused():
    with pytest.raises(pn.errors.AutomatonError, match="boolean"):
        pn.DFA(states=[0, True], alphabet="a", transitions={}, start=0)
    with pytest.raises(pn.errors.AutomatonError, match="boolean"):
        NFA(states=[False, 1], alphabet="a", transitions={}, start=1)
    # every machine indexes its states the same way
    with pytest.raises(pn.errors.AutomatonError, match="boolean"):
        pn.DPDA([0, True], "a", "A", {}, 0)
    with pytest.raises(pn.errors.AutomatonError, match="boolean"):
        StoreTransducer("queue", [True], "a", "b", "A", {}, True)
    with pytest.raises(pn.errors.AutomatonError, match="state 'q' is declared twice"):
        StoreTransducer("queue", ["q", "q"], "a", "b", "A", {}, "q")
    with pytest.raises(pn.errors.AutomatonError, match="None cannot be a state"):
        StoreTransducer("queue", [None], "a", "b", "A", {}, None)


def test_language_listing_is_guarded():
    m = regex_to_dfa("(a|b)*", "ab")
    with limits.raised(max_configs=1000), \
            pytest.raises(ResourceError, match="language .* smaller max_length"):
        m.language(30)
    assert len(m.language(3)) == 15


@pytest.mark.parametrize("call, message", [
    (lambda g: g.sample(0, max_length=True), "max_length must be an integer"),
    (lambda g: g.sample(0, min_length=-1), "min_length must be at least 0"),
    (lambda g: g.sample(0, max_tries=0), "max_tries must be at least 1"),
    (lambda g: g.sample_depth(0, max_depth=2.5), "max_depth must be an integer"),
    (lambda g: g.count(-1), "n must be at least 0"),
    (lambda g: g.to_pda(max_configs=0), "max_configs must be at least 1"),
    (lambda g: g.length_table(True), "max_length must be a non-negative integer"),
    (lambda g: g.sample(True), "Generator or an integer seed"),
])
def test_grammar_numeric_arguments(call, message):
    g = pn.CFG(["S"], "ab", {"S": ["a S b", "ε"]}, "S")
    with pytest.raises(InputError, match=message):
        call(g)


def test_batch_lengths_are_checked(parity):
    ids = np.zeros((2, 3), dtype=np.int64)
    with pytest.raises(InputError, match="length 4 of batch row 1 is outside"):
        parity.check_ids(ids, np.array([1, 4]))
    with pytest.raises(InputError, match="lengths must have shape"):
        parity.check_ids(ids, np.array([1, 2, 3]))
    assert parity.check_ids(ids, None)[1].tolist() == [3, 3]

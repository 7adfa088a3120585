"""Fuzzing `pdanet.load` with mutated machine files (JSON specs of every kind, JFLAP XML).

Property: `load` either returns a machine (which then round-trips through the JSON format) or
raises a `pdanet.errors` exception whose message names where the defect is: a JSON path
(``$…``), an XPath (``/structure…``), or at least the file. Never another exception type.

The fast tier runs a few hundred examples; the ``slow`` tests run many more.
"""

from __future__ import annotations

import copy
import json
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata import tasks
from pdanet.automata.io import dumps, loads, to_dict
from pdanet.errors import PdanetError, SpecError

DATA = Path(__file__).parent / "data"
JFLAP_FILES = ("anbn.jff", "ends_ab.jff", "even_a.jff", "even_palindromes.jff", "mealy_flip.jff")


def _seed_specs() -> list[dict]:
    """Valid specs of every kind `load` reads: dfa, nfa, mealy, dpda, pda (from the JFLAP test
    files), dpdt and dyck (from the named tasks), and an NFA with several start states."""
    specs = [to_dict(pn.load(DATA / f)) for f in JFLAP_FILES]
    specs.append(to_dict(tasks.get("reversal")))
    specs.append(to_dict(tasks.get("dyck")))
    nfa = to_dict(pn.load(DATA / "ends_ab.jff"))
    nfa["start"] = nfa["states"][:2]
    specs.append(nfa)
    return specs


SEEDS = _seed_specs()
KINDS = {s["kind"] for s in SEEDS}
WORKDIR = Path(tempfile.mkdtemp(prefix="pdanet-fuzz-"))


# --- JSON values and mutations -----------------------------------------------------------------

def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 5), st.integers(-2**70, 2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1.0, 0.0, -1.5]),
    st.text(max_size=4), st.sampled_from(["ε", "⊥", "", " ", " a", "a ", "Z", "q0", "é", "\u200b",
                                          "\x00", "😀", "a b", "$", "<END>", "dfa", "pda",
                                          "\ud800", "a\udfff"]),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=3),
    st.dictionaries(st.text(max_size=5), SCALARS, max_size=3),
    st.integers(1, 300).map(_deep),
)


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every location in a JSON value (the root included)."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, path + (i,))
    return out


def _get(value: Any, path: tuple) -> Any:
    for p in path:
        value = value[p]
    return value


@st.composite
def mutated_specs(draw) -> dict | list | Any:
    """A seed spec with 1–4 mutations at random locations: replace a value (wrong types, huge
    numbers, deep nesting, unicode, reserved names), delete a field or element, add a field,
    duplicate an element, or put another value of the spec in its place."""
    spec = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(spec)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "delete", "add", "duplicate", "swap", "huge"]))
        if not path:
            if op == "replace":
                return draw(VALUES)
            continue
        parent, key = _get(spec, path[:-1]), path[-1]
        if op == "replace":
            parent[key] = draw(VALUES)
        elif op == "huge":
            parent[key] = draw(st.sampled_from([10 ** 40, -(10 ** 40), 10 ** 99, 2 ** 63, 1e308]))
        elif op == "delete":
            del parent[key]
        elif op == "add":
            if isinstance(parent, dict):
                parent[draw(st.text(max_size=6))] = draw(VALUES)
            else:
                parent.insert(draw(st.integers(0, len(parent))), draw(VALUES))
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        elif op == "swap":
            other = _get(spec, draw(st.sampled_from(paths)))
            if other is not parent:
                parent[key] = copy.deepcopy(other)
    return spec


@st.composite
def spec_texts(draw) -> str | bytes:
    """JSON text of a mutated spec, sometimes further damaged at the text level: a repeated
    field, a huge integer literal, deep nesting, truncation, stray characters, bad UTF-8."""
    value = draw(mutated_specs())
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    how = draw(st.sampled_from(["none"] * 6 + ["dup_field", "huge_literal", "deep", "truncate",
                                               "insert", "bytes"]))
    if how == "dup_field" and text.startswith("{") and len(text) > 2:
        text = text[:-1] + ', "kind": "dfa", "format": 1}'
    elif how == "huge_literal":
        text = text.replace("1", "1" * draw(st.integers(100, 6000)), 1)
    elif how == "deep":
        n = draw(st.integers(500, 60_000))
        text = text[:-1] + ', "states": ' + "[" * n + "]" * n + "}" if text.endswith("}") else text
    elif how == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif how == "insert":
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.text(min_size=1, max_size=3)) + text[i:]
    elif how == "bytes":
        raw = text.encode("utf-8", "surrogatepass")  # lone surrogates: invalid UTF-8 bytes
        i = draw(st.integers(0, len(raw)))
        return raw[:i] + draw(st.binary(min_size=1, max_size=3)) + raw[i:]
    return text


# --- JFLAP mutations ---------------------------------------------------------------------------

JFLAP_TEXTS = {f: (DATA / f).read_text(encoding="utf-8") for f in JFLAP_FILES}
XML_TEXT = st.one_of(
    st.sampled_from(["", " ", "\n\t", "a", "b", "ab", "Z", "AZ", "ε", "⊥", "λ", "0", "1", "7",
                     "q0", "fa", "pda", "mealy", "turing", "A B", "é", "😀"]),
    st.text(max_size=3),
)
DTD_PREFIXES = [
    '<!DOCTYPE s [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;">]>',
    '<!DOCTYPE s [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
    '<!DOCTYPE structure SYSTEM "http://example.invalid/jflap.dtd">',
]


def _clean(text: str) -> str:
    """XML 1.0 allows no control characters other than tab, newline and carriage return."""
    return "".join(c for c in text if c in "\t\n\r" or ord(c) >= 32)


@st.composite
def jflap_texts(draw) -> str | bytes:
    """A JFLAP test file with 1–4 tree mutations (delete, duplicate or move an element, change
    an element's text or a state's id / name, rename a tag, add a stray element), sometimes also
    damaged at the text level (a DTD with entities, truncation, stray characters, bad UTF-8)."""
    name = draw(st.sampled_from(JFLAP_FILES))
    root = ET.fromstring(JFLAP_TEXTS[name])
    for _ in range(draw(st.integers(1, 4))):
        elements = list(root.iter())
        el = draw(st.sampled_from(elements))
        parents = {c: p for p in elements for c in p}
        op = draw(st.sampled_from(["text", "text", "delete", "duplicate", "attr", "rename",
                                   "add", "move"]))
        parent = parents.get(el)
        if op == "text":
            el.text = _clean(draw(XML_TEXT))
        elif op == "delete" and parent is not None:
            parent.remove(el)
        elif op == "duplicate" and parent is not None:
            parent.append(copy.deepcopy(el))
        elif op == "attr":
            el.set(draw(st.sampled_from(["id", "name"])), _clean(draw(XML_TEXT)))
        elif op == "rename":
            el.tag = draw(st.sampled_from(["state", "transition", "read", "from", "to", "pop",
                                           "push", "initial", "final", "automaton", "x"]))
        elif op == "add":
            child = ET.SubElement(el, draw(st.sampled_from(["state", "transition", "read",
                                                           "initial", "final", "from"])))
            child.text = _clean(draw(XML_TEXT))
        elif op == "move" and parent is not None and parent is not root:
            parent.remove(el)
            root.append(el)
    text = ET.tostring(root, encoding="unicode")
    how = draw(st.sampled_from(["none"] * 5 + ["dtd", "truncate", "insert", "bytes", "entity"]))
    if how == "dtd":
        text = '<?xml version="1.0"?>' + draw(st.sampled_from(DTD_PREFIXES)) + text
    elif how == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif how == "insert":
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(["<", "&", "&amp;", "]]>", "<!--", "\x00", "é"])) \
            + text[i:]
    elif how == "entity":
        text = text.replace("<read>", "<read>&lol;", 1)
    elif how == "bytes":
        raw = text.encode("utf-8")
        i = draw(st.integers(0, len(raw)))
        return raw[:i] + draw(st.binary(min_size=1, max_size=3)) + raw[i:]
    return text


# --- the property ------------------------------------------------------------------------------

_counter = iter(range(10 ** 9))


def _load_or_error(content: str | bytes, suffix: str) -> None:
    path = WORKDIR / f"case{next(_counter)}{suffix}"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
    try:
        machine = pn.load(path)
    except PdanetError as exc:
        message = str(exc)
        assert str(path) in message, f"error does not name the file: {type(exc).__name__}: " \
                                     f"{message[:300]}"
        if isinstance(exc, SpecError):
            assert exc.path.startswith(("$", "/")), exc.path
        return
    finally:
        path.unlink(missing_ok=True)
    # accepted: a valid machine, which the JSON format writes and reads back unchanged
    again = loads(dumps(machine))
    assert again == machine


FAST = settings(max_examples=250, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(max_examples=4000, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_seeds_load():
    assert KINDS == {"dfa", "nfa", "mealy", "dpda", "pda", "dpdt", "dyck"}
    for spec in SEEDS:
        assert to_dict(loads(json.dumps(spec))) == spec
    for f in JFLAP_FILES:
        pn.load(DATA / f)


@FAST
@given(spec_texts())
def test_json_spec_fuzz(text):
    _load_or_error(text, ".json")


@FAST
@given(jflap_texts())
def test_jflap_fuzz(text):
    _load_or_error(text, ".jff")


@pytest.mark.slow
@SLOW
@given(spec_texts())
def test_json_spec_fuzz_many(text):
    _load_or_error(text, ".json")


@pytest.mark.slow
@SLOW
@given(jflap_texts())
def test_jflap_fuzz_many(text):
    _load_or_error(text, ".jff")

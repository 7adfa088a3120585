"""Machine files: a versioned JSON format for every machine kind, JFLAP import, and converters
from automata-lib and pyformlang objects (`from_automata_lib`, `from_pyformlang`, read by their
attributes: neither library is needed).

The JSON format is described in ``docs/spec-format.md``. In short: an object with ``"format": 1``,
a ``"kind"`` (``dfa``, ``mealy``, ``nfa``, ``dpda``, ``pda``, ``dpdt``, ``dyck``, and the
probabilistic ``pfsa`` and ``pdpda``), the states and
alphabets as JSON lists, and one object per transition. States and symbols are JSON strings or
integers; a state may also be a list of states, read as a tuple. In symbol fields ε (no input read / nothing emitted) is written ``"ε"`` or ``null`` and
the bottom-of-stack marker ⊥ is written ``"⊥"``; both strings are therefore reserved and cannot be
alphabet symbols. A pushed string is a JSON list written top first: ``["A", "⊥"]`` leaves ``A`` on
top of ``⊥`` (the orientation of the machines themselves).

Every defect in a file raises `SpecError` whose ``path`` is the JSON path of the bad field, e.g.
``$.transitions[3].target``. Types are strict: ``true`` is not the integer 1 and ``1.0`` is not an
integer; an integer literal of more than `MAX_INT_DIGITS` digits, a state nested more than
`MAX_STATE_DEPTH` lists deep, JSON nested deeper than the reader allows, and a field that occurs
twice in one object are all refused with the path.

The format's constants and its writer live in `pdanet.automata.spec` (which needs no machine
class, so that `Machine.save` can use it); this module finds an object's kind, and reads.

Probabilistic machines (`PROB_KINDS`: ``pfsa``, ``pdpda``; `pdanet.automata.probabilistic`)
write themselves (their ``to_dict``): every transition row has a ``"probability"``, and a
``"final"`` list gives the EOS probabilities (``{"state", "probability"}``; for a pdpda
``{"state", "top", "probability"}``). A probability is a JSON number (a float, kept as such) or
a string ``"n/d"`` / ``"n"`` or a JSON integer (exact: a Fraction).

Weighted pushdown machines (`WEIGHTED_KINDS`: ``wpda`` for `WeightedPDA`, ``wpdt`` for
`WeightedPDT`; `pdanet.automata.weighted`) have the fields ``semiring`` (a name of
`pdanet.automata.semiring.SEMIRINGS`, default ``"real"``), ``states``, ``input_alphabet``,
``stack_alphabet`` (and ``output_alphabet`` for a wpdt), ``start``, ``accepting`` (a list of
states, or ``null``/absent: every run counts, whatever state it ends in) and ``empty_stack``
(``true``: a run counts only when it ends with the stack ⊥; default ``false``). A transition row
``{"source", "symbol", "top", "target", "op", "operand", "weight"}`` is the key
``(source, top, symbol, target, op, operand)``: ``op`` is ``"push"`` (``operand`` the pushed stack
symbol), ``"replace"`` (``operand`` the new top; ``"⊥"`` only on top ⊥, a no-op) or ``"pop"``
(``operand`` absent or ``null``); ``symbol`` ``"ε"``/``null`` is an ε-arc. A wpdt row also has
``"output"``: an output symbol, ``"ε"``/``null`` (nothing), or a list of output symbols. The
``weight`` is a value of the file's semiring, as the machine holds it: ``true``/``false`` for
``boolean``; for the others a JSON number (kept as a float), or a string ``"n/d"`` / ``"n"`` or a
JSON integer (exact: a Fraction; the ``rational`` semiring keeps it exact, the float semirings
convert it), or ``"inf"`` / ``"-inf"`` for the infinite zeros of ``tropical`` and ``log``/
``viterbi``. The writer puts rational weights as ``"n/d"`` strings, float weights as JSON numbers.
A bad weight is a SpecError at ``$.transitions[i].weight`` naming the transition.
"""

from __future__ import annotations

import json
import math
import os
import re
import xml.etree.ElementTree as ET
import xml.parsers.expat
from collections.abc import Callable, Hashable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any, NoReturn

from pdanet.automata import semiring as srm
from pdanet.automata import spec
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.base import Machine
from pdanet.automata.bounded import DyckKM
from pdanet.automata.dfa import DFA
from pdanet.automata.nfa import NFA
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.probabilistic import PFSA, ProbabilisticDPDA
from pdanet.automata.spec import (
    BOTTOM_TEXT,
    EPSILON_TEXT,
    FORMAT_VERSION,
    KINDS,
    RESERVED,
    _state,
    _sym,
    _syms,
    symbol_str,
)
from pdanet.automata.weighted import OPS, WeightedPDA, WeightedPDT
from pdanet.errors import EpsilonLoopError, InputError, PdanetError, SpecError

_TOP_OPTIONAL = ("name", "description")
MAX_INT_DIGITS = 100     # longer integer literals are refused (no machine needs them)
MAX_STATE_DEPTH = 32     # a state is a string, an integer or a list of states, this deep at most
PROB_KINDS = ("pfsa", "pdpda")  # written by the machines themselves (see the module docstring)
WEIGHTED_KINDS = ("wpda", "wpdt")  # written here (see the module docstring)
ALL_KINDS = KINDS + PROB_KINDS + WEIGHTED_KINDS


class _HugeInt:
    """An integer literal too long to convert (kept as its text so the error can describe it)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"{self.text[:20]}…({len(self.text):,} characters)"


class _Object(dict):
    """A JSON object, with the keys that occurred more than once in it."""

    duplicates: tuple = ()


def _object(pairs: list) -> _Object:
    obj = _Object(pairs)
    if len(obj) != len(pairs):
        seen: set = set()
        obj.duplicates = tuple(k for k, _ in pairs if k in seen or seen.add(k))
    return obj


def _parse_int(text: str) -> int | _HugeInt:
    return int(text) if len(text.lstrip("-")) <= MAX_INT_DIGITS else _HugeInt(text)


# --------------------------------------------------------------------------------------------
# kinds and writing (the writer itself is `pdanet.automata.spec`)
# --------------------------------------------------------------------------------------------
def kind_of(machine: Any) -> str:
    """The file kind of a machine object (InputError for objects that have no file format)."""
    if isinstance(machine, NFA):  # not a Machine: it reads no input step by step
        return "nfa"
    if isinstance(machine, WeightedPDA):
        return "wpda"
    if isinstance(machine, WeightedPDT):  # a wrapper of a WeightedPDA, not a Machine
        return "wpdt"
    kind = machine.file_kind if isinstance(machine, Machine) else None
    if kind is None:
        raise InputError(f"{type(machine).__name__} has no file format; kinds with one: "
                         f"{', '.join(ALL_KINDS)}")
    return kind


def to_dict(machine: Any) -> dict:
    """The JSON-ready dict of a machine (see module docstring and docs/spec-format.md)."""
    kind = kind_of(machine)
    if kind in WEIGHTED_KINDS:
        return _weighted_dict(machine, kind)
    return machine.to_dict() if kind in PROB_KINDS else spec.to_dict(machine, kind)


def dumps(machine: Any) -> str:
    """The machine as JSON text (UTF-8, ε and ⊥ written as such): one top-level field per line,
    one transition per line."""
    kind = kind_of(machine)
    if kind in WEIGHTED_KINDS:
        return _rows_dumps(_weighted_dict(machine, kind))
    return machine.dumps() if kind in PROB_KINDS else spec.dumps(machine, kind)


def save(machine: Any, path: str | os.PathLike) -> None:
    """Write `machine` to `path` in the JSON format (creating or replacing the file)."""
    kind = kind_of(machine)
    if kind in PROB_KINDS:
        machine.save(path)
    elif kind in WEIGHTED_KINDS:
        text = _rows_dumps(_weighted_dict(machine, kind))
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(f"{machine!r} has a name, state or symbol with the lone surrogate "
                             f"{text[exc.start]!r}, which UTF-8 cannot store; rename it") from None
        Path(path).write_bytes(data)
    else:
        spec.save(machine, path, kind)


def _rows_dumps(d: dict) -> str:
    """JSON text: `pdanet.automata.spec.format_json`."""
    from pdanet.automata.spec import format_json

    return format_json(d, allow_nan=False)


def _weight_text(sr: srm.Semiring, w: Any, where: str) -> bool | str | float:
    """A weight as the file holds it: booleans as such, Fractions as "n/d", other values as
    JSON numbers, infinities as "inf" / "-inf"."""
    try:
        w = sr.check(w, where)
    except InputError as exc:
        raise InputError(f"{exc}; it cannot be saved") from None
    if sr is srm.BOOLEAN:
        return bool(w)
    if isinstance(w, Fraction):
        return str(w)
    f = float(w)
    return f if math.isfinite(f) else ("inf" if f > 0 else "-inf")


def _weighted_dict(machine: WeightedPDA | WeightedPDT, kind: str) -> dict:
    """The JSON-ready dict of a `WeightedPDA` (kind ``wpda``) or `WeightedPDT` (``wpdt``)."""
    pda = machine.pda if kind == "wpdt" else machine
    d: dict[str, Any] = {"format": FORMAT_VERSION, "kind": kind}
    if pda.name is not None:
        d["name"] = str(pda.name)
    d["semiring"] = pda.semiring.name
    d["states"] = [_state(q) for q in pda.states]
    d["input_alphabet"] = _syms(pda.alphabet, "input symbol")
    d["stack_alphabet"] = _syms(pda.stack_alphabet, "stack symbol")
    if kind == "wpdt":
        d["output_alphabet"] = _syms(machine.output_alphabet, "output symbol")
    d["start"] = _state(pda.start)
    d["accepting"] = (None if pda.accepting is None else
                      [_state(q) for q in pda.states if q in pda.accepting])
    d["empty_stack"] = pda.empty_stack
    sidx = {q: i for i, q in enumerate(pda.states)}
    outs = machine.output_alphabet if kind == "wpdt" else None

    def order(key: tuple) -> tuple:
        q, x, a, r, op, y = key[:6]
        return (sidx[q], -1 if a is EPSILON else pda.alphabet.index(a), pda.stack_index(x),
                sidx[r], OPS.index(op), -1 if y is None else pda.stack_index(y),
                tuple(outs.index(o) for o in key[6]) if kind == "wpdt" else ())

    rows = []
    for key in sorted(machine.transitions, key=order):
        q, x, a, r, op, y = key[:6]
        row: dict[str, Any] = {"source": _state(q), "symbol": _sym(a, "input symbol"),
                               "top": _sym(x, "stack symbol"), "target": _state(r), "op": op}
        if op != "pop":
            row["operand"] = _sym(y, "stack symbol")
        if kind == "wpdt":
            out = key[6]
            row["output"] = (_sym(out[0], "output symbol") if len(out) == 1 else
                             EPSILON_TEXT if not out else _syms(out, "output symbol"))
        row["weight"] = _weight_text(pda.semiring, machine.transitions[key],
                                     f"transition {key!r}")
        rows.append(row)
    d["transitions"] = rows
    return d


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------
class _Reader:
    """Validation helpers that raise SpecError with a JSON path (and the file, when known)."""

    def __init__(self, source: str | None):
        self.source = source

    def fail(self, path: str, message: str) -> NoReturn:
        if self.source:
            message = f"{message} (in {self.source})"
        raise SpecError(path, message)

    def obj(self, value: Any, path: str) -> dict:
        if not isinstance(value, dict):
            self.fail(path, f"expected a JSON object, got {_jtype(value)}")
        for key in getattr(value, "duplicates", ()):
            self.fail(_field(path, key), f"field {key!r} occurs twice; give it once")
        return value

    def only(self, obj: dict, path: str, allowed: tuple) -> None:
        for key in obj:
            if key not in allowed:
                self.fail(_field(path, key), f"unknown field {key!r}; allowed fields: "
                          f"{', '.join(allowed)}")

    def get(self, obj: dict, path: str, key: str, default: Any = ...) -> Any:
        if key not in obj:
            if default is ...:
                self.fail(f"{path}.{key}", f"missing required field {key!r}")
            return default
        return obj[key]

    def list(self, value: Any, path: str) -> list:
        if not isinstance(value, list):
            self.fail(path, f"expected a JSON list, got {_jtype(value)}")
        return value

    def int(self, value: Any, path: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"expected an integer, got {_jtype(value)}")
        if value < minimum:
            self.fail(path, f"must be at least {minimum}, got {value}")
        return value

    def text(self, value: Any, path: str, choices: tuple) -> str:
        if value not in choices:
            self.fail(path, f"expected one of {', '.join(map(repr, choices))}, got {value!r}")
        return value

    def plain(self, value: Any, path: str, what: str) -> str | int:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.fail(path, f"{what} must be a JSON string or integer, got {_jtype(value)}")
        return self.unicode(value, path) if isinstance(value, str) else value

    def unicode(self, value: str, path: str) -> str:
        """`value` when it is valid Unicode (no lone surrogate such as "\\ud800")."""
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                self.fail(path, f"the string holds the lone surrogate {value[exc.start]!r}, "
                          "which is not a Unicode character")
        return value

    def state(self, value: Any, path: str, depth: int = 0) -> Hashable:
        """A state: a string, an integer, or a list of states (read as a tuple), at most
        `MAX_STATE_DEPTH` lists deep."""
        if isinstance(value, list):
            if depth >= MAX_STATE_DEPTH:
                self.fail(path, f"a state nested more than {MAX_STATE_DEPTH} lists deep; "
                          "flatten it or name it with a string")
            return tuple(self.state(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.fail(path, f"a state must be a JSON string, integer or list of states, got "
                      f"{_jtype(value)}")
        return self.unicode(value, path) if isinstance(value, str) else value

    def declared(self, values: Any, path: str, what: str, symbols: bool) -> list:
        """A duplicate-free list of states or alphabet symbols."""
        seen: dict = {}
        out = []
        for i, v in enumerate(self.list(values, path)):
            p = f"{path}[{i}]"
            v = self.plain(v, p, what) if symbols else self.state(v, p)
            if symbols and isinstance(v, str):
                if v in RESERVED:
                    self.fail(p, f"{v!r} is reserved ({'ε' if v == 'ε' else 'bottom of stack'}) "
                              f"and cannot be a {what}")
                if v == "" or v.strip() != v:
                    self.fail(p, f"{what} {v!r} is empty or has surrounding whitespace")
            if v in seen:
                self.fail(p, f"{what} {v!r} is declared twice (first at {path}[{seen[v]}])")
            seen[v] = i
            out.append(v)
        return out

    def member(self, value: Any, path: str, pool: list, what: str, *, eps: bool = False,
               bottom: bool = False) -> Any:
        """A reference to a declared state/symbol; ε or ⊥ where allowed (symbols only)."""
        if what == "state":
            value = self.state(value, path)
        else:
            if eps and (value is None or value == EPSILON_TEXT):
                return EPSILON
            if bottom and value == BOTTOM_TEXT:
                return BOTTOM
            if value is None or value == EPSILON_TEXT:
                self.fail(path, f"ε is not allowed here; expected a {what}")
            if value == BOTTOM_TEXT:
                self.fail(path, f"⊥ is not allowed here; expected a {what}")
            value = self.plain(value, path, what)
        if value not in self._lookup(pool):
            shown = ", ".join(map(repr, pool[:10])) + (", …" if len(pool) > 10 else "")
            self.fail(path, f"unknown {what} {value!r}; declared: [{shown}]")
        return value

    def _lookup(self, pool: list) -> frozenset:
        cache = self.__dict__.setdefault("_sets", {})
        if id(pool) not in cache:
            cache[id(pool)] = (pool, frozenset(pool))  # keep pool alive so its id stays unique
        return cache[id(pool)][1]


def _field(path: str, key: str) -> str:
    """The JSON path of field `key` of the object at `path`: ``$.a`` or ``$["odd key"]``."""
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def _jtype(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, _HugeInt):
        return (f"an integer of {len(value.text.lstrip('-')):,} digits (at most "
                f"{MAX_INT_DIGITS} allowed)")
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def from_dict(data: Any, source: str | None = None) -> Any:
    """The machine described by a JSON-ready dict; SpecError (with a JSON path) on any defect."""
    r = _Reader(source)
    d = r.obj(data, "$")
    fmt = r.get(d, "$", "format")
    if isinstance(fmt, bool) or not isinstance(fmt, int):
        r.fail("$.format", f"expected the integer {FORMAT_VERSION}, got {_jtype(fmt)}")
    if fmt != FORMAT_VERSION:
        r.fail("$.format", f"unsupported format {fmt!r}; this version of pdanet reads format "
               f"{FORMAT_VERSION}")
    kind = r.text(r.get(d, "$", "kind"), "$.kind", ALL_KINDS)
    name = r.get(d, "$", "name", None)
    for field in ("name", "description"):
        value = r.get(d, "$", field, None)
        if value is not None and not isinstance(value, str):
            r.fail(f"$.{field}", f"expected a string, got {_jtype(value)}")
        if value is not None:
            r.unicode(value, f"$.{field}")
    try:
        return _READERS[kind](r, d, name)
    except SpecError:
        raise
    except PdanetError as exc:  # the constructor found a defect the checks above did not
        r.fail("$", f"{type(exc).__name__}: {exc}")


def _read_dyck(r: _Reader, d: dict, name: str | None) -> DyckKM:
    r.only(d, "$", ("format", "kind", "k", "m") + _TOP_OPTIONAL)
    k = r.int(r.get(d, "$", "k"), "$.k", 1)
    m = r.int(r.get(d, "$", "m"), "$.m", 1)
    return DyckKM(k, m)


def _read_common(r: _Reader, d: dict, alphabet_key: str,
                 many_starts: bool = False) -> tuple[list, list, Any, list]:
    states = r.declared(r.get(d, "$", "states"), "$.states", "state", symbols=False)
    alphabet = r.declared(r.get(d, "$", alphabet_key), f"$.{alphabet_key}", "symbol", True)
    start = r.get(d, "$", "start")
    if many_starts and isinstance(start, list):
        if not start:
            r.fail("$.start", "an NFA needs at least one start state")
        start = [r.member(q, f"$.start[{i}]", states, "state") for i, q in enumerate(start)]
    else:
        start = r.member(start, "$.start", states, "state")
    acc_raw = r.list(r.get(d, "$", "accepting", []), "$.accepting")
    accepting = [r.member(q, f"$.accepting[{i}]", states, "state") for i, q in enumerate(acc_raw)]
    return states, alphabet, start, accepting


def _rows(r: _Reader, d: dict, fields: tuple, optional: tuple = ()) -> list[tuple[str, dict]]:
    rows = r.list(r.get(d, "$", "transitions"), "$.transitions")
    out = []
    for i, row in enumerate(rows):
        p = f"$.transitions[{i}]"
        row = r.obj(row, p)
        r.only(row, p, fields + optional)
        for f in fields:
            r.get(row, p, f)
        out.append((p, row))
    return out


def _read_fa(r: _Reader, d: dict, name: str | None) -> Any:
    kind = d["kind"]
    extra = ("output_alphabet",) if kind == "mealy" else ("output_kind",) if kind == "dfa" else ()
    r.only(d, "$", ("format", "kind", "states", "alphabet", "start", "accepting", "transitions")
           + extra + _TOP_OPTIONAL)
    states, alphabet, start, accepting = _read_common(r, d, "alphabet", kind == "nfa")
    outs = None
    if kind == "mealy":
        outs = r.declared(r.get(d, "$", "output_alphabet"), "$.output_alphabet",
                          "output symbol", True)
    fields = ("source", "symbol", "target") + (("output",) if kind == "mealy" else ())
    trans: dict = {}
    first: dict = {}
    outputs: dict = {}
    for p, row in _rows(r, d, fields):
        q = r.member(row["source"], f"{p}.source", states, "state")
        a = r.member(row["symbol"], f"{p}.symbol", alphabet, "symbol", eps=kind == "nfa")
        t = r.member(row["target"], f"{p}.target", states, "state")
        if kind == "nfa":
            trans.setdefault((q, a), set()).add(t)
            continue
        if (q, a) in trans:
            r.fail(p, f"second transition from state {q!r} on {a!r} (first at {first[(q, a)]}); "
                   "a DFA has at most one: use kind 'nfa' for a nondeterministic automaton")
        trans[(q, a)], first[(q, a)] = t, p
        if kind == "mealy":
            outputs[(q, a)] = r.member(row["output"], f"{p}.output", outs, "output symbol")
    if kind == "nfa":
        return NFA(states, alphabet, trans, start, accepting, name=name)
    if kind == "mealy":
        return DFA(states, alphabet, trans, start, accepting, outputs=outputs,
                   output_alphabet=outs, name=name)
    output_kind = r.text(r.get(d, "$", "output_kind", "accept"), "$.output_kind",
                         ("accept", "next_set"))
    return DFA(states, alphabet, trans, start, accepting, output_kind=output_kind, name=name)


def _read_pushdown(r: _Reader, d: dict, name: str | None) -> Any:
    kind = d["kind"]
    top = ("format", "kind", "states", "input_alphabet", "stack_alphabet", "start", "accepting",
           "transitions") + _TOP_OPTIONAL
    top += ("output_alphabet",) if kind == "dpdt" else ("acceptance",)
    r.only(d, "$", top)
    states, alphabet, start, accepting = _read_common(r, d, "input_alphabet")
    stack = r.declared(r.get(d, "$", "stack_alphabet"), "$.stack_alphabet", "stack symbol", True)
    outs = None
    if kind == "dpdt":
        outs = r.declared(r.get(d, "$", "output_alphabet"), "$.output_alphabet",
                          "output symbol", True)
    fields = ("source", "symbol", "pop", "target", "push") + (("output",) if kind == "dpdt" else ())
    trans: dict = {}
    first: dict = {}
    for p, row in _rows(r, d, fields):
        q, x, s, t, gamma = _pushdown_move(r, p, row, states, alphabet, stack)
        key = (q, x, s)
        if kind == "pda":
            trans.setdefault(key, set()).add((t, gamma))
            continue
        if key in trans:
            r.fail(p, f"second transition on (state {q!r}, input {symbol_str(x)}, top "
                   f"{symbol_str(s)}) (first at "
                   f"{first[key]}); a deterministic machine has at most one: use kind 'pda'")
        first[key] = p
        if kind == "dpdt":
            y = row["output"]
            if isinstance(y, list):
                y = tuple(r.member(v, f"{p}.output[{j}]", outs, "output symbol")
                          for j, v in enumerate(y))
            else:
                y = r.member(y, f"{p}.output", outs, "output symbol", eps=True)
            trans[key] = (t, y, gamma)
        else:
            trans[key] = (t, gamma)
    if kind == "dpdt":
        return DPDT(states, alphabet, outs, stack, trans, start, accepting, name=name)
    acceptance = r.text(r.get(d, "$", "acceptance", "final_state"), "$.acceptance",
                        ("final_state", "empty_stack"))
    cls = DPDA if kind == "dpda" else PDA
    return cls(states, alphabet, stack, trans, start, accepting, acceptance=acceptance, name=name)


def _probability(r: _Reader, value: Any, path: str) -> Fraction | float:
    """A probability field: a float as such; an integer or a string "n/d" exactly."""
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    if isinstance(value, str) and _FRACTION.fullmatch(value.strip()):
        _, _, den = value.strip().partition("/")
        if den and int(den) == 0:
            r.fail(path, f"the probability {value!r} divides by zero")
        return Fraction(value.strip())
    r.fail(path, f"a probability must be a JSON number or a string \"n/d\", got {_jtype(value)}"
           + (f" {value!r}" if isinstance(value, str) else ""))


_FRACTION = re.compile(r"[0-9]{1,100}(/[0-9]{1,100})?")


def _read_prob_rows(r: _Reader, d: dict, fields: tuple) -> list[tuple[str, dict]]:
    rows = r.list(r.get(d, "$", "final", []), "$.final")
    out = []
    for i, row in enumerate(rows):
        p = f"$.final[{i}]"
        row = r.obj(row, p)
        r.only(row, p, fields)
        for f in fields:
            r.get(row, p, f)
        out.append((p, row))
    return out


def _read_pfsa(r: _Reader, d: dict, name: str | None) -> PFSA:
    r.only(d, "$", ("format", "kind", "states", "alphabet", "start", "final", "transitions")
           + _TOP_OPTIONAL)
    states = r.declared(r.get(d, "$", "states"), "$.states", "state", symbols=False)
    alphabet = r.declared(r.get(d, "$", "alphabet"), "$.alphabet", "symbol", True)
    start = r.member(r.get(d, "$", "start"), "$.start", states, "state")
    final: dict = {}
    for p, row in _read_prob_rows(r, d, ("state", "probability")):
        q = r.member(row["state"], f"{p}.state", states, "state")
        if q in final:
            r.fail(p, f"second EOS probability for state {q!r}")
        final[q] = _probability(r, row["probability"], f"{p}.probability")
    trans: dict = {}
    first: dict = {}
    for p, row in _rows(r, d, ("source", "symbol", "target", "probability")):
        q = r.member(row["source"], f"{p}.source", states, "state")
        a = r.member(row["symbol"], f"{p}.symbol", alphabet, "symbol")
        t = r.member(row["target"], f"{p}.target", states, "state")
        if (q, a) in trans:
            r.fail(p, f"second transition from state {q!r} on {a!r} (first at {first[(q, a)]}); "
                   "a PFSA is deterministic: one target per (state, symbol)")
        first[(q, a)] = p
        trans[(q, a)] = (t, _probability(r, row["probability"], f"{p}.probability"))
    return PFSA(states, alphabet, trans, start, final, name=name)


def _read_pdpda(r: _Reader, d: dict, name: str | None) -> ProbabilisticDPDA:
    r.only(d, "$", ("format", "kind", "states", "input_alphabet", "stack_alphabet", "start",
                    "final", "transitions") + _TOP_OPTIONAL)
    states = r.declared(r.get(d, "$", "states"), "$.states", "state", symbols=False)
    alphabet = r.declared(r.get(d, "$", "input_alphabet"), "$.input_alphabet", "symbol", True)
    stack = r.declared(r.get(d, "$", "stack_alphabet"), "$.stack_alphabet", "stack symbol", True)
    start = r.member(r.get(d, "$", "start"), "$.start", states, "state")
    final: dict = {}
    for p, row in _read_prob_rows(r, d, ("state", "top", "probability")):
        q = r.member(row["state"], f"{p}.state", states, "state")
        x = r.member(row["top"], f"{p}.top", stack, "stack symbol", bottom=True)
        if (q, x) in final:
            r.fail(p, f"second EOS probability for (state {q!r}, top {symbol_str(x)})")
        final[(q, x)] = _probability(r, row["probability"], f"{p}.probability")
    trans: dict = {}
    first: dict = {}
    for p, row in _rows(r, d, ("source", "symbol", "pop", "target", "push", "probability")):
        q, a, x, t, gamma = _pushdown_move(r, p, row, states, alphabet, stack)
        if (q, a, x) in trans:
            r.fail(p, f"second transition on (state {q!r}, input {symbol_str(a)}, top "
                   f"{symbol_str(x)}) (first at {first[(q, a, x)]}); a ProbabilisticDPDA is "
                   "deterministic")
        first[(q, a, x)] = p
        trans[(q, a, x)] = (t, gamma, _probability(r, row["probability"], f"{p}.probability"))
    return ProbabilisticDPDA(states, alphabet, stack, trans, start, final, name=name)


def _pushdown_move(r: _Reader, p: str, row: Mapping, states: Any, alphabet: Any, stack: Any
                   ) -> tuple[Any, Any, Any, Any, tuple]:
    """(source, input symbol or ε, popped top, target, pushed string top first) of the pushdown
    transition row at path `p`; ⊥ may be pushed only back, as the last symbol, by a move that
    pops it (`DPDA`'s convention), else SpecError at the offending field."""
    q = r.member(row["source"], f"{p}.source", states, "state")
    a = r.member(row["symbol"], f"{p}.symbol", alphabet, "input symbol", eps=True)
    x = r.member(row["pop"], f"{p}.pop", stack, "stack symbol", bottom=True)
    t = r.member(row["target"], f"{p}.target", states, "state")
    push = r.list(row["push"], f"{p}.push")
    gamma = tuple(r.member(g, f"{p}.push[{j}]", stack, "stack symbol", bottom=True)
                  for j, g in enumerate(push))
    for j, g in enumerate(gamma):
        if g is BOTTOM and not (x is BOTTOM and j == len(gamma) - 1):
            r.fail(f"{p}.push[{j}]", "⊥ may only be pushed back as the last symbol by a "
                   "transition that pops ⊥")
    if x is BOTTOM and (not gamma or gamma[-1] is not BOTTOM):
        r.fail(f"{p}.push", "a transition that pops ⊥ must push it back as the last symbol "
               "(⊥ never leaves the stack): e.g. [\"A\", \"⊥\"] or [\"⊥\"]")
    return q, a, x, t, gamma


def _weight(r: _Reader, sr: srm.Semiring, value: Any, path: str, where: str) -> Any:
    """A weight field in semiring `sr` (see the module docstring), checked by the semiring;
    SpecError at `path` naming the transition `where` otherwise."""
    if sr is srm.BOOLEAN:
        if not isinstance(value, bool):
            r.fail(path, f"{where}: a boolean-semiring weight is true or false, got "
                   f"{_jtype(value)}")
        return value
    if isinstance(value, str):
        text = value.strip()
        if text in ("inf", "+inf", "-inf") and sr is not srm.RATIONAL:
            value = float(text)
        elif _SIGNED_FRACTION.fullmatch(text):
            den = text.partition("/")[2]
            if den and int(den) == 0:
                r.fail(path, f"{where}: weight {value!r} has denominator zero")
            value = Fraction(text)
        else:
            inf = "" if sr is srm.RATIONAL else ", \"inf\" or \"-inf\""
            r.fail(path, f"{where}: weight {value!r} is not a number \"n/d\"{inf}")
    elif isinstance(value, int) and not isinstance(value, bool):
        value = Fraction(value)
    elif not isinstance(value, float):
        r.fail(path, f"{where}: a weight in the {sr.name} semiring is a JSON number or a string "
               f"\"n/d\", got {_jtype(value)}")
    try:
        return sr.check(value, where)
    except InputError as exc:
        r.fail(path, str(exc))


_SIGNED_FRACTION = re.compile(r"[-+]?[0-9]{1,100}(/[0-9]{1,100})?")


def _read_weighted(r: _Reader, d: dict, name: str | None) -> WeightedPDA | WeightedPDT:
    """A `WeightedPDA` (kind ``wpda``) or `WeightedPDT` (``wpdt``); see the module docstring."""
    kind = d["kind"]
    top = ("format", "kind", "semiring", "states", "input_alphabet", "stack_alphabet", "start",
           "accepting", "empty_stack", "transitions") + _TOP_OPTIONAL
    top += ("output_alphabet",) if kind == "wpdt" else ()
    r.only(d, "$", top)
    sr = srm.get(r.text(r.get(d, "$", "semiring", "real"), "$.semiring", tuple(srm.SEMIRINGS)))
    states = r.declared(r.get(d, "$", "states"), "$.states", "state", symbols=False)
    alphabet = r.declared(r.get(d, "$", "input_alphabet"), "$.input_alphabet", "symbol", True)
    stack = r.declared(r.get(d, "$", "stack_alphabet"), "$.stack_alphabet", "stack symbol", True)
    outs = None
    if kind == "wpdt":
        outs = r.declared(r.get(d, "$", "output_alphabet"), "$.output_alphabet",
                          "output symbol", True)
    start = r.member(r.get(d, "$", "start"), "$.start", states, "state")
    acc_raw = r.get(d, "$", "accepting", None)
    accepting = None if acc_raw is None else [
        r.member(q, f"$.accepting[{i}]", states, "state")
        for i, q in enumerate(r.list(acc_raw, "$.accepting"))]
    empty = r.get(d, "$", "empty_stack", False)
    if not isinstance(empty, bool):
        r.fail("$.empty_stack", f"expected true or false, got {_jtype(empty)}")
    fields = ("source", "symbol", "top", "target", "op", "weight")
    fields += ("output",) if kind == "wpdt" else ()
    trans: dict = {}
    first: dict = {}
    for p, row in _rows(r, d, fields, ("operand",)):
        q = r.member(row["source"], f"{p}.source", states, "state")
        a = r.member(row["symbol"], f"{p}.symbol", alphabet, "input symbol", eps=True)
        x = r.member(row["top"], f"{p}.top", stack, "stack symbol", bottom=True)
        t = r.member(row["target"], f"{p}.target", states, "state")
        op = r.text(row["op"], f"{p}.op", OPS)
        y = row.get("operand")
        if op == "pop":
            if y is not None:
                r.fail(f"{p}.operand", "a pop takes no operand; leave the field out (or null)")
            if x is BOTTOM:
                r.fail(f"{p}.op", "⊥ cannot be popped (it never leaves the stack)")
        else:
            if "operand" not in row:
                r.fail(f"{p}.operand", f"missing required field 'operand' (the {op}ed symbol)")
            y = r.member(y, f"{p}.operand", stack, "stack symbol", bottom=op == "replace")
            if op == "replace" and (x is BOTTOM) != (y is BOTTOM):
                r.fail(f"{p}.operand", "⊥ is replaced only by ⊥ (a no-op), and only ⊥ by ⊥")
        key = (q, x, a, t, op, y)
        if kind == "wpdt":
            o = row["output"]
            if isinstance(o, list):
                o = tuple(r.member(v, f"{p}.output[{j}]", outs, "output symbol")
                          for j, v in enumerate(o))
            else:
                o = r.member(o, f"{p}.output", outs, "output symbol", eps=True)
                o = () if o is EPSILON else (o,)
            key += (o,)
        if key in trans:
            r.fail(p, f"second row for the transition {key!r} (first at {first[key]}); give "
                   "each transition once, with its total weight")
        first[key] = p
        trans[key] = _weight(r, sr, row["weight"], f"{p}.weight", f"transition {key!r}")
    try:
        if kind == "wpdt":
            return WeightedPDT(states, alphabet, outs, stack, trans, start, sr, accepting,
                               empty, name=name)
        return WeightedPDA(states, alphabet, stack, trans, start, sr, accepting, empty,
                           name=name)
    except PdanetError as exc:  # name the row of the transition the constructor refused
        for key, p in first.items():
            if repr(key) in str(exc):
                r.fail(p, f"{type(exc).__name__}: {exc}")
        raise


_READERS: dict[str, Callable[[_Reader, dict, str | None], Any]] = {
    "dfa": _read_fa, "mealy": _read_fa, "nfa": _read_fa, "dyck": _read_dyck,
    "dpda": _read_pushdown, "pda": _read_pushdown, "dpdt": _read_pushdown,
    "pfsa": _read_pfsa, "pdpda": _read_pdpda, "wpda": _read_weighted, "wpdt": _read_weighted,
}


def loads(text: str, source: str | None = None) -> Any:
    """The machine described by JSON text; SpecError with line and column for malformed JSON."""
    if not isinstance(text, str):
        raise InputError(f"loads takes JSON text (a str), got {type(text).__name__}")
    try:
        data = json.loads(text, parse_int=_parse_int, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        _Reader(source).fail("$", f"malformed JSON at line {exc.lineno}, column {exc.colno}: "
                             f"{exc.msg}")
    except RecursionError:
        _Reader(source).fail("$", "JSON nested too deeply to read; a machine file needs only a "
                             "few levels of lists and objects")
    return from_dict(data, source)


def _read_text(path: str | os.PathLike, root: str = "$") -> str:
    """The file's UTF-8 text; SpecError at `root` (``$`` for JSON, ``/`` for XML) otherwise."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"machine file {str(path)!r} does not exist") from None
    except UnicodeDecodeError as exc:
        raise SpecError(root, f"{str(path)!r} is not UTF-8 text ({exc.reason} at byte "
                        f"{exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read machine file {str(path)!r}: {exc.strerror}") from None


def load(path: str | os.PathLike) -> Any:
    """Read a machine file: the JSON format, or JFLAP XML when the name ends in ``.jff``."""
    if str(path).lower().endswith(".jff"):
        return load_jflap(path)
    return loads(_read_text(path), source=str(path))


# --------------------------------------------------------------------------------------------
# JFLAP
# --------------------------------------------------------------------------------------------
JFLAP_BOTTOM = "Z"


def load_jflap(path: str | os.PathLike) -> Any:
    """Import a JFLAP ``.jff`` file of type ``fa`` (→ DFA, or NFA when nondeterministic),
    ``mealy`` (→ Mealy DFA) or ``pda`` (→ DPDA, or PDA when nondeterministic).

    JFLAP's empty ``<read/>`` is ε. JFLAP symbols are single characters other than whitespace;
    pop and push strings are read one symbol per character, leftmost on top (the orientation of
    our machines). Surrounding whitespace in an element's text is ignored, but a ``<read>``,
    ``<pop>``, ``<push>`` or ``<transout>`` whose text is only whitespace (``<read> </read>``) or
    holds whitespace between symbols is refused: it is neither ε (write ``<read/>``) nor a symbol.

    JFLAP's stack starts as the initial stack symbol ``Z``, which moves may pop for good (the
    stack is then empty and only moves with an empty pop apply). Import maps this faithfully: when
    ``Z`` never leaves the bottom (every move that pops ``Z`` pushes it back last, and no move
    pushes ``Z`` elsewhere) ``Z`` becomes ⊥ and the machine has the file's states; otherwise ``Z``
    is an ordinary stack symbol, ⊥ stands for JFLAP's empty stack, and a fresh start state
    ``init`` (primed if the name is taken) pushes ``Z`` over ⊥ by an ε-move before the file's
    initial state runs. A transition with an empty pop (JFLAP: "do not look at the stack") becomes
    one transition per stack symbol and ⊥, which pops that symbol and pushes it back under the
    pushed string. The acceptance mode is final state (JFLAP asks at run time), judged on any
    configuration reached after the whole input; the result is a DPDA when the moves are
    deterministic and no ε-move leaves a final state, a PDA otherwise.
    State names are JFLAP's names when unique, otherwise the ids. Errors are SpecErrors whose
    path is an XPath-like location such as ``/structure/automaton/transition[2]/to``. A file with
    a document type declaration (DTD) or entity declarations is refused before anything in it is
    expanded (no entity expansion, no external resources).
    """
    source = str(path)
    r = _Reader(source)
    text = _read_text(path, "/")
    _refuse_dtd(r, text)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line, col = exc.position
        r.fail("/", f"malformed XML at line {line}, column {col + 1}")
    try:
        return _jflap_machine(r, root, source)
    except SpecError:
        raise
    except PdanetError as exc:  # the constructor found a defect the checks did not
        r.fail("/structure", f"{type(exc).__name__}: {exc}")


class _Doctype(Exception):
    """Raised inside expat when a document type or entity declaration starts."""


def _refuse_dtd(r: _Reader, text: str) -> None:
    """SpecError when the XML text declares a DTD or entities (checked by expat, stopping at the
    declaration, so nothing is expanded); malformed XML is left to the parser proper."""

    def stop(*_: Any) -> None:
        raise _Doctype

    p = xml.parsers.expat.ParserCreate()
    p.StartDoctypeDeclHandler = stop
    p.EntityDeclHandler = stop
    try:
        p.Parse(text, True)
    except _Doctype:
        r.fail("/", "refused: entity declarations / DTD are not allowed in JFLAP files; remove "
               "the <!DOCTYPE …> declaration")
    except xml.parsers.expat.ExpatError:
        pass


_JFLAP_SYMBOL_TAGS = ("read", "pop", "push", "transout")


def _jflap_machine(r: _Reader, root: ET.Element, source: str) -> Any:
    """The machine of a parsed JFLAP document (see `load_jflap`)."""
    if root.tag != "structure":
        r.fail("/", f"expected a JFLAP <structure> root element, got <{root.tag}>")
    typ = (root.findtext("type") or "").strip()
    if typ not in ("fa", "pda", "mealy"):
        r.fail("/structure/type", f"JFLAP type {typ!r} is not supported; supported: fa, mealy, "
               "pda")
    auto = root.find("automaton")
    base = "/structure/automaton"
    if auto is None:
        auto, base = root, "/structure"
    ids, names, initial, finals = [], {}, [], []
    for i, st in enumerate(auto.findall("state"), start=1):
        p = f"{base}/state[{i}]"
        sid = st.get("id")
        if sid is None:
            r.fail(f"{p}/@id", "missing attribute 'id'")
        if sid in names:
            r.fail(f"{p}/@id", f"state id {sid!r} occurs twice")
        ids.append(sid)
        names[sid] = st.get("name") or sid
        if st.find("initial") is not None:
            initial.append(sid)
        if st.find("final") is not None:
            finals.append(sid)
    if not ids:
        r.fail(base, "the automaton has no states")
    label = dict(names) if len(set(names.values())) == len(names) else {s: s for s in ids}
    if len(initial) != 1:
        r.fail(base, f"expected exactly one initial state, found {len(initial)}")
    rows = []
    for i, tr in enumerate(auto.findall("transition"), start=1):
        p = f"{base}/transition[{i}]"
        row = {}
        for tag in ("from", "to", "read") + (("pop", "push") if typ == "pda" else ()) + (
                ("transout",) if typ == "mealy" else ()):
            el = tr.find(tag)
            if el is None:
                if tag in ("from", "to"):
                    r.fail(f"{p}/{tag}", f"missing <{tag}>")
                row[tag] = ""
            else:
                raw = el.text or ""
                row[tag] = raw.strip()
                if tag in _JFLAP_SYMBOL_TAGS and raw and not row[tag]:
                    r.fail(f"{p}/{tag}", f"<{tag}> holds only whitespace {raw!r}; write ε as an "
                           f"empty <{tag}/>, and whitespace cannot be a symbol")
                if tag in _JFLAP_SYMBOL_TAGS and any(c.isspace() for c in row[tag]):
                    r.fail(f"{p}/{tag}", f"<{tag}> text {row[tag]!r} holds whitespace; JFLAP "
                           "symbols are single non-blank characters")
        for tag in ("from", "to"):
            if row[tag] not in names:
                r.fail(f"{p}/{tag}", f"unknown state id {row[tag]!r}")
        rows.append((p, row))
    states = [label[s] for s in ids]
    start = label[initial[0]]
    accepting = [label[s] for s in finals]
    reads = sorted({c for _, row in rows for c in row["read"]})
    if typ == "pda":
        return _jflap_pda(r, rows, label, states, reads, start, accepting,
                          Path(source).stem)
    for p, row in rows:
        if len(row["read"]) > 1:
            r.fail(f"{p}/read", f"reads the string {row['read']!r}; split multi-symbol "
                   "transitions into one transition per symbol")
    trans: dict = {}
    for p, row in rows:
        key = (label[row["from"]], row["read"] or EPSILON)
        trans.setdefault(key, []).append((p, label[row["to"]], row.get("transout", "")))
    deterministic = all(k[1] is not EPSILON and len(v) == 1 for k, v in trans.items())
    if typ == "mealy":
        if not deterministic:
            r.fail(base, "a JFLAP Mealy machine must be deterministic without λ-moves")
        outputs = {}
        for key, [(p, _, y)] in trans.items():
            if len(y) != 1:
                r.fail(f"{p}/transout", f"output {y!r} is not one symbol; pdanet Mealy machines "
                       "emit exactly one symbol per transition")
            outputs[key] = y
        return DFA(states, reads, {k: v[0][1] for k, v in trans.items()}, start, accepting,
                   outputs=outputs, output_alphabet=sorted(set(outputs.values())),
                   name=Path(source).stem)
    if deterministic:
        return DFA(states, reads, {k: v[0][1] for k, v in trans.items()}, start, accepting,
                   name=Path(source).stem)
    return NFA(states, reads, {k: {t for _, t, _ in v} for k, v in trans.items()},
                       start, accepting)


def _jflap_pda(r: _Reader, rows: list, label: dict, states: list, reads: list, start: Any,
               accepting: list, name: str) -> Any:
    for p, row in rows:
        if len(row["read"]) > 1:
            r.fail(f"{p}/read", f"reads the string {row['read']!r}; pdanet machines read one "
                   "symbol per transition")
        if len(row["pop"]) > 1:
            r.fail(f"{p}/pop", f"pops the string {row['pop']!r}; pdanet machines pop one "
                   "symbol per transition: split it with intermediate ε-moves")
    stack = sorted({c for _, row in rows for c in row["pop"] + row["push"]} | {JFLAP_BOTTOM})
    moves, blind = [], []
    for _, row in rows:
        q, x, t = label[row["from"]], row["read"] or EPSILON, label[row["to"]]
        if row["pop"]:
            moves.append((q, x, row["pop"], t, tuple(row["push"])))
        else:
            blind.append((q, x, t, tuple(row["push"])))
    return _pushdown(states, reads, stack, moves, blind, start, accepting, JFLAP_BOTTOM,
                     "final_state", name)


# --------------------------------------------------------------------------------------------
# pushdown machines of other tools, whose initial stack symbol may be popped
# --------------------------------------------------------------------------------------------
_SOURCE_MODES = ("final_state", "empty_stack", "either")


def _fresh(base: str, taken: Any) -> str:
    """`base`, primed until it is not in `taken`."""
    while base in taken:
        base += "'"
    return base


def _keeps_bottom(moves: list, blind: list, z: Any) -> bool:
    """True when `z` never leaves the bottom: every move that pops it pushes it back last, and no
    move pushes it anywhere else."""
    for _, _, top, _, gamma in moves:
        rest = gamma[:-1] if top == z else gamma
        if z in rest or (top == z and gamma[-1:] != (z,)):
            return False
    return all(z not in gamma for *_, gamma in blind)


def _pushdown(states: list, inputs: Any, stack: list, moves: list, blind: list, start: Any,
              accepting: Any, z: Any, mode: str, name: str | None) -> Any:
    """A pdanet machine that accepts what a source pushdown automaton accepts.

    The source starts with the stack ``z`` (its initial stack symbol), may pop ``z`` for good and
    block on an empty stack; ``moves`` are (q, a or EPSILON, X, q2, gamma) with ``gamma`` top first,
    ``blind`` are (q, a or EPSILON, q2, gamma) moves that do not look at the stack (they apply on any
    top, and on the empty stack, and push ``gamma``). ``mode`` is the source's acceptance:
    "final_state", "empty_stack" or "either" (final state or empty stack), each judged on any
    configuration reached after the whole input (the textbook semantics, Hopcroft–Ullman §6.1).

    When ``mode`` is "final_state" and ``z`` never leaves the bottom (`_keeps_bottom`), ``z``
    *is* ⊥: the machine has the source's states. Otherwise ``z`` is an ordinary stack symbol and ⊥
    stands for the source's empty stack: a fresh start state pushes ``z`` over ⊥ by an ε-move, and
    for "empty_stack"/"either" a fresh accepting state is entered by an ε-move on ⊥ from every
    source state. The result accepts by final state; it is a DPDA when its moves are deterministic
    and no ε-move leaves an accepting state (where DPDA closure-end acceptance equals the
    textbook), a PDA otherwise.
    """
    trans: dict = {}

    def add(q: Any, x: Any, top: Any, t: Any, gamma: tuple) -> None:
        trans.setdefault((q, x, top), set()).add((t, gamma))

    accepting = list(accepting) if mode != "empty_stack" else []
    sink = None
    if mode == "final_state" and _keeps_bottom(moves, blind, z):
        def sub(s: Any) -> Any:
            return BOTTOM if s == z else s

        for q, x, top, t, gamma in moves:
            add(q, x, sub(top), t, tuple(map(sub, gamma)))
        kept = [s for s in stack if s != z]
        for q, x, t, gamma in blind:
            for top in [BOTTOM] + kept:
                add(q, x, top, t, gamma + (top,))
        new_states, new_start = list(states), start
    else:
        kept = list(stack)
        new_start = _fresh("init", set(states))
        new_states = [new_start] + list(states)
        add(new_start, EPSILON, BOTTOM, start, (z, BOTTOM))
        for q, x, top, t, gamma in moves:
            add(q, x, top, t, gamma)
        for q, x, t, gamma in blind:
            for top in [BOTTOM] + kept:
                add(q, x, top, t, gamma + (top,))
        if mode != "final_state":
            sink = _fresh("empty", set(new_states))
            new_states.append(sink)
            for q in states:
                add(q, EPSILON, BOTTOM, sink, (BOTTOM,))
            accepting.append(sink)
    pda = PDA(new_states, inputs, kept, trans, new_start, accepting, acceptance="final_state",
              name=name)
    acc = set(accepting)
    if not pda.is_deterministic or any(
            x is EPSILON and q in acc and t != sink
            for (q, x, _), moves_ in trans.items() for t, _ in moves_):
        return pda
    try:
        return DPDA(new_states, inputs, kept, {k: next(iter(v)) for k, v in trans.items()},
                    new_start, accepting, acceptance="final_state", name=name)
    except EpsilonLoopError:  # an ε-cycle the nondeterministic simulation bounds instead
        return pda


# --------------------------------------------------------------------------------------------
# automata-lib and pyformlang objects (read by duck typing; neither library is imported)
# --------------------------------------------------------------------------------------------
def _attr(obj: Any, what: str, *names: str) -> Any:
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    raise InputError(f"{type(obj).__name__} has no attribute {names[0]!r}; {what} needs it")


def _finite(states: list, inputs: list, moves: list, starts: list, accepting: list,
            name: str | None) -> Any:
    """A DFA when ``moves`` (q, a or EPSILON, q2) are deterministic with one start, else an NFA."""
    trans: dict = {}
    for q, a, t in moves:
        trans.setdefault((q, a), set()).add(t)
    if len(starts) == 1 and all(a is not EPSILON and len(v) == 1 for (_, a), v in trans.items()):
        return DFA(states, inputs, {k: next(iter(v)) for k, v in trans.items()}, starts[0],
                   accepting, name=name)
    return NFA(states, inputs, trans, starts, accepting, name=name)


def from_automata_lib(obj: Any, name: str | None = None) -> Any:
    """The pdanet machine of an automata-lib (``automata``) DFA, NFA, DPDA or NPDA object.

    The object is read by its attributes (automata-lib is not imported): ``states``,
    ``input_symbols``, ``transitions``, ``initial_state``, ``final_states``, and for pushdown
    automata ``stack_symbols``, ``initial_stack_symbol`` and ``acceptance_mode``. Finite automata:
    ``transitions[q][a]`` is a state (DFA; missing entries block, as with ``allow_partial``) or a
    set of states (NFA), and the input symbol ``""`` is ε; the result is a DFA when the moves are
    deterministic, an NFA otherwise. Pushdown automata: ``transitions[q][a][X]`` is one move
    ``(q2, push)`` (DPDA) or a set of them (NPDA), ``a == ""`` is ε, and ``push`` (a string read
    one symbol per character, or a tuple) replaces ``X`` with its first symbol on top, the
    orientation of pdanet; ``""`` pops.

    Note on the stack bottom: automata-lib starts with ``initial_stack_symbol`` on the stack and
    lets moves pop it for good (an empty stack then blocks), while pdanet's ⊥ never leaves. The
    initial stack symbol becomes ⊥ when it never leaves the bottom and ``acceptance_mode`` is
    ``"final_state"``; otherwise it stays an ordinary stack symbol that a fresh start state
    ``init`` pushes over ⊥, ⊥ standing for automata-lib's empty stack. ``"empty_stack"`` and
    ``"both"`` (automata-lib: final state *or* empty stack) become final-state acceptance through
    a fresh accepting state ``empty`` entered by an ε-move on ⊥. Acceptance is judged on any
    configuration reached after the whole input (the textbook semantics, Hopcroft–Ullman §6.1).
    The result is a DPDA when its moves are deterministic and no ε-move leaves an accepting state,
    a PDA otherwise. InputError names a missing attribute or a malformed transition.
    """
    what = "from_automata_lib"
    states = list(_attr(obj, what, "states"))
    inputs = sorted(_attr(obj, what, "input_symbols"), key=repr)
    table = _attr(obj, what, "transitions")
    start = _attr(obj, what, "initial_state")
    accepting = list(_attr(obj, what, "final_states"))
    state_set = set(states)

    def eps(a: Any) -> Any:
        return EPSILON if a == "" else a

    if not hasattr(obj, "stack_symbols"):
        moves = []
        for q, row in table.items():
            for a, t in row.items():
                targets = [t] if t in state_set else t
                if isinstance(targets, (str, bytes)) or not hasattr(targets, "__iter__"):
                    raise InputError(f"transitions[{q!r}][{a!r}] = {t!r} is neither a declared "
                                     "state nor a set of states")
                moves += [(q, eps(a), t2) for t2 in targets]
        return _finite(states, inputs, moves, [start], accepting, name)
    z = _attr(obj, what, "initial_stack_symbol")
    mode = _attr(obj, what, "acceptance_mode")
    modes = {"final_state": "final_state", "empty_stack": "empty_stack", "both": "either"}
    if mode not in modes:
        raise InputError(f"acceptance_mode {mode!r} is not one of {', '.join(modes)}")
    stack = sorted(set(_attr(obj, what, "stack_symbols")) | {z}, key=repr)
    moves = []
    for q, row in table.items():
        for a, by_top in row.items():
            for top, value in by_top.items():
                single = isinstance(value, tuple) and len(value) == 2 and value[0] in state_set
                for move in ([value] if single else value):
                    if not (isinstance(move, tuple) and len(move) == 2):
                        raise InputError(f"transitions[{q!r}][{a!r}][{top!r}] holds {move!r}; "
                                         "expected (state, push) moves")
                    t, push = move
                    moves.append((q, eps(a), top, t, tuple(push)))
    return _pushdown(states, inputs, stack, moves, [], start, accepting, z, modes[mode], name)


def _value(x: Any) -> Any:
    """A pyformlang object's ``value`` (its name), or the object itself."""
    return getattr(x, "value", x)


def _is_epsilon(x: Any) -> bool:
    return type(x).__name__ == "Epsilon" or _value(x) == "epsilon"


def from_pyformlang(obj: Any, acceptance: str | None = None, name: str | None = None) -> Any:
    """The pdanet machine of a pyformlang finite automaton (DFA, NFA, ε-NFA) or PDA object.

    The object is read by its attributes (pyformlang is not imported), and its states and symbols
    by their ``value``; ``Epsilon`` (value ``"epsilon"``) is ε. Finite automata: ``states``,
    ``symbols``, ``start_states`` (or ``start_state``), ``final_states`` and ``to_dict()``,
    ``{q: {a: q2 or set of q2}}``; the result is a DFA when deterministic with one start state,
    an NFA otherwise. PDAs: ``states``, ``input_symbols``, ``stack_symbols``, ``start_state``,
    ``final_states``, the initial stack symbol (``start_stack_symbol``, or the private
    ``_start_stack_symbol`` of versions without the property) and ``to_dict()``,
    ``{(q, a, X): {(q2, (Y1, …, Yn)), …}}`` with ``Y1`` pushed on top (ε entries are skipped).

    A pyformlang PDA carries no acceptance mode: ``acceptance`` is ``"final_state"``,
    ``"empty_stack"`` (as for ``CFG.to_pda`` and ``PDA.to_cfg``) or None, meaning
    ``"final_state"`` when the PDA has final states and ``"empty_stack"`` otherwise. The initial
    stack symbol becomes ⊥ exactly as in `from_automata_lib` (it stays an ordinary symbol pushed
    over ⊥ by a fresh start state ``init`` when it can leave the stack, or for empty-stack
    acceptance, which is judged through a fresh accepting state ``empty``).
    """
    what = "from_pyformlang"
    if not hasattr(obj, "stack_symbols"):
        if acceptance is not None:
            raise InputError("acceptance applies to PDAs only; finite automata accept by final "
                             "state")
        states = [_value(q) for q in _attr(obj, what, "states")]
        inputs = sorted({_value(a) for a in _attr(obj, what, "symbols") if not _is_epsilon(a)},
                        key=repr)
        starts = getattr(obj, "start_states", None)
        starts = [_value(q) for q in (starts if starts is not None
                                      else [_attr(obj, what, "start_state")])]
        accepting = [_value(q) for q in _attr(obj, what, "final_states")]
        moves = []
        for q, row in _attr(obj, what, "to_dict")().items():
            for a, t in row.items():
                targets = t if isinstance(t, (set, frozenset, list, tuple)) else [t]
                a = EPSILON if _is_epsilon(a) else _value(a)
                moves += [(_value(q), a, _value(t2)) for t2 in targets]
        return _finite(states, inputs, moves, starts, accepting, name)
    if acceptance not in (None, "final_state", "empty_stack"):
        raise InputError(f"acceptance {acceptance!r} is not one of 'final_state', 'empty_stack' "
                         "or None")
    z = _attr(obj, what, "start_stack_symbol", "_start_stack_symbol")
    if z is None:
        raise InputError("the PDA has no start stack symbol; set one with set_start_stack_symbol")
    z = _value(z)
    states = [_value(q) for q in _attr(obj, what, "states")]
    inputs = sorted({_value(a) for a in _attr(obj, what, "input_symbols") if not _is_epsilon(a)},
                    key=repr)
    stack = sorted({_value(s) for s in _attr(obj, what, "stack_symbols") if not _is_epsilon(s)}
                   | {z}, key=repr)
    start = _value(_attr(obj, what, "start_state"))
    accepting = [_value(q) for q in _attr(obj, what, "final_states")]
    if acceptance is None:
        acceptance = "final_state" if accepting else "empty_stack"
    moves = []
    for (q, a, top), outs in _attr(obj, what, "to_dict")().items():
        for t, push in outs:
            moves.append((_value(q), EPSILON if _is_epsilon(a) else _value(a), _value(top),
                          _value(t), tuple(_value(s) for s in push if not _is_epsilon(s))))
    return _pushdown(states, inputs, stack, moves, [], start, accepting, z, acceptance, name)


__all__ = [
    "ALL_KINDS",
    "FORMAT_VERSION",
    "KINDS",
    "PROB_KINDS",
    "WEIGHTED_KINDS",
    "dumps",
    "from_automata_lib",
    "from_dict",
    "from_pyformlang",
    "kind_of",
    "load",
    "load_jflap",
    "loads",
    "save",
    "to_dict",
]

"""The JSON machine-file format (``docs/spec-format.md``): its version, its kinds, the reserved
spellings of ε and ⊥, and the writer (`to_dict`, `dumps`, `save`).

The writer reads a machine through the attributes every machine of a kind has (states, alphabets,
transitions), so it needs no machine class: a machine names its own kind (`Machine.file_kind`),
and `pdanet.automata.io` (which also reads files back) finds the kind of any object. Everything
here is re-exported by `pdanet.automata.io`.
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import numpy as np

from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.errors import InputError

FORMAT_VERSION = 1
KINDS = ("dfa", "mealy", "nfa", "dpda", "pda", "dpdt", "dyck")
EPSILON_TEXT = "ε"
BOTTOM_TEXT = "⊥"
RESERVED = (EPSILON_TEXT, BOTTOM_TEXT)


def symbol_str(symbol: Any) -> str:
    """A symbol as error messages show it (ε and ⊥ as such)."""
    return EPSILON_TEXT if symbol is EPSILON else BOTTOM_TEXT if symbol is BOTTOM else repr(symbol)


def _value(x: Hashable, what: str) -> str | int:
    """A state or symbol as a JSON value (strings and integers, numpy's included, only)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (str, numbers.Integral)):
        raise InputError(f"{what} {x!r} is neither a string nor an integer and cannot be saved; "
                         "rename it (e.g. with str) before saving")
    if isinstance(x, numbers.Integral):
        return int(x)
    return x


def _sym(x: Hashable, what: str) -> str | int:
    if x is EPSILON:
        return EPSILON_TEXT
    if x is BOTTOM:
        return BOTTOM_TEXT
    if isinstance(x, str) and x in RESERVED:
        raise InputError(f"{what} {x!r} is a reserved spelling in machine files; rename it")
    return _value(x, what)


def _syms(xs, what: str) -> list:
    return [_sym(x, what) for x in xs]


def _state(q: Hashable) -> str | int | list:
    """A state as a JSON value: strings and integers as such, tuples of states as lists."""
    if isinstance(q, tuple):
        return [_state(x) for x in q]
    return _value(q, "state")


def _states(xs) -> list:
    return [_state(q) for q in xs]


def _attr(machine: Any, *names: str) -> Any:
    for n in names:
        if hasattr(machine, n):
            return getattr(machine, n)
    raise InputError(f"{type(machine).__name__} has none of the attributes {names}")


def _order(machine: Any) -> Callable[[Any], tuple]:
    """A sort key for transition keys (state order, then symbol order, ε first)."""
    sidx = {q: i for i, q in enumerate(machine.states)}

    def sym_rank(alpha: Alphabet | None, s: Any) -> int:
        if s is EPSILON or s is BOTTOM:
            return -1
        return alpha.index(s) if alpha is not None and s in alpha else len(alpha or ())

    alpha = _attr(machine, "alphabet", "input_alphabet")
    stack = getattr(machine, "stack_alphabet", None)

    def key(k: tuple) -> tuple:
        ranks = [sidx.get(k[0], -1), sym_rank(alpha, k[1])]
        if len(k) > 2:
            ranks.append(sym_rank(stack, k[2]))
        return tuple(ranks)

    return key


def to_dict(machine: Any, kind: str | None) -> dict:
    """The JSON-ready dict of `machine`, a machine of file kind `kind` (None: a machine with no
    file format, InputError)."""
    if kind not in KINDS:
        raise InputError(f"{type(machine).__name__} has no file format; kinds with one: "
                         f"{', '.join(KINDS)}")
    d: dict[str, Any] = {"format": FORMAT_VERSION, "kind": kind}
    name = getattr(machine, "name", None)
    if kind == "dyck":
        d.update(k=machine.k, m=machine.m)
        return d
    if name is not None:
        d["name"] = str(name)
    d["states"] = _states(machine.states)
    order = _order(machine)
    trans = machine.transitions  # a property that may copy: read it once
    if kind in ("dfa", "mealy"):
        d["alphabet"] = _syms(machine.alphabet, "symbol")
        if kind == "mealy":
            d["output_alphabet"] = _syms(machine.output_alphabet, "output symbol")
        d["start"] = _state(machine.start)
        d["accepting"] = _states(q for q in machine.states if q in machine.accepting)
        if kind == "dfa" and machine.output_kind != "accept":
            d["output_kind"] = machine.output_kind
        rows = []
        for (q, a) in sorted(trans, key=order):
            row = {"source": _state(q), "symbol": _sym(a, "symbol"),
                   "target": _state(trans[(q, a)])}
            if kind == "mealy":
                row["output"] = _sym(machine.outputs_map[(q, a)], "output symbol")
            rows.append(row)
        d["transitions"] = rows
        return d
    if kind == "nfa":
        d["alphabet"] = _syms(machine.alphabet, "symbol")
        starts = [_state(q) for q in machine.states if q in machine.starts]
        d["start"] = starts[0] if len(starts) == 1 and not isinstance(starts[0], list) else starts
        d["accepting"] = _states(q for q in machine.states if q in machine.accepting)
        rows = []
        sidx = {p: i for i, p in enumerate(machine.states)}
        for key in sorted(trans, key=order):
            q, a = key
            targets = sorted(trans[key], key=sidx.__getitem__)
            rows.extend({"source": _state(q), "symbol": _sym(a, "symbol"),
                         "target": _state(t)} for t in targets)
        d["transitions"] = rows
        return d
    # pushdown kinds
    d["input_alphabet"] = _syms(_attr(machine, "input_alphabet", "alphabet"), "input symbol")
    if kind == "dpdt":
        d["output_alphabet"] = _syms(machine.output_alphabet, "output symbol")
    d["stack_alphabet"] = _syms(machine.stack_alphabet, "stack symbol")
    d["start"] = _state(machine.start)
    d["accepting"] = _states(q for q in machine.states if q in machine.accepting)
    if kind in ("dpda", "pda"):
        d["acceptance"] = getattr(machine, "acceptance", "final_state")
    rows = []
    for key in sorted(trans, key=order):
        q, x, s = key
        value = trans[key]
        values = sorted(value, key=repr) if kind == "pda" else [value]
        for v in values:
            row: dict[str, Any] = {"source": _state(q), "symbol": _sym(x, "symbol"),
                                   "pop": _sym(s, "stack symbol")}
            if kind == "dpdt":
                q2, y, gamma = v
                y = tuple(y) if isinstance(y, (tuple, list)) else (() if y is EPSILON else (y,))
                row["target"] = _state(q2)
                row["output"] = (_sym(y[0], "output symbol") if len(y) == 1 else
                                 EPSILON_TEXT if not y else _syms(y, "output symbol"))
            else:
                q2, gamma = v
                row["target"] = _state(q2)
            row["push"] = _syms(gamma, "stack symbol")
            rows.append(row)
    d["transitions"] = rows
    return d


def format_json(d: dict, allow_nan: bool = True) -> str:
    """A machine's dict as JSON text (UTF-8, ε and ⊥ written as such): one top-level field per
    line, and one row per line in its list-of-rows fields (``transitions``, ``final``)."""
    def one(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, allow_nan=allow_nan)

    lines = []
    for key, value in d.items():
        if key in ("transitions", "final") and isinstance(value, list):
            inner = ",\n".join(f"    {one(row)}" for row in value)
            text = f"[\n{inner}\n  ]" if value else "[]"
        else:
            text = one(value)
        lines.append(f"  {one(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def dumps(machine: Any, kind: str | None) -> str:
    """The machine as JSON text (UTF-8, ε and ⊥ written as such): one top-level field per line,
    one transition per line."""
    return format_json(to_dict(machine, kind))


def save(machine: Any, path: str | os.PathLike, kind: str | None) -> None:
    """Write `machine` to `path` in the JSON format (creating or replacing the file)."""
    text = dumps(machine, kind)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{machine!r} has a name, state or symbol with the lone surrogate "
                         f"{text[exc.start]!r}, which UTF-8 cannot store; rename it") from None
    Path(path).write_bytes(data)


__all__ = ["BOTTOM_TEXT", "EPSILON_TEXT", "FORMAT_VERSION", "KINDS", "RESERVED", "dumps", "save",
           "symbol_str", "to_dict"]

"""What `verify` found: a `Report`, its per-phase counts, and the first `Counterexample`.

Values in a counterexample are readable: a stack is a tuple of stack symbols (bottom first, the
-1 padding above the top removed), a
state is the machine's own state name (or ``"dead"``), a next-symbol set is a frozenset of output
symbols, an acceptance bit is a bool. A value the machine cannot name (e.g. a decoded stack symbol
index outside the stack alphabet) is shown as the raw integer.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from pdanet.automata.base import Machine
from pdanet.limits import human_bytes

# --- readable values ------------------------------------------------------------------------------

def _py(v: Any) -> Any:
    """A numpy scalar as a Python int/float/bool (floats that are integers become ints)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _stack_symbols(machine: Machine):
    alpha = getattr(machine, "stack_alphabet", None)
    if alpha is not None:
        return tuple(alpha)
    opens = getattr(machine, "opens", None)  # Dyck-(k, m): the stack holds bracket types
    return tuple(opens) if opens is not None else None


def _name(symbols, i: Any) -> Any:
    i = _py(i)
    if symbols is not None and isinstance(i, int) and 0 <= i < len(symbols):
        return symbols[i]
    return i


def readable(machine: Machine, name: str, value: Any) -> Any:
    """One field value at one step (a numpy scalar or row) as the machine would write it."""
    arr = np.asarray(value)
    if name == "output":
        kind = getattr(machine, "output_kind", None)
        if kind == "accept":
            return bool(arr.reshape(-1)[0]) if arr.size == 1 else tuple(map(_py, arr.reshape(-1)))
        if kind == "next_set":
            syms = tuple(machine.output_alphabet)
            return frozenset(_name(syms, i) for i in np.flatnonzero(arr.reshape(-1)))
        if kind == "symbol":
            i = _py(arr.reshape(-1)[0])
            if i == -1:
                return None
            return _name(tuple(machine.output_alphabet), i)
    if name in ("stack", "stack_top"):  # stack_top: the top cells, top first (long strings)
        syms = _stack_symbols(machine)
        cells = [_py(v) for v in arr.reshape(-1)]
        while cells and cells[-1] == -1:  # padding above the top; a -1 below it is shown
            cells.pop()
        return tuple(_name(syms, v) for v in cells)
    if name == "top":
        v = _py(arr.reshape(-1)[0])
        return None if v == -1 else _name(_stack_symbols(machine), v)
    if name == "state":
        v = _py(arr.reshape(-1)[0])
        if v == -1:
            return "dead"
        return _name(getattr(machine, "states", None), v)
    if arr.ndim == 0:
        return _py(arr[()])
    return tuple(_py(v) for v in arr.reshape(-1))


def _jsonable(v: Any) -> Any:
    if isinstance(v, (frozenset, set)):
        return sorted((_jsonable(x) for x in v), key=repr)
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, np.generic):
        return v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


# --- the report ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Counterexample:
    """The first disagreement: the string (symbols and as written), the step t (symbols read so
    far; 0 = before any input), the field that differs, the machine's value (``expected``) and the
    network's (``got``), and the machine's configuration after t symbols."""

    phase: str
    string: tuple
    formatted: str
    step: int
    field: str
    expected: Any
    got: Any
    config: Any

    @property
    def prefix(self) -> tuple:
        """The symbols read up to the failing step."""
        return self.string[: self.step]

    def to_dict(self) -> dict:
        return {k: _jsonable(v) for k, v in asdict(self).items()} | {"config": str(self.config)}

    def __str__(self) -> str:
        read = f"after reading {self.string[self.step - 1]!r}" if self.step else "before any input"
        return (
            f"string {self.formatted!r} ({self.phase}), step {self.step} ({read}): "
            f"field {self.field!r}\n"
            f"    expected: {self.expected!r}\n"
            f"    got:      {self.got!r}\n"
            f"    machine configuration: {self.config!r}"
        )


@dataclass(frozen=True)
class PhaseResult:
    """One phase of checking: its name, what it covered, strings and steps compared, seconds.

    ``complete`` is False when checking stopped inside the phase at a counterexample."""

    name: str
    description: str
    strings: int
    steps: int
    seconds: float
    complete: bool = True


@dataclass(frozen=True)
class Coverage:
    """Partial coverage (a network that could not be run in full on every checked string).

    A network whose exact fast path stops on some strings (e.g. a trained DuSell & Chiang
    model whose actions are no longer exactly one-hot) is run in full only within a memory and
    time budget (``module.forward_bounded``): ``full_strings``/``full_steps`` count the strings
    and compared steps whose values came from the full model; ``unchecked_strings`` /
    ``unchecked_steps`` those that were asked for but not compared, ``needed_bytes`` the most
    memory the full model would need for one of those strings, ``reason`` why (the first
    batch's explanation). Unchecked steps make the report not ``ok``: they are never a pass."""

    full_strings: int = 0
    full_steps: int = 0
    unchecked_strings: int = 0
    unchecked_steps: int = 0
    needed_bytes: int = 0
    reason: str = ""

    def __add__(self, other: Coverage) -> Coverage:
        return Coverage(self.full_strings + other.full_strings,
                        self.full_steps + other.full_steps,
                        self.unchecked_strings + other.unchecked_strings,
                        self.unchecked_steps + other.unchecked_steps,
                        max(self.needed_bytes, other.needed_bytes),
                        self.reason or other.reason)

    def __str__(self) -> str:
        text = (f"{self.full_steps:,} steps of {self.full_strings:,} strings checked by the "
                "network's full model")
        if self.unchecked_steps:
            text += (f"; not checked: {self.unchecked_steps:,} steps of "
                     f"{self.unchecked_strings:,} strings, would need "
                     f"{human_bytes(self.needed_bytes)} a string ({self.reason})")
        return text


@dataclass(frozen=True)
class Report:
    """The outcome of `verify`. ``steps_checked`` counts the positions compared: for every string,
    t = 0 … its length (only live prefixes). Checking stops at the first counterexample.
    ``coverage``: where some strings could only be compared in part (`Coverage`; None when
    every requested step was compared); ``ok`` is then False unless nothing was left out."""

    ok: bool
    machine: str
    network: str
    fields: tuple[str, ...]
    strings_checked: int
    steps_checked: int
    phases: tuple[PhaseResult, ...]
    seconds: float
    counterexample: Counterexample | None = None
    dtype: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    coverage: Coverage | None = None

    @property
    def unchecked_steps(self) -> int:
        """Steps asked for but not compared (`Coverage`); 0 when every step was."""
        return self.coverage.unchecked_steps if self.coverage is not None else 0

    @property
    def steps(self) -> int:
        return self.steps_checked

    @property
    def throughput(self) -> float:
        """Compared steps per second."""
        return self.steps_checked / self.seconds if self.seconds > 0 else float("inf")

    def phase(self, name: str) -> PhaseResult:
        for p in self.phases:
            if p.name == name:
                return p
        raise KeyError(f"no phase {name!r}; phases: {[p.name for p in self.phases]}")

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "machine": self.machine,
            "network": self.network,
            "dtype": self.dtype,
            "fields": list(self.fields),
            "strings_checked": self.strings_checked,
            "steps_checked": self.steps_checked,
            "seconds": self.seconds,
            "throughput": self.throughput,
            "phases": [asdict(p) for p in self.phases],
            "counterexample": self.counterexample.to_dict() if self.counterexample else None,
            "notes": list(self.notes),
            "coverage": asdict(self.coverage) if self.coverage is not None else None,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def __str__(self) -> str:
        verdict = ("OK" if self.ok else "FAILED" if self.counterexample is not None
                   or not self.unchecked_steps else "INCOMPLETE")
        lines = [
            (f"verify {self.machine} against {self.network}"
            f"{' (' + self.dtype + ')' if self.dtype else ''}: {verdict} — "
            f"{self.strings_checked:,} strings, {self.steps_checked:,} steps in "
            f"{self.seconds:.3g} s ({self.throughput:,.0f} steps/s)"),
            f"  fields compared: {', '.join(self.fields)}",
        ]
        for p in self.phases:
            stop = "" if p.complete else " (stopped at the counterexample)"
            lines.append(f"  {p.name} [{p.description}]: {p.strings:,} strings, {p.steps:,} steps, "
                         f"{p.seconds:.3g} s{stop}")
        if self.counterexample is not None:
            lines.append("  first counterexample: " + str(self.counterexample))
        if self.coverage is not None:
            lines.append(f"  coverage: {self.coverage}")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


__all__ = ["Counterexample", "Coverage", "PhaseResult", "Report", "readable"]

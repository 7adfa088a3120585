"""The ``pdanet`` command line.

Subcommands live in a registry: each is a `Command` with a name, a one-line help, an example
shown by ``--help``, a function that adds its arguments, and a handler ``(args, out) -> int``.
Register new ones with `command(...)` (the built-in ``tasks``, ``draw`` and ``run`` below show
how; `add_machine_argument` and `add_json_flag` give the shared options).

One error path (`main`): every `PdanetError`, every argument error and every OSError (an
unreadable or unwritable file) becomes one line ``pdanet: error: <message>`` on stderr, or with
``--json`` one JSON object ``{"error": {"type": ..., "message": ...}}`` on stdout. Exit status:
0 success, 1 a check (verify, certify, bounds) ran and failed, 2 bad input or an error. Any
other exception is a bug and keeps its traceback. A closed pipe (``pdanet ... | head``) ends
output quietly; the exit status is then the command's own.

``--json`` output is strict JSON (``allow_nan=False``): non-finite numbers are written as the
strings ``"nan"``, ``"inf"`` and ``"-inf"``.

A machine argument is NAME (a named task, parameters via ``--k``/``--m`` or ``--param key=value``)
or FILE (a path to a JSON machine file, or a JFLAP ``.jff`` file).

Start-up is fast: this module imports only the symbolic core; torch, sympy, Graphviz and
matplotlib are imported inside the commands that need them (``tasks``, ``run`` and ``draw``
never import torch).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, TextIO

from pdanet import limits
from pdanet.automata.pda import Stack
from pdanet.automata.store import Deque
from pdanet.errors import InputError, PdanetError

#: exit statuses
EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


@dataclass(frozen=True)
class Command:
    """A subcommand: `arguments` adds its options to a parser; `handler(args, out)` runs it and
    returns the exit status. `example` is shown at the end of ``--help``."""

    name: str
    help: str
    example: str
    arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace, TextIO], int]


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, example: str,
            arguments: Callable[[argparse.ArgumentParser], None] = lambda p: None):
    """Decorator registering `handler` as subcommand `name` (replacing one of the same name)."""

    def register(handler: Callable[[argparse.Namespace, TextIO], int]):
        COMMANDS[name] = Command(name, help, example, arguments, handler)
        return handler

    return register


# --------------------------------------------------------------------------------------------
# numeric option types: each rejects nan, inf, non-numbers and values out of range, naming the
# range (argparse prefixes the flag: "argument --k: ...")
# --------------------------------------------------------------------------------------------
#: the largest integer an option takes (a count must fit in an index: 2⁶³ − 1)
MAX_OPTION_INT = 10**18


def _exact_int(s: str) -> int | None:
    """`s` as an integer (``1000``, ``1_000``, or an exact scientific form such as ``1e9`` or
    ``2.5e3`` with an exponent of at most 100 in size); None when it is not one."""
    try:
        return int(s)
    except ValueError:
        pass
    mant, e, exp = s.lower().partition("e")
    if not e or not mant.lstrip("+-")[:1].isdigit():
        return None
    try:
        power = int(exp)
        if abs(power) > 100:
            return None
        value = Fraction(mant) * Fraction(10) ** power
    except (ValueError, ZeroDivisionError):
        return None
    return int(value) if value.denominator == 1 else None


def integer(low: int | None = None, high: int = MAX_OPTION_INT) -> Callable[[str], int]:
    """An argparse ``type`` for an integer in [low, high] (low None: unbounded below; high at
    most `MAX_OPTION_INT`). Accepts ``1000``, ``1_000`` and exact scientific forms such as
    ``1e9``; refuses ``2.5``, ``nan``, ``inf``."""
    high = min(high, MAX_OPTION_INT)
    top = "10^18" if high == MAX_OPTION_INT else str(high)
    what = f"an integer in [{low}, {top}]" if low is not None else f"an integer ≤ {top}"

    def parse(text: str) -> int:
        value = _exact_int(text.strip())
        if value is None or (low is not None and value < low) or value > high:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def real(low: float = 0.0, inclusive: bool = False) -> Callable[[str], float]:
    """An argparse ``type`` for a finite real number > low (≥ low when `inclusive`)."""
    what = f"a finite number {'≥' if inclusive else '>'} {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = "real"
    return parse


# --------------------------------------------------------------------------------------------
# shared argument helpers
# --------------------------------------------------------------------------------------------
def add_machine_argument(p: argparse.ArgumentParser, optional: bool = False) -> None:
    """The positional MACHINE (NAME or FILE) and the task parameters --k, --m, --param.
    With ``optional`` the machine may be left out (``args.machine`` is then None)."""
    p.add_argument("machine", metavar="NAME|FILE", nargs="?" if optional else None,
                   help="a task name (see `pdanet tasks`) or a machine file (.json or .jff)")
    p.add_argument("--k", type=integer(), help="task parameter k (e.g. bracket types of dyck)")
    p.add_argument("--m", type=integer(), help="task parameter m (e.g. depth bound of dyck)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="another task parameter (repeatable); integers and finite numbers are "
                        "parsed as such, true/false as booleans, anything else is a string")


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true",
                   help='print machine-readable JSON (strict: non-finite numbers are written as '
                        'the strings "nan", "inf", "-inf"; an error is {"error": {"type": ..., '
                        '"message": ...}})')


def _parse_value(text: str, key: str = "") -> Any:
    try:
        value = int(text)
    except ValueError:
        pass
    else:
        if abs(value) > MAX_OPTION_INT:
            raise InputError(f"--param {key}={text}: the value is beyond ±10^18")
        return value
    try:
        value = float(text)
    except ValueError:
        return {"true": True, "false": False}.get(text.lower(), text)
    if not math.isfinite(value):
        raise InputError(f"--param {key}={text}: the value is not a finite number")
    return value


def task_params(args: argparse.Namespace) -> dict[str, Any]:
    """The task parameters given by --k, --m and --param KEY=VALUE."""
    params: dict[str, Any] = {}
    for name in ("k", "m"):
        if getattr(args, name, None) is not None:
            params[name] = getattr(args, name)
    for item in getattr(args, "param", []) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--param {item!r} is not KEY=VALUE")
        params[key.strip()] = _parse_value(value.strip(), key.strip())
    return params


def task_catalog() -> list[tuple[str, str]]:
    """(name, one-line description) of every named task."""
    from pdanet.automata import tasks

    return [(name, tasks.task(name).description.strip().splitlines()[0]) for name in tasks.names()]


def _is_machine_file(ref: str) -> bool:
    """Whether `resolve_machine` reads `ref` as a machine file (a .json or .jff name, or an
    existing file that is not a task name) rather than as a task name."""
    from pdanet.automata import tasks

    path = Path(ref)
    return path.suffix.lower() in (".json", ".jff") or (ref not in tasks.names()
                                                         and path.is_file())


def resolve_machine(ref: str, params: dict[str, Any] | None = None) -> Any:
    """A machine from a file path (JSON or .jff) or a task name with parameters."""
    from pdanet.automata import tasks

    params = params or {}
    path = Path(ref)
    if _is_machine_file(ref):
        if params:
            raise InputError(f"task parameters {sorted(params)} make no sense for the machine "
                             f"file {ref!r}; drop them")
        if not path.is_file():
            raise InputError(f"machine file {ref!r} "
                             f"{'is a folder' if path.is_dir() else 'does not exist'}; give a "
                             ".json or .jff file, or a task name (see `pdanet tasks`)")
        from pdanet.automata.io import load

        return load(path)
    if ref not in tasks.names():
        raise InputError(f"no task or machine file named {ref!r}; tasks: "
                         f"{', '.join(tasks.names())}")
    try:
        machine = tasks.get(ref, **params)
    except TypeError as exc:
        raise InputError(f"bad parameters {params} for task {ref!r}: {exc}") from None
    if machine is None:
        raise InputError(f"task {ref!r} has no machine with parameters {params}: "
                         f"{_first_line(tasks.task(ref).description)}")
    return machine


def output_path(text: str, flag: str, suffixes: Sequence[str] | None = None) -> Path:
    """Check a user-given output file before any work: not a folder, in an existing writable
    folder, with one of `suffixes` (lower case, with the dot) when given. InputError names
    `flag` and the path."""
    path = Path(text)
    if path.is_dir():
        raise InputError(f"{flag} {text!r} is a folder; give a file name such as "
                         f"{str(path / ('out' + (suffixes[0] if suffixes else '')))!r}")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise InputError(f"{flag} {text!r}: give a file name ending in {', '.join(suffixes)}")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"{flag} {text!r}: the folder {str(folder)!r} does not exist; "
                         "create it first")
    if not os.access(folder, os.W_OK):
        raise InputError(f"{flag} {text!r}: the folder {str(folder)!r} is not writable")
    return path


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# --------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------
_NON_FINITE = {math.inf: "inf", -math.inf: "-inf"}


def _finite(x: Any) -> Any:
    """`x` made strict-JSON-ready: non-finite floats become "nan"/"inf"/"-inf", numpy scalars and
    arrays plain numbers and lists, tuples lists, dataclasses and mappings dicts with str keys,
    sets sorted lists; anything else is left to ``json.dumps(default=str)``."""
    if x is None or isinstance(x, (bool, int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else ("nan" if math.isnan(x) else _NON_FINITE[x])
    if hasattr(x, "dtype") and hasattr(x, "tolist"):  # numpy scalar or array, torch tensor
        return _finite(x.tolist())
    if isinstance(x, Mapping):
        return {str(k): _finite(v) for k, v in x.items()}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _finite(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if isinstance(x, (set, frozenset)):
        return sorted((_finite(v) for v in x), key=repr)
    return x


def dumps(obj: Any) -> str:
    """Strict JSON of `obj` (see `_finite`): never NaN or Infinity tokens."""
    return json.dumps(_finite(obj), ensure_ascii=False, allow_nan=False, default=str)


def print_json(obj: Any, out: TextIO) -> None:
    print(dumps(obj), file=out)


# --------------------------------------------------------------------------------------------
# formatting traces
# --------------------------------------------------------------------------------------------
#: a set of allowed symbols larger than this is written as its summary (e.g. Dyck-(10⁹, m))
MAX_LISTED = 4096


def _jsonable(x: Any) -> Any:
    from pdanet.automata.draw import symbol_text

    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, AbstractSet):
        if len(x) > MAX_LISTED:
            return str(x)
        return sorted((_jsonable(v) for v in x), key=repr)
    if isinstance(x, (tuple, list, Stack, Deque)):
        return [_jsonable(v) for v in x]
    if dataclasses.is_dataclass(x):
        return {f.name: _jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    return symbol_text(x)


def format_config(machine: Any, config: Any) -> str:
    """A configuration in one line: ``field=value`` pairs (None-valued fields other than the
    state left out; state None is shown as ``dead``); stacks written bottom first."""
    from pdanet.automata.bounded import DyckConfig
    from pdanet.automata.draw import symbol_text

    if isinstance(config, DyckConfig):
        if config.dead:
            return "dead"
        sep = "" if machine.k <= 4 else " "
        return "stack=" + sep.join(("⊥",) + tuple(machine.opens[i] for i in config.stack))
    if isinstance(config, (frozenset, set)):
        return "{" + "; ".join(sorted(format_config(machine, c) for c in config)) + "}"
    if dataclasses.is_dataclass(config):
        parts = []
        for f in dataclasses.fields(config):
            v = getattr(config, f.name)
            if v is None and f.name != "state":
                continue  # e.g. no output emitted yet
            if isinstance(v, (tuple, Stack, Deque)):
                text = "[" + " ".join(symbol_text(s) for s in v) + "]"
            else:
                text = "dead" if v is None else symbol_text(v)
            parts.append(f"{f.name}={text}")
        return " ".join(parts)
    return symbol_text(config)


def format_output(machine: Any, output: Any) -> str:
    """An output in one line: accept/reject, a set of symbols in the output alphabet's order
    (a large set by its summary), or a symbol."""
    from pdanet.automata.draw import symbol_text

    kind = getattr(machine, "output_kind", None)
    if kind == "accept" or isinstance(output, bool):
        return "accept" if output else "reject"
    if isinstance(output, AbstractSet):
        if len(output) > MAX_LISTED or not isinstance(output, (set, frozenset)):
            return str(output)
        order = getattr(machine, "output_alphabet", None)

        def key(s: Any) -> tuple[int, str]:
            try:
                return (order.index(s) if order is not None else 0, repr(s))
            except (PdanetError, ValueError, KeyError, TypeError):
                return (len(order), repr(s))

        items = sorted(output, key=key)
        return "{" + " ".join(symbol_text(s) for s in items) + "}"
    return symbol_text(output)


# --------------------------------------------------------------------------------------------
# progress
# --------------------------------------------------------------------------------------------
class ProgressLine:
    """A progress callback ``progress(stage, done, total)`` that redraws one line on `stream`
    (``stage [#####-----] done/total``), at most every `interval` seconds within a stage;
    `close` erases it."""

    def __init__(self, stream: TextIO, width: int = 30, interval: float = 0.1):
        self.stream, self.width, self.interval = stream, width, interval
        self._stage: str | None = None
        self._last = 0.0
        self._shown = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage == self._stage and done < total and now - self._last < self.interval:
            return
        self._stage, self._last = stage, now
        frac = min(max(done / total, 0.0), 1.0) if total > 0 else 1.0
        filled = int(frac * self.width)
        line = (f"{str(stage)[:40]} [{'#' * filled}{'-' * (self.width - filled)}] "
                f"{done:,}/{total:,}")
        self.stream.write("\r" + line.ljust(self._shown))
        self.stream.flush()
        self._shown = len(line)

    def close(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0


def _progress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars on stderr (default: when stderr is a terminal and "
                        "--json is not given)")


def _progress(args: argparse.Namespace) -> bool:
    if getattr(args, "progress", None) is not None:
        return bool(args.progress)
    return not getattr(args, "json", False) and _stderr().isatty()


# --------------------------------------------------------------------------------------------
# built-in subcommands
# --------------------------------------------------------------------------------------------
def _tasks_args(p: argparse.ArgumentParser) -> None:
    add_json_flag(p)


@command("tasks", "list the named tasks", "pdanet tasks", _tasks_args)
def _tasks(args: argparse.Namespace, out: TextIO) -> int:
    catalog = task_catalog()
    if args.json:
        print_json([{"name": n, "description": d} for n, d in catalog], out)
        return EXIT_OK
    width = max((len(n) for n, _ in catalog), default=0)
    for n, d in catalog:
        print(f"{n:<{width}}  {d}".rstrip(), file=out)
    return EXIT_OK


RENDER_SUFFIXES = (".svg", ".png", ".pdf")


def _draw_args(p: argparse.ArgumentParser) -> None:
    add_machine_argument(p)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write a rendering (.svg, .png, .pdf); without it, print the DOT source")
    p.add_argument("--format", choices=("svg", "png", "pdf"),
                   help="rendering format (default: the suffix of --output)")
    p.add_argument("--max-configs", type=integer(1), default=None,
                   help="draw Dyck-(k, m) as its configuration graph up to this many "
                        "configurations, else as a schematic (default 64; 1: always the "
                        "schematic)")


@command("draw", "draw a machine's state diagram (Graphviz)",
         "pdanet draw dyck --k 2 --m 2 -o dyck.svg\n  pdanet draw spec.json > spec.dot",
         _draw_args)
def _draw(args: argparse.Namespace, out: TextIO) -> int:
    if args.output is not None:
        output_path(args.output, "--output", None if args.format else RENDER_SUFFIXES)
    from pdanet.automata.draw import MAX_DYCK_CONFIGS, draw, render

    machine = resolve_machine(args.machine, task_params(args))
    limit = args.max_configs if args.max_configs is not None else MAX_DYCK_CONFIGS
    if args.output is None:
        print(draw(machine, limit).source, file=out, end="")
        return EXIT_OK
    path = render(machine, args.output, args.format, limit)
    print(f"wrote {path}", file=out)
    return EXIT_OK


def _run_args(p: argparse.ArgumentParser) -> None:
    add_machine_argument(p)
    p.add_argument("string", metavar="STRING",
                   help="the input: one symbol per character, or space separated symbols when "
                        "the alphabet has longer symbols ('' for the empty string)")
    add_json_flag(p)


@command("run", "run a machine on a string and print the trace step by step",
         "pdanet run dyck --k 2 --m 3 '([])'\n  pdanet run spec.json abba --json", _run_args)
def _run(args: argparse.Namespace, out: TextIO) -> int:
    from pdanet.automata.draw import symbol_text

    machine = resolve_machine(args.machine, task_params(args))
    if not callable(getattr(machine, "trace", None)):
        raise InputError(f"{machine!r} has no single configuration per prefix to trace (a "
                         "transducer relation or a weighted transducer); `pdanet draw` shows it")
    steps = machine.trace(args.string)
    verdict = None
    if getattr(machine, "output_kind", None) != "symbol":
        try:
            verdict = bool(machine.is_accepting(steps[-1].config))
        except PdanetError:
            verdict = None
    if args.json:
        rows = [{"step": t, "symbol": None if s.symbol is None else _jsonable(s.symbol),
                 "config": _jsonable(s.config), "output": _jsonable(s.output)}
                for t, s in enumerate(steps)]
        print_json({"machine": args.machine, "string": args.string, "steps": rows,
                    "accepted": verdict}, out)
        return EXIT_OK
    table = [("step", "symbol", "configuration", "output")]
    for t, s in enumerate(steps):
        table.append((str(t), "" if s.symbol is None else symbol_text(s.symbol),
                      format_config(machine, s.config), format_output(machine, s.output)))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3], file=out)
    if verdict is not None:
        print(f"accepted: {'yes' if verdict else 'no'}", file=out)
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# networks: compile, verify, certify, bounds
# --------------------------------------------------------------------------------------------
TARGET_PREFERENCE = ("lstm", "elman", "stack_rnn", "second_order")


def _rational(text: str, what: str) -> Any:
    """A positive finite rational from `text` (``77``, ``153/2``, ``2.5``, ``1e3``)."""
    import sympy as sp

    try:
        value = sp.Rational(text)
    except (TypeError, ValueError, ZeroDivisionError, sp.SympifyError):
        raise InputError(f"{what} {text!r} is not a rational number (e.g. 77, 153/2, 2.5)") \
            from None
    if value <= 0:
        raise InputError(f"{what} must be positive, got {text!r}")
    if not math.isfinite(float(value)):
        raise InputError(f"{what} {text!r} is too large for a float; give a smaller value")
    return value


def add_network_arguments(p: argparse.ArgumentParser, weights: bool = True) -> None:
    """MACHINE (optional when ``weights``) with --target, --method, --dtype, --scale, and
    (with ``weights``) --weights FILE to load a saved network instead of compiling one."""
    add_machine_argument(p, optional=weights)
    p.add_argument("--target", help="network target: lstm, elman, second_order, stack_rnn, … "
                                    "(default: lstm when the machine compiles to it)")
    p.add_argument("--method", help="construction method (default: the target's default)")
    p.add_argument("--dtype", choices=("float32", "float64"),
                   help="float type of the module (default float32)")
    p.add_argument("--scale", metavar="BETA",
                   help="rebuild the network at this saturation scale β > 0 (a rational such "
                        "as 77 or 153/2) instead of the construction's own (a small β, e.g. 1, "
                        "makes it fail)")
    if weights:
        p.add_argument("--weights", metavar="FILE",
                       help="load a saved network (.safetensors or .pt from `pdanet compile -o`) "
                            "instead of compiling MACHINE")


def default_target(machine: Any) -> str:
    """The first of `TARGET_PREFERENCE` that the machine compiles to (else any it does)."""
    from pdanet.constructions.table import available

    targets = [t for t, _ in available(machine)]
    for t in TARGET_PREFERENCE:
        if t in targets:
            return t
    return targets[0] if targets else "lstm"  # compile() then says what is available


def build_network(args: argparse.Namespace) -> tuple[Any, str | None, dict[str, Any]]:
    """The network the options describe: loaded from --weights, or compiled from MACHINE
    (rebuilt at --scale when given). Returns (net, task name or None, task parameters)."""
    params = task_params(args)
    if getattr(args, "weights", None):
        clash = [opt for opt, v in (("MACHINE", args.machine), ("--target", args.target),
                                    ("--method", args.method), ("--scale", args.scale),
                                    ("--dtype", args.dtype)) if v]
        if params:
            clash.append("task parameters")
        if clash:
            raise InputError(f"--weights gives the network; drop {', '.join(clash)}")
        path = Path(args.weights)
        if not path.is_file():
            raise InputError(f"--weights {args.weights!r} "
                             f"{'is a folder' if path.is_dir() else 'does not exist'}; give a "
                             "file written by `pdanet compile -o`")
        from pdanet.export import load_network

        return load_network(args.weights), None, {}
    if args.machine is None:
        raise InputError("give a machine (NAME or FILE) or a saved network with --weights FILE")
    scale = _rational(args.scale, "--scale") if args.scale is not None else None
    machine = resolve_machine(args.machine, params)
    import torch

    from pdanet.constructions.table import compile as compile_machine

    target = args.target or default_target(machine)
    net = compile_machine(machine, target=target, method=args.method,
                          dtype=getattr(torch, args.dtype or "float32"))
    if scale is not None:
        try:
            net = net.with_scale(scale)
        except InputError as exc:  # e.g. weights that overflow the dtype at this β
            raise InputError(f"--scale {args.scale}: {exc}") from None
    task = None if _is_machine_file(args.machine) else args.machine
    return net, task, params


def network_summary(net: Any) -> dict[str, Any]:
    """The facts `pdanet compile` prints about a network, JSON-ready."""
    return {
        "machine": repr(net.machine),
        "construction": net.construction,
        "target": net.target,
        "method": net.method,
        "hidden_units": int(net.hidden_units),
        "bound": str(net.bound),
        "bound_value": int(net.bound_value),
        "scale": str(net.scale),
        "margin": str(net.margin),
        "dtype": str(net.dtype).replace("torch.", ""),
        "steps_per_symbol": int(net.steps_per_symbol),
        "scale_argument": str(net.scale_argument),
    }


def _compile_args(p: argparse.ArgumentParser) -> None:
    add_network_arguments(p, weights=False)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="save the weights: FILE.safetensors (with metadata) or FILE.pt "
                        "(torch.save); `pdanet verify --weights FILE` loads them")
    add_json_flag(p)


@command("compile", "compile a machine into a network with hand-set weights; print its summary",
         "pdanet compile dyck --k 4 --m 3 --target lstm --method compact -o w.safetensors\n"
         "  pdanet compile spec.json --target elman --json", _compile_args)
def _compile(args: argparse.Namespace, out: TextIO) -> int:
    if args.output:
        output_path(args.output, "--output", (".safetensors", ".pt"))
    net, task, params = build_network(args)
    path = None
    if args.output:
        from pdanet.export import save_network

        path = str(save_network(net, args.output, task=task, params=params))
    info = network_summary(net)
    if args.json:
        print_json(info | {"output": path}, out)
        return EXIT_OK
    print(f"{net.construction} for {net.machine!r}", file=out)
    units = f"{info['hidden_units']}  (bound {info['bound']} = {info['bound_value']})"
    rows = [("hidden units", units),
            ("β (scale)", info["scale"]), ("margin", info["margin"]), ("dtype", info["dtype"])]
    if net.steps_per_symbol != 1:
        rows.append(("steps/symbol", str(net.steps_per_symbol)))
    for label, value in rows:
        print(f"  {label:<16}{value}", file=out)
    if info["scale_argument"]:
        print("  scale argument:", file=out)
        print(textwrap.fill(_first_line(info["scale_argument"]), width=96,
                            initial_indent="    ", subsequent_indent="    "), file=out)
    if path is not None:
        print(f"wrote {path}", file=out)
    return EXIT_OK


def _verify_args(p: argparse.ArgumentParser) -> None:
    add_network_arguments(p)
    p.add_argument("--max-length", type=integer(0), default=8,
                   help="check every live prefix up to this length (default 8; 0 skips this "
                        "phase)")
    p.add_argument("--samples", type=integer(0), default=1000,
                   help="random live strings (default 1000; 0 skips this phase)")
    p.add_argument("--sample-lengths", type=integer(0), nargs=2, metavar=("LOW", "HIGH"),
                   help="lengths of the random strings, LOW ≤ HIGH (default: beyond "
                        "--max-length, up to 4 × --max-length or 16)")
    p.add_argument("--long-length", type=integer(0), default=1000,
                   help="length of the long busy strings (default 1000; 0 skips this phase)")
    p.add_argument("--long-samples", type=integer(0), default=16,
                   help="how many long strings (default 16; 0 skips this phase)")
    p.add_argument("--seed", type=integer(0), default=0, help="random seed ≥ 0 (default 0)")
    _progress_flag(p)
    add_json_flag(p)


#: bytes the verifier holds per checked position of one phase, at most (the strings' symbol ids,
#: the machine's trace and the network's states; about 35 measured on Dyck-(2, 3), doubled)
VERIFY_BYTES_PER_POSITION = 64


def verify_estimate(max_length: int | None, samples: int, sample_lengths: Sequence[int] | None,
                    long_length: int, long_samples: int) -> int:
    """Estimated peak bytes of `pdanet.verify` with these options: the largest phase's
    positions (strings × (length + 1)) times `VERIFY_BYTES_PER_POSITION`. The exhaustive phase
    counts at least one live prefix per length, padded to ``max_length``."""
    phases = [0]
    if max_length:
        phases.append((max_length + 1) * max_length)
    if samples:
        high = (sample_lengths[1] if sample_lengths
                else max(4 * max_length, 16) if max_length else 16)
        phases.append(samples * (high + 1))
    if long_samples and long_length:
        phases.append(long_samples * (long_length + 1))
    return max(phases) * VERIFY_BYTES_PER_POSITION


def _weights_line(net: Any) -> str | None:
    if "weights_file" not in net.info:
        return None
    same = net.info.get("weights_match_exact")
    return (f"weights from {net.info['weights_file']}: "
            f"{'as compiled' if same else 'differ from the exact construction (trained/edited)'}")


@command("verify", "run machine and network side by side and report the first disagreement "
                   "(exit status 1 when one is found)",
         "pdanet verify dyck --k 2 --m 3 --target lstm --max-length 8 --samples 1000 "
         "--long-length 1000\n  pdanet verify --weights w.safetensors --json", _verify_args)
def _verify(args: argparse.Namespace, out: TextIO) -> int:
    if args.sample_lengths and args.sample_lengths[0] > args.sample_lengths[1]:
        raise InputError(f"--sample-lengths {args.sample_lengths[0]} {args.sample_lengths[1]}: "
                         "need LOW ≤ HIGH")
    max_length = args.max_length or None
    limits.check(f"verify with --max-length {args.max_length}, --samples {args.samples}, "
                 f"--long-length {args.long_length}, --long-samples {args.long_samples}",
                 verify_estimate(max_length, args.samples, args.sample_lengths,
                                 args.long_length, args.long_samples),
                 hint="lower --long-length, --long-samples, --samples or --sample-lengths")
    net, _, _ = build_network(args)
    from pdanet.verify.lockstep import verify

    report = verify(
        net.machine, net,
        max_length=max_length,
        samples=args.samples,
        sample_lengths=tuple(args.sample_lengths) if args.sample_lengths else None,
        long_length=args.long_length, long_samples=args.long_samples, seed=args.seed,
        progress=_progress(args),
    )
    status = EXIT_OK if report.ok else EXIT_FAILED
    if args.json:
        print_json(report.to_dict() | {"weights_file": net.info.get("weights_file"),
                                       "weights_match_exact": net.info.get("weights_match_exact")},
                   out)
        return status
    line = _weights_line(net)
    if line:
        print(line, file=out)
    print(report, file=out)
    if not report.ok:
        cex = report.counterexample
        _check_failed("verify: the network disagrees with the machine"
                      + (f": {_first_line(str(cex))}" if cex is not None else ""))
    return status


def _certify_args(p: argparse.ArgumentParser) -> None:
    add_network_arguments(p)
    p.add_argument("--kernel", choices=("ulp", "saturating"), default="ulp",
                   help="model of tanh/sigmoid rounding: ulp (a few ulps; default, retried with "
                        "saturating when it does not prove every length) or saturating (ulp plus "
                        "exact saturation checked on this build's kernels)")
    p.add_argument("--min-scale", action="store_true",
                   help="also search the smallest β that certifies (bisection, to 1%%)")
    p.add_argument("--min-length", type=integer(1), default=None,
                   help="a certificate also counts (exit status 0, and for --min-scale) when it "
                        "covers at least this many steps (default: only every length counts)")
    p.add_argument("--eps", type=real(0.0), help="cap on the box radius, a finite number > 0 "
                                                 "(default: searched)")
    p.add_argument("--max-configs", type=integer(1), default=200_000,
                   help="most abstract configurations the enumerative certifier explores "
                        "(default 200000); beyond it the structural certifier is used")
    _progress_flag(p)
    add_json_flag(p)


def certify_network(machine: Any, net: Any, kernel: str = "ulp", eps: float | None = None,
                    max_configs: int = 200_000,
                    progress: Callable[[str, int, int], None] | None = None) -> tuple[Any, str]:
    """A certificate and the certifier that made it ("enumerative" or "structural"); `pn.certify`
    chooses the structural certifier for Dyck machines with too many configurations.
    ``progress(stage, done, total)`` is passed on to the certifier."""
    from pdanet.verify.certificate import certify, uses_structural

    method = "structural" if uses_structural(machine, net, max_configs) else "enumerative"
    return certify(machine, net, eps=eps, max_configs=max_configs, kernel=kernel,
                   progress=progress), method


def certificate_verdict(cert: Any, min_length: int | None = None) -> tuple[bool, str]:
    """(counts, reason): a certificate counts when it is ok and covers every length, or at
    least `min_length` steps when that is given; the reason says why in one line."""
    if not getattr(cert, "ok", False):
        failing = getattr(cert, "failing", None)
        notes = tuple(getattr(cert, "notes", ()) or ())
        why = (str(failing) if failing is not None else notes[0] if notes
               else "the induction did not close")
        return False, f"not certified: {_one_line(why)}"
    if getattr(cert, "all_lengths", True):
        return True, "certified for every length"
    n = getattr(cert, "max_length", None)
    if n is None:
        return False, "not certified for every length"
    if min_length is not None and n >= min_length:
        return True, f"certified for every length ≤ {n:,} (at least --min-length {min_length:,})"
    return False, (f"certified only for lengths ≤ {n:,}, not for every length (give --min-length "
                   f"{n} to accept that)")


def _certificate_dict(cert: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(cert):
        return _finite(cert)
    if hasattr(cert, "to_json"):
        return _finite(json.loads(cert.to_json()))
    return {"ok": bool(getattr(cert, "ok", False)), "text": str(cert)}


@command("certify", "prove agreement for every length (or say where the proof breaks); "
                    "exit status 1 when not certified",
         "pdanet certify dyck --k 2 --m 3 --target lstm --min-scale\n"
         "  pdanet certify dyck --k 100000 --m 3 --target lstm", _certify_args)
def _certify(args: argparse.Namespace, out: TextIO) -> int:
    net, _, _ = build_network(args)
    if args.min_scale and "weights_file" in net.info:
        raise InputError("--min-scale rebuilds the network at other β from its exact "
                         "weights, which would ignore the file's weights; drop --weights")
    bar = ProgressLine(_stderr()) if _progress(args) else None
    min_beta = min_error = None
    try:
        if args.min_scale:
            from pdanet.errors import CertificationError
            from pdanet.verify.certificate import min_scale

            try:
                min_beta, _ = min_scale(net.machine, net, dtype=net.dtype, kernel=args.kernel,
                                        min_length=args.min_length, progress=bar)
            except CertificationError as exc:
                span = ("every length" if args.min_length is None
                        else f"every length or {args.min_length:,} steps")
                min_error = (f"no smallest β found: {exc} (a certificate counts when it covers "
                             f"{span}; try --min-length)")
        cert, certifier = certify_network(net.machine, net, kernel=args.kernel, eps=args.eps,
                                          max_configs=args.max_configs, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    ok, reason = certificate_verdict(cert, args.min_length)
    status = EXIT_OK if ok else EXIT_FAILED
    if args.json:
        d = _certificate_dict(cert) | {"certifier": certifier, "certified": ok,
                                       "reason": reason,
                                       "weights_file": net.info.get("weights_file")}
        if args.min_scale:
            d["min_scale"] = None if min_beta is None else str(min_beta)
            d["min_scale_error"] = min_error
        print_json(d, out)
        return status
    line = _weights_line(net)
    if line:
        print(line, file=out)
    print(cert, file=out)
    if certifier != "enumerative":
        print(f"  ({certifier} certifier)", file=out)
    if min_beta is not None:
        print(f"smallest β that certifies: {min_beta} (≈ {float(min_beta):.4g}; the construction "
              f"uses β = {net.scale})", file=out)
    if min_error is not None:
        print(min_error, file=out)
    if not ok:
        _check_failed(f"certify: {reason}")
    return status


BOUNDS_COLUMNS = ("k", "m", "construction", "formula", "bound", "hidden_units", "matches",
                  "floor", "ratio", "scale", "min_scale", "note")


def _bounds_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=integer(1), nargs="+", default=[2, 4, 16], metavar="K",
                   help="bracket types, each ≥ 1 (default 2 4 16)")
    p.add_argument("--m", type=integer(1), nargs="+", default=[2, 3, 5], metavar="M",
                   help="depth bounds, each ≥ 1 (default 2 3 5)")
    p.add_argument("--targets", nargs="+", default=["elman", "lstm"], help="(default elman lstm)")
    p.add_argument("--methods", nargs="+", default=["hewitt", "onehot", "compact"],
                   help="(default hewitt onehot compact)")
    p.add_argument("--max-units", type=integer(1), default=20_000,
                   help="do not build a network whose bound exceeds this many units (its row "
                        "keeps the formula and bound; default 20000; at most the units limit of "
                        "pdanet.limits, PDANET_MAX_UNITS)")
    p.add_argument("--plot", metavar="FILE", help="also draw hidden units against k (.png, .svg)")
    p.add_argument("--min-scale", action="store_true",
                   help="add the smallest certified β of each construction (slower; compare with "
                        "the construction's β and the blanket 10^4 of the original code)")
    _progress_flag(p)
    add_json_flag(p)


def bounds_rows(ks: Sequence[int], ms: Sequence[int], targets: Sequence[str],
                methods: Sequence[str], max_units: int, progress: bool = False,
                min_scale: bool = False) -> list[Any]:
    """`pdanet.verify.bounds.table` rows for Dyck-(k, m), one construction at a time; a
    construction whose bound exceeds `max_units`, or that `pdanet.limits` refuses, is not built
    (its row says so)."""
    import sympy as sp

    from pdanet.constructions.dyck import BOUNDS
    from pdanet.errors import ResourceError
    from pdanet.verify.bounds import BoundRow, information_floor, table

    for k, m in ((k, m) for k in ks for m in ms):
        if k < 1 or m < 1:
            raise InputError(f"need k ≥ 1 and m ≥ 1, got k={k}, m={m}")
    limits.check(f"--max-units {max_units:,}", max_units, "max_units",
                 hint="give a smaller --max-units")
    jobs = [(k, m, t, meth) for k in ks for m in ms for t in targets for meth in methods]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="bounds", unit="net", leave=False)
    rows = []
    try:
        for k, m, target, method in jobs:
            formula = BOUNDS.get((target, method))
            units = (int(formula.subs({sp.Symbol("k"): k, sp.Symbol("m"): m}))
                     if formula is not None else None)
            skip = None
            if units is not None and units > max_units:
                skip = f"not built: {units:,} units > --max-units {max_units:,}"
            else:
                try:
                    rows.extend(table(k=[k], m=[m], targets=[target], methods=[method],
                                      min_scale=min_scale))
                except ResourceError as exc:
                    skip = f"not built: {_one_line(str(exc))}"
            if skip is not None:
                rows.append(BoundRow(k, m, target, method, f"{target}/{method}",
                                     formula=None if formula is None else str(formula),
                                     bound=units, floor=information_floor(k, m), note=skip))
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    return rows


def _plot_suffixes() -> tuple[str, ...]:
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(sorted("." + s for s in FigureCanvasBase.get_supported_filetypes()))


@command("bounds", "hidden units of every Dyck-(k, m) construction against its bound and the "
                   "information floor (exit status 1 on a mismatch)",
         "pdanet bounds --k 2 4 64 100000 --m 3 5\n  pdanet bounds --k 2 16 --m 3 --plot "
         "bounds.png --json", _bounds_args)
def _bounds(args: argparse.Namespace, out: TextIO) -> int:
    if args.plot:
        output_path(args.plot, "--plot", _plot_suffixes())
    from pdanet.verify.bounds import format_table

    rows = bounds_rows(args.k, args.m, args.targets, args.methods, args.max_units,
                       _progress(args), args.min_scale)
    if args.plot:
        from pdanet.plot import bounds_plot

        bounds_plot(rows).savefig(args.plot)
    bad = [r for r in rows if r.matches is False]
    if args.json:
        print_json({"rows": [r.to_dict() for r in rows], "plot": args.plot}, out)
    else:
        print(format_table(rows, BOUNDS_COLUMNS), file=out)
        if args.plot:
            print(f"wrote {args.plot}", file=out)
        if bad:
            print(f"{len(bad)} construction(s) build a unit count other than their bound",
                  file=out)
            _check_failed(f"bounds: {len(bad)} construction(s) build a unit count other than "
                          "their bound")
    return EXIT_FAILED if bad else EXIT_OK


# --------------------------------------------------------------------------------------------
# the source papers' experiments (pdanet.experiments; torch is imported inside the handlers)
# --------------------------------------------------------------------------------------------
EXPERIMENT_INITS = ("random", "compiled", "compiled+noise")


def _experiment_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--small", action="store_true",
                   help="the protocol's small size (minutes on 2 CPU cores); default: the "
                        "paper's size")
    p.add_argument("--noise", type=real(0.0), default=None, metavar="R",
                   help="for --init compiled+noise: noise as a fraction of the certified "
                        "weight tolerance (default 0.1)")
    p.add_argument("--out", default="experiments", metavar="DIR",
                   help="folder for the JSON record(s) and plots (default: experiments)")
    _progress_flag(p)
    add_json_flag(p)


def _experiment_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paper", help="grefenstette2015, hao2018, suzgun2019, dusell2021, hewitt2020")
    p.add_argument("task", nargs="?", default=None,
                   help="the paper's task (default: its only protocol's task; required where "
                        "the paper has several)")
    p.add_argument("--model", default=None, help="model name (default: the protocol's)")
    p.add_argument("--init", choices=EXPERIMENT_INITS, default="random")
    p.add_argument("--seed", type=integer(0), default=0)
    p.add_argument("--device", default=None,
                   help="torch device to train on, e.g. cuda (default: the CPU)")
    _experiment_common(p)


def _experiment_noise(init: str, noise: float | None) -> float:
    if init == "compiled+noise":
        return 0.1 if noise is None else noise
    if noise is not None:
        raise InputError("--noise applies to --init compiled+noise only")
    return 0.0


@command("experiment", "run a source paper's protocol with a model and an initialisation; "
                       "writes a JSON record and plots",
         "pdanet experiment suzgun2019 dyck2 --init compiled --small --seed 1 --out runs",
         _experiment_args)
def _experiment(args: argparse.Namespace, out: TextIO) -> int:
    from pdanet.experiments import run_experiment

    noise = _experiment_noise(args.init, args.noise)
    rec = run_experiment(args.paper, args.task, args.model, args.init, noise, args.seed,
                         "small" if args.small else "paper", args.out, _progress(args),
                         device=args.device)
    path = str(Path(args.out) / f"{rec['id']}.json")
    if args.json:
        print_json({"record": path, "final": rec["final"], "wall_time_s": rec["wall_time_s"]},
                   out)
        return EXIT_OK
    f, c = rec["final"], rec["config"]
    # examples until the validation metric first reached its threshold (0.99 accuracy, or
    # 0.05 nats for a cross-entropy difference): the record names the threshold in the key
    key = next(k for k in f if k.startswith("examples_to_valid_"))
    print(f"{rec['id']}: {c['metric']} valid {f['valid']:.3f}, test {f['test']:.3f} "
          f"(before training {f['test_before']:.3f}); examples to "
          f"{key.removeprefix('examples_to_valid_')} (valid): {f[key]}; "
          f"{rec['wall_time_s']:.1f} s", file=out)
    print(f"wrote {path} and {', '.join(rec['plots'].values())}", file=out)
    return EXIT_OK


def _sweep_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--paper", nargs="+", required=True,
                   help="papers (or `all`: every paper with a protocol)")
    p.add_argument("--task", nargs="+", default=None, help="tasks (default: each paper's)")
    p.add_argument("--model", nargs="+", default=None, help="models (default: the protocol's)")
    p.add_argument("--init", nargs="+", choices=EXPERIMENT_INITS,
                   default=["random", "compiled"])
    p.add_argument("--seeds", nargs="+", type=integer(0), default=[0, 1, 2])
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local process pool (default) or Ray")
    p.add_argument("--workers", type=integer(1), default=1,
                   help="processes (local) or CPUs of a local Ray instance (default 1)")
    p.add_argument("--address", default=None,
                   help="a Ray cluster's address (with --backend ray; default: a local one)")
    _experiment_common(p)


@command("sweep", "run a grid of experiments (papers × tasks × models × inits × seeds) as "
                  "independent, resumable jobs",
         "pdanet sweep --paper hao2018 suzgun2019 --small --seeds 0 1 2 --out docs/experiments",
         _sweep_args)
def _sweep(args: argparse.Namespace, out: TextIO) -> int:
    from pdanet.experiments import jobs, sweep
    from pdanet.experiments.sweep import pending

    noise = 0.1 if args.noise is None else args.noise
    if args.noise is not None and "compiled+noise" not in args.init:
        raise InputError("--noise applies to --init compiled+noise only")
    grid = jobs(None if "all" in args.paper else args.paper, args.task, args.model, args.init,
                args.seeds,
                "small" if args.small else "paper", noise)
    todo = len(pending(grid, args.out))
    records = sweep(grid, args.out, args.backend, args.workers, args.address, _progress(args))
    if args.json:
        print_json({"jobs": len(grid), "ran": todo, "skipped": len(grid) - todo,
                    "records": [r["id"] for r in records]}, out)
        return EXIT_OK
    for r in records:
        f = r["final"]
        print(f"{r['id']}: valid {f['valid']:.3f} test {f['test']:.3f} "
              f"({r['wall_time_s']:.1f} s)", file=out)
    print(f"{len(grid)} jobs: {todo} ran, {len(grid) - todo} already done; records in "
          f"{args.out}", file=out)
    return EXIT_OK


def _results_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("records", metavar="DIR", help="folder of experiment records")
    p.add_argument("--output", default="docs/experiments.md", metavar="FILE",
                   help="markdown file to write (default: docs/experiments.md)")
    p.add_argument("--preamble", default=None, metavar="FILE",
                   help="markdown inserted before the tables (e.g. the written findings)")
    add_json_flag(p)


@command("results", "the results table (markdown) of a folder of experiment records",
         "pdanet results docs/experiments --output docs/experiments.md "
         "--preamble docs/experiments/findings.md", _results_args)
def _results(args: argparse.Namespace, out: TextIO) -> int:
    path = output_path(args.output, "--output", (".md",))
    preamble = Path(args.preamble).read_text() if args.preamble else ""
    from pdanet.experiments.report import write_report

    cmd = (f"pdanet results {args.records} --output {args.output}"
           + (f" --preamble {args.preamble}" if args.preamble else ""))
    write_report(args.records, path, preamble, cmd)
    if args.json:
        print_json({"wrote": str(path)}, out)
    else:
        print(f"wrote {path}", file=out)
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# entry point: one error path
# --------------------------------------------------------------------------------------------
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pdanet")
    except PackageNotFoundError:
        return "(not installed)"


class UsageError(Exception):
    """A command-line argument error (argparse's), reported as one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise `UsageError` (one line, naming the subcommand and
    the flag) instead of printing the usage and exiting."""

    def error(self, message: str):  # type: ignore[override]
        sub = self.prog.removeprefix("pdanet").strip()
        hint = f" (see `{self.prog} --help`)"
        raise UsageError(f"{sub + ': ' if sub else ''}{message}{hint}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pdanet",
        description="Compile symbolic automata into neural networks with hand-set weights, and "
                    "prove that they agree. Exit status: 0 success, 1 a check (verify, certify, "
                    "bounds) ran and failed, 2 bad input or an error (one line on stderr, or a "
                    "JSON object {\"error\": ...} on stdout with --json).",
    )
    parser.add_argument("--version", action="version", version=f"pdanet {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS.values():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help,
                           epilog=f"example:\n  {cmd.example}",
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.arguments(p)
        p.set_defaults(_command=cmd)
    return parser


class _Output:
    """A text stream whose writes stop quietly once the reader has gone (a closed pipe, as in
    ``pdanet ... | head``); then, when it is the process's stdout, its file descriptor is pointed
    at os.devnull so that the interpreter's final flush does not fail either."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.closed_pipe = False

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        self.closed_pipe = True
        if self.stream is sys.stdout or self.stream is sys.__stdout__:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.stream.fileno())
                os.close(devnull)
            except (OSError, ValueError, AttributeError):
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


_ERR: list[TextIO] = []


def _stderr() -> TextIO:
    return _ERR[-1] if _ERR else sys.stderr


def _one_line(text: str) -> str:
    """`text` on one line: its non-blank lines joined with "; "."""
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())


def _check_failed(message: str) -> None:
    """Say on stderr, in one line, why a check failed (its full report is on stdout)."""
    _say(f"pdanet: check failed: {_one_line(message)}")


def _say(line: str) -> None:
    try:
        print(line, file=_stderr(), flush=True)
    except (BrokenPipeError, ValueError):
        pass


def _os_message(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else ""
    what = exc.strerror or str(exc)
    return f"{what}: {where}" if where else what


def _wants_json(argv: Sequence[str]) -> bool:
    args = list(argv)
    if "--" in args:
        args = args[: args.index("--")]
    return "--json" in args


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Run the command line; returns the exit status: 0 success, 1 a check ran and failed, 2 bad
    input or an error (reported as one line ``pdanet: error: ...`` on stderr, or with ``--json``
    as ``{"error": {"type": ..., "message": ...}}`` on stdout). Other exceptions propagate."""
    argv = list(argv) if argv is not None else sys.argv[1:]
    out_stream = _Output(out if out is not None else sys.stdout)
    _ERR.append(err if err is not None else sys.stderr)
    as_json = _wants_json(argv)

    def fail(kind: str, message: str) -> int:
        message = _one_line(message) or kind
        if as_json:
            print_json({"error": {"type": kind, "message": message}}, out_stream)
        else:
            _say(f"pdanet: error: {message}")
        return EXIT_ERROR

    try:
        parser = build_parser()
        try:
            with contextlib.redirect_stdout(out_stream):  # --help and --version
                args = parser.parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0)
        cmd: Command | None = getattr(args, "_command", None)
        if cmd is None:
            parser.print_help(out_stream)
            return EXIT_ERROR
        return int(cmd.handler(args, out_stream) or 0)
    except UsageError as exc:
        return fail("UsageError", str(exc))
    except PdanetError as exc:
        return fail(type(exc).__name__, str(exc))
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a user-given file that cannot be read or written
        return fail(type(exc).__name__, _os_message(exc))
    except KeyboardInterrupt:
        _say("pdanet: interrupted")
        return 130
    finally:
        out_stream.flush()
        _ERR.pop()


__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_OK",
    "Command",
    "ProgressLine",
    "UsageError",
    "add_json_flag",
    "add_machine_argument",
    "add_network_arguments",
    "bounds_rows",
    "build_network",
    "certificate_verdict",
    "certify_network",
    "command",
    "default_target",
    "dumps",
    "format_config",
    "format_output",
    "integer",
    "main",
    "network_summary",
    "output_path",
    "real",
    "resolve_machine",
    "task_catalog",
    "task_params",
    "verify_estimate",
]

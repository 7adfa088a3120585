"""The ``pdanet`` command line.

Subcommands live in a registry: each is a `Command` with a name, a one-line help, an example
shown by ``--help``, a function that adds its arguments, and a handler ``(args, out) -> int``.
Register new ones with `command(...)` (the built-in ``tasks``, ``draw`` and ``run`` below show
how; `add_machine_argument` and `add_json_flag` give the shared options). Every `PdanetError`
(and an OSError such as an unwritable output file) is printed as ``error: <message>`` on stderr
with exit status 1, without a traceback; argument errors exit with status 2.

A machine argument is NAME (a named task, parameters via ``--k``/``--m`` or ``--param key=value``)
or FILE (a path to a JSON machine file, or a JFLAP ``.jff`` file).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pdanet.automata.draw import symbol_text
from pdanet.errors import InputError, PdanetError


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
# shared argument helpers
# --------------------------------------------------------------------------------------------
def add_machine_argument(p: argparse.ArgumentParser) -> None:
    """The positional MACHINE (NAME or FILE) and the task parameters --k, --m, --param."""
    p.add_argument("machine", metavar="NAME|FILE",
                   help="a task name (see `pdanet tasks`) or a machine file (.json or .jff)")
    p.add_argument("--k", type=int, help="task parameter k (e.g. bracket types of dyck)")
    p.add_argument("--m", type=int, help="task parameter m (e.g. depth bound of dyck)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="another task parameter (repeatable); integers are parsed as such")


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _parse_value(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def task_params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name in ("k", "m"):
        if getattr(args, name, None) is not None:
            params[name] = getattr(args, name)
    for item in getattr(args, "param", []) or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--param {item!r} is not KEY=VALUE")
        params[key.strip()] = _parse_value(value.strip())
    return params


def task_catalog() -> list[tuple[str, str]]:
    """(name, one-line description) of every named task."""
    from pdanet.automata import tasks

    return [(name, tasks.task(name).description.strip().splitlines()[0]) for name in tasks.names()]


def resolve_machine(ref: str, params: dict[str, Any] | None = None) -> Any:
    """A machine from a file path (JSON or .jff) or a task name with parameters."""
    from pdanet.automata import tasks

    params = params or {}
    path = Path(ref)
    if path.suffix.lower() in (".json", ".jff") or (ref not in tasks.names() and path.is_file()):
        if params:
            raise InputError(f"task parameters {sorted(params)} make no sense for the machine "
                             f"file {ref!r}; drop them")
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
                         f"{tasks.task(ref).description}")
    return machine


# --------------------------------------------------------------------------------------------
# formatting traces
# --------------------------------------------------------------------------------------------
def _jsonable(x: Any) -> Any:
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, (frozenset, set)):
        return sorted((_jsonable(v) for v in x), key=repr)
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    if dataclasses.is_dataclass(x):
        return {f.name: _jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    return symbol_text(x)


def format_config(machine: Any, config: Any) -> str:
    """A configuration in one line: ``field=value`` pairs (None-valued fields other than the
    state left out; state None is shown as ``dead``); stacks written bottom first."""
    from pdanet.automata.bounded import DyckConfig

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
            if isinstance(v, tuple):
                text = "[" + " ".join(symbol_text(s) for s in v) + "]"
            else:
                text = "dead" if v is None else symbol_text(v)
            parts.append(f"{f.name}={text}")
        return " ".join(parts)
    return symbol_text(config)


def format_output(machine: Any, output: Any) -> str:
    kind = getattr(machine, "output_kind", None)
    if kind == "accept" or isinstance(output, bool):
        return "accept" if output else "reject"
    if isinstance(output, (frozenset, set)):
        order = getattr(machine, "output_alphabet", None)
        items = sorted(output, key=lambda s: order.index(s) if order is not None and s in order
                       else len(order or ()))
        return "{" + " ".join(symbol_text(s) for s in items) + "}"
    return symbol_text(output)


# --------------------------------------------------------------------------------------------
# built-in subcommands
# --------------------------------------------------------------------------------------------
def _tasks_args(p: argparse.ArgumentParser) -> None:
    add_json_flag(p)


@command("tasks", "list the named tasks", "pdanet tasks", _tasks_args)
def _tasks(args: argparse.Namespace, out: TextIO) -> int:
    catalog = task_catalog()
    if args.json:
        print(json.dumps([{"name": n, "description": d} for n, d in catalog], ensure_ascii=False),
              file=out)
        return 0
    width = max((len(n) for n, _ in catalog), default=0)
    for n, d in catalog:
        print(f"{n:<{width}}  {d}".rstrip(), file=out)
    return 0


def _draw_args(p: argparse.ArgumentParser) -> None:
    add_machine_argument(p)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write a rendering (.svg, .png, .pdf); without it, print the DOT source")
    p.add_argument("--format", choices=("svg", "png", "pdf"),
                   help="rendering format (default: the suffix of --output)")
    p.add_argument("--max-configs", type=int, default=None,
                   help="draw Dyck-(k, m) as its configuration graph up to this many "
                        "configurations, else as a schematic (default 64)")


@command("draw", "draw a machine's state diagram (Graphviz)",
         "pdanet draw dyck --k 2 --m 2 -o dyck.svg\n  pdanet draw spec.json > spec.dot",
         _draw_args)
def _draw(args: argparse.Namespace, out: TextIO) -> int:
    from pdanet.automata.draw import MAX_DYCK_CONFIGS, draw, render

    machine = resolve_machine(args.machine, task_params(args))
    limit = args.max_configs if args.max_configs is not None else MAX_DYCK_CONFIGS
    if args.output is None:
        print(draw(machine, limit).source, file=out, end="")
        return 0
    path = render(machine, args.output, args.format, limit)
    print(f"wrote {path}", file=out)
    return 0


def _run_args(p: argparse.ArgumentParser) -> None:
    add_machine_argument(p)
    p.add_argument("string", metavar="STRING",
                   help="the input: one symbol per character, or space separated symbols when "
                        "the alphabet has longer symbols ('' for the empty string)")
    add_json_flag(p)


@command("run", "run a machine on a string and print the trace step by step",
         "pdanet run dyck --k 2 --m 3 '([])'\n  pdanet run spec.json abba --json", _run_args)
def _run(args: argparse.Namespace, out: TextIO) -> int:
    machine = resolve_machine(args.machine, task_params(args))
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
        print(json.dumps({"machine": args.machine, "string": args.string, "steps": rows,
                          "accepted": verdict}, ensure_ascii=False), file=out)
        return 0
    table = [("step", "symbol", "configuration", "output")]
    for t, s in enumerate(steps):
        table.append((str(t), "" if s.symbol is None else symbol_text(s.symbol),
                      format_config(machine, s.config), format_output(machine, s.output)))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3], file=out)
    if verdict is not None:
        print(f"accepted: {'yes' if verdict else 'no'}", file=out)
    return 0


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pdanet")
    except PackageNotFoundError:
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pdanet",
        description="Compile symbolic automata into neural networks with hand-set weights, and "
                    "prove that they agree.",
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


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 pdanet error, 2 usage error)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    cmd: Command | None = getattr(args, "_command", None)
    if cmd is None:
        parser.print_help(out)
        return 2
    try:
        return int(cmd.handler(args, out) or 0)
    except PdanetError as exc:
        print(f"error: {exc}", file=err)
        return 1
    except OSError as exc:  # e.g. an output file in a folder that does not exist
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=err)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return 130


__all__ = [
    "COMMANDS",
    "Command",
    "add_json_flag",
    "add_machine_argument",
    "command",
    "format_config",
    "format_output",
    "main",
    "resolve_machine",
    "task_catalog",
    "task_params",
]

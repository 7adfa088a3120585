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
import textwrap
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
def add_machine_argument(p: argparse.ArgumentParser, optional: bool = False) -> None:
    """The positional MACHINE (NAME or FILE) and the task parameters --k, --m, --param.
    With ``optional`` the machine may be left out (``args.machine`` is then None)."""
    p.add_argument("machine", metavar="NAME|FILE", nargs="?" if optional else None,
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
# networks: compile, verify, certify, bounds
# --------------------------------------------------------------------------------------------
TARGET_PREFERENCE = ("lstm", "elman", "stack_rnn", "second_order")


def _rational(text: str, what: str) -> Any:
    import sympy as sp

    try:
        value = sp.Rational(text)
    except (TypeError, ValueError, sp.SympifyError):
        raise InputError(f"{what} {text!r} is not a rational number (e.g. 77, 153/2, 2.5)") \
            from None
    if value <= 0:
        raise InputError(f"{what} must be positive, got {text!r}")
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
                   help="rebuild the network at this saturation scale β instead of the "
                        "construction's own (a small β, e.g. 1, makes it fail)")
    if weights:
        p.add_argument("--weights", metavar="FILE",
                       help="load a saved network (.safetensors or .pt from `pdanet compile -o`) "
                            "instead of compiling MACHINE")


def default_target(machine: Any) -> str:
    """The first of `TARGET_PREFERENCE` that the machine compiles to (else any it does)."""
    from pdanet.constructions.base import _load_constructions, available

    _load_constructions()
    targets = [t for t, _ in available(machine)]
    for t in TARGET_PREFERENCE:
        if t in targets:
            return t
    return targets[0] if targets else "lstm"  # compile() then says what is available


def build_network(args: argparse.Namespace) -> tuple[Any, str | None, dict[str, Any]]:
    """The network the options describe: loaded from --weights, or compiled from MACHINE
    (rebuilt at --scale when given). Returns (net, task name or None, task parameters)."""
    import torch

    from pdanet.constructions.base import compile as compile_machine

    params = task_params(args)
    if getattr(args, "weights", None):
        clash = [opt for opt, v in (("MACHINE", args.machine), ("--target", args.target),
                                    ("--method", args.method), ("--scale", args.scale),
                                    ("--dtype", args.dtype)) if v]
        if params:
            clash.append("task parameters")
        if clash:
            raise InputError(f"--weights gives the network; drop {', '.join(clash)}")
        from pdanet.export import load_network

        return load_network(args.weights), None, {}
    if args.machine is None:
        raise InputError("give a machine (NAME or FILE) or a saved network with --weights FILE")
    machine = resolve_machine(args.machine, params)
    target = args.target or default_target(machine)
    net = compile_machine(machine, target=target, method=args.method,
                          dtype=getattr(torch, args.dtype or "float32"))
    if args.scale is not None:
        net = net.with_scale(_rational(args.scale, "--scale"))
    from pdanet.automata import tasks

    is_task = args.machine in tasks.names() and Path(args.machine).suffix.lower() not in (
        ".json", ".jff")  # as resolve_machine decides
    task = args.machine if is_task else None
    return net, task, params


def _progress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars on stderr (default: when stderr is a terminal)")


def _progress(args: argparse.Namespace) -> bool:
    if args.progress is not None:
        return bool(args.progress)
    return not getattr(args, "json", False) and sys.stderr.isatty()


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


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
    net, task, params = build_network(args)
    path = None
    if args.output:
        from pdanet.export import save_network

        path = str(save_network(net, args.output, task=task, params=params))
    info = network_summary(net)
    if args.json:
        print(json.dumps(info | {"output": path}, ensure_ascii=False), file=out)
        return 0
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
    return 0


def _verify_args(p: argparse.ArgumentParser) -> None:
    add_network_arguments(p)
    p.add_argument("--max-length", type=int, default=8,
                   help="check every live prefix up to this length (default 8; -1: skip)")
    p.add_argument("--samples", type=int, default=1000,
                   help="random live strings (default 1000)")
    p.add_argument("--sample-lengths", type=int, nargs=2, metavar=("LOW", "HIGH"),
                   help="lengths of the random strings (default 0 to --max-length)")
    p.add_argument("--long-length", type=int, default=1000,
                   help="length of the long busy strings (default 1000; 0: skip)")
    p.add_argument("--long-samples", type=int, default=16,
                   help="how many long strings (default 16)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    _progress_flag(p)
    add_json_flag(p)


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
    from pdanet.verify.lockstep import verify

    net, _, _ = build_network(args)
    report = verify(
        net.machine, net,
        max_length=None if args.max_length < 0 else args.max_length,
        samples=args.samples,
        sample_lengths=tuple(args.sample_lengths) if args.sample_lengths else None,
        long_length=args.long_length, long_samples=args.long_samples, seed=args.seed,
        progress=_progress(args),
    )
    if args.json:
        d = report.to_dict() | {"weights_file": net.info.get("weights_file"),
                                "weights_match_exact": net.info.get("weights_match_exact")}
        print(json.dumps(d, ensure_ascii=False, default=str), file=out)
    else:
        line = _weights_line(net)
        if line:
            print(line, file=out)
        print(report, file=out)
    return 0 if report.ok else 1


def _certify_args(p: argparse.ArgumentParser) -> None:
    add_network_arguments(p)
    p.add_argument("--kernel", choices=("ulp", "saturating"), default="ulp",
                   help="model of tanh/sigmoid rounding: ulp (a few ulps; default, retried with "
                        "saturating when it does not prove every length) or saturating (ulp plus "
                        "exact saturation checked on this build's kernels)")
    p.add_argument("--min-scale", action="store_true",
                   help="also search the smallest β that certifies (bisection, to 1%%)")
    p.add_argument("--min-length", type=int, default=None,
                   help="with --min-scale: a certificate also counts when it covers at least "
                        "this many steps (default: only every length counts)")
    p.add_argument("--eps", type=float, help="cap on the box radius (default: searched)")
    p.add_argument("--max-configs", type=int, default=200_000,
                   help="most abstract configurations the enumerative certifier explores "
                        "(default 200000); beyond it the structural certifier is used")
    add_json_flag(p)


def certify_network(machine: Any, net: Any, kernel: str = "ulp", eps: float | None = None,
                    max_configs: int = 200_000) -> tuple[Any, str]:
    """A certificate and the certifier that made it ("enumerative" or "structural"); `pn.certify`
    chooses the structural certifier for Dyck machines with too many configurations."""
    from pdanet.verify.certificate import certify, uses_structural

    method = "structural" if uses_structural(machine, net, max_configs) else "enumerative"
    return certify(machine, net, eps=eps, max_configs=max_configs, kernel=kernel), method


def _certificate_dict(cert: Any) -> dict[str, Any]:
    if hasattr(cert, "to_json"):
        return json.loads(cert.to_json())
    if dataclasses.is_dataclass(cert):
        return json.loads(json.dumps(dataclasses.asdict(cert), default=str))
    return {"ok": bool(getattr(cert, "ok", False)), "text": str(cert)}


@command("certify", "prove agreement for every length (or say where the proof breaks); "
                    "exit status 1 when not certified",
         "pdanet certify dyck --k 2 --m 3 --target lstm --min-scale\n"
         "  pdanet certify dyck --k 100000 --m 3 --target lstm", _certify_args)
def _certify(args: argparse.Namespace, out: TextIO) -> int:
    net, _, _ = build_network(args)
    min_beta = min_error = None
    if args.min_scale:
        if "weights_file" in net.info:
            raise InputError("--min-scale rebuilds the network at other β from its exact "
                             "weights, which would ignore the file's weights; drop --weights")
        from pdanet.errors import CertificationError
        from pdanet.verify.certificate import min_scale

        try:
            min_beta, _ = min_scale(net.machine, net, dtype=net.dtype, kernel=args.kernel,
                                    min_length=args.min_length)
        except CertificationError as exc:
            span = ("every length" if args.min_length is None
                    else f"every length or {args.min_length:,} steps")
            min_error = (f"no smallest β found: {exc} (a certificate counts when it covers "
                         f"{span}; try --min-length)")
    cert, certifier = certify_network(net.machine, net, kernel=args.kernel, eps=args.eps,
                                      max_configs=args.max_configs)
    ok = bool(getattr(cert, "ok", False))
    if args.json:
        d = _certificate_dict(cert) | {"certifier": certifier,
                                       "weights_file": net.info.get("weights_file")}
        if args.min_scale:
            d["min_scale"] = None if min_beta is None else str(min_beta)
            d["min_scale_error"] = min_error
        print(json.dumps(d, ensure_ascii=False, default=str), file=out)
        return 0 if ok else 1
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
    return 0 if ok else 1


BOUNDS_COLUMNS = ("k", "m", "construction", "formula", "bound", "hidden_units", "matches",
                  "floor", "ratio", "scale", "min_scale", "note")


def _bounds_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--k", type=int, nargs="+", default=[2, 4, 16], metavar="K",
                   help="bracket types (default 2 4 16)")
    p.add_argument("--m", type=int, nargs="+", default=[2, 3, 5], metavar="M",
                   help="depth bounds (default 2 3 5)")
    p.add_argument("--targets", nargs="+", default=["elman", "lstm"], help="(default elman lstm)")
    p.add_argument("--methods", nargs="+", default=["hewitt", "onehot", "compact"],
                   help="(default hewitt onehot compact)")
    p.add_argument("--max-units", type=int, default=20_000,
                   help="do not build a network whose bound exceeds this many units (its row "
                        "keeps the formula and bound; default 20000)")
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
    construction whose bound exceeds `max_units` is not built (its row says so)."""
    import sympy as sp

    from pdanet.constructions.dyck import BOUNDS
    from pdanet.verify.bounds import BoundRow, information_floor, table

    for k, m in ((k, m) for k in ks for m in ms):
        if k < 1 or m < 1:
            raise InputError(f"need k ≥ 1 and m ≥ 1, got k={k}, m={m}")
    jobs = [(k, m, t, meth) for k in ks for m in ms for t in targets for meth in methods]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="bounds", unit="net", leave=False)
    rows = []
    try:
        for k, m, target, method in jobs:
            formula = BOUNDS.get((target, method))
            if formula is not None:
                units = int(formula.subs({sp.Symbol("k"): k, sp.Symbol("m"): m}))
                if units > max_units:
                    rows.append(BoundRow(k, m, target, method, f"{target}/{method}",
                                         formula=str(formula), bound=units,
                                         floor=information_floor(k, m),
                                         note=f"not built: {units:,} units > --max-units "
                                              f"{max_units:,}"))
                    if bar is not None:
                        bar.update()
                    continue
            rows.extend(table(k=[k], m=[m], targets=[target], methods=[method],
                              min_scale=min_scale))
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    return rows


@command("bounds", "hidden units of every Dyck-(k, m) construction against its bound and the "
                   "information floor (exit status 1 on a mismatch)",
         "pdanet bounds --k 2 4 64 100000 --m 3 5\n  pdanet bounds --k 2 16 --m 3 --plot "
         "bounds.png --json", _bounds_args)
def _bounds(args: argparse.Namespace, out: TextIO) -> int:
    from pdanet.verify.bounds import format_table

    rows = bounds_rows(args.k, args.m, args.targets, args.methods, args.max_units,
                       _progress(args), args.min_scale)
    if args.plot:
        from pdanet.plot import bounds_plot

        bounds_plot(rows).savefig(args.plot)
    bad = [r for r in rows if r.matches is False]
    if args.json:
        print(json.dumps({"rows": [r.to_dict() for r in rows], "plot": args.plot},
                         ensure_ascii=False), file=out)
    else:
        print(format_table(rows, BOUNDS_COLUMNS), file=out)
        if args.plot:
            print(f"wrote {args.plot}", file=out)
        if bad:
            print(f"{len(bad)} construction(s) build a unit count other than their bound",
                  file=out)
    return 1 if bad else 0


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
    "add_network_arguments",
    "bounds_rows",
    "build_network",
    "certify_network",
    "command",
    "default_target",
    "format_config",
    "format_output",
    "main",
    "network_summary",
    "resolve_machine",
    "task_catalog",
    "task_params",
]

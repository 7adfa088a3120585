"""Random argument vectors for every command, run in-process through `pdanet.cli.main`: valid
task names and flags mixed with garbage values, missing and extra positionals, bad paths.

Whatever the arguments, no exception escapes; the exit status is 0, 1 (only for a check that
ran: verify, certify, bounds) or 2; a status-2 failure is exactly one line on stderr,
``pdanet: error: ...``, that names what is wrong; with ``--json`` stdout is strict JSON (no NaN
or Infinity) and an error is ``{"error": {"type", "message"}}``.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdanet.cli import COMMANDS, main

# cheap machines only: every valid combination must run in well under a second
TASKS = ["dyck", "parity", "reversal", "modular_counter", "cumulative_xor", "no_such_task"]
GARBAGE = ["", " ", "-1", "-2", "0", "nan", "inf", "-inf", "1e400", "2.5", "abc", "0x10",
           "9" * 40, "1e9", "--", "=", "1/0", "-0", "1_0"]
SMALL = ["0", "1", "2", "3"]


def _strict_json(text: str):
    def reject(token):
        raise AssertionError(f"non-standard JSON token {token} in {text[:200]!r}")

    return json.loads(text, parse_constant=reject)


STRINGS = {"dyck": ["([])", "(("], "parity": ["0110", ""], "reversal": ["ab##", "ab#"],
           "modular_counter": ["0111"], "cumulative_xor": ["0110"], "no_such_task": ["ab"]}


class _Picker:
    """Draws argument values: in a *valid* example every value is valid, in a *one bad*
    example exactly one value (chosen up front by its index) is garbage, in a *chaos* example
    each value is garbage with probability 1/2."""

    def __init__(self, draw):
        self.draw = draw
        self.mode = draw(st.sampled_from(["valid", "valid", "one_bad", "one_bad", "chaos"]))
        self.bad_at = draw(st.integers(0, 8))
        self.count = 0

    def bad(self) -> bool:
        self.count += 1
        if self.mode == "chaos":
            return self.draw(st.booleans())
        return self.mode == "one_bad" and self.count - 1 == self.bad_at

    def value(self, valid: list[str]) -> str:
        return self.draw(st.sampled_from(GARBAGE if self.bad() else valid))

    def flag(self, name: str, valid: list[str], nargs: int = 1) -> list[str]:
        return [name] + [self.value(valid) for _ in range(nargs)]

    def choice(self, valid: list[str], bad: list[str]) -> str:
        return self.draw(st.sampled_from(bad if self.bad() else valid))

    def path(self, tmp, suffixes: list[str]) -> str:
        """A path under `tmp`: good, or in a missing folder, a folder itself, a bad suffix."""
        suffix = self.draw(st.sampled_from(suffixes))
        kind = self.choice(["good"], ["missing_dir", "is_dir", "bad_suffix", "no_suffix"])
        return {"good": str(tmp / f"out{suffix}"), "missing_dir": str(tmp / "no" / f"x{suffix}"),
                "is_dir": str(tmp), "bad_suffix": str(tmp / "out.xyz"),
                "no_suffix": str(tmp / "out")}[kind]

    def machine_flags(self, task: str) -> list[str]:
        flags: list[str] = []
        if task == "dyck":
            flags += self.flag("--k", ["1", "2", "3"]) + self.flag("--m", ["1", "2", "3"])
        elif task == "modular_counter":
            flags += ["--param", self.choice(["modulus=3", "residue=1"],
                                             ["bogus=1", "modulus=nan", "nokey", "=3",
                                              "modulus=-1", "modulus=0", "modulus=1e400"])]
        elif self.bad():
            flags += self.draw(st.sampled_from([["--k", "2"], ["--param", "bogus=1"]]))
        return flags


@st.composite
def argvs(draw, name: str, tmp):
    """An argument vector for command `name` (the command first)."""
    pick = _Picker(draw)
    flags: list[list[str]] = []
    task = pick.choice(TASKS[:-1], ["no_such_task", ""])
    positionals = [task] if task else []
    if name == "run":
        positionals.append(draw(st.sampled_from(STRINGS.get(task, ["ab"]))) if not pick.bad()
                           else draw(st.sampled_from(["(x", "(0 )0", "zz"])))
        if pick.bad():
            positionals = positionals[: draw(st.integers(0, 1))] + ["extra"] * draw(
                st.integers(0, 1))
        flags.append(pick.machine_flags(task))
    elif name == "draw":
        flags.append(pick.machine_flags(task))
        if draw(st.booleans()):
            flags.append(pick.flag("--max-configs", ["1", "10", "64"]))
        if draw(st.booleans()):
            flags.append(["-o", pick.path(tmp, [".svg", ".png"])])
        if draw(st.booleans()):
            flags.append(["--format", pick.choice(["svg", "png"], ["jpeg"])])
    elif name in ("compile", "verify", "certify"):
        flags.append(pick.machine_flags(task))
        if draw(st.booleans()):
            flags.append(["--target", pick.choice(["lstm", "elman"], ["nonsense"])])
        if draw(st.booleans()):
            flags.append(["--scale", pick.value(["1", "77", "153/2", "1e30"])])
        if draw(st.booleans()):
            flags.append(["--dtype", pick.choice(["float32", "float64"], ["int8"])])
        if name == "compile" and draw(st.booleans()):
            flags.append(["-o", pick.path(tmp, [".safetensors", ".pt"])])
        if name != "compile" and draw(st.integers(0, 4)) == 0:
            flags.append(["--weights", pick.path(tmp, [".safetensors", ".pt"])])
        if name == "verify":
            flags.append(pick.flag("--max-length", SMALL))
            flags.append(pick.flag("--samples", ["0", "5", "20"]))
            flags.append(pick.flag("--long-length", ["0", "10", "30"]))
            flags.append(pick.flag("--long-samples", ["0", "1", "2"]))
            if draw(st.booleans()):
                flags.append(pick.flag("--seed", SMALL))
            if draw(st.booleans()):
                flags.append(pick.flag("--sample-lengths", SMALL + ["9"], 2))
        if name == "certify":
            for f in draw(st.lists(st.sampled_from(["--eps", "--max-configs", "--min-length"]),
                                   max_size=3, unique=True)):
                valid = {"--eps": ["0.01", "0.1", "1"], "--max-configs": ["1", "5", "1000"],
                         "--min-length": ["1", "10"]}[f]
                flags.append(pick.flag(f, valid))
            if draw(st.booleans()):
                flags.append(["--kernel", pick.choice(["ulp", "saturating"], ["x"])])
    elif name == "bounds":
        positionals = ["extra"] if pick.bad() else []
        flags.append(pick.flag("--k", ["1", "2", "3"], draw(st.integers(1, 2))))
        flags.append(pick.flag("--m", ["1", "2"]))
        flags.append(["--targets", pick.choice(["elman", "lstm"], ["bogus"])])
        flags.append(["--methods", pick.choice(["hewitt", "compact"], ["bogus"])])
        if draw(st.booleans()):
            flags.append(pick.flag("--max-units", ["1", "10", "100"]))
        if draw(st.booleans()):
            flags.append(["--plot", pick.path(tmp, [".png", ".svg"])])
    elif name == "tasks":
        positionals = ["extra"] if pick.bad() else []
    if draw(st.booleans()):
        flags.append(["--json"])
    if pick.bad():
        flags.append([draw(st.sampled_from(["--bogus", "-x", "--k"]))])
    parts = [positionals] + flags
    order = draw(st.permutations(range(len(parts))))
    return [name] + [a for i in order for a in parts[i]]


def _named(message: str, argv: list[str]) -> bool:
    """The message names something: a flag, a quoted value or path, a parameter with its value
    (``m=0``), a task, a state or symbol, or one of the arguments given."""
    if re.search(r"--[a-z]|'[^']*'|\"[^\"]*\"|`[^`]*`|\b[a-z_]+=\S", message):
        return True
    words = {a.strip() for a in argv} | {a.partition("=")[0].strip() for a in argv if "=" in a}
    return any(len(w) >= 2 and w in message for w in words)


def check(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out, err)  # nothing may escape: a bug keeps its traceback and fails here
    stdout, stderr = out.getvalue(), err.getvalue()
    assert code in (0, 1, 2), (argv, code)
    assert "Traceback" not in stderr, (argv, stderr)
    if code == 1:
        assert argv[0] in ("verify", "certify", "bounds"), (argv, stdout)
    as_json = "--json" in argv and "--help" not in argv
    if code == 2:
        if as_json and stdout.strip():
            data = _strict_json(stdout)
            assert set(data) == {"error"} and set(data["error"]) == {"type", "message"}, data
            assert "\n" not in data["error"]["message"] and stderr == ""
            message = data["error"]["message"]
        else:
            lines = stderr.splitlines()
            if argv[1:] == []:  # no arguments: the usage goes to stdout
                return
            assert len(lines) == 1 and lines[0].startswith("pdanet: error: "), (argv, stderr)
            message = lines[0]
        assert _named(message, argv), (argv, message)
    elif as_json:
        _strict_json(stdout)


SETTINGS = {"deadline": None,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]}
FAST = {"tasks": 30, "run": 150, "draw": 100, "compile": 100, "verify": 80, "certify": 80,
        "bounds": 60, "experiment": 30, "sweep": 30, "results": 30}


@pytest.mark.parametrize("name", sorted(FAST))
def test_cli_fuzz(name, tmp_path):
    @settings(max_examples=FAST[name], **SETTINGS)
    @given(argvs(name, tmp_path))
    def run(argv):
        check(argv)

    run()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FAST))
def test_cli_fuzz_more(name, tmp_path):
    @settings(max_examples=10 * FAST[name], **SETTINGS)
    @given(argvs(name, tmp_path))
    def run(argv):
        check(argv)

    run()


def test_every_command_is_fuzzed():
    assert set(FAST) == set(COMMANDS)


@pytest.mark.parametrize("argv", [
    [], ["--bogus"], ["frobnicate"], ["run"], ["run", "dyck"], ["run", "dyck", "()", "extra"],
    ["verify", "--k"], ["bounds", "--k"], ["certify", "--json", "--eps", "nan"],
])
def test_usage_errors_are_one_line(argv):
    check(argv)

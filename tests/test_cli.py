"""The command line, driven through `main([...])`."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys

import pytest

from pdanet import cli
from pdanet.automata.bounded import DyckKM
from pdanet.automata.dfa import DFA
from pdanet.automata.io import save
from pdanet.cli import COMMANDS, command, main, task_catalog


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def dfa_file(tmp_path):
    m = DFA(["even", "odd"], "ab", {("even", "a"): "odd", ("odd", "a"): "even",
                                    ("even", "b"): "even", ("odd", "b"): "odd"},
            "even", {"even"}, name="even-a")
    path = tmp_path / "even_a.json"
    save(m, path)
    return m, path


def test_tasks_lists_every_name(capsys):
    code, out, err = run(capsys, "tasks")
    assert code == 0 and err == ""
    catalog = task_catalog()
    assert catalog and len(out.strip().splitlines()) == len(catalog)
    for name, _ in catalog:
        assert any(line.split()[0] == name for line in out.splitlines())
    code, out, _ = run(capsys, "tasks", "--json")
    assert [row["name"] for row in json.loads(out)] == [n for n, _ in catalog]


def test_run_dyck_trace(capsys):
    code, out, err = run(capsys, "run", "dyck", "--k", "2", "--m", "3", "([])")
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0].split() == ["step", "symbol", "configuration", "output"]
    m = DyckKM(2, 3)
    steps = m.trace("([])")
    assert len(lines) == 1 + len(steps) + 1
    for line, step in zip(lines[1:], steps):
        for sym in step.output:  # every allowed next symbol is printed
            assert sym in line.split("{")[1]
    assert "stack=⊥([" in lines[3]
    assert lines[-1] == "accepted: yes"
    code, out, _ = run(capsys, "run", "dyck", "--k", "2", "--m", "1", "((")
    assert "dead" in out.splitlines()[-2] and out.strip().endswith("accepted: no")


def test_run_named_transducer(capsys):
    from pdanet.automata import tasks

    code, out, _ = run(capsys, "run", "reversal", "ab##")
    assert code == 0
    rows = out.strip().splitlines()[1:]
    m = tasks.get("reversal")
    expected = ["ε" if o is None else o for o in m.outputs("ab##")]
    assert [r.split()[-1] for r in rows] == expected == ["ε", "#", "#", "b", "a"]
    assert "stack=[⊥" in rows[1]
    code, out, _ = run(capsys, "run", "sequence_copy", "--param", "vocab_size=2", "s0 s1 # #")
    assert code == 0 and out.strip().splitlines()[-1].split()[-1] == "s1"
    code, out, _ = run(capsys, "run", "modular_counter", "--param", "modulus=2",
                       "--param", "residue=1", "0111")
    assert out.strip().endswith("accepted: yes")
    code, out, _ = run(capsys, "run", "modular_counter", "--param", "modulus=2", "011")
    assert out.strip().endswith("accepted: yes")
    code, _, err = run(capsys, "run", "parity", "--param", "bogus=1", "01")
    assert code == 2 and "bad parameters" in err


def test_run_json_matches_machine(capsys, dfa_file):
    m, path = dfa_file
    code, out, _ = run(capsys, "run", str(path), "abaa", "--json")
    assert code == 0
    data = json.loads(out)
    trace = m.trace("abaa")
    assert [row["symbol"] for row in data["steps"]] == [None, "a", "b", "a", "a"]
    assert [row["config"]["state"] for row in data["steps"]] == [s.config.state for s in trace]
    assert [row["output"] for row in data["steps"]] == [s.output for s in trace]
    assert data["accepted"] is m.accepts("abaa")


def test_run_mealy_outputs(capsys, tmp_path):
    m = DFA([0], "01", {(0, "0"): 0, (0, "1"): 0}, 0, outputs={(0, "0"): "1", (0, "1"): "0"})
    save(m, tmp_path / "flip.json")
    code, out, _ = run(capsys, "run", str(tmp_path / "flip.json"), "011")
    assert code == 0
    rows = out.strip().splitlines()[1:]
    assert [r.split()[-1] for r in rows] == ["ε", "1", "0", "0"]
    assert "accepted" not in out


def test_draw_prints_dot(capsys, dfa_file):
    _, path = dfa_file
    code, out, _ = run(capsys, "draw", str(path))
    assert code == 0
    assert out.startswith("digraph") and "doublecircle" in out and "__start__ ->" in out
    code, out, _ = run(capsys, "draw", "dyck", "--k", "3", "--m", "5")
    assert "depth 5" in out  # 364 configurations: drawn as the schematic
    code, out, _ = run(capsys, "draw", "dyck", "--k", "3", "--m", "5", "--max-configs", "400")
    assert "depth 5" not in out
    assert len(re.findall(r"^\tq\d+ \[", out, flags=re.MULTILINE)) == DyckKM(3, 5).num_configs


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_draw_svg(capsys, tmp_path):
    target = tmp_path / "dyck.svg"
    code, out, err = run(capsys, "draw", "dyck", "--k", "2", "--m", "2", "-o", str(target))
    assert code == 0 and err == "" and str(target) in out
    assert "<svg" in target.read_text(encoding="utf-8")


def test_errors_are_typed_messages(capsys, tmp_path):
    code, out, err = run(capsys, "run", "no-such-task", "ab")
    assert code == 2 and out == ""
    assert err.startswith("pdanet: error: ") and "no-such-task" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1, "kind": "dfa", "states": [0], "alphabet": ["a"], '
                   '"start": 3, "transitions": []}', encoding="utf-8")
    code, _, err = run(capsys, "run", str(bad), "a")
    assert code == 2 and "$.start" in err and "unknown state 3" in err
    code, _, err = run(capsys, "run", "dyck", "--k", "2", "--m", "2", "(x")
    assert code == 2 and "'x'" in err
    code, _, err = run(capsys, "run", "dyck", "--param", "nonsense", "()")
    assert code == 2 and "KEY=VALUE" in err
    code, _, err = run(capsys, "run", str(bad), "a", "--k", "2")
    assert code == 2 and "drop them" in err


def test_jflap_file_and_unwritable_output(capsys, tmp_path):
    from pathlib import Path

    jff = Path(__file__).parent / "data" / "even_a.jff"
    code, out, _ = run(capsys, "run", str(jff), "abab")
    assert code == 0 and out.strip().endswith("accepted: yes")
    if shutil.which("dot") is not None:
        code, _, err = run(capsys, "draw", str(jff), "-o", str(tmp_path / "no" / "dir.svg"))
        assert code == 2 and err.startswith("pdanet: error: ") and "Traceback" not in err


def test_usage_errors_and_help(capsys):
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and "invalid choice" in err
    code, out, _ = run(capsys)
    assert code == 2 and "tasks" in out
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("pdanet ")
    for name, cmd in COMMANDS.items():
        code, out, _ = run(capsys, name, "--help")
        assert code == 0 and "example:" in out and cmd.example.splitlines()[0] in out


def test_register_command(capsys):
    def args(p):
        p.add_argument("n", type=int)
        cli.add_json_flag(p)

    @command("square", "square a number", "pdanet square 3", args)
    def square(a, out):
        print(json.dumps({"n": a.n * a.n}) if a.json else a.n * a.n, file=out)
        return 0

    try:
        assert run(capsys, "square", "7")[1].strip() == "49"
        assert json.loads(run(capsys, "square", "4", "--json")[1]) == {"n": 16}
        assert "pdanet square 3" in run(capsys, "square", "--help")[1]
    finally:
        del COMMANDS["square"]


# --- one error path -------------------------------------------------------------------------

def _one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pdanet: error: "), err
    assert "Traceback" not in err
    return lines[0]


def _strict(text: str):
    def reject(token):
        raise AssertionError(f"invalid JSON token {token}")

    return json.loads(text, parse_constant=reject)


@pytest.mark.parametrize("argv, flag", [
    (["run", "dyck", "--k", "nan", "()"], "--k"),
    (["run", "dyck", "--m", "2.5", "()"], "--m"),
    (["run", "dyck", "--k", "9" * 40, "()"], "--k"),
    (["draw", "dyck", "--max-configs", "-1"], "--max-configs"),
    (["draw", "dyck", "--max-configs", "inf"], "--max-configs"),
    (["verify", "dyck", "--max-length", "-2"], "--max-length"),
    (["verify", "dyck", "--samples", "-5"], "--samples"),
    (["verify", "dyck", "--long-length", "abc"], "--long-length"),
    (["verify", "dyck", "--long-samples", "-1"], "--long-samples"),
    (["verify", "dyck", "--seed", "-1"], "--seed"),
    (["verify", "dyck", "--sample-lengths", "1", "nan"], "--sample-lengths"),
    (["certify", "dyck", "--eps", "inf"], "--eps"),
    (["certify", "dyck", "--eps", "nan"], "--eps"),
    (["certify", "dyck", "--eps", "-1"], "--eps"),
    (["certify", "dyck", "--eps", "0"], "--eps"),
    (["certify", "dyck", "--max-configs", "0"], "--max-configs"),
    (["certify", "dyck", "--min-length", "-4"], "--min-length"),
    (["bounds", "--k", "0"], "--k"),
    (["bounds", "--m", "-3"], "--m"),
    (["bounds", "--max-units", "-1"], "--max-units"),
    (["bounds", "--max-units", "1e400"], "--max-units"),
])
def test_bad_numeric_flags_are_one_line_exit_2(capsys, argv, flag):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert flag in _one_error_line(err)
    code, out, err = run(capsys, *argv, "--json")
    data = _strict(out)
    assert code == 2 and err == "" and data["error"]["type"] == "UsageError"
    assert flag in data["error"]["message"]


def test_integer_options_accept_exact_scientific_forms():
    parse = cli.integer(1)
    assert parse("1e9") == 10**9 and parse("1_000") == 1000 and parse("2.5e3") == 2500
    for bad in ("2.5", "1e-3", "nan", "inf", "0", "", "1e400", "0x10"):
        with pytest.raises(Exception, match="expected an integer"):
            parse(bad)


def test_param_values_must_be_finite(capsys):
    code, _, err = run(capsys, "run", "modular_counter", "--param", "modulus=nan", "01")
    assert code == 2 and "modulus=nan" in _one_error_line(err)


def test_usage_errors_are_one_line(capsys):
    for argv in (["frobnicate"], ["run"], ["run", "dyck", "()", "extra"], ["tasks", "--bogus"]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        _one_error_line(err)
    code, out, err = run(capsys, "run", "--json")
    assert code == 2 and err == "" and _strict(out)["error"]["type"] == "UsageError"


def test_pdanet_errors_as_json(capsys):
    code, out, err = run(capsys, "run", "no-such-task", "ab", "--json")
    data = _strict(out)
    assert code == 2 and err == ""
    assert data == {"error": {"type": "InputError", "message": data["error"]["message"]}}
    assert "no-such-task" in data["error"]["message"]


def test_missing_machine_file_and_folder(capsys, tmp_path):
    code, _, err = run(capsys, "run", str(tmp_path / "missing.json"), "ab")
    assert code == 2 and "does not exist" in _one_error_line(err)
    (tmp_path / "dir.json").mkdir()
    code, _, err = run(capsys, "run", str(tmp_path / "dir.json"), "ab")
    assert code == 2 and "folder" in _one_error_line(err)


def test_draw_output_paths_are_checked_first(capsys, tmp_path):
    for target, words in ((tmp_path / "no" / "d.svg", "does not exist"),
                          (tmp_path, "is a folder"), (tmp_path / "d.xyz", ".svg")):
        code, out, err = run(capsys, "draw", "dyck", "-o", str(target))
        line = _one_error_line(err)
        assert code == 2 and out == "" and "--output" in line and words in line


class _ClosedPipe(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


def test_broken_pipe_is_quiet(capsys):
    err = io.StringIO()
    assert main(["tasks"], _ClosedPipe(), err) == 0 and err.getvalue() == ""
    assert main(["run", "dyck", "--k", "2", "--m", "3", "([])"], _ClosedPipe(), err) == 0
    assert main(["--help"], _ClosedPipe(), err) == 0 and err.getvalue() == ""


def test_broken_pipe_in_a_real_process():
    code = ("import os, sys\n"
            "r, w = os.pipe(); os.close(r); os.dup2(w, 1)\n"
            "from pdanet.cli import main\n"
            "sys.exit(main(['draw', 'dyck', '--k', '3', '--m', '5', '--max-configs', '400']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0 and proc.stderr == ""


def test_json_output_is_strict():
    assert cli.dumps({"a": float("nan"), "b": [float("inf"), -float("inf")], "c": 1.5}) == \
        '{"a": "nan", "b": ["inf", "-inf"], "c": 1.5}'
    import numpy as np

    assert _strict(cli.dumps({"x": np.float32("nan"), "y": np.arange(2), 3: (1, 2)})) == \
        {"x": "nan", "y": [0, 1], "3": [1, 2]}


def test_run_huge_dyck_builds_nothing_of_size_k(capsys):
    code, out, err = run(capsys, "run", "dyck", "--k", "1e9", "--m", "3", "(0 )0")
    assert code == 0 and err == "" and "(999999999" in out
    assert out.strip().endswith("accepted: yes")
    code, out, _ = run(capsys, "run", "dyck", "--k", "1000000000", "--m", "3", "(0 )0", "--json")
    data = _strict(out)
    assert code == 0 and data["accepted"] is True and len(data["steps"]) == 3


def test_progress_line_draws_and_erases():
    stream = io.StringIO()
    bar = cli.ProgressLine(stream, width=10, interval=0)
    bar("explore", 5, 10)
    bar("explore", 10, 10)
    assert stream.getvalue().startswith("\rexplore [#####-----] 5/10")
    assert "[##########] 10/10" in stream.getvalue()
    bar.close()
    assert stream.getvalue().endswith("\r") and "\n" not in stream.getvalue()

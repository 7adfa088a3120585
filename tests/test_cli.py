"""The command line, driven through `main([...])`."""

from __future__ import annotations

import json
import re
import shutil

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
    code, _, err = run(capsys, "run", "sequence_copy", "ab")
    assert code == 1 and "no machine" in err
    code, out, _ = run(capsys, "run", "modular_counter", "--param", "modulus=2",
                       "--param", "residue=1", "0111")
    assert out.strip().endswith("accepted: yes")
    code, out, _ = run(capsys, "run", "modular_counter", "--param", "modulus=2", "011")
    assert out.strip().endswith("accepted: yes")
    code, _, err = run(capsys, "run", "parity", "--param", "bogus=1", "01")
    assert code == 1 and "bad parameters" in err


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
    assert code == 1 and out == ""
    assert err.startswith("error: ") and "no-such-task" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 1, "kind": "dfa", "states": [0], "alphabet": ["a"], '
                   '"start": 3, "transitions": []}', encoding="utf-8")
    code, _, err = run(capsys, "run", str(bad), "a")
    assert code == 1 and "$.start" in err and "unknown state 3" in err
    code, _, err = run(capsys, "run", "dyck", "--k", "2", "--m", "2", "(x")
    assert code == 1 and "'x'" in err
    code, _, err = run(capsys, "run", "dyck", "--param", "nonsense", "()")
    assert code == 1 and "KEY=VALUE" in err
    code, _, err = run(capsys, "run", str(bad), "a", "--k", "2")
    assert code == 1 and "drop them" in err


def test_jflap_file_and_unwritable_output(capsys, tmp_path):
    from pathlib import Path

    jff = Path(__file__).parent / "data" / "even_a.jff"
    code, out, _ = run(capsys, "run", str(jff), "abab")
    assert code == 0 and out.strip().endswith("accepted: yes")
    if shutil.which("dot") is not None:
        code, _, err = run(capsys, "draw", str(jff), "-o", str(tmp_path / "no" / "dir.svg"))
        assert code == 1 and err.startswith("error: ") and "Traceback" not in err


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

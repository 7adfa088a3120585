"""The network subcommands (compile, verify, certify, bounds) via `main([...])`, and the demo."""

from __future__ import annotations

import importlib
import io
import json
import re
import shutil

import pytest
import sympy as sp

import pdanet as pn
from pdanet.automata.dfa import DFA
from pdanet.automata.io import save
from pdanet.cli import main
from pdanet.export import load_network, read_weights
from pdanet.verify.bounds import BoundRow, information_floor


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name", ["compile", "verify", "certify", "bounds"])
def test_help_shows_an_example(capsys, name):
    code, out, _ = run(capsys, name, "--help")
    assert code == 0
    example = out.split("example:")[1]
    assert f"pdanet {name} " in example


# --- compile ------------------------------------------------------------------------------------

def test_compile_prints_summary_and_writes_weights(capsys, tmp_path):
    path = tmp_path / "w.safetensors"
    code, out, err = run(capsys, "compile", "dyck", "--k", "4", "--m", "3", "--target", "lstm",
                         "--method", "compact", "-o", str(path))
    assert code == 0 and err == ""
    net = pn.compile(pn.tasks.dyck(k=4, m=3), target="lstm", method="compact")
    assert out.splitlines()[0] == f"lstm/compact for {net.machine!r}"
    assert re.search(rf"hidden units\s+{net.hidden_units}\s+\(bound {re.escape(str(net.bound))} "
                     rf"= {net.bound_value}\)", out)
    assert re.search(rf"β \(scale\)\s+{net.scale}\n", out)
    assert "margin" in out and "scale argument:" in out
    first = net.scale_argument.strip().splitlines()[0]
    assert " ".join(out.split("scale argument:")[1].split()).startswith(" ".join(first.split()[:5]))
    assert f"wrote {path}" in out
    loaded = load_network(path)
    assert read_weights(path)[1]["task"] == "dyck"
    assert loaded.machine == net.machine and loaded.scale == net.scale


def test_compile_json_and_pt(capsys, tmp_path):
    path = tmp_path / "w.pt"
    code, out, _ = run(capsys, "compile", "dyck", "--k", "2", "--m", "2", "--target", "elman",
                       "--dtype", "float64", "--scale", "21/2", "-o", str(path), "--json")
    assert code == 0
    d = json.loads(out)
    assert d["construction"] == "elman/hewitt" and d["dtype"] == "float64"
    assert d["hidden_units"] == d["bound_value"] and d["scale"] == "21/2"
    assert d["output"] == str(path)
    assert load_network(path).scale == sp.Rational(21, 2)


def test_compile_default_target_and_unknown_target(capsys):
    code, out, _ = run(capsys, "compile", "reversal", "--json")
    assert code == 0 and json.loads(out)["target"] == "stack_rnn"  # no lstm for a DPDT
    code, _, err = run(capsys, "compile", "dyck", "--target", "nonsense")
    assert code == 2 and err.startswith("pdanet: error:") and "nonsense" in err
    code, _, err = run(capsys, "compile", "dyck", "--scale", "zero")
    assert code == 2 and "--scale" in err


# --- verify -------------------------------------------------------------------------------------

SMALL = ("--max-length", "4", "--samples", "50", "--long-length", "60", "--long-samples", "2")


def test_verify_ok(capsys):
    code, out, err = run(capsys, "verify", "dyck", "--k", "2", "--m", "3", "--target", "lstm",
                         *SMALL)
    assert code == 0 and err == ""
    assert "OK" in out.splitlines()[0]
    assert "exhaustive [every live prefix of length ≤ 4]" in out
    assert "long [2 busy strings of length 60]" in out


def test_verify_json(capsys):
    code, out, _ = run(capsys, "verify", "dyck", "--k", "3", "--m", "2", "--target", "elman",
                       "--method", "onehot", *SMALL, "--sample-lengths", "5", "9", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["ok"] is True and d["network"] == "elman/onehot"
    phases = {p["name"]: p for p in d["phases"]}
    assert phases["random"]["strings"] == 50 and "5–9" in phases["random"]["description"]
    assert d["counterexample"] is None and d["weights_file"] is None


def test_verify_failing_network_exits_1(capsys):
    code, out, _ = run(capsys, "verify", "dyck", "--k", "2", "--m", "3", "--target", "lstm",
                       "--scale", "1", *SMALL)
    assert code == 1
    assert "FAILED" in out and "first counterexample" in out
    code, out, _ = run(capsys, "verify", "dyck", "--k", "2", "--m", "3", "--target", "lstm",
                       "--scale", "1", *SMALL, "--json")
    d = json.loads(out)
    assert code == 1 and d["ok"] is False and d["counterexample"]["field"]


def test_verify_weights_file(capsys, tmp_path):
    path = tmp_path / "w.safetensors"
    assert run(capsys, "compile", "dyck", "--k", "2", "--m", "2", "--target", "lstm",
               "--method", "onehot", "-o", str(path))[0] == 0
    code, out, _ = run(capsys, "verify", "--weights", str(path), *SMALL)
    assert code == 0
    assert out.splitlines()[0] == f"weights from {path}: as compiled"
    assert "lstm/onehot" in out
    code, _, err = run(capsys, "verify", "dyck", "--weights", str(path))
    assert code == 2 and "drop MACHINE" in err
    code, _, err = run(capsys, "verify", "--weights", str(tmp_path / "missing.safetensors"))
    assert code == 2 and "does not exist" in err
    code, _, err = run(capsys, "verify")
    assert code == 2 and "--weights" in err


def test_verify_machine_file(capsys, tmp_path):
    m = DFA(["even", "odd"], "ab", {("even", "a"): "odd", ("odd", "a"): "even",
                                    ("even", "b"): "even", ("odd", "b"): "odd"},
            "even", {"even"}, name="even-a")
    path = tmp_path / "even_a.json"
    save(m, path)
    code, out, _ = run(capsys, "verify", str(path), "--target", "elman", *SMALL, "--json")
    assert code == 0 and json.loads(out)["ok"] is True


def test_verify_progress_bar_goes_to_stderr(capsys):
    code, _, err = run(capsys, "verify", "dyck", "--k", "2", "--m", "2", *SMALL, "--progress")
    assert code == 0 and "verify" in err
    code, _, err = run(capsys, "verify", "dyck", "--k", "2", "--m", "2", *SMALL)
    assert code == 0 and err == ""  # not a terminal: no bars by default


# --- certify ------------------------------------------------------------------------------------

def test_certify_ok_and_json(capsys):
    code, out, err = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--target", "elman")
    assert code == 0 and err == ""
    assert out.startswith("CERTIFIED for every length: elman/hewitt")
    code, out, _ = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--target", "lstm",
                       "--json")
    d = json.loads(out)
    assert code == 0 and d["ok"] is True and d["kernel"] == "saturating"
    assert d["certifier"] == "enumerative" and d["all_lengths"] is True


def test_certify_weak_scale_exits_1(capsys):
    code, out, _ = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--target", "elman",
                       "--scale", "1")
    assert code == 1 and out.startswith("NOT CERTIFIED") and "failing case" in out
    code, out, _ = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--target", "elman",
                       "--scale", "1", "--json")
    assert code == 1 and json.loads(out)["ok"] is False


def test_certify_min_scale(capsys):
    code, out, _ = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--target", "elman",
                       "--min-scale", "--json")
    assert code == 0
    d = json.loads(out)
    beta = sp.Rational(d["min_scale"])
    assert 0 < beta <= sp.Rational(d["scale"])
    net = pn.compile(pn.tasks.dyck(k=2, m=2), target="elman").with_scale(beta)
    assert pn.certify(net.machine, net).ok  # the reported β does certify


def test_certify_weights_file(capsys, tmp_path):
    path = tmp_path / "w.safetensors"
    run(capsys, "compile", "dyck", "--k", "2", "--m", "2", "--target", "elman", "-o", str(path))
    code, out, _ = run(capsys, "certify", "--weights", str(path))
    assert code == 0 and "weights from" in out and "CERTIFIED" in out
    code, _, err = run(capsys, "certify", "--weights", str(path), "--min-scale")
    assert code == 2 and "--min-scale" in err


def test_certify_too_many_configurations_is_an_error(capsys):
    code, out, err = run(capsys, "certify", "modular_counter", "--param", "modulus=9",
                         "--target", "elman", "--max-configs", "3")
    assert code == 2 and out == ""
    assert "more than 3" in err


def test_certify_dispatches_to_structural(capsys):
    code, out, _ = run(capsys, "certify", "dyck", "--k", "40", "--m", "2", "--target", "elman",
                       "--method", "compact", "--max-configs", "100", "--json")
    data = json.loads(out)
    assert code == 0 and data["certifier"] == "structural" and data["all_lengths"] is True
    code, out, _ = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--json")
    assert json.loads(out)["certifier"] == "enumerative"


def test_certify_huge_dyck_uses_the_structural_module(capsys):
    code, out, _ = run(capsys, "certify", "dyck", "--k", "100000", "--m", "3", "--target",
                       "lstm", "--method", "compact", "--json")
    d = json.loads(out)
    assert d["certifier"] == "structural" and code == 0 and d["ok"] is True
    assert d["all_lengths"] is True and d["kernel"] == "saturating"


# --- bounds -------------------------------------------------------------------------------------

def test_bounds_table(capsys):
    code, out, err = run(capsys, "bounds", "--k", "2", "4", "--m", "2", "3")
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0].split()[:3] == ["k", "m", "construction"]
    assert len(lines) == 2 + 2 * 2 * 6
    net = pn.compile(pn.tasks.dyck(k=4, m=3), target="lstm", method="compact")
    pattern = (rf"^4\s+3\s+lstm/compact\s+{re.escape(str(net.bound))}\s+{net.bound_value}\s+"
               rf"{net.hidden_units}\s+yes\s+{information_floor(4, 3)}\s+"
               rf"{net.hidden_units / information_floor(4, 3):.2f}\s+{net.scale}\s+—$")
    assert re.search(pattern, out, re.MULTILINE)


def test_bounds_json_max_units_and_plot(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "bounds.png"
    code, out, _ = run(capsys, "bounds", "--k", "2", "100000", "--m", "3", "--targets", "lstm",
                       "--methods", "onehot", "compact", "--plot", str(plot), "--json")
    assert code == 0 and plot.stat().st_size > 1000
    rows = {(r["k"], r["method"]): r for r in json.loads(out)["rows"]}
    huge = rows[(100000, "onehot")]
    assert huge["bound"] == 300000 and huge["hidden_units"] is None
    assert "not built" in huge["note"]
    assert rows[(100000, "compact")]["hidden_units"] == 3 * 17  # m·⌈log₂(k+1)⌉
    assert rows[(2, "onehot")]["matches"] is True


def test_bounds_mismatch_exits_1(capsys, monkeypatch):
    B = importlib.import_module("pdanet.verify.bounds")

    def table(k, m, targets, methods, **options):
        return [BoundRow(k[0], m[0], targets[0], methods[0], "x/y", formula="k", bound=2,
                         hidden_units=3, matches=False, floor=1)]

    monkeypatch.setattr(B, "table", table)
    code, out, _ = run(capsys, "bounds", "--k", "2", "--m", "2", "--targets", "lstm",
                       "--methods", "compact")
    assert code == 1 and "other than their bound" in out


# --- bad input: one line, exit 2, before any work -------------------------------------------

def _one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pdanet: error: "), err
    return lines[0]


def _strict(text: str):
    def reject(token):
        raise AssertionError(f"invalid JSON token {token}")

    return json.loads(text, parse_constant=reject)


def test_compile_output_paths(capsys, tmp_path):
    for target, words in ((tmp_path, "is a folder"),
                          (tmp_path / "missing" / "w.safetensors", "does not exist"),
                          (tmp_path / "w.xyz", ".safetensors")):
        code, out, err = run(capsys, "compile", "dyck", "-o", str(target))
        line = _one_error_line(err)
        assert code == 2 and out == "" and "--output" in line and words in line
    code, out, _ = run(capsys, "compile", "dyck", "-o", str(tmp_path), "--json")
    assert code == 2 and "--output" in _strict(out)["error"]["message"]


def test_scale_that_overflows_the_dtype_is_refused(capsys):
    code, _, err = run(capsys, "compile", "dyck", "--k", "2", "--m", "2", "--scale", "1e39")
    line = _one_error_line(err)
    assert code == 2 and "--scale" in line and "overflows float32" in line
    code, _, err = run(capsys, "compile", "dyck", "--scale", "1e400")
    assert code == 2 and "--scale" in _one_error_line(err)


def test_bounds_plot_format_checked_before_building(capsys, tmp_path, monkeypatch):
    from pdanet.verify import bounds as B

    monkeypatch.setattr(B, "table", lambda *a, **kw: pytest.fail("built a network"))
    code, out, err = run(capsys, "bounds", "--k", "2", "--m", "2", "--plot",
                         str(tmp_path / "b.xyz"))
    line = _one_error_line(err)
    assert code == 2 and out == "" and "--plot" in line and ".png" in line


def test_bounds_huge_k_is_not_built(capsys):
    code, out, err = run(capsys, "bounds", "--k", "1e9", "--m", "3", "--targets", "lstm",
                         "--methods", "hewitt", "onehot", "--json")
    rows = _strict(out)["rows"]
    assert code == 0 and err == "" and len(rows) == 2
    assert all(r["hidden_units"] is None and r["note"].startswith("not built") for r in rows)
    assert rows[0]["bound"] == 3 * 3 * 30 - 3 and rows[0]["floor"] == information_floor(10**9, 3)
    code, _, err = run(capsys, "bounds", "--max-units", "1e7")
    assert code == 2 and "--max-units" in _one_error_line(err)


def test_verify_refuses_what_would_not_fit(capsys):
    code, out, err = run(capsys, "verify", "dyck", "--k", "2", "--m", "2", "--long-length",
                         "100000000")
    line = _one_error_line(err)
    assert code == 2 and out == "" and "--long-length" in line and "GB" in line
    assert "PDANET_MAX_BYTES" in line
    code, _, err = run(capsys, "verify", "dyck", "--samples", "1e9")
    assert code == 2 and "--samples" in _one_error_line(err)


def test_verify_max_length_zero_skips_the_exhaustive_phase(capsys):
    code, out, _ = run(capsys, "verify", "dyck", "--k", "2", "--m", "2", "--max-length", "0",
                       "--samples", "10", "--long-length", "0", "--json")
    d = _strict(out)
    assert code == 0 and [p["name"] for p in d["phases"]] == ["random"]
    assert "0 skips" in run(capsys, "verify", "--help")[1]
    code, _, err = run(capsys, "verify", "dyck", "--sample-lengths", "5", "2")
    assert code == 2 and "--sample-lengths" in _one_error_line(err)


def test_certify_eps_out_of_the_certifiers_range(capsys):
    code, _, err = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--eps", "0.5")
    assert code == 2 and "eps" in _one_error_line(err)


@pytest.fixture
def nan_weights(tmp_path):
    """A weight file of Dyck-(2, 2) elman/hewitt with one NaN weight (metadata kept)."""
    import torch
    from safetensors.torch import load_file, safe_open, save_file

    good = tmp_path / "w.safetensors"
    assert main(["compile", "dyck", "--k", "2", "--m", "2", "--target", "elman", "-o",
                 str(good)], io.StringIO()) == 0
    tensors = load_file(str(good))
    with safe_open(str(good), framework="pt") as f:
        meta = f.metadata()
    name = next(k for k, v in tensors.items() if v.is_floating_point())
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[0] = torch.nan
    bad = tmp_path / "bad.safetensors"
    save_file(tensors, str(bad), metadata=meta)
    return bad, name


def test_certify_nan_weights_fails_with_the_reason(capsys, nan_weights):
    path, block = nan_weights
    code, out, err = run(capsys, "certify", "--weights", str(path))
    assert code == 1 and "NOT CERTIFIED" in out
    assert err.startswith("pdanet: check failed: certify: not certified") and block in err
    assert len(err.splitlines()) == 1
    code, out, err = run(capsys, "certify", "--weights", str(path), "--json")
    d = _strict(out)  # NaN margins are written as "nan"
    assert code == 1 and err == "" and d["certified"] is False and block in d["reason"]
    assert d["state_margin"] == "nan"
    code, _, _ = run(capsys, "verify", "--weights", str(path), "--max-length", "3",
                     "--samples", "5", "--long-length", "0")
    assert code == 1


def test_certificate_verdict_follows_ok_and_all_lengths():
    from types import SimpleNamespace

    from pdanet.cli import certificate_verdict

    every = SimpleNamespace(ok=True, all_lengths=True, max_length=None, failing=None, notes=())
    upto = SimpleNamespace(ok=True, all_lengths=False, max_length=1000, failing=None, notes=())
    bad = SimpleNamespace(ok=False, all_lengths=False, max_length=None, failing="unit 3 escapes",
                          notes=())
    assert certificate_verdict(every) == (True, "certified for every length")
    ok, why = certificate_verdict(upto)
    assert not ok and "1,000" in why and "--min-length" in why
    assert certificate_verdict(upto, min_length=1000)[0]
    assert not certificate_verdict(upto, min_length=1001)[0]
    assert certificate_verdict(bad) == (False, "not certified: unit 3 escapes")


def test_certify_progress_bar_on_stderr(capsys):
    code, out, err = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--target", "elman",
                         "--progress")
    assert code == 0 and out.startswith("CERTIFIED") and "\r" in err and "[" in err
    code, _, err = run(capsys, "certify", "dyck", "--k", "2", "--m", "2", "--target", "elman")
    assert code == 0 and err == ""


# --- demo ---------------------------------------------------------------------------------------

def test_demo_writes_its_files(tmp_path):
    from pdanet import demo

    buf = io.StringIO()
    assert demo.main(out_dir=tmp_path, out=buf) == 0
    text = buf.getvalue()
    for heading in ("1. Compile", "2. Verify", "3. Certify", "4. Hidden units", "5. Named tasks",
                    "6. Figures", "7. Weights"):
        assert heading in text
    assert "every check passed" in text
    cert = json.loads((tmp_path / "certificate_dyck_2_3_lstm_compact.json").read_text())
    assert cert["ok"] is True and cert["construction"] == "lstm/compact"
    net = load_network(tmp_path / "dyck_2_3_lstm_compact.safetensors")
    assert net.construction == "lstm/compact" and net.machine == pn.tasks.dyck(k=2, m=3)
    for task in demo.TASK_STRINGS:
        assert task in text
        svg = tmp_path / f"{task}.svg"
        if shutil.which("dot"):
            assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
        else:
            assert not svg.exists()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    for png in ("trace_heatmap.png", "bounds.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

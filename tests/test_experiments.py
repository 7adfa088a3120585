"""pdanet.experiments: the papers' protocols end to end (records, plots, resume), the metrics
against brute-force oracles, the data against the tasks' reference functions, the CLI, and the
Ray backend against the local pool."""

from __future__ import annotations

import io
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.tasks import registry as tasks
from pdanet.cli import main
from pdanet.errors import InputError
from pdanet.experiments import evaluation, jobs, protocol, read_record, run_experiment, sweep
from pdanet.experiments.data import datasets, labelled, machine_of
from pdanet.experiments.models import build, compile_model
from pdanet.experiments.protocols import PROTOCOLS, Size, with_size
from pdanet.experiments.report import render

TINY = {"n_train": 12, "n_valid": 6, "n_test_per_length": 2, "epochs": 1, "batch_size": 4}
TINY_SUZGUN = {**TINY, "train_lengths": (2, 4, 6), "test_lengths": (8, 10)}
TINY_HAO = {**TINY, "train_lengths": (2, 4), "test_lengths": (6, 8)}
TIMELESS = ("wall_time_s", "seconds")


def _strip(x):
    """A record without its timings."""
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in TIMELESS}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


@pytest.fixture
def tiny_protocols(monkeypatch):
    """The Suzgun and Hao protocols at a tiny 'small' size (for the CLI and sweeps)."""
    for key, over in ((("suzgun2019", "dyck2"), TINY_SUZGUN), (("hao2018", "reversal"), TINY_HAO)):
        monkeypatch.setitem(PROTOCOLS, key, with_size(PROTOCOLS[key], "small", **over))


# ---------------------------------------------------------------------------------- end to end
def test_tiny_experiment_record_plots_and_exactness(tmp_path):
    rec = run_experiment("suzgun2019", "dyck2", init="compiled", seed=3, out=tmp_path,
                         overrides=TINY_SUZGUN, device="cpu")
    path = tmp_path / f"{rec['id']}.json"
    assert path.exists() and rec["id"] == "suzgun2019.dyck2.suzgun_stack_rnn.compiled.small.s3"
    on_disk = json.loads(path.read_text())
    assert on_disk == json.loads(json.dumps(rec))
    assert set(on_disk) >= {"schema", "id", "config", "protocol", "network", "curve", "final",
                            "by_length", "by_length_before", "wall_time_s", "versions", "plots"}
    c = on_disk["config"]
    assert (c["paper"], c["task"], c["init"], c["seed"], c["size"]) == (
        "suzgun2019", "dyck2", "compiled", 3, "small")
    assert c["train_lengths"] == [2, 4, 6] and c["epochs"] == 1 and c["overrides"]
    assert c["device"] == "cpu"
    assert [row["epoch"] for row in on_disk["curve"]] == [0, 1]
    assert on_disk["curve"][1]["examples"] == 12
    # the compiled network computes the task's machine: exact at every length, from step 0
    assert on_disk["final"]["test_before"] == on_disk["final"]["test"] == 1.0
    assert on_disk["final"]["examples_to_valid_0.99"] == 0
    bins = on_disk["by_length"]
    assert [b["beyond_training"] for b in bins] == [b["lo"] > 6 for b in bins]
    assert sum(b["n"] for b in bins) == 6 + 2 * 2 and all(b["metric"] == 1.0 for b in bins)
    for name in on_disk["plots"].values():
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(on_disk["versions"]) == {"pdanet", "torch", "numpy", "python"}
    assert read_record(path)["id"] == rec["id"]


def test_random_init_is_seeded_and_differs_from_compiled():
    a = run_experiment("hao2018", "reversal", init="random", seed=1, overrides=TINY_HAO)
    b = run_experiment("hao2018", "reversal", init="random", seed=1, overrides=TINY_HAO)
    assert _strip(a) == _strip(b)
    p = protocol("hao2018", "reversal")
    net = compile_model(machine_of(p, p.size("small")), p.model)
    rnd, cmp_ = build(net, p.model, "random", seed=0), build(net, p.model, "compiled")
    compiled = dict(net.module.named_parameters())
    for name, prm in cmp_.named_parameters():
        assert torch.equal(prm, compiled[name].float())
    assert any(not torch.equal(prm, compiled[name].float())
               for name, prm in rnd.named_parameters())
    assert a["final"]["test_before"] < 1.0


def test_compiled_plus_noise_within_tolerance_stays_exact():
    rec = run_experiment("hewitt2020", init="compiled+noise", noise=0.5, seed=0,
                         overrides={**TINY, "train_lengths": (2, 4), "test_lengths": (6, 8)})
    assert rec["config"]["noise"] == 0.5 and rec["id"].endswith("compiled+noise-0.5.small.s0")
    assert rec["final"]["test_before"] == 1.0       # ρ < 1: the certified tolerance holds


# ------------------------------------------------------------------------ metrics vs an oracle
def _oracle(correct, valid, sel):
    """Coarse, fine and masked accuracy written out string by string."""
    coarse, fine, right, scored = [], [], 0, 0
    for c_row, v_row, s_row in zip(correct, valid, sel):
        pos = [t for t in range(len(c_row)) if v_row[t] and s_row[t]]
        ok = [bool(c_row[t]) for t in pos]
        coarse.append(all(ok))
        run = 0
        for b in ok:
            if not b:
                break
            run += 1
        fine.append(run / len(pos) if pos else 1.0)
        right += sum(ok)
        scored += len(pos)
    return float(np.mean(coarse)), float(np.mean(fine)), right / max(1, scored)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_metrics_match_brute_force_oracle(B, T, seed):
    """Reversal-style symbol targets with random logits: coarse/fine/masked accuracy over the
    after-blank positions agree with the string-by-string oracle."""
    rng = np.random.default_rng(seed)
    p = protocol("hao2018", "reversal")
    machine = machine_of(p, p.size("small"))
    strings = tasks.sample("reversal", B, range(2, 2 * T + 1, 2), rng, alphabet="01")
    data = labelled(machine, strings)
    O = data.num_outputs
    logits = torch.as_tensor(rng.normal(size=(B, data.ids.shape[1] + 1, O)))
    # make some positions right on purpose
    tgt = data.targets.numpy()
    for b, t in zip(*np.nonzero(rng.random(tgt.shape) < 0.6)):
        if tgt[b, t] >= 0:
            logits[b, t, int(tgt[b, t])] = 10.0
    pred = logits.numpy().argmax(-1)
    correct, valid = pred == tgt, tgt >= 0
    ids = data.ids.numpy()
    blank = machine.alphabet.index("#")
    sel = np.concatenate([np.zeros((B, 1), bool), ids == blank], 1)
    coarse, fine, masked = _oracle(correct, valid, sel)
    for name, want in (("coarse", coarse), ("fine", fine), ("masked_accuracy", masked)):
        assert evaluation.metric_value(p, data, logits, name=name) == pytest.approx(want)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=40), st.integers(1, 12))
def test_length_bins_cover_every_length_once(lengths, max_bins):
    bins = evaluation.length_bins(np.array(lengths), max_bins)
    assert len(bins) <= max_bins
    distinct = sorted(set(lengths))
    covered = [L for L in distinct for lo, hi in bins if lo <= L <= hi]
    assert covered == distinct
    assert all(lo <= hi for lo, hi in bins)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(bins))


# --------------------------------------------------------------- data vs the tasks' references
@pytest.mark.parametrize("paper,task", [("suzgun2019", "dyck2"), ("dusell2021", "marked_reversal"),
                                        ("hao2018", "reversal")])
def test_protocol_data_labels_match_reference(paper, task):
    p = protocol(paper, task)
    sz = replace(p.size("small"), n_train=25, n_valid=5, n_test_per_length=2)
    data = datasets(p, sz, seed=0)
    ref = tasks.reference(task, **{**p.task_params, **sz.params})
    train = data["train"]
    assert set(train.lengths.tolist()) <= set(sz.train_lengths)
    assert sorted(set(data["test"].lengths.tolist())) == sorted(sz.test_lengths)
    for s, row, n in zip(train.strings(), train.targets, train.lengths.tolist()):
        if train.kind == "next_set":          # Suzgun et al. (2019) Table 1, the task's own sets
            cols = tuple(train.machine.output_alphabet)
            assert [[bool(row[t, i] > 0.5) for i in range(len(cols))] for t in range(n + 1)] \
                == [[x in S for x in cols] for S in tasks.task(task).next_sets(s)]
        elif train.kind == "accept":
            assert [bool(row[t] > 0.5) for t in range(n + 1)] == [bool(ref(s[:t]))
                                                                   for t in range(n + 1)]
        else:
            outs = ref(s)
            alpha = train.machine.output_alphabet
            got = [None if int(row[t]) == len(alpha) else alpha.decode([int(row[t])])[0]
                   for t in range(1, n + 1)]
            assert tuple(got) == tuple(outs)


# --------------------------------------------------------------------------- sweeps and resume
def test_sweep_resumes_and_skips_finished_jobs(tmp_path, tiny_protocols, monkeypatch):
    grid = jobs(["suzgun2019"], inits=["compiled"], seeds=[0, 1])
    assert [j.id for j in grid] == [f"suzgun2019.dyck2.suzgun_stack_rnn.compiled.small.s{s}"
                                    for s in (0, 1)]
    first = sweep(grid[:1], tmp_path)
    mtime = (tmp_path / f"{grid[0].id}.json").stat().st_mtime_ns
    import pdanet.experiments.run as run_mod

    ran = []
    real = run_mod.run_experiment
    monkeypatch.setattr(run_mod, "run_experiment", lambda *a, **k: ran.append(a) or real(*a, **k))
    both = sweep(grid, tmp_path)
    assert len(ran) == 1 and ran[0][5] == 1              # only the unfinished job ran
    assert both[0] == first[0]
    assert (tmp_path / f"{grid[0].id}.json").stat().st_mtime_ns == mtime


TINY_GRID = TINY_HAO | {"train_lengths": (2, 4), "test_lengths": (6, 8)}


def test_ray_backend_matches_local_pool(tmp_path, tiny_protocols):
    """A 4-job sweep: Ray (a local instance, 2 CPUs) gives the records of the local process pool
    (2 workers), which gives those of running the jobs in this process — timings aside."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install ray)")
    grid = jobs(["suzgun2019", "hao2018"], inits=["random", "compiled"], seeds=[0],
                overrides=TINY_GRID)
    assert len(grid) == 4
    pool = sweep(grid, tmp_path / "pool", workers=2)
    serial = sweep(grid[2:], tmp_path / "serial", workers=1)
    assert [_strip(r) for r in serial] == [_strip(r) for r in pool[2:]]
    remote = sweep(grid, tmp_path / "ray", backend="ray", workers=2)
    assert not ray.is_initialized()
    assert [_strip(r) for r in remote] == [_strip(r) for r in pool]
    assert sorted(p.name for p in (tmp_path / "ray").glob("*.json")) == sorted(
        f"{j.id}.json" for j in grid)


# ---------------------------------------------------------------------------------------- CLI
def test_cli_experiment_sweep_results(tmp_path, tiny_protocols):
    out, err = io.StringIO(), io.StringIO()
    assert main(["experiment", "suzgun2019", "dyck2", "--init", "compiled", "--small", "--seed",
                 "2", "--out", str(tmp_path), "--json"], out, err) == 0
    got = json.loads(out.getvalue())
    assert got["final"]["test"] == 1.0 and Path(got["record"]).exists()
    out = io.StringIO()
    assert main(["sweep", "--paper", "suzgun2019", "--init", "compiled", "random", "--seeds",
                 "2", "--small", "--out", str(tmp_path)], out, err) == 0
    assert "2 jobs: 1 ran, 1 already done" in out.getvalue()
    md = tmp_path / "report.md"
    out = io.StringIO()
    assert main(["results", str(tmp_path), "--output", str(md), "--json"], out, err) == 0
    assert json.loads(out.getvalue()) == {"wrote": str(md)}
    text = md.read_text()
    assert "## suzgun2019" in text and "Table 2" in text and "| suzgun_stack_rnn | compiled |" in text
    assert "Compiled start" in text
    err = io.StringIO()
    assert main(["experiment", "nopaper", "--small"], io.StringIO(), err) == 2
    assert "no protocol for paper 'nopaper'" in err.getvalue()
    err = io.StringIO()
    assert main(["experiment", "suzgun2019", "--noise", "0.1", "--small"], io.StringIO(), err) == 2
    assert "compiled+noise" in err.getvalue()


# --------------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("kwargs,match", [
    ({"paper": "nopaper"}, "no protocol"),
    ({"paper": "suzgun2019", "task": "dyck9"}, "no protocol for task"),
    ({"paper": "suzgun2019", "init": "pretrained"}, "init must be one of"),
    ({"paper": "suzgun2019", "size": "huge"}, "size must be one of"),
    ({"paper": "suzgun2019", "seed": -1}, "seed must be"),
    ({"paper": "suzgun2019", "noise": 0.2}, "applies to init="),
    ({"paper": "suzgun2019", "init": "compiled+noise"}, "needs noise > 0"),
    ({"paper": "suzgun2019", "init": "compiled+noise", "noise": float("nan")}, "finite"),
    ({"paper": "suzgun2019", "device": "nodevice"}, "not a torch device"),
])
def test_run_experiment_bad_input(kwargs, match):
    with pytest.raises(InputError, match=match):
        run_experiment(**kwargs)


def test_sweep_and_report_bad_input(tmp_path):
    with pytest.raises(InputError, match="unknown init"):
        jobs(["hao2018"], inits=["warm"])
    with pytest.raises(InputError, match="no protocol for paper"):
        jobs(["nopaper"])
    with pytest.raises(InputError, match="seeds"):
        jobs(["hao2018"], seeds=[-1])
    with pytest.raises(InputError, match="backend"):
        sweep(jobs(["hao2018"], seeds=[0]), tmp_path, backend="slurm")
    with pytest.raises(InputError, match="workers"):
        sweep(jobs(["hao2018"], seeds=[0]), tmp_path, workers=0)
    with pytest.raises(InputError, match="no experiment records"):
        render([])
    with pytest.raises(InputError, match="not a directory"):
        from pdanet.experiments.report import load

        load(tmp_path / "missing")
    with pytest.raises(InputError, match="positive int"):
        Size((2,), (4,), 0, 1, 1, 1, 1, 0.1)


def test_compiled_plus_noise_without_a_tolerance_is_typed(monkeypatch):
    """Where `initialize` cannot certify a tolerance, the run is refused with InputError."""
    import pdanet.learning.init as init_mod
    from pdanet.errors import CertificationError

    def refuse(*args, **kwargs):
        raise CertificationError("no weight tolerance for this network")

    monkeypatch.setattr(init_mod, "initialize", refuse)
    p = protocol("suzgun2019", "dyck2")
    net = compile_model(machine_of(p, p.size("small")), p.model)
    with pytest.raises(InputError, match="certified weight tolerance.*CertificationError"):
        build(net, p.model, "compiled+noise", noise=0.1)


# ------------------------------------------ DuSell & Chiang's language-model protocol (§4)
LM_TINY = {"train_lengths": (3, 5, 7), "test_lengths": (9,), "n_train": 8, "n_valid": 6,
           "n_test_per_length": 3, "epochs": 0, "batch_size": 4}


def _lm_tiny(task="marked_reversal_lm", **over):
    from pdanet.experiments.lm import lm_datasets

    p = protocol("dusell2021", task)
    sz = replace(p.size("small"), **{**LM_TINY, **over})
    return p, sz, lm_datasets(p, sz, seed=0)


@settings(max_examples=12, deadline=None)
@given(task=st.sampled_from(["marked_reversal_lm", "unmarked_reversal_lm", "padded_reversal_lm",
                             "dyck_lm"]), n=st.integers(1, 5))
def test_lm_true_distribution_matches_grammar_brute_force(task, n):
    """The reference log-probabilities against the inside algorithm, and the length normaliser
    against the sum of p_G over every string of length n (enumerated)."""
    import math

    from pdanet.automata.tasks.probability import inside, log_probability_given_length
    from pdanet.constructions.ns_lm import compile_ns_lm, string_log_probs

    _, _, (sets, machine, g) = _lm_tiny(task, train_lengths=(2, 3, 4, 5, 6),
                                        test_lengths=(6, 7))
    valid = sets["valid"]
    N = len({n_ for n_ in range(2, 7)
             if math.isfinite(float(g.length_table(6, weighted=True).total(n_)))})
    for s, lp, lt in zip(valid.strings, valid.pcfg_logp, valid.true_logp):
        assert lp == pytest.approx(math.log(inside(g, s)), abs=1e-6)
        assert lt == pytest.approx(log_probability_given_length(g, s) - math.log(N), abs=1e-6)
    exact = compile_ns_lm(machine, dtype=torch.float64)
    words = list(itertools.product(machine.alphabet, repeat=n))
    total = float(np.exp(string_log_probs(exact, words)).sum())
    assert total == pytest.approx(math.exp(float(g.length_table(n, weighted=True).total(n))),
                                  rel=1e-9, abs=1e-15)


def test_lm_compiled_exact_head_is_the_pcfg_and_random_is_not(tmp_path):
    """Before training, the compiled exact head scores CE difference ≈ 0 against the PCFG, and
    against the paper's true distribution exactly the length-prior gap; a random start is far
    off. The record has the common schema and round-trips through JSON."""
    import math

    from pdanet.automata.tasks.probability import cross_entropy_lower_bound

    rec = run_experiment("dusell2021", "marked_reversal_lm", "ns_lm_exact", "compiled", seed=0,
                         out=tmp_path, overrides=LM_TINY)
    f = rec["final"]
    assert rec["id"] == "dusell2021.marked_reversal_lm.ns_lm_exact.compiled.small.s0"
    assert abs(f["valid_pcfg"]) <= 1e-3 and abs(f["test_pcfg"]) <= 1e-3
    _, _, (sets, _, g) = _lm_tiny()
    for name, N in (("valid", 3), ("test", 1)):
        d = sets[name]
        assert f[f"{name}_true_ce"] == pytest.approx(cross_entropy_lower_bound(g, d.strings, N),
                                                     abs=1e-9)
        table = g.length_table(9, weighted=True)
        gap = -sum(float(table.total(len(s))) + math.log(N) for s in d.strings) / sum(
            len(s) + 1 for s in d.strings)
        assert f[name] == pytest.approx(gap, abs=1e-3)
    assert read_record(tmp_path / f"{rec['id']}.json") == json.loads(json.dumps(rec))
    assert set(rec) >= {"schema", "id", "config", "protocol", "network", "curve", "final",
                        "by_length", "by_length_before", "wall_time_s", "versions", "plots"}
    assert rec["config"]["metric"] == "ce_difference" and rec["config"]["target"] == "lm_eos"
    assert [b["beyond_training"] for b in rec["by_length"]] == [False] * 3 + [True]
    assert all(abs(b["ce_difference_pcfg"]) <= 1e-3 for b in rec["by_length"])
    rnd = run_experiment("dusell2021", "marked_reversal_lm", "ns_lm", "random", seed=0,
                         overrides={**LM_TINY, "epochs": 1})
    assert rnd["final"]["valid_before"] > 0.05 and rnd["final"]["test_pcfg_before"] > 0.05
    assert len(rnd["curve"]) == 2 and rnd["curve"][1]["examples"] == LM_TINY["n_train"]
    assert rnd["network"]["parameters"] > 0
    text = render([rec, rnd])
    assert "### marked_reversal_lm (small) — metric: ce_difference" in text
    assert "DuSell & Chiang (2021) §4" in text and "within 0.05 nats" in text
    assert "examples to ≤ 0.05 nats" in text and "| 0.050 |" in text
    assert "Against the PCFG's own p_G(w)" in text
    assert "Compiled start:" not in text        # the two starts are of different models


def test_lm_softmax_compiled_start_is_close_and_trains():
    """The paper's softmax head from the compiled weights starts near the PCFG (its floor's mass
    only: Dyck's PDA is deterministic, its readings one-hot) and its loss is finite under training."""
    rec = run_experiment("dusell2021", "dyck_lm", "ns_lm", "compiled", seed=1,
                         overrides={**LM_TINY, "train_lengths": (2, 4), "test_lengths": (6,),
                                    "epochs": 1})
    assert abs(rec["final"]["test_pcfg_before"]) <= 1e-3
    assert np.isfinite(rec["curve"][1]["loss"]) and np.isfinite(rec["final"]["valid"])


@pytest.mark.parametrize("kwargs,match", [
    ({"model": "ns_lm", "init": "compiled+noise", "noise": 0.1}, "no weight tolerance"),
    ({"model": "ns_lm_exact", "init": "random"}, "no random initialisation"),
    ({"model": "lstm", "init": "compiled"}, "takes model one of"),
])
def test_lm_bad_input_is_typed(kwargs, match):
    with pytest.raises(InputError, match=match):
        run_experiment("dusell2021", "marked_reversal_lm", overrides=LM_TINY, **kwargs)


def test_lm_protocol_checks():
    assert protocol("dusell2021", "hardest_cfl_lm").lm == "hardest_cfl"
    p = protocol("dusell2021", "dyck_lm")
    with pytest.raises(InputError, match="ce_difference"):
        replace(p, lm=None)
    with pytest.raises(InputError, match="ce_difference"):
        replace(protocol("hao2018"), metric="ce_difference")
    with pytest.raises(InputError, match="no string of any"):
        _lm_tiny(train_lengths=(2, 4), test_lengths=(9,))


def test_lm_sweep_resumes(tmp_path):
    """The language-model jobs run as sweep jobs like the others (records by job id), and a
    second sweep finds their records and runs nothing."""
    grid = jobs(["dusell2021"], tasks=["dyck_lm"], models=["ns_lm"], inits=["compiled"],
                seeds=[0, 1], overrides={**LM_TINY, "train_lengths": (2, 4),
                                         "test_lengths": (6,)})
    assert [j.id for j in grid] == [f"dusell2021.dyck_lm.ns_lm.compiled.small.s{s}"
                                    for s in (0, 1)]
    first = sweep(grid, tmp_path)
    stamps = [(tmp_path / f"{j.id}.json").stat().st_mtime_ns for j in grid]
    assert [r["config"]["metric"] for r in first] == ["ce_difference"] * 2
    again = sweep(grid, tmp_path)
    assert [(tmp_path / f"{j.id}.json").stat().st_mtime_ns for j in grid] == stamps
    assert again == [read_record(tmp_path / f"{j.id}.json") for j in grid]

"""`run_experiment`: one paper protocol, one model, one initialisation, one seed → one JSON
record and two plots.

The run: draw the protocol's data (`pdanet.experiments.data.datasets`), compile the task's
machine into the model (`pdanet.experiments.models`), initialise it, score it before training
(epoch 0), then train ``epochs`` passes with the protocol's optimiser (Adam or RMSProp, gradient
norm clipped at ``clip``), scoring the validation strings (training lengths) and the test strings
(longer) after every epoch. Losses are `pdanet.learning.masked_loss` of the target kind (binary
cross-entropy for accept bits and next-symbol sets, cross-entropy for output symbols).

The record (``<out>/<id>.json``, see `record_id`) holds ``config`` (every setting, the size's
numbers included), ``protocol`` (section, the paper's reported number, deviations), ``network``
(size, parameters), ``curve`` (one row per epoch: epoch, steps, examples seen, mean training
loss, validation and test metric, seconds), ``final`` (the metrics after training on the
validation and test strings, the test metric before training, and training examples seen until
the validation / test metric first reached 0.99 — None if never; for the language-model
protocols, `pdanet.experiments.lm`, the metric is the cross-entropy difference and these are
``examples_to_valid_0.05`` / ``examples_to_test_0.05``: until it first fell to ≤ 0.05 nats),
``by_length`` and
``by_length_before`` (the metric per length bin over validation + test strings after and before
training, bins longer than any training string marked ``beyond_training``), ``wall_time_s``,
``versions`` and ``plots`` (file names of the learning curve and the length curve, written next
to the record).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from pdanet.errors import InputError
from pdanet.experiments import evaluation, plots
from pdanet.experiments.data import datasets, machine_of, task_params
from pdanet.experiments.models import build, compile_model
from pdanet.experiments.protocols import INITS, SIZES, Protocol, protocol, with_size
from pdanet.experiments.training import fit, to_device

SCHEMA = 1
THRESHOLD = 0.99


def record_id(paper: str, task: str, model: str, init: str, noise: float, seed: int,
              size: str) -> str:
    """The record's file stem: ``paper.task.model.init[-ρ].size.sSEED``."""
    tag = f"{init}-{noise:g}" if init == "compiled+noise" else init
    return f"{paper}.{task}.{model}.{tag}.{size}.s{seed}"


def versions() -> dict[str, str]:
    import pdanet

    return {"pdanet": pdanet.__version__, "torch": torch.__version__,
            "numpy": np.__version__, "python": platform.python_version()}


def _check(init: str, noise: Any, seed: Any, size: str) -> None:
    if init not in INITS:
        raise InputError(f"init must be one of {INITS}, got {init!r}")
    if size not in SIZES:
        raise InputError(f"size must be one of {SIZES}, got {size!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed must be an int ≥ 0, got {seed!r}")
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not (
            math.isfinite(noise) and noise >= 0):
        raise InputError(f"noise must be a finite number ≥ 0, got {noise!r}")
    if init == "compiled+noise" and not noise:
        raise InputError("init='compiled+noise' needs noise > 0 (a fraction of the certified "
                         "weight tolerance)")
    if init != "compiled+noise" and noise:
        raise InputError(f"noise={noise} applies to init='compiled+noise' only")


def _first_reaching(curve: list[dict[str, Any]], key: str) -> int | None:
    for row in curve:
        if row[key] >= THRESHOLD:
            return int(row["examples"])
    return None


def run_experiment(paper: str, task: str | None = None, model: str | None = None,
                   init: str = "random", noise: float = 0.0, seed: int = 0,
                   size: str = "small", out: str | Path | None = None,
                   progress: bool | None = None, overrides: dict[str, Any] | None = None,
                   device: str | None = None) -> dict[str, Any]:
    """Run `paper`'s protocol on `task` (see `pdanet.experiments.protocols`; None: the paper's
    one task) with `model` (None: the protocol's) initialised by `init` — ``"random"``,
    ``"compiled"`` or ``"compiled+noise"`` with ``noise=ρ`` (a fraction of the certified weight
    tolerance) — at ``size`` ``"small"`` or ``"paper"``, seeded by `seed`. Returns the record
    (module docstring); with `out` also writes ``<out>/<id>.json`` and the two plots there.
    ``overrides`` change the size's numbers (`Size` fields, e.g. ``{"epochs": 1}``) and are
    recorded. ``progress``: a tqdm bar on stderr (None: when stderr is a terminal).
    ``device``: where the model trains (a torch device such as ``"cuda"``; None: the CPU)."""
    _check(init, noise, seed, size)
    try:
        dev = torch.device(device or "cpu")
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"device {device!r} is not a torch device: {exc}") from None
    p: Protocol = protocol(paper, task)
    if overrides:
        p = with_size(p, size, **overrides)
    model = model or p.model
    sz = p.size(size)
    if progress is None:
        progress = sys.stderr.isatty()
    if p.lm is not None:         # DuSell & Chiang's language-model protocol (pdanet.experiments.lm)
        from pdanet.experiments.lm import run_lm

        rid = record_id(p.paper, p.task, model, init, float(noise), seed, size)
        record = run_lm(p, sz, size, model, init, float(noise), seed, progress, overrides, dev,
                        rid, versions())
        if out is not None:
            write_record(record, out)
        return record
    start = time.perf_counter()
    machine = machine_of(p, sz)
    data = datasets(p, sz, seed, machine)
    net = compile_model(machine, model)
    torch.manual_seed(seed)
    learner = build(net, model, init, float(noise), seed)
    learner = to_device(learner, dev, device)
    params, sparams = task_params(p, sz)
    config = {
        "paper": p.paper, "task": p.task, "model": model, "init": init, "noise": float(noise),
        "seed": seed, "size": size, "metric": p.metric, "optimiser": p.optimiser,
        "clip": p.clip, "target": data["train"].kind, "mask": p.mask,
        "task_params": params, "sample_params": {k: str(v) for k, v in sparams.items()},
        **{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(sz).items()
           if k != "params"},
        "overrides": dict(overrides or {}), "device": str(dev),
    }
    rid = record_id(p.paper, p.task, model, init, float(noise), seed, size)

    def score(name: str) -> tuple[float, torch.Tensor]:
        z = evaluation.logits_of(learner, data[name])
        return evaluation.metric_value(p, data[name], z), z

    valid0, zv0 = score("valid")
    test0, zt0 = score("test")
    train_max = max(sz.train_lengths)
    before = evaluation.by_length(p, {"valid": (data["valid"], zv0), "test": (data["test"], zt0)},
                                  train_max)
    curve = [{"epoch": 0, "steps": 0, "examples": 0, "loss": None, "valid": valid0,
              "test": test0, "seconds": 0.0}]
    _train(learner, p, sz, data, seed, curve, score, progress, rid)
    valid, zv = score("valid")
    test, zt = score("test")
    final = {"valid": valid, "test": test, "test_before": test0, "valid_before": valid0,
             "examples_to_valid_0.99": _first_reaching(curve, "valid"),
             "examples_to_test_0.99": _first_reaching(curve, "test")}
    for extra in ("per_symbol_accuracy", "fine", "sequence_accuracy"):
        if extra != p.metric and not (extra == "fine" and p.metric != "coarse"):
            final[f"test_{extra}"] = evaluation.metric_value(p, data["test"], zt, name=extra)
    record = {
        "schema": SCHEMA, "id": rid, "config": config,
        "protocol": {"section": p.section, "reported": p.reported,
                     "reported_value": p.reported_value, "deviation": p.deviation,
                     "notes": p.notes},
        "network": {"hidden_units": int(net.hidden_units),
                    "parameters": int(sum(t.numel() for t in learner.parameters())),
                    "machine": repr(machine)},
        "curve": curve, "final": final,
        "by_length": evaluation.by_length(p, {"valid": (data["valid"], zv),
                                              "test": (data["test"], zt)}, train_max),
        "by_length_before": before,
        "wall_time_s": time.perf_counter() - start,
        "versions": versions(),
        "plots": {},
    }
    if out is not None:
        write_record(record, out)
    return record


def _train(model, p: Protocol, sz, data, seed: int, curve: list, score, progress: bool,
           label: str) -> None:
    """``epochs`` passes over shuffled mini-batches of the training set, loss `masked_loss` of
    the batch's per-prefix labels (`pdanet.experiments.training.fit`)."""
    from pdanet.learning.train import masked_loss

    train = data["train"]
    gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(train, batch_size=sz.batch_size, shuffle=True, generator=gen)
    dev = next(model.parameters()).device

    def batch_loss(batch) -> tuple[torch.Tensor, int]:
        ids, targets = batch[0].to(dev), batch[1].to(dev)
        out = model(ids)
        logits = out[1] if isinstance(out, tuple) else out
        if targets.is_floating_point():
            targets = targets.to(logits.dtype)
        return masked_loss(logits, targets, train.kind), len(ids)

    fit(model, p, sz, lambda: loader, len(loader), batch_loss, curve, score, progress, label)


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def write_record(record: dict[str, Any], out: str | Path) -> Path:
    """Write the plots and then the record (last, so a record on disk means a finished run)
    into directory `out`; returns the record's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rid = record["id"]
    record["plots"] = {"curve": f"{rid}.curve.png", "length": f"{rid}.length.png"}
    plots.learning_curve(record, out / record["plots"]["curve"])
    plots.by_length(record, out / record["plots"]["length"])
    path = out / f"{rid}.json"
    tmp = path.with_suffix(f".json.tmp{os.getpid()}")
    tmp.write_text(json.dumps(_finite(record), indent=1, allow_nan=False) + "\n")
    tmp.replace(path)
    return path


def read_record(path: str | Path) -> dict[str, Any] | None:
    """The record at `path`, or None when it is missing or not a finished record."""
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("schema") != SCHEMA or "final" not in rec:
        return None
    return rec


__all__ = ["SCHEMA", "read_record", "record_id", "run_experiment", "versions", "write_record"]

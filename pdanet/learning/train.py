"""A small, plain training loop (Adam, full-precision, CPU by default) and the initialisation
experiment: does starting from a compiled network help an LSTM learn Dyck-(k, m)?

Losses: binary cross-entropy with logits for "next_set" (every output is its own yes/no) and
"accept" targets, cross-entropy for "symbol" targets; padding positions (negative targets) are
left out of every loss.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from pdanet.errors import InputError
from pdanet.learning import metrics
from pdanet.learning.data import SequenceDataset, dataset
from pdanet.learning.init import LearnerRNN, initialize, weight_tolerance


def _logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    out = model(ids)
    return out[1] if isinstance(out, tuple) else out


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, kind: str) -> torch.Tensor:
    """Mean loss over the non-padding positions (see the module docstring)."""
    if kind == "symbol":
        return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=-1)
    if kind == "accept":
        logits = logits[..., 0] if logits.shape[-1] == 1 else logits
    elif kind != "next_set":
        raise InputError(f"unknown target kind {kind!r}")
    valid = targets >= 0
    loss = F.binary_cross_entropy_with_logits(logits, targets.clamp(min=0), reduction="none")
    return (loss * valid).sum() / valid.sum().clamp(min=1)


def fit(model: nn.Module, train: SequenceDataset, epochs: int = 10, lr: float = 1e-2,
        batch_size: int = 32, loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
        | None = None, seed: int = 0, clip: float | None = 1.0, max_steps: int | None = None,
        freeze: Iterable[str] = ()) -> list[dict[str, float]]:
    """Train `model` in place with Adam on `train`; returns one row per epoch: ``epoch``,
    ``loss`` (mean training loss over the epoch's batches), ``steps`` (optimizer steps so far)
    and ``seconds``. ``loss(logits, targets)`` overrides the default loss of the dataset's target
    kind; ``clip`` caps the gradient norm (None: no clipping); ``max_steps`` stops after that
    many optimizer steps (None: after `epochs` epochs); ``freeze`` names parameters (as
    ``model.named_parameters()`` spells them) that stay fixed — e.g. a compiled stack network's
    memory heads, whose weight tolerance is 0 (`WeightTolerance.fixed`)."""
    if not isinstance(train, SequenceDataset):
        raise InputError(f"train must be a SequenceDataset (pdanet.learning.dataset), got "
                         f"{type(train).__name__}")
    for label, v in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(v, int) or v < (0 if label == "epochs" else 1):
            raise InputError(f"{label} must be a {'non-negative' if label == 'epochs' else 'positive'}"
                             f" int, got {v!r}")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)
                                  or max_steps < 0):
        raise InputError(f"max_steps must be None or an int ≥ 0, got {max_steps!r}")
    loss_fn = loss or (lambda z, y: masked_loss(z, y, train.kind))
    gen = torch.Generator().manual_seed(int(seed))
    loader = DataLoader(train, batch_size=batch_size, shuffle=True, generator=gen)
    frozen = set(freeze) if not isinstance(freeze, str) else {freeze}
    named = dict(model.named_parameters())
    unknown = sorted(frozen - set(named))
    if unknown:
        raise InputError(f"freeze names {unknown}, which the model does not have; its parameters: "
                         f"{sorted(named)}")
    trained = [p for n, p in named.items() if n not in frozen]
    opt = torch.optim.Adam(trained, lr=lr)
    dtype = next(model.parameters()).dtype
    history = []
    steps = 0
    model.train()
    for epoch in range(1, epochs + 1):
        if max_steps is not None and steps >= max_steps:
            break
        start, total, batches = time.perf_counter(), 0.0, 0
        for ids, targets in loader:
            if max_steps is not None and steps >= max_steps:
                break
            steps += 1
            opt.zero_grad()
            if targets.is_floating_point():
                targets = targets.to(dtype)
            value = loss_fn(_logits(model, ids), targets)
            value.backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(trained, clip)
            opt.step()
            total += float(value.detach())
            batches += 1
        history.append({"epoch": epoch, "loss": total / max(1, batches), "steps": steps,
                        "seconds": time.perf_counter() - start})
    model.eval()
    return history


@torch.no_grad()
def evaluate(model: nn.Module, data: SequenceDataset, batch_size: int = 512) -> dict[str, float]:
    """``per_symbol_accuracy`` and ``sequence_accuracy`` on `data`; for Dyck-(k, m) generators
    also Hewitt et al.'s ``bracket_accuracy``."""
    model.eval()
    logits = torch.cat([_logits(model, data.ids[i:i + batch_size])
                        for i in range(0, len(data), batch_size)])
    out = {"per_symbol_accuracy": metrics.per_symbol_accuracy(logits, data.targets, data.kind),
           "sequence_accuracy": metrics.sequence_accuracy(logits, data.targets, data.kind)}
    k = getattr(data.machine, "k", None)
    if data.kind == "next_set" and isinstance(k, int) and data.num_outputs == 2 * k + 1:
        out["bracket_accuracy"] = metrics.bracket_accuracy(logits, data.ids, k)
    return out


def init_experiment(k: int, m: int, noises: Iterable[float] = (0.0, 0.1, 0.5, 1.0),
                    train_len: int = 20, test_len: int | None = None, n_train: int = 1024,
                    n_test: int = 256, epochs: int = 20, lr: float = 3e-3, batch_size: int = 32,
                    scale: Any = None, method: str = "hewitt", hidden_size: int | None = None,
                    random_init: bool = True, seed: int = 0, noise_scale: str = "tolerance"
                    ) -> list[dict[str, Any]]:
    """Train an LSTM on Dyck-(k, m) from a random initialisation and from the compiled network
    with noise for each value in `noises`; test on longer strings. ``noise_scale="tolerance"``:
    each value is a fraction ρ of the certified weight tolerance δ* (`initialize`'s ``noise``;
    ρ < 1 starts from an exact network); ``"peak"``: Gaussian σ·max|W| (``peak_noise``).

    Training strings are complete Dyck words of every even length in [2, train_len], test strings
    of every even length in (train_len, test_len] (test_len defaults to 2·train_len). ``scale``
    rebuilds the compiled weights at a softer saturation β (default: the compiled β). The learner
    has the compiled network's hidden size unless ``hidden_size`` is larger (extra units isolated,
    small random). Returns one dict per run: k, m, init, noise, scale, hidden_units, train_len,
    test_len, the test metrics before and after training, and the final training loss.
    """
    from pdanet.automata.bounded import dyck
    from pdanet.constructions import compile as compile_net

    if noise_scale not in ("tolerance", "peak"):
        raise InputError(f"noise_scale must be 'tolerance' or 'peak', got {noise_scale!r}")
    test_len = 2 * train_len if test_len is None else test_len
    if train_len < 2 or test_len <= train_len:
        raise InputError(f"need 2 ≤ train_len < test_len, got {train_len}, {test_len}")
    machine = dyck(k, m)
    net = compile_net(machine, target="lstm", method=method)
    beta = net.scale if scale is None else scale
    train = dataset(machine, n_train, range(2, train_len + 1, 2), seed=seed)
    test = dataset(machine, n_test, range(train_len + 2, test_len + 1, 2), seed=seed + 1)
    H = net.hidden_units if hidden_size is None else hidden_size  # 0 is refused, not "default"
    runs: list[tuple[str, float | None]] = [("random", None)] if random_init else []
    runs += [("compiled", float(s)) for s in noises]
    rows = []
    tol = None
    for i, (init, noise) in enumerate(runs):
        torch.manual_seed(seed + i)
        model = LearnerRNN.like(net, hidden_size=H)
        if init == "compiled":
            if noise_scale == "peak":
                initialize(model, net, scale=beta, seed=seed + i, peak_noise=noise)
            else:
                if noise and tol is None:
                    tol = weight_tolerance(net.with_scale(beta))
                initialize(model, net, scale=beta, seed=seed + i, noise=noise, tolerance=tol)
        before = evaluate(model, test)
        history = fit(model, train, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed + i)
        after = evaluate(model, test)
        rows.append({
            "k": k, "m": m, "init": init, "noise": noise,
            "noise_scale": noise_scale if init == "compiled" else None,
            "scale": str(beta) if init == "compiled" else None, "hidden_units": H,
            "train_len": train_len, "test_len": test_len,
            "test_accuracy_before": before["per_symbol_accuracy"],
            "test_accuracy": after["per_symbol_accuracy"],
            "test_sequence_accuracy": after["sequence_accuracy"],
            "test_bracket_accuracy": after["bracket_accuracy"],
            "final_loss": history[-1]["loss"] if history else None,
        })
    return rows


def format_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Rows of dicts as an aligned plain-text table (floats with 3 decimals)."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())

    def cell(v: Any) -> str:
        return "—" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    fmt = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()
    return "\n".join([fmt(columns), fmt(["-" * w for w in widths])] + [fmt(r) for r in cells])


__all__ = ["evaluate", "fit", "format_rows", "init_experiment", "masked_loss"]

"""The training loop both experiment protocols share (`run` and `lm`): ``epochs`` passes over
mini-batches, Adam or RMSProp (the protocol's ``optimiser``) at the size's learning rate, the
gradient norm clipped at ``p.clip`` (none when None), one curve entry per epoch scored on the
validation and test sets. The protocol supplies how an epoch's batches are drawn and what a
batch's loss is."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from pdanet.errors import InputError
from pdanet.experiments.protocols import Protocol, Size


def to_device(model: nn.Module, dev: torch.device, shown: Any) -> nn.Module:
    """`model` moved to `dev`; `InputError` naming the device as `shown` where it cannot."""
    try:
        return model.to(dev)
    except (RuntimeError, AssertionError) as exc:
        raise InputError(f"device {shown!r} cannot hold the model: {exc}") from None


def fit(model: nn.Module, p: Protocol, sz: Size, batches: Callable[[], Iterable[Any]],
        per_epoch: int, batch_loss: Callable[[Any], tuple[torch.Tensor, int]], curve: list,
        score: Callable[[str], tuple[float, Any]], progress: bool, label: str) -> None:
    """Train `model` in place for ``sz.epochs`` epochs. ``batches()`` yields one epoch's
    batches (``per_epoch`` of them, for the progress bar); ``batch_loss(batch)`` returns the
    batch's scalar loss and its number of examples. After each epoch appends to `curve`
    ``{"epoch", "steps", "examples", "loss" (the epoch's mean batch loss), "valid", "test"
    (``score(split)[0]``), "seconds"}``; a tqdm bar named `label` when `progress`."""
    from tqdm.auto import tqdm

    params = [t for t in model.parameters() if t.requires_grad]
    opt = (torch.optim.Adam(params, lr=sz.lr) if p.optimiser == "adam"
           else torch.optim.RMSprop(params, lr=sz.lr))
    steps = examples = 0
    bar = tqdm(total=sz.epochs * per_epoch, desc=label, disable=not progress, leave=False,
               unit="batch")
    try:
        for epoch in range(1, sz.epochs + 1):
            t0, total, count = time.perf_counter(), 0.0, 0
            model.train()
            for batch in batches():
                opt.zero_grad()
                loss, n = batch_loss(batch)
                loss.backward()
                if p.clip is not None:
                    torch.nn.utils.clip_grad_norm_(params, p.clip)
                opt.step()
                steps += 1
                examples += n
                total += float(loss.detach())
                count += 1
                bar.update(1)
            valid, _ = score("valid")
            test, _ = score("test")
            curve.append({"epoch": epoch, "steps": steps, "examples": examples,
                          "loss": total / max(1, count), "valid": valid, "test": test,
                          "seconds": time.perf_counter() - t0})
            bar.set_postfix(loss=f"{total / max(1, count):.3g}", valid=f"{valid:.3f}",
                            test=f"{test:.3f}")
    finally:
        bar.close()


__all__ = ["fit", "to_device"]

"""Scoring a model on a protocol's strings: the papers' metrics, overall and by length.

Every position's prediction is discretised as in `pdanet.learning.metrics` (a next-symbol set
logit > 0, an accept logit > 0, the argmax symbol class). The *scored* positions of a string are
its non-padding positions, restricted by the protocol's mask: ``"after_blank"`` keeps only the
positions after a blank ``#`` is read — the target side of the delayed-output form (Hao et al.
2018 §5 score only the reversed half). In Grefenstette et al. (2015)'s own protocol form
(``target="grefenstette"``, `pdanet.experiments.data`) the targets are −1 off the target side,
so with no mask exactly the target symbols and ``</s>`` are scored, as §4.3 does.

Metrics of a set of strings:

- ``sequence_accuracy`` / ``coarse``: share of strings whose scored positions are all right
  (Suzgun et al. 2019 §5; Grefenstette et al.'s coarse accuracy);
- ``fine``: mean over strings of (scored positions right before the first error) / (scored
  positions) (Grefenstette et al. 2015 §4.3);
- ``masked_accuracy`` / ``per_symbol_accuracy``: share of scored positions right (Hao et al.);
- ``bracket_accuracy``: Hewitt et al.'s close-bracket accuracy (`metrics.bracket_accuracy`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from pdanet.automata.tasks.task import BLANK
from pdanet.errors import InputError
from pdanet.experiments.protocols import Protocol
from pdanet.learning import metrics
from pdanet.learning.data import SequenceDataset


@torch.no_grad()
def logits_of(model: nn.Module, data: SequenceDataset, batch_size: int = 256) -> torch.Tensor:
    """The model's logits (N, T+1, O) on every string of `data` (eval mode, then restored), on
    the CPU whatever the model's device."""
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        parts = []
        for i in range(0, len(data), batch_size):
            out = model(data.ids[i:i + batch_size].to(device))
            parts.append((out[1] if isinstance(out, tuple) else out).detach().float().cpu())
    finally:
        model.train(was)
    return torch.cat(parts)


def scored_positions(p: Protocol, data: SequenceDataset) -> np.ndarray:
    """(N, T+1) bool: the positions the protocol scores (see the module docstring)."""
    valid = _valid(data)
    if p.mask is None:
        return valid
    if p.mask == "after_blank":
        alpha = data.machine.alphabet
        if BLANK not in alpha:
            raise InputError(f"mask 'after_blank' needs the blank {BLANK!r} in the alphabet "
                             f"{tuple(alpha)}")
        return metrics.after_symbol_mask(data.ids, alpha.index(BLANK)) & valid
    raise InputError(f"unknown mask {p.mask!r}; known: None, 'after_blank'")


def _valid(data: SequenceDataset) -> np.ndarray:
    t = data.targets.numpy()
    return (t >= 0).all(-1) if data.kind == "next_set" else t >= 0


def string_scores(p: Protocol, data: SequenceDataset, logits: Any) -> dict[str, np.ndarray]:
    """Per string: ``all_right`` (bool), ``fine`` (float), ``right`` and ``scored`` (counts)."""
    correct, _ = metrics.position_correct(logits, data.targets, data.kind)
    sel = scored_positions(p, data)
    right = (correct & sel).sum(1)
    scored = sel.sum(1)
    wrong_sel = sel & ~correct
    # scored positions before the first wrong scored position
    first_wrong = np.where(wrong_sel.any(1), wrong_sel.argmax(1), sel.shape[1])
    before = (sel & (np.arange(sel.shape[1])[None, :] < first_wrong[:, None])).sum(1)
    fine = np.where(scored > 0, before / np.maximum(scored, 1), 1.0)
    return {"all_right": right == scored, "fine": fine, "right": right, "scored": scored}


def metric_value(p: Protocol, data: SequenceDataset, logits: Any, rows: Any = None,
                 name: str | None = None) -> float:
    """The metric `name` (default: the protocol's) over the strings `rows` (default: all)."""
    name = name or p.metric
    rows = np.arange(len(data)) if rows is None else np.asarray(rows)
    if len(rows) == 0:
        raise InputError("no strings to score")
    if name == "bracket_accuracy":
        k = getattr(data.machine, "k", None)
        if not isinstance(k, int):
            raise InputError(f"bracket_accuracy needs a Dyck-(k, m) machine, got {data.machine!r}")
        z = logits[torch.as_tensor(rows)] if isinstance(logits, torch.Tensor) else logits[rows]
        return metrics.bracket_accuracy(z, data.ids[torch.as_tensor(rows)], k)
    s = {k_: v[rows] for k_, v in string_scores(p, data, logits).items()}
    if name in ("sequence_accuracy", "coarse"):
        return float(s["all_right"].mean())
    if name == "fine":
        return float(s["fine"].mean())
    if name in ("masked_accuracy", "per_symbol_accuracy"):
        return float(s["right"].sum() / max(1, s["scored"].sum()))
    raise InputError(f"unknown metric {name!r}")


def length_bins(lengths: np.ndarray, max_bins: int = 10) -> list[tuple[int, int]]:
    """Contiguous (lo, hi) length ranges covering `lengths`: one per distinct length when there
    are at most `max_bins`, else `max_bins` ranges of (nearly) equal numbers of distinct lengths."""
    distinct = np.unique(np.asarray(lengths))
    if len(distinct) == 0:
        return []
    groups = np.array_split(distinct, min(max_bins, len(distinct)))
    return [(int(g[0]), int(g[-1])) for g in groups if len(g)]


def by_length(p: Protocol, parts: dict[str, tuple[SequenceDataset, Any]],
              train_max: int, max_bins: int = 10) -> list[dict[str, Any]]:
    """The protocol's metric (and per-symbol accuracy) per length bin over the strings of every
    part (``name -> (data, logits)``): one row ``lo, hi, n, metric, per_symbol_accuracy,
    beyond_training`` (lo > the longest training length) per bin."""
    rows = []
    for name, (data, logits) in parts.items():
        lens = data.lengths.numpy()
        for i in range(len(data)):
            rows.append((int(lens[i]), name, i))
    all_lens = np.array([r[0] for r in rows])
    out = []
    for lo, hi in length_bins(all_lens, max_bins):
        value, sym, n = [], [], 0
        for name, (data, logits) in parts.items():
            lens = data.lengths.numpy()
            idx = np.nonzero((lens >= lo) & (lens <= hi))[0]
            if len(idx):
                value.append((metric_value(p, data, logits, idx), len(idx)))
                sym.append((metric_value(p, data, logits, idx, "per_symbol_accuracy"), len(idx)))
                n += len(idx)
        out.append({"lo": lo, "hi": hi, "n": n,
                    "metric": sum(v * k for v, k in value) / n,
                    "per_symbol_accuracy": sum(v * k for v, k in sym) / n,
                    "beyond_training": lo > train_max})
    return out


__all__ = ["by_length", "length_bins", "logits_of", "metric_value", "scored_positions",
           "string_scores"]

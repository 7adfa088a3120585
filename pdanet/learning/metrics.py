"""Evaluation metrics for learners on machine-labelled data.

Arguments follow `pdanet.learning.data`: ``logits`` (B, T+1, O) as returned by a model's forward,
``targets`` in the dataset's form (negative = padding), ``kind`` one of "next_set", "symbol",
"accept". A position is correct when the discretised prediction equals the target exactly: the
whole allowed-next set (logit > 0 ⇔ allowed), the argmax symbol class, or the accept bit.
Every function takes numpy arrays or torch tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pdanet.errors import InputError


def _np(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def predict(logits: Any, kind: str) -> np.ndarray:
    """Discrete predictions: bool sets (next_set), bool (accept), int classes (symbol)."""
    z = _np(logits)
    if kind == "next_set":
        return z > 0
    if kind == "accept":
        return (z[..., 0] if z.shape[-1] == 1 else z) > 0
    if kind == "symbol":
        return z.argmax(-1)
    raise InputError(f"kind must be 'next_set', 'symbol' or 'accept', got {kind!r}")


def position_correct(logits: Any, targets: Any, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(correct, valid): bool arrays (B, T+1); valid marks the non-padding positions."""
    pred, tgt = predict(logits, kind), _np(targets)
    if kind == "next_set":
        valid = (tgt >= 0).all(-1)
        correct = (pred == (tgt > 0.5)).all(-1)
    elif kind == "accept":
        valid = tgt >= 0
        correct = pred == (tgt > 0.5)
    else:
        valid = tgt >= 0
        correct = pred == tgt
    if correct.shape != valid.shape:
        raise InputError(f"predictions of shape {pred.shape} do not match targets {tgt.shape}")
    return correct & valid, valid


def per_symbol_accuracy(logits: Any, targets: Any, kind: str) -> float:
    """Fraction of non-padding positions predicted exactly."""
    correct, valid = position_correct(logits, targets, kind)
    return float(correct.sum() / max(1, valid.sum()))


def sequence_accuracy(logits: Any, targets: Any, kind: str) -> float:
    """Fraction of strings predicted exactly at every one of their positions."""
    correct, valid = position_correct(logits, targets, kind)
    return float((correct == valid).all(-1).mean()) if valid.shape[0] else 0.0


def bracket_accuracy(logits: Any, ids: Any, k: int, threshold: float = 0.8) -> float:
    """Close-bracket prediction accuracy for a Dyck-(k, m) model (outputs: k opens, k closes,
    end): at every position whose next observed symbol is a close bracket, the prediction is correct
    when the softmax over the k close-bracket logits gives that bracket probability > `threshold`
    (the evaluation of Hewitt et al. 2020: "is the right close bracket predicted?"). Positions of
    padding (-1) are skipped. Returns 1.0 when no close bracket occurs."""
    z, x = _np(logits).astype(np.float64), _np(ids)
    if z.shape[-1] < 2 * k:
        raise InputError(f"logits have {z.shape[-1]} outputs; Dyck-(k={k}) needs at least {2 * k}")
    T = x.shape[1]
    close = z[:, :T, k:2 * k]                                  # prediction before reading ids[:, t]
    close = close - close.max(-1, keepdims=True)
    p = np.exp(close)
    p /= p.sum(-1, keepdims=True)
    is_close = (x >= k) & (x < 2 * k)
    if not is_close.any():
        return 1.0
    b, t = np.nonzero(is_close)
    return float((p[b, t, x[b, t] - k] > threshold).mean())


def bracket_error(logits: Any, ids: Any, k: int, threshold: float = 0.8) -> float:
    """1 − `bracket_accuracy`."""
    return 1.0 - bracket_accuracy(logits, ids, k, threshold)


def cross_entropy_difference(model_logprobs: Any, true_logprobs: Any, mask: Any = None) -> float:
    """Per-symbol cross-entropy of the model minus that of the true distribution (nats):
    mean over the masked symbols of (−log p_model(x_t)) − (−log p_true(x_t)). Both arrays hold the
    log-probability of each observed symbol (end marker included when the distributions have one);
    0 means the model matches the true distribution on these strings (as in DuSell & Chiang)."""
    lm, lt = _np(model_logprobs).astype(np.float64), _np(true_logprobs).astype(np.float64)
    if lm.shape != lt.shape:
        raise InputError(f"model log-probs {lm.shape} and true log-probs {lt.shape} differ in shape")
    m = np.ones(lm.shape, bool) if mask is None else _np(mask).astype(bool)
    if m.shape != lm.shape:
        raise InputError(f"mask shape {m.shape} does not match the log-probs {lm.shape}")
    count = int(m.sum())
    if count == 0:
        raise InputError("no symbols to average over (empty mask)")
    return float((lt[m] - lm[m]).sum() / count)


__all__ = ["bracket_accuracy", "bracket_error", "cross_entropy_difference", "per_symbol_accuracy",
           "position_correct", "predict", "sequence_accuracy"]

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


def _symbol_hits(ids: Any, symbols: Any) -> np.ndarray:
    x = _np(ids)
    if x.ndim != 2:
        raise InputError(f"ids must be a (B, T) array of symbol indices, got shape {x.shape}")
    syms = np.atleast_1d(_np(symbols)).astype(np.int64)
    return np.isin(x, syms) & (x >= 0)


def after_symbol_mask(ids: Any, symbols: Any) -> np.ndarray:
    """(B, T+1) bool: the positions t ≥ 1 whose last symbol read, ids[:, t−1], is one of `symbols`
    (indices). Hao et al. (2018)'s reversal evaluation — only the reversed half — is
    ``after_symbol_mask(ids, blank_index)`` in the delayed-output form w #^|w|."""
    hit = _symbol_hits(ids, symbols)
    return np.concatenate([np.zeros((hit.shape[0], 1), bool), hit], axis=1)


def before_symbol_mask(ids: Any, symbols: Any) -> np.ndarray:
    """(B, T+1) bool: the positions t < T whose next symbol, ids[:, t], is one of `symbols`.
    Hao et al. (2018)'s parenthesis-prediction evaluation — only positions before a close
    bracket — is ``before_symbol_mask(ids, close_indices)``."""
    hit = _symbol_hits(ids, symbols)
    return np.concatenate([hit, np.zeros((hit.shape[0], 1), bool)], axis=1)


def masked_accuracy(logits: Any, targets: Any, kind: str, mask: Any) -> float:
    """Fraction of the non-padding positions selected by `mask` ((B, T+1) bool) predicted
    exactly (see `position_correct`); InputError when the mask selects none."""
    correct, valid = position_correct(logits, targets, kind)
    m = _np(mask).astype(bool)
    if m.shape != valid.shape:
        raise InputError(f"mask shape {m.shape} does not match the targets' positions "
                         f"{valid.shape}")
    sel = m & valid
    if not sel.any():
        raise InputError("the mask selects no position; nothing to score")
    return float(correct[sel].sum() / sel.sum())


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


# --- the papers' own accuracies ---------------------------------------------------------------

def next_set_accuracy(outputs: Any, targets: Any, threshold: float = 0.5,
                      probabilities: bool = False, include_start: bool = False) -> float:
    """Suzgun et al. (2019) §4.1: the fraction of sequences accepted, a sequence being accepted
    when at every position the thresholded outputs equal the k-hot next-symbol set exactly
    (sigmoid output > `threshold` ⇔ the symbol is predicted). ``outputs`` (B, T+1, O) are logits
    (``probabilities=False``: the sigmoid is applied) or sigmoid outputs; ``targets`` the
    dataset's float sets (−1 rows: padding). The paper predicts after each input symbol, so
    position 0 (before any symbol) is left out unless ``include_start``."""
    z, tgt = _np(outputs).astype(np.float64), _np(targets)
    if not 0 < threshold < 1:
        raise InputError(f"threshold must be strictly between 0 and 1, got {threshold!r}")
    if z.shape != tgt.shape or z.ndim != 3:
        raise InputError(f"outputs {z.shape} and targets {tgt.shape} must both be (B, T+1, O)")
    cut = threshold if probabilities else np.log(threshold / (1 - threshold))
    valid = (tgt >= 0).all(-1)
    if not include_start:
        valid[:, 0] = False
    ok = ((z > cut) == (tgt > 0.5)).all(-1) | ~valid
    return float(ok.all(-1).mean()) if z.shape[0] else 0.0


def _target_side(logits: Any, targets: Any) -> tuple[np.ndarray, np.ndarray]:
    """(correct, scored) (B, T+1) for symbol targets, at least one scored position per row."""
    correct, scored = position_correct(logits, targets, "symbol")
    if not scored.any(-1).all():
        raise InputError("a sequence has no scored position (no target side); build the data "
                         "with dataset(..., protocol='grefenstette')")
    return correct, scored


def coarse_accuracy(logits: Any, targets: Any) -> float:
    """Grefenstette et al. (2015) §4.3 coarse accuracy: the fraction of sequences whose target
    side is predicted (argmax) without error up to and including ``</s>`` — #correct / #seqs.
    ``targets`` are those of ``dataset(..., protocol="grefenstette")`` (−1 off the target side).
    With teacher forcing this equals the paper's greedy decoding: up to the first error greedy
    decoding feeds back exactly the true symbols."""
    correct, scored = _target_side(logits, targets)
    return float((correct == scored).all(-1).mean())


def fine_accuracy(logits: Any, targets: Any) -> float:
    """Grefenstette et al. (2015) §4.3 fine accuracy: the mean over sequences of #correct_i /
    |target_i|, #correct_i the number of target symbols predicted correctly before the first
    error and |target_i| the length of the target side including ``</s>`` (the same equivalence
    with greedy decoding as `coarse_accuracy`)."""
    correct, scored = _target_side(logits, targets)
    wrong = scored & ~correct
    first = np.where(wrong.any(-1), wrong.argmax(-1), scored.shape[1])
    upto = np.arange(scored.shape[1])[None, :] < first[:, None]
    n_before = (scored & upto).sum(-1)
    return float((n_before / scored.sum(-1)).mean())


def choice_accuracy(logits: Any, targets: Any, mask: Any, choices: Any) -> float:
    """At the positions selected by `mask` ((B, T+1) bool), the fraction where the target class
    has the largest logit among the classes `choices` (indices; the target must be one of them)
    — the evaluation of Linzen et al. (2016) that Hao et al. (2018) §4.5 follow for agreement:
    does the model prefer the right form of the verb (``has``/``have``) over the wrong one."""
    z, tgt = _np(logits), _np(targets)
    m = _np(mask).astype(bool)
    ch = np.atleast_1d(_np(choices)).astype(np.int64)
    if m.shape != tgt.shape or z.shape[:-1] != tgt.shape:
        raise InputError(f"logits {z.shape}, targets {tgt.shape} and mask {m.shape} do not match")
    if ch.size < 2 or (ch < 0).any() or (ch >= z.shape[-1]).any():
        raise InputError(f"choices must be at least two class indices below {z.shape[-1]}, "
                         f"got {ch.tolist()}")
    sel = m & (tgt >= 0)
    if not sel.any():
        raise InputError("the mask selects no position; nothing to score")
    t = tgt[sel]
    if not np.isin(t, ch).all():
        raise InputError(f"targets {sorted(set(t.tolist()) - set(ch.tolist()))} at masked "
                         f"positions are not among the choices {ch.tolist()}")
    best = ch[z[sel][:, ch].argmax(-1)]
    return float((best == t).mean())


__all__ = ["after_symbol_mask", "before_symbol_mask", "bracket_accuracy", "bracket_error",
           "choice_accuracy", "coarse_accuracy", "cross_entropy_difference", "fine_accuracy",
           "masked_accuracy", "next_set_accuracy", "per_symbol_accuracy", "position_correct",
           "predict", "sequence_accuracy"]

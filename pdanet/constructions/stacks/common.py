"""Shared vectorised pieces of the differentiable memories: strength sums, pops, reads, checks.

Strength vectors have shape (B, n) with position 0 the bottom (stack) or front (queue); all sums
run along the last axis, so no Python loop touches a cell.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from pdanet.errors import InputError


def suffix_exclusive(s: torch.Tensor) -> torch.Tensor:
    """``out[..., i] = sum_{j > i} s[..., j]``, accumulated from the top down (as the paper traverses)."""
    if s.shape[-1] == 0:
        return s
    inclusive = torch.flip(torch.flip(s, (-1,)).cumsum(-1), (-1,))
    return F.pad(inclusive[..., 1:], (0, 1))


def prefix_exclusive(s: torch.Tensor) -> torch.Tensor:
    """``out[..., i] = sum_{j < i} s[..., j]``, accumulated from the front."""
    if s.shape[-1] == 0:
        return s
    return F.pad(s.cumsum(-1)[..., :-1], (1, 0))


def pop_with(s: torch.Tensor, u: torch.Tensor, rest: torch.Tensor, inplace: bool = False
             ) -> torch.Tensor:
    """Remove strength ``u`` (B, 1) from the end that ``rest`` measures from:
    max(0, s[i] − max(0, u − rest[i])), where rest[i] = Σ_{j>i} s[j] pops the top (Grefenstette
    et al. (2015) Eq. 2, first case) and rest[i] = Σ_{j<i} s[j] the front (Eq. 4); any u ≥ 0
    (u > 1 pops several cells). With ``inplace`` the result overwrites ``s``."""
    cut = torch.relu_(u - rest)
    return torch.relu_(s.sub_(cut) if inplace else s - cut)


def read_with(s: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
    """Weights of the unit read from the end that ``rest`` measures from:
    min(s[i], max(0, 1 − rest[i])) (Eq. 3 with rest = Σ_{j>i} s[j], Eq. 5 with Σ_{j<i} s[j])."""
    return torch.minimum(s, torch.relu_(1 - rest))


def pop_top(s: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Remove strength ``u`` (B,) from the top (Eq. 2, first case; see `pop_with`)."""
    return pop_with(s, u.unsqueeze(-1), suffix_exclusive(s))


def pop_front(s: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Remove strength ``u`` (B,) from the front (Eq. 4; see `pop_with`)."""
    return pop_with(s, u.unsqueeze(-1), prefix_exclusive(s))


def read_top_weights(s: torch.Tensor) -> torch.Tensor:
    """Weights of the unit read from the top (Eq. 3; see `read_with`)."""
    return read_with(s, suffix_exclusive(s))


def read_front_weights(s: torch.Tensor) -> torch.Tensor:
    """Weights of the unit read from the front (Eq. 5; see `read_with`)."""
    return read_with(s, prefix_exclusive(s))


def weighted_rows(w: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Σ_i w[b, i] · values[b, i] for w (B, n) and values (B, n, m) → (B, m)."""
    return torch.bmm(w.unsqueeze(1), values).squeeze(1)


def expect_shape(owner: str, name: str, tensor: torch.Tensor, shape: Sequence[int],
                 like: torch.Tensor | None = None) -> None:
    """Raise `InputError` unless ``tensor`` is a tensor of exactly ``shape`` (and, given ``like``,
    of its dtype and device)."""
    if not isinstance(tensor, torch.Tensor):
        raise InputError(f"{owner}: action {name!r} must be a torch.Tensor, got "
                         f"{type(tensor).__name__}")
    if tuple(tensor.shape) != tuple(shape):
        raise InputError(f"{owner}: action {name!r} has shape {tuple(tensor.shape)}, expected "
                         f"{tuple(shape)} (batch, [time,] ...)")
    if like is not None and (tensor.dtype != like.dtype or tensor.device != like.device):
        raise InputError(f"{owner}: action {name!r} is {tensor.dtype} on {tensor.device} but the "
                         f"state is {like.dtype} on {like.device}; create the state with the "
                         f"same dtype and device")


def expect_room(owner: str, time: int, steps: int, capacity: int) -> None:
    """Raise `InputError` when ``steps`` more steps do not fit in a state of ``capacity`` steps."""
    if time + steps > capacity:
        raise InputError(f"{owner}: the state holds {capacity} steps and {time} are used, so "
                         f"{steps} more do not fit; pass a larger max_time to init_state")


def at_time(actions, k: int):
    """The actions of time step ``k`` from a NamedTuple of tensors with a time axis 1."""
    return type(actions)(*(a[:, k] for a in actions))


def select_rows(values: torch.Tensor, keep: torch.Tensor) -> list[torch.Tensor]:
    """Per batch element b, the rows ``values[b, i]`` with ``keep[b, i]``, in order of i."""
    counts = keep.sum(1).tolist()
    return list(torch.split(values[keep], counts))


def default_dtype(dtype: torch.dtype | None) -> torch.dtype:
    return torch.get_default_dtype() if dtype is None else dtype


__all__ = [
    "at_time",
    "default_dtype",
    "expect_room",
    "expect_shape",
    "pop_front",
    "pop_top",
    "pop_with",
    "prefix_exclusive",
    "read_front_weights",
    "read_top_weights",
    "read_with",
    "select_rows",
    "suffix_exclusive",
    "weighted_rows",
]

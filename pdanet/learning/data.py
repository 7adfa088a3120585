"""Training data from a machine: strings and the machine's own outputs at every step.

`dataset(task_or_machine, n, lengths, seed)` draws n strings and labels every prefix with the
batched simulator (`Machine.run_batch`). Item i is ``(ids, targets)``: ``ids`` (T,) symbol indices
padded with -1, and ``targets`` at positions 0..T (position t = after t symbols, as in a compiled
network's logits), with **negative values marking padding** (positions past the string's length):

- ``"next_set"`` (generators such as Dyck-(k, m)): float (T+1, |Out|) multi-hot allowed-next sets;
- ``"symbol"`` (transducers): int (T+1,) class of the symbol emitted by the last step, with
  ``|Out|`` standing for "no output" (the last logit of the compiled readouts);
- ``"accept"`` (recognisers): float (T+1,) 1.0 when the prefix is accepted. A generator whose
  output alphabet has the end marker ``$`` can be labelled this way too (``target="accept"``: the
  prefix may end there).

All strings of one dataset are padded to the same width, so torch's default collate batches them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from pdanet.automata.base import Machine
from pdanet.automata.bounded import DyckKM
from pdanet.automata.tasks import registry as tasks
from pdanet.automata.tasks.sampling import draw_lengths
from pdanet.errors import InputError

KINDS = ("next_set", "symbol", "accept")


class SequenceDataset(Dataset):
    """Padded strings and their per-prefix targets (see the module docstring)."""

    def __init__(self, machine: Machine, kind: str, ids: torch.Tensor, lengths: torch.Tensor,
                 targets: torch.Tensor, num_outputs: int):
        self.machine = machine
        self.kind = kind
        self.ids = ids
        self.lengths = lengths
        self.targets = targets
        self.num_outputs = num_outputs

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.ids[i], self.targets[i]

    @property
    def max_length(self) -> int:
        return int(self.lengths.max()) if len(self) else 0

    def mask(self) -> torch.Tensor:
        """(N, T+1) True at positions 0..length of each string."""
        return torch.arange(self.ids.shape[1] + 1)[None, :] <= self.lengths[:, None]

    def subset(self, rows: Any) -> SequenceDataset:
        """The rows given by an index array or boolean mask, padding trimmed to their longest."""
        rows = torch.as_tensor(np.asarray(rows))
        if rows.dtype == torch.bool:
            rows = torch.nonzero(rows).flatten()
        lengths = self.lengths[rows]
        T = int(lengths.max()) if len(rows) else 0
        return SequenceDataset(self.machine, self.kind, self.ids[rows, :T], lengths,
                               self.targets[rows, :T + 1], self.num_outputs)

    def strings(self) -> list[tuple]:
        """The strings as tuples of symbols."""
        alpha = self.machine.alphabet
        return [tuple(alpha.decode(row[:n].tolist()))
                for row, n in zip(self.ids, self.lengths.tolist())]

    def __repr__(self) -> str:
        return (f"<SequenceDataset {len(self)} strings of {self.machine!r}, targets "
                f"{self.kind!r}, lengths ≤ {self.max_length}>")


def _strings_of_machine(machine: Machine, n: int, lengths, rng: np.random.Generator
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Strings for a machine given directly: complete words for Dyck-(k, m) (even lengths),
    otherwise random live strings (the machine's sampler or random live walks)."""
    from pdanet.verify.strings import random_live_strings

    want = np.asarray(draw_lengths(n, lengths, rng), dtype=np.int64)
    if isinstance(machine, DyckKM) and (want % 2).any():
        raise InputError(f"Dyck words have even length; lengths {sorted(set(want.tolist()))} "
                         "include odd ones")
    T = int(want.max()) if n else 0
    ids = np.full((n, T), -1, dtype=np.int64)
    got = np.zeros(n, dtype=np.int64)
    for L in np.unique(want):
        rows = np.nonzero(want == L)[0]
        if isinstance(machine, DyckKM):
            part = machine.sample(len(rows), int(L), rng, complete=True)
            part_len = np.full(len(rows), int(L))
        else:
            part, part_len = random_live_strings(machine, len(rows), (int(L), int(L)), rng)
        ids[rows, :part.shape[1]] = part
        got[rows] = part_len
    return ids, got


def dataset(task_or_machine: str | Machine, n: int, lengths: int | Iterable[int],
            seed: int | None = None, target: str | None = None, **params) -> SequenceDataset:
    """n strings with lengths drawn uniformly from `lengths` (an int or ints), labelled by the
    machine at every prefix. A task name uses `pdanet.automata.tasks` (``params`` go to its machine
    and sampler); a machine is sampled directly. ``target`` defaults to the machine's
    ``output_kind``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n must be a positive int, got {n!r}")
    rng = np.random.default_rng(seed)
    if isinstance(task_or_machine, str):
        machine = tasks.get(task_or_machine, **params)
        if machine is None:
            raise InputError(f"task {task_or_machine!r} has no machine with {params}; see "
                             f"tasks.task({task_or_machine!r}).description")
        strings = tasks.sample(task_or_machine, int(n), lengths, rng, **params)
        ids, lens = machine.encode(strings)
    elif isinstance(task_or_machine, Machine):
        if params:
            raise InputError(f"params {sorted(params)} apply to task names only")
        machine = task_or_machine
        ids, lens = _strings_of_machine(machine, int(n), lengths, rng)
    else:
        raise InputError(f"expected a task name or a Machine, got {type(task_or_machine).__name__}")
    kind = target or machine.output_kind
    if kind not in KINDS:
        raise InputError(f"target must be one of {KINDS}, got {kind!r}")
    ids = np.asarray(ids, dtype=np.int64).reshape(len(lens), -1)
    lens = np.asarray(lens, dtype=np.int64)
    out = machine.run_batch(ids, lens)["output"]
    targets, num_outputs = _targets(machine, kind, out)
    pad = np.arange(ids.shape[1] + 1)[None, :] > lens[:, None]
    targets[pad] = -1
    return SequenceDataset(machine, kind, torch.as_tensor(ids), torch.as_tensor(lens),
                           torch.as_tensor(targets), num_outputs)


def _targets(machine: Machine, kind: str, out: np.ndarray) -> tuple[np.ndarray, int]:
    have = machine.output_kind
    if kind == have == "next_set":
        return out.astype(np.float32), out.shape[-1]
    if kind == have == "symbol":
        n_out = len(machine.output_alphabet)
        return np.where(out < 0, n_out, out).astype(np.int64), n_out + 1
    if kind == have == "accept":
        return out.astype(np.float32), 1
    if kind == "accept" and have == "next_set":
        alpha = machine.output_alphabet
        if alpha is not None and "$" in alpha:
            return out[..., alpha.index("$")].astype(np.float32), 1
    raise InputError(f"{machine!r} is a {have!r} machine; it cannot label {kind!r} targets")


def train_test_split_by_length(data: SequenceDataset, max_train_length: int
                               ) -> tuple[SequenceDataset, SequenceDataset]:
    """Strings of length ≤ ``max_train_length`` for training, the longer ones for testing (so the
    test measures generalisation to longer strings, as in Hewitt et al. 2020)."""
    short = data.lengths <= int(max_train_length)
    if not short.any() or short.all():
        raise InputError(f"splitting at length {max_train_length} leaves one side empty (lengths "
                         f"{int(data.lengths.min())}–{data.max_length})")
    return data.subset(short), data.subset(~short)


__all__ = ["KINDS", "SequenceDataset", "dataset", "train_test_split_by_length"]

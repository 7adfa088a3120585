"""A protocol's data: training, validation and per-length test strings from the task's own
sampler (`pdanet.automata.tasks.sample`), labelled at every prefix by the task's machine
(`Machine.run_batch`), as `pdanet.learning.SequenceDataset` (targets as in
`pdanet.learning.data`: position t is the target after t symbols, negative = padding)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pdanet.automata.base import Machine
from pdanet.automata.tasks import registry as tasks
from pdanet.errors import InputError
from pdanet.experiments.protocols import Protocol, Size
from pdanet.learning.data import KINDS, SequenceDataset


def task_params(p: Protocol, size: Size) -> tuple[dict[str, Any], dict[str, Any]]:
    """(machine parameters, sampler parameters) of `p` at `size` (the size's ``params``
    override both)."""
    return {**p.task_params, **size.params}, {**p.sample_params, **size.params}


def machine_of(p: Protocol, size: Size) -> Machine:
    """The task's machine with the protocol's parameters."""
    params, _ = task_params(p, size)
    m = tasks.get(p.task, **params)
    if m is None:
        raise InputError(f"task {p.task!r} has no machine with {params}")
    return m


def _labels(machine: Machine, kind: str, out: np.ndarray) -> tuple[np.ndarray, int]:
    have = machine.output_kind
    if kind != have:
        raise InputError(f"{machine!r} labels {have!r} targets; the protocol asks for {kind!r}")
    if kind == "symbol":
        n_out = len(machine.output_alphabet)
        return np.where(out < 0, n_out, out).astype(np.int64), n_out + 1
    if kind == "next_set":
        return out.astype(np.float32), out.shape[-1]
    return out.astype(np.float32), 1


def labelled(machine: Machine, strings: Sequence[tuple], kind: str | None = None
             ) -> SequenceDataset:
    """`strings` (tuples of symbols) labelled by `machine` at every prefix."""
    if not strings:
        raise InputError("no strings to label")
    kind = kind or machine.output_kind
    if kind not in KINDS:
        raise InputError(f"target must be one of {KINDS}, got {kind!r}")
    ids, lens = machine.encode(list(strings))
    ids = np.asarray(ids, dtype=np.int64).reshape(len(lens), -1)
    lens = np.asarray(lens, dtype=np.int64)
    out = machine.run_batch(ids, lens)["output"]
    targets, num_outputs = _labels(machine, kind, np.asarray(out))
    targets[np.arange(ids.shape[1] + 1)[None, :] > lens[:, None]] = -1
    return SequenceDataset(machine, kind, torch.as_tensor(ids), torch.as_tensor(lens),
                           torch.as_tensor(targets), num_outputs)


def datasets(p: Protocol, size: Size, seed: int, machine: Machine | None = None
             ) -> dict[str, SequenceDataset]:
    """``train`` (``n_train`` strings, lengths uniform over the training lengths), ``valid``
    (``n_valid`` more from the same lengths) and ``test`` (``n_test_per_length`` strings of each
    test length), drawn from generators seeded by `seed` (train, valid) and by a fixed seed
    (test: the same test set for every run, as DuSell & Chiang §4 keep theirs)."""
    machine = machine or machine_of(p, size)
    _, sparams = task_params(p, size)
    rng = np.random.default_rng(seed)
    train = tasks.sample(p.task, size.n_train, list(size.train_lengths), rng, **sparams)
    valid = tasks.sample(p.task, size.n_valid, list(size.train_lengths), rng, **sparams)
    trng = np.random.default_rng(10_007)
    test = [s for L in size.test_lengths
            for s in tasks.sample(p.task, size.n_test_per_length, [L], trng, **sparams)]
    return {name: labelled(machine, strings, p.target)
            for name, strings in (("train", train), ("valid", valid), ("test", test))}


__all__ = ["datasets", "labelled", "machine_of", "task_params"]

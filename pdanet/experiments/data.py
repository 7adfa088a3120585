"""A protocol's data: training, validation and per-length test strings from the task's own
sampler (`pdanet.automata.tasks.sample`), labelled at every prefix by the task's machine
(`Machine.run_batch`), as `pdanet.learning.SequenceDataset` (targets as in
`pdanet.learning.data`: position t is the target after t symbols, negative = padding).

A protocol with ``target="grefenstette"`` uses Grefenstette et al. (2015) §4's protocol form: the
task's (source, target) pairs as joint inputs ``<s> source ||| target`` with the next target
symbol (``</s>`` last) as the target after ``|||`` and after each target symbol, −1 on the source
side (`pdanet.learning.data.pair_dataset`), and the task's protocol-form transducer
(`pdanet.automata.tasks.grefenstette2015.protocol_machine`) as the machine. Its lengths are
those of the joint inputs, 2n + 2 for a source of length n (the target side of these tasks is
as long as the source); the sources have lengths (L − 2) / 2."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pdanet.automata.base import Machine
from pdanet.automata.tasks import grefenstette2015
from pdanet.automata.tasks import registry as tasks
from pdanet.errors import AutomatonError, InputError
from pdanet.experiments.protocols import Protocol, Size
from pdanet.learning.data import KINDS, SequenceDataset, pair_dataset

#: the protocol target of Grefenstette et al. (2015) §4 (see the module docstring)
PAIR_PROTOCOL = "grefenstette"


def task_params(p: Protocol, size: Size) -> tuple[dict[str, Any], dict[str, Any]]:
    """(machine parameters, sampler parameters) of `p` at `size` (the size's ``params``
    override both)."""
    return {**p.task_params, **size.params}, {**p.sample_params, **size.params}


def machine_of(p: Protocol, size: Size) -> Machine:
    """The task's machine with the protocol's parameters."""
    params, _ = task_params(p, size)
    if p.target == PAIR_PROTOCOL:
        return grefenstette2015.protocol_machine(p.task, **params)
    m = tasks.get(p.task, **params)
    if m is None:
        raise InputError(f"task {p.task!r} has no machine with {params}")
    if p.target == "next_set" and m.output_kind == "accept":
        from pdanet.models.suzgun import NextSetMachine  # Suzgun et al. 2019 Table 1

        m = NextSetMachine(m)
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
    if p.target == PAIR_PROTOCOL:
        return _pair_datasets(p, size, machine, sparams, rng)
    train = tasks.sample(p.task, size.n_train, list(size.train_lengths), rng, **sparams)
    valid = tasks.sample(p.task, size.n_valid, list(size.train_lengths), rng, **sparams)
    trng = np.random.default_rng(10_007)
    test = [s for L in size.test_lengths
            for s in tasks.sample(p.task, size.n_test_per_length, [L], trng, **sparams)]
    return {name: labelled(machine, strings, p.target)
            for name, strings in (("train", train), ("valid", valid), ("test", test))}


def _source_lengths(lengths: Sequence[int]) -> list[int]:
    bad = [L for L in lengths if L < 2 or L % 2]
    if bad:
        raise InputError(f"joint inputs <s> w ||| t have even lengths 2|w| + 2 ≥ 2; {bad} are not")
    return [(L - 2) // 2 for L in lengths]


def _pair_datasets(p: Protocol, size: Size, machine: Machine, sparams: dict,
                   rng: np.random.Generator) -> dict[str, SequenceDataset]:
    """`datasets` for the ``<s> source ||| target </s>`` protocol (module docstring): the pairs of
    the task's pair sampler, as `pair_dataset` sequences; AutomatonError where the machine's
    alphabets are not the joint inputs' and the target classes' (in their order)."""
    t = tasks.task(p.task)
    if t.pair_sampler is None or t.pair_alphabets is None:
        raise InputError(f"task {p.task!r} has no (source, target) pairs for target "
                         f"{PAIR_PROTOCOL!r}")
    alphabets = t.pair_alphabets(**sparams)
    train_src = _source_lengths(size.train_lengths)
    train = t.pair_sampler(size.n_train, train_src, rng, **sparams)
    valid = t.pair_sampler(size.n_valid, train_src, rng, **sparams)
    trng = np.random.default_rng(10_007)
    test = [pair for L in _source_lengths(size.test_lengths)
            for pair in t.pair_sampler(size.n_test_per_length, [L], trng, **sparams)]
    out = {name: pair_dataset(machine, pairs, *alphabets)
           for name, pairs in (("train", train), ("valid", valid), ("test", test))}
    data = out["train"]
    if tuple(data.alphabet) != tuple(machine.alphabet) or \
            tuple(data.output_alphabet) != tuple(machine.output_alphabet):
        raise AutomatonError(f"{machine!r} reads {tuple(machine.alphabet)[:4]}… and emits "
                             f"{tuple(machine.output_alphabet)[:4]}…, not the joint inputs "
                             f"{tuple(data.alphabet)[:4]}… and target classes "
                             f"{tuple(data.output_alphabet)[:4]}… of the protocol")
    return out


__all__ = ["PAIR_PROTOCOL", "datasets", "labelled", "machine_of", "task_params"]

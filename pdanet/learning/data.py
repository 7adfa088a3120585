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
Negative targets are never scored nor trained on (the loss and `pdanet.learning.metrics` skip
them): padding, and the positions a paper's protocol leaves out.

The papers' own targets, on top of the machine's:

- ``target="next_set"`` on a recognition task with next-symbol sets (Suzgun et al. 2019, §4.1 and
  Table 1: Dyck-k, w # φ(w^R), w # w^R): float (T+1, |Σ|+1) k-hot sets of the symbols that may
  follow each prefix, the last column the end symbol ``⊣`` (allowed when the prefix is in the
  language; ``end_marker=False`` drops that column, as Table 1 prints the Dyck rows);
  `pdanet.learning.metrics.next_set_accuracy` is the paper's accuracy.
- ``target="next_symbol"`` (language modelling with an end symbol, any task): int (T+1,) class of
  the symbol that follows each prefix, ``|Σ|`` for the end of the string. With the agreement task
  of Hao et al. (2018) §4.5 the dataset's ``eval_mask`` selects the positions the paper scores —
  those whose next word is an auxiliary (*has* or *have*, the verb's number); score them with
  `masked_accuracy` (the argmax over all words) or `choice_accuracy` (has against have). The paper
  calls its grammar unambiguous, but a relative clause after a PP may attach to either noun: after
  "the lobster in the lobsters that" both auxiliaries can follow.
- ``protocol="grefenstette"`` on a transduction task with (source, target) pairs (Grefenstette et
  al. 2015, §4): the joint sequence ``<s> source ||| target </s>``; the input is ``<s> source |||
  target`` (the target side shifted, as in autoregressive training), the targets are the next
  target symbol after ``|||`` and after each target symbol (``</s>`` last) and −1 on the source
  side; `lengths` are source lengths; `pdanet.learning.metrics.coarse_accuracy` and
  `fine_accuracy` are the paper's accuracies.

``eval_mask`` (None, or (N, T+1) bool) marks the positions a paper evaluates, where it evaluates
fewer than the targets it trains on.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from pdanet.automata.alphabet import Alphabet
from pdanet.automata.base import Machine
from pdanet.automata.bounded import DyckKM
from pdanet.automata.tasks import registry as tasks
from pdanet.automata.tasks.grefenstette2015 import EOS, SEPARATOR, SOS  # §4
from pdanet.automata.tasks.sampling import draw_lengths
from pdanet.automata.tasks.task import END, Task
from pdanet.errors import InputError

KINDS = ("next_set", "symbol", "accept")
TARGETS = KINDS + ("next_symbol",)
PROTOCOLS = ("grefenstette",)
AGREEMENT_AUXILIARIES = ("has", "have")


class SequenceDataset(Dataset):
    """Padded strings and their per-prefix targets (see the module docstring)."""

    def __init__(self, machine: Machine, kind: str, ids: torch.Tensor, lengths: torch.Tensor,
                 targets: torch.Tensor, num_outputs: int, alphabet: Alphabet | None = None,
                 output_alphabet: Alphabet | None = None, eval_mask: torch.Tensor | None = None):
        self.machine = machine
        self.kind = kind
        self.ids = ids
        self.lengths = lengths
        self.targets = targets
        self.num_outputs = num_outputs
        # the input symbols (the machine's unless a protocol adds markers) and, where the targets
        # are classes or sets of named symbols, those symbols in target-index order
        self.alphabet = machine.alphabet if alphabet is None else alphabet
        self.output_alphabet = output_alphabet
        self.eval_mask = eval_mask

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
        mask = None if self.eval_mask is None else self.eval_mask[rows, :T + 1]
        return SequenceDataset(self.machine, self.kind, self.ids[rows, :T], lengths,
                               self.targets[rows, :T + 1], self.num_outputs, self.alphabet,
                               self.output_alphabet, mask)

    def strings(self) -> list[tuple]:
        """The strings as tuples of symbols."""
        alpha = self.alphabet
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


def _accepted(fn: Any, params: dict) -> dict:
    """The entries of `params` that `fn` takes (all of them when it takes ``**kwargs``), so that a
    sampler-only parameter such as ``grammar=True`` does not reach a machine factory."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return params
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return params
    return {k: v for k, v in params.items() if k in sig.parameters}


def _check_n(n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n must be a positive int, got {n!r}")


def _task_machine(name: str, params: dict) -> tuple[Task, Machine]:
    t = tasks.task(name)
    machine = t.machine_factory(**_accepted(t.machine_factory, params))
    if machine is None:
        raise InputError(f"task {name!r} has no machine with {params}; see "
                         f"tasks.task({name!r}).description")
    return t, machine


def dataset(task_or_machine: str | Machine, n: int, lengths: int | Iterable[int],
            seed: int | None = None, target: str | None = None, *, protocol: str | None = None,
            end_marker: bool = True, **params) -> SequenceDataset:
    """n strings with lengths drawn uniformly from `lengths` (an int or ints), labelled at every
    prefix (see the module docstring). A task name uses `pdanet.automata.tasks` (``params`` go to
    its sampler, and those its machine takes to its machine); a machine is sampled directly.
    ``target`` defaults to the machine's ``output_kind``; "next_symbol", and "next_set" on the
    tasks with next-symbol sets, are the papers' targets; ``protocol="grefenstette"`` gives
    Grefenstette et al. (2015)'s ``<s> source ||| target </s>`` sequences (``lengths`` are then
    source lengths). ``end_marker`` applies to next-set targets of recognition tasks."""
    _check_n(n)
    rng = np.random.default_rng(seed)
    if protocol is not None:
        if protocol not in PROTOCOLS:
            raise InputError(f"protocol must be one of {PROTOCOLS} or None, got {protocol!r}")
        if not isinstance(task_or_machine, str):
            raise InputError("protocol='grefenstette' needs a task name with (source, target) "
                             "pairs, not a machine")
        if target not in (None, "symbol"):
            raise InputError(f"protocol={protocol!r} has symbol targets, not {target!r}")
        t, machine = _task_machine(task_or_machine, params)
        if t.pair_sampler is None:
            with_pairs = [x.name for x in tasks.TASKS if x.pair_sampler is not None]
            raise InputError(f"task {t.name!r} has no (source, target) pairs for protocol "
                             f"{protocol!r}; tasks that have: {', '.join(with_pairs)}")
        pairs = t.pair_sampler(int(n), lengths, rng, **params)
        return pair_dataset(machine, pairs, *t.pair_alphabets(**_accepted(t.pair_alphabets,
                                                                          params)))
    if isinstance(task_or_machine, str):
        t, machine = _task_machine(task_or_machine, params)
        strings = t.sampler(int(n), lengths, rng, **params)
        ids, lens = machine.encode(strings)
        return _label(machine, t, ids, lens, target, end_marker, params)
    if isinstance(task_or_machine, Machine):
        if params:
            raise InputError(f"params {sorted(params)} apply to task names only")
        ids, lens = _strings_of_machine(task_or_machine, int(n), lengths, rng)
        return _label(task_or_machine, None, ids, lens, target, end_marker, {})
    raise InputError(f"expected a task name or a Machine, got {type(task_or_machine).__name__}")


def label(task_or_machine: str | Machine, strings: Sequence, target: str | None = None, *,
          end_marker: bool = True, **params) -> SequenceDataset:
    """The dataset of the given strings (tuples of symbols, or strings of one-character
    symbols), labelled as `dataset` labels its samples — for evaluating on chosen strings (every
    string up to a length, a paper's examples)."""
    if isinstance(task_or_machine, str):
        t, machine = _task_machine(task_or_machine, params)
    elif isinstance(task_or_machine, Machine):
        if params:
            raise InputError(f"params {sorted(params)} apply to task names only")
        t, machine = None, task_or_machine
    else:
        raise InputError(f"expected a task name or a Machine, got {type(task_or_machine).__name__}")
    if len(strings) == 0:
        raise InputError("no strings to label")
    ids, lens = machine.encode(list(strings))
    return _label(machine, t, ids, lens, target, end_marker, params)


def _label(machine: Machine, task: Task | None, ids: Any, lens: Any, target: str | None,
           end_marker: bool, params: dict) -> SequenceDataset:
    kind = target or machine.output_kind
    if kind not in TARGETS:
        raise InputError(f"target must be one of {TARGETS}, got {kind!r}")
    if not isinstance(end_marker, bool):
        raise InputError(f"end_marker must be True or False, got {end_marker!r}")
    ids = np.asarray(ids, dtype=np.int64).reshape(len(lens), -1)
    lens = np.asarray(lens, dtype=np.int64)
    alpha = machine.alphabet
    out_alpha, eval_mask = None, None
    if kind == "next_symbol":
        targets = _next_symbol_targets(ids, lens, len(alpha))
        num_outputs, out_alpha, kind = len(alpha) + 1, Alphabet(tuple(alpha) + (END,)), "symbol"
        if task is not None and task.name == "agreement":
            aux = [alpha.index(w) for w in AGREEMENT_AUXILIARIES]
            eval_mask = torch.as_tensor(np.isin(targets, aux))
    elif kind == "next_set" and machine.output_kind != "next_set":
        if task is None or task.next_sets is None:
            with_sets = [x.name for x in tasks.TASKS if x.next_sets is not None]
            raise InputError(f"{machine!r} is a {machine.output_kind!r} machine without "
                             f"next-symbol sets; tasks that have them: {', '.join(with_sets)}")
        targets, out_alpha = _next_set_targets(task, alpha, ids, lens, end_marker, params)
        num_outputs = len(out_alpha)
    else:
        out = machine.run_batch(ids, lens)["output"]
        targets, num_outputs = _targets(machine, kind, out)
    pad = np.arange(ids.shape[1] + 1)[None, :] > lens[:, None]
    targets[pad] = -1
    return SequenceDataset(machine, kind, torch.as_tensor(ids), torch.as_tensor(lens),
                           torch.as_tensor(targets), num_outputs, alpha, out_alpha, eval_mask)


def _next_symbol_targets(ids: np.ndarray, lens: np.ndarray, n_symbols: int) -> np.ndarray:
    """(N, T+1): ids shifted left by one, the end class ``n_symbols`` at each string's end."""
    N, T = ids.shape
    targets = np.full((N, T + 1), -1, dtype=np.int64)
    targets[:, :T] = ids
    targets[np.arange(N), lens] = n_symbols
    return targets


def _next_set_targets(task: Task, alpha: Alphabet, ids: np.ndarray, lens: np.ndarray,
                      end_marker: bool, params: dict) -> tuple[np.ndarray, Alphabet]:
    columns = tuple(alpha) + ((END,) if end_marker else ())
    col = {x: i for i, x in enumerate(columns)}
    N, T = ids.shape
    targets = np.zeros((N, T + 1, len(columns)), dtype=np.float32)
    fn = task.next_sets
    kw = _accepted(fn, params)
    for b in range(N):
        string = alpha.decode(ids[b, :lens[b]].tolist())
        for t, allowed in enumerate(fn(string, **kw)):
            for x in allowed:
                if x in col:
                    targets[b, t, col[x]] = 1.0
    return targets, Alphabet(columns)


def pair_dataset(machine: Machine, pairs: Sequence[tuple[Sequence, Sequence]],
                 source_symbols: Sequence, target_symbols: Sequence) -> SequenceDataset:
    """Grefenstette et al. (2015) §4: (source, target) pairs as joint sequences ``<s> source |||
    target </s>``. Inputs ``<s> source ||| target`` (length |source| + |target| + 2) over
    ``<s>``, ``|||``, the source symbols and the target symbols not among them (one input index
    per symbol name — the paper keeps separate source and target index maps; the position of
    ``|||`` tells the sides apart); targets: after ``|||`` and after each target symbol, the next
    target symbol, then ``</s>`` (classes: `target_symbols` in order, ``</s>`` last); −1 at the
    source positions, which are neither trained on nor scored. `machine` is the task's machine
    (kept for reference)."""
    if len(pairs) == 0:
        raise InputError("no (source, target) pairs")
    src_syms, tgt_syms = tuple(source_symbols), tuple(target_symbols)
    for x in (SOS, SEPARATOR, EOS):
        if x in src_syms or x in tgt_syms:
            raise InputError(f"{x!r} is a protocol symbol; the task's symbols must not use it")
    in_alpha = Alphabet((SOS, SEPARATOR) + src_syms + tuple(x for x in tgt_syms
                                                           if x not in set(src_syms)))
    out_alpha = Alphabet(tgt_syms + (EOS,))
    src_set, tgt_set = set(src_syms), set(tgt_syms)
    for src, tgt in pairs:
        bad = [x for x in src if x not in src_set] + [x for x in tgt if x not in tgt_set]
        if bad:
            raise InputError(f"pair ({src!r}, {tgt!r}) has symbols {bad!r} outside the task's "
                             "source or target vocabulary")
    joint = [(SOS, *src, SEPARATOR, *tgt) for src, tgt in pairs]
    ids, lens = in_alpha.encode_batch(joint)
    ids = np.asarray(ids, dtype=np.int64).reshape(len(lens), -1)
    lens = np.asarray(lens, dtype=np.int64)
    targets = np.full((len(pairs), ids.shape[1] + 1), -1, dtype=np.int64)
    eos = len(out_alpha) - 1
    for b, (src, tgt) in enumerate(pairs):
        start = len(src) + 2                               # after <s> source |||
        targets[b, start:start + len(tgt)] = [out_alpha.index(x) for x in tgt]
        targets[b, start + len(tgt)] = eos
    return SequenceDataset(machine, "symbol", torch.as_tensor(ids), torch.as_tensor(lens),
                           torch.as_tensor(targets), len(out_alpha), in_alpha, out_alpha)


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


__all__ = ["KINDS", "PROTOCOLS", "TARGETS", "SequenceDataset", "dataset", "label", "pair_dataset",
           "train_test_split_by_length"]

"""The `Task` record, the blank symbol of the delayed-output form, the source papers, and `apply`
(a machine's answer in the form of the reference functions)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from pdanet.automata.base import Machine
from pdanet.automata.grammar import CFG

BLANK = "#"
END = "⊣"  # the end-of-string symbol of next-symbol sets (Suzgun et al. 2019, Table 1)

PAPERS = {
    "hao2018": "Hao et al. (2018), Context-Free Transductions with Neural Stacks",
    "dusell2021": "DuSell & Chiang (2021), Learning Hierarchical Structures with Differentiable "
                  "Nondeterministic Stacks (Renormalizing NS-RNN)",
    "suzgun2019": "Suzgun et al. (2019), Memory-Augmented Recurrent Neural Networks Can Learn "
                  "Generalized Dyck Languages",
    "grefenstette2015": "Grefenstette et al. (2015), Learning to Transduce with Unbounded Memory",
    "hewitt2020": "Hewitt et al. (2020), RNNs can generate bounded hierarchical languages with "
                  "optimal memory",
    "folklore": "standard finite-state examples",
    "deletang2023": "Delétang et al. (2023), Neural Networks and the Chomsky Hierarchy",
    "butoi2024": "Butoi et al. (2025), Training Neural Networks as Recognizers of Formal "
                 "Languages",
}


@dataclass(frozen=True)
class Task:
    """A named task: ``machine_factory(**params)`` (may return None when no machine of the library
    computes the task — the description says why), ``sampler(n, lengths, rng, **params)``,
    ``reference(string, **params)``, the paper and section, and a description. ``grammar(**params)``
    is the task's (P)CFG where the paper gives one.

    Optional, where the paper trains on them: ``next_sets(string, **params)`` gives, for each
    prefix of a string (positions 0..|s|), the frozenset of symbols that may follow it in the
    language, with `END` when the prefix is itself in the language (Suzgun et al. 2019's k-hot
    targets); ``pair_sampler(n, lengths, rng, **params)`` draws (source, target) pairs of a
    sequence transduction with source lengths from ``lengths``, and ``pair_reference(source,
    **params)`` gives the target of a source (None outside the domain), and
    ``pair_alphabets(**params)`` the (source, target) vocabularies — Grefenstette et al. 2015's
    ``<s> source ||| target </s>`` protocol."""

    name: str
    machine_factory: Callable[..., Machine | None]
    sampler: Callable[..., list]
    reference: Callable[..., Any]
    paper: str
    description: str
    kind: str = "recognise"
    grammar: Callable[..., CFG] | None = None
    next_sets: Callable[..., tuple] | None = None
    pair_sampler: Callable[..., list] | None = None
    pair_reference: Callable[..., Any] | None = None
    pair_alphabets: Callable[..., tuple] | None = None


def apply(machine: Machine, string: Sequence[Hashable]) -> Any:
    """The machine's answer in the form of the reference functions: membership (bool) for
    recognisers and generators; for transducers the per-step outputs (None for a step that emits
    nothing), or None when the string is outside the domain (blocked, or not ending in an
    accepting state when the machine has accepting states)."""
    if machine.output_kind in ("accept", "next_set"):
        return bool(machine.accepts(string))
    config = machine.initial()
    outs = []
    for sym in machine.alphabet.split(string):
        config = machine.step(config, sym)
        if getattr(config, "state", None) is None:
            return None
        outs.append(machine.output(config))
    accepting = getattr(machine, "accepting", None)
    if accepting and config.state not in accepting:
        return None
    return tuple(outs)


__all__ = ["BLANK", "END", "PAPERS", "Task", "apply"]

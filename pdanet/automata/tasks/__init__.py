"""The named tasks of the source papers: machines, samplers and independent reference functions.

Each task is a frozen `Task`. ``get(name, **params)`` builds its machine, ``sample(name, n,
lengths, rng, **params)`` draws n strings (tuples of symbols) whose lengths are drawn uniformly
from ``lengths`` (an int or an iterable of ints), and ``reference(name, **params)`` returns a pure
Python function of a string that does not use the machine:

- recognition tasks (``kind == "recognise"``): ``reference(s) -> bool`` (membership);
  Samplers of recognition tasks draw members, except `parity` and `modular_counter`, whose samplers
  draw uniform bit strings (members and non-members alike);
- transduction tasks (``kind == "transduce"``): ``reference(s) -> tuple | None``: the symbol
  emitted by each step (None for a step that emits nothing), or None when s is outside the
  transduction's domain. `apply(machine, s)` gives the machine's answer in the same form.

Strings of the transduction tasks of Hao et al. (2018) and Grefenstette et al. (2015) are written in
the delayed-output form of Hao et al. §2.3: the source w followed by one blank ``#`` per output
symbol still to come, so that the machine reads one symbol and emits one symbol per step.

Where the papers train on other targets, a task carries them: ``task(name).next_sets`` (the
next-symbol sets of Suzgun et al. 2019 for the Dyck and palindrome tasks, with the end symbol
`END`), and ``pair_sampler`` / ``pair_reference`` / ``pair_alphabets`` (the (source, target) pairs
of Grefenstette et al. 2015's ``<s> source ||| target </s>`` protocol for sequence_copy,
sequence_reversal, bigram_flip and the ITG tasks svo_sov and gender_conjugation);
`pdanet.learning.data.dataset` builds them with ``target="next_set"`` or
``protocol="grefenstette"``.

Where a paper gives no rule probabilities, the defaults here are our own choice and say so.
`inside`, `log_probability_given_length` and `cross_entropy_lower_bound` (module `probability`)
give the exact probability of a string under a task's grammar and DuSell & Chiang's lower bound
on a language model's cross-entropy.

The package has one module per source paper — `hao2018`, `grefenstette2015`, `suzgun2019`,
`dusell2021`, `hewitt2020`, `deletang2023` and `butoi2024` (benchmark tasks of Delétang et al.
2023 and of the FLaRe benchmark: recognisers whose answer follows the input, and Delétang et al.'s
sequence-to-sequence tasks as transducers whose output follows the input), and `folklore`
for standard finite-state examples — holding the
machines, samplers, references and grammars; `sampling` the samplers they share; `task` the
`Task` record; and `registry` the one explicit list of tasks (`TASKS`). Everything is re-exported
here.
"""

from __future__ import annotations

from pdanet.automata.tasks.dusell2021 import (
    HARDEST_ALPHABET,
    HARDEST_ALPHABET_NO_DOLLAR,
    dusell_dyck_grammar,
    hardest_cfl_grammar,
    hardest_cfl_machine,
    hardest_cfl_realtime_dollar,
    hardest_cfl_reference,
    marked_reversal_grammar,
    marked_reversal_machine,
    marked_reversal_reference,
    padded_reversal_grammar,
    padded_reversal_machine,
    padded_reversal_reference,
    unmarked_reversal_grammar,
    unmarked_reversal_machine,
    unmarked_reversal_reference,
)
from pdanet.automata.tasks.folklore import modular_counter_machine, parity_machine
from pdanet.automata.tasks.grefenstette2015 import (
    PROTOCOL_STORES,
    bigram_flip_machine,
    bigram_flip_reference,
    bigram_flip_sampler,
    gender_grammar,
    gender_machine,
    gender_target,
    protocol_form,
    protocol_machine,
    sequence_copy_machine,
    sequence_copy_reference,
    sequence_reversal_machine,
    svo_sov_grammar,
    svo_sov_machine,
    svo_sov_target,
)
from pdanet.automata.tasks.hao2018 import (
    AGREEMENT_SETS,
    AGREEMENT_WORDS,
    agreement_grammar,
    agreement_machine,
    agreement_next_auxiliaries,
    agreement_predictor,
    agreement_predictor_reference,
    agreement_prefix_grammar,
    agreement_reference,
    agreement_right_recursive,
    boolean_formula_machine,
    boolean_formula_reference,
    boolean_grammar,
    cumulative_xor_machine,
    cumulative_xor_reference,
    delayed_xor_machine,
    delayed_xor_reference,
    parenthesis_grammar,
    parenthesis_prediction_machine,
    parenthesis_prediction_reference,
    reversal_eps_machine,
    reversal_eps_reference,
    reversal_eps_sampler,
    reversal_machine,
    reversal_reference,
    reversal_sampler,
)
from pdanet.automata.tasks.hewitt2020 import dyck, dyck_km_reference, dyck_km_sampler
from pdanet.automata.tasks.probability import (
    WeightedCFG,
    cross_entropy_lower_bound,
    inside,
    log_probability_given_length,
)
from pdanet.automata.tasks.registry import (
    TASKS,
    get,
    grammar,
    long_strings,
    names,
    reference,
    sample,
    task,
)
from pdanet.automata.tasks.suzgun2019 import (
    dyck_grammar,
    dyck_machine,
    dyck_next_sets,
    dyck_reference,
    dyck_unambiguous_grammar,
    w_phi_wr_grammar,
    w_phi_wr_machine,
    w_phi_wr_next_sets,
    w_phi_wr_reference,
    w_wr_marked_machine,
    w_wr_marked_next_sets,
)
from pdanet.automata.tasks.task import BLANK, END, PAPERS, Task, apply


def dataset(task_or_machine, n: int, lengths, seed: int | None = None,
            target: str | None = None, **params):
    """A torch Dataset of inputs and learning targets labelled by the machine (see
    `pdanet.learning.data.dataset`; torch is imported on first call)."""
    from pdanet.learning.data import dataset as _dataset

    return _dataset(task_or_machine, n, lengths, seed=seed, target=target, **params)


__all__ = [
    "AGREEMENT_SETS",
    "AGREEMENT_WORDS",
    "BLANK",
    "END",
    "HARDEST_ALPHABET",
    "HARDEST_ALPHABET_NO_DOLLAR",
    "PAPERS",
    "PROTOCOL_STORES",
    "TASKS",
    "Task",
    "WeightedCFG",
    "agreement_grammar",
    "agreement_machine",
    "agreement_next_auxiliaries",
    "agreement_predictor",
    "agreement_predictor_reference",
    "agreement_prefix_grammar",
    "agreement_reference",
    "agreement_right_recursive",
    "apply",
    "bigram_flip_machine",
    "bigram_flip_reference",
    "bigram_flip_sampler",
    "boolean_formula_machine",
    "boolean_formula_reference",
    "boolean_grammar",
    "cross_entropy_lower_bound",
    "cumulative_xor_machine",
    "cumulative_xor_reference",
    "dataset",
    "delayed_xor_machine",
    "delayed_xor_reference",
    "dusell_dyck_grammar",
    "dyck",
    "dyck_grammar",
    "dyck_km_reference",
    "dyck_km_sampler",
    "dyck_machine",
    "dyck_next_sets",
    "dyck_reference",
    "dyck_unambiguous_grammar",
    "gender_grammar",
    "gender_machine",
    "gender_target",
    "get",
    "grammar",
    "hardest_cfl_grammar",
    "hardest_cfl_machine",
    "hardest_cfl_realtime_dollar",
    "hardest_cfl_reference",
    "inside",
    "log_probability_given_length",
    "long_strings",
    "marked_reversal_grammar",
    "marked_reversal_machine",
    "marked_reversal_reference",
    "modular_counter_machine",
    "names",
    "padded_reversal_grammar",
    "padded_reversal_machine",
    "padded_reversal_reference",
    "parenthesis_grammar",
    "parenthesis_prediction_machine",
    "parenthesis_prediction_reference",
    "parity_machine",
    "protocol_form",
    "protocol_machine",
    "reference",
    "reversal_eps_machine",
    "reversal_eps_reference",
    "reversal_eps_sampler",
    "reversal_machine",
    "reversal_reference",
    "reversal_sampler",
    "sample",
    "sequence_copy_machine",
    "sequence_copy_reference",
    "sequence_reversal_machine",
    "svo_sov_grammar",
    "svo_sov_machine",
    "svo_sov_target",
    "task",
    "unmarked_reversal_grammar",
    "unmarked_reversal_machine",
    "unmarked_reversal_reference",
    "w_phi_wr_grammar",
    "w_phi_wr_machine",
    "w_phi_wr_next_sets",
    "w_phi_wr_reference",
    "w_wr_marked_machine",
    "w_wr_marked_next_sets",
]

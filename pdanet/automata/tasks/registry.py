"""The registry of named tasks: one explicit list, `TASKS`, and the functions that look a task up
by name (`names`, `task`, `get`, `sample`, `reference`, `grammar`). Adding a task is adding its
entry here (its machine, sampler and reference live in the module of its source paper)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from pdanet.automata.base import Machine
from pdanet.automata.grammar import CFG
from pdanet.automata.tasks import butoi2024 as butoi
from pdanet.automata.tasks import deletang2023 as deletang
from pdanet.automata.tasks import dusell2021, folklore, grefenstette2015, hao2018, hewitt2020
from pdanet.automata.tasks import suzgun2019 as suzgun
from pdanet.automata.tasks.sampling import bits_sampler
from pdanet.automata.tasks.task import Task
from pdanet.errors import InputError

TASKS: tuple[Task, ...] = (
    # Hao et al. (2018)
    Task("reversal", hao2018.reversal_task_machine, hao2018.reversal_task_sampler,
         hao2018.reversal_task_reference, "Hao et al. (2018), §3 and §4.1 (Fig. 3); §2.3",
         "String reversal w #^|w| -> #^|w| w^R as a real-time DPDT; with epsilon=True "
         "the unpadded w # -> w^R with ε-moves (for the buffered model).", "transduce"),
    Task("cumulative_xor", hao2018.cumulative_xor_machine, bits_sampler,
         hao2018.cumulative_xor_reference, "Hao et al. (2018), §4.2 (Fig. 4 left)",
         "After each bit, the XOR of all bits so far (Mealy DFA).", "transduce"),
    Task("delayed_xor", hao2018.delayed_xor_machine, bits_sampler,
         hao2018.delayed_xor_reference, "Hao et al. (2018), §4.2",
         "After each bit, the XOR of the bits before it (Mealy DFA).", "transduce"),
    Task("parenthesis_prediction", hao2018.parenthesis_prediction_machine,
         hao2018.parenthesis_sampler, hao2018.parenthesis_prediction_reference,
         "Hao et al. (2018), §4.3 (Fig. 4 right)",
         "Predict the closing bracket that may come next (DPDT).", "transduce",
         hao2018.parenthesis_grammar),
    Task("boolean_formula", hao2018.boolean_formula_machine, hao2018.boolean_formula_sampler,
         hao2018.boolean_formula_reference, "Hao et al. (2018), §4.4",
         "Evaluate a boolean formula in reverse Polish notation at every symbol (DPDT).",
         "transduce", hao2018.boolean_grammar),
    Task("agreement", hao2018.agreement_machine, hao2018.agreement_sampler,
         hao2018.agreement_reference, "Hao et al. (2018), §4.5",
         "Subject–auxiliary agreement sentences (PCFG; recognised by a PDA).", "recognise",
         hao2018.agreement_grammar),
    # DuSell & Chiang (2021)
    Task("marked_reversal", dusell2021.marked_reversal_machine, dusell2021.marked_reversal_sampler,
         dusell2021.marked_reversal_reference, "DuSell & Chiang (2021), §4",
         "The palindromes w # w^R over {0, 1} (DPDA).", "recognise",
         dusell2021.marked_reversal_grammar),
    Task("unmarked_reversal", dusell2021.unmarked_reversal_machine,
         dusell2021.unmarked_reversal_sampler, dusell2021.unmarked_reversal_reference,
         "DuSell & Chiang (2021), §4", "Even palindromes w w^R (PDA + PCFG).", "recognise",
         dusell2021.unmarked_reversal_grammar),
    Task("padded_reversal", dusell2021.padded_reversal_machine,
         dusell2021.padded_reversal_sampler, dusell2021.padded_reversal_reference,
         "DuSell & Chiang (2021), §4",
         "Palindromes w a^p w^R with a padding run in the middle (PDA + PCFG).", "recognise",
         dusell2021.padded_reversal_grammar),
    Task("hardest_cfl", dusell2021.hardest_cfl_task_machine, dusell2021.hardest_cfl_sampler,
         dusell2021.hardest_cfl_reference, "DuSell & Chiang (2021), §4; Greibach (1973)",
         "Greibach's hardest context-free language over ( ) [ ] , ; $ as DuSell & Chiang define "
         "it (the y-parts form $ and a non-empty Dyck-2 word; the authors' weighted grammar; "
         "recognised by a PDA; realtime=True: a real-time weighted PDA whose runs are the ways "
         "to choose each block's y, for the NS-RNN; dollar=False: the variant without $).",
         "recognise", dusell2021.hardest_cfl_grammar),
    # Suzgun et al. (2019)
    Task("w_wr_marked", suzgun.w_wr_marked_machine, suzgun.w_wr_marked_sampler,
         suzgun.w_wr_marked_reference, "Suzgun et al. (2019), §6.2",
         "w # w^R over {a, b, c}: alias of marked_reversal (DPDA).", "recognise",
         suzgun.w_wr_marked_grammar, next_sets=suzgun.w_wr_marked_next_sets),
    Task("w_phi_wr", suzgun.w_phi_wr_machine, suzgun.w_phi_wr_sampler,
         suzgun.w_phi_wr_reference, "Suzgun et al. (2019), §6.1",
         "Homomorphic palindromes w # φ(w^R) (DPDA).", "recognise", suzgun.w_phi_wr_grammar,
         next_sets=suzgun.w_phi_wr_next_sets),
    *(Task(f"dyck{k}", functools.partial(suzgun.dyck_machine, k),
           functools.partial(suzgun.dyck_sampler, k=k),
           functools.partial(suzgun.dyck_reference, k=k),
           "Suzgun et al. (2019), §5" + ("; DuSell & Chiang (2021), §4" if k == 2 else ""),
           f"The Dyck language D_{k} (DPDA recogniser; PCFG of Suzgun et al. §5; samples "
           "uniform per length, or with grammar=True from the paper's PCFG, p = 1/2, q = 1/4).",
           "recognise",
           functools.partial(suzgun.dyck_grammar, k),
           next_sets=functools.partial(suzgun.dyck_next_sets, k=k))
      for k in range(1, 7)),
    Task("string_reversal", hao2018.reversal_machine, hao2018.reversal_sampler,
         hao2018.reversal_reference, "Suzgun et al. (2019), §7",
         "w #^|w| -> #^|w| w^R (alias of reversal; real-time DPDT).", "transduce"),
    # Grefenstette et al. (2015)
    Task("sequence_copy", grefenstette2015.sequence_copy_machine,
         grefenstette2015.delayed_sampler, grefenstette2015.sequence_copy_reference,
         "Grefenstette et al. (2015), §4.1",
         "w #^|w| -> #^|w| w. Needs a queue: the store transducer (store='queue', the default, "
         "or 'deque'); with max_length, a bounded Mealy DFA instead.", "transduce",
         pair_sampler=grefenstette2015.sequence_copy_pairs,
         pair_reference=grefenstette2015.sequence_copy_target,
         pair_alphabets=grefenstette2015.pair_alphabets),
    Task("sequence_reversal", grefenstette2015.sequence_reversal_machine,
         grefenstette2015.delayed_sampler, grefenstette2015.sequence_reversal_reference,
         "Grefenstette et al. (2015), §4.1",
         "w #^|w| -> #^|w| w^R over a vocabulary of V symbols (DPDT).", "transduce",
         pair_sampler=grefenstette2015.sequence_reversal_pairs,
         pair_reference=grefenstette2015.sequence_reversal_target,
         pair_alphabets=grefenstette2015.pair_alphabets),
    Task("bigram_flip", grefenstette2015.bigram_flip_machine,
         grefenstette2015.bigram_flip_sampler, grefenstette2015.bigram_flip_reference,
         "Grefenstette et al. (2015), §4.1",
         "w # -> # flip(w), swapping adjacent pairs (streaming Mealy DFA).", "transduce",
         pair_sampler=grefenstette2015.bigram_flip_pairs,
         pair_reference=grefenstette2015.bigram_flip_target,
         pair_alphabets=grefenstette2015.pair_alphabets),
    Task("svo_sov", grefenstette2015.svo_sov_machine, grefenstette2015.svo_sov_sampler,
         grefenstette2015.svo_sov_reference, "Grefenstette et al. (2015), §4.2",
         "The ITG transduction SVO -> SOV (the main verb moves behind its objects; relative "
         "clauses kept in place), in streaming form w # -> # t (Mealy DFA); our reading of the "
         "grammar, which the paper's text does not print.", "transduce",
         grefenstette2015.svo_sov_grammar,
         pair_sampler=grefenstette2015.svo_sov_pairs,
         pair_reference=grefenstette2015.svo_sov_target,
         pair_alphabets=grefenstette2015.svo_sov_alphabets),
    Task("gender_conjugation", grefenstette2015.gender_machine, grefenstette2015.gender_sampler,
         grefenstette2015.gender_reference, "Grefenstette et al. (2015), §4.2",
         "The ITG transduction genderless -> gendered articles (the/a -> der/die/das, "
         "ein/eine/ein by the noun's gender), in streaming form w # -> # t (Mealy DFA); our "
         "reading of the grammar, which the paper's text does not print.", "transduce",
         grefenstette2015.gender_grammar,
         pair_sampler=grefenstette2015.gender_pairs,
         pair_reference=grefenstette2015.gender_target,
         pair_alphabets=grefenstette2015.gender_alphabets),
    # Hewitt et al. (2020)
    Task("dyck", hewitt2020.dyck, hewitt2020.dyck_km_sampler, hewitt2020.dyck_km_reference,
         "Hewitt et al. (2020)",
         "Dyck-(k, m): k bracket types, depth at most m (generator of next-symbol sets).",
         "recognise"),
    # standard finite-state examples
    Task("parity", folklore.parity_machine, bits_sampler, folklore.parity_reference,
         "standard finite-state example", "Bit strings with an odd number of 1s (DFA).",
         "recognise"),
    Task("modular_counter", folklore.modular_counter_machine, folklore.modular_counter_sampler,
         folklore.modular_counter_reference, "standard finite-state example",
         "Bit strings whose number of 1s is ≡ residue (mod modulus) (DFA).", "recognise"),
    # Delétang et al. (2023), with the answer appended as in Butoi et al. (2025)
    Task("modular_arithmetic_brackets", deletang.modular_arithmetic_brackets_machine,
         deletang.modular_arithmetic_brackets_sampler,
         deletang.modular_arithmetic_brackets_reference,
         "Delétang et al. (2023), appendix (task descriptions)",
         "E = r for a bracketed expression E over digits mod 5 with + - (and * with mult=True), "
         "r its value (real-time DPDA).", "recognise"),
    Task("solve_equation", deletang.solve_equation_machine, deletang.solve_equation_sampler,
         deletang.solve_equation_reference,
         "Delétang et al. (2023), appendix (task descriptions)",
         "E = v # s for a bracketed expression E with one unknown x, s a solution of E = v "
         "mod 5 (real-time DPDA).", "recognise"),
    # Delétang et al. (2023), sequence-to-sequence tasks in delayed-output form
    Task("reverse_string", deletang.reverse_string_machine, deletang.reverse_string_sampler,
         deletang.reverse_string_reference,
         "Delétang et al. (2023), appendix (task descriptions): Reverse String (DCF)",
         "w #^|w| -> #^|w| w^R over {0, 1} (real-time DPDT).", "transduce"),
    Task("duplicate_string", deletang.duplicate_string_machine,
         deletang.duplicate_string_sampler, deletang.duplicate_string_reference,
         "Delétang et al. (2023), appendix (task descriptions): Duplicate String (CS)",
         "w #^2|w| -> #^|w| w w over {0, 1} (real-time transducer with a queue).", "transduce"),
    Task("odds_first", deletang.odds_first_machine, deletang.odds_first_sampler,
         deletang.odds_first_reference,
         "Delétang et al. (2023), appendix (task descriptions): Odds First (CS)",
         "w #^|w| -> #^|w| a1 a3 … a2 a4 … over {0, 1} (real-time transducer with a queue).",
         "transduce"),
    Task("marked_copy", deletang.marked_copy_machine, deletang.marked_copy_sampler,
         deletang.marked_copy_reference,
         "Butoi et al. (2025), Table 1 (Marked Copy); Delétang et al. (2023), appendix",
         "The copy language w # w as the transduction w # _^|w| -> _^(|w|+1) w over {0, 1} "
         "(real-time transducer with a queue).", "transduce"),
    # Butoi et al. (2025), FLaRe
    Task("repeat_01", butoi.repeat_01_machine, butoi.repeat_01_sampler, butoi.repeat_01_reference,
         "Butoi et al. (2025), Table 1", "The language (01)* (DFA).", "recognise"),
    Task("even_pairs", butoi.even_pairs_machine, butoi.even_pairs_sampler,
         butoi.even_pairs_reference,
         "Butoi et al. (2025), Table 1; Delétang et al. (2023), appendix",
         "Bit strings with an even number of 01 and 10 pairs in total (DFA).", "recognise"),
    Task("cycle_navigation", butoi.cycle_navigation_machine, butoi.cycle_navigation_sampler,
         butoi.cycle_navigation_reference,
         "Butoi et al. (2025), Table 1; Delétang et al. (2023), appendix",
         "Moves < = > on a cycle of 5 positions from 0, then the final position (DFA).",
         "recognise"),
    Task("modular_arithmetic_simple", butoi.modular_arithmetic_simple_machine,
         butoi.modular_arithmetic_simple_sampler, butoi.modular_arithmetic_simple_reference,
         "Butoi et al. (2025), Table 1; Delétang et al. (2023), appendix",
         "d op d … op d = r, evaluated left to right mod 5, r the value (DFA).", "recognise"),
    Task("majority", butoi.majority_machine, butoi.majority_sampler, butoi.majority_reference,
         "Butoi et al. (2025), Table 1", "Bit strings with more 1s than 0s (real-time DPDA).",
         "recognise"),
    Task("stack_manipulation", butoi.stack_manipulation_machine,
         butoi.stack_manipulation_sampler, butoi.stack_manipulation_reference,
         "Butoi et al. (2025), Table 1; Delétang et al. (2023), appendix",
         "Initial stack bits, PUSH b / POP operations, # and the resulting stack top first "
         "(real-time DPDA).", "recognise"),
)


_BY_NAME: dict[str, Task] = {t.name: t for t in TASKS}  # names are unique (tested)


def names() -> list[str]:
    """The registered task names, sorted."""
    return sorted(_BY_NAME)


def task(name: str) -> Task:
    """The `Task` called `name`."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise InputError(f"no task named {name!r}; known tasks: {', '.join(names())}") from None


def get(name: str, **params) -> Machine:
    """The machine of task `name` built with `params` (every task has a machine by default)."""
    return task(name).machine_factory(**params)


def sample(name: str, n: int, lengths: int | Iterable[int], rng: Any = None, **params) -> list:
    """n strings of task `name` (tuples of symbols), lengths drawn uniformly from `lengths`."""
    return task(name).sampler(n, lengths, rng, **params)


def long_strings(name: str, n: int, length: int, rng: Any = None, slack: int = 8,
                 **params) -> tuple[np.ndarray, np.ndarray]:
    """n long strings for the machine of task `name` (built with ``params``), as (ids padded
    with -1, lengths): `pdanet.verify.long_strings` when its walks reach `length` (nine rows in
    ten or more), otherwise the task's own sampler (members of its language, so live) at the
    largest length in [length − slack, length] that the language has — random walks through a
    machine such as marked reversal's die after a few symbols (the marker comes early), its
    sampler's strings do not."""
    from pdanet.verify.strings import encode_strings
    from pdanet.verify.strings import long_strings as walks

    rng = np.random.default_rng(rng)
    machine = get(name, **params)
    ids, lengths = walks(machine, n, length, rng)
    if (lengths >= length).mean() >= 0.9:
        return ids, lengths
    for size in range(length, max(length - slack, 1) - 1, -1):
        try:
            strings = sample(name, n, size, rng, **params)
        except InputError:                       # the language has no string of this length
            continue
        return encode_strings(machine, strings)
    raise InputError(f"task {name!r}: random walks stop early and its sampler has no string of "
                     f"length {max(length - slack, 1)}..{length}; pass another length")


def reference(name: str, **params) -> Callable[[Any], Any]:
    """The independent reference function of task `name` (see `pdanet.automata.tasks`)."""
    t = task(name)
    return functools.partial(t.reference, **params) if params else t.reference


def grammar(name: str, **params) -> CFG:
    """The (P)CFG of task `name`."""
    t = task(name)
    if t.grammar is None:
        raise InputError(f"task {name!r} has no grammar")
    return t.grammar(**params)


__all__ = ["TASKS", "get", "grammar", "long_strings", "names", "reference", "sample", "task"]

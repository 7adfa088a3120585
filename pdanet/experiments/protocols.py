"""The source papers' experimental protocols, one `Protocol` per (paper, task).

Each protocol names the paper's task (a `pdanet.automata.tasks` name and its parameters), the
model compiled for it (`pn.compile(machine, target="stack_rnn", model=NAME)`, or a plain LSTM),
the training and test lengths, the optimiser, learning rate, batch size and epochs, and the
metric — each at two sizes: ``"paper"`` (the paper's numbers, with its section) and ``"small"``
(the same protocol shrunk to run in about a minute on 2 CPU cores). ``reported`` holds the
number the paper reports for the closest model, with where it reports it.

Where pdanet's task differs from the paper's (a target or a metric that is not in pdanet yet),
the protocol's ``deviation`` says so; the table in ``docs/experiments.md`` prints it. Switching a
protocol to a paper target once it lands is one line: its ``target`` (or ``task``) field.

DuSell & Chiang's (2021) own protocol is a language model trained with EOS and scored by
cross-entropy difference (``metric="ce_difference"``): the protocols ``dusell2021`` /
``marked_reversal_lm``, ``unmarked_reversal_lm``, ``padded_reversal_lm``, ``dyck_lm``,
``hardest_cfl_lm`` (field ``lm``: the task of `pdanet.constructions.ns_lm.dusell_lm_machine`),
run by `pdanet.experiments.lm`.

No torch here: the CLI reads this module to list protocols.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pdanet.errors import InputError

#: metric names (`pdanet.experiments.evaluation`)
METRICS = ("coarse", "fine", "masked_accuracy", "sequence_accuracy", "per_symbol_accuracy",
           "bracket_accuracy", "ce_difference")
#: metrics where lower is better (nats)
LOWER_IS_BETTER = ("ce_difference",)
OPTIMISERS = ("adam", "rmsprop")
SIZES = ("small", "paper")
INITS = ("random", "compiled", "compiled+noise")


@dataclass(frozen=True)
class Size:
    """One size of a protocol: strings drawn with lengths uniform over ``train_lengths``
    (``n_train`` of them; ``n_valid`` more from the same lengths for the learning curve), and
    ``n_test`` test strings per length in ``test_lengths`` (the length-generalisation curve),
    ``epochs`` passes with mini-batches of ``batch_size`` at learning rate ``lr``; ``params``
    override the task's machine and sampler parameters at this size."""

    train_lengths: tuple[int, ...]
    test_lengths: tuple[int, ...]
    n_train: int
    n_valid: int
    n_test_per_length: int
    epochs: int
    batch_size: int
    lr: float
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("n_train", "n_valid", "n_test_per_length", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"Size.{name} must be a positive int, got {v!r}")
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 0:
            raise InputError(f"Size.epochs must be an int ≥ 0, got {self.epochs!r}")
        if not self.train_lengths or not self.test_lengths:
            raise InputError("Size needs at least one training and one test length")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise InputError(f"Size.lr must be a number > 0, got {self.lr!r}")


@dataclass(frozen=True)
class Protocol:
    """A paper's experiment on one task (see the module docstring)."""

    paper: str
    task: str
    section: str
    model: str
    metric: str
    optimiser: str
    sizes: dict[str, Size]
    task_params: dict[str, Any] = field(default_factory=dict)
    sample_params: dict[str, Any] = field(default_factory=dict)
    target: str | None = None
    mask: str | None = None
    clip: float | None = 1.0
    reported: str = "—"
    reported_value: float | None = None
    deviation: str = ""
    notes: str = ""
    #: a DuSell & Chiang language-model task (`pdanet.constructions.ns_lm.LM_TASKS`): the run
    #: trains a language model with EOS and scores ``ce_difference`` (`pdanet.experiments.lm`)
    lm: str | None = None

    def __post_init__(self):
        if self.metric not in METRICS:
            raise InputError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.optimiser not in OPTIMISERS:
            raise InputError(f"optimiser must be one of {OPTIMISERS}, got {self.optimiser!r}")
        if (self.lm is None) == (self.metric == "ce_difference"):
            raise InputError("metric 'ce_difference' goes with a language-model task (lm=...) "
                             f"and only with one; got metric {self.metric!r}, lm {self.lm!r}")
        if set(self.sizes) != set(SIZES):
            raise InputError(f"a protocol needs sizes {SIZES}, got {sorted(self.sizes)}")

    def size(self, name: str) -> Size:
        if name not in SIZES:
            raise InputError(f"size must be one of {SIZES}, got {name!r}")
        return self.sizes[name]


def _even(lo: int, hi: int) -> tuple[int, ...]:
    """lo, lo + 2, …, ≤ hi (every other length: the tasks' strings have one parity)."""
    return tuple(range(lo, hi + 1, 2))


_LM_REPORTED = ("RNS-RNN (NS+S+U) within 0.05 nats of the true distribution on the validation "
                "set (§4 Results, Fig. 1; by test length: Fig. 2)")
_LM_DEVIATION = ("the model is the NS-RNN language model of pdanet.constructions.ns_lm: the "
                 "action weights are an embedding of the symbol read (no LSTM controller), the "
                 "output layer reads the RNS reading directly; the paper's hyperparameter grid "
                 "(lr × 5 restarts, best on validation) is one lr here; small: short strings.")
_LM_NOTES = ("metric: cross-entropy difference, model minus true distribution (p_G(w | |w|) / "
             "number of lengths), nats per symbol with one EOS per string (§4); lower is "
             "better, 0 optimal. The hardest CFL's grammar weights do not normalise: its PDA "
             "defines p(w) ∝ weight_G(w)·λ^|w| (dusell2021.hardest_cfl_lm), whose p(w | |w|) is "
             "the authors' distribution.")


def _lm(task: str, section_task: str, small: Size) -> Protocol:
    return Protocol(
        "dusell2021", f"{task}_lm", f"DuSell & Chiang (2021) §4, {section_task}", "ns_lm",
        "ce_difference", "adam",
        {  # §4: 10,000 train strings of lengths [40, 80], 1,000 valid, test 100 per length
           # [40, 100]; ≤ 200 epochs; lr grid {0.01, 0.005, 0.001, 0.0005}
            "paper": Size(tuple(range(40, 81)), tuple(range(40, 101)), 10_000, 1000, 100, 200,
                          10, 5e-3),
            "small": small},
        reported=_LM_REPORTED, reported_value=0.05, deviation=_LM_DEVIATION, notes=_LM_NOTES,
        lm=task, clip=5.0)


#: small: lengths 3–10 (test 11–15) instead of 40–80 (test 40–100), and the grammars' mean
#: lengths scaled by about the same factor (7/60), so that the PCFG's own length distribution sits on
#: the training lengths as the paper's (mean 60 in [40, 80]) does
_LM_SMALL = Size(tuple(range(3, 11)), tuple(range(11, 16)), 100, 40, 4, 5, 10, 1e-2)
_LM_PROTOCOLS = (
    _lm("marked_reversal", "marked reversal",
        replace(_LM_SMALL, params={"mean_length": 7})),
    _lm("unmarked_reversal", "unmarked reversal",
        replace(_LM_SMALL, params={"mean_length": 7})),
    _lm("padded_reversal", "padded reversal",
        replace(_LM_SMALL, params={"mean_content_length": 7, "mean_padding_length": 4})),
    _lm("dyck", "Dyck-2", replace(_LM_SMALL, params={"mean_nesting_depth": 5})),
    # the hardest CFL's shortest string has 6 symbols: small lengths 6–12 (test 13–16), 3
    # epochs (its 18-state PDA costs more per step); length weight 0.28: mean length ≈ 10
    _lm("hardest_cfl", "hardest CFL",
        replace(_LM_SMALL, train_lengths=tuple(range(6, 13)), test_lengths=tuple(range(13, 17)),
                epochs=3, params={"length_weight": 0.28})),
)


# One line per protocol field that a newly landed paper target would change (``task``,
# ``target``, ``metric``): e.g. Suzgun's next-set task with end marker is ``target="next_set"``.
PROTOCOLS: dict[tuple[str, str], Protocol] = {(p_.paper, p_.task): p_ for p_ in (
    Protocol(
        "grefenstette2015", "sequence_reversal", "Grefenstette et al. (2015) §4.1, §4.3–4.4",
        "grefenstette_lstm", "coarse", "rmsprop",
        # lengths are the joint inputs' <s> w ||| t, 2|w| + 2 (pdanet.experiments.data)
        {  # §4.1: source lengths unif{8, 64}; §4.3: test unif{65, 128}, 1000 sequences;
           # §4.4: RMSProp, batch 10, lr grid {5e-3 … 5e-5}, gradients clipped at 1
            "paper": Size(_even(18, 130), _even(132, 258), 10_000, 1000, 16, 50, 10, 1e-3),
            "small": Size(_even(4, 14), _even(16, 26), 300, 100, 10, 15, 10, 1e-3,
                          {"vocab_size": 8})},
        task_params={"vocab_size": 128}, sample_params={"vocab_size": 128},
        target="grefenstette",
        reported="Stack-LSTM, testing coarse 1.00 / fine 1.00 (Table in §5, Fig. 2a)",
        reported_value=1.0,
        deviation="small: vocabulary 8 instead of 128, sources of length 1–6 (test 7–12) "
                  "instead of 8–64 (test 65–128); the Stack-LSTM is pdanet's compiled "
                  "`GrefenstetteRNN` (its hidden size is the construction's, not 256/512; one "
                  "embedding for source and target symbols of the same name, not two); one "
                  "learning rate, a fixed number of epochs.",
        notes="the paper's protocol: joint sequences <s> w ||| w^R </s>, the next target "
              "symbol predicted after ||| and each teacher-forced target symbol; coarse: every "
              "target symbol and </s> right; fine: share of the target side (with </s>) right "
              "before the first error (§4.3). Lengths are the joint inputs' (2|w| + 2)."),
    Protocol(
        "grefenstette2015", "sequence_copy", "Grefenstette et al. (2015) §4.1, §4.3–4.4",
        "grefenstette_lstm", "coarse", "rmsprop",
        {  # as sequence_reversal (the same §4.1 sampling, §4.3 testing and §4.4 training)
            "paper": Size(_even(18, 130), _even(132, 258), 10_000, 1000, 16, 50, 10, 1e-3),
            "small": Size(_even(4, 14), _even(16, 26), 300, 100, 10, 15, 10, 1e-3,
                          {"vocab_size": 8})},
        task_params={"vocab_size": 128}, sample_params={"vocab_size": 128},
        target="grefenstette",
        reported="Queue-LSTM, testing coarse 1.00 / fine 1.00 (Table in §5, Fig. 2a)",
        reported_value=1.0,
        deviation="small: vocabulary 8 instead of 128, sources of length 1–6 (test 7–12) "
                  "instead of 8–64 (test 65–128); the Queue-LSTM is pdanet's compiled "
                  "`GrefenstetteRNN` with a neural queue (its hidden size is the construction's, "
                  "not 256/512); one learning rate, a fixed number of epochs.",
        notes="the paper's protocol: joint sequences <s> w ||| w </s> (see sequence_reversal); "
              "lengths are the joint inputs' (2|w| + 2)."),
    Protocol(
        "grefenstette2015", "bigram_flip", "Grefenstette et al. (2015) §4.1, §4.3–4.4",
        "grefenstette_lstm", "coarse", "rmsprop",
        # §4.1: even sources only, so joint lengths 2|w| + 2 step by 4
        {  # as sequence_reversal: sources 8–64 (test 66–128), even lengths
            "paper": Size(tuple(range(18, 131, 4)), tuple(range(134, 259, 4)), 10_000, 1000, 16,
                          50, 10, 1e-3),
            "small": Size((6, 10, 14), (18, 22, 26), 300, 100, 10, 15, 10, 1e-3,
                          {"vocab_size": 8})},
        task_params={"vocab_size": 128}, sample_params={"vocab_size": 128},
        target="grefenstette",
        reported="Queue-LSTM and DeQue-LSTM, testing coarse 1.00 / fine 1.00 (Table in §5, "
                 "Fig. 2a); §5's discussion reports models failing on the last two symbols",
        reported_value=1.0,
        deviation="small: vocabulary 8 instead of 128, sources of length 2–6 (test 8–12) "
                  "instead of 8–64 (test 65–128); the Queue-LSTM is pdanet's compiled "
                  "`GrefenstetteRNN` with a neural queue (its hidden size is the construction's, "
                  "not 256/512; the odd symbol is held in a register of the controller); one "
                  "learning rate, a fixed number of epochs.",
        notes="the paper's protocol: joint sequences <s> a1 a2 … ||| a2 a1 … </s> (see "
              "sequence_reversal); the machine is `protocol_machine('bigram_flip')` on a queue "
              "(the DeQue-LSTM's: size params {'store': 'deque'}); lengths are the joint "
              "inputs' (2|w| + 2, |w| even)."),
    Protocol(
        "hao2018", "reversal", "Hao et al. (2018) §5 (Experiment 1), Table 1",
        "hao_lstm", "masked_accuracy", "adam",
        {  # §5: 800 train / 100 dev / 1000 test, batch 10, mean length 10 (test 20)
            "paper": Size(_even(2, 38), _even(22, 58), 800, 100, 25, 50, 10, 1e-3),
            "small": Size(_even(2, 16), _even(18, 32), 300, 100, 10, 15, 10, 1e-2)},
        task_params={"alphabet": "01"}, sample_params={"alphabet": "01"}, mask="after_blank",
        reported="LSTM controller + stack, testing median 71.0 % (Table 1, Reversal)",
        reported_value=0.71,
        deviation="the linear controller (Table 1: 100 %) does not compile for reversal in "
                  "pdanet (it needs 4 controller states), so the LSTM controller row is the "
                  "comparison; the paper stops early after 5 epochs without improvement, here a "
                  "fixed number of epochs; the paper does not name its optimiser (Adam here).",
        notes="accuracy on the reversed half only (positions after a #)."),
    Protocol(
        "suzgun2019", "dyck2", "Suzgun et al. (2019) §4–5, Table 2",
        "suzgun_stack_rnn", "sequence_accuracy", "adam",
        {  # §5: 5000 words of lengths [2, 50], test [52, 100], p = 1/2, q = 1/4; §4: Adam, 3 epochs
            "paper": Size(_even(2, 50), _even(52, 100), 5000, 500, 100, 3, 10, 1e-3),
            "small": Size(_even(2, 20), _even(22, 40), 500, 100, 10, 5, 10, 1e-2)},
        sample_params={"grammar": True}, target="next_set",
        reported="Stack-RNN+Softmax, test median 100 %, mean 80.00 % (Table 2, D2)",
        reported_value=1.0,
        deviation="the paper gives no batch size (10 here); the empty prefix's set is scored "
                  "too (the paper predicts after each symbol).",
        notes="strings from the paper's PCFG conditioned on the drawn length; target: the set "
              "of symbols that may follow each prefix, with the end marker ⊣ (Table 1; the "
              "task's DPDA as `pdanet.models.suzgun.NextSetMachine`, compiled with "
              "readout='next_set'); a string is correct when every prefix's set is right "
              "(σ > 1/2 exactly on the set, §4.1)."),
    Protocol(
        "dusell2021", "marked_reversal", "DuSell & Chiang (2021) §4",
        "grefenstette_lstm", "sequence_accuracy", "adam",
        {  # §4: 10,000 train strings of lengths [40, 80], test 100 per length in [40, 100]
            "paper": Size(_even(41, 79), _even(41, 99), 10_000, 1000, 100, 200, 10, 5e-3),
            "small": Size(_even(5, 21), _even(23, 41), 300, 100, 6, 10, 10, 1e-2)},
        reported="Gref (LSTM + stratification stack) solves marked reversal; RNS-RNN within "
                 "0.05 nats of the true cross-entropy (§4 Results, Fig. 1–2)",
        deviation="the paper trains language models (cross-entropy minus the true entropy: "
                  "the protocol marked_reversal_lm); here the model labels every prefix "
                  "accept/reject and the metric is sequence accuracy — not comparable with the "
                  "paper's nats.",
        notes="palindromes w # w^R over {0, 1} from the task's PCFG."),
    Protocol(
        "hewitt2020", "dyck", "Hewitt et al. (2020) (blog: Dyck-(k, m) generation)",
        "lstm", "bracket_accuracy", "adam",
        {
            "paper": Size(_even(2, 100), _even(102, 200), 10_000, 1000, 20, 20, 32, 3e-3),
            "small": Size(_even(2, 20), _even(22, 40), 400, 100, 10, 10, 16, 1e-2)},
        task_params={"k": 2, "m": 3}, sample_params={"k": 2, "m": 3},
        reported="— (the blog post reports no training run)",
        deviation="the paper's sizes are pdanet's choice (only the blog post is at hand).",
        notes="next-symbol sets of Dyck-(2, 3); close-bracket accuracy (softmax over closes > "
              "0.8)."),
) + _LM_PROTOCOLS}


def papers() -> list[str]:
    """The papers with a protocol, sorted."""
    return sorted({p for p, _ in PROTOCOLS})


def protocol(paper: str, task: str | None = None) -> Protocol:
    """The protocol of `paper` on `task` (None: the paper's one task when it has one)."""
    mine = {t: p for (pp, t), p in PROTOCOLS.items() if pp == paper}
    if not mine:
        raise InputError(f"no protocol for paper {paper!r}; known papers: {', '.join(papers())}")
    if task is None:
        if len(mine) == 1:
            return next(iter(mine.values()))
        raise InputError(f"paper {paper!r} has protocols for {sorted(mine)}; name the task")
    if task not in mine:
        raise InputError(f"paper {paper!r} has no protocol for task {task!r}; its tasks: "
                         f"{', '.join(sorted(mine))}")
    return mine[task]


def with_size(p: Protocol, name: str, **changes) -> Protocol:
    """`p` with size `name` changed (``changes`` are `Size` fields) — e.g. tests shrink epochs."""
    sizes = dict(p.sizes)
    sizes[name] = replace(p.size(name), **changes)
    return replace(p, sizes=sizes)


__all__ = ["INITS", "LOWER_IS_BETTER", "METRICS", "OPTIMISERS", "PROTOCOLS", "SIZES", "Protocol", "Size", "papers",
           "protocol", "with_size"]

"""DuSell & Chiang's (2021, §4) language-model protocol: a model trained on strings sampled from
the task's PCFG, scored by *cross-entropy difference* — the model's per-symbol cross-entropy
minus the true distribution's, in nats, one EOS counted per string (their Eq. in §4,
H(S, p) = −Σ_w log p(w·EOS) / Σ_w (|w| + 1)).

Data. A length is drawn uniformly from the valid lengths of the size's training lengths (those
the grammar can produce), then a string from the PCFG given that length
(`pdanet.automata.tasks.sampling.grammar_sampler`), as §4 does; ``n_train`` training and
``n_valid`` validation strings so (seeded by the run's seed), and ``n_test_per_length`` test
strings of each valid test length (a fixed seed: the same test set for every run, as §4).

True distribution. The strings of a set drawn with lengths uniform over N valid lengths have
p(w) = p_G(w | |w|) / N = p_G(w) / P_G(|w|) / N (`pdanet.automata.tasks.probability`); p_G(w)
comes from the task's probabilistic PDA (`pdanet.constructions.ns_lm.dusell_lm_machine`,
compiled with the exact head in float64 — equal to the PCFG's inside probability) and P_G(n)
from the grammar's length table. The figure is H(S, model) − H(S, p) over the set (or over a
length bin of it). A second figure, ``ce_difference_pcfg``, subtracts the PCFG's own
cross-entropy H(S, p_G) instead: it is 0 for a model that is exactly the task's PCFG, which
knows no length prior — the paper's figure of such a model is the length-prior gap
−Σ_w [ln P_G(|w|) + ln N] / Σ_w (|w| + 1) (positive or negative).

Models (`LM_MODELS`; both the NS-RNN language model of `pdanet.constructions.ns_lm`, whose
action tensor is the embedding of the symbol read — no LSTM controller):

- ``"ns_lm"``: the paper's softmax output layer (§2.1) on the RNS reading; every parameter
  trains. ``init="compiled"``: `compile_ns_lm(machine, head="softmax")`; ``"random"``: every
  parameter from U(−0.05, 0.05) (the paper's stated initialisation, §5's appendix; for the CFL
  tasks §4 defers to DuSell & Chiang 2020, which is not at hand).
- ``"ns_lm_exact"``: the exact head p = r_t · P (``head="exact"``), only with
  ``init="compiled"``; the head stays fixed (its rows are the machine's probability table; moved
  freely they would stop summing to one and the "cross-entropy" could fall below the entropy)
  and the stack's action weights train. The output is renormalised over Σ ∪ {EOS}, which leaves
  the compiled network's probabilities unchanged.

``init="compiled+noise"`` is refused (`InputError`): `pdanet.learning.initialize` certifies no
weight tolerance for the NS-RNN language model.

Greibach's hardest CFL: the authors' grammar has weights that do not normalise, so its task
machine (`pdanet.automata.tasks.dusell2021.hardest_cfl_lm`) gives p(w) ∝ weight_G(w)·λ^|w|
(``length_weight`` λ, a size parameter) and the task's "PCFG" is that grammar renormalised:
p(w | |w|), all the figure uses, is the authors' for every λ; only ``ce_difference_pcfg``
depends on λ.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
from torch import nn

from pdanet.errors import InputError
from pdanet.experiments.protocols import Protocol, Size
from pdanet.experiments.training import fit, to_device

LM_MODELS = ("ns_lm", "ns_lm_exact")
#: the paper's "near-optimal" band (§4 Results: within 0.05 nats of the lower bound)
THRESHOLD_NATS = 0.05
#: the exact head's floor on a probability (ln 0 would give infinite gradients)
TINY = 1e-30
#: U(−a, a), the paper's random initialisation
INIT_RANGE = 0.05


class LMModel(nn.Module):
    """An `NSLMNet` whose output is renormalised: forward(ids (B, T), -1 padding) → ln p(next
    symbol | prefix) (B, T+1, |Σ|+1), EOS last, summing to one at every position."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        states, _ = self.net.ns(ids)
        if self.net.kind == "exact":     # p = r_t · P, floored so that ln and its gradient stay finite
            logp = torch.log((states @ self.net.head.weight.t()).clamp_min(TINY))
        else:
            logp = self.net.log_probs(states)
        return logp - torch.logsumexp(logp, dim=-1, keepdim=True)


def string_nll(logp: torch.Tensor, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """−ln p(w·EOS) per string (B,) from per-position log-probabilities (B, T+1, |Σ|+1)
    (differentiable)."""
    B, n = ids.shape
    steps = torch.gather(logp[:, :n], 2, ids.clamp_min(0)[..., None])[..., 0]
    mask = torch.arange(n)[None, :] < lengths[:, None]
    total = torch.where(mask, steps, torch.zeros_like(steps)).sum(dim=1)
    return -(total + logp[torch.arange(B), lengths, -1])


def lm_task(p: Protocol, size: Size):
    """(probabilistic PDA, PCFG) of the protocol's task at `size` (its ``params`` go to the
    grammar)."""
    from pdanet.constructions.ns_lm import dusell_lm_machine

    return dusell_lm_machine(p.lm, **{**p.task_params, **size.params})


def _valid_lengths(g, lengths, what: str) -> list[int]:
    table = g.length_table(max(lengths), weighted=True)
    ok = [n for n in lengths if math.isfinite(float(table.total(n)))]
    if not ok:
        raise InputError(f"the grammar {g.name!r} has no string of any {what} length "
                         f"{sorted(lengths)}; choose other lengths")
    return ok


class LMSet:
    """One set of strings: ``ids`` (B, T), ``lengths`` (B,), ``true_logp`` (the paper's true
    distribution, module docstring) and ``pcfg_logp`` (ln p_G(w)), float64, per string."""

    def __init__(self, strings, net, g, num_lengths: int):
        from pdanet.constructions.ns_lm import string_log_probs

        self.strings = list(strings)
        ids, lengths = net.encode(self.strings)
        self.ids = torch.as_tensor(ids)
        self.lengths = torch.as_tensor(np.asarray(lengths), dtype=torch.long)
        self.pcfg_logp = string_log_probs(net, self.strings)
        table = g.length_table(int(self.lengths.max()), weighted=True)
        log_len = np.array([float(table.total(len(s))) for s in self.strings])
        self.true_logp = self.pcfg_logp - log_len - math.log(num_lengths)
        if not np.all(np.isfinite(self.true_logp)):
            raise InputError("a sampled string has probability 0 under the task's PDA (the "
                             "exact network's dead-prefix threshold); use shorter lengths")

    def __len__(self) -> int:
        return len(self.strings)


def lm_datasets(p: Protocol, size: Size, seed: int) -> tuple[dict[str, LMSet], Any, Any]:
    """(``{"train", "valid", "test"}`` → `LMSet`, machine, grammar) — see the module
    docstring."""
    from pdanet.automata.tasks.sampling import grammar_sampler
    from pdanet.constructions.ns_lm import compile_ns_lm

    machine, g = lm_task(p, size)
    exact = compile_ns_lm(machine, dtype=torch.float64)
    train_l = _valid_lengths(g, size.train_lengths, "training")
    test_l = _valid_lengths(g, size.test_lengths, "test")
    rng = np.random.default_rng(seed)
    train = grammar_sampler(g, size.n_train, train_l, rng)
    valid = grammar_sampler(g, size.n_valid, train_l, rng)
    trng = np.random.default_rng(10_007)
    test = [s for n in test_l for s in grammar_sampler(g, size.n_test_per_length, [n], trng)]
    sets = {"train": LMSet(train, exact, g, len(train_l)),
            "valid": LMSet(valid, exact, g, len(train_l)),
            "test": LMSet(test, exact, g, len(test_l))}
    return sets, machine, g


def build_lm(machine, model: str, init: str, noise: float = 0.0, seed: int = 0
             ) -> tuple[LMModel, Any]:
    """(trainable `LMModel`, its compiled network) for `model` and `init` (module docstring)."""
    from pdanet.constructions.ns_lm import compile_ns_lm

    if model not in LM_MODELS:
        raise InputError(f"the language-model protocol takes model one of {LM_MODELS}, got "
                         f"{model!r}")
    if init == "compiled+noise" or noise:
        raise InputError("init='compiled+noise' is not available for the NS-RNN language model: "
                         "pdanet.learning.initialize certifies no weight tolerance for NSLMNet; "
                         "use init='compiled' or 'random'")
    if init not in ("random", "compiled"):
        raise InputError(f"init must be 'random' or 'compiled', got {init!r}")
    head = "exact" if model == "ns_lm_exact" else "softmax"
    if head == "exact" and init == "random":
        raise InputError("model 'ns_lm_exact' is the machine's probability table as a head; it "
                         "has no random initialisation — use model 'ns_lm' for init='random'")
    net = compile_ns_lm(machine, head=head)
    module = LMModel(net.module).float()
    if init == "random":
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for prm in module.parameters():
                prm.copy_(torch.rand(prm.shape, generator=gen, dtype=prm.dtype)
                          * (2 * INIT_RANGE) - INIT_RANGE)
    if head == "exact":
        module.net.head.weight.requires_grad_(False)
    return module.train(), net


@torch.no_grad()
def model_nll(model: nn.Module, data: LMSet, batch_size: int = 64) -> np.ndarray:
    """−ln p_model(w·EOS) per string (float64), eval mode (then restored)."""
    was = model.training
    model.eval()
    dev = next(model.parameters()).device
    try:
        out = [string_nll(model(data.ids[i:i + batch_size].to(dev)).double().cpu(),
                          data.ids[i:i + batch_size], data.lengths[i:i + batch_size])
               for i in range(0, len(data), batch_size)]
    finally:
        model.train(was)
    return torch.cat(out).numpy()


def ce_difference(nll: np.ndarray, data: LMSet, rows: Any = None, pcfg: bool = False) -> float:
    """H(S, model) − H(S, true) in nats per symbol over the strings `rows` (default: all);
    ``pcfg=True`` subtracts the PCFG's H(S, p_G) instead (module docstring)."""
    rows = np.arange(len(data)) if rows is None else np.asarray(rows)
    if len(rows) == 0:
        raise InputError("no strings to score")
    ref = data.pcfg_logp if pcfg else data.true_logp
    symbols = float((data.lengths.numpy()[rows] + 1).sum())
    return float((nll[rows].sum() + ref[rows].sum()) / symbols)


def lm_by_length(parts: dict[str, tuple[LMSet, np.ndarray]], train_max: int,
                 max_bins: int = 10) -> list[dict[str, Any]]:
    """CE difference per length bin over the strings of every part (``name -> (set, nll)``):
    rows ``lo, hi, n, metric, ce_difference_pcfg, model_ce, beyond_training``."""
    from pdanet.experiments.evaluation import length_bins

    lens = np.concatenate([d.lengths.numpy() for d, _ in parts.values()])
    out = []
    for lo, hi in length_bins(lens, max_bins):
        nll = ref = ref_g = 0.0
        symbols = n = 0
        for data, z in parts.values():
            ln = data.lengths.numpy()
            idx = np.nonzero((ln >= lo) & (ln <= hi))[0]
            nll += float(z[idx].sum())
            ref += float(-data.true_logp[idx].sum())
            ref_g += float(-data.pcfg_logp[idx].sum())
            symbols += int((ln[idx] + 1).sum())
            n += len(idx)
        out.append({"lo": lo, "hi": hi, "n": n, "metric": (nll - ref) / symbols,
                    "ce_difference_pcfg": (nll - ref_g) / symbols, "model_ce": nll / symbols,
                    "beyond_training": lo > train_max})
    return out


def _first_within(curve: list[dict[str, Any]], key: str) -> int | None:
    for row in curve:
        if row[key] <= THRESHOLD_NATS:
            return int(row["examples"])
    return None


def run_lm(p: Protocol, sz: Size, size: str, model: str, init: str, noise: float, seed: int,
           progress: bool, overrides: dict[str, Any] | None, dev: torch.device, rid: str,
           versions: dict[str, str]) -> dict[str, Any]:
    """The record of one language-model run (same schema as `run_experiment`'s; the metric is
    ``ce_difference``, lower is better; ``final`` holds ``examples_to_valid_0.05`` — training
    examples until the validation CE difference first fell to ≤ 0.05 nats); ``versions`` goes
    into the record as given."""
    start = time.perf_counter()
    data, machine, _ = lm_datasets(p, sz, seed)
    torch.manual_seed(seed)
    learner, net = build_lm(machine, model, init, noise, seed)
    learner = to_device(learner, dev, dev)
    config = {
        "paper": p.paper, "task": p.task, "model": model, "init": init, "noise": float(noise),
        "seed": seed, "size": size, "metric": p.metric, "optimiser": p.optimiser,
        "clip": p.clip, "target": "lm_eos", "mask": None, "lm_task": p.lm,
        "task_params": {**p.task_params, **sz.params}, "sample_params": {},
        **{k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(sz).items()
           if k != "params"},
        "overrides": dict(overrides or {}), "device": str(dev),
    }

    def score(name: str) -> tuple[float, np.ndarray]:
        z = model_nll(learner, data[name])
        return ce_difference(z, data[name]), z

    train_max = max(sz.train_lengths)
    valid0, zv0 = score("valid")
    test0, zt0 = score("test")
    before = lm_by_length({"valid": (data["valid"], zv0), "test": (data["test"], zt0)},
                          train_max)
    curve = [{"epoch": 0, "steps": 0, "examples": 0, "loss": None, "valid": valid0,
              "test": test0, "seconds": 0.0}]
    _train(learner, p, sz, data["train"], seed, curve, score, progress, rid)
    valid, zv = score("valid")
    test, zt = score("test")
    final = {"valid": valid, "test": test, "test_before": test0, "valid_before": valid0,
             "examples_to_valid_0.05": _first_within(curve, "valid"),
             "examples_to_test_0.05": _first_within(curve, "test"),
             "valid_pcfg": ce_difference(zv, data["valid"], pcfg=True),
             "test_pcfg": ce_difference(zt, data["test"], pcfg=True),
             "test_pcfg_before": ce_difference(zt0, data["test"], pcfg=True),
             "valid_true_ce": float(-data["valid"].true_logp.sum()
                                    / (data["valid"].lengths + 1).sum().item()),
             "test_true_ce": float(-data["test"].true_logp.sum()
                                   / (data["test"].lengths + 1).sum().item())}
    return {
        "schema": 1, "id": rid, "config": config,
        "protocol": {"section": p.section, "reported": p.reported,
                     "reported_value": p.reported_value, "deviation": p.deviation,
                     "notes": p.notes},
        "network": {"hidden_units": int(net.hidden_units),
                    "parameters": int(sum(t.numel() for t in learner.parameters()
                                          if t.requires_grad)),
                    "machine": repr(machine)},
        "curve": curve, "final": final,
        "by_length": lm_by_length({"valid": (data["valid"], zv), "test": (data["test"], zt)},
                                  train_max),
        "by_length_before": before,
        "wall_time_s": time.perf_counter() - start,
        "versions": dict(versions),
        "plots": {},
    }


def _train(model: nn.Module, p: Protocol, sz: Size, train: LMSet, seed: int, curve: list,
           score, progress: bool, label: str) -> None:
    """``epochs`` passes over shuffled mini-batches, loss = per-symbol cross-entropy of the
    batch (§4's H), optimiser Adam or RMSProp, gradient norm clipped at ``p.clip``
    (`pdanet.experiments.training.fit`)."""
    gen = torch.Generator().manual_seed(seed)
    dev = next(model.parameters()).device

    def batches():
        order = torch.randperm(len(train), generator=gen)
        return (order[b * sz.batch_size:(b + 1) * sz.batch_size] for b in range(per_epoch))

    def batch_loss(idx: torch.Tensor) -> tuple[torch.Tensor, int]:
        lengths = train.lengths[idx]
        ids = train.ids[idx][:, :int(lengths.max())]
        nll = string_nll(model(ids.to(dev)).cpu(), ids, lengths)
        return nll.sum() / (lengths + 1).sum(), len(idx)

    per_epoch = math.ceil(len(train) / sz.batch_size)
    fit(model, p, sz, batches, per_epoch, batch_loss, curve, score, progress, label)


__all__ = [
    "INIT_RANGE",
    "LM_MODELS",
    "THRESHOLD_NATS",
    "LMModel",
    "LMSet",
    "build_lm",
    "ce_difference",
    "lm_by_length",
    "lm_datasets",
    "lm_task",
    "model_nll",
    "run_lm",
    "string_nll",
]

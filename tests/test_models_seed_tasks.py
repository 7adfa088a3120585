"""Every paper model × every seed task it applies to: compile → verify exhaustively → verify on
long strings (float32) → certify where a certificate family covers the model.

The models are read from `pdanet.constructions.table.MODELS` at collection, so a model added to
the table is checked here without editing this file; a task applies to a model when its machine
(default sizes) is an instance of one of the model's machine types and passes the model's
precondition ``requires_<model>`` (`benchmarks.bench_models.seed_pairs`).

- every pair, fast: every live prefix up to the longest length ≤ 10 with at most `FAST_PREFIXES`
  of them, and certify (or certify's typed refusal where no family covers the model) for
  controllers of at most `CERTIFY_UNITS` hidden units (the larger ones, up to an hour each for
  the 769-unit Hao controller at vocabulary 128, are certified by ``benchmarks/bench_models.py
  --part seed --certify-only``); a model
  whose controller at the task's default vocabulary (128) is over the resource limits must say so
  with a typed ResourceError, and is then checked at vocabulary `SMALL_VOCAB`;
- every pair, slow: every live prefix up to length 10 (shorter only where more than
  `SLOW_PREFIXES` live prefixes exist: large vocabularies);
- one task per model: `LONG_SAMPLES` busy strings of length 2,000 in float32 (the full sweep of
  1,000 strings per pair is ``benchmarks/bench_models.py --part seed``).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pdanet as pn
from benchmarks.bench_models import exhaustive_prefixes, long_task, seed_pairs
from pdanet.errors import CertificationError, InputError, ResourceError, VerificationError
from pdanet.verify.certify.dispatch import family
from pdanet.verify.strings import live_prefixes, long_strings

FAST_PREFIXES = 400
CERTIFY_UNITS = 64        # larger controllers: `bench_models.py --part seed --certify-only`
REFUSED = {"hao_buffered"}                 # several steps a symbol: pn.verify only
BOUNDED_LENGTH = {"dusell_chiang_ns", "dusell_chiang_ns_s"}
SLOW_PREFIXES = 5_000
SMALL_VOCAB = 4
LONG_SAMPLES = 32
LONG_LENGTH = 2000

PAIRS = seed_pairs()
MODEL_NAMES = tuple(dict.fromkeys(model for _, model, _ in PAIRS))
TARGET = {model: target for _, model, target in PAIRS}


@functools.cache
def _machine(task: str, vocab: int | None = None):
    return pn.tasks.get(task) if vocab is None else pn.tasks.get(task, vocab_size=vocab)


@functools.cache
def _net(task: str, model: str) -> tuple[int | None, object]:
    """(vocab, net): the model compiled for the task at its default size, or — where that is
    over the resource limits (a controller with one unit per (state, symbol, reading) at a
    vocabulary of 128) — after the typed ResourceError, at vocabulary `SMALL_VOCAB`."""
    try:
        return None, pn.compile(_machine(task), target=TARGET[model], method=model)
    except ResourceError as exc:
        if "smaller vocabulary" not in str(exc):     # a machine with no vocabulary to shrink
            pytest.skip(f"over the resource limits (typed ResourceError): {exc}")
    return SMALL_VOCAB, pn.compile(_machine(task, SMALL_VOCAB), target=TARGET[model],
                                   method=model)


@functools.cache
def _prefixes(task: str, vocab: int | None, cap: int) -> tuple[int, np.ndarray]:
    return exhaustive_prefixes(_machine(task, vocab), cap)


def _check_exhaustive(task: str, model: str, cap: int) -> int:
    """Verify every live prefix up to the longest length n ≤ 10 with at most `cap` of them;
    returns n (n < 10 only where length n + 1 has more than `cap` live prefixes)."""
    vocab, net = _net(task, model)
    m = _machine(task, vocab)
    n, ids = _prefixes(task, vocab, cap)
    rep = pn.verify(m, net, strings=ids, max_length=None, samples=0, long_samples=0)
    assert rep.ok, (task, model, rep.counterexample)
    assert rep.strings_checked == len(ids) and rep.phases[0].complete
    assert {"state", "output"} <= set(rep.fields)
    if n < 10:
        with pytest.raises(VerificationError, match="max_strings"):
            live_prefixes(m, n + 1, cap)
    return n


def test_pairs_cover_every_model_and_the_seed_tasks():
    """Each model of the table with seed tasks appears, with the stack tasks where it holds a
    stack; the pairs are exactly those whose precondition holds."""
    from pdanet.constructions.table import MODELS

    tasks = {model: {t for t, mo, _ in PAIRS if mo == model} for model in MODEL_NAMES}
    from pdanet.automata.pda import DPDA

    # models that take unbounded pushdown machines (not the linear controller: one-state
    # machines; not the Baby-NTM: depth-bounded ones)
    stackers = [name for _, name, target, types, _ in MODELS if target == "stack_rnn"
                and DPDA in types and name != "hao_linear"]
    for model in stackers:
        assert {"dyck2", "parity"} <= tasks[model], model
    assert "hao_buffered" in MODEL_NAMES and "dyck2" not in tasks["hao_buffered"]
    assert len(PAIRS) == len(set(PAIRS))


@pytest.mark.parametrize("task, model, target", PAIRS, ids=[f"{m}-{t}" for t, m, _ in PAIRS])
def test_compile_verify_certify(task, model, target):
    vocab, net = _net(task, model)
    assert net.method == model and net.target == target
    assert net.hidden_units <= net.bound_value
    _check_exhaustive(task, model, FAST_PREFIXES)
    m = _machine(task, vocab)
    try:
        family(net)
    except CertificationError:              # no family covers this model: certify says so
        with pytest.raises(CertificationError, match="verify"):
            pn.certify(m, net)
        return
    if model in REFUSED:                    # its family's certificate does not cover it
        with pytest.raises(CertificationError, match="verify"):
            pn.certify(m, net)
    elif net.hidden_units <= CERTIFY_UNITS:
        cert = pn.certify(m, net)
        assert cert.ok, (task, model, cert.failing)
        if not cert.all_lengths:            # the NS and NS+S charts: a stated length
            assert model in BOUNDED_LENGTH and cert.max_length >= 500, (task, model, cert)


@pytest.mark.slow
@pytest.mark.parametrize("task, model, target", PAIRS, ids=[f"{m}-{t}" for t, m, _ in PAIRS])
def test_exhaustive_to_length_10(task, model, target):
    n = _check_exhaustive(task, model, SLOW_PREFIXES)
    assert n >= 1, (task, n)


@functools.cache
def _long_ids(task: str, samples: int = LONG_SAMPLES, length: int = LONG_LENGTH) -> np.ndarray:
    """`samples` busy live strings of `length` symbols (what verify's long phase draws), drawn
    once per task so that every model of the task checks the same ones."""
    ids, _ = long_strings(_machine(task), samples, length, np.random.default_rng(11))
    return ids


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_long_strings_float32(model):
    """One task per model: `LONG_SAMPLES` busy strings of length 2,000, float32 (DuSell &
    Chiang's models too: verify runs them with the stack as symbol ids, O(1) a step, where
    their O(T³) forward could not)."""
    task = long_task(model, PAIRS)
    vocab, net = _net(task, model)
    assert vocab is None
    samples = LONG_SAMPLES
    m, ids = _machine(task), _long_ids(task)
    rep = pn.verify(m, net, strings=ids, max_length=None, samples=0, long_samples=0,
                    dtype="float32")
    assert rep.ok, (task, model, rep.counterexample)
    assert rep.strings_checked == samples and rep.dtype == "float32"
    assert (ids >= 0).sum() == samples * LONG_LENGTH              # every string is long


def test_exhaustive_prefixes_rejects_and_caps():
    m = _machine("dyck2")
    n, ids = exhaustive_prefixes(m, 100)
    assert n == 4 and len(ids) == 73                # 1 + 2 + 6 + 16 + 48 prefixes
    assert ((ids >= 0).sum(1) <= 4).all() and len({tuple(r) for r in ids}) == len(ids)
    with pytest.raises(InputError):
        exhaustive_prefixes(m, 100, max_length=-1)

"""Memory of compiling and running the stack-RNN models: the per-position estimate every
compile records (``info["position_bytes"]``), `pdanet.limits.positions_per_call` sizing a
network call to ``max_bytes`` (ResourceError before allocating when one string cannot fit), the
decoders reading states in bounded chunks, and the typed refusal of a controller that would not
fit."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import realtime_dpda

import pdanet as pn
from pdanet import limits
from pdanet.constructions import controllers
from pdanet.constructions.table import MODELS, TABLE
from pdanet.errors import CompileError, InputError, ResourceError
from pdanet.models import grefenstette, suzgun

STACK_TARGETS = ("stack_rnn", "buffered_stack_rnn")
PAPER_MODELS = {name for _, name, target, _, _ in MODELS if target in STACK_TARGETS}


# --- the estimate ----------------------------------------------------------------------------
def test_position_bytes_formula_and_typed_errors():
    assert limits.position_bytes(0, "rnn") == limits.PER_POSITION
    assert limits.position_bytes(10, "lstm", 3) == 480 + 48 + limits.PER_POSITION
    assert limits.position_bytes(10, "rnn", 3) == 320 + 48 + limits.PER_POSITION
    with pytest.raises(InputError, match="cell"):
        limits.position_bytes(3, "gru")
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(InputError, match="hidden_units"):
            limits.position_bytes(bad, "rnn")
        with pytest.raises(InputError, match="width"):
            limits.position_bytes(3, "rnn", bad)


def _fake(per: int | None, units: int = 100):
    info = {} if per is None else {"position_bytes": per}
    return SimpleNamespace(info=info, hidden_units=units, construction="stack_rnn/fake")


@settings(max_examples=40, deadline=None)
@given(per=st.integers(1, 10_000), requested=st.integers(1, 1 << 22),
       longest=st.integers(1, 5_000), budget=st.integers(1 << 10, 1 << 30),
       wide=st.sampled_from([2, 4, 8]))
def test_positions_per_call_fits_the_limit(per, requested, longest, budget, wide):
    """The answer is the largest count ≤ requested (but ≥ one row) whose estimate fits, or a
    ResourceError exactly when one row of `longest` positions alone exceeds the limit."""
    net = _fake(per)
    each = per * max(wide, 4) // 4
    with limits.raised(max_bytes=budget):
        if each * longest > budget:
            with pytest.raises(ResourceError, match="hidden units"):
                limits.positions_per_call(net, requested, longest, wide)
            return
        n = limits.positions_per_call(net, requested, longest, wide)
    assert n >= longest
    assert n <= max(requested, longest)
    assert n == longest or n * each <= budget
    assert n == requested or (n + 1) * each > budget or n == longest


def test_positions_per_call_without_estimate_and_bad_input():
    assert limits.positions_per_call(_fake(None), 12345, 10) == 12345
    assert limits.run_bytes(_fake(None)) is None
    assert limits.run_bytes(object()) is None
    assert limits.run_bytes(_fake(100), 8) == 200
    assert limits.run_bytes(_fake(100), 2) == 100
    with pytest.raises(InputError, match="dtype_bytes"):
        limits.run_bytes(_fake(100), 3)
    for name, args in (("requested", (0, 5)), ("longest", (5, 0)), ("requested", (True, 5))):
        with pytest.raises(InputError, match=name):
            limits.positions_per_call(_fake(100), *args)


def test_refusal_names_the_size_and_what_to_do():
    with limits.raised(max_bytes=1 << 20), pytest.raises(ResourceError) as exc:
        limits.positions_per_call(_fake(40_000, 769), 1 << 21, 2001)
    text = str(exc.value)
    for part in ("769 hidden units", "2,000 symbols", "76.3 MB", "limit 1.0 MB",
                 "PDANET_MAX_BYTES", "fewer hidden units"):
        assert part in text, (part, text)


# --- every paper model records its estimate --------------------------------------------------
def _entries():
    seen = []
    for e in TABLE:
        if (e.method in PAPER_MODELS
                or (e.target == "stack_rnn" and e.method in controllers.MEMORIES)):
            seen.append(pytest.param(e, id=f"{e.method}-{e.machine_type.__name__}"))
    return seen


@pytest.mark.parametrize("entry", _entries())
def test_compiles_record_an_estimate_at_least_the_states(entry):
    """The estimate covers at least the states tensor a forward call returns per position (the
    part that no implementation can avoid holding) and grows with the hidden units."""
    machine = entry.example()
    if entry.refusal(machine) is not None:
        pytest.skip("the entry's example is refused")
    net = entry.build(machine, torch.float32, {})
    per = net.info.get("position_bytes")
    assert isinstance(per, int), entry
    assert per >= 32 * net.hidden_units
    ids = torch.as_tensor(np.zeros((2, 5), dtype=np.int64))
    states = net.module(ids)[0]
    assert per >= states.element_size() * states.shape[-1]
    assert limits.positions_per_call(net, 1 << 21, 6) <= limits.current().max_bytes // per + 6


# --- the estimate bounds a measured run --------------------------------------------------------
_MEASURE = """
import json, resource, sys
import numpy as np
import pdanet as pn
model, n, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = pn.tasks.get("sequence_reversal", vocab_size=16)
net = pn.compile(m, target="stack_rnn", model=model)
ids, _ = pn.tasks.long_strings("sequence_reversal", n + 2, length, np.random.default_rng(0),
                               vocab_size=16)
pn.verify(m, net, strings=ids[:2, :20], max_length=None, samples=0, long_samples=0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rep = pn.verify(m, net, strings=ids[2:], max_length=None, samples=0, long_samples=0,
                dtype="float32", max_batch_steps=1 << 30)
grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps({"ok": rep.ok, "grew": grew, "positions": n * (length + 1),
                  "per": net.info["position_bytes"], "units": net.hidden_units}))
"""


def test_estimate_bounds_the_measured_growth():
    """In a fresh process, one verify call on 24 strings of length 800 (about 19k positions)
    grows the peak resident set by less than the estimate says (sequence reversal, |V| = 16, Hao
    et al.'s LSTM controller: the largest measured bytes per unit)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, "hao_lstm", "24", "800"], check=True,
                         capture_output=True, text=True, timeout=120,
                         env={"OMP_NUM_THREADS": "1", "PATH": ""})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ok"]
    assert got["grew"] <= got["per"] * got["positions"], got


# --- verify sized by the estimate --------------------------------------------------------------
def test_verify_in_calls_sized_by_the_estimate():
    """A budget of a few rows: positions_per_call splits the check into many calls and the run
    still agrees with the machine; below one row it refuses before allocating."""
    m = pn.tasks.get("sequence_reversal", vocab_size=8)
    net = pn.compile(m, target="stack_rnn", model="hao_lstm")
    ids, _ = pn.tasks.long_strings("sequence_reversal", 24, 120, np.random.default_rng(1),
                                   vocab_size=8)
    longest = ids.shape[1] + 1
    per = limits.run_bytes(net)
    with limits.raised(max_bytes=per * longest * 3):
        steps = limits.positions_per_call(net, 1 << 21, longest)
        assert longest <= steps < 4 * longest
        rep = pn.verify(m, net, strings=ids, max_length=None, samples=0, long_samples=0,
                        dtype="float32", max_batch_steps=steps)
    assert rep.ok and rep.strings_checked == len(ids)
    with limits.raised(max_bytes=per * longest - 1), pytest.raises(ResourceError):
        limits.positions_per_call(net, 1 << 21, longest)


# --- the decoders read states in chunks ---------------------------------------------------------
def _argmax_reference(states, H, c_of_unit):
    h = np.nan_to_num(np.asarray(states[..., :H], dtype=np.float64), nan=-np.inf)
    j = h.argmax(-1)
    return np.where(np.take_along_axis(h, j[..., None], -1)[..., 0] > 0, c_of_unit[j], -1)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), B=st.integers(1, 4), T=st.integers(1, 6), H=st.integers(1, 7),
       extra=st.integers(0, 3), chunk=st.integers(1, 40))
def test_active_units_in_chunks_equal_the_whole(data, B, T, H, extra, chunk):
    values = st.sampled_from([-1.0, -0.5, 0.0, 0.25, 1.0, float("nan")])
    flat = data.draw(st.lists(values, min_size=B * T * (H + extra), max_size=B * T * (H + extra)))
    states = np.array(flat, dtype=np.float32).reshape(B, T, H + extra)
    c_of_unit = np.array(data.draw(st.lists(st.integers(0, 5), min_size=H, max_size=H)))
    old = controllers.DECODE_CHUNK
    controllers.DECODE_CHUNK = chunk
    try:
        got = controllers.active_units(states, H, c_of_unit)
    finally:
        controllers.DECODE_CHUNK = old
    np.testing.assert_array_equal(got, _argmax_reference(states, H, c_of_unit))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), B=st.integers(1, 3), T=st.integers(1, 5), H=st.integers(1, 6),
       C=st.integers(1, 5))
def test_suzgun_active_unit_equals_the_matrix_product(data, B, T, H, C):
    states = np.array(data.draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=B * T * H,
                                         max_size=B * T * H)), dtype=np.float32).reshape(B, T, H)
    rows = data.draw(st.lists(st.integers(0, C - 1), min_size=H, max_size=H))
    target = np.eye(C, dtype=np.float32)[rows]
    hits = (states > 0).astype(np.float32) @ target
    want = np.where(hits.max(-1) > 0.5, hits.argmax(-1), -1)
    np.testing.assert_array_equal(suzgun._active_unit(states, target), want)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine=partial(realtime_dpda, max_states=3, empty_stack=False)(),
       model=st.sampled_from(["hao_lstm", "joulin_mikolov_stack_rnn", "suzgun_stack_rnn"]))
def test_random_dpdas_verify_with_chunked_decoding(machine, model):
    """Brute force: every string of length ≤ 6 over a random real-time DPDA, checked in calls of
    about two rows each and decoded two positions at a time, agrees with the machine."""
    try:
        net = pn.compile(machine, target="stack_rnn", model=model)
    except CompileError:                # a model that refuses the machine says so, typed
        assume(False)
    per = limits.run_bytes(net)
    old = controllers.DECODE_CHUNK
    controllers.DECODE_CHUNK = 2 * max(net.hidden_units, 1)
    with limits.raised(max_bytes=per * 14):
        steps = limits.positions_per_call(net, 1 << 21, 7)
    try:
        rep = pn.verify(machine, net, max_length=6, samples=0, long_samples=0,
                        max_batch_steps=steps)
    finally:
        controllers.DECODE_CHUNK = old
    assert steps == 14
    assert rep.ok, rep.counterexample
    assert rep.strings_checked > 0


# --- a controller that would not fit is refused before it is built -------------------------------
def test_suzgun_refuses_a_large_vocabulary_reversal_fast_naming_a_model_that_fits():
    """At |V| = 64 Suzgun's controller would hold one unit per (mode, symbol, top): refused from
    the estimate (no weight built), naming the units, the memory and the models that factor."""
    m = pn.tasks.get("sequence_reversal", vocab_size=64)
    t0 = time.perf_counter()
    with pytest.raises(ResourceError) as exc:
        pn.compile(m, target="stack_rnn", model="suzgun_stack_rnn")
    assert time.perf_counter() - t0 < 20
    text = str(exc.value)
    assert "8,513 hidden units" in text and "GB of memory" in text
    assert "grefenstette_lstm" in text
    assert grefenstette.estimate(m)["hidden_units"] < 64


@pytest.mark.parametrize("model", ["hao_lstm", "joulin_mikolov_stack_rnn", None])
def test_unit_controllers_over_the_limit_name_the_factoring_model(model):
    """Hao's, Joulin–Mikolov's and the Elman stack-RNN controllers (one unit per acting
    transition) refuse a machine over ``max_units`` before building weights, naming the size
    and the Grefenstette models, which factor copied symbols and fit."""
    m = pn.tasks.get("sequence_reversal", vocab_size=8)
    big = pn.compile(m, target="stack_rnn", model=model).hidden_units
    small = pn.compile(m, target="stack_rnn", model="grefenstette_lstm").hidden_units
    assert small == grefenstette.estimate(m)["hidden_units"] < big
    with limits.raised(max_units=small):
        with pytest.raises(ResourceError) as exc:
            pn.compile(m, target="stack_rnn", model=model)
        assert f"{big:,} hidden units" in str(exc.value)
        assert "grefenstette_lstm" in str(exc.value)
        pn.compile(m, target="stack_rnn", model="grefenstette_lstm")      # the named model fits

"""`pn.verify` on a DuSell & Chiang network whose actions left the exactly one-hot regime (as
after training or noise): always a report, never a ResourceError. Strings where the symbol-id
run stops are run through the full model (Eqs. 1–5) within a memory and time budget
(`DuSellChiangRNN.forward_bounded`); the report gives the first disagreement found there, or
says which steps were left unchecked and what the full model would need for them."""

import numpy as np
import pytest
import strategies
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet import limits
from pdanet.errors import InputError
from pdanet.models import dusell_chiang as dc
from pdanet.verify import strings as S

COMPILERS = {"ns": dc.compile_dusell_chiang_ns, "ns_s": dc.compile_dusell_chiang_ns_s,
             "ns_u": dc.compile_dusell_chiang_ns_u, "rns": dc.compile_dusell_chiang_rns}
SMALL_BUDGET = 3 * 10**7         # operations of the full model a batch (keeps the tests short)


def _perturb(net, shrink: float, sigma: float, seed: int = 0):
    """The action head scaled by ``shrink`` (soft actions, as a trained network has), then
    Gaussian noise of standard deviation sigma·β on every parameter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        net.module.actions.weight.mul_(shrink)
        net.module.actions.bias.mul_(shrink)
        for p in net.module.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * (sigma * dc.BETA))
    net.module.full_run_work = SMALL_BUDGET
    return net


def _disagreements(machine, net, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(B, T+1) bool: positions t ≤ length where the full model (`forward`, Eqs. 1–5 on the
    whole batch) decodes differently from the machine, on the fields both sides have."""
    with torch.no_grad():
        states, logits = net.module(torch.as_tensor(ids))
    got = net.decode(states)
    got["output"] = net.readout(logits)
    want = machine.run_batch(ids, lengths).fields
    T1 = ids.shape[1] + 1
    bad = np.zeros((len(ids), T1), dtype=bool)
    for k in [k for k in want if k in got and k != "output"] + ["output"]:
        e, g_ = np.asarray(want[k]), np.asarray(got[k])
        diff = e != g_
        bad |= diff.reshape(len(ids), T1, -1).any(-1)
    return bad & (np.arange(T1)[None, :] <= lengths[:, None])


def _exhaustive_ids(machine, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every live prefix of length ≤ n in verify's order (shortlex), padded with −1."""
    levels = S.live_prefixes(machine, n)
    ids = np.full((sum(len(x) for x in levels), max(n, 1)), -1, dtype=np.int64)
    lengths = np.concatenate([np.full(len(x), k, dtype=np.int64) for k, x in enumerate(levels)])
    row = 0
    for k, x in enumerate(levels):
        ids[row:row + len(x), :k] = x
        row += len(x)
    return ids, lengths


def _out_of_regime(net, ids) -> bool:
    return net.module._discrete(torch.as_tensor(ids), None) is None


# --- the verdict against a brute-force run of the full model ----------------------------------
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine=strategies.realtime_dpda(max_states=3), variant=st.sampled_from(sorted(COMPILERS)),
       shrink=st.sampled_from([1.0, 0.01, 0.004, 0.002]),
       sigma=st.sampled_from([0.0, 1e-4, 1e-3, 0.3]), seed=st.integers(0, 10**6))
def test_verdict_equals_the_full_models_on_every_short_string(machine, variant, shrink, sigma,
                                                               seed):
    """Every live prefix of length ≤ 5: the report is ok exactly when the full model agrees
    with the machine at every step, and its counterexample is the first disagreement in
    shortlex order (string, step), a real one."""
    net = _perturb(COMPILERS[variant](machine), shrink, sigma, seed)
    rep = pn.verify(machine, net, max_length=5, samples=0, long_samples=0)
    ids, lengths = _exhaustive_ids(machine, 5)
    bad = _disagreements(machine, net, ids, lengths)
    assert rep.unchecked_steps == 0                    # short strings: the budget suffices
    assert rep.ok == (not bad.any()), rep
    if bad.any():
        b = int(np.flatnonzero(bad.any(1))[0])
        t = int(np.flatnonzero(bad[b])[0])
        cex = rep.counterexample
        assert cex.string == machine.alphabet.decode(ids[b, :lengths[b]])
        assert cex.step == t and cex.expected != cex.got
    if rep.coverage is not None:                       # the full model was used
        assert rep.coverage.full_steps > 0 and _out_of_regime(net, ids)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine=strategies.realtime_dpda(max_states=3), variant=st.sampled_from(sorted(COMPILERS)),
       shrink=st.sampled_from([1.0, 0.01, 0.003]), sigma=st.sampled_from([0.0, 1e-4, 0.3]),
       work=st.sampled_from([10**4, 10**6, 10**8]), seed=st.integers(0, 10**6))
def test_forward_bounded_is_forward_where_it_says(machine, variant, shrink, sigma, work, seed):
    """At every position t ≤ checked[b] the bounded run's states and logits are `forward`'s
    (and decode alike); rows are run by the full model in batch order while the budget lasts,
    and what is left says what it would need."""
    net = _perturb(COMPILERS[variant](machine), shrink, sigma, seed)
    mod = net.module
    ids, lens = S.random_live_strings(machine, 6, (0, 12), np.random.default_rng(seed))
    if ids.shape[1] == 0:
        return
    x = torch.as_tensor(ids)
    run = mod.forward_bounded(x, max_work=work)
    with torch.no_grad():
        states, logits = mod(x)
    assert np.array_equal(run.lengths, lens)
    assert (run.exact <= run.checked).all() and (run.checked <= lens).all()
    nbytes, cost = mod._chart_costs(ids.shape[1], mod.actions.weight.element_size())
    for b in range(len(ids)):
        c = int(run.checked[b])
        assert torch.allclose(run.states[b, :c + 1], states[b, :c + 1], atol=1e-5)
        assert torch.allclose(run.logits[b, :c + 1], logits[b, :c + 1], atol=1e-4)
        if c < lens[b]:
            assert run.needed_bytes[b] == int(nbytes[lens[b]]) and run.reason
            assert run.needed_work[b] == cost[lens[b]] > 0
        else:
            assert run.needed_bytes[b] == 0
    short = run.checked < lens
    ran = np.flatnonzero(run.full)
    spent = cost[run.checked[ran]].sum()
    assert spent <= work or (len(ran) == 1 and run.checked[ran[0]] == 1)   # the budget holds
    if len(ran):        # the full model runs on the first rows that need it, in order
        need = np.flatnonzero(run.exact < np.minimum(lens, run.checked.max()))
        assert np.array_equal(ran, need[:len(ran)])
    assert bool(run.reason) == bool(short.any())


# --- long strings: a report in both regimes ----------------------------------------------------
@pytest.mark.parametrize("variant", ["ns", "rns"])
def test_soft_but_right_network_gets_an_incomplete_report(variant):
    """Actions no longer exactly one-hot (readings spread: max < 1) but every decision right:
    short strings pass through the full model; 2 busy Dyck-2 strings of length 2,000 are
    checked by it to the budget's prefix and the rest is reported as not checked, with the
    memory the full model would need — not ok, and no counterexample."""
    machine = pn.tasks.get("dyck2")
    net = _perturb(COMPILERS[variant](machine), 0.005, 2e-4)
    ids, lens = S.long_strings(machine, 2, 2000, np.random.default_rng(3))
    with torch.no_grad():
        r = net.module(torch.as_tensor(ids[:, :40]))[0][..., net.module.hidden:]
    assert float(r.amax(-1).min()) < 1.0                           # out of the one-hot regime
    assert net.module.forward_window(torch.as_tensor(ids[:, :50]), 3) is None
    short = pn.verify(machine, net, max_length=5, samples=0, long_samples=0)
    assert short.ok and 0 < short.coverage.full_steps <= short.steps_checked
    assert short.coverage.unchecked_steps == 0
    rep = pn.verify(machine, net, max_length=4, samples=0, long_samples=2, long_length=2000,
                    seed=3)
    assert rep.counterexample is None and not rep.ok
    cov = rep.coverage
    Q, N = net.module.num_states, net.module.num_stack
    assert cov.unchecked_strings == 2
    assert cov.needed_bytes == 2001 * 2001 * (Q * N) ** 2 * 4      # float32 chart, T = 2000
    assert cov.needed_bytes > limits.current().max_bytes or cov.reason
    long_phase = rep.phase("long")
    assert long_phase.strings == 2 and 2 < long_phase.steps < 2 * 2001   # beyond t = 0
    assert cov.unchecked_steps == 2 * 2001 - long_phase.steps
    assert cov.full_steps > long_phase.steps - 2 * 2       # the long prefixes: full model
    text = str(rep)
    assert "INCOMPLETE" in text and "not checked" in text and "would need" in text
    assert rep.to_dict()["coverage"]["unchecked_steps"] == cov.unchecked_steps
    # the checked prefixes agree with the machine under the full model (brute force)
    run = net.module.forward_bounded(torch.as_tensor(ids[:, :300]))   # the same budget's prefix
    c = int(run.checked.max())
    assert 0 < c < 300 and run.full.all() and (run.checked == c).all()   # one common prefix
    assert long_phase.steps == 2 * (c + 1)
    assert not _disagreements(machine, net, ids[:, :c], np.minimum(lens, c)).any()


@pytest.mark.parametrize("variant", ["ns", "rns"])
def test_wrong_network_gets_its_counterexample_on_long_strings(variant):
    """Noise that breaks decisions: on long strings only, the report's counterexample (a
    string of length 2,000, a step within the full model's prefix) is one where the network,
    re-run in full, disagrees with the machine on the reported field."""
    machine = pn.tasks.get("dyck2")
    net = _perturb(COMPILERS[variant](machine), 0.003, 2e-3, seed=1)
    ids, _ = S.long_strings(machine, 2, 2000, np.random.default_rng(4))
    assert _out_of_regime(net, ids)
    rep = pn.verify(machine, net, max_length=None, samples=0, long_samples=2, long_length=2000,
                    seed=4)
    assert not rep.ok
    cex = rep.counterexample
    assert cex.phase == "long" and len(cex.string) == 2000 and cex.expected != cex.got
    assert rep.coverage is not None and rep.coverage.full_steps > 0
    ids = machine.alphabet.encode(cex.string)[None, : max(cex.step, 1)]
    n = np.array([cex.step])
    bad = _disagreements(machine, net, ids, n)
    assert bad[0, cex.step] and not bad[0, :cex.step].any()
    with torch.no_grad():
        states, logits = net.module(torch.as_tensor(ids))
    got = net.decode(states) | {"output": net.readout(logits)}
    want = machine.run_batch(ids, n).fields
    assert np.any(np.asarray(got[cex.field])[0, cex.step]
                  != np.asarray(want[cex.field])[0, cex.step])


def test_non_finite_actions_still_give_a_report():
    """A NaN weight (log actions NaN from step 1): the full model cannot run either; the report
    says so (not ok, no counterexample, every symbol step unchecked)."""
    machine = pn.tasks.get("dyck2")
    net = dc.compile_dusell_chiang_rns(machine)
    with torch.no_grad():
        net.module.actions.bias[0] = float("nan")
    rep = pn.verify(machine, net, max_length=3, samples=0, long_samples=0)
    assert not rep.ok and rep.counterexample is None
    assert "not finite" in rep.coverage.reason
    assert rep.coverage.unchecked_steps + rep.steps_checked == sum(
        n + 1 for n, x in enumerate(S.live_prefixes(machine, 3)) for _ in range(len(x)))


# --- the exact path is unchanged --------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machine=strategies.realtime_dpda(max_states=3), variant=st.sampled_from(sorted(COMPILERS)),
       seed=st.integers(0, 10**6))
def test_compiled_network_is_checked_by_the_exact_run_alone(machine, variant, seed):
    """A compiled network: the bounded run is `forward_decoded`'s bit for bit, checked to every
    row's end without the full model, and verify's report has no coverage entry."""
    net = COMPILERS[variant](machine)
    ids, lens = S.random_live_strings(machine, 8, (0, 8), np.random.default_rng(seed))
    if ids.shape[1] == 0:
        return
    x = torch.as_tensor(ids)
    run = net.module.forward_bounded(x)
    states, logits = net.module.forward_decoded(x)
    assert torch.equal(run.states, states) and torch.equal(run.logits, logits)
    assert np.array_equal(run.checked, lens) and np.array_equal(run.exact, lens)
    assert not run.full.any() and run.reason == "" and not run.needed_bytes.any()
    rep = pn.verify(machine, net, max_length=4, samples=5, long_samples=0, seed=seed)
    assert rep.ok and rep.coverage is None and rep.unchecked_steps == 0


def test_forward_bounded_bad_input():
    net = dc.compile_dusell_chiang_rns(pn.tasks.get("dyck2"))
    x = torch.zeros(1, 3, dtype=torch.long)
    for bad in (0, -1, True, "1", float("nan")):
        with pytest.raises(InputError, match="max_bytes"):
            net.module.forward_bounded(x, max_bytes=bad)
        with pytest.raises(InputError, match="max_work"):
            net.module.forward_bounded(x, max_work=bad)
    with pytest.raises(InputError, match="batch, time"):
        net.module.forward_bounded(torch.zeros(3, dtype=torch.long))
    with pytest.raises(InputError, match="outside"):
        net.module.forward_bounded(torch.full((1, 2), 7))

"""All-lengths certificates for DuSell & Chiang's compiled models (NS, NS+S, NS+U, RNS):
`pdanet.verify.certify.dusell`."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import strategies
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.pda import DPDA
from pdanet.constructions.realtime import table
from pdanet.errors import CertificationError, InputError
from pdanet.models import dusell_chiang as dc
from pdanet.verify.certify import dusell
from pdanet.verify.certify.dispatch import family

VARIANTS = ("ns", "ns_s", "ns_u", "rns")
EXACT = ("ns_u", "rns")            # exp (§3.1): every other action weight exactly 0


def compile_(machine, variant, **kw):
    return getattr(dc, f"compile_dusell_chiang_{variant}")(machine, **kw)


@pytest.fixture(scope="module")
def nets():
    out = {}
    for task in ("dyck2", "marked_reversal", "even_pairs"):
        m = pn.tasks.get(task)
        for v in VARIANTS:
            out[task, v] = (m, compile_(m, v))
    return out


def _holds(cert, variant, live=True, least=500):
    assert cert.ok and cert.failing is None, str(cert)
    assert cert.configs > 0 and cert.readout_margin > 0
    assert cert.cases > 0 or not live
    if variant in EXACT:
        assert cert.all_lengths and cert.max_length is None
    else:       # Eq. 1 leaves unoccupied rows nonzero: a length bound (Lemma 2)
        assert not cert.all_lengths and cert.max_length >= least
        assert any("Lemma 2" in n for n in cert.notes)


@pytest.mark.parametrize("task", ["dyck2", "marked_reversal", "even_pairs"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_seed_tasks_certified_and_verified(nets, task, variant):
    m, net = nets[task, variant]
    assert family(net) == "dusell"
    cert = pn.certify(m, net)
    _holds(cert, variant)
    assert cert.dtype == "float32" and cert.kernel == "ulp"
    rep = pn.verify(m, net, max_length=4, samples=300, long_samples=0)
    assert rep.ok, rep


@pytest.mark.parametrize("variant", ["ns_s", "rns"])
def test_float64(variant):
    m = pn.tasks.get("dyck2")
    net = compile_(m, variant, dtype=torch.float64)
    cert = pn.certify(m, net)
    _holds(cert, variant)
    assert cert.dtype == "float64"
    assert any("assumed for float64" in n for n in cert.notes)
    if variant == "ns_s":      # the rounding term shrinks with u: a much longer bound
        assert cert.max_length > 10**6


def _readings_one_hot(machine, net, n):
    """Brute force over every string of length ``n``: on live prefixes the module's own chart
    (`run`, Eqs. 2–5) reads exactly a one-hot vector (Lemma 2)."""
    K = len(machine.alphabet)
    ids = np.array(list(itertools.product(range(K), repeat=n)), dtype=np.int64)
    live = machine.run_batch(ids, np.full(len(ids), n)).fields["state"] >= 0
    rd = net.module.run(torch.as_tensor(ids)).reading.detach().numpy()[live]
    assert np.all((rd == 0) | (rd == 1)) and np.all(rd.sum(-1) == 1)


@settings(max_examples=20, deadline=None)
@given(machine=strategies.realtime_dpda(max_states=3), variant=st.sampled_from(VARIANTS))
def test_random_dpdas_certified_and_brute_forced(machine, variant):
    net = compile_(machine, variant)
    cert = pn.certify(machine, net)
    tab = table(machine)
    _holds(cert, variant, live=any((tab.q0, a, tab.G) in tab.trans for a in range(tab.K)))
    assert pn.verify(machine, net, max_length=6, samples=0, long_samples=0).ok
    _readings_one_hot(machine, net, 4)


# --- Lemma 0: the network-stack encoding, brute force ------------------------------------------
def _decode(G, cells):
    """The machine stack (top last, without ⊥) of network cells ⊥₀ c₁ … c_k."""
    if cells[1:] == [2 * G + 1]:
        return []
    return [c - 1 if c <= G else c - G - 1 for c in cells[1:]]


@settings(max_examples=30, deadline=None)
@given(machine=strategies.realtime_dpda(max_states=3), data=st.data())
def test_lemma0_network_moves_simulate_the_machine(machine, data):
    tab = table(machine)
    mc = dusell._Machine(tab, tuple(machine.states), tuple(machine.alphabet.symbols), tab.G)
    G, N = tab.G, 2 * tab.G + 2
    for string in itertools.product(range(tab.K), repeat=6):
        q, cells, stack = tab.q0, [0], []
        for a in string:
            mv = tab.trans.get((q, a, stack[-1] if stack else G))
            if mv is None:
                break
            v, n2 = dusell.network_op(mc, cells[-1], mv)
            if v < N:
                cells.append(v)
            elif v < 2 * N:
                assert len(cells) > 1            # never replaces ⊥₀
                cells[-1] = v - N
            else:
                assert len(cells) > 2            # never pops back to ⊥₀
                cells.pop()
            q, (_p, _o, pe, ue, y) = mv[0], mv
            if pe == "top":
                stack.pop()
            if ue == "top":
                stack.append(y)
            assert _decode(G, cells) == stack
            assert n2 is None or n2 == cells[-1]
        if data.draw(st.booleans()):
            break


# --- mutations: the certificate fails, and pn.verify finds the counterexample ------------------
def _push_pop_machine() -> DPDA:
    t = {}
    for x in ("A", "B", BOTTOM):
        t[(0, "a", x)] = (0, ("A", x))
        t[(0, "b", x)] = (0, ("B", x))
        t[(0, "c", x)] = (0, (x,) if x is BOTTOM else ())
    return DPDA([0], "abc", ["A", "B"], t, 0, acceptance="empty_stack")


@pytest.mark.parametrize("variant", ["ns", "rns"])
def test_wrong_action_weight_fails_and_verify_finds_it(variant):
    machine = _push_pop_machine()
    net = compile_(machine, variant)
    mod = net.module
    Q, N = mod.num_states, mod.num_stack
    A_, B_ = machine.stack_alphabet.index("A"), machine.stack_alphabet.index("B")
    a = machine.alphabet.index("a")
    j, (q, _, n, r, v) = next((j, mv) for j, mv in enumerate(net.abstraction.moves)
                              if mv[1] == a and mv[2] == 1 + A_)
    row = ((q * N + n) * Q + r) * (2 * N + 1)
    with torch.no_grad():
        w = mod.actions.weight
        w[row + 1 + B_, j], w[row + v, j] = w[row + v, j].clone(), 0.0
    cert = pn.certify(machine, net)
    assert not cert.ok and not cert.all_lengths
    assert cert.failing.kind == "step" and "log action of the move" in cert.failing.unit_label
    rep = pn.verify(machine, net, max_length=None, samples=0, long_samples=2, long_length=300,
                    seed=3)
    assert not rep.ok and rep.counterexample is not None


def test_wrong_readout_weight_fails_and_verify_finds_it():
    machine = pn.tasks.get("dyck2")
    net = compile_(machine, "ns_u")
    G = net.abstraction.machine_stack
    j = next(j for j, w in enumerate(net.module.out.weight[0].tolist())
             if w < 0 and 1 <= net.abstraction.moves[j][2] <= G)
    with torch.no_grad():
        net.module.out.weight[0, j] = 0.0
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.kind == "readout"
    rep = pn.verify(machine, net, max_length=8, samples=0, long_samples=0)
    assert not rep.ok and rep.counterexample.field == "output"


@pytest.mark.parametrize("variant", VARIANTS)
def test_unsaturated_actions_are_not_certified(variant):
    """β scaled down in the action head so that the move leads by ~60 instead of ~3000: the
    decoded run is still right on short strings, but exp(−60) is not 0, so the readings are not
    exactly one-hot and nothing is claimed."""
    machine = pn.tasks.get("dyck2")
    net = compile_(machine, variant)
    with torch.no_grad():
        net.module.actions.weight.mul_(60 / 3120)
        net.module.actions.bias.mul_(60 / 3120)
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.kind == "step"
    assert "log action" in cert.failing.unit_label
    assert pn.verify(machine, net, max_length=4, samples=0, long_samples=0).ok


@pytest.mark.parametrize("variant", ["ns", "rns"])
def test_beta_below_the_exp_underflow_is_not_certified(variant):
    """β = 128: the move leads by 128·tanh 1 ≈ 97 < a* ≈ 104 (float32 exp(−97) is a nonzero
    subnormal), so the readings are not exactly one-hot: no claim, though pn.verify passes on
    short strings. β = 160 (lead ≈ 122) is certified."""
    machine = pn.tasks.get("dyck2")
    net = compile_(machine, variant)
    low = pn.certify(machine, net.with_scale(128))
    assert not low.ok and low.failing.kind == "step" and "log action" in low.failing.unit_label
    assert pn.verify(machine, net.with_scale(128), max_length=4, samples=0, long_samples=0).ok
    _holds(pn.certify(machine, net.with_scale(160)), variant)


def test_unsaturated_output_gate_is_carried_as_a_box():
    """An output gate at σ(8) instead of σ(β): h is no longer tanh 1 to the ulp; the boxes
    widen (the fixpoint on their radii) and the certificate still holds — and is then true."""
    machine = pn.tasks.get("dyck2")
    net = compile_(machine, "rns")
    H = net.hidden_units
    with torch.no_grad():
        net.module.cell.bias_ih[3 * H:] = 8.0 / 4096 * net.module.cell.bias_ih[3 * H:]
    cert = pn.certify(machine, net)
    _holds(cert, "rns")
    assert any("of 1 (on)" in n and "1.53e-05" not in n for n in cert.notes)
    assert pn.verify(machine, net, max_length=6, samples=100, long_samples=2,
                     long_length=200).ok


def test_unsaturated_input_gate_fails():
    machine = pn.tasks.get("dyck2")
    net = compile_(machine, "rns")
    with torch.no_grad():
        net.module.cell.weight_ih.mul_(1e-3)
        net.module.cell.bias_ih.mul_(1e-3)
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.kind == "step" and "cell c" in cert.failing.unit_label


@pytest.mark.parametrize("variant", ["ns_s", "rns"])
def test_small_noise_is_certified_on_the_weights_as_they_are(variant):
    machine = pn.tasks.get("marked_reversal")
    net = compile_(machine, variant)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.module.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    cert = pn.certify(machine, net)
    _holds(cert, variant, least=20)     # NS+S: boxes of the noisy rows widen its bound
    long = cert.max_length or 300
    assert pn.verify(machine, net, max_length=5, samples=200, long_samples=2,
                     long_length=long).ok


def test_nan_weight_is_refused():
    machine = pn.tasks.get("dyck2")
    net = compile_(machine, "rns")
    with torch.no_grad():
        net.module.actions.weight[3, 0] = float("nan")
    cert = pn.certify(machine, net)
    assert not cert.ok and cert.failing.kind == "weights"
    assert "actions.weight" in cert.failing.config


def test_window_caps_the_length():
    machine = pn.tasks.get("dyck2")
    cert = pn.certify(machine, compile_(machine, "rns", window=7))
    assert cert.ok and not cert.all_lengths and cert.max_length == 7
    cert = pn.certify(machine, compile_(machine, "ns_s", window=7))
    assert cert.ok and cert.max_length == 7


def test_bad_input():
    machine = pn.tasks.get("dyck2")
    net = compile_(machine, "rns")
    with pytest.raises(InputError, match="kernel"):
        pn.certify(machine, net, kernel="exact")
    with pytest.raises(InputError, match="progress"):
        pn.certify(machine, net, progress="loud")
    seen = []
    assert pn.certify(machine, net, progress=lambda *a: seen.append(a)).ok and seen
    with pytest.raises(CertificationError):
        pn.certify(pn.tasks.get("marked_reversal"), net)       # another machine's network
    other = pn.compile(machine, target="stack_rnn")
    with pytest.raises(CertificationError, match="DuSell"):
        dusell.certify_dusell_chiang(machine, other)
    cert = pn.certify(machine, net, kernel="saturating")         # both kernel models prove it
    assert cert.ok and cert.kernel == "saturating"


def test_chart_length_and_check():
    f32 = torch.float32
    L = dusell.chart_length(0.48, 1.0001, 20, f32, None)
    assert 500 < L < 5000
    u = 2.0**-24          # the bound at L holds and fails at L + 1
    ok = lambda t: math.log(0.48) + (t - 1) * math.log(1.0001) \
        + (20 * t * (t + 1) / 2 + 2 * t) * math.log1p(u) <= math.log1p(-2.0**-20)
    assert ok(L) and not ok(L + 1)
    assert dusell.chart_length(0.48, 1.0001, 20, f32, 9) == 9
    assert dusell.chart_length(1.0, 1.0, 20, f32, None) == 0
    assert dusell.chart_length(math.nan, 1.0, 20, f32, None) == 0
    machine = pn.tasks.get("dyck2")
    for v in VARIANTS:
        net = compile_(machine, v)
        assert dusell.chart_check(net) is None
    net = compile_(machine, "rns")
    net.module.stack.window = 2     # a stack other than the module's (§5.1 D = 2): runs die
    assert dusell.chart_check(net) is not None

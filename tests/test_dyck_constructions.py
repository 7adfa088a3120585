"""Dyck-(k, m) constructions: unit counts, lockstep agreement with the machine, exact margins."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.bounded import DyckKM
from pdanet.constructions.dyck import information_floor, lstm_slot_gates

METHODS = ("hewitt", "onehot", "compact")
TARGETS = ("elman", "lstm")


def clog2(n: int) -> int:
    return (n - 1).bit_length()


def expected_units(target: str, method: str, k: int, m: int) -> int:
    L = max(1, clog2(k))
    return {
        ("elman", "hewitt"): 6 * m * L - 2 * m,
        ("lstm", "hewitt"): 3 * m * L - m,
        ("elman", "onehot"): 2 * m * k,
        ("lstm", "onehot"): m * k,
        ("elman", "compact"): 2 * m * clog2(k + 1),
        ("lstm", "compact"): m * clog2(k + 1),
    }[(target, method)]


def legal_prefixes(machine: DyckKM, length: int) -> np.ndarray:
    """Every legal prefix of exactly `length` symbols (each legal prefix extends, so all shorter
    ones appear as their prefixes), by vectorised breadth-first expansion."""
    k, m = machine.k, machine.m
    ids = np.zeros((1, 0), np.int64)
    stack = np.full((1, m), -1, np.int64)
    depth = np.zeros(1, np.int64)
    for _ in range(length):
        rows = np.arange(len(ids))
        top = stack[rows, np.maximum(depth - 1, 0)]
        new_ids, new_stack, new_depth = [], [], []
        for s in range(k):                                    # opens
            ok = depth < m
            st = stack[ok].copy()
            st[np.arange(ok.sum()), depth[ok]] = s
            new_ids.append(np.column_stack([ids[ok], np.full(ok.sum(), s)]))
            new_stack.append(st)
            new_depth.append(depth[ok] + 1)
        ok = depth > 0                                        # the matching close
        st = stack[ok].copy()
        st[np.arange(ok.sum()), depth[ok] - 1] = -1
        new_ids.append(np.column_stack([ids[ok], k + top[ok]]))
        new_stack.append(st)
        new_depth.append(depth[ok] - 1)
        ids, stack, depth = (np.concatenate(a) for a in (new_ids, new_stack, new_depth))
    return ids


def mismatch(net, ids: np.ndarray) -> str | None:
    """First disagreement between network and machine on a batch of legal prefixes, or None.
    Checks the decoded stack and depth, the readout set and the readout margin at every step."""
    machine = net.machine
    trace = machine.run_batch(ids)
    assert (trace["state"] == 0).all(), "test strings must be legal prefixes"
    states, logits = net.forward(torch.as_tensor(ids))
    decoded = net.decode(states)
    out = net.readout(logits)
    bound = float(net.scale * net.margin) * (1 - 1e-4)
    small = np.abs(logits.double().numpy()) < bound
    for name, got in (("stack", decoded["stack"]), ("depth", decoded["depth"]),
                      ("output", out)):
        want = trace[name]
        bad = got != want
        bad = bad.reshape(bad.shape[:2] + (-1,)).any(-1)
        if bad.any():
            b, t = map(int, np.argwhere(bad)[0])
            return f"{name} differs for string {ids[b].tolist()} at step {t}: {got[b, t]} vs {want[b, t]}"
    if small.any():
        b, t, o = map(int, np.argwhere(small)[0])
        return f"logit {o} at step {t} of {ids[b].tolist()} below β·c = {bound}"
    return None


# --- unit counts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("target,k,m,units", [
    ("lstm", 2, 3, 6), ("lstm", 4, 3, 15), ("lstm", 8, 5, 40), ("lstm", 64, 5, 85),
    ("elman", 4, 3, 30), ("elman", 16, 4, 88), ("elman", 128, 5, 200),
])
def test_hewitt_unit_counts(target, k, m, units):
    net = pn.compile(DyckKM(k, m), target=target)             # hewitt is the default
    assert net.method == "hewitt"
    assert net.hidden_units == units == net.bound_value
    assert net.module.rnn.hidden_size == units


@pytest.mark.parametrize("k,m", [(1, 1), (1, 4), (2, 2), (3, 2), (5, 3), (7, 2), (9, 1), (12, 2)])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("method", METHODS)
def test_unit_formulas(method, target, k, m):
    net = pn.compile(DyckKM(k, m), target=target, method=method)
    assert net.hidden_units == net.bound_value == expected_units(target, method, k, m)
    assert net.params == {"k": k, "m": m}
    assert net.bound.free_symbols <= {sp.Symbol("k"), sp.Symbol("m")}


def test_k1_bound_uses_one_bit():
    net = pn.compile(DyckKM(1, 3), target="lstm", method="hewitt")
    assert "Max(1" in str(net.bound) and net.hidden_units == 3 * 3 * 1 - 3


def test_compact_within_stated_bounds():
    for k in (1, 2, 3, 7, 8, 100, 1000):
        for m in (1, 3, 6):
            e = pn.compile(DyckKM(k, m), target="elman", method="compact").hidden_units
            l_ = pn.compile(DyckKM(k, m), target="lstm", method="compact").hidden_units
            assert e <= 2 * m * clog2(k + 1)
            assert l_ <= m * clog2(k + 1) + m
            assert l_ >= information_floor(k, m)          # (k+1)^m ≥ Σ kⁱ


def test_information_floor():
    for k in (1, 2, 3, 5, 10):
        for m in (1, 2, 4):
            n = sum(k**i for i in range(m + 1))
            want = next(b for b in range(200) if 2**b >= n)
            assert information_floor(k, m) == want
    assert information_floor(100_000, 3) == 50
    assert information_floor(1, 5) == 3


# --- lockstep agreement ----------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k,m,length", [(1, 3, 10), (2, 2, 10), (2, 3, 10), (3, 2, 8), (4, 1, 6)])
def test_exhaustive_prefixes(method, target, k, m, length):
    machine = DyckKM(k, m)
    net = pn.compile(machine, target=target, method=method)
    ids = legal_prefixes(machine, length)
    assert mismatch(net, ids) is None


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k,m", [(5, 4), (16, 3), (17, 2), (2, 7)])
def test_sampled_prefixes(method, target, k, m):
    machine = DyckKM(k, m)
    net = pn.compile(machine, target=target, method=method)
    for busy, seed in ((0.5, 0), (0.8, 1), (0.3, 2)):
        ids = machine.sample(150, 60, rng=seed, busy=busy)
        assert mismatch(net, ids) is None


@pytest.mark.parametrize("target", TARGETS)
def test_large_k_sampled(target):
    machine = DyckKM(3000, 3)
    for method in ("hewitt", "compact"):
        net = pn.compile(machine, target=target, method=method)
        assert net.module.out_embedding is not None
        ids = machine.sample(64, 30, rng=3, busy=0.7)
        assert mismatch(net, ids) is None


def test_padding_is_ignored_by_comparison_rows():
    machine = DyckKM(2, 2)
    net = pn.compile(machine, target="lstm")
    ids = np.array([[0, 2, 1, 3], [1, 1, -1, -1]])
    trace = machine.run_batch(ids)
    states, _ = net.forward(torch.as_tensor(ids))
    dec = net.decode(states)
    assert (dec["stack"][1, :3] == trace["stack"][1, :3]).all()
    assert (dec["stack"][0] == trace["stack"][0]).all()


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_long_string(target):
    machine = DyckKM(2, 10)
    ids = machine.sample(2, 100_000, rng=7, busy=0.55)
    for method in METHODS:
        net = pn.compile(machine, target=target, method=method)
        assert mismatch(net, ids) is None


# --- exact arithmetic --------------------------------------------------------------------------

def _sym(net, name):
    return net.weights[name].to_sympy(net.scale)


def _elman_ideal(net, stack_top_first, after_push):
    """Ideal tanh state (±1) for a stack (top first) held in the P (push) or Q (pop) copy."""
    from pdanet.constructions.dyck_codes import CODES
    code = CODES[net.method](net.machine.k)
    m, d = net.machine.m, code.d
    u = np.zeros((2, m, d), np.int64)
    for s, sym in enumerate(stack_top_first):
        u[0 if after_push else 1, s] = np.abs(code.phi(np.array([sym]))[0])
    return sp.Matrix((2 * u - 1).ravel().tolist())


@pytest.mark.parametrize("method", METHODS)
def test_elman_one_step_exact(method):
    machine = DyckKM(2, 2)
    net = pn.compile(machine, target="elman", method=method)
    W, V = _sym(net, "rnn.weight_hh_l0"), _sym(net, "rnn.weight_ih_l0")
    b = _sym(net, "rnn.bias_ih_l0").T + _sym(net, "rnn.bias_hh_l0").T
    E = _sym(net, "embedding.weight")
    cases = [((1,), True, 0, (0, 1), True),     # stack [1] (top first), read "(" → [0, 1], push
             ((0, 1), True, 2, (1,), False),    # read ")" → [1] in the pop copy
             ((1,), False, 3, (), False)]       # read "]" → empty
    for stack, pushed, sym, new_stack, new_pushed in cases:
        g = _elman_ideal(net, stack, pushed)
        z = W * g + V * E[sym, :].T + b
        target = _elman_ideal(net, new_stack, new_pushed)
        for zi, ti in zip(z, target):
            assert sp.sign(zi) == ti                          # exact rationals
            assert abs(zi) >= net.scale / 4                   # tanh(z) = tanh(β·(±½)/2·…) margin


@pytest.mark.parametrize("method", METHODS)
def test_lstm_one_step_exact(method):
    machine = DyckKM(2, 3)
    net = pn.compile(machine, target="lstm", method=method)
    from pdanet.constructions.dyck_codes import CODES
    code = CODES[method](2)
    m, d, H = 3, code.d, net.hidden_units
    W, V = _sym(net, "rnn.weight_hh_l0"), _sym(net, "rnn.weight_ih_l0")
    b = _sym(net, "rnn.bias_ih_l0").T
    E = _sym(net, "embedding.weight")
    stack = (1, 0)                                            # bottom first; top in slot 1
    phi = np.zeros((m, d), np.int64)
    for s, sym in enumerate(stack):
        phi[s] = code.phi(np.array([sym]))[0]
    h = sp.zeros(H, 1)
    for j in range(d):                                        # only the top slot is visible
        h[1 * d + j] = sp.tanh(int(phi[1, j]))
    for sym, i_on, f_on, o_on in [
        (0, [2], [0, 1], [2]),                                # push "(" into slot 2, o on slot 2
        (2, [], [0], [0]),                                    # pop: clear slot 1, o on slot 0
    ]:
        z = W * h + V * E[sym, :].T + b
        gates = {"i": z[:H, 0], "f": z[H:2 * H, 0], "g": z[2 * H:3 * H, 0], "o": z[3 * H:, 0]}
        for s in range(m):
            rows = range(s * d, (s + 1) * d)
            for r in rows:
                vi = gates["i"][r].evalf(40)
                vf = gates["f"][r].evalf(40)
                assert (vi >= net.scale / 4) if s in i_on else (vi <= -net.scale / 4)
                assert (vf >= net.scale / 4) if s in f_on else (vf <= -net.scale / 4)
                care_o = s <= (2 if sym < 2 else 0)           # slots above the new top: any o
                if care_o:
                    vo = gates["o"][r].evalf(40)
                    assert (vo >= net.scale / 4) if s in o_on else (vo <= -net.scale / 4)
        if sym < 2:                                           # candidate = β·φ_x, exactly
            want = code.phi(np.array([sym]))[0]
            for s in range(m):
                for j in range(d):
                    assert gates["g"][s * d + j] == net.scale * int(want[j])
        else:
            assert all(v == 0 for v in gates["g"])


def test_gate_table_exact_for_all_tops():
    """The LSTM gate rows are right for every top position and every occupancy a ∈ [1, A]."""
    for m in (1, 2, 4):
        for A in (1, 3):
            g = lstm_slot_gates(m, A)
            for top in range(-1, m):
                for a in (sp.Integer(1), sp.Integer(A)):
                    avec = sp.Matrix([a if p == top else 0 for p in range(m)])
                    for is_open in (1, 0):
                        if (is_open and top == m - 1) or (not is_open and top < 0):
                            continue
                        new_top = top + 1 if is_open else top - 1
                        for s in range(m):
                            def pre(name, s=s, avec=avec, is_open=is_open, g=g):
                                Wa, u, b2 = g[name]
                                return (sp.Matrix(Wa[s].tolist()).T * avec)[0] + u[s] * is_open \
                                    + sp.Rational(int(b2[s]), 2)
                            i_want = is_open and s == top + 1
                            f_want = s <= top - (1 - is_open)
                            assert abs(pre("i")) >= sp.Rational(1, 2) and bool(pre("i") > 0) == bool(i_want)
                            assert abs(pre("f")) >= sp.Rational(1, 2) and bool(pre("f") > 0) == bool(f_want)
                            if s <= new_top:
                                assert abs(pre("o")) >= sp.Rational(1, 2)
                                assert bool(pre("o") > 0) == (s == new_top)


# --- scale, big k, perturbation --------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("method", METHODS)
def test_scale_argument(target, method):
    net = pn.compile(DyckKM(3, 2), target=target, method=method)
    assert net.margin == sp.Rational(1, 4)
    assert isinstance(net.scale, sp.Integer) and 1 < net.scale < 200
    assert "β" in net.scale_argument and str(net.scale) in net.scale_argument
    # the stated inequality: σ(β μ) ≥ 1 − ε
    eps = sp.Rational(net.info["eps"].numerator, net.info["eps"].denominator)
    mu = sp.Rational(1, 4) if target == "lstm" else sp.Rational(1, 2) - 2 * eps
    assert (1 / (1 + sp.exp(-net.scale * mu)) - (1 - eps)).evalf(50) >= 0
    assert (1 / (1 + sp.exp(-(net.scale - 1) * mu)) - (1 - eps)).evalf(50) < 0   # smallest


def test_big_k_compile():
    machine = pn.automata.dyck(100_000, 3)
    net = pn.compile(machine, target="lstm")
    assert net.hidden_units == 150 == net.bound_value
    small = pn.compile(machine, target="lstm", method="compact")
    assert small.hidden_units == 3 * 17 < 150
    for n in (net, small):
        sizes = [p.numel() for p in n.module.parameters()]
        # embedding (2k × (code+1)) and out_embedding ((2k+1) × (features+1)): O(k log k) only
        assert sum(sizes) < 200_001 * 40
        assert max(sizes) < 200_001 * 21
        assert all(p.shape != (200_001, n.hidden_units) for p in n.module.parameters())
        ids = machine.sample(4, 40, rng=0, busy=0.7)
        trace = machine.run_batch(ids, with_output=False)
        states, logits = n.forward(torch.as_tensor(ids))
        assert (n.decode(states)["stack"] == trace["stack"]).all()
        allowed = n.readout(logits)
        top = trace["top"]
        rows, steps = np.nonzero(top >= 0)
        assert allowed[rows, steps, 100_000 + top[rows, steps]].all()
        assert allowed[..., 100_000:200_000].sum(-1).max() <= 1
        assert (allowed[..., 200_000] == (trace["depth"] == 0)).all()
        assert (allowed[..., :100_000].all(-1) == (trace["depth"] < 3)).all()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("method", METHODS)
def test_perturbation_is_detected(target, method):
    machine = DyckKM(2, 2)
    net = pn.compile(machine, target=target, method=method)
    ids = legal_prefixes(machine, 6)
    assert mismatch(net, ids) is None
    for name in ("rnn.weight_hh_l0", "rnn.weight_ih_l0"):
        w = net.module.state_dict()[name].clone()
        H = net.hidden_units
        if name == "rnn.weight_ih_l0" and target == "lstm":
            r = 2 * H + int(torch.nonzero(w[2 * H:3 * H, 0])[0, 0])   # a candidate weight
            c = 0
        elif target == "lstm":                                # forget gate of a bottom-slot unit
            from pdanet.constructions.dyck_codes import CODES  # that "(" sets, reading that unit
            j = int(np.flatnonzero(CODES[method](2).phi(np.array([0]))[0])[0])
            r, c = H + j, j
        else:
            r, c = map(int, torch.nonzero(w)[0])
        w[r, c] = -w[r, c]
        broken = net.with_scale()
        state = broken.module.state_dict()
        state[name] = w
        broken.module.load_state_dict(state)
        assert mismatch(broken, ids) is not None, name


def test_reader_and_decoder_shapes():
    machine = DyckKM(3, 2)
    for target in TARGETS:
        net = pn.compile(machine, target=target, method="compact")
        ids = legal_prefixes(machine, 3)
        states, logits = net.forward(torch.as_tensor(ids))
        dec = net.decode(states)
        assert dec["stack"].shape == (len(ids), 4, 2)
        assert dec["depth"].shape == (len(ids), 4)
        out = net.readout(logits)
        assert out.dtype == bool and out.shape == (len(ids), 4, 7)


def reference_decode(net, states: np.ndarray) -> dict[str, np.ndarray]:
    """The decoders' definition, written directly: threshold each unit (LSTM: |c| > ½; Elman:
    u_P + u_Q > ½, i.e. g_P + g_Q > −1), `code.decode` each slot; Elman slots are top first, so
    depth = number of non-empty slots and stack[i] = slot depth − 1 − i."""
    from pdanet.constructions.dyck_codes import CODES

    machine = net.machine
    code = CODES[net.method](machine.k)
    m, d, H = machine.m, code.d, net.hidden_units
    if net.target == "lstm":
        slots = code.decode((np.abs(states[..., H:]) > 0.5).reshape(states.shape[:-1] + (m, d)))
        return {"stack": slots, "depth": (slots != -1).sum(-1)}
    g = states.reshape(states.shape[:-1] + (2, m, d))
    top_first = code.decode(g[..., 0, :, :] + g[..., 1, :, :] > -1)
    depth = (top_first != -1).sum(-1)
    stack = np.full(top_first.shape, -1)
    for idx in np.ndindex(depth.shape):
        n = depth[idx]
        stack[idx][:n] = top_first[idx][:n][::-1]
    return {"stack": stack, "depth": depth}


@settings(max_examples=40, deadline=None)
@given(target=st.sampled_from(TARGETS), method=st.sampled_from(METHODS),
       k=st.integers(1, 9), m=st.integers(1, 6), seed=st.integers(0, 2**32 - 1),
       order=st.sampled_from(["C", "F", "step-major"]))
def test_fast_decoders_match_their_definition(target, method, k, m, seed, order):
    """On arbitrary states (not only reachable ones: units near the threshold, invalid code
    words, holes between filled slots) and in any memory layout, the packed-word decoders give
    exactly the stacks and depths of the direct definition."""
    net = pn.compile(DyckKM(k, m), target=target, method=method)
    rng = np.random.default_rng(seed)
    width = 2 * net.hidden_units if target == "lstm" else net.hidden_units
    B, T1 = 5, 7
    states = rng.choice([-1.0, -0.6, -0.4, 0.0, 0.4, 0.6, 1.0], size=(B, T1, width))
    states[rng.random((B, T1)) < 0.3] = -1.0 if target == "elman" else 0.0   # empty stacks
    if order == "F":
        states = np.asfortranarray(states)
    elif order == "step-major":
        states = np.ascontiguousarray(states.transpose(1, 0, 2)).transpose(1, 0, 2)
    got = net.decode(states.astype(np.float32))
    want = reference_decode(net, states.astype(np.float32))
    for name in ("stack", "depth"):
        assert got[name].shape == want[name].shape
        assert np.array_equal(got[name], want[name]), name


@pytest.mark.parametrize("target", TARGETS)
def test_fast_forward_matches_the_plain_module(target):
    """The Dyck modules' forward (step-major / unit-major buffers) gives the same states and
    logits as the plain autograd path through the same nn.RNN / nn.LSTM."""
    machine = DyckKM(3, 4)
    net = pn.compile(machine, target=target, method="hewitt")
    ids = torch.as_tensor(machine.sample(9, 30, rng=5, busy=0.8))
    fast_states, fast_logits = net.forward(ids)
    module = net.module
    for p in module.parameters():
        p.requires_grad_(True)
    slow_states, slow_logits = module(ids)                   # grad enabled: the plain path
    assert torch.allclose(fast_states, slow_states.detach(), atol=1e-5)
    assert torch.allclose(fast_logits, slow_logits.detach(), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("method", ["hewitt", "onehot", "compact"])
def test_lstm_forward_decoded_is_the_cell_half_of_forward(method):
    """The verifier's path returns forward's cells and logits exactly, and decodes the same."""
    machine = pn.tasks.dyck(3, 4)
    net = pn.compile(machine, target="lstm", method=method)
    ids, _ = machine.encode(pn.tasks.sample("dyck", 20, [2, 10, 30], rng=0, k=3, m=4))
    states, logits = net.forward(ids)
    cells, logits2 = net.forward_decoded(ids)
    H = net.hidden_units
    assert torch.equal(states[..., H:], cells) and torch.equal(logits, logits2)
    a, b = net.decode(states), net.decode(cells)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    with pytest.raises(pn.errors.InputError, match="width"):
        net.decode(states[..., :H - 1])

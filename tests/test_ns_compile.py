"""pn.compile(pda, target="ns_rnn"): readings and string sums equal Lang's algorithm."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata import tasks
from pdanet.automata.weighted import WeightedPDA, hardest_cfl_realtime
from pdanet.constructions.ns import compare_readings
from pdanet.errors import AutomatonError, CompileError

TASKS = ["marked_reversal", "unmarked_reversal", "padded_reversal", "dyck2", "hardest_cfl"]


def machine(name):
    return hardest_cfl_realtime() if name == "hardest_cfl" else tasks.get(name)


def strings(name, n, lengths, seed=0):
    if name == "marked_reversal":
        lengths = [x | 1 for x in lengths]
    elif name in ("unmarked_reversal", "dyck2"):
        lengths = [x & ~1 for x in lengths]
    # hardest_cfl: the 6-symbol variant without $ that `hardest_cfl_realtime` recognises
    kw = {"dollar": False} if name == "hardest_cfl" else {}
    good = tasks.sample(name, n, lengths, rng=seed, **kw)
    rng = np.random.default_rng(seed)
    syms = list(machine(name).alphabet.symbols)
    return good + [tuple(rng.choice(syms, int(rng.integers(1, max(lengths))))) for _ in range(n)]


@pytest.mark.parametrize("name", TASKS)
def test_compiled_readings_equal_lang(name):
    m = machine(name)
    ss = strings(name, 6, range(6, 16))
    assert compare_readings(m, pn.compile(m, target="ns_rnn", dtype=torch.float64), ss,
                            1e-5, 1e-5) is None
    assert compare_readings(m, pn.compile(m, target="ns_rnn"), ss, 1e-3, 1e-5) is None


def long_strings(name, n=25, seed=1):
    """n strings of the language and n random strings over its alphabet, lengths 40–100."""
    good = strings(name, n, range(40, 101), seed)[:n]
    rng = np.random.default_rng(seed)
    syms = list(machine(name).alphabet.symbols)
    return good + [tuple(rng.choice(syms, int(rng.integers(40, 101)))) for _ in range(n)]


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
def test_compiled_readings_equal_lang_long(name):
    """50 strings of length 40–100 (25 of the language, 25 random): readings and log string sums
    of the float64 network within 1e-5 and of the float32 network within 1e-3 (relative) of
    Lang's algorithm in float64."""
    m = machine(name)
    ss = long_strings(name)
    assert len(ss) == 50 and all(40 <= len(s) <= 100 for s in ss)
    wpda = m if isinstance(m, WeightedPDA) else WeightedPDA.from_pda(m)
    cache: dict = {}
    for dtype, rtol, atol in ((torch.float64, 1e-5, 1e-7), (torch.float32, 1e-3, 1e-6)):
        net = pn.compile(m, target="ns_rnn", dtype=dtype)
        bad = compare_readings(wpda, net, ss, rtol, atol, batch_size=25, cache=cache)
        assert bad is None, (dtype, bad)


def test_windowed_network_and_outputs():
    m = tasks.get("unmarked_reversal")
    net = pn.compile(m, target="ns_rnn", dtype=torch.float64, window=20)
    assert compare_readings(m, net, strings("unmarked_reversal", 5, range(4, 20)), 1e-5, 1e-5) \
        is None
    ids, _ = m.encode(["0110", "01"])
    states, logits = net.forward(torch.as_tensor(ids))
    out = net.readout(logits)
    assert out[0, 4] and not out[1, 2] and out[1, 0]
    fields = net.decode(states)
    assert fields["reading"].shape == (2, 5, 4, 5)
    assert np.allclose(fields["reading"][1, 2:].sum((-1, -2)), 1.0)   # padding holds


def test_compare_readings_finds_a_wrong_network():
    m = tasks.get("dyck2")
    net = pn.compile(m, target="ns_rnn", dtype=torch.float64)
    with torch.no_grad():
        w = net.module.embedding.weight
        w[w == 0] = np.log(2.0)          # doubles every weight: string sums change
    bad = compare_readings(m, net, strings("dyck2", 3, range(4, 8)), 1e-5, 1e-5)
    assert bad is not None and bad.field == "log_weight"


def test_bad_input():
    eps = tasks.get("hardest_cfl")          # the grammar's PDA has ε-moves
    with pytest.raises(AutomatonError, match="ε-move"):
        pn.compile(eps, target="ns_rnn")
    with pytest.raises(CompileError):
        pn.compile(tasks.get("dyck2"), target="ns_rnn", bogus=1)
    w = WeightedPDA.from_pda(tasks.get("dyck2"))
    assert pn.compile(w, target="ns_rnn").hidden_units == 2 * w.num_states * w.num_stack
    assert pn.compile(w, target="ns_rnn", bottom="extended").hidden_units == \
        w.num_states * w.num_stack
    with pytest.raises(CompileError, match="bottom"):
        pn.compile(w, target="ns_rnn", bottom="top")
    with pytest.raises(CompileError, match="window"):
        pn.compile(w, target="ns_rnn", bottom="paper", window=5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_pn_verify_passes_on_the_compiled_ns_rnn(dtype):
    w = WeightedPDA.from_pda(tasks.get("marked_reversal"))
    net = pn.compile(w, target="ns_rnn", dtype=dtype)
    rep = pn.verify(w, net, max_length=5, samples=40, sample_lengths=(6, 25), long_length=41,
                    long_samples=4)
    assert rep.ok, rep.counterexample
    assert rep.fields == ("reading", "output") and rep.steps_checked > 500


def test_pn_verify_finds_a_corrupted_ns_rnn():
    w = WeightedPDA.from_pda(tasks.get("marked_reversal"))
    net = pn.compile(w, target="ns_rnn", dtype=torch.float64)
    Q, G = w.num_states, w.num_stack
    q0, a0 = w.states.index("start"), w.alphabet.index("0")
    Gn = net.module.G                      # the network's stack symbols: ⊥, Z and marked Ẑ
    assert Gn == 2 * G
    with torch.no_grad():                  # on '0' from (start, ⊥) also push the second symbol
        net.module.embedding.weight.view(-1, Q, Gn, Q, 2 * Gn + 1)[a0, q0, 0, q0, G + 2] = 0.0
    rep = pn.verify(w, net, max_length=4, samples=10, long_samples=0)
    cex = rep.counterexample
    assert not rep.ok and cex.field == "reading" and cex.string == ("0",) and cex.step == 1
    # the expected reading is the machine's own (one run, in state 'push' with 0' on top)
    exp = w.run_batch(*w.encode([("0",)]))["reading"][0, 1]
    assert np.allclose(np.asarray(cex.expected, dtype=float).reshape(exp.shape), exp)
    # a float tolerance is not an excuse: a tiny relative error is caught at a tight rtol
    net2 = pn.compile(w, target="ns_rnn", dtype=torch.float64)
    with torch.no_grad():
        e = net2.module.embedding.weight.view(-1, Q, Gn, Q, 2 * Gn + 1)
        e[a0, q0, 0, q0, G + 2] = -12.0    # a spurious run of relative weight e^-12 ≈ 6e-6
    assert pn.verify(w, net2, max_length=3, samples=0, long_samples=0, rtol=1e-7,
                     atol=1e-9).counterexample.field == "reading"
    assert pn.verify(w, net2, max_length=3, samples=0, long_samples=0, rtol=1e-3,
                     atol=1e-4).ok


def test_verify_tolerance_defaults_follow_the_dtype():
    from pdanet.verify.lockstep import Tolerance
    assert Tolerance.for_dtype(torch.float64) == Tolerance(1e-5, 1e-7)
    assert Tolerance.for_dtype(torch.float32) == Tolerance(1e-3, 1e-6)
    assert Tolerance.for_dtype(torch.float32, rtol=0.1).rtol == 0.1
    with pytest.raises(pn.errors.InputError):
        Tolerance.for_dtype(torch.float64, atol=-1)




@settings(max_examples=25, deadline=None)
@given(st.integers(1, 2), st.integers(1, 2), st.integers(0, 2 ** 16),
       st.sampled_from(["paper", "extended"]))
def test_random_weighted_pdas_compile_under_both_encodings(Q, m, seed, bottom):
    """Random weighted PDAs (pushes on ⊥, pops back to ⊥, ⊥ → ⊥ no-ops): the float64 network
    under either encoding of ⊥ reads, on every string of length ≤ 6 (≤ 5 for the larger ones),
    what the machine's runs give — α by enumeration of runs, through `compare_readings`' Lang's
    algorithm — and its reading is the brute-force one."""
    import itertools

    from pdanet.automata import BOTTOM
    from pdanet.automata import semiring as S
    from pdanet.automata.weighted import valid_ops_mask

    rng = np.random.default_rng(seed)
    G = m + 1
    sym = lambda j: BOTTOM if j == 0 else "ab"[j - 1]
    trans = {}
    for a, q, x, r, o in itertools.product("xy", range(Q), range(G), range(Q), range(2 * G + 1)):
        if valid_ops_mask(G)[x, o] and rng.random() < 0.5:
            op, y = ("pop", None) if o == 2 * G else \
                ("replace", sym(o - G)) if o >= G else ("push", sym(o))
            trans[(q, sym(x), a, r, op, y)] = float(rng.uniform(0.2, 2.0))
    M = WeightedPDA(range(Q), "xy", tuple("ab"[:m]), trans, 0)
    net = pn.compile(M, target="ns_rnn", dtype=torch.float64, bottom=bottom)
    assert net.hidden_units == (2 if bottom == "paper" else 1) * Q * (m + 1)
    n = 6 if Q * m <= 2 else 5
    strings = [s for k in range(n + 1) for s in itertools.product("xy", repeat=k)]
    assert compare_readings(M, net, strings, 1e-7, 1e-9) is None
    for s in strings[-3:]:
        ids, _ = M.encode([s])
        with torch.no_grad():
            states, _ = net.forward(torch.as_tensor(ids))
        alpha = M.brute_force("".join(s), S.REAL, None)[-1]
        want = alpha / alpha.sum() if alpha.sum() > 0 else alpha
        assert np.allclose(net.decode(states)["reading"][0, -1], want, atol=1e-9)

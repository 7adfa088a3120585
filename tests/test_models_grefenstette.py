"""Grefenstette et al. (2015) §3.4 controllers (Elman RNN and LSTM with a neural Stack, Queue or
DeQue) compiled with a factored controller, verified in lockstep against the machines."""

import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pda import DPDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.store import sequence_copy
from pdanet.errors import CompileError, InputError
from pdanet.models.grefenstette import (
    BETA,
    EXAMPLE_GREFENSTETTE_LSTM,
    GrefenstetteRNN,
    compile_grefenstette,
    compile_grefenstette_lstm,
    compile_grefenstette_rnn,
    estimate,
    requires_grefenstette_lstm,
    requires_grefenstette_rnn,
)

CONTROLLERS = ("rnn", "lstm")


def _small(name):
    """The task's machine at a small vocabulary where it takes one."""
    for params in ({"vocab_size": 3}, {}):
        try:
            return pn.tasks.get(name, **params)
        except TypeError:
            continue
    return pn.tasks.get(name)


def _applicable():
    out = []
    for name in pn.tasks.names():
        m = _small(name)
        if requires_grefenstette_lstm(m) is None:
            out.append((name, m))
    return out


APPLICABLE = _applicable()


def _check(m, net, max_length, samples=20, lengths=(0, 64)):
    rep = pn.verify(m, net, max_length=max_length, samples=samples, sample_lengths=lengths,
                    long_samples=0, seed=1)
    assert rep.ok, rep.counterexample
    return rep


def _max_length(m):
    K = len(m.alphabet)
    return 6 if K <= 4 else 5 if K <= 6 else 4 if K <= 8 else 3


def test_the_seed_tasks_that_apply():
    names = {n for n, _ in APPLICABLE}
    assert {"sequence_copy", "sequence_reversal", "dyck2", "parity", "reversal"} <= names
    # refused with a reason: nondeterministic machines, the Dyck-(k, m) language object
    assert requires_grefenstette_lstm(pn.tasks.get("unmarked_reversal")) is not None


@pytest.mark.parametrize("name, machine", APPLICABLE, ids=[n for n, _ in APPLICABLE])
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_seed_tasks_compile_and_verify(name, machine, controller):
    net = compile_grefenstette(machine, controller)
    rep = _check(machine, net, _max_length(machine), samples=10)
    assert "state" in rep.fields and "output" in rep.fields
    assert net.method == f"grefenstette_{controller}" and net.target == "stack_rnn"
    assert net.hidden_units == net.module.h0.numel()


@pytest.mark.parametrize("store", ("queue", "deque"))
def test_copy_and_reversal_with_every_store(store):
    for m in (sequence_copy(3, store),
              pn.tasks.get("sequence_reversal", vocab_size=3,
                           store="stack" if store == "queue" else "deque")):
        for controller in CONTROLLERS:
            net = compile_grefenstette(m, controller)
            assert net.info["factoring"] == "data_path"
            _check(m, net, 8, samples=10, lengths=(0, 100))


# --- the data path: units do not grow with |Σ|·|Γ| -----------------------------------------------
@pytest.mark.parametrize("name, params", [("sequence_copy", {}), ("sequence_reversal", {}),
                                          ("sequence_reversal", {"store": "stack"}),
                                          ("sequence_copy", {"store": "deque"})])
def test_units_grow_with_the_code_width_only(name, params):
    sizes = {V: estimate(pn.tasks.get(name, vocab_size=V, **params))["hidden_units"]
             for V in (2, 8, 64, 128)}
    width = {V: int(np.ceil(np.log2(V + 1))) for V in sizes}
    copies = (sizes[128] - sizes[2]) // (width[128] - width[2])
    assert copies in (1, 2)       # the input's datum bits and / or the reading's
    for V, H in sizes.items():   # start + control units (fixed) + the copied code bits
        assert H - copies * width[V] == sizes[2] - copies * width[2], sizes
    classes = estimate(pn.tasks.get(name, vocab_size=64, **params))["classes"]
    assert classes == 2           # data symbols, and the blank


def test_papers_sizes_at_vocabulary_128():
    """Copy (queue) and reversal (stack) at the paper's vocabulary: fast, small, exact."""
    for name, params in (("sequence_copy", {}), ("sequence_reversal", {}),
                         ("sequence_reversal", {"store": "stack"})):
        m = pn.tasks.get(name, vocab_size=128, **params)
        t = time.process_time()   # CPU seconds: robust to a shared machine
        net = compile_grefenstette_lstm(m)
        assert time.process_time() - t < 2.0
        assert net.hidden_units <= 256 and net.module.width <= 256
        strings = pn.tasks.sample(name, 20, [40, 80], np.random.default_rng(0), vocab_size=128,
                                  **params)
        rep = pn.verify(m, net, strings=strings, max_length=None, samples=0, long_samples=0)
        assert rep.ok, rep.counterexample


def test_variants_share_the_datum_bits():
    """The reversal DPDT marks the bottom symbol (s' for s): s and s' share their datum bits and
    differ in a variant bit, which the pop state tests instead of one unit per symbol."""
    m = pn.tasks.get("sequence_reversal", vocab_size=6)
    net = compile_grefenstette_lstm(m)
    codes = net.abstraction.codes
    assert codes.shape[1] == 1 + 3 + 1                      # presence, datum (3), variant (1)
    st = list(m.stack_alphabet)
    for x in ("s0", "s5"):
        a, b = codes[st.index(x)], codes[st.index(x + "'")]
        assert (a[:4] == b[:4]).all() and a[4] != b[4]
    assert any(t[0] == "variant" for t in net.abstraction.tests)
    _check(m, net, 5, samples=20, lengths=(0, 100))


def _two_sources():
    """Pushes the input symbol on 'a'/'b' but pushes the symbol read back on 'c' (a second source
    for v_t): every symbol is then its own class."""
    t = {}
    for x in ("a", "b", BOTTOM):
        for y in ("a", "b"):
            t[("q", y, x)] = ("q", (y, x))
    for x in ("a", "b"):
        t[("q", "c", x)] = ("q", (x, x))
    return DPDA(["q"], "abc", "ab", t, "q", accepting=["q"])


def test_a_head_with_two_sources_switches_the_factoring_off():
    m = _two_sources()
    net = compile_grefenstette_rnn(m)
    assert net.info["factoring"] == "none"
    _check(m, net, 6)


# --- random machines ------------------------------------------------------------------------------
@st.composite
def random_dpda(draw):
    """Random real-time DPDAs / DPDTs whose stack alphabet is (part of) the input alphabet, so
    that pushes of the input symbol and outputs of the top exercise the data path."""
    nq, nk = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    Q, K = list(range(nq)), "abc"[:nk]
    variants = draw(st.booleans())          # "A" is a variant of "a" (another store symbol)
    G = list(K) + ([c.upper() for c in K] if variants else [])
    transducer = draw(st.booleans())
    t = {}
    for q in Q:
        for a in K + "#":
            for x in G + [BOTTOM]:
                kind = draw(st.sampled_from(["none", "noop", "push_in", "push_var", "push", "pop",
                                             "replace"]))
                q2, y = draw(st.sampled_from(Q)), draw(st.sampled_from(G))
                if kind == "none" or (x is BOTTOM and kind in ("pop", "replace")):
                    continue
                if kind == "push_in":
                    kind, y = "push", (a if a != "#" else y)
                if kind == "push_var":
                    kind, y = "push", (a.upper() if a != "#" and variants else y)
                gamma = {"noop": (x,), "push": (y, x), "pop": (), "replace": (y,)}[kind]
                if kind == "replace" and y == x:
                    gamma = (x,)
                if transducer:
                    out = draw(st.sampled_from(["top", "in", "blank"]))
                    o = {"top": x.lower() if x is not BOTTOM else "#", "in": a, "blank": "#"}[out]
                    t[(q, a, x)] = (q2, (o,), gamma)
                else:
                    t[(q, a, x)] = (q2, gamma)
    if transducer:
        return DPDT(Q, K + "#", K + "#", G, t, 0)
    return DPDA(Q, K + "#", G, t, 0, accepting=draw(st.sets(st.sampled_from(Q))))


@given(m=random_dpda(), controller=st.sampled_from(CONTROLLERS))
@settings(max_examples=30, deadline=None)
def test_random_machines_agree(m, controller):
    net = compile_grefenstette(m, controller)
    rep = pn.verify(m, net, max_length=5, samples=10, sample_lengths=(0, 60), long_samples=0,
                    seed=1)
    assert rep.ok, (controller, net.info["factoring"], rep.counterexample)


# --- exactness ------------------------------------------------------------------------------------
@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_weights_and_heads_are_exact(controller, dtype):
    m = pn.tasks.get("sequence_reversal", vocab_size=5, store="stack")
    net = compile_grefenstette(m, controller, dtype=dtype)
    state = net.module.state_dict()
    for name, w in net.weights.items():
        assert torch.equal(state[name], w.to_float(BETA, dtype)), name
    strings = pn.tasks.sample("sequence_reversal", 8, [10, 30], np.random.default_rng(2),
                              vocab_size=5, store="stack")
    T = max(len(s) for s in strings)
    ids = np.full((len(strings), T), -1)
    for b, s in enumerate(strings):
        ids[b, :len(s)] = [m.alphabet.index(x) for x in s]
    with torch.no_grad():
        states, _ = net.module(torch.as_tensor(ids))
        H = net.hidden_units
        h = states[:, 1:, :H].reshape(-1, H)
        act, value = net.module.actions(h)
        o = torch.tanh(net.module.out(h))
    valid = torch.as_tensor(ids).reshape(-1) >= 0
    assert set(act[valid].unique().tolist()) <= {0.0, 1.0}        # d, u exactly 0 or 1
    pushing = act[valid][:, 0] == 1
    assert set(value[valid][pushing].abs().unique().tolist()) == {1.0}   # exact ±1 codes
    assert set(o.abs().unique().tolist()) <= {0.0, 1.0}   # saturated (0: a bit no flag reads)
    if controller == "rnn":
        assert set(h.abs().unique().tolist()) <= {0.0, 1.0}


def test_abstraction_and_bound():
    net = compile_grefenstette_lstm(EXAMPLE_GREFENSTETTE_LSTM)
    a = net.abstraction
    assert a.factoring == "data_path" and a.start == 0
    assert len(a.labels) == net.hidden_units
    assert len(a.units) == net.info["control_units"]
    bound = int(net.bound.subs(net.params))
    assert net.hidden_units <= bound
    assert float(net.margin) > 0 and int(net.scale) * float(net.margin) > 745


# --- training -------------------------------------------------------------------------------------
@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("store", ("stack", "queue", "deque"))
def test_random_module_trains(controller, store):
    torch.manual_seed(0)
    net = GrefenstetteRNN(5, 16, 8, 5, controller=controller, store=store, embedding=6)
    ids = torch.randint(-1, 5, (4, 12))
    states, logits = net(ids)
    assert states.shape[:2] == (4, 13) and logits.shape == (4, 13, 5)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    target = torch.randint(0, 5, (4, 13))
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(ids)[1].reshape(-1, 5), target.reshape(-1))
        loss.backward()
        assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)
        opt.step()
    assert torch.isfinite(loss)


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_compiled_module_trains_from_the_compiled_weights(controller):
    m = pn.tasks.get("sequence_copy", vocab_size=4)
    net = compile_grefenstette(m, controller)
    module = net.module
    for p in module.parameters():
        p.data.add_(0.01 * torch.randn_like(p))   # off the saturated plateau: gradients flow
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    strings = pn.tasks.sample("sequence_copy", 6, [8, 16], np.random.default_rng(0), vocab_size=4)
    T = max(len(s) for s in strings)
    ids = torch.full((len(strings), T), -1)
    for b, s in enumerate(strings):
        ids[b, :len(s)] = torch.as_tensor([m.alphabet.index(x) for x in s])
    target = torch.randint(0, module.readout.out_features, ids.shape)
    for _ in range(3):
        opt.zero_grad()
        logits = module(ids)[1][:, 1:]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 target.reshape(-1))
        loss.backward()
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
        opt.step()


# --- bad input ------------------------------------------------------------------------------------
def test_epsilon_moves_name_the_buffered_model():
    t = {("p", "a", BOTTOM): ("p", ("A", BOTTOM)), ("p", "a", "A"): ("p", ("A", "A")),
         ("p", "#", "A"): ("r", ("A",)), ("r", EPSILON, "A"): ("r", ())}
    m = DPDA(["p", "r"], "a#", "A", t, "p", accepting=["r"])
    with pytest.raises(CompileError, match="buffered"):
        compile_grefenstette_lstm(m)
    assert isinstance(requires_grefenstette_rnn(m), CompileError)


def test_nondeterministic_pda_names_ns_rnn():
    with pytest.raises(CompileError, match="ns_rnn"):
        compile_grefenstette_rnn(pn.tasks.get("unmarked_reversal"))
    with pytest.raises(CompileError, match="ns_rnn"):
        compile_grefenstette_rnn("not a machine")


def test_empty_stack_acceptance_names_stack_rnn():
    t = {("q", "(", BOTTOM): ("q", ("X", BOTTOM)), ("q", "(", "X"): ("q", ("X", "X")),
         ("q", ")", "X"): ("q", ())}
    m = DPDA(["q"], "()", "X", t, "q", acceptance="empty_stack")
    with pytest.raises(CompileError, match="stack_rnn"):
        compile_grefenstette_lstm(m)


def test_bad_arguments():
    with pytest.raises(InputError, match="controller"):
        compile_grefenstette(EXAMPLE_GREFENSTETTE_LSTM, "gru")
    with pytest.raises(InputError, match="controller"):
        GrefenstetteRNN(3, 4, 4, 3, controller="gru")
    with pytest.raises(InputError, match="store"):
        GrefenstetteRNN(3, 4, 4, 3, store="heap")
    with pytest.raises(InputError, match="hidden"):
        GrefenstetteRNN(3, 0, 4, 3)
    with pytest.raises(InputError, match="codes"):
        GrefenstetteRNN(3, 4, 4, 3, codes=np.zeros((2, 3)))
    net = GrefenstetteRNN(3, 4, 4, 3)
    with pytest.raises(InputError, match="batch"):
        net(torch.zeros(3, dtype=torch.long))
    with pytest.raises(InputError, match="< 3"):
        net(torch.full((1, 2), 7))


# --- forward_window: the O(1)-per-step forward that pn.verify runs on long strings ----------------
def _ids(m, strings):
    T = max((len(s) for s in strings), default=0)
    ids = np.full((len(strings), T), -1)
    for b, s in enumerate(strings):
        ids[b, :len(s)] = [m.alphabet.index(x) for x in s]
    return torch.as_tensor(ids)


def _assert_window_equals_forward(net, ids, cells=3):
    full_states, full_logits = net.module(ids)
    out = net.module.forward_window(ids, cells)
    assert out is not None
    states, logits = out
    H = net.hidden_units + net.module.reading_size
    assert torch.equal(full_states[..., :H + 1], states[..., :H + 1])      # h_t, r_t, n_t
    assert torch.equal(full_logits, logits)
    n = full_states[..., H].long().numpy()
    contents = full_states[..., H + 1:].long().numpy()
    for k in range(cells):                                                 # the top cells
        pos = n - 1 - k
        want = np.where(pos >= 0, np.take_along_axis(contents, np.maximum(pos, 0)[..., None],
                                                     -1)[..., 0], -1)
        assert (states[..., H + 1 + k].long().numpy() == want).all(), k
    decoded, window = net.decode(full_states), net.module.window_decoder(states.numpy())
    assert (decoded["state"] == window["state"]).all()
    assert (decoded["depth"] == window["depth"]).all()


@given(m=random_dpda(), controller=st.sampled_from(CONTROLLERS), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_forward_window_equals_forward(m, controller, seed):
    net = compile_grefenstette(m, controller)
    ids = np.random.default_rng(seed).integers(-1, len(m.alphabet), (5, 30))
    ids[0, :] = np.random.default_rng(seed + 1).integers(0, len(m.alphabet), 30)   # unpadded
    _assert_window_equals_forward(net, torch.as_tensor(ids))


def test_forward_window_refuses_what_it_cannot_prove():
    net = compile_grefenstette(sequence_copy(3, "queue"), "lstm")   # a queue: ends + offset
    assert net.module.forward_window(torch.zeros(2, 4, dtype=torch.long)) is not None
    m = pn.tasks.get("dyck2")
    net = compile_grefenstette_rnn(m)
    ids = _ids(m, [("(", "[", "]")])
    assert net.module.forward_window(ids) is not None
    with torch.no_grad():
        net.module.push.bias.add_(0.3)            # d_t no longer exactly 0 or 1: not provable
        net.module.push.weight.mul_(1e-4)
    assert net.module.forward_window(ids) is None
    with pytest.raises(InputError, match="batch"):
        compile_grefenstette_rnn(m).module.forward_window(torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_verify_on_length_2000_is_windowed(controller):
    """pn.verify runs `forward_window` (top cells only) on long strings: 10 strings of length
    2,000 of Dyck-2 and of marked reversal, float32."""
    for name in ("dyck2", "reversal"):
        m = pn.tasks.get(name)
        net = compile_grefenstette(m, controller)
        strings = pn.tasks.sample(name, 10, [2000, 2000], np.random.default_rng(0))
        assert net.module.forward_window(_ids(m, strings[:2])) is not None
        t = time.process_time()
        rep = pn.verify(m, net, strings=strings, max_length=None, samples=0, long_samples=0)
        assert rep.ok, rep.counterexample
        assert "stack_top" in rep.fields
        assert time.process_time() - t < 10


# --- registers: states that hold a symbol --------------------------------------------------------
@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("kw", ({}, {"store": "queue"}), ids=("streaming", "queue"))
def test_bigram_flip_holds_the_pending_symbol_in_a_register(controller, kw):
    m = pn.tasks.get("bigram_flip", vocab_size=3, **kw)
    net = compile_grefenstette(m, controller)
    assert net.info["factoring"] == "registers" and net.info["registers"] == 2
    rep = _check(m, net, 8, samples=20, lengths=(0, 101) if not kw else (0, 100))
    assert "state" in rep.fields
    sizes = {V: estimate(pn.tasks.get("bigram_flip", vocab_size=V, **kw), controller)
             for V in (2, 8)}
    width = {V: int(np.ceil(np.log2(V))) for V in sizes}
    per_bit = (sizes[8]["hidden_units"] - sizes[2]["hidden_units"]) // (width[8] - width[2])
    assert sizes[8]["hidden_units"] - per_bit * width[8] == sizes[2]["hidden_units"] - per_bit
    assert sizes[8]["classes"] == sizes[2]["classes"] == 2


def test_bigram_flip_at_the_papers_vocabulary():
    """Vocabulary 128: compiles fast into a controller far below the paper's (LSTM hidden 256,
    stack width 256) and agrees with the machine on sampled strings (float32)."""
    m = pn.tasks.get("bigram_flip", vocab_size=128)
    compile_grefenstette_lstm(pn.tasks.get("bigram_flip", vocab_size=2))
    t = time.process_time()
    net = compile_grefenstette_lstm(m)
    assert time.process_time() - t < 2.0
    assert net.hidden_units <= 64 and net.module.width <= 256
    assert net.info["parameters"] < 20_000
    strings = pn.tasks.sample("bigram_flip", 40, [41, 161], np.random.default_rng(0),
                              vocab_size=128)
    rep = pn.verify(m, net, strings=strings, max_length=None, samples=0, long_samples=0)
    assert rep.ok, rep.counterexample


@st.composite
def register_machines(draw):
    """Random Mealy DFAs and DPDTs whose states include families (tag, x), x in the vocabulary:
    every move of a tag is drawn once relative to the step (the next register, pushed and
    emitted symbol: the register, the input, the top or a constant) and instantiated for every
    x, so that the register path applies."""
    V = ("s0", "s1", "s2")[:draw(st.integers(2, 3))]
    K = V + ("#",)
    plain = list(range(draw(st.integers(1, 2))))
    tags = ("A", "B")[:draw(st.integers(1, 2))]
    stack = draw(st.booleans())
    states = plain + [(g, x) for g in tags for x in V]
    tops = (V + (BOTTOM,)) if stack else (None,)
    t = {}
    for q in plain + list(tags):
        for a in K:
            for X in tops:
                if draw(st.integers(0, 5)) == 0:
                    continue

                def pick(options, _a=a, _q=q, _X=X):
                    kind = draw(st.sampled_from(options))
                    if kind == "in" and _a == "#":
                        kind = "const"
                    if kind == "reg" and _q in plain:
                        kind = "const"
                    if kind == "top" and _X in (None, BOTTOM):
                        kind = "const"
                    return kind, draw(st.sampled_from(V))

                nxt = draw(st.sampled_from(plain + list(tags)))
                rsrc = pick(("in", "reg", "top", "const"))
                osrc = pick(("in", "reg", "top", "const", "blank"))
                op = draw(st.sampled_from(("noop", "push", "pop", "replace"))) if stack else None
                if X is BOTTOM and op in ("pop", "replace"):
                    op = "noop"
                psrc = pick(("in", "reg", "top", "const"))
                for x in (V if q in tags else (None,)):
                    def val(src, _a=a, _x=x, _X=X):
                        kind, c = src
                        return {"in": _a, "reg": _x, "top": _X}.get(kind, c)
                    q1 = q if x is None else (q, x)
                    q2 = nxt if nxt in plain else (nxt, val(rsrc))
                    o = "#" if osrc[0] == "blank" else val(osrc)
                    key = (q1, a) if not stack else (q1, a, X)
                    if not stack:
                        t[key] = (q2, o)
                        continue
                    y = val(psrc)
                    gamma = {"noop": (X,), "push": (y, X), "pop": (), "replace": (y,)}[op]
                    t[key] = (q2, (o,), gamma)
    if not stack:
        from pdanet.automata.dfa import DFA
        return DFA(states, K, {k: v[0] for k, v in t.items()}, 0, accepting=(),
                   outputs={k: v[1] for k, v in t.items()}, output_alphabet=K)
    return DPDT(states, K, K, V, t, 0)


@given(m=register_machines(), controller=st.sampled_from(CONTROLLERS))
@settings(max_examples=25, deadline=None)
def test_random_register_machines_agree(m, controller):
    net = compile_grefenstette(m, controller)
    assert net.info["factoring"] == "registers"
    rep = pn.verify(m, net, max_length=5, samples=10, sample_lengths=(0, 60), long_samples=0,
                    seed=1)
    assert rep.ok, (controller, rep.counterexample)
    if isinstance(m, DPDT):
        _assert_window_equals_forward(net, _ids(m, [tuple(m.alphabet)[:1] * 7, ()]))


# --- forward_decoded: the store as symbol ids, what pn.verify runs ---------------------------------
STORE_MACHINES = {
    "copy_queue": sequence_copy(3, "queue"),
    "copy_deque": sequence_copy(3, "deque"),
    "reversal_deque": pn.tasks.get("sequence_reversal", vocab_size=3, store="deque"),
    "reversal_stack": pn.tasks.get("sequence_reversal", vocab_size=3, store="stack"),
    "bigram_flip_queue": pn.tasks.get("bigram_flip", vocab_size=3, store="queue"),
}


def _assert_decoded_equals_forward(module, ids):
    full_states, full_logits = module(ids)
    states, logits = module.forward_decoded(ids)
    W = max(full_states.shape[2], states.shape[2])

    def pad(s):
        return torch.nn.functional.pad(s, (0, W - s.shape[2]), value=-1)

    assert torch.equal(pad(full_states), pad(states))
    assert torch.equal(full_logits, logits)


@given(name=st.sampled_from(sorted(STORE_MACHINES)), controller=st.sampled_from(CONTROLLERS),
       seed=st.integers(0, 2**16), T=st.integers(0, 40))
@settings(max_examples=25, deadline=None)
def test_forward_decoded_equals_forward_on_every_store(name, controller, seed, T):
    m = STORE_MACHINES[name]
    net = compile_grefenstette(m, controller)
    ids = np.random.default_rng(seed).integers(-1, len(m.alphabet), (4, T))
    assert net.module._discrete(torch.as_tensor(ids), None) is not None   # exact: no fallback
    _assert_decoded_equals_forward(net.module, torch.as_tensor(ids))


@given(m=random_dpda(), controller=st.sampled_from(CONTROLLERS), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_forward_decoded_equals_forward_on_random_machines(m, controller, seed):
    net = compile_grefenstette(m, controller)
    ids = np.random.default_rng(seed).integers(-1, len(m.alphabet), (4, 25))
    _assert_decoded_equals_forward(net.module, torch.as_tensor(ids))


@pytest.mark.parametrize("store", ("stack", "queue", "deque"))
def test_forward_decoded_falls_back_where_not_exact(store):
    torch.manual_seed(0)
    module = GrefenstetteRNN(4, 8, 3, 4, store=store, codes=np.array([[1, 0, 1], [1, 1, 0],
                                                                      [0, 0, 0]]))
    ids = torch.randint(-1, 4, (3, 12))
    assert module._discrete(ids, None) is None          # random weights: strengths in (0, 1)
    _assert_decoded_equals_forward(module, ids)


def test_verify_on_long_queue_strings_uses_the_symbol_store():
    m = pn.tasks.get("sequence_copy", vocab_size=8)
    net = compile_grefenstette_lstm(m)
    strings = pn.tasks.sample("sequence_copy", 6, [1000, 1000], np.random.default_rng(0),
                              vocab_size=8)
    assert net.module._discrete(_ids(m, strings), None) is not None
    rep = pn.verify(m, net, strings=strings, max_length=None, samples=0, long_samples=0)
    assert rep.ok and rep.steps_checked >= 6 * 1000, rep.counterexample


@pytest.mark.parametrize("controller", CONTROLLERS)
@pytest.mark.parametrize("kw", ({}, {"store": "queue"}), ids=("streaming", "queue"))
def test_register_path_keeps_the_certified_margin(controller, kw):
    """Every controller pre-activation (LSTM: the output gates) is at least the stated margin
    from 0 in units of β (float64), the heads' push / pop / output rows too."""
    m = pn.tasks.get("bigram_flip", vocab_size=5, **kw)
    net = compile_grefenstette(m, controller, dtype=torch.float64)
    mod, H = net.module, net.hidden_units
    strings = pn.tasks.sample("bigram_flip", 20, [40] if kw else [41], np.random.default_rng(0),
                              vocab_size=5, **kw)
    ids = _ids(m, strings)
    with torch.no_grad():
        states, _ = mod(ids)
        h, r = states[:, :-1, :H], states[:, :-1, H:H + mod.reading_size]
        inp = torch.cat([mod.embedding(ids), r], -1)
        z = (inp @ mod.cell.weight_ih.T + h @ mod.cell.weight_hh.T + mod.cell.bias_ih
             + mod.cell.bias_hh) / BETA
        z = z[..., 3 * H:] if controller == "lstm" else z
        after = states[:, 1:, :H]
        heads = torch.cat([mod.push(after), mod.pop(after), mod.out(after)], -1) / BETA
    assert z.abs().min().item() >= float(net.margin)
    assert heads.abs().min().item() >= float(net.margin) or heads.abs()[heads != 0].min() >= 0.49


# --- the weights, bit for bit ----------------------------------------------------------------------
WEIGHT_MACHINES = {
    "bigram_flip": lambda: pn.tasks.get("bigram_flip", vocab_size=3),
    "bigram_flip_queue": lambda: pn.tasks.get("bigram_flip", vocab_size=3, store="queue"),
    "copy_queue": lambda: sequence_copy(3, "queue"),
    "copy_deque": lambda: sequence_copy(3, "deque"),
    "reversal_deque": lambda: pn.tasks.get("sequence_reversal", vocab_size=3, store="deque"),
    "dyck2": lambda: pn.tasks.get("dyck2"),
    "two_sources": _two_sources,
    "parity": lambda: pn.tasks.get("parity"),
}
# sha256 (first 16 hex digits) of every weight block: name, dtype, shape, denominator, scaling and
# the exact numerators, as the compiler gave them; one row per (machine, controller)
WEIGHT_DIGESTS = {
    ("bigram_flip", "rnn"): ("registers", "b8d4d47fd8a81edf"),
    ("bigram_flip", "lstm"): ("registers", "0214bbfa6db27585"),
    ("bigram_flip_queue", "rnn"): ("registers", "8e9079ee37e57a5a"),
    ("bigram_flip_queue", "lstm"): ("registers", "05d14a8e2688803b"),
    ("copy_queue", "rnn"): ("data_path", "c7a4c14dc8415afb"),
    ("copy_queue", "lstm"): ("data_path", "8ab9ef407a5f64c2"),
    ("copy_deque", "rnn"): ("data_path", "78bbe5c9638bf3c5"),
    ("copy_deque", "lstm"): ("data_path", "9ba993b482cc35a9"),
    ("reversal_deque", "rnn"): ("data_path", "eb83046606aa2e7a"),
    ("reversal_deque", "lstm"): ("data_path", "41d854e14b7f4c08"),
    ("dyck2", "rnn"): ("data_path", "961f4f6cfb7bc2c8"),
    ("dyck2", "lstm"): ("data_path", "0af5056ce98bd6ce"),
    ("two_sources", "rnn"): ("none", "55ff627d6a57632a"),
    ("two_sources", "lstm"): ("none", "7a920c8387407b7f"),
    ("parity", "rnn"): ("none", "f91a5240c7948e92"),
    ("parity", "lstm"): ("none", "911a7f9000885d39"),
}


def _weight_digest(weights):
    import hashlib
    h = hashlib.sha256()
    for k in sorted(weights):
        e = weights[k]
        h.update(f"{k}|{e.numer.dtype}|{e.numer.shape}|{e.denom}|{e.scaled}|".encode())
        h.update(repr(e.numer.tolist()).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("name, controller", sorted(WEIGHT_DIGESTS))
def test_weights_are_bit_identical_on_every_path(name, controller):
    """The register path and the data path build their shared blocks (embedding, control units,
    cell, h_0, d/u/v heads, o_t and readout) with the same code; each compiled weight is kept
    exactly as recorded."""
    net = compile_grefenstette(WEIGHT_MACHINES[name](), controller)
    factoring, digest = WEIGHT_DIGESTS[(name, controller)]
    assert net.info["factoring"] == factoring
    assert _weight_digest(net.weights) == digest
    # the same machine compiled twice gives the same blocks
    again = compile_grefenstette(WEIGHT_MACHINES[name](), controller).weights
    assert sorted(again) == sorted(net.weights)
    for k, e in net.weights.items():
        assert e.denom == again[k].denom and e.scaled == again[k].scaled
        assert np.array_equal(e.numer, again[k].numer)

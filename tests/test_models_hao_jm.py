"""Hao et al. (2018) linear / LSTM / buffered models and the Joulin–Mikolov (2015) Stack-RNN,
compiled: every applicable seed task and random real-time machines verify in lockstep (full
stack contents, not only outputs), heads saturate exactly, the modules train, and machines a
model cannot express get typed errors naming the model that can."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from strategies import realtime_dpda

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.pdt import DPDT
from pdanet.errors import CertificationError, CompileError, InputError, UnboundedStackError
from pdanet.models import hao
from pdanet.models import joulin_mikolov as jm
from pdanet.models.hao import (
    HaoBufferedStackRNN,
    HaoStackRNN,
    PaperController,
    compile_hao_buffered,
    compile_hao_linear,
    compile_hao_lstm,
)
from pdanet.models.joulin_mikolov import JoulinMikolovStackRNN, compile_joulin_mikolov_stack_rnn
from pdanet.verify.strings import random_walks

COMPILERS = {"hao_lstm": compile_hao_lstm, "hao_linear": compile_hao_linear,
             "hao_buffered": compile_hao_buffered, "joulin_mikolov_stack_rnn": compile_joulin_mikolov_stack_rnn}
REQUIRES = {"hao_lstm": hao.requires_hao_lstm, "hao_linear": hao.requires_hao_linear,
            "hao_buffered": hao.requires_hao_buffered,
            "joulin_mikolov_stack_rnn": jm.requires_joulin_mikolov_stack_rnn}
SMALL_VOCAB = ("sequence_reversal", "sequence_copy", "bigram_flip")


def _task(name):
    return pn.tasks.get(name, vocab_size=2) if name in SMALL_VOCAB else pn.tasks.get(name)


def _applicable():
    """(task, model) for every seed task whose real-time deterministic machine the model's
    store can hold (the others must be refused with a typed error: test_refusals_are_typed)."""
    cases = []
    for name in pn.tasks.names():
        m = _task(name)
        for model, req in REQUIRES.items():
            if req(m) is None:
                cases.append((name, model))
    return cases


CASES = _applicable()


def test_applicable_set_is_the_expected_one():
    """Every seed task with a real-time deterministic stack machine compiles to hao_lstm and
    joulin_mikolov_stack_rnn; the buffered model takes every transducer among them (Mealy machines
    included); the one-state linear controller takes none of the seed tasks."""
    by_model = {k: {n for n, mo in CASES if mo == k} for k in COMPILERS}
    assert by_model["hao_lstm"] == by_model["joulin_mikolov_stack_rnn"]
    assert {"dyck2", "dyck6", "reversal", "boolean_formula", "parity", "solve_equation",
            "cumulative_xor", "bigram_flip"} <= by_model["hao_lstm"]
    assert {"cumulative_xor", "delayed_xor", "bigram_flip", "reversal",
            "sequence_reversal"} <= by_model["hao_buffered"]
    assert by_model["hao_buffered"] <= by_model["hao_lstm"]
    assert not by_model["hao_linear"]


def _max_length(m):
    K = len(m.alphabet)
    return 6 if K <= 4 else (4 if K <= 8 else 3)


_SLOW = {("solve_equation", "joulin_mikolov_stack_rnn"), ("solve_equation", "hao_lstm")}


@pytest.mark.parametrize("name, model", [c for c in CASES if c not in _SLOW],
                         ids=[f"{n}-{m}" for n, m in CASES if (n, m) not in _SLOW])
def test_seed_tasks_compile_and_verify(name, model):
    m = _task(name)
    net = COMPILERS[model](m)
    rep = pn.verify(m, net, max_length=_max_length(m), samples=10, sample_lengths=(0, 60),
                    long_samples=0, seed=3)
    assert rep.ok, rep.counterexample
    fields = set(m.run_batch(np.zeros((1, 0), int)).fields)
    assert ({"state", "output"} | ({"stack", "depth", "top"} & fields)) <= set(rep.fields)
    assert net.hidden_units <= net.bound_value
    assert net.method == model and isinstance(net.abstraction, PaperController)


@pytest.mark.slow
@pytest.mark.parametrize("name, model", sorted(_SLOW))
def test_large_seed_tasks(name, model):
    m = _task(name)
    rep = pn.verify(m, COMPILERS[model](m), max_length=3, samples=20, long_samples=0)
    assert rep.ok, rep.counterexample


@pytest.mark.parametrize("model", list(COMPILERS))
def test_examples(model):
    ex = getattr(hao if model.startswith("hao") else jm, f"EXAMPLE_{model.upper()}")
    assert REQUIRES[model](ex) is None
    net = COMPILERS[model](ex)
    rep = pn.verify(ex, net, max_length=8, samples=20, long_samples=2, long_length=300)
    assert rep.ok, rep.counterexample


def test_linear_controller_reverses_strings_without_hidden_units():
    """The paper's one-state string reversal (push each symbol emitting #, pop on #) runs on
    the linear controller σ(W[x_t; r_{t−1}]): no hidden units; outputs y_t read r_{t−1}."""
    m = hao.EXAMPLE_HAO_LINEAR
    net = compile_hao_linear(m)
    assert net.hidden_units == 0 and net.module.controller == "linear"
    assert not [n for n in net.module.state_dict() if n.startswith("cell")]
    out = net.run("01#")
    assert out["output"].tolist() == [-1, 2, 2, m.output_alphabet.index("1")]
    assert out["depth"].tolist() == [0, 1, 2, 1]


# --- exactness ------------------------------------------------------------------------------------
@pytest.mark.parametrize("model, task", [("hao_lstm", "dyck2"), ("hao_linear", None),
                                         ("hao_buffered", "reversal"),
                                         ("joulin_mikolov_stack_rnn", "dyck2"),
                                         ("joulin_mikolov_stack_rnn", "boolean_formula")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_weights_are_the_exact_weights_and_heads_saturate(model, task, dtype):
    m = hao.EXAMPLE_HAO_LINEAR if task is None else _task(task)
    net = COMPILERS[model](m, dtype=dtype)
    state = net.module.state_dict()
    assert set(state) == set(net.weights)
    for name, w in net.weights.items():
        assert torch.equal(state[name], w.to_float(net.scale, dtype)), name
    strings = _live(m, 20, 40)
    rep = pn.verify(m, net, strings=strings, max_length=4, samples=0, long_samples=0)
    assert rep.ok, rep.counterexample
    ids, _ = net.encode(strings)
    trace = net.module.trace_actions(ids)
    if model == "joulin_mikolov_stack_rnn":
        acts, vals = trace
        valid = torch.as_tensor(ids >= 0)
        live = acts[valid]
        assert set(torch.unique(live).tolist()) <= {0.0, 1.0}
        assert set(torch.unique(vals[valid]).tolist()) <= {0.0, 1.0}
        assert bool((live.sum(1) == 1).all())   # one-hot at every step of a live string
    else:
        for key, v in trace.items():
            assert set(torch.unique(v).tolist()) <= {0.0, 1.0}, key
    states, _ = net.forward(ids)
    H = net.hidden_units
    active = {float(torch.tanh(torch.tensor(1.0, dtype=dtype))), 1.0}
    if H:
        assert set(torch.unique(states[..., :H]).tolist()) <= {0.0} | active


def test_sigmoid_and_softmax_saturate_exactly_at_the_margin():
    """The scale argument: at β·margin the kernels give exact 0/1 in both dtypes."""
    for dtype in (torch.float32, torch.float64):
        z = torch.tensor([float(hao.BETA) * 3 / 8], dtype=dtype)
        assert torch.sigmoid(z).item() == 1.0 and torch.sigmoid(-z).item() == 0.0
        z = torch.tensor([float(jm.BETA) / 2], dtype=dtype)
        assert torch.sigmoid(z).item() == 1.0 and torch.sigmoid(-z).item() == 0.0
        sm = torch.softmax(torch.tensor([1.0, -1.0, -1.0], dtype=dtype) * jm.BETA / 2, 0)
        assert sm.tolist() == [1.0, 0.0, 0.0]


# --- random machines ------------------------------------------------------------------------------
def random_dpda(max_states=4, final_state=True):
    return realtime_dpda(max_states=max_states, empty_stack=not final_state)


@st.composite
def random_dpdt(draw, max_states=3):
    m = draw(random_dpda(max_states))
    outs = ["o", "p"]
    t = {k: (v[0], draw(st.sampled_from(outs + [EPSILON])), v[1])
         for k, v in _moves(m).items()}
    return DPDT(list(m.states), list(m.alphabet.symbols), outs, list(m.stack_alphabet), t,
                m.start)


def _moves(m):
    """(q, a, X) → (q2, pushed string) of a DPDA, top first."""
    out = {}
    for key in m.transitions:
        op, y = m.op(key)
        x = key[2]
        q2 = m.transitions[key][0]
        out[key] = (q2, {"noop": (x,), "push": (y, x), "pop": (), "replace": (y,)}[op])
    return out


@given(m=random_dpda(), model=st.sampled_from(["hao_lstm", "joulin_mikolov_stack_rnn"]))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_dpdas(m, model):
    net = COMPILERS[model](m)
    rep = pn.verify(m, net, max_length=5, samples=10, sample_lengths=(0, 60), long_samples=0,
                    seed=1)
    assert rep.ok, (model, rep.counterexample)


@given(m=random_dpdt(), model=st.sampled_from(["hao_lstm", "hao_buffered", "joulin_mikolov_stack_rnn"]))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_dpdts(m, model):
    rep = pn.verify(m, COMPILERS[model](m), max_length=5, samples=5, sample_lengths=(0, 30),
                    long_samples=0, seed=2)
    assert rep.ok, (model, rep.counterexample)


@st.composite
def random_mealy(draw):
    n, k = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    A = "abc"[:k]
    trans = {(q, a): draw(st.sampled_from(range(n))) for q in range(n) for a in A}
    outs = {key: draw(st.sampled_from("xyz")) for key in trans}
    return DFA(states=range(n), alphabet=A, transitions=trans, start=0, outputs=outs,
               output_alphabet="xyz")


@given(m=random_mealy())
@settings(max_examples=25, deadline=None)
def test_random_mealy_machines_on_the_buffered_model(m):
    net = compile_hao_buffered(m)
    assert isinstance(net.module, HaoBufferedStackRNN)
    rep = pn.verify(m, net, max_length=6, samples=5, long_samples=0)
    assert rep.ok, rep.counterexample
    assert "output" in rep.fields and "state" in rep.fields
    # the paper's output tape (the drained output buffer) is the machine's output string
    strings = _live(m, 8, 7)
    ids, lengths = m.encode(strings)
    tape = net.module.output_tape(torch.as_tensor(ids)).argmax(-1).numpy()
    want = np.asarray(m.run_batch(ids, lengths).fields["output"])[:, 1:]
    for b, L in enumerate(lengths):
        assert tape[b, :L].tolist() == want[b, :L].tolist()
    trace = net.module.trace_actions(torch.as_tensor(ids))
    valid = torch.as_tensor(ids >= 0)
    assert bool((trace["input_pop"][valid] == 1).all() and (trace["output_push"][valid] == 1).all())


def _linear_oracle(m):
    """Brute force: can each head of a one-state machine be written as a threshold of
    [one-hot x; one-hot r]? LP feasibility per head (scipy), independent of the construction."""
    G, K = len(m.stack_alphabet), len(m.alphabet)
    readable, grew = {G}, True
    while grew:                               # the stack tops that can be read (fixpoint)
        new = {m.stack_code(m.op(k)[1]) for k in m.transitions
               if m.stack_code(k[2]) in readable and m.op(k)[1] is not None}
        grew = not new <= readable
        readable |= new
    table = {}
    for (q, a, x), v in m.transitions.items():
        op, y = m.op((q, a, x))
        table[(m.alphabet.index(a), m.stack_code(x))] = (op, y, v[1])
    heads = [("op", ("push", "replace")), ("op", ("pop", "replace"))]
    heads += [("bit", b) for b in range(G)] + [("out", k) for k in m.output_alphabet]

    def is_on(head, o):
        kind, arg = head
        if kind == "op":
            return o[0] in arg
        if kind == "bit":
            return o[1] is not None and m.stack_code(o[1]) == arg
        return tuple(o[2]) == (arg,)

    for i, head in enumerate(heads):
        A, b = [], []
        for (a, R), o in table.items():
            if R not in readable:
                continue
            if 2 <= i < 2 + G and o[1] is None:
                continue                      # a value bit matters only where the step pushes
            row = np.zeros(K + G + 2)
            row[a], row[K + R] = 1, 1
            on = is_on(head, o)
            A.append(-row if on else row)
            b.append(-1.0)
        if i >= 2 + G:                        # the output before any input: none
            row = np.zeros(K + G + 2)
            row[K + G + 1], row[K + G] = 1, 1
            A.append(row)
            b.append(-1.0)
        if A and linprog(np.zeros(K + G + 2), A_ub=np.array(A), b_ub=np.array(b),
                         bounds=[(None, None)] * (K + G + 2)).status == 2:
            return False
    return True


@given(m=random_dpdt(max_states=1))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_linear_controller_takes_exactly_the_threshold_machines(m):
    """One-state DPDTs: hao_linear accepts exactly those whose heads are threshold functions
    (LP oracle); what it accepts verifies exhaustively, what it refuses names hao_lstm."""
    why = hao.requires_hao_linear(m)
    assert (why is None) == _linear_oracle(m), why
    if why is None:
        rep = pn.verify(m, compile_hao_linear(m), max_length=6, samples=5, long_samples=0)
        assert rep.ok, rep.counterexample
    else:
        assert isinstance(why, CompileError) and "hao_lstm" in str(why)
        with pytest.raises(CompileError, match="hao_lstm"):
            compile_hao_linear(m)


def test_xor_table_is_refused_by_the_linear_controller():
    """Push on (a, X) and (b, Y) but not on (a, Y) or (b, X): an XOR table (Minsky–Papert)."""
    t = {(0, "a", BOTTOM): (0, "o", ("X", BOTTOM)), (0, "b", BOTTOM): (0, "o", ("Y", BOTTOM)),
         (0, "a", "X"): (0, "o", ("X", "X")), (0, "b", "Y"): (0, "o", ("Y", "Y")),
         (0, "a", "Y"): (0, "o", ("Y",)), (0, "b", "X"): (0, "o", ("X",))}
    m = DPDT([0], "ab", ["o"], ["X", "Y"], t, 0)
    with pytest.raises(CompileError, match="push head.*hao_lstm"):
        compile_hao_linear(m)
    assert pn.verify(m, compile_hao_lstm(m), max_length=6, samples=0, long_samples=0).ok


# --- training -------------------------------------------------------------------------------------
def _live(m, n, length, seed=0):
    """n random live strings (random live walks of up to `length` symbols; a walk stops early
    where no extension is live), longest first."""
    ids, lengths = random_walks(m, n, length, np.random.default_rng(seed))
    syms = m.alphabet.symbols
    order = np.argsort(-lengths, kind="stable")
    return [tuple(syms[i] for i in ids[b, :lengths[b]]) for b in order]


def _batch(m, n=16, length=12, seed=0):
    strings = _live(m, n, length, seed)
    assert all(len(s) == length for s in strings)
    ids, lengths = m.encode(strings)
    out = m.run_batch(ids, lengths).fields["output"]
    return torch.as_tensor(ids), torch.as_tensor(np.asarray(out, dtype=np.int64))


def _loss(logits, target, accept):
    if accept:
        return torch.nn.functional.binary_cross_entropy_with_logits(
            logits[..., 0], target.to(logits.dtype))
    O = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, O),
                                             torch.where(target < 0, O - 1, target).reshape(-1))


@pytest.mark.parametrize("model, task", [("hao_lstm", "dyck2"), ("hao_linear", None),
                                         ("hao_buffered", "cumulative_xor"),
                                         ("joulin_mikolov_stack_rnn", "dyck2")])
def test_adam_steps_from_compiled_and_random_weights(model, task):
    m = hao.EXAMPLE_HAO_LINEAR if task is None else _task(task)
    accept = m.output_kind == "accept" if hasattr(m, "output_kind") else True
    ids, target = _batch(m)
    net = COMPILERS[model](m)
    module = net.module
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        loss = _loss(module(ids)[1], target, accept)
        loss.backward()
        assert torch.isfinite(loss)
        for p in module.parameters():
            assert p.grad is None or bool(torch.isfinite(p.grad).all())
        opt.step()
    assert pn.verify(m, net, max_length=4, samples=0, long_samples=0).ok
    # the same module class from its random (paper) initialisation learns
    torch.manual_seed(0)
    fresh = type(module)(*_ctor_args(net))
    opt = torch.optim.Adam(fresh.parameters(), lr=3e-2)
    losses = []
    for _ in range(25):
        opt.zero_grad()
        if isinstance(fresh, HaoBufferedStackRNN):    # the paper's loss: the drained output tape
            loss = _loss(fresh.output_tape(ids), target[:, 1:], accept)
        else:
            loss = _loss(fresh(ids)[1], target, accept)
        loss.backward()
        grads = [p.grad for p in fresh.parameters() if p.grad is not None]
        assert grads and all(bool(torch.isfinite(g).all()) for g in grads)
        assert any(bool(g.abs().sum() > 0) for g in grads)
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def _ctor_args(net):
    mod = net.module
    codes = mod.codes.codes
    O = net.weights["out.bias" if "out.bias" in net.weights else "Y.bias"].shape[0]
    if isinstance(mod, HaoBufferedStackRNN):
        return (mod.num_symbols, codes, O, mod.hidden)
    if isinstance(mod, HaoStackRNN):
        return (mod.num_symbols, codes, O, mod.controller, max(mod.hidden, 1))
    return (mod.U.num_embeddings, mod.h0.shape[0], codes, O)


# --- bad input ------------------------------------------------------------------------------------
def _eps_dpdt():
    t = {(0, "a", BOTTOM): (1, "x", ("A", BOTTOM)), (1, EPSILON, "A"): (0, "y", ("A",)),
         (0, "a", "A"): (1, "x", ("A", "A"))}
    return DPDT([0, 1], "a", "xy", ["A"], t, 0)


def test_refusals_are_typed_and_name_the_model_that_can():
    nondet = pn.tasks.get("unmarked_reversal")
    assert isinstance(nondet, PDA)
    for fn in COMPILERS.values():
        with pytest.raises(CompileError, match="ns_rnn"):
            fn(nondet)
        with pytest.raises(CompileError, match="buffered"):
            fn(_eps_dpdt())
        with pytest.raises(CompileError, match="grefenstette"):
            fn(pn.tasks.get("sequence_copy", vocab_size=2))   # a queue
    empty = DPDA([0], "ab", ["A"], {(0, "a", BOTTOM): (0, ("A", BOTTOM)),
                                    (0, "a", "A"): (0, ("A", "A")), (0, "b", "A"): (0, ())},
                 0, acceptance="empty_stack")
    for model in ("hao_lstm", "hao_linear", "joulin_mikolov_stack_rnn"):
        with pytest.raises(CompileError, match="grefenstette"):
            COMPILERS[model](empty)
    with pytest.raises(CompileError, match="hao_lstm"):
        compile_hao_linear(pn.tasks.get("dyck2"))                # two controller states
    with pytest.raises(CompileError, match="hao_lstm"):
        compile_hao_buffered(pn.tasks.get("dyck2"))              # a recogniser
    with pytest.raises(UnboundedStackError, match="drop `depth`"):
        compile_joulin_mikolov_stack_rnn(pn.tasks.get("dyck2"), depth=4)
    net = compile_joulin_mikolov_stack_rnn(pn.tasks.get("parity"), depth=2)   # never pushes: fixed depth ok
    assert net.module.store.depth == 2
    assert pn.verify(pn.tasks.get("parity"), net, max_length=6, samples=0, long_samples=0).ok
    for model, fn in COMPILERS.items():
        with pytest.raises(InputError):
            fn(pn.tasks.get("dyck2") if model != "hao_linear" else hao.EXAMPLE_HAO_LINEAR,
               dtype="int8")
        with pytest.raises(InputError):
            fn(hao.EXAMPLE_HAO_LINEAR, bogus=1)
    with pytest.raises(InputError, match="one_hot"):
        compile_hao_linear(hao.EXAMPLE_HAO_LINEAR, code="binary")
    with pytest.raises(InputError):
        compile_joulin_mikolov_stack_rnn(pn.tasks.get("dyck2"), depth=0)
    with pytest.raises(CompileError):
        compile_hao_lstm("not a machine")


def test_modules_reject_bad_ids_and_buffered_certify_says_use_verify():
    codes = np.eye(2, dtype=np.int64)
    for mod in (HaoStackRNN(3, codes, 2, "lstm", 4), HaoStackRNN(3, codes, 2, "linear"),
                HaoBufferedStackRNN(3, codes, 2, 4), JoulinMikolovStackRNN(3, 4, codes, 2)):
        with pytest.raises(InputError, match="batch, time"):
            mod(torch.zeros(3, dtype=torch.long))
        states, logits = mod(torch.tensor([[0, 1, 2], [2, -1, -1]]))
        assert states.shape[:2] == (2, 4) and logits.shape == (2, 4, 2)
    with pytest.raises(InputError):
        HaoStackRNN(3, codes, 2, "gru")
    with pytest.raises(InputError, match="padding"):
        HaoBufferedStackRNN(3, codes, 2, 4)(torch.tensor([[-1, 0]]))
    with pytest.raises(CertificationError, match="verify"):
        pn.certify(hao.EXAMPLE_HAO_BUFFERED, compile_hao_buffered(hao.EXAMPLE_HAO_BUFFERED))


# --- forward_window: O(1) per step, exact ---------------------------------------------------------
@st.composite
def random_ids(draw, m, max_len=14, rows=6, live=True):
    """Symbol rows padded with -1: live walks of random lengths (``live``), or any symbols."""
    K = len(m.alphabet)
    T = draw(st.integers(0, max_len))
    if live:
        ids, _ = random_walks(m, rows, T, np.random.default_rng(draw(st.integers(0, 2**16))))
        ids = np.concatenate([ids, np.full((rows, T - ids.shape[1]), -1)], 1).astype(np.int64)
    else:
        ids = np.array([[draw(st.integers(0, K - 1)) for _ in range(T)] for _ in range(rows)],
                       dtype=np.int64).reshape(rows, T)
    for b in range(rows):
        cut = draw(st.integers(0, T))
        if cut < T:
            ids[b, cut:] = -1
    return ids


def _check_window(net, ids, cells=3, live=True):
    """forward_window equals forward: h, r, n and logits bit for bit, the window cells are the
    top cells of forward's read-back, and the window decoder gives forward's decoded fields. On
    live strings the window always proves exactness; elsewhere (a dead prefix leaves the
    Joulin–Mikolov controller without an active unit: a uniform softmax) it may decline."""
    module = net.module
    ids_t = torch.as_tensor(ids)
    states, logits = module.forward(ids_t)
    out = module.forward_window(ids_t, cells)
    if out is None and not live:
        return
    assert out is not None
    wstates, wlogits = out
    assert torch.equal(logits, wlogits)
    head = wstates.shape[2] - cells                      # [h; r; n]
    assert torch.equal(states[..., :head], wstates[..., :head])
    n = states[..., head - 1].long().numpy()
    contents = states[..., head:].long().numpy()         # bottom first, −1 padding
    win = wstates[..., head:].long().numpy()              # top first
    for i in range(cells):
        pos = n - 1 - i
        want = np.where(pos >= 0, np.take_along_axis(contents, np.maximum(pos, 0)[..., None],
                                                     2)[..., 0], -1)
        assert np.array_equal(win[..., i], want), i
    full, got = net.decode(states), module.window_decoder(wstates.numpy())
    for name in ("state", "depth", "top"):
        assert np.array_equal(full[name], got[name]), name
    D = full["stack"].shape[2]
    for i in range(cells):
        pos = full["depth"] - i
        want = np.where(pos >= 0, np.take_along_axis(full["stack"], np.clip(pos, 0, D - 1)[..., None],
                                                     2)[..., 0], -1)
        assert np.array_equal(got["stack_top"][..., i], np.where(full["depth"] < 0, -1, want)), i


@given(data=st.data(), m=random_dpda(),
       model=st.sampled_from(["hao_lstm", "joulin_mikolov_stack_rnn"]))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_window_equals_forward_on_random_dpdas(data, m, model):
    if REQUIRES[model](m) is not None:             # empty-stack DPDAs: refused, tested elsewhere
        return
    net = COMPILERS[model](m)
    _check_window(net, data.draw(random_ids(m)))
    _check_window(net, data.draw(random_ids(m, live=False)), live=False)


@given(data=st.data(), m=random_dpdt(),
       model=st.sampled_from(["hao_lstm", "hao_buffered", "joulin_mikolov_stack_rnn"]))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_window_equals_forward_on_random_dpdts(data, m, model):
    net = COMPILERS[model](m)
    ids = data.draw(random_ids(m))
    _check_window(net, ids)
    if model == "hao_buffered":                # the discrete buffers alone: forward, bit for bit
        states, logits = net.module.forward(torch.as_tensor(ids))
        s2, l2 = net.module.forward_decoded(torch.as_tensor(ids))
        assert torch.equal(states, s2) and torch.equal(logits, l2)


@given(data=st.data(), m=random_mealy())
@settings(max_examples=25, deadline=None)
def test_buffered_forward_decoded_equals_forward_on_mealy_machines(data, m):
    net = compile_hao_buffered(m)
    net.module.control_only = False            # the discrete buffers alone, the neural stack
    ids = torch.as_tensor(data.draw(random_ids(m)))
    states, logits = net.module.forward(ids)
    s2, l2 = net.forward_decoded(ids)
    assert torch.equal(states, s2) and torch.equal(logits, l2)


def test_linear_controller_window():
    m = hao.EXAMPLE_HAO_LINEAR
    ids, _ = random_walks(m, 12, 40, np.random.default_rng(4))
    _check_window(compile_hao_linear(m), ids)


@pytest.mark.parametrize("model, task", [("hao_lstm", "dyck2"), ("hao_linear", None),
                                         ("hao_buffered", "parenthesis_prediction"),
                                         ("joulin_mikolov_stack_rnn", "boolean_formula")])
def test_long_verify_runs_windowed(model, task):
    """verify's long phase takes the windowed path (O(1) per step) and passes."""
    from pdanet.verify import lockstep
    from pdanet.verify.strings import long_strings

    m = hao.EXAMPLE_HAO_LINEAR if task is None else _task(task)
    net = COMPILERS[model](m)
    ids, _ = long_strings(m, 4, lockstep.WINDOW_MIN_STEPS, np.random.default_rng(0))
    assert lockstep._forward_window(m, net, ids) is not None
    rep = pn.verify(m, net, max_length=3, samples=0, long_samples=40, long_length=2000, seed=5)
    assert rep.ok, rep.counterexample


def test_window_declines_where_it_cannot_prove_exactness():
    """Unsaturated heads (a push strength strictly between 0 and 1), a value that is no code, a
    fixed-depth stack that would drop its bottom: forward_window returns None; verify still
    answers through forward, with the counterexample."""
    m = pn.tasks.get("dyck2")
    ids = torch.as_tensor(random_walks(m, 4, 30, np.random.default_rng(1))[0])
    for model in ("hao_lstm", "joulin_mikolov_stack_rnn"):
        net = COMPILERS[model](m)
        assert net.module.forward_window(ids) is not None
        with torch.no_grad():
            if model == "hao_lstm":            # d = σ(−3β/8 + 3β/8) = 1/2 where no push
                net.module.push.bias += 4096 * 0.375
            else:                              # push logit 8 below the chosen one: e^−8
                net.module.A.bias[0] += 2040.0
        assert net.module.forward_window(ids) is None
        rep = pn.verify(m, net, max_length=4, samples=0, long_samples=2, long_length=600)
        assert rep.ok != (rep.counterexample is not None)
        assert rep.ok or rep.counterexample.phase in ("exhaustive", "long")
    net = compile_hao_lstm(m)
    with torch.no_grad():
        net.module.value.bias += 4096 * 0.375 - 3.0   # σ(−3) on a 0 bit: no code
    assert net.module.forward_window(ids) is None
    from pdanet.constructions.stacks.superposition import SuperpositionStack

    net = compile_joulin_mikolov_stack_rnn(m)
    net.module.store = SuperpositionStack(1)
    deep = torch.as_tensor(m.encode([tuple("(([[")])[0])
    assert net.module.forward_window(deep) is None
    buf = compile_hao_buffered(pn.tasks.get("reversal"))
    rid = torch.as_tensor(random_walks(buf.machine, 4, 12, np.random.default_rng(2))[0])
    with torch.no_grad():
        buf.module.io.bias[0] -= 4096 * 0.5     # input pop strength σ(−β/8): no longer 1
    assert buf.module.forward_window(rid) is None
    s1, l1 = buf.module.forward(rid)
    s2, l2 = buf.module.forward_decoded(rid)     # falls back to forward
    assert torch.equal(s1, s2) and torch.equal(l1, l2)


@given(data=st.data(), m=random_mealy(),
       model=st.sampled_from(["hao_lstm", "hao_buffered", "joulin_mikolov_stack_rnn"]))
@settings(max_examples=25, deadline=None)
def test_finite_state_machines_verify_through_the_window(data, m, model):
    """For a DFA / Mealy machine the decoder reads h_t alone (``control_only``), so what verify
    runs (``forward_decoded``) is the O(1)-per-step window: same controller states, same logits,
    same decoded fields as ``forward``."""
    net = COMPILERS[model](m)
    assert net.module.control_only
    ids = torch.as_tensor(data.draw(random_ids(m)))
    states, logits = net.module.forward(ids)
    fast, flogits = net.forward_decoded(ids)
    assert torch.equal(logits, flogits)
    assert fast.shape[2] == net.hidden_units + net.module.reading_size + 1 + 3   # the window
    assert np.array_equal(net.decode(states)["state"], net.decode(fast)["state"])
    H = net.hidden_units
    assert torch.equal(states[..., :H], fast[..., :H])


def test_pushdown_networks_are_not_control_only():
    m = pn.tasks.get("dyck2")
    for model in ("hao_lstm", "joulin_mikolov_stack_rnn"):
        net = COMPILERS[model](m)
        assert not net.module.control_only
        ids = torch.as_tensor(random_walks(m, 3, 20, np.random.default_rng(0))[0])
        s1, _ = net.module.forward(ids)
        s2, _ = net.forward_decoded(ids)
        assert torch.equal(s1, s2)               # the full read-back: the decoder needs it

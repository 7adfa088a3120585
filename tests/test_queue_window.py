"""Queue and deque stores compared by their ends on long strings: `StoreTransducer.
run_batch_window`, `GrefenstetteRNN.forward_window` for queues and deques, and the windowed
lockstep comparison of `pdanet.verify` (O(1) per step), against whole stores."""

import copy
import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.store import StoreTransducer, sequence_copy
from pdanet.errors import InputError
from pdanet.models.grefenstette import compile_grefenstette, requires_grefenstette
from pdanet.verify import lockstep as L

CONTROLLERS = ("rnn", "lstm")
_OPS = {"stack": ("noop", "push", "pop", "replace"),
        "queue": ("noop", "push", "pop", "replace"),
        "deque": ("noop", "push_top", "push_bottom", "pop_top", "pop_bottom")}


@st.composite
def store_transducers(draw, kinds=("stack", "queue", "deque")) -> StoreTransducer:
    """A random store transducer: ≤ 3 states, ≤ 3 input, ≤ 3 store and ≤ 2 output symbols, each
    (state, input, end symbol) missing or one op of the store (never a pop of an empty store); a
    deque's states look at random ends."""
    kind = draw(st.sampled_from(kinds))
    nq, nk, ng = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    Q, K, G, Y = list(range(nq)), "abc"[:nk], [f"X{i}" for i in range(ng)], ("y", "z")
    t = {}
    for q in Q:
        for a in K:
            for x in G + [BOTTOM]:
                op = draw(st.sampled_from((None,) + _OPS[kind]))
                if op is None or (x is BOTTOM and "pop" in op) or (x is BOTTOM and op == "replace"):
                    continue
                if op != "noop" and "pop" not in op:
                    op = (op, draw(st.sampled_from(G)))
                t[(q, a, x)] = (draw(st.sampled_from(Q)), draw(st.sampled_from(Y + (None,))), op)
    reads = ({q: draw(st.sampled_from(("top", "bottom"))) for q in Q} if kind == "deque"
             else None)
    return StoreTransducer(kind, Q, K, Y, G, t, 0, reads=reads)


def _offsets(m: StoreTransducer, string) -> list[int]:
    """Brute force: the bottom end's offset (pops minus pushes there) after each step."""
    moves, config, off, out = m.transitions, m.initial(), 0, [0]
    for a in string:
        if config.state is not None:
            s = config.store
            look = BOTTOM if not s else (s[-1] if m.reads[config.state] == "top" else s[0])
            mv = moves.get((config.state, a, look))
            if mv is None:
                off = 0
            else:
                off += (mv.pop_end == "bottom") - (mv.push_end == "bottom")
        config = m.step(config, a)
        out.append(off if config.state is not None else 0)
    return out


@given(m=store_transducers(), cells=st.integers(1, 4), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_run_batch_window_equals_the_whole_stores_ends(m, cells, seed):
    rng = np.random.default_rng(seed)
    strings = [tuple(rng.choice(list(m.alphabet.symbols), n)) for n in rng.integers(0, 14, 12)]
    ids, lengths = m.encode(strings)
    whole, win = m.run_batch(ids, lengths), m.run_batch_window(ids, lengths, cells)
    for k in ("state", "size", "output"):
        assert np.array_equal(whole[k], win[k]), k
    store, size = whole["store"], whole["size"]
    for k in range(cells):
        at = np.take_along_axis(store, np.clip(size - 1 - k, 0, None)[..., None], 2)[..., 0]
        assert np.array_equal(win["store_top"][..., k], np.where(size - 1 - k >= 0, at, -1))
        at = store[..., k] if k < store.shape[2] else np.full(size.shape, -1)
        assert np.array_equal(win["store_bottom"][..., k], np.where(k < size, at, -1))
    for b, s in enumerate(strings):           # against the step-by-step run
        offs = _offsets(m, s)
        assert list(win["offset"][b, :len(s) + 1]) == offs
        assert (win["offset"][b, len(s):] == offs[-1]).all()
        for t, row in enumerate(m.trace(s)):
            st_ = tuple(m.store_alphabet.index(x) for x in row.config.store)
            if row.config.state is None:
                assert win["size"][b, t] == -1 and (win["store_top"][b, t] == -1).all()
                continue
            assert tuple(win["store_top"][b, t][:min(cells, len(st_))]) == st_[::-1][:cells]
            assert tuple(win["store_bottom"][b, t][:min(cells, len(st_))]) == st_[:cells]
    if m.store == "stack":
        assert (win["offset"] == 0).all()


def test_run_batch_window_typed_errors():
    m = sequence_copy(3, "queue")
    ids, lengths = m.encode([("s0", "#")])
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(InputError, match="cells"):
            m.run_batch_window(ids, lengths, bad)
    with pytest.raises(InputError):
        m.run_batch_window(np.zeros(3, dtype=np.int64))
    with pytest.raises(InputError):
        m.run_batch_window(ids, np.array([5]))


# --- the network side --------------------------------------------------------------------------
TASKS = {
    "copy_queue": lambda: sequence_copy(3, "queue"),
    "copy_deque": lambda: sequence_copy(3, "deque"),
    "reversal_deque": lambda: pn.tasks.get("sequence_reversal", vocab_size=3, store="deque"),
    "bigram_flip_queue": lambda: pn.tasks.get("bigram_flip", vocab_size=3, store="queue"),
}
_NETS: dict = {}


def _net(task, controller):
    if (task, controller) not in _NETS:
        _NETS[(task, controller)] = compile_grefenstette(TASKS[task](), controller)
    return _NETS[(task, controller)]


@pytest.mark.parametrize("task", sorted(TASKS))
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_forward_window_equals_the_forward_stores_ends(task, controller):
    """Against `forward` (the paper's Eqs. 1–11, every cell): h, r, n and the logits equal, the
    window cells are the ends of the read-back store, on random inputs with padding."""
    net = _net(task, controller)
    mod, c = net.module, 2
    rng = np.random.default_rng(7)
    ids = rng.integers(0, len(net.machine.alphabet), (6, 40))
    ids[1:, 25:] = -1
    ids[2, 10:] = -1
    full, full_logits = mod(torch.as_tensor(ids))
    states, logits = mod.forward_window(torch.as_tensor(ids), c)
    Hr = net.hidden_units + mod.reading_size
    assert torch.equal(full[..., :Hr + 1], states[..., :Hr + 1]) and torch.equal(full_logits, logits)
    n = full[..., Hr].long().numpy()
    cont = full[..., Hr + 1:].long().numpy()
    win = states[..., Hr + 1:].long().numpy()
    assert win.shape[-1] == 2 * c + 1
    for k in range(c):
        top = np.take_along_axis(cont, np.clip(n - 1 - k, 0, None)[..., None], -1)[..., 0]
        assert np.array_equal(win[..., k], np.where(n - 1 - k >= 0, top, -1))
        assert np.array_equal(win[..., c + k], np.where(k < n, cont[..., k], -1))
    # the offset: the machine's, where the machine is live (the network's padding steps idle)
    ids_m, lengths = ids.copy(), (ids >= 0).sum(1)
    tr = net.machine.run_batch_window(ids_m, lengths, c)
    live = tr["state"] >= 0
    assert np.array_equal(win[..., -1][live], tr["offset"][live])
    with pytest.raises(InputError, match="cells"):
        mod.forward_window(torch.as_tensor(ids), 0)


def _long(task, n, T=2000, seed=0):
    kind, store = task.split("_")
    name = {"copy": "sequence_copy", "reversal": "sequence_reversal"}[kind]
    return pn.tasks.sample(name, n, [T, T], np.random.default_rng(seed), vocab_size=8,
                           store=store), pn.tasks.get(name, vocab_size=8, store=store)


@pytest.mark.parametrize("task", ("copy_queue", "copy_deque", "reversal_stack"))
@pytest.mark.parametrize("controller", CONTROLLERS)
def test_verify_long_strings_by_the_stores_ends(task, controller):
    """32 strings of length 2,000 at vocabulary 8 (float32): compared by the ends (a stack: its
    top cells), fast."""
    strings, m = _long(task, 32)
    net = compile_grefenstette(m, controller)
    t = time.perf_counter()
    rep = pn.verify(m, net, strings=strings, max_length=None, samples=0, long_samples=0)
    assert rep.ok, rep.counterexample
    assert rep.steps_checked == 32 * 2001
    ends = {"store_top"} if m.store == "stack" else {"store_top", "store_bottom", "offset"}
    assert ends <= set(rep.fields) and "store" not in rep.fields
    assert time.perf_counter() - t < 20


def _mutant(net, kind: str, i: int):
    """A copy of ``net`` with one head changed so that it stays saturated (so `forward_window`
    still proves itself) but may do something else: a pop / push row negated, a pushed code
    bit negated, the deque's two pop rows (top, bottom) swapped, two readout rows swapped, or a
    controller weight moved by β."""
    net = copy.deepcopy(net)
    mod = net.module
    with torch.no_grad():
        if kind in ("pop", "push", "value"):
            layer = getattr(mod, kind)
            j = i % layer.weight.shape[0]
            layer.weight[j].neg_()
            layer.bias[j].neg_()
        elif kind == "swap_pop":
            for t in (mod.pop.weight, mod.pop.bias):
                t[[0, -1]] = t[[-1, 0]].clone()
        elif kind == "readout":
            w, b = mod.readout.weight, mod.readout.bias
            j, k = i % w.shape[0], (i + 1) % w.shape[0]
            w[[j, k]] = w[[k, j]].clone()
            b[[j, k]] = b[[k, j]].clone()
        else:
            w = mod.cell.weight_hh
            w.view(-1)[i % w.numel()] += 2048 * (1 if i % 2 else -1)
    return net


def test_a_mutated_network_fails_long_strings_with_a_report():
    strings, m = _long("copy_queue", 4)
    net = _mutant(compile_grefenstette(m, "rnn"), "readout", 0)
    rep = pn.verify(m, net, strings=strings, max_length=None, samples=0, long_samples=0)
    assert not rep.ok
    cex = rep.counterexample
    assert cex.phase == "given" and cex.field == "output" and len(cex.string) == 2000
    assert cex.expected != cex.got
    strings, m = _long("copy_deque", 4)
    net = _mutant(compile_grefenstette(m, "lstm"), "swap_pop", 0)   # pops the wrong end
    assert net.module.forward_window(torch.as_tensor(m.encode(strings[:1])[0])) is not None
    rep = pn.verify(m, net, strings=strings, max_length=None, samples=0, long_samples=0)
    cex = rep.counterexample
    assert not rep.ok and (cex.step, cex.field) == (1001, "store")    # the first # pops the top
    assert cex.expected != cex.got


def _cells(value):
    """A field value at one step without the −1 padding after its last cell (a whole store's
    width is the widest in its batch)."""
    if value is None:                           # no failure
        return None
    v = [int(x) for x in np.asarray(value).reshape(-1)]
    while len(v) > 1 and v[-1] == -1:
        v.pop()
    return tuple(v)


def _outcome(machine, net, ids, lengths, windowed: bool, monkeypatch):
    monkeypatch.setattr(L, "WINDOW_MIN_STEPS", 1)
    out = L.compare_batch(machine, net, ids, lengths, window=windowed)
    return out.failure, out.steps, _cells(out.expected), _cells(out.got)


@given(task=st.sampled_from(sorted(TASKS)), controller=st.sampled_from(CONTROLLERS),
       kind=st.sampled_from(("none", "pop", "push", "value", "swap_pop", "readout",
                             "controller")),
       i=st.integers(0, 10**6), seed=st.integers(0, 2**16))
@settings(max_examples=40, deadline=None)
def test_windowed_and_whole_comparisons_agree(task, controller, kind, i, seed):
    """On short strings (forced through the window path) the windowed comparison gives the
    whole comparison's outcome: the same first failing row, step and field, values and steps
    counted, for the compiled networks and for saturated mutants of them."""
    net = _net(task, controller)
    if kind != "none":
        net = _mutant(net, kind, i)
    m = net.machine
    rng = np.random.default_rng(seed)
    strings = [tuple(rng.choice(list(m.alphabet.symbols), n)) for n in rng.integers(0, 16, 24)]
    ids, lengths = m.encode(strings)
    ids = np.pad(ids, ((0, 0), (0, 1)), constant_values=-1)
    with pytest.MonkeyPatch.context() as mp:
        whole = _outcome(m, net, ids, lengths, False, mp)
        win = _outcome(m, net, ids, lengths, True, mp)
        assert L._store_window_applies(m, net, ids.shape[1])
    assert win == whole
    if kind in ("none", "swap_pop", "readout"):      # these stay saturated: the window path ran
        assert L._forward_store_window(m, net, ids) is not None


def _pair(store):
    """Two machines that differ only in one move: on b with X at the front, a no-op (first) or a
    replace of X by X (second), which keeps a queue of X's the same but rotates a mixed one."""
    def make(op):
        t = {("q", "a", x): ("q", "o", ("push", "X")) for x in ("X", "Y", BOTTOM)}
        t.update({("q", "c", x): ("q", "o", ("push", "Y")) for x in ("X", "Y", BOTTOM)})
        t[("q", "b", "X")] = ("q", "o", op)
        return StoreTransducer(store, ["q"], "abc", ["o"], ["X", "Y"], t, "q")
    return make("noop"), make(("replace", "X"))


@pytest.mark.parametrize("windowed", (False, True))
def test_offsets_decide_what_sizes_and_ends_cannot(windowed, monkeypatch):
    """The induction needs the offsets: against a network that replaces X by X where the machine
    does nothing, X X X X Y X X X X then b agrees in size and three cells at each end but not as a
    whole; the windowed comparison finds it (at the same step, field 'store', as the whole
    comparison), and passes a queue of X's, where the stores agree though the offsets do not."""
    noop, rotate = _pair("queue")
    assert requires_grefenstette(rotate, "rnn") is None
    net = compile_grefenstette(rotate, "rnn")
    ids, lengths = noop.encode([tuple("aaab"), tuple("aaaacaaaab"), tuple("aaab")])
    ids = np.pad(ids, ((0, 0), (0, 1)), constant_values=-1)
    failure, steps, *_ = _outcome(noop, net, ids, lengths, windowed, monkeypatch)
    assert failure == (1, 10, "store") and steps == 5 + 11
    ends = noop.run_batch_window(ids, lengths)
    got = L._forward_store_window(noop, net, ids)
    for k in ("state", "size", "store_top", "store_bottom", "output"):
        assert np.array_equal(ends[k][1], got[k][1]), k        # the ends agree at every step
    assert ends["offset"][1, 10] != got["offset"][1, 10]
    ok, *_ = _outcome(noop, net, ids[[0, 2]], lengths[[0, 2]], windowed, monkeypatch)
    assert ok is None


@given(m=store_transducers(), seed=st.integers(0, 2**16),
       kind=st.sampled_from(("pop", "swap_pop", "value", "readout")),
       controller=st.sampled_from(CONTROLLERS))
@settings(max_examples=25, deadline=None)
def test_random_store_machines_windowed_equals_whole(m, seed, kind, controller):
    """Random stack, queue and deque transducers (all of them compile): the windowed comparison
    passes on random strings, and agrees with the whole comparison against a mutant."""
    assert requires_grefenstette(m, controller) is None
    net = compile_grefenstette(m, controller)
    rng = np.random.default_rng(seed)
    strings = [tuple(rng.choice(list(m.alphabet.symbols), n)) for n in rng.integers(0, 12, 16)]
    ids, lengths = m.encode(strings)
    ids = np.pad(ids, ((0, 0), (0, 1)), constant_values=-1)
    assert L._forward_store_window(m, net, ids) is not None
    with pytest.MonkeyPatch.context() as mp:
        assert _outcome(m, net, ids, lengths, True, mp)[0] is None
        bad = _mutant(net, kind, seed)
        assert _outcome(m, bad, ids, lengths, True, mp) == _outcome(m, bad, ids, lengths, False,
                                                                    mp)

"""pdanet.learning: initialising learners from compiled networks, data, training, metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import pdanet as pn
from pdanet.automata import dyck, tasks
from pdanet.constructions.modules import RecurrentNet
from pdanet.errors import CompileError, InputError
from pdanet.learning import (
    LearnerRNN,
    dataset,
    evaluate,
    fit,
    init_experiment,
    initialize,
    metrics,
    train_test_split_by_length,
)


def _logits(model, ids):
    with torch.no_grad():
        return model(ids)[1]


def _strings(machine, n=24, length=12, seed=0):
    """Legal Dyck prefixes of `length` symbols that keep the stack busy."""
    return torch.as_tensor(machine.sample(n, length, np.random.default_rng(seed), busy=0.6))


NETS = [
    (2, 3, "lstm", "hewitt"), (2, 4, "lstm", "hewitt"), (3, 2, "lstm", "compact"),
    (2, 3, "elman", "hewitt"), (5, 2, "elman", "onehot"), (8, 2, "lstm", "onehot"),
]


@pytest.fixture(scope="module")
def compiled():
    return {spec: pn.compile(dyck(spec[0], spec[1]), target=spec[2], method=spec[3])
            for spec in NETS}


# --- initialize -------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", NETS)
def test_learner_of_same_size_reproduces_the_network(compiled, spec):
    net = compiled[spec]
    ids = _strings(net.machine)
    model = initialize(LearnerRNN.like(net), net, seed=0)
    ref = _logits(net.module, ids)
    got = _logits(model, ids)
    assert torch.allclose(got, ref, atol=1e-3 * float(net.scale), rtol=1e-4)
    assert np.array_equal(net.readout(got), net.readout(ref))


@settings(max_examples=8, deadline=None)
@given(extra_h=st.integers(0, 6), extra_e=st.integers(0, 3), extra_s=st.integers(0, 2),
       extra_o=st.integers(0, 2), which=st.integers(0, len(NETS) - 1), seed=st.integers(0, 99))
def test_larger_isolated_learner_reproduces_the_network(compiled, extra_h, extra_e, extra_s,
                                                         extra_o, which, seed):
    net = compiled[NETS[which]]
    src = net.module
    n_out = 2 * net.machine.k + 1
    model = LearnerRNN(src.cell, src.embedding.num_embeddings + extra_s,
                       net.hidden_units + extra_h, n_out + extra_o,
                       input_size=src.embedding.embedding_dim + extra_e)
    initialize(model, net, seed=seed, extra_std=0.3)
    ids = _strings(net.machine, seed=seed)
    ref = _logits(src, ids)
    got = _logits(model, ids)[..., :n_out]
    assert torch.allclose(got, ref, atol=1e-3 * float(net.scale), rtol=1e-4)
    assert np.array_equal(net.readout(got), net.readout(ref))
    # the extra units are really there: they are not all zero
    if extra_h:
        assert model.rnn.weight_hh_l0[:, net.hidden_units:].abs().sum() > 0


def test_not_isolated_extra_units_feed_the_compiled_units(compiled):
    net = compiled[(2, 3, "elman", "hewitt")]
    h = net.hidden_units
    iso = initialize(LearnerRNN.like(net, hidden_size=h + 4), net, seed=1)
    mixed = initialize(LearnerRNN.like(net, hidden_size=h + 4), net, seed=1, isolate=False)
    assert iso.rnn.weight_hh_l0[:h, h:].abs().max() == 0
    assert iso.readout.weight[:, h:].abs().max() == 0
    assert mixed.rnn.weight_hh_l0[:h, h:].abs().max() > 0
    assert iso.rnn.weight_hh_l0[h:, :h].abs().max() > 0      # compiled → extra: small random


def test_factored_readout_copied_into_a_factored_model(compiled):
    net = compiled[(2, 4, "lstm", "hewitt")]
    assert net.module.out_embedding is not None
    r = net.module.readout.out_features
    model = RecurrentNet("lstm", 4, net.module.embedding.embedding_dim, net.hidden_units + 2, 5,
                         readout_code=r + 1)
    initialize(model, net, seed=0)
    ids = _strings(net.machine)
    assert torch.allclose(_logits(model, ids), _logits(net.module, ids), atol=1e-2, rtol=1e-4)
    small = RecurrentNet("lstm", 4, net.module.embedding.embedding_dim, net.hidden_units, 5,
                         readout_code=r - 1)
    with pytest.raises(CompileError, match="readout_code"):
        initialize(small, net)


def test_dfa_networks_copy_too():
    machine = tasks.get("cumulative_xor")
    for target in ("elman", "lstm"):
        net = pn.compile(machine, target=target)
        model = initialize(LearnerRNN.like(net, hidden_size=net.hidden_units + 3), net, seed=0)
        data = dataset("cumulative_xor", 32, range(1, 12), seed=0)
        assert metrics.per_symbol_accuracy(_logits(model, data.ids), data.targets, "symbol") == 1.0


def test_scale_rebuilds_the_weights(compiled):
    net = compiled[(2, 3, "lstm", "hewitt")]
    model = initialize(LearnerRNN.like(net), net, scale=10)
    ids = _strings(net.machine)
    ref = _logits(net.with_scale(10).module, ids)
    assert torch.allclose(_logits(model, ids), ref, atol=1e-4, rtol=1e-4)
    assert float(model.rnn.weight_hh_l0.detach().abs().max()) < float(
        net.module.rnn.weight_hh_l0.detach().abs().max())


def test_peak_noise_is_relative_seeded_and_only_on_the_compiled_block(compiled):
    net = compiled[(2, 4, "lstm", "hewitt")]
    clean = initialize(LearnerRNN.like(net), net, seed=0)
    a = initialize(LearnerRNN.like(net), net, peak_noise=0.1, seed=3)
    b = initialize(LearnerRNN.like(net), net, peak_noise=0.1, seed=3)
    assert torch.equal(a.rnn.weight_hh_l0, b.rnn.weight_hh_l0)
    diff = (a.rnn.weight_hh_l0 - clean.rnn.weight_hh_l0).detach().double()
    peak = float(clean.rnn.weight_hh_l0.detach().abs().max())
    assert 0.05 * peak < float(diff.std()) < 0.2 * peak


def test_errors_when_the_model_cannot_hold_the_network(compiled):
    net = compiled[(2, 4, "lstm", "hewitt")]
    src = net.module
    E = src.embedding.embedding_dim
    with pytest.raises(CompileError, match="hidden_size ≥ 8"):
        initialize(LearnerRNN("lstm", 4, 7, 5, E), net)
    with pytest.raises(CompileError, match="num_symbols"):
        initialize(LearnerRNN("lstm", 3, 8, 5, E), net)
    with pytest.raises(CompileError, match="input_size"):
        initialize(LearnerRNN("lstm", 4, 8, 5, E - 1), net)
    with pytest.raises(CompileError, match="num_outputs"):
        initialize(LearnerRNN("lstm", 4, 8, 4, E), net)
    with pytest.raises(CompileError, match="cell='lstm'"):
        initialize(LearnerRNN("rnn", 4, 8, 5, E), net)
    with pytest.raises(InputError, match="noise"):
        initialize(LearnerRNN.like(net), net, noise=-1)
    with pytest.raises(InputError, match="embedding"):
        initialize(nn.LSTM(2, 8), net)
    second = pn.compile(tasks.get("parity"), target="second_order")
    with pytest.raises(CompileError, match="RecurrentNet"):
        initialize(LearnerRNN("rnn", 2, 8, 1), second)


def test_model_without_initial_state_needs_a_zero_h0(compiled):
    class Bare(nn.Module):
        def __init__(self, E, H):
            super().__init__()
            self.embedding = nn.Embedding(4, E)
            self.rnn = nn.RNN(E, H, batch_first=True)
            self.readout = nn.Linear(H, 5)

    net = compiled[(2, 3, "elman", "hewitt")]                 # h0 = -1: every slot empty
    with pytest.raises(CompileError, match="h0"):
        initialize(Bare(net.module.embedding.embedding_dim, net.hidden_units), net)


# --- data -------------------------------------------------------------------------------------


def _oracle_targets(machine, string, kind):
    """Targets from the machine's one-string simulator (independent of run_batch)."""
    outs = machine.outputs(string)
    if kind == "next_set":
        alpha = machine.output_alphabet
        return np.array([[sym in o for sym in alpha] for o in outs], dtype=np.float32)
    if kind == "symbol":
        n = len(machine.output_alphabet)
        return np.array([n if o is None else machine.output_alphabet.index(o) for o in outs])
    return np.array(outs, dtype=np.float32)


@pytest.mark.parametrize("source,params,kind", [
    ("dyck", {"k": 2, "m": 3}, "next_set"),
    ("cumulative_xor", {}, "symbol"),
    ("parity", {}, "accept"),
    ("reversal", {}, "symbol"),
])
def test_dataset_targets_match_the_machine(source, params, kind):
    lengths = range(2, 13, 2)
    data = dataset(source, 40, lengths, seed=1, **params)
    machine = tasks.get(source, **params)
    assert data.kind == kind and len(data) == 40
    T = data.max_length
    assert data.ids.shape == (40, T)
    for (ids, targets), n, s in zip(data, data.lengths.tolist(), data.strings()):
        assert (ids[:n] >= 0).all() and (ids[n:] == -1).all()
        want = _oracle_targets(machine, s, kind)
        assert np.array_equal(targets[:n + 1].numpy(), want)
        assert (targets[n + 1:] < 0).all()                   # padding is negative


def test_dataset_from_a_machine_and_split_by_length():
    machine = dyck(3, 2)
    data = dataset(machine, 60, [4, 6, 10, 12], seed=0)
    assert set(data.lengths.tolist()) <= {4, 6, 10, 12}
    assert all(machine.accepts(s) for s in data.strings())   # complete Dyck words
    train, test = train_test_split_by_length(data, 6)
    assert train.max_length <= 6 < int(test.lengths.min())
    assert len(train) + len(test) == 60
    assert train.ids.shape[1] == train.max_length             # padding trimmed
    with pytest.raises(InputError):
        train_test_split_by_length(data, 100)
    with pytest.raises(InputError, match="even"):
        dataset(machine, 5, 3)
    with pytest.raises(InputError):
        dataset(machine, 5, 4, target="symbol")


def test_compiled_networks_score_perfectly_on_their_datasets(compiled):
    net = compiled[(2, 4, "lstm", "hewitt")]
    data = dataset(net.machine, 50, range(2, 31, 2), seed=2)
    z = _logits(net.module, data.ids)
    assert metrics.per_symbol_accuracy(z, data.targets, "next_set") == 1.0
    assert metrics.sequence_accuracy(z, data.targets, "next_set") == 1.0
    assert metrics.bracket_accuracy(z, data.ids, 2) == 1.0
    parity = pn.compile(tasks.get("parity"), target="lstm")
    pd = dataset("parity", 30, range(15), seed=0)
    assert metrics.per_symbol_accuracy(_logits(parity.module, pd.ids), pd.targets, "accept") == 1.0


# --- metrics ----------------------------------------------------------------------------------


def test_metrics_on_hand_made_cases():
    # next_set: 2 strings, 3 positions, 2 outputs; second string has one padding position
    targets = torch.tensor([[[1., 0], [0, 1], [1, 1]], [[1, 0], [1, 1], [-1, -1]]])
    logits = torch.tensor([[[3., -2], [-1, 2], [1, -1]], [[2, -2], [1, 1], [-5, -5]]])
    assert metrics.per_symbol_accuracy(logits, targets, "next_set") == pytest.approx(4 / 5)
    assert metrics.sequence_accuracy(logits, targets, "next_set") == pytest.approx(1 / 2)
    # symbol: argmax vs class, -1 padding ignored
    sym_t = torch.tensor([[0, 2, -1]])
    sym_z = torch.tensor([[[5., 0, 0], [0, 1, 0], [0, 0, 9]]])
    assert metrics.per_symbol_accuracy(sym_z, sym_t, "symbol") == pytest.approx(1 / 2)
    assert metrics.sequence_accuracy(sym_z, sym_t, "symbol") == 0.0
    # accept
    acc_z = torch.tensor([[[1.], [-1.], [2.]]])
    assert metrics.per_symbol_accuracy(acc_z, torch.tensor([[1., 0, 0]]), "accept") \
        == pytest.approx(2 / 3)


def test_bracket_accuracy_by_hand():
    k = 2                                                     # symbols ( [ ) ] , outputs + $
    ids = np.array([[0, 2, 1, 3]])                            # ( ) [ ]
    z = np.zeros((1, 5, 5))
    z[0, 1, 2:4] = [3.0, -3.0]                                # before ')': right, p ≈ 0.998
    z[0, 3, 2:4] = [0.0, 0.5]                                 # before ']': p(]) ≈ 0.62 < 0.8
    assert metrics.bracket_accuracy(z, ids, k) == 0.5
    assert metrics.bracket_accuracy(z, ids, k, threshold=0.6) == 1.0
    assert metrics.bracket_error(z, ids, k) == 0.5
    assert metrics.bracket_accuracy(z, np.array([[0, 1, -1, -1]]), k) == 1.0  # no close bracket


def test_cross_entropy_difference():
    true = np.log(np.array([[0.5, 0.25, 0.25]]))
    assert metrics.cross_entropy_difference(true, true) == 0.0
    model = np.log(np.array([[0.25, 0.25, 0.5]]))
    expected = (np.log(2) + 0 - np.log(2)) / 3 + 0.0
    assert metrics.cross_entropy_difference(model, true) == pytest.approx(expected)
    mask = np.array([[True, False, False]])
    assert metrics.cross_entropy_difference(model, true, mask) == pytest.approx(np.log(2))
    with pytest.raises(InputError):
        metrics.cross_entropy_difference(model, true[:, :2])


# --- training ---------------------------------------------------------------------------------


def test_fit_lowers_the_loss_and_evaluate_reports():
    torch.manual_seed(0)
    data = dataset("cumulative_xor", 64, range(1, 9), seed=0)
    model = LearnerRNN("lstm", 2, 8, data.num_outputs)
    history = fit(model, data, epochs=6, lr=3e-2, batch_size=16, seed=0)
    assert len(history) == 6 and history[-1]["loss"] < history[0]["loss"]
    scores = evaluate(model, data)
    assert 0.0 <= scores["per_symbol_accuracy"] <= 1.0
    with pytest.raises(InputError):
        fit(model, [(1, 2)], epochs=1)


def test_experiment_compiled_init_without_noise_stays_perfect():
    rows = init_experiment(2, 2, noises=(0.0, 0.5), train_len=6, n_train=32, n_test=16,
                           epochs=2, seed=0)
    by = {(r["init"], r["noise"]): r for r in rows}
    assert set(by) == {("random", None), ("compiled", 0.0), ("compiled", 0.5)}
    for noise in (0.0, 0.5):              # 0.5: half the certified tolerance, still exact
        exact = by[("compiled", noise)]
        assert exact["test_len"] == 12 and exact["noise_scale"] == "tolerance"
        assert exact["test_accuracy_before"] == 1.0
        assert exact["test_accuracy"] == 1.0 and exact["test_sequence_accuracy"] == 1.0
        assert exact["test_bracket_accuracy"] == 1.0
    peak = init_experiment(2, 2, noises=(0.5,), train_len=6, n_train=32, n_test=16, epochs=1,
                           seed=0, random_init=False, noise_scale="peak")
    assert peak[0]["test_accuracy_before"] < 1.0 and peak[0]["noise_scale"] == "peak"
    with pytest.raises(InputError, match="noise_scale"):
        init_experiment(2, 2, noises=(0.5,), noise_scale="max")


# --- trained models checked against the machine ------------------------------------------------

@pytest.mark.parametrize("target", ["elman", "lstm"])
def test_initialised_learner_verifies_and_a_damaged_one_reports_where(target):
    from pdanet.learning import LearnerRNN, as_network, initialize

    d = pn.tasks.dyck(2, 3)
    net = pn.compile(d, target=target, method="compact")
    model = LearnerRNN.like(net, hidden_size=net.hidden_units + 4)
    initialize(model, net, seed=0)
    report = pn.verify(d, as_network(model, net), max_length=8, samples=200, long_length=200)
    assert report.ok, str(report)
    with torch.no_grad():  # "training" that breaks one compiled unit
        model.rnn.bias_hh_l0[0] += 50.0
    report = pn.verify(d, as_network(model, net), max_length=8, samples=0, long_length=0)
    assert not report.ok
    cex = report.counterexample
    # the reported step is the first one where the machine and the damaged model disagree
    ids, _ = d.encode([cex.string])
    states, logits = as_network(model, net).forward(ids)
    got = as_network(model, net).decode(states)
    trace = d.run_batch(ids)
    assert cex.field in ("stack", "depth", "output")
    field_got = got[cex.field] if cex.field in got else as_network(model, net).readout(logits)
    assert (field_got[0, cex.step] != trace[cex.field][0, cex.step]).any()
    assert all((field_got[0, t] == trace[cex.field][0, t]).all() for t in range(cex.step))

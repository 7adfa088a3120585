"""pdanet.plot: figures are built headless, with labelled axes, from computed data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")

import pdanet as pn
from pdanet import plot
from pdanet.automata import dyck, tasks
from pdanet.constructions.stacks import NeuralQueue, StackActions
from pdanet.errors import InputError
from pdanet.verify.bounds import information_floor, table


def _labels(ax):
    return [t.get_text() for t in ax.get_yticklabels()]


def test_lstm_trace_has_units_cells_and_gates(tmp_path):
    net = pn.compile(dyck(2, 3), target="lstm")
    fig = plot.trace_heatmap(net, "([])(")
    axes = [a for a in fig.axes if a.get_title(loc="left")]
    titles = [a.get_title(loc="left") for a in axes]
    assert titles == ["hidden state h", "cell c", "input gate i", "forget gate f",
                      "candidate g", "output gate o"]
    assert _labels(axes[0]) == plot.unit_labels(net)
    assert _labels(axes[0])[0] == "slot 1[0]"
    assert [t.get_text() for t in axes[-1].get_xticklabels()] == ["·", "(", "[", "]", ")", "("]
    assert axes[-1].get_xlabel() and axes[0].get_ylabel() == "unit"
    # the plotted h is the network's own state; gates are in [0, 1]
    ids, _ = net.encode(["([])("])
    states, _ = net.forward(ids)
    h = axes[0].images[0].get_array()
    assert np.allclose(np.asarray(h), states[0, :, :net.hidden_units].numpy().T, atol=1e-5)
    c = np.asarray(axes[1].images[0].get_array())
    assert np.allclose(c, states[0, :, net.hidden_units:].numpy().T, atol=1e-4)
    gate = np.asarray(axes[2].images[0].get_array())[:, 1:]
    assert gate.min() >= 0 and gate.max() <= 1
    fig.savefig(tmp_path / "trace.png")
    assert (tmp_path / "trace.png").stat().st_size > 0


def test_gates_recomputed_from_weights_match_the_cell_update():
    net = pn.compile(dyck(2, 2), target="lstm")
    fig = plot.trace_heatmap(net, "(())")
    ax = {a.get_title(loc="left"): a for a in fig.axes}
    get = lambda name: np.asarray(ax[name].images[0].get_array())
    c, i, f, g = get("cell c"), get("input gate i"), get("forget gate f"), get("candidate g")
    assert np.allclose(c[:, 1:], f[:, 1:] * c[:, :-1] + i[:, 1:] * g[:, 1:], atol=1e-4)


def test_elman_trace_groups_push_and_pop_copies():
    net = pn.compile(dyck(2, 2), target="elman")
    fig = plot.trace_heatmap(net, "[]")
    assert len([a for a in fig.axes if a.get_title(loc="left")]) == 1
    labels = plot.unit_labels(net)
    assert labels[0].startswith("P slot 1") and labels[-1].startswith("Q slot 2")
    dfa = pn.compile(tasks.get("parity"), target="elman")
    assert plot.unit_labels(dfa) == list(dfa.unit_labels)
    with pytest.raises(InputError):
        plot.trace_heatmap(net, "[]", max_units=2)


def test_stack_trace_shows_the_stack_run():
    push = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    pop = torch.tensor([[0.0, 0.0, 1.0, 0.5]])
    value = torch.eye(2)[[0, 1, 0, 0]][None]
    fig = plot.stack_trace(StackActions(push, pop, value), symbols="abcd")
    axes = [a for a in fig.axes if a.get_title(loc="left")]
    assert [a.get_ylabel() for a in axes] == ["strength", "dim", "cell", "dim"]
    strengths = np.asarray(axes[2].images[0].get_array())
    assert np.allclose(strengths[:2, 1], [1, 1]) and np.allclose(strengths[:2, 2], [1, 0])
    assert np.allclose(strengths[0, 3], 0.5)
    reading = np.asarray(axes[3].images[0].get_array())
    assert np.allclose(reading[:, 1], [0, 1]) and np.allclose(reading[:, 2], [1, 0])
    assert [t.get_text() for t in axes[-1].get_xticklabels()] == list("abcd")
    fig_q = plot.stack_trace(StackActions(push, pop, value), stack=NeuralQueue())
    assert fig_q.get_suptitle() == "NeuralQueue"
    with pytest.raises(InputError):
        plot.stack_trace(StackActions(push[0], pop[0], value[0]))


def test_bounds_plot_lines_per_construction_and_floor():
    rows = table(k=(2, 4, 8), m=(2, 3), targets=("lstm",), methods=("hewitt", "compact"))
    fig = plot.bounds_plot(rows)
    assert len(fig.axes) == 2
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() and ax.get_ylabel() == "hidden units"
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert {"lstm/hewitt", "lstm/compact"} <= set(lines)
    floor = next(ln for name, ln in lines.items() if name.startswith("floor"))
    assert list(floor.get_ydata()) == [information_floor(k, 2) for k in (2, 4, 8)]
    assert list(lines["lstm/hewitt"].get_ydata()) == [r.hidden_units for r in rows
                                                      if r.m == 2 and r.method == "hewitt"]
    with pytest.raises(InputError):
        plot.bounds_plot([])


def test_readings_heatmap_matches_lang():
    from pdanet.automata.weighted import WeightedPDA
    from pdanet.plot import readings_heatmap

    m = WeightedPDA.from_pda(pn.tasks.get("marked_reversal"))
    net = pn.compile(m, target="ns_rnn")
    fig = readings_heatmap(net, "01#10")
    (net_ax, lang_ax) = fig.axes[:2]
    got = net_ax.images[0].get_array()
    want = lang_ax.images[0].get_array()
    assert got.shape == (6, want.shape[1]) and np.allclose(got, want, atol=1e-5)
    assert "⊥" in net_ax.get_xticklabels()[0].get_text()
    with pytest.raises(pn.errors.InputError, match="ns_rnn"):
        readings_heatmap(pn.compile(pn.tasks.dyck(2, 2), target="lstm"), "()")

"""Figures of compiled networks (matplotlib; every function returns a `matplotlib.figure.Figure`).

Figures are built with the object-oriented API (no pyplot, no window): save them with
``fig.savefig(path)``; notebooks display them inline. matplotlib is an optional dependency
(``pip install pdanet[dev]``).

- `trace_heatmap(net, string)`: hidden units over time, grouped and labelled by meaning; for LSTMs
  also the cells and the gates i, f, g, o (computed from the module's weights).
- `stack_trace(actions)`: push/pop strengths, pushed vectors, strengths of stored cells and readings
  over time of a Grefenstette stack or queue (as in Figs. 5–6 of Hao et al. 2018).
- `readings_heatmap(net, string)`: the NS-RNN's reading — the distribution over (state, top of
  stack) — after each prefix (DuSell & Chiang 2021), against Lang's algorithm.
- `bounds_plot(rows)`: hidden units against k (log scale) per construction, with the information
  floor ⌈log₂ Σ_{i≤m} kⁱ⌉.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pdanet.errors import InputError


def _figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise InputError("plotting needs matplotlib: pip install 'pdanet[dev]' (or matplotlib)") \
            from None
    return Figure(figsize=(width, height), layout="constrained")


# --- hidden units over time --------------------------------------------------------------------


def unit_labels(net: Any) -> list[str]:
    """A label per hidden unit: the network's ``abstraction.labels`` (`net.unit_labels`) when
    there is one per unit (for the Dyck constructions the stack slot — and, for Elman, the push
    copy P or pop copy Q — and the coordinate within the slot code), otherwise ``h0, h1, …``."""
    H = int(net.hidden_units)
    given = list(getattr(net, "unit_labels", ()) or ())
    if len(given) == H:
        return [str(x) for x in given]
    return [f"h{i}" for i in range(H)]


def _groups(net: Any) -> tuple[int, ...]:
    """Row indices where a new group of units starts (`Abstraction.groups`)."""
    abstraction = getattr(net, "abstraction", None)
    return abstraction.groups() if abstraction is not None else ()


@torch.no_grad()
def _trajectories(net: Any, ids: torch.Tensor) -> dict[str, np.ndarray]:
    """h (T+1, H), and for LSTMs c (T+1, H) and gates i, f, g, o (T+1, H; column 0 NaN)."""
    from pdanet.constructions.modules import RecurrentNet

    H = int(net.hidden_units)
    module = net.module
    states, _ = module(ids)
    states = states[0].double()
    out = {"h": states[:, :H].numpy()}
    if isinstance(module, RecurrentNet) and module.cell == "lstm":
        x = module.embedding(ids.clamp(min=0))[0].double()
        h = states[:, :H]
        gi, gf, gg, go = module.preactivations(x, h[:-1]).chunk(4, dim=-1)
        gates = {"i": torch.sigmoid(gi), "f": torch.sigmoid(gf), "g": torch.tanh(gg),
                 "o": torch.sigmoid(go)}
        if states.shape[1] >= 2 * H:
            c = states[:, H:2 * H]
        else:
            c = torch.empty_like(h)
            c[0] = module.c0.double()
            for t in range(len(x)):
                c[t + 1] = gates["f"][t] * c[t] + gates["i"][t] * gates["g"][t]
        out["c"] = c.numpy()
        nan = torch.full((1, H), float("nan"), dtype=torch.float64)
        for name, v in gates.items():
            out[name] = torch.cat([nan, v]).numpy()
    return out


def trace_heatmap(net: Any, string: Any, gates: bool = True, max_units: int = 400):
    """Hidden units (rows, labelled and grouped by meaning) over time (columns: the initial state,
    then after each symbol) for one string; for an LSTM also the cells c and, with ``gates``, the
    gate values i, f, g, o of each step. Returns the Figure."""
    H = int(net.hidden_units)
    if H > max_units:
        raise InputError(f"{H} hidden units are too many to draw (max_units={max_units})")
    symbols = list(net.machine.alphabet.split(string))
    ids, _ = net.encode([tuple(symbols)])
    traj = _trajectories(net, ids)
    panels = ["h"] + (["c"] if "c" in traj else [])
    if gates and "i" in traj:
        panels += ["i", "f", "g", "o"]
    titles = {"h": "hidden state h", "c": "cell c", "i": "input gate i", "f": "forget gate f",
              "g": "candidate g", "o": "output gate o"}
    labels = unit_labels(net)
    T1 = len(symbols) + 1
    fig = _figure(max(5.0, 0.35 * T1 + 2.5), len(panels) * max(1.6, 0.16 * H + 0.6))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    xt = ["·"] + [str(s) for s in symbols]
    for ax, name in zip(axes, panels):
        data = traj[name].T
        if name in ("i", "f", "o"):
            im = ax.imshow(data, aspect="auto", cmap="viridis", vmin=0, vmax=1,
                           interpolation="nearest")
        else:
            lim = max(1e-9, float(np.nanmax(np.abs(data))))
            im = ax.imshow(data, aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim,
                           interpolation="nearest")
        fig.colorbar(im, ax=ax, fraction=0.03, pad=0.01)
        for r in _groups(net):
            ax.axhline(r - 0.5, color="black", linewidth=0.8)
        ax.set_yticks(range(H))
        ax.set_yticklabels(labels, fontsize=max(4, min(8, 300 // max(H, 1))))
        ax.set_ylabel("unit")
        ax.set_title(titles[name], fontsize=9, loc="left")
    axes[-1].set_xticks(range(T1))
    axes[-1].set_xticklabels(xt)
    axes[-1].set_xlabel("input read so far (· = initial state)")
    fig.suptitle(f"{net.construction}: {net.machine!r}", fontsize=10)
    return fig


# --- stacks ------------------------------------------------------------------------------------


def _network_actions(net: Any, string: Any):
    """(actions, memory, symbols) of a compiled stack RNN (target "stack_rnn", Grefenstette stack
    or queue) run on one string: the push/pop strengths and pushed vectors its controller emits."""
    from pdanet.constructions.abstraction import ControllerMemory
    from pdanet.constructions.stacks import NeuralQueue, NeuralStack, StackActions

    module, abstraction = net.module, getattr(net, "abstraction", None)
    if not (isinstance(abstraction, ControllerMemory) and abstraction.memory == "grefenstette"
            and abstraction.store in ("stack", "queue") and hasattr(module, "trace_actions")):
        raise InputError(f"stack_trace draws a stack_rnn network with a Grefenstette stack or "
                         f"queue; got {getattr(net, 'construction', type(net).__name__)}")
    if string is None:
        raise InputError("stack_trace(net, string): give the string to run")
    symbols = list(net.machine.alphabet.split(string))
    ids, _ = net.encode([tuple(symbols)])
    act, value = module.trace_actions(ids)
    memory = NeuralQueue() if abstraction.store == "queue" else NeuralStack()
    return StackActions(act[..., 0], act[..., 1], value), memory, symbols


@torch.no_grad()
def stack_trace(actions: Any, stack: Any = None, symbols: Sequence[Any] | None = None,
                batch: int = 0):
    """Push strengths d_t and pop strengths u_t, the pushed vectors v_t, the strengths of every
    stored cell and the readings r_t over time, for one batch row of `actions` (a
    `StackActions` with a time axis: push, pop (B, T), value (B, T, m)) run through `stack`
    (default: Grefenstette's `NeuralStack`; a `NeuralQueue` works too). ``symbols`` label the
    time steps. Returns the Figure.

    ``stack_trace(net, string)``: for a compiled stack RNN (target "stack_rnn" with a Grefenstette
    stack or queue), the actions its controller emits on `string`, labelled by its symbols."""
    from pdanet.constructions.stacks import NeuralStack, StackActions

    if hasattr(actions, "module") and hasattr(actions, "machine"):
        actions, stack, symbols = _network_actions(actions, stack)
    stack = NeuralStack() if stack is None else stack
    if not isinstance(actions, StackActions):
        try:
            actions = StackActions(*actions)
        except TypeError:
            raise InputError("actions must be a StackActions(push, pop, value)") from None
    if actions.push.dim() != 2:
        raise InputError(f"actions need a time axis: push (B, T), got {tuple(actions.push.shape)}")
    B, T = actions.push.shape
    if not 0 <= batch < B:
        raise InputError(f"batch row {batch} outside 0..{B - 1}")
    sel = StackActions(actions.push[batch:batch + 1], actions.pop[batch:batch + 1],
                       actions.value[batch:batch + 1])
    state = stack.init_state(1, sel.value.shape[-1], T, sel.value.dtype)
    strengths = np.zeros((T, T))
    readings = []
    for t in range(T):
        state, r = stack.step(state, StackActions(sel.push[:, t], sel.pop[:, t], sel.value[:, t]))
        strengths[:, t] = state.strengths[0].double().numpy()
        readings.append(r[0].double().numpy())
    readings_arr = np.stack(readings, 1) if readings else np.zeros((sel.value.shape[-1], 0))
    xt = [str(s) for s in symbols] if symbols is not None else [str(t + 1) for t in range(T)]
    if len(xt) != T:
        raise InputError(f"{len(xt)} symbols for {T} time steps")
    fig = _figure(max(5.0, 0.35 * T + 2.5), 8.0)
    axes = fig.subplots(4, 1, sharex=True)
    steps = np.arange(T)
    axes[0].plot(steps, sel.push[0].double().numpy(), marker="o", label="push d")
    axes[0].plot(steps, sel.pop[0].double().numpy(), marker="s", label="pop u")
    axes[0].set_ylabel("strength")
    axes[0].legend(fontsize=7, loc="upper right")
    axes[0].set_title("push and pop strengths", fontsize=9, loc="left")
    for ax, data, title, ylabel in (
        (axes[1], sel.value[0].double().numpy().T, "pushed vector v", "dim"),
        (axes[2], strengths, "strength of each stored cell (row = step it was pushed)", "cell"),
        (axes[3], readings_arr, "reading r", "dim"),
    ):
        lim = max(1e-9, float(np.abs(data).max())) if data.size else 1.0
        im = ax.imshow(data, aspect="auto", interpolation="nearest",
                       cmap="viridis" if ax is axes[2] else "RdBu_r",
                       vmin=0 if ax is axes[2] else -lim, vmax=lim)
        fig.colorbar(im, ax=ax, fraction=0.03, pad=0.01)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9, loc="left")
    axes[-1].set_xticks(range(T))
    axes[-1].set_xticklabels(xt)
    axes[-1].set_xlabel("time step (input)")
    fig.suptitle(type(stack).__name__, fontsize=10)
    return fig


# --- bounds ------------------------------------------------------------------------------------


def bounds_plot(rows: Sequence[Any] | None = None):
    """Hidden units against k (log scale), one panel per m, one line per construction, and the
    information floor ⌈log₂ Σ_{i≤m} kⁱ⌉ (dashed). ``rows``: `pdanet.verify.bounds.table` rows (or
    dicts with k, m, construction, hidden_units, floor); default: ``table()``."""
    if rows is None:
        from pdanet.verify.bounds import table

        rows = table()
    dicts = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in rows]
    if not dicts:
        raise InputError("no rows to plot")
    for need in ("k", "m", "construction", "hidden_units", "floor"):
        if need not in dicts[0]:
            raise InputError(f"rows need the field {need!r} (as in pdanet.verify.bounds.table)")
    ms = sorted({int(d["m"]) for d in dicts})
    fig = _figure(4.2 * len(ms), 3.8)
    axes = fig.subplots(1, len(ms), squeeze=False)[0]
    constructions = list(dict.fromkeys(d["construction"] for d in dicts))
    for ax, m in zip(axes, ms):
        here = [d for d in dicts if int(d["m"]) == m]
        for name in constructions:
            pts = sorted((int(d["k"]), int(d["hidden_units"])) for d in here
                         if d["construction"] == name and d["hidden_units"] is not None)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=name)
        floor = sorted({(int(d["k"]), int(d["floor"])) for d in here if d["floor"] is not None})
        if floor:
            ax.plot(*zip(*floor), "k--", marker="x", label="floor ⌈log₂ Σ kⁱ⌉")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("k (bracket types)")
        ax.set_ylabel("hidden units")
        ax.set_title(f"m = {m}")
        ax.grid(True, which="both", alpha=0.3)
    axes[-1].legend(fontsize=7)
    fig.suptitle("Dyck-(k, m): hidden units per construction vs the information floor",
                 fontsize=10)
    return fig


def readings_heatmap(net: Any, string: Any, exact: bool = True):
    """The reading of a compiled NS-RNN (``target="ns_rnn"``) after each prefix of `string`: one
    column per (state, top) pair that is ever read, one row per prefix; with ``exact`` a second
    panel shows the weighted PDA's own reading (Lang's algorithm) for comparison."""
    from pdanet.constructions.abstraction import NSChart

    if not isinstance(getattr(net, "abstraction", None), NSChart):
        raise InputError(f"readings_heatmap needs an ns_rnn network, got "
                         f"{getattr(net, 'construction', net)!r}")
    machine = net.machine
    ids, _ = net.encode([string])
    states, _ = net.forward(ids)
    got = net.decode(states)["reading"][0]                     # (T+1, Q, G)
    T1 = got.shape[0]
    flat = got.reshape(T1, -1)
    panels = [("network", flat)]
    if exact:
        want = machine.run_batch(ids.numpy())["reading"][0].reshape(T1, -1)
        panels.append(("Lang's algorithm", want))
    used = np.nonzero(np.max([p for _, p in panels], axis=0).max(axis=0) > 1e-6)[0]
    tops = ["⊥"] + [str(x) for x in machine.stack_alphabet.symbols]
    labels = [f"({machine.states[q]!s}, {tops[g]})"
              for q, g in (divmod(int(j), len(tops)) for j in used)]
    symbols = ["·"] + [str(x) for x in machine.alphabet.split(string)]
    fig = _figure(3.2 * len(panels) + 1, 0.25 * T1 + 1.8)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, data) in zip(axes, panels):
        im = ax.imshow(data[:, used], aspect="auto", cmap="viridis", vmin=0, vmax=1)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(len(used)), labels, rotation=90, fontsize=7)
        ax.set_yticks(range(T1), symbols, fontsize=7)
        ax.set_xlabel("(state, top of stack)")
    axes[0].set_ylabel("input read so far (· = initial)")
    fig.colorbar(im, ax=list(axes), label="reading")
    return fig


__all__ = ["bounds_plot", "readings_heatmap", "stack_trace", "trace_heatmap", "unit_labels"]

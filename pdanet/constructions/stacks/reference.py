"""Per-cell reference implementations of the differentiable memories, for tests.

Each function follows its paper's equations literally, one batch element at a time, with Python
loops over cells and lists of 0-dim / 1-dim tensors (so autograd gives reference gradients).
Sums over cells run in the direction the paper traverses (top down for a stack). Readings are
returned as a (T, m) tensor. Slow by design; the vectorised modules must agree with these.
"""

from __future__ import annotations

import torch

relu, minimum = torch.relu, torch.minimum


def _sum(xs: list[torch.Tensor], zero: torch.Tensor) -> torch.Tensor:
    total = zero
    for x in xs:
        total = total + x
    return total


def _top_pop(s: list, u, zero) -> list:
    """s[i] ← max(0, s[i] − max(0, u − Σ_{j>i} s[j])) (Grefenstette Eq. 2)."""
    return [relu(s[i] - relu(u - _sum(s[i + 1:][::-1], zero))) for i in range(len(s))]


def _front_pop(s: list, u, zero) -> list:
    """s[i] ← max(0, s[i] − max(0, u − Σ_{j<i} s[j])) (Grefenstette Eq. 4)."""
    return [relu(s[i] - relu(u - _sum(s[:i], zero))) for i in range(len(s))]


def _top_read(s: list, V: list, zero):
    """Σ_i min(s[i], max(0, 1 − Σ_{j>i} s[j])) · V[i] (Grefenstette Eq. 3)."""
    r = zero * V[0]
    for i in range(len(s)):
        r = r + minimum(s[i], relu(1 - _sum(s[i + 1:][::-1], zero))) * V[i]
    return r


def _front_read(s: list, V: list, zero):
    """Σ_i min(s[i], max(0, 1 − Σ_{j<i} s[j])) · V[i] (Grefenstette Eq. 5)."""
    r = zero * V[0]
    for i in range(len(s)):
        r = r + minimum(s[i], relu(1 - _sum(s[:i], zero))) * V[i]
    return r


def stack(push, pop, value):
    """Neural Stack (Grefenstette Eqs. 1–3): push (T,), pop (T,), value (T, m) → readings (T, m)
    and final strengths."""
    zero = push.new_zeros(())
    V, s, out = [], [], []
    for t in range(push.shape[0]):
        s = _top_pop(s, pop[t], zero) + [push[t]]
        V = V + [value[t]]
        out.append(_top_read(s, V, zero))
    return torch.stack(out), s


def queue(push, pop, value):
    """Neural Queue (Grefenstette Eqs. 1, 4–5)."""
    zero = push.new_zeros(())
    V, s, out = [], [], []
    for t in range(push.shape[0]):
        s = _front_pop(s, pop[t], zero) + [push[t]]
        V = V + [value[t]]
        out.append(_front_read(s, V, zero))
    return torch.stack(out), s


def deque(push_top, pop_top, value_top, push_bottom, pop_bottom, value_bottom):
    """Neural DeQue (Grefenstette Eqs. 6–11): returns readings at the top and bottom (T, m) each."""
    zero = push_top.new_zeros(())
    V, s, tops, bottoms = [], [], [], []
    for t in range(push_top.shape[0]):
        s = _top_pop(s, pop_top[t], zero)                           # Eq. 7
        s = _front_pop(s, pop_bottom[t], zero)                      # Eq. 8
        s = [push_bottom[t]] + s + [push_top[t]]                    # Eq. 9
        V = [value_bottom[t]] + V + [value_top[t]]                  # Eq. 6
        tops.append(_top_read(s, V, zero))                          # Eq. 10
        bottoms.append(_front_read(s, V, zero))                     # Eq. 11
    return torch.stack(tops), torch.stack(bottoms), s


def superposition(ops, value, depth: int | None = None, noop: bool = True):
    """Superposition stack, cells top first, bottom reading 0; ``ops`` (T, 3) push/noop/pop
    (or (T, 2) push/pop when ``noop`` is False); ``depth`` keeps only that many cells."""
    m = value.shape[1]
    zero_cell = value.new_zeros(m)
    cells: list = []
    out = []
    for t in range(ops.shape[0]):
        push, pop = ops[t, 0], ops[t, 2 if noop else 1]
        n_cells = len(cells) + 1 if depth is None else min(len(cells) + 1, depth)
        old = cells + [zero_cell] * (n_cells + 1 - len(cells))
        new = []
        for i in range(n_cells):
            above = value[t] if i == 0 else old[i - 1]
            cell = push * above + pop * old[i + 1]
            if noop:
                cell = cell + ops[t, 1] * old[i]
            new.append(cell)
        cells = new
        out.append(cells[0])
    return torch.stack(out), cells


def baby_ntm(ops, value, size: int):
    """Baby-NTM memory (Suzgun et al. §3.3): ops (T, 5) in the order rotate-right, rotate-left,
    no-op, pop-left, pop-right; readings are row 0."""
    m = value.shape[1]
    zero_row = value.new_zeros(m)
    M = [zero_row] * size
    out = []
    for t in range(ops.shape[0]):
        results = [
            [M[-1]] + M[:-1],            # rotate right: [e,a,b,c,d]
            M[1:] + [M[0]],              # rotate left: [b,c,d,e,a]
            list(M),                     # no-op
            M[1:] + [zero_row],          # pop left: [b,c,d,e,0]
            [zero_row] + M[:-1],         # pop right: [0,a,b,c,d]
        ]
        new = []
        for i in range(size):
            row = zero_row
            for k in range(5):
                row = row + ops[t, k] * results[k][i]
            new.append(row)
        new[0] = new[0] + value[t]
        M = new
        out.append(M[0])
    return torch.stack(out), M


def input_buffer(inputs, length: int, pops):
    """Hao et al. input buffer: strengths 1 for the first ``length`` items; each step pops
    ``pops[t]`` from the front and reads one unit from the front."""
    zero = pops.new_zeros(())
    V = list(inputs)
    s = [pops.new_ones(()) if j < length else zero for j in range(len(V))]
    out = []
    for t in range(pops.shape[0]):
        s = _front_pop(s, pops[t], zero)
        out.append(_front_read(s, V, zero))
    return torch.stack(out), s


def output_drain(outputs, strengths, steps: int):
    """Hao et al. output buffer: enqueue outputs with strengths, then ``steps`` times read one
    unit from the front and dequeue it."""
    zero = strengths.new_zeros(())
    V, s = list(outputs), list(strengths)
    out = []
    for _ in range(steps):
        out.append(_front_read(s, V, zero))
        s = _front_pop(s, zero + 1, zero)
    return torch.stack(out)


__all__ = ["baby_ntm", "deque", "input_buffer", "output_drain", "queue", "stack", "superposition"]

"""The memory-limited stack WFA of the NS-RNN (DuSell & Chiang 2021, §5.1) as one autograd function.

Only the weights γ[i→t] with t − i ≤ D are kept. The whole recurrence over t runs inside one
`torch.autograd.Function`: the forward pass records no graph, and the backward pass is written
out by hand, step by step in reverse. Every step has the same shapes (rows before the start of
the string are zero rows), touches the same amount of memory and runs the same ops, whatever t
and T. The kept chart lives in band segments of a fixed number of steps (`Band`,
`segment_steps`), all kept for the backward pass when a gradient is needed, otherwise two that
take turns. Time O(B·Q³G²·D²) per step; memory O(T·B·Q²G²·D) with gradients, O(B·Q²G²·D·S)
besides the actions and the outputs without (S = `segment_steps`(D)).

Quantities (scaled as in `pdanet.constructions.stacks.ns`; per step t = 1..T):

- the column E[·→t] (rows i = t−D..t−1) is built as C (B, D, Q, G, Q, G) [b, slot, q, x, r, y]
  with slot j ↔ row i = t − D + j, then stored in the current band segment M (`Band`); rows
  i < 0 are zero rows, so the first steps have the same shapes as the rest;
- v[t] = log α[t] − P[t] is ``Vbuf[t + D]`` (B, Q, G), with −inf for t < 0; ``Abuf[t]`` the
  α-sum before its log (for the gradient of log at 0); ``S[t−1]`` the column scale s.

Per step (Eqs. 2 and 4, with push | replace | pop actions already exponentiated and shifted):
  out  = E[·→t−1] · [replace | pop]              (replace term, and X[k] = E[k→t−1]·pop)
  pop  = Σ_k E[i→k] X[k]                          (rows t−D..t−3: `Band.pop_block` · X)
  C    = [rep + pop, rep, push],  s = max C,  E[·→t] = C / s
  α    = Σ_i e^{v[i]−w} E[i→t],  v[t] = log α + w                (tops y ≠ ⊥)
  α⊥   = Σ_k e^{v[k]_⊥−w⊥} [X[k]_{y=⊥}, bottom] / s,  v[t]_⊥ = log α⊥ + w⊥   (the bottom level)
where w is the largest of v[t−1−D..t−1] and w⊥ the largest of their ⊥ entries (the bottom
level can lie far below the rest, further than the dtype's range). The α⊥ line is the
"extended" bottom convention of `pdanet.constructions.stacks.ns`; under the paper's equations
(``paper``, also used for "reachable") ⊥ is an ordinary top, α = Σ_i e^{v[i]−w} E[i→t] for
every y including ⊥, and the forward and backward passes skip the bottom-level terms. s, w and w⊥ are constants
for autograd (the result does not depend on them), so the hand-written gradient is that of the
plain recurrence. The backward pass
keeps the gradient of the pop operands in two band segments that take turns and the gradient
of the other uses of a column in the loop, and reads each column back from its segment.

Both loops run with denormal numbers flushed to zero on the calling thread (restored after):
products of many probabilities drift into the denormal range, where each arithmetic op is
~100× slower, so that a long string's chart or gradient would cost more per step than a short
one's. Values below the dtype's smallest normal number (~1.2e-38 in float32) become zeros: in
the chart these are entries ~e^-87 below their column's maximum of 1, which the module's
documented range drops anyway; in the gradient, contributions that small.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable


def slots(D: int) -> int:
    """Columns k per row i in the band: k − i from min(1, 4 − D) to D (see `Band`)."""
    return max(D, 2 * D - 3)


def _flushing() -> bool:
    """Whether this thread already flushes denormals (a denormal times 1 comes out as zero)."""
    return bool((torch.full((1,), 1e-40, dtype=torch.float32) * 1.0).item() == 0.0)


@contextlib.contextmanager
def flush_denormals():
    """Flush denormals to zero on this thread for the block, then restore the previous mode."""
    was = _flushing()
    if not was:
        torch.set_flush_denormal(True)
    try:
        yield
    finally:
        if not was:
            torch.set_flush_denormal(False)


def segment_steps(D: int) -> int:
    """Steps per band segment (`Band`): at least 64, and 4·D so that the D copied rows stay a
    small part of a segment."""
    return max(64, 4 * D)


@dataclass(frozen=True)
class Band:
    """The layout of one segment of the kept chart: steps t = 1..S of the segment (t counted
    from the segment's start) in a flat buffer M. Row block i (rows (i, q, x), i = −D..S−1)
    starts at (i + D)·β; in it, entry E[i→k][q, x → u, y] sits at (q·G + x)·row + (b·G + y)·ρ +
    (k − i − lo)·Q + u, for k − i from lo = min(1, 4−D) to D, with ρ = `slots`(D)·Q,
    row = B·G·ρ and β = QG·row + Q. So for each (b, y) the chart is a band matrix with rows
    (i, q, x) and columns (k, u), row stride ``row`` and column stride 1 (moving down a row block
    moves the band right by Q), and any rectangle of it inside the band is one strided view of
    a stretch of M. Entries with k ≤ i are never written and stay zero. Blocks −D..−1 hold the
    last D rows of the previous segment (`carry`), so steps 1..D read their old columns there."""

    B: int
    Q: int
    G: int
    D: int
    S: int

    @property
    def rho(self) -> int:
        return slots(self.D) * self.Q

    @property
    def row(self) -> int:
        """Stride of one row (q, x) of a block: its (b, y) bands side by side."""
        return self.B * self.G * self.rho

    @property
    def block(self) -> int:
        """β, the stride of a row block i."""
        return self.Q * self.G * self.row + self.Q

    @property
    def length(self) -> int:
        """Elements of a segment: blocks −D..S−1 (a block's last entry is QG·row − 1 < β)."""
        return (self.S + self.D) * self.block

    def new(self, like: torch.Tensor) -> torch.Tensor:
        """A segment of zeros with ``like``'s dtype and device."""
        return torch.zeros(self.length, dtype=like.dtype, device=like.device)

    def _offset(self, i: int, k: int) -> int:
        return (i + self.D) * self.block + (k - i - min(1, 4 - self.D)) * self.Q

    def column(self, M: torch.Tensor, t: int) -> torch.Tensor:
        """E[t−D..t−1 → t] as a (B, D, Q, G, Q, G) [b, i, q, x, r, y] view of M."""
        B, Q, G, D, rho, row = self.B, self.Q, self.G, self.D, self.rho, self.row
        return M.as_strided((B, D, Q, G, Q, G), (G * rho, self.block - Q, G * row, row, 1, rho),
                            self._offset(t - D, t))

    def pop_block(self, M: torch.Tensor, t: int) -> torch.Tensor:
        """E[i→k] for rows i = t−D..t−3 and columns k = t−D+1..t−2 (zero where i ≥ k) as a
        (B·G, (D−2)·QG, (D−2)·Q) [b, y][i, q, x][k, u] view of M."""
        n = self.D - 2
        return M.as_strided((self.B * self.G, n * self.Q * self.G, n * self.Q),
                            (self.rho, self.row, 1), self._offset(t - self.D, t - self.D + 1))

    def carry(self, old: torch.Tensor, new: torch.Tensor) -> None:
        """Start segment ``new`` (zeros) from ``old``: its blocks −D..−1 are old's S−D..S−1."""
        n = self.D * self.block
        new[:n] = old[self.S * self.block:self.S * self.block + n]

    def carry_back(self, new: torch.Tensor, old: torch.Tensor) -> None:
        """The backward of `carry`: add new's blocks −D..−1 into old's S−D..S−1."""
        n = self.D * self.block
        old[self.S * self.block:self.S * self.block + n] += new[:n]


def _pop_x(out: torch.Tensor) -> torch.Tensor:
    """X[k][u, y → r] for k = t−D+1..t−2 as (B·G, (D−2)·Q, Q) [b, y][k, u][r]."""
    B, D, Q, G = out.shape[:4]
    return out[:, 2:, :, :, Q * G:].permute(0, 3, 1, 2, 4).reshape(B * G, (D - 2) * Q, Q)


def _levels(out: torch.Tensor, bottom: torch.Tensor) -> torch.Tensor:
    """The bottom level's operand: [X[k][u, ⊥ → r] for k = t−1−D..t−2, then the ⊥ → ⊥ no-op]
    as (B, (D+1)·Q, Q)."""
    B, D, Q, G = out.shape[:4]
    return torch.cat([out[:, :, :, 0, Q * G:], bottom[:, None]], dim=1).view(B, (D + 1) * Q, Q)


class WindowedChart(torch.autograd.Function):
    """(d (T, B, Q, G, Q, 2G+1), v0 (B, Q, G), D, keep, paper) → (V (T+1, B, Q, G), log s (T, B)): the
    windowed recurrence of the module docstring on the shifted, exponentiated actions d
    (time-major, Op axis [push | replace | pop], invalid operations 0). Only V carries a
    gradient. The chart is kept in band segments of S = `segment_steps`(D) steps: all of them
    when ``keep`` (for the backward pass), otherwise two that take turns, so that a forward
    pass without gradients holds O(S + D) columns whatever T."""

    @staticmethod
    def forward(ctx, d, v0, D, keep, paper=False):
        T, B, Q, G = d.shape[:4]
        QG, n = Q * G, D - 2
        push = d[..., :G]                                        # (T, B, Q, G, Q, G)
        rp = replace_pop(d)
        band = Band(B, Q, G, D, min(T, segment_steps(D)))
        segments: list[torch.Tensor] = []
        turns = [band.new(d) for _ in range(0 if keep or not T else 2)]
        Vbuf = d.new_full((T + 1 + D, B, Q, G), float("-inf"))
        Vbuf[D] = v0
        Abuf = v0.new_zeros((T + 1, B, Q, G))                   # α-sums before the log
        S, Wm = v0.new_ones((T, B)), v0.new_zeros((T, 2, B))    # scales s, shifts w and w⊥
        prev = d.new_zeros((B, D * QG, QG))                      # E[·→0]: no rows
        pushes, rps = push.unbind(0), rp.unbind(0)
        bottoms = None if paper else bottom_noop(d).unbind(0)
        M = None
        with flush_denormals():
            for t in range(1, T + 1):
                u = (t - 1) % band.S + 1                         # step within its segment
                if u == 1:
                    j = (t - 1) // band.S
                    new = band.new(d) if keep else turns[j % 2]
                    if j >= 2 and not keep:
                        new.zero_()
                    if M is not None:
                        band.carry(M, new)
                    M = new
                    segments.append(M)
                out = torch.bmm(prev, rps[t - 1]).view(B, D, Q, G, QG + Q)
                C = torch.cat([out[:, 1:, :, :, :QG].view(B, D - 1, Q, G, Q, G),   # replace
                               pushes[t - 1][:, None]], dim=1)                     # push
                if n > 0:                                                          # pop
                    C[:, :n] += torch.bmm(band.pop_block(M, u), _pop_x(out)).view(
                        B, G, n, Q, G, Q).permute(0, 2, 3, 4, 5, 1)
                s = torch.amax(C.view(B, -1), dim=1, out=S[t - 1])
                s.masked_fill_(s == 0, 1.0)                      # C ≥ 0
                C /= s.view(B, 1, 1, 1, 1, 1)                    # E[·→t], Eq. 2
                band.column(M, u).copy_(C)
                Vr = Vbuf[t - 1:t + D]                           # v[t−1−D..t−1]
                w = torch.amax(Vr, dim=(0, 2, 3), out=Wm[t - 1, 0]).nan_to_num_(neginf=0.0)
                ev = torch.exp(Vr - w.view(1, B, 1, 1))
                prev = C.view(B, D * QG, QG)
                a = Abuf[t]                                      # Eq. 4
                torch.bmm(ev[1:].permute(1, 0, 2, 3).reshape(B, 1, D * QG), prev,
                          out=a.view(B, 1, QG))
                v = torch.log(a, out=Vbuf[t + D])
                if paper:
                    v += w.view(B, 1, 1)
                    continue
                w0 = torch.amax(Vr[..., 0], dim=(0, 2), out=Wm[t - 1, 1]).nan_to_num_(neginf=0.0)
                ev0 = torch.exp(Vr[..., 0] - w0.view(1, B, 1))     # the ⊥ level's own shift
                a[:, :, 0] = torch.bmm(ev0.transpose(0, 1).reshape(B, 1, (D + 1) * Q),
                                       _levels(out, bottoms[t - 1])).view(B, Q) / s.view(B, 1)
                v[:, :, 0] = torch.log(a[:, :, 0]) + w0.view(B, 1)
                v[:, :, 1:] += w.view(B, 1, 1)
        if keep:
            ctx.save_for_backward(d, rp, Vbuf, Abuf, S, Wm, *segments)
        ctx.band, ctx.T, ctx.paper = band, T, paper
        logs = torch.log(S)
        ctx.mark_non_differentiable(logs)
        return Vbuf[D:].clone(), logs

    @staticmethod
    @once_differentiable
    def backward(ctx, gV, _):
        d, rp, Vbuf, Abuf, S, Wm, *segments = ctx.saved_tensors
        band, T, paper = ctx.band, ctx.T, ctx.paper
        B, Q, G, D = band.B, band.Q, band.G, band.D
        QG, n = Q * G, D - 2
        turns = [band.new(d) for _ in range(2 if T else 0)]       # pop gradients
        gVb = torch.zeros_like(Vbuf)
        gVb[D:] = gV
        gd, g_rp = torch.zeros_like(d), torch.empty_like(rp)
        g_push, g_bottom = gd[..., :G], bottom_noop(gd)
        rps, bottoms = rp.unbind(0), bottom_noop(d).unbind(0)
        g_next = d.new_zeros((B, D * QG, QG))                 # from step t+1's replace/pop
        if T:                                                    # E[·→T] (natural order)
            E = band.column(segments[-1], (T - 1) % band.S + 1).reshape(B, D * QG, QG)
        with flush_denormals():
            for t in range(T, 0, -1):
                j, u = (t - 1) // band.S, (t - 1) % band.S + 1
                M, gM = segments[j], turns[j % 2]
                s, w, w0 = S[t - 1].view(B, 1), Wm[t - 1, 0].view(1, B, 1, 1), Wm[t - 1, 1]
                a = Abuf[t]
                ga = torch.where(a > 0, gVb[t + D] / a, 0.0)                     # d log α
                if not paper:
                    gab = ga[:, :, 0] / s                                        # bottom level
                    ga[:, :, 0] = 0
                ev = torch.exp(Vbuf[t - 1:t + D] - w)
                prev = band.column(M, u - 1).reshape(B, D * QG, QG)
                out = torch.bmm(prev, rps[t - 1]).view(B, D, Q, G, QG + Q)
                # Eq. 4: gradients to the v's (through ev), to E[·→t] and to the levels
                gvr = torch.bmm(E, ga.view(B, QG, 1)).view(B, D, Q, G).transpose(0, 1)
                gVb[t:t + D] += gvr * ev[1:]
                gE = torch.baddbmm(g_next, ev[1:].permute(1, 0, 2, 3).reshape(B, D * QG, 1),
                                   ga.view(B, 1, QG))
                gE += band.column(gM, u).reshape(B, D * QG, QG)
                # E = C / s with C = [rep + pop, rep, push]
                gC = (gE / s.view(B, 1, 1)).view(B, D, Q, G, Q, G)
                g_push[t - 1] = gC[:, D - 1]
                g_out = out.new_zeros((B, D, Q, G, QG + Q))
                g_out[:, 1:, :, :, :QG] = gC[:, :D - 1].reshape(B, D - 1, Q, G, QG)
                if not paper:
                    ev0 = torch.exp(Vbuf[t - 1:t + D, :, :, 0] - w0.view(1, B, 1))
                    gv0 = torch.bmm(_levels(out, bottoms[t - 1]), gab.view(B, Q, 1))
                    gVb[t - 1:t + D, :, :, 0] += gv0.view(B, D + 1, Q).transpose(0, 1) * ev0
                    gY = torch.bmm(ev0.transpose(0, 1).reshape(B, (D + 1) * Q, 1),
                                   gab.view(B, 1, Q)).view(B, D + 1, Q, Q)
                    g_bottom[t - 1] += gY[:, D]
                    g_out[:, :, :, 0, QG:] = gY[:, :D]
                if n > 0:
                    gp = gC[:, :n].permute(0, 5, 1, 2, 3, 4).reshape(B * G, n * QG, Q)
                    gX = torch.bmm(band.pop_block(M, u).transpose(1, 2), gp)
                    g_out[:, 2:, :, :, QG:] += gX.view(B, G, n, Q, Q).permute(0, 2, 3, 1, 4)
                    band.pop_block(gM, u).add_(torch.bmm(gp, _pop_x(out).transpose(1, 2)))
                go = g_out.view(B, D * QG, QG + Q)
                g_next = torch.bmm(go, rps[t - 1].transpose(1, 2))
                torch.bmm(prev.transpose(1, 2), go, out=g_rp[t - 1])
                E = prev
                if u == 1 and j > 0:                             # into the previous segment
                    old = turns[(j - 1) % 2]
                    old.zero_()
                    band.carry_back(gM, old)
        gd[..., G:2 * G] += g_rp[..., :QG].view(T, B, Q, G, Q, G)
        gd[..., 2 * G] += g_rp[..., QG:].view(T, B, Q, G, Q)
        return gd, None, None, None, None


def replace_pop(d: torch.Tensor) -> torch.Tensor:
    """The [replace | pop] matrix of every step, (T, B, QG, QG+Q): rows (s, z), columns (r, y)
    then r."""
    T, B, Q, G = d.shape[:4]
    return torch.cat([d[..., G:2 * G].reshape(T, B, Q * G, Q * G),
                      d[..., 2 * G].reshape(T, B, Q * G, Q)], dim=3)


def bottom_noop(d: torch.Tensor) -> torch.Tensor:
    """The ⊥ → ⊥ no-op weights (replace ⊥ by ⊥) of every step as a (T, B, Q, Q) view."""
    return d[:, :, :, 0, :, d.shape[3]]


def windowed_chart(d: torch.Tensor, v0: torch.Tensor, D: int,
                   paper: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """`WindowedChart`, keeping the chart for a backward pass only when grad mode is on and d
    requires a gradient; ``paper``: the paper's Eq. 4 for every top (no bottom level, see
    `pdanet.constructions.stacks.ns`)."""
    return WindowedChart.apply(d, v0, D, torch.is_grad_enabled() and d.requires_grad, paper)


def chart_entries(B: int, Q: int, G: int, D: int, T: int, keep: bool) -> int:
    """Elements of the chart buffers of a call: the band segments (all ⌈T/S⌉ of them, or the
    two that take turns) and the v's."""
    band = Band(B, Q, G, D, min(T, segment_steps(D)))
    segments = (-(-T // band.S) if keep else 2) if T else 0
    return segments * band.length + (T + 1 + D) * B * Q * G


__all__ = ["Band", "WindowedChart", "bottom_noop", "chart_entries", "flush_denormals",
           "replace_pop", "segment_steps", "slots", "windowed_chart"]

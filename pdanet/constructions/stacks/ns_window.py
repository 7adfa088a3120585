"""The memory-limited stack WFA of the NS-RNN (DuSell & Chiang 2021, §5.1) as one autograd function.

Only the weights γ[i→t] with t − i ≤ D are kept. The whole recurrence over t runs inside one
`torch.autograd.Function`: the forward pass records no graph, and the backward pass is written
out by hand, step by step in reverse. Every step has the same shapes (rows before the start of
the string are zero rows), touches the same amount of memory and runs the same ops, whatever t
and T. The kept chart lives in band segments of a fixed number of steps (`Band`,
`segment_steps`), all kept for the backward pass when a gradient is needed, otherwise two that
take turns. Time O(B·Q³G³·D²) per step (Eq. 2 as one product, see below); memory
O(T·B·Q²G²·D) with gradients, O(B·Q²G²·D·S) besides the actions and the outputs without
(S = `segment_steps`(D, keep)).

Quantities (scaled as in `pdanet.constructions.stacks.ns`; per step t = 1..T):

- the column E[·→t] (rows i = t−D..t−1) is the (B, D·QG, QG) [b][i, q, x][r, y] view
  `Band.matrix` of the current band segment M (`Band`): it is computed as a contiguous C and
  written there divided by its scale, and the next steps read it (and the older columns) from
  M; rows i < 0 are zero rows, so the first steps have the same shapes as the rest;
- v[t] = log α[t] − P[t] is ``Vbuf[:, t + D]`` (B, QG), with −inf for t < 0 (each step has one
  more entry, a finite floor, so that a window's shift w is finite even when all its v are
  −inf); ``Abuf[t]`` the α-sum before its log (for the gradient of log at 0); ``S[t−1]`` the
  column scale s.

Per step (Eqs. 2 and 4, with push | replace | pop actions already exponentiated and shifted):
  X[k] = E[k→t−1]·pop                             (k = t−D+1..t−2: one product with E[·→t−1])
  C    = [E[i→k] for k = t−D+1..t−1 | I] · [X⊕ | replace | push]       (`Band.step_matrix`)
       = [rep + pop, rep, push],  s = max C,  E[·→t] = C / s
  α    = Σ_i e^{v[i]−w} E[i→t],  v[t] = log α + w                (tops y ≠ ⊥)
  α⊥   = Σ_k e^{v[k]_⊥−w⊥} [X[k]_{y=⊥}, bottom] / s,  v[t]_⊥ = log α⊥ + w⊥   (the bottom level)
The first line of C is one matrix product per batch element for Eq. 2 as a whole: its left
factor is the band window of rows t−D..t−1 and columns t−D+1..t (zero where k ≤ i, and the
column t not yet written: zeros, with the identity that each segment puts at (t−1 → t) before
its steps), its right factor stacks X⊕ (X laid out block-diagonally in the top: rows (k, u, y'),
columns (r, y), zero unless y' = y, so that the pop term of every top is in the same product),
the replace matrix (k = t−1: the replace term) and the push matrix (through the identity: row
t−1). w is the largest of v[t−1−D..t−1] and w⊥ the largest of their ⊥ entries (the bottom
level can lie far below the rest, further than the dtype's range). The α⊥ line is the
"extended" bottom convention of `pdanet.constructions.stacks.ns`; under the paper's equations
(``paper``, also used for "reachable") ⊥ is an ordinary top, α = Σ_i e^{v[i]−w} E[i→t] for
every y including ⊥, and the forward and backward passes skip the bottom-level terms. s, w
and w⊥ are constants for autograd (the result does not depend on them; a column that is all
zero gets s = 1 under "extended", where α⊥ is divided by s, and the smallest normal number
otherwise), so the hand-written gradient is that of the plain recurrence. The backward pass
keeps the gradient of the chart in two band segments that take turns (the replace and pop
terms add to the columns they read there) and the gradient of X in the loop, and reads each
column back from its segment. The forward pass runs about 13 small ops per step, with every
per-step view made before the loop in one call.

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
    """Columns k per row i in the band: k − i from min(1, 2 − D) to D (see `Band`)."""
    return max(D, 2 * D - 1)


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


def segment_steps(D: int, keep: bool = False) -> int:
    """Steps per band segment (`Band`), at least 4·D so that the D copied rows stay a small
    part of a segment: without gradients (two segments that take turns) at least 64, so that
    the per-segment work (zeroing, the copied rows) is spread over many steps; with gradients
    (a new segment every S steps, all kept) at least 32, so that the last one holds few
    unused steps."""
    return max(32 if keep else 64, 4 * D)


@dataclass(frozen=True)
class Band:
    """The layout of one segment of the kept chart: steps t = 1..S of the segment (t counted
    from the segment's start) in a flat buffer M. Row block i (rows (i, q, x), i = −D..S−1)
    starts at (i + D)·β; in it, entry E[i→k][q, x → u, y] sits at (q·G + x)·row + b·ρ +
    (k − i − lo)·QG + u·G + y, for k − i from lo = min(1, 2−D) to D, with ρ = `slots`(D)·QG,
    row = B·ρ and β = QG·row + QG. So for each b the chart is a band matrix with rows
    (i, q, x) and columns (k, u, y), row stride ``row`` and column stride 1 (moving down a row
    block moves the band right by QG), and any rectangle of it inside the band is one strided
    view of a stretch of M. Entries with k ≤ i are never written and stay zero. Blocks −D..−1
    hold the last D rows of the previous segment (`carry`), so steps 1..D read their old
    columns there."""

    B: int
    Q: int
    G: int
    D: int
    S: int

    @property
    def rho(self) -> int:
        return slots(self.D) * self.Q * self.G

    @property
    def row(self) -> int:
        """Stride of one row (q, x) of a block: its b bands side by side."""
        return self.B * self.rho

    @property
    def block(self) -> int:
        """β, the stride of a row block i."""
        return self.Q * self.G * (self.row + 1)

    @property
    def length(self) -> int:
        """Elements of a segment: blocks −D..S−1 (a block's last entry is QG·row − 1 < β)."""
        return (self.S + self.D) * self.block

    def new(self, like: torch.Tensor) -> torch.Tensor:
        """A segment of zeros with ``like``'s dtype and device."""
        return torch.zeros(self.length, dtype=like.dtype, device=like.device)

    def _offset(self, i: int, k: int) -> int:
        return (i + self.D) * self.block + (k - i - min(1, 2 - self.D)) * self.Q * self.G

    def matrix(self, M: torch.Tensor, t: int) -> torch.Tensor:
        """E[t−D..t−1 → t] as a (B, D·QG, QG) [b][i, q, x][r, y] view of M."""
        QG = self.Q * self.G
        return M.as_strided((self.B, self.D * QG, QG), (self.rho, self.row, 1),
                            self._offset(t - self.D, t))

    def column(self, M: torch.Tensor, t: int) -> torch.Tensor:
        """E[t−D..t−1 → t] as a (B, D, Q, G, Q, G) [b, i, q, x, r, y] view of M."""
        B, Q, G, D = self.B, self.Q, self.G, self.D
        return self.matrix(M, t).view(B, D, Q, G, Q, G)

    def pop_matrix(self, M: torch.Tensor, t: int) -> torch.Tensor:
        """E[i→k] for rows i = t−D..t−3 and columns k = t−D+1..t−2 (zero where i ≥ k) as a
        (B, (D−2)·QG, (D−2)·QG) [b][i, q, x][k, u, y] view of M."""
        m = (self.D - 2) * self.Q * self.G
        return M.as_strided((self.B, m, m), (self.rho, self.row, 1),
                            self._offset(t - self.D, t - self.D + 1))

    def step_matrix(self, M: torch.Tensor, t: int) -> torch.Tensor:
        """E[i→k] for rows i = t−D..t−1 and columns k = t−D+1..t (zero where i ≥ k; the last
        column block, E[·→t], is read before step t writes it: zeros, and the identity that
        `identities` puts at (t−1 → t)) as a (B, D·QG, D·QG) [b][i, q, x][k, u, y] view."""
        m = self.D * self.Q * self.G
        return M.as_strided((self.B, m, m), (self.rho, self.row, 1),
                            self._offset(t - self.D, t - self.D + 1))

    def matrices(self, M: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`matrix`(M, t) for t = 0..S (one call that makes all the views)."""
        QG = self.Q * self.G
        return M.as_strided((self.S + 1, self.B, self.D * QG, QG),
                            (self.block, self.rho, self.row, 1), self._offset(-self.D, 0)).unbind(0)

    def step_matrices(self, M: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """`step_matrix`(M, t) for t = 1..S (one call that makes all the views)."""
        m = self.D * self.Q * self.G
        return M.as_strided((self.S, self.B, m, m), (self.block, self.rho, self.row, 1),
                            self._offset(1 - self.D, 2 - self.D)).unbind(0)

    def identities(self, M: torch.Tensor) -> torch.Tensor:
        """The diagonal entries (i → i+1)[q, x → q, x] of rows i = 0..S−1 as an (S, B, QG)
        view of M."""
        QG = self.Q * self.G
        return M.as_strided((self.S, self.B, QG), (self.block, self.rho, self.row + 1),
                            self._offset(0, 1))

    def pop_block(self, M: torch.Tensor, t: int) -> torch.Tensor:
        """The same entries as `pop_matrix`, for each top y on its own: a (B·G, (D−2)·QG,
        (D−2)·Q) [b, y][i, q, x][k, u] tensor (a copy)."""
        B, Q, G, n = self.B, self.Q, self.G, self.D - 2
        blk = self.pop_matrix(M, t).view(B, n * Q * G, n * Q, G)
        return blk.permute(0, 3, 1, 2).reshape(B * G, n * Q * G, n * Q)

    def carry(self, old: torch.Tensor, new: torch.Tensor) -> None:
        """Start segment ``new`` (zeros) from ``old``: its blocks −D..−1 are old's S−D..S−1."""
        n = self.D * self.block
        new[:n] = old[self.S * self.block:self.S * self.block + n]

    def carry_back(self, new: torch.Tensor, old: torch.Tensor) -> None:
        """The backward of `carry`: add new's blocks −D..−1 into old's S−D..S−1."""
        n = self.D * self.block
        old[self.S * self.block:self.S * self.block + n] += new[:n]


def _diagonal(Xe: torch.Tensor, n: int, Q: int, G: int) -> torch.Tensor:
    """The entries y' = y of the first n row blocks of X⊕ (Xe (B, m·QG, QG) [k, u, y'][r, y],
    contiguous per batch element) as a (B, n·Q, G, Q) [(k, u), y, r] view."""
    QG = Q * G
    return Xe.as_strided((Xe.shape[0], n * Q, G, Q), (Xe.stride(0), G * QG, QG + 1, G),
                         Xe.storage_offset())


class WindowedChart(torch.autograd.Function):
    """(d (T, B, Q, G, Q, 2G+1), v0 (B, Q, G), D, keep, paper) → (V (B, T+1, Q, G), log s (T, B)):
    the windowed recurrence of the module docstring on the shifted, exponentiated actions d
    (time-major, Op axis [push | replace | pop], invalid operations 0). Only V carries a
    gradient. The chart is kept in band segments of S = `segment_steps`(D, keep) steps: all of them
    when ``keep`` (for the backward pass), otherwise two that take turns, so that a forward
    pass without gradients holds O(S + D) columns whatever T."""

    @staticmethod
    def forward(ctx, d, v0, D, keep, paper=False):
        T, B, Q, G = d.shape[:4]
        QG, n = Q * G, max(D - 2, 0)
        band = Band(B, Q, G, D, min(T, segment_steps(D, keep)))
        segments: list[torch.Tensor] = []
        turns = [band.new(d) for _ in range(0 if keep or not T else 2)]
        # v's, with one more entry per step: a finite floor, so that the shift w (the max of
        # a window) is finite even where every v of the window is −inf
        L = T + 1 + D
        Vfull = d.new_full((B, L, QG + 1), float("-inf"))
        Vfull[..., QG] = torch.finfo(d.dtype).min
        Vbuf = Vfull[..., :QG]
        Vbuf[:, D] = v0.reshape(B, QG)
        S = d.new_ones((T, B))                                      # scales s
        Srow = S.view(T, B, 1, 1).unbind(0)
        # per-step views, made in one call each: actions, v windows, outputs
        pops = d[..., 2 * G].reshape(T, B, QG, Q).contiguous().unbind(0)   # [b][s, z][r]
        ops = [d[..., :G].reshape(T, B, QG, QG)]                    # push (k = t)
        if D >= 2:                                                  # replace (k = t − 1)
            ops.insert(0, d[..., G:2 * G].reshape(T, B, QG, QG))
        RP = torch.cat(ops, dim=2)
        Vwin = Vfull.as_strided((T, B, D + 1, QG + 1), (QG + 1, L * (QG + 1), QG + 1, 1))
        Vev = Vwin[:, :, 1:, :QG].unbind(0)                         # v[t−D..t−1]
        Vwin = Vwin.unbind(0)                                       # v[t−1−D..t−1] and floors
        Vout = Vfull.as_strided((T, B, 1, QG), (QG + 1, L * (QG + 1), QG + 1, 1),
                                (D + 1) * (QG + 1)).unbind(0)
        if keep or not paper:                                       # kept for the backward
            Abuf = d.new_zeros((T + 1, B, 1, QG))                   # α-sums before the log
            Wm = d.new_zeros((2, T, B, 1, 1))                       # shifts w and w⊥
            Arow, Ws, W0s = Abuf.unbind(0), Wm[0].unbind(0), Wm[1].unbind(0)
        else:
            Ws = [d.new_empty((B, 1, 1))] * T
        bottoms = None if paper else bottom_noop(d).unbind(0)
        # step operands Xe = [X⊕ | R | push] (B, D·QG, QG) of a segment's steps (R and push
        # copied in at its start), X from Xp = E[·→t−1]·pop
        Xring = d.new_zeros((band.S, B, D * QG, QG))
        Xes = Xring.unbind(0)
        Xdiag = [_diagonal(x, n, Q, G) for x in Xes] if n else None
        Xp = d.new_empty((B, D * QG, Q))
        Xsrc = Xp[:, 2 * QG:].unflatten(1, (-1, G))
        ev3 = d.new_empty((B, D, QG))
        ev = ev3.view(B, 1, D * QG)
        tiny = torch.finfo(d.dtype).tiny
        prev = d.new_zeros((B, D * QG, QG))                         # E[·→0]: no rows
        M = None
        bmm, amax, div, sub, log = torch.bmm, torch.amax, torch.div, torch.sub, torch.log
        with flush_denormals():
            for t in range(1, T + 1):
                u = (t - 1) % band.S + 1                            # step within its segment
                if u == 1:
                    j = (t - 1) // band.S
                    new = band.new(d) if keep else turns[j % 2]
                    if j >= 2 and not keep:
                        new.zero_()
                    if M is not None:
                        band.carry(M, new)
                    M = new
                    segments.append(M)
                    band.identities(M).fill_(1.0)                   # (the rest is zero)
                    mats, steps = band.matrices(M), band.step_matrices(M)
                    k = min(band.S, T - t + 1)
                    Xring[:k, :, n * QG:] = RP[t - 1:t - 1 + k]
                if n or not paper:                                  # X[k] = E[k→t−1]·pop
                    bmm(prev, pops[t - 1], out=Xp)
                if n:
                    Xdiag[u - 1].copy_(Xsrc)
                C = bmm(steps[u - 1], Xes[u - 1])                   # Eq. 2: pop, replace, push
                s = amax(C, dim=(1, 2), keepdim=True, out=Srow[t - 1])
                if paper:
                    s.clamp_min_(tiny)                              # C ≥ 0; 0 only if C = 0
                else:
                    s.masked_fill_(s == 0, 1.0)                     # (α⊥ is divided by s)
                E = div(C, s, out=mats[u])                          # E[·→t], into the band
                Vr = Vwin[t - 1]
                w = amax(Vr, dim=(1, 2), keepdim=True, out=Ws[t - 1])
                sub(Vev[t - 1], w, out=ev3).exp_()
                a = bmm(ev, E, out=Arow[t]) if keep else bmm(ev, E)  # Eq. 4
                v = log(a, out=Vout[t - 1])
                prev = E
                if paper:
                    v += w
                    continue
                V0 = Vr[:, :, :QG:G]                                # ⊥ entries (B, D+1, Q)
                w0 = amax(V0, dim=(1, 2), keepdim=True, out=W0s[t - 1])
                w0.nan_to_num_(neginf=0.0)
                ev0 = sub(V0, w0).exp_()                            # the ⊥ level's own shift
                lev = torch.cat([Xp.unflatten(1, (-1, G))[:, :, 0], bottoms[t - 1]], dim=1)
                a0 = bmm(ev0.view(B, 1, (D + 1) * Q), lev).div_(s)
                if keep:
                    a[:, :, ::G] = a0
                log(a0, out=v[:, :, ::G])
                v.view(B, Q, G)[:, :, 0] += w0.view(B, 1)
                v.view(B, Q, G)[:, :, 1:] += w.view(B, 1, 1)
        if keep:
            ctx.save_for_backward(d, Vfull, Abuf, S, Wm, *segments)
        ctx.band, ctx.T, ctx.paper = band, T, paper
        logs = torch.log(S)
        ctx.mark_non_differentiable(logs)
        return Vbuf[:, D:].reshape(B, T + 1, Q, G).clone(), logs

    @staticmethod
    @once_differentiable
    def backward(ctx, gV, _):
        d, Vfull, Abuf, S, Wm, *segments = ctx.saved_tensors
        Vbuf = Vfull[..., :-1]
        band, T, paper = ctx.band, ctx.T, ctx.paper
        B, Q, G, D = band.B, band.Q, band.G, band.D
        QG, n = Q * G, max(D - 2, 0)
        L = (D - 1) * QG                                          # rows of [X⊕ | R]
        turns = [band.new(d) for _ in range(2 if T else 0)]       # chart gradients
        gVb = torch.zeros_like(Vbuf)
        gVb[:, D:] = gV.reshape(B, T + 1, QG)
        gd = torch.zeros_like(d)
        g_push, g_bottom = gd[..., :G], bottom_noop(gd)
        g_rep, g_pop = d.new_zeros((T, B, QG, QG)), d.new_zeros((T, B, QG, Q))
        pops = d[..., 2 * G].reshape(T, B, QG, Q).contiguous().unbind(0)
        reps = d[..., G:2 * G].reshape(T, B, QG, QG).contiguous().unbind(0)
        bottoms = bottom_noop(d).unbind(0)
        g_next = d.new_zeros((B, D * QG, QG))                 # from step t+1's X and levels
        xe = d.new_zeros((B, L, QG))                          # [X⊕ | R] of the step
        xdiag = _diagonal(xe, n, Q, G) if n else None
        gXp = d.new_zeros((B, D * QG, Q))
        if T:                                                    # E[·→T]
            E = band.matrix(segments[-1], (T - 1) % band.S + 1)
        with flush_denormals():
            for t in range(T, 0, -1):
                j, u = (t - 1) // band.S, (t - 1) % band.S + 1
                M, gM = segments[j], turns[j % 2]
                s, w, w0 = S[t - 1].view(B, 1, 1), Wm[0, t - 1], Wm[1, t - 1]
                a = Abuf[t]
                ga = torch.where(a > 0, gVb[:, t + D:t + D + 1] / a, 0.0)    # d log α (B,1,QG)
                if not paper:
                    gab = ga[:, :, ::G] / s                                  # bottom level
                    ga[:, :, ::G] = 0
                ev = torch.exp(Vbuf[:, t:t + D] - w)                         # (B, D, QG)
                prev = band.matrix(M, u - 1)
                # Eq. 4: gradients to the v's (through ev) and to E[·→t]
                gvr = torch.bmm(E, ga.transpose(1, 2)).view(B, D, QG)
                gVb[:, t:t + D] += gvr * ev
                gE = torch.baddbmm(g_next, ev.view(B, D * QG, 1), ga)
                gE += band.matrix(gM, u)
                gC = gE.div_(s)                                              # E = C / s
                # C = [E[·→k] for k = t−D+1..t−1 | I] · [X⊕ | R | push]
                g_push[t - 1] = gC[:, (D - 1) * QG:].view(B, Q, G, Q, G)
                gXp.zero_()
                if D >= 2:
                    W = band.step_matrix(M, u)[:, :, :L]                     # without I
                    gxe = torch.bmm(W.transpose(1, 2), gC)                   # (B, L, QG)
                    g_rep[t - 1] = gxe[:, n * QG:]
                    if n:
                        gXp[:, 2 * QG:].unflatten(1, (-1, G)).copy_(_diagonal(gxe, n, Q, G))
                        xdiag.copy_(torch.bmm(prev[:, 2 * QG:], pops[t - 1])
                                    .unflatten(1, (-1, G)))
                    xe[:, n * QG:] = reps[t - 1]
                    band.step_matrix(gM, u)[:, :, :L].baddbmm_(gC, xe.transpose(1, 2))
                if not paper:                                                # bottom level
                    ev0 = torch.exp(Vbuf[:, t - 1:t + D, ::G] - w0)          # (B, D+1, Q)
                    lev = _levels(prev, pops[t - 1], bottoms[t - 1])
                    gv0 = torch.bmm(lev, gab.transpose(1, 2))
                    gVb[:, t - 1:t + D, ::G] += gv0.view(B, D + 1, Q) * ev0
                    gY = torch.bmm(ev0.view(B, (D + 1) * Q, 1), gab)        # (B, (D+1)Q, Q)
                    g_bottom[t - 1] += gY[:, D * Q:]
                    gXp.unflatten(1, (-1, G))[:, :, 0] += gY[:, :D * Q]
                g_next = torch.bmm(gXp, pops[t - 1].transpose(1, 2))
                torch.bmm(prev.transpose(1, 2), gXp, out=g_pop[t - 1])
                E = prev
                if u == 1 and j > 0:                             # into the previous segment
                    old = turns[(j - 1) % 2]
                    old.zero_()
                    band.carry_back(gM, old)
        gd[..., G:2 * G] += g_rep.view(T, B, Q, G, Q, G)
        gd[..., 2 * G] += g_pop.view(T, B, Q, G, Q)
        return gd, None, None, None, None


def _levels(prev: torch.Tensor, pop: torch.Tensor, bottom: torch.Tensor) -> torch.Tensor:
    """The bottom level's operand: [X[k][u, ⊥ → r] for k = t−1−D..t−2, then the ⊥ → ⊥ no-op]
    as (B, (D+1)·Q, Q), from E[·→t−1] (B, D·QG, QG) and the pop actions (B, QG, Q)."""
    Q = bottom.shape[1]
    G = prev.shape[2] // Q
    X0 = torch.bmm(prev.unflatten(1, (-1, G))[:, :, 0], pop)           # (B, D·Q, Q)
    return torch.cat([X0, bottom], dim=1)


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
    """`WindowedChart` (v batch-major, (B, T+1, Q, G)), keeping the chart for a backward pass
    only when grad mode is on and d requires a gradient; ``paper``: the paper's Eq. 4 for every
    top (no bottom level, see `pdanet.constructions.stacks.ns`)."""
    return WindowedChart.apply(d, v0, D, torch.is_grad_enabled() and d.requires_grad, paper)


def chart_entries(B: int, Q: int, G: int, D: int, T: int, keep: bool) -> int:
    """Elements of the chart buffers of a call: the band segments (all ⌈T/S⌉ of them, or the
    two that take turns) and the v's."""
    band = Band(B, Q, G, D, min(T, segment_steps(D, keep)))
    segments = (-(-T // band.S) if keep else 2) if T else 0
    return segments * band.length + (T + 1 + D) * B * Q * G


__all__ = ["Band", "WindowedChart", "bottom_noop", "chart_entries", "flush_denormals",
           "replace_pop", "segment_steps", "slots", "windowed_chart"]

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
  written there divided by its scale s, and the next steps read it (and the older columns)
  from M; rows i < 0 are zero rows, so the first steps have the same shapes as the rest;
- v[t] = log α[t] − P[t] (B, QG), the output; ``S[t−1]`` the column scale s.

Per step (Eqs. 2 and 4, with push | replace | pop actions already exponentiated and shifted):
  X[k] = E[k→t−1]·pop                             (k = t−D+1..t−2: one product with E[·→t−1])
  C    = [E[i→k] for k = t−D+1..t−1 | I] · [X⊕ | replace | push]       (`Band.step_matrix`)
       = [rep + pop, rep, push],  s = max C,  E[·→t] = C / s
The first line of C is one matrix product per batch element for Eq. 2 as a whole: its left
factor is the band window of rows t−D..t−1 and columns t−D+1..t (zero where k ≤ i, and the
column t not yet written: zeros, with the identity that each segment puts at (t−1 → t) before
its steps), its right factor stacks X⊕ (X laid out block-diagonally in the top: rows (k, u, y'),
columns (r, y), zero unless y' = y, so that the pop term of every top is in the same product),
the replace matrix (k = t−1: the replace term) and the push matrix (through the identity: row
t−1). s is a constant for autograd (the result does not depend on it), so the hand-written
gradient is that of the plain recurrence.

Eq. 4 under the paper's equations (``paper``, also used for "reachable": ⊥ is an ordinary top)
runs in linear scale: A[i] = e^{v[i] − F} for the D entries of the window, all in one frame F,
  A[t] = Σ_i A[i] E[i→t],  m = max(A[t−D+1..t], tiny),  A[t−D+1..t] /= m,  F += log m
(3 ops: the product, the max and the rescale of the window in place), so that the window's
largest entry is 1 after every step, as the log-domain shift by the window's largest v would
make it; v[i] = log A[i] + F at the last rescale that covered entry i (step i + D − 1), all
at once after the loop. The pop term's X⊕ is (E[·→t−1] · pop ⊗ 1) ⊙ [y' = y] (a product and a
mask, written whole into the step's operand), and C has one more column, zero but for `tiny`
in the push rows, so that s = max C is at least the smallest normal number without a clamp
(a column that is all zero). About 9 ops per step, with every per-step view made in one call
per segment.

Under the "extended" bottom convention of `pdanet.constructions.stacks.ns` the loop stays in
the log domain, v[t] = log α + w with w the largest of v[t−1−D..t−1] (each step has one more
entry there, a finite floor, so that w is finite even when all its v are −inf), and the bottom
level has its own shift:
  α    = Σ_i e^{v[i]−w} E[i→t],  v[t] = log α + w                (tops y ≠ ⊥)
  α⊥   = Σ_k e^{v[k]_⊥−w⊥} [X[k]_{y=⊥}, bottom] / s,  v[t]_⊥ = log α⊥ + w⊥   (the bottom level)
with w⊥ the largest of the window's ⊥ entries (the bottom level can lie far below the rest,
further than the dtype's range); a column that is all zero gets s = 1 there (α⊥ is divided by
s). The backward pass reads v, the shifts w (under ``paper``: the frames F) and the α-sums
before the log; it keeps the gradient of the chart in two band segments that take turns (the
replace and pop terms add to the columns they read there) and the gradient of X in the loop,
and reads each column back from its segment.

Both loops run with denormal numbers flushed to zero on the calling thread (restored after):
products of many probabilities drift into the denormal range, where each arithmetic op is
~100× slower, so that a long string's chart or gradient would cost more per step than a short
one's. Values below the dtype's smallest normal number (~1.2e-38 in float32) become zeros: in
the chart these are entries ~e^-87 below their column's maximum of 1, which the module's
documented range drops anyway; in the gradient, contributions that small.

Range of the linear-scale loop (``paper``): an entry A[i] is divided by the D − 1 rescales after
it, each at most D·QG (the largest column sum of E ≤ 1), so it stays a normal number while its
true α is within e^-87 (float32; e^-708 in float64) of the window's largest. Beyond that — only
possible when (D − 1)·ln(D·QG) exceeds that range, i.e. not at D = 10 with QG ≤ 60 — the
returned log α[i] is −inf where the log-domain loop gives a finite value more than e^87 below
the window's largest: the readings, which weigh each entry by its α, differ only below the
dtype's resolution; the gradient stays finite (tested).
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

    def matrices(self, M: torch.Tensor, k: int | None = None) -> tuple[torch.Tensor, ...]:
        """`matrix`(M, t) for t = 0..k (default k = S; one call that makes all the views)."""
        QG, k = self.Q * self.G, self.S if k is None else k
        return M.as_strided((k + 1, self.B, self.D * QG, QG),
                            (self.block, self.rho, self.row, 1), self._offset(-self.D, 0)).unbind(0)

    def step_matrices(self, M: torch.Tensor, k: int | None = None) -> tuple[torch.Tensor, ...]:
        """`step_matrix`(M, t) for t = 1..k (default k = S; one call that makes all the
        views)."""
        m, k = self.D * self.Q * self.G, self.S if k is None else k
        return M.as_strided((k, self.B, m, m), (self.block, self.rho, self.row, 1),
                            self._offset(1 - self.D, 2 - self.D)).unbind(0)

    def identities(self, M: torch.Tensor, k: int | None = None) -> torch.Tensor:
        """The diagonal entries (i → i+1)[q, x → q, x] of rows i = 0..k−1 (default k = S) as a
        (k, B, QG) view of M."""
        QG, k = self.Q * self.G, self.S if k is None else k
        return M.as_strided((k, self.B, QG), (self.block, self.rho, self.row + 1),
                            self._offset(0, 1))

    def used(self, k: int) -> int:
        """Elements of a segment that steps 1..k read or write: its blocks −D..k−1."""
        return (k + self.D) * self.block

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


def _segments(band: Band, T: int, d: torch.Tensor, keep: bool, segments: list, RP: torch.Tensor,
              ring: torch.Tensor):
    """The band segments of a forward pass, each set up before its steps: (t0, k, M) for the
    segment M of steps t0+1..t0+k. A new segment
    (all kept when ``keep``, appended to ``segments``; otherwise two that take turns, zeroed
    where the steps use them) gets the last D rows of the previous one (`Band.carry`), the
    identities at (i → i+1) and the steps' [R | push] operands in ``ring``."""
    M = None
    for t0 in range(0, T, max(band.S, 1)):                          # (T = 0: none)
        k = min(band.S, T - t0)
        if keep or len(segments) < 2:
            new = band.new(d)
        else:                                                       # blocks −D..k−1 only
            new = segments[-2]
            new[band.D * band.block:band.used(k)].zero_()           # (−D..−1: `carry`)
        if M is not None:
            band.carry(M, new)
        M = new
        segments.append(M)
        band.identities(M, k).fill_(1.0)                            # (the rest is zero)
        ring[:k] = RP[t0:t0 + k]
        yield t0, k, M


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
        S = d.new_ones((T, B))                                      # scales s
        # per-step views, made in one call each: actions, v windows, outputs
        ops = [d[..., :G].reshape(T, B, QG, QG)]                    # push (k = t)
        if D >= 2:                                                  # replace (k = t − 1)
            ops.insert(0, d[..., G:2 * G].reshape(T, B, QG, QG))
        RP = torch.cat(ops, dim=2)
        tiny = torch.finfo(d.dtype).tiny
        if paper:       # one more column: `tiny` in the push rows, so that C's max is ≥ tiny
            RP = torch.cat([RP, RP.new_zeros(RP.shape[:3] + (1,))], dim=3)
            RP[:, :, -QG:, QG] = tiny
        # step operands Xe = [X⊕ | R | push] (B, D·QG, QG, and the floor column under paper)
        # of a segment's steps (R and push copied in at its start), X⊕ written by each step
        Xring = (d.new_empty((band.S, B, D * QG, QG + 1)) if paper     # (see X⊕)
                 else d.new_zeros((band.S, B, D * QG, QG)))
        Xes = Xring.unbind(0)
        parts = _segments(band, T, d, keep, segments, RP, Xring[:, :, n * QG:])
        bmm, amax, div, sub, log = torch.bmm, torch.amax, torch.div, torch.sub, torch.log
        if paper:
            # α in linear scale: entry i (= −D..T) at row i + D of Afull, in the frame of the
            # latest rescale that covered it; rows after the last written one hold `tiny`
            # (the floor of the next rescale's max, overwritten when the step writes its row)
            La = T + D + 2
            Afull = d.new_full((B, La, QG), tiny)
            Afull[:, :D] = 0.0
            Afull[:, D] = v0.reshape(B, QG).exp()
            win = Afull.as_strided((T + 1, B, 1, D * QG), (QG, La * QG, D * QG, 1),
                                   QG).unbind(0)                    # entries t−D..t−1
            top = Afull.as_strided((T, B, 1, D * QG + 1), (QG, La * QG, D * QG + 1, 1),
                                   2 * QG).unbind(0)                # t−D+1..t and a floor
            slot = Afull.as_strided((T, B, 1, QG), (QG, La * QG, QG, 1),
                                    (D + 1) * QG).unbind(0)         # entry t
            # torch's bmm writes a strided out= in place in its small-product kernel
            # (D·QG² < 400 multiply-adds per matrix); above, it would go element by element
            # of the batch, so that the α-sum goes through a contiguous buffer
            direct = D * QG * QG < 400
            Atmp = d.new_empty((B, 1, QG))
            ss: list[torch.Tensor] = []                             # scales s, rescales m
            ms: list[torch.Tensor] = []
            # X⊕ = (E[k→t−1] · pop⊗1) ⊙ [y' = y] over k = t−D+1..t−2: every top's pop term in
            # one product, written whole into the top rows of the step's operand
            popx = d.new_zeros((T, B, QG, QG + 1))                  # [b][s, z][r, y] (+ 0)
            popx[..., :QG] = d[..., 2 * G, None].expand(T, B, Q, G, Q, G).reshape(T, B, QG, QG)
            popx = popx.unbind(0) if n else [None] * T
            same = d.new_zeros((n * QG, QG + 1))
            same[:, :QG] = torch.eye(G, dtype=d.dtype, device=d.device).repeat(n * Q, Q)
            Xfull = d.new_empty((B, D * QG, QG + 1))                # X of all D rows
            Xtmp = Xfull[:, 2 * QG:]
            Cbuf = d.new_empty((B, D * QG, QG + 1))                 # C and its floor column
            Cv = Cbuf[..., :QG]
            Xtop = Xring[:, :, :n * QG].unbind(0)
        else:
            Srow = S.view(T, B, 1, 1).unbind(0)
            pops = d[..., 2 * G].reshape(T, B, QG, Q).contiguous().unbind(0)   # [b][s, z][r]
            Xdiag = [_diagonal(x, n, Q, G) for x in Xes] if n else [None] * band.S
            Xp = d.new_empty((B, D * QG, Q))
            Xsrc = Xp[:, 2 * QG:].unflatten(1, (-1, G))
            prev = d.new_zeros((B, D * QG, QG))                     # E[·→0]: no rows
            # v's, with one more entry per step: a finite floor, so that the shift w (the max
            # of a window) is finite even where every v of the window is −inf
            L = T + 1 + D
            Vfull = d.new_full((B, L, QG + 1), float("-inf"))
            Vfull[..., QG] = torch.finfo(d.dtype).min
            Vbuf = Vfull[..., :QG]
            Vbuf[:, D] = v0.reshape(B, QG)
            Vwin = Vfull.as_strided((T, B, D + 1, QG + 1), (QG + 1, L * (QG + 1), QG + 1, 1))
            Vev = Vwin[:, :, 1:, :QG].unbind(0)                     # v[t−D..t−1]
            Vwin = Vwin.unbind(0)                                   # v[t−1−D..t−1] and floors
            Vout = Vfull.as_strided((T, B, 1, QG), (QG + 1, L * (QG + 1), QG + 1, 1),
                                    (D + 1) * (QG + 1)).unbind(0)
            Abuf = d.new_zeros((T + 1, B, 1, QG))                   # α-sums before the log
            Wm = d.new_zeros((2, T, B, 1, 1))                       # shifts w and w⊥
            Arow, Ws, W0s = Abuf.unbind(0)[1:], Wm[0].unbind(0), Wm[1].unbind(0)
            bottoms = bottom_noop(d).unbind(0)
            ev3 = d.new_empty((B, D, QG))
            ev = ev3.view(B, 1, D * QG)
        with flush_denormals():
            for t0, k, M in parts:                                  # steps t0+1..t0+k
                steps, mats0 = band.step_matrices(M, k), band.matrices(M, k)
                mats = mats0[1:]                                    # E[·→t] (mats0: E[·→t−1])
                if paper:                                           # (views made once)
                    for step, Xe, xtop, px, E, pop, w, a, mx, nxt in zip(
                            steps, Xes, Xtop, mats0, mats, popx[t0:], win[t0:], slot[t0:],
                            top[t0:], win[t0 + 1:]):
                        if n:                                       # X[k] = E[k→t−1]·pop
                            bmm(px, pop, out=Xfull)
                            torch.mul(Xtmp, same, out=xtop)
                        bmm(step, Xe, out=Cbuf)                     # Eq. 2: pop, replace, push
                        s = amax(Cbuf, dim=(1, 2), keepdim=True)    # (≥ tiny)
                        div(Cv, s, out=E)                           # E[·→t], into the band
                        if direct:                                  # Eq. 4
                            bmm(w, E, out=a)
                        else:
                            a.copy_(bmm(w, E, out=Atmp))
                        m = amax(mx, dim=2, keepdim=True)
                        nxt.div_(m)
                        ss.append(s)
                        ms.append(m)
                    continue
                for step, Xe, xdiag, E, pop, srow, Vr, vev, vout, arow, ws, w0s, bot in zip(
                        steps, Xes, Xdiag, mats, pops[t0:], Srow[t0:], Vwin[t0:], Vev[t0:],
                        Vout[t0:], Arow[t0:], Ws[t0:], W0s[t0:], bottoms[t0:]):
                    bmm(prev, pop, out=Xp)                          # X[k] = E[k→t−1]·pop
                    if n:
                        xdiag.copy_(Xsrc)
                    C = bmm(step, Xe)                               # Eq. 2: pop, replace, push
                    s = amax(C, dim=(1, 2), keepdim=True, out=srow)
                    s.masked_fill_(s == 0, 1.0)                     # (α⊥ is divided by s)
                    prev = div(C, s, out=E)                         # E[·→t], into the band
                    w = amax(Vr, dim=(1, 2), keepdim=True, out=ws)
                    sub(vev, w, out=ev3).exp_()
                    a = bmm(ev, E, out=arow)                        # Eq. 4
                    v = log(a, out=vout)
                    V0 = Vr[:, :, :QG:G]                            # ⊥ entries (B, D+1, Q)
                    w0 = amax(V0, dim=(1, 2), keepdim=True, out=w0s)
                    w0.nan_to_num_(neginf=0.0)
                    ev0 = sub(V0, w0).exp_()                        # the ⊥ level's own shift
                    lev = torch.cat([Xp.unflatten(1, (-1, G))[:, :, 0], bot], dim=1)
                    a[:, :, ::G] = bmm(ev0.view(B, 1, (D + 1) * Q), lev).div_(s)
                    log(a[:, :, ::G], out=v[:, :, ::G])
                    v.view(B, Q, G)[:, :, 0] += w0.view(B, 1)
                    v.view(B, Q, G)[:, :, 1:] += w.view(B, 1, 1)
        if paper:
            # v[i] = log Afull[i] + the log frame of entry i: the sum of the rescales log m
            # of steps 1..min(i + D − 1, T) (the last that covered it)
            if T:
                S = torch.stack(ss).view(T, B)
            Mt = torch.stack(ms).view(T, B) if T else S
            cum = torch.cat([Mt.new_zeros(1, B), torch.cumsum(torch.log(Mt), dim=0)])
            last = torch.arange(D - 1, T + D, device=d.device).clamp_(max=T)
            V = torch.log(Afull[:, D:T + D + 1]) + cum[last].t()[:, :, None]
            if keep:        # the backward's α-sums and shifts: step t ran in frame cum[t − 1]
                Vfull = d.new_full((B, T + 1 + D, QG + 1), float("-inf"))
                Vfull[:, D:, :QG] = V
                Wm = d.new_zeros((2, T, B, 1, 1))
                Wm[0] = cum[:T, :, None, None]
                Abuf = d.new_zeros((T + 1, B, 1, QG))
                Abuf[1:] = torch.exp(V[:, 1:] - cum[:T].t()[:, :, None]).transpose(0, 1)[:, :, None]
        else:
            V = Vbuf[:, D:]
        if keep:
            ctx.save_for_backward(d, Vfull, Abuf, S, Wm, *segments)
        ctx.band, ctx.T, ctx.paper = band, T, paper
        logs = torch.log(S)
        ctx.mark_non_differentiable(logs)
        return V.reshape(B, T + 1, Q, G).clone(), logs

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

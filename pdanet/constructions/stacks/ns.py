"""The nondeterministic stack of the (R)NS-RNN (DuSell & Chiang 2021, §2.4, §3, §5.1) in torch.

Input: log action weights ``log Δ`` of shape (B, T, Q, G, Q, 2G+1) — for step t, from (state q,
top x) to state r with operation v — where stack symbol 0 is ⊥ and the Op axis is
``[push y for y < G] + [replace y for y < G] + [pop]``. Output (`NSResult`): ``log_alpha``
(B, T+1, Q, G), the forward weights, and the reading: over (state, top) pairs (RNS mode, §3.2)
or over tops (NS mode, Eq. 5), zeros where no run survives.

Three conventions for the bottom of the stack (``bottom``):

- ``"paper"`` (default): Eqs. 2–4 as written (with Eq. 4 summing from i = 0, as the authors'
  code of the paper does), every action entry counts. ⊥ is an ordinary stack symbol that may be
  pushed, replaced and (once pushed) popped; the initial ⊥ of time 0 is never replaced nor
  popped, so step 1 can only push, and no run pops back down to the initial ⊥ (a run whose
  only symbol above it is popped dies). `pdanet.constructions.stacks.reference_ns` computes
  the same equations cell by cell, and the windowed variant (γ[i→t] = 0 for t − i > D).
- ``"reachable"``: the convention of the authors' later code (DuSell & Chiang 2023, their "bottom
  symbol fix"): the initial ⊥ is the top at time 0, may be replaced, and runs may pop back down
  to it; it is never popped. Computed as the paper's equations on the actions with one step
  put first whose only action pushes ⊥ from (q0, ⊥) to q0 with weight 1 (that ⊥ is then an
  ordinary pushed symbol above the paper's bottom), dropping that step's output; with a window
  the initial ⊥ can be on top only at steps t < D, as in the authors' windowed code.
- ``"extended"``: the bottom level of `pdanet.automata.weighted` (Lang's algorithm for a
  weighted PDA whose ⊥ is the initial bottom): the initial ⊥ is the top at time 0 and may stay
  the top (a ⊥ → ⊥ no-op, the replace ⊥-by-⊥ entry), runs that pop back to it keep counting,
  and the entries that would push ⊥, replace into or out of ⊥ (except ⊥ → ⊥) or pop ⊥ are
  ignored. This is what a compiled weighted PDA means by its ⊥; the readings differ from the
  paper's on the same actions.

One step at a time: `NondeterministicStack.initial_state` and `NondeterministicStack.step`
(state, log actions of step t) → (`NSState`, reading of α[t]), for a controller that reads
r_{t−1} before it emits step t's actions (DuSell & Chiang's LSTM, `pdanet.models.dusell_chiang`).
Same conventions and the same scaled arithmetic as the whole-sequence forward (same readings,
log α and gradients), with the columns as a list of tensors that autograd differentiates
directly: step t costs O(B·Q³G²·t²) (Eq. 2's pop term), O(B·Q³G²·D²) with a window.

``normalize`` applies Eq. 1 first (the actions of each (q, x) are a softmax over (r, v): the
NS-RNN's probabilities; under "extended" over the entries it keeps), otherwise the weights are
exp(log Δ) (§3.1, the "+U" of the RNS-RNN). `NondeterministicStack.variant` names the four
models of §4: NS, NS+S, NS+U and RNS (= NS+S+U).

Arithmetic (a max-shift per column instead of a logsumexp per entry). The stack WFA weights
γ[i→t] (Eq. 2) are kept scaled, E[i→t] = γ[i→t]·e^{P[i]−P[t]}, with one log normaliser P[t] per
time step and batch element chosen so that every column ``E[·→t]`` has maximum 1; the actions
are shifted by their maximum m[t] before exp. The pop term's products γ[i→k]γ[k→t−1] then need
no rescaling (the P[k] cancel), so each step is a few batched matrix products in linear scale.
α is kept in log space as v[t] = log α[t] − P[t], and Eq. 4 becomes v[t] = log Σ_i e^{v[i]} E[i→t]
(one max-shifted matrix product). This equals the paper's log-space computation up to rounding;
entries below their column's maximum by more than the dtype's range (~e^-87 in float32) flush to
zero. Shifts and normalisers are constants for autograd (the result does not depend on them),
so gradients are exact.

Per step t, with rows i over the kept range at once (no loop over i or over the split point k):

- one matrix product of column t−1 with [replace | pop] actions gives the replace term of
  Eq. 2 and X[k][u,y→r] = Σ_{s,z} E[k→t−1][u,y→s,z] Δ[t][s,z→r,pop];
- one batched product over (k, u) gives the pop term Σ_k E[i→k]·X[k] for all rows i at once;
- one max-shifted product gives α[t] (Eq. 4) and, under "extended", the bottom level.

Unlimited stack (window None): the γ live in one preallocated tensor ``F[b, y, i, q, x, k, u]``
(row i, column k), so the pop operand (rows 0..t−3, columns 1..t−2) is a strided view; entries
with k ≤ i are zeros that are never written, and for large blocks the rows are cut into up to 4
pieces, each reading only the columns right of its first row (the block is upper triangular).
F is written in place; the products that read it are custom autograd functions that take their
operand from F in the backward pass and accumulate the gradient of F in a twin buffer, which the
function that wrote each column hands back to autograd (and zeroes, so a second backward pass
starts clean). A chain of scalar "tokens" (write t → every later reader) makes autograd run each
column's write-back after all its readers, so the gradients are those of the plain computation
(tested by gradcheck and by finite differences). Time per step O(B·Q³G²·t²), memory O(T²).

Window D (§5.1): only γ[i→t] with t − i ≤ D are kept; `pdanet.constructions.stacks.ns_window`
runs the same per-step arithmetic as one autograd function over all t, with the kept chart in
band-matrix segments (any window of it is a strided view, so a step gathers nothing) and a
hand-written backward pass. Every step runs the same ops on the same amount of memory whatever
t and T: time O(B·Q³G³·D²) per step (Eq. 2 as one matrix product per batch element) and memory
O(T·B·Q²G²·D), forward and backward; a forward pass without gradients keeps two segments,
whatever T.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from pdanet.constructions.stacks.ns_window import (
    bottom_noop,
    chart_entries,
    replace_pop,
    windowed_chart,
)
from pdanet.errors import InputError

BOTTOMS = ("paper", "reachable", "extended")

# variant name -> (reading mode, normalised actions) (the paper's §4 models)
VARIANTS = {"ns": ("ns", True), "ns+s": ("rns", True), "ns+u": ("ns", False),
            "rns": ("rns", False)}


@dataclass(frozen=True)
class NSResult:
    """``log_alpha`` (B, T+1, Q, G); ``reading`` (B, T+1, Q, G) in RNS mode or (B, T+1, G) in NS
    mode; ``log_norm`` (B, T+1): log Σ α (−inf where no run survives); ``stored`` the number of
    γ entries of the chart (the tensor F, or the windowed band segments) plus the α entries."""

    log_alpha: torch.Tensor
    reading: torch.Tensor
    log_norm: torch.Tensor
    stored: int


def valid_mask(G: int, device=None) -> torch.Tensor:
    """(G, 2G+1) bool: the operations a top x allows (see the module docstring)."""
    m = torch.zeros(G, 2 * G + 1, dtype=torch.bool, device=device)
    m[:, 1:G] = True
    m[1:, G + 1:2 * G] = True
    m[0, G] = True
    m[1:, 2 * G] = True
    return m


class _SafeLog(torch.autograd.Function):
    """log x for x ≥ 0 with log 0 = −inf and a zero (not NaN) gradient there."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, g / x, torch.zeros_like(g))


_safe_log = _SafeLog.apply


class _Tape:
    """The unlimited chart: F (B, G, T+1, Q, G, T+1, Q) with F[b, y, i, q, x, k, u] = E[i→k][q, x →
    u, y]; V (T+1, B, Q, G) with V[t] = v[t]; their gradient twins, made on first use; the token
    chain (one token per written column)."""

    def __init__(self, T: int, B: int, Q: int, G: int, v0: torch.Tensor):
        self.F = v0.new_zeros((B, G, T + 1, Q, G, T + 1, Q))
        self.V = v0.new_zeros((T + 1, B, Q, G))
        self.V[0].copy_(v0)
        self.vs = [v0]
        self.tokens = [v0.new_zeros(())]
        self.gF: torch.Tensor | None = None
        self.gV: torch.Tensor | None = None

    @property
    def stored(self) -> int:
        return self.F.numel() + self.V.numel()

    def grads(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.gF is None:
            self.gF, self.gV = torch.zeros_like(self.F), torch.zeros_like(self.V)
        return self.gF, self.gV

    def column(self, buf: torch.Tensor, t: int) -> torch.Tensor:
        """Column t, rows 0..t−1, as a (B, G, t, Q, G, Q) view [b, y, i, q, x, r]."""
        return buf[:, :, :t, :, :, t]

    def block(self, buf: torch.Tensor, lo: int, rows: int, a: int, b: int) -> torch.Tensor:
        """Rows lo..lo+rows−1, columns a..b−1, as a (B·G, rows·Q·G, (b−a)·Q) view."""
        B, G, _, Q = buf.shape[:4]
        blk = buf[:, :, lo:lo + rows, :, :, a:b]
        s = blk.stride()
        return blk.as_strided((B * G, rows * Q * G, (b - a) * Q), (s[1], s[4], 1))

    def pop(self, t: int, X: torch.Tensor) -> torch.Tensor:
        """Pop term for rows 0..t−3 from X (B, K, U, Y, R) on k = 1..t−2, as (B·G, K·Q·G, Q)."""
        B, K, Q, G = X.shape[:4]
        Xs = X.permute(0, 3, 1, 2, 4).reshape(B * G, K * Q, Q)
        return _Pop.apply(Xs, self.tokens[t - 2], self, 0, K, 1, t - 1)

    def read(self, t: int) -> torch.Tensor:
        """v[0..t−1] as (B, t, Q, G)."""
        return _Read.apply(self.tokens[t - 1], self, 0, t).permute(1, 0, 2, 3)

    def write(self, t: int, E: torch.Tensor, v: torch.Tensor) -> None:
        self.tokens.append(_Write.apply(E, v, self.tokens[t - 1], self, t))
        self.vs.append(v)


class _Write(torch.autograd.Function):
    """Store column t (E (B, I, Q, G, Q, G) [b, i, q, x, r, y]) and v[t] in the tape; the
    backward hands back the gradients that later readers accumulated for them."""

    @staticmethod
    def forward(ctx, E, v, token, tape, t):
        tape.column(tape.F, t).copy_(E.permute(0, 5, 1, 2, 3, 4))
        tape.V[t].copy_(v)
        ctx.tape, ctx.t = tape, t
        return token.new_zeros(())

    @staticmethod
    def backward(ctx, _):
        tape, t = ctx.tape, ctx.t
        gF, gV = tape.grads()
        col = tape.column(gF, t)
        gE = col.permute(0, 2, 3, 4, 5, 1).clone()
        gv = gV[t].clone()
        col.zero_()                        # read once: a second backward starts from zero
        gV[t].zero_()
        return gE, gv, gE.new_zeros(()), None, None


def _pieces(rows: int) -> list[tuple[int, int]]:
    """Row pieces of the pop block: piece [r0, r1) needs columns k > lo + r0 only, so splitting
    the upper-triangular block skips most of its zero lower part."""
    n = 1 if rows < 24 else 2 if rows < 48 else 4
    cuts = [rows * j // n for j in range(n + 1)]
    return [(cuts[j], cuts[j + 1]) for j in range(n)]


class _Pop(torch.autograd.Function):
    """Pop term of Eq. 2 for rows lo..lo+rows−1 from the tape: Σ_{k,u} E[i→k][q,x→u,y] ·
    X[k][u,y→r] as (B·G, rows·Q·G, Q), with X given on the columns k = a..b−1 ((B·G, (b−a)·Q, Q));
    the block is cut into row pieces (`_pieces`)."""

    @staticmethod
    def forward(ctx, X, token, tape, lo, rows, a, b):
        ctx.save_for_backward(X)
        ctx.tape, ctx.args = tape, (lo, rows, a, b)
        Q = X.shape[-1]
        return torch.cat([torch.bmm(tape.block(tape.F, lo + r0, r1 - r0, a + r0, b), X[:, r0 * Q:])
                          for r0, r1 in _pieces(rows)], dim=1)

    @staticmethod
    def backward(ctx, g):
        (X,) = ctx.saved_tensors
        tape, (lo, rows, a, b) = ctx.tape, ctx.args
        gF, _ = tape.grads()
        Q = X.shape[-1]
        QG = g.shape[1] // rows
        gX = torch.zeros_like(X)
        for r0, r1 in _pieces(rows):
            gp = g[:, r0 * QG:r1 * QG]
            gX[:, r0 * Q:] += torch.bmm(tape.block(tape.F, lo + r0, r1 - r0, a + r0, b)
                                        .transpose(1, 2), gp)
            tape.block(gF, lo + r0, r1 - r0, a + r0, b).add_(
                torch.bmm(gp, X[:, r0 * Q:].transpose(1, 2)))
        return gX, g.new_zeros(()), None, None, None, None, None


class _Read(torch.autograd.Function):
    """v[a..b−1] from the tape as (b−a, B, Q, G); the backward accumulates into its twin."""

    @staticmethod
    def forward(ctx, token, tape, a, b):
        ctx.tape, ctx.ab = tape, (a, b)
        return tape.V[a:b].clone()

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.ab
        ctx.tape.grads()[1][a:b].add_(g)
        return g.new_zeros(()), None, None, None


def _unlimited(push, rp, bottom, v0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The unlimited chart (`_Tape`) over per-step actions (lists of T tensors: push (B, Q, G, Q,
    G), rp (B, QG, QG+Q), bottom (B, Q, Q) for the "extended" bottom level, None for the paper's
    equations) → (v (T+1, B, Q, G), log s (T, B), entries stored)."""
    T = len(push)
    B, Q, G = v0.shape
    QG = Q * G
    chart = _Tape(T, B, Q, G, v0)
    logs = []
    prev = None                                                          # E[0..t−2 → t−1]
    for t in range(1, T + 1):
        if t >= 2:
            out = torch.bmm(prev.reshape(B, (t - 1) * QG, QG), rp[t - 1])
            out = out.view(B, t - 1, Q, G, QG + Q)
            rep = out[..., :QG].reshape(B, t - 1, Q, G, Q, G)            # replace (Eq. 2)
            X = out[..., QG:]                                            # (B, K, U, Y, R)
            rows = t - 2                                                 # pop rows 0..t−3
            if rows > 0:
                popt = chart.pop(t, X[:, 1:])                            # k = 1..t−2
                popt = popt.view(B, G, rows, Q, G, Q).permute(0, 2, 3, 4, 5, 1)
                C = torch.cat([rep[:, :rows] + popt, rep[:, rows:], push[t - 1][:, None]], 1)
            else:
                C = torch.cat([rep, push[t - 1][:, None]], 1)
            if bottom is not None:
                Y = torch.cat([X[:, :, :, 0], bottom[t - 1][:, None]], 1)   # bottom level
        else:
            C = push[0][:, None]
            if bottom is not None:
                Y = bottom[0][:, None]
        with torch.no_grad():
            s = C.amax(dim=(1, 2, 3, 4, 5))
            s = torch.where(s > 0, s, 1.0)
            logs.append(torch.log(s))
        E = C / s.view(B, 1, 1, 1, 1, 1)
        # Eq. 4: v[t] = log Σ_i e^{v[i]} E[i→t]; bottom: Σ_{k,u} e^{v[k]} X[k][u,⊥→r] / s, with
        # its own shift (the bottom level can lie further below the rest than the dtype's range)
        Vr = chart.read(t)                                               # (B, t, Q, G)
        with torch.no_grad():
            wm = Vr.amax(dim=(1, 2, 3)).nan_to_num(neginf=0.0)
        ev = torch.exp(Vr - wm[:, None, None, None])
        acc = torch.bmm(ev.reshape(B, 1, -1), E.view(B, -1, QG)).view(B, Q, G)
        if bottom is None:                                               # Eq. 4, every y
            v = _safe_log(acc) + wm[:, None, None]
        else:
            with torch.no_grad():
                wm0 = Vr[..., 0].amax(dim=(1, 2)).nan_to_num(neginf=0.0)
                shift = wm[:, None, None].repeat(1, Q, G)                # w, and w⊥ for ⊥
                shift[:, :, 0] = wm0[:, None]
            ev0 = torch.exp(Vr[..., 0] - wm0[:, None, None])
            accb = torch.bmm(ev0.reshape(B, 1, -1), Y.reshape(B, -1, Q)).view(B, Q, 1)
            acc = torch.cat([accb / s.view(B, 1, 1), acc[:, :, 1:]], dim=2)
            v = _safe_log(acc) + shift
        chart.write(t, E, v)
        prev = E
    logs_t = torch.stack(logs) if logs else v0.new_zeros(0, B)
    return torch.stack(chart.vs), logs_t, chart.stored


class _BatchMajor(torch.autograd.Function):
    """(T, B, ...) → contiguous (B, T, ...), with the gradient made time-major and contiguous
    again, so that the backward of the stack of per-step tensors hands each step one slab."""

    @staticmethod
    def forward(ctx, x):
        return x.transpose(0, 1).contiguous()

    @staticmethod
    def backward(ctx, g):
        return g.transpose(0, 1).contiguous()


_batch_major = _BatchMajor.apply


@dataclass(frozen=True, eq=False)
class NSState:
    """The stack after some steps of `NondeterministicStack.step` (immutable; each step returns
    a new one). ``time`` t counts the steps taken (the "reachable" bottom's extra first step
    is not counted); ``reading`` (B, Q, G) in RNS mode or (B, G) in NS mode is the reading of
    α[t]; ``log_alpha`` (B, Q, G) and ``log_norm`` (B,) are log α[t] and log Σ α[t].

    Internally (the scaled arithmetic of the module docstring): ``cols`` the kept columns
    E[·→k] for k = ``first`` … (each (B, rows, Q, G, Q, G) [b, i, q, x, r, y] over rows
    lo(k)..k−1, lo(k) = max(0, k − D) with a window, else 0; entry None for column 0, which has
    no rows), ``vs`` the kept v[k] = log α[k] − P[k] for k = ``first_v`` …, ``P`` (B,) the log
    normaliser P[t], ``step_index`` the internal step count (t, plus one under "reachable")."""

    time: int
    step_index: int
    cols: tuple
    first: int
    vs: tuple
    first_v: int
    P: torch.Tensor
    reading: torch.Tensor
    num_states: int
    num_stack: int

    @property
    def batch(self) -> int:
        return self.P.shape[0]

    @property
    def log_alpha(self) -> torch.Tensor:
        return self.vs[-1] + self.P[:, None, None]

    @property
    def log_norm(self) -> torch.Tensor:
        return torch.logsumexp(self.vs[-1].flatten(1), -1) + self.P


def _pad_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """(B, n, ...) padded with zero rows at the end to (B, rows, ...)."""
    return nn.functional.pad(x, (0,) * (2 * (x.dim() - 2)) + (0, rows - x.shape[1]))


def _read(v: torch.Tensor, mode: str) -> torch.Tensor:
    """Eq. 5 (mode "ns": (B, G) over tops) or §3.2 (mode "rns": (B, Q, G)) from v (B, Q, G),
    zeros where no run survives."""
    B = v.shape[0]
    flat = v.reshape(B, -1)
    alive = torch.isfinite(flat).any(-1, keepdim=True)
    safe = torch.where(alive, flat, torch.zeros_like(flat))
    r = torch.where(alive, torch.softmax(safe, -1), torch.zeros_like(flat)).view_as(v)
    return r.sum(1) if mode == "ns" else r


class NondeterministicStack(nn.Module):
    """Parameter-free stack WFA of the (R)NS-RNN (see the module docstring).

    ``mode`` "rns" reads (state, top) pairs, "ns" reads tops; ``window`` is D of §5.1 (None =
    unlimited); ``start`` the index of the initial state q0; ``bottom`` "paper" (the paper's
    equations, default), "reachable" (the authors' later convention) or "extended" (the
    weighted PDA's bottom level), see the module docstring;
    ``normalize`` applies Eq. 1 (softmax of the actions over (r, v) for each (q, x)) to the
    given log actions. `variant` builds NS, NS+S, NS+U or RNS by name.
    """

    def __init__(self, num_states: int, num_stack: int, mode: str = "rns",
                 window: int | None = None, start: int = 0, bottom: str = "paper",
                 normalize: bool = False):
        super().__init__()
        if mode not in ("rns", "ns"):
            raise InputError(f"mode must be 'rns' or 'ns', got {mode!r}")
        if bottom not in BOTTOMS:
            raise InputError(f"bottom must be one of {BOTTOMS}, got {bottom!r}")
        if not isinstance(normalize, bool):
            raise InputError(f"normalize must be True or False, got {normalize!r}")
        if num_states < 1 or num_stack < 2:
            raise InputError(f"need at least 1 state and 2 stack symbols (⊥ and one more), got "
                             f"{num_states} states and {num_stack} symbols")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                                   or window < 1):
            raise InputError(f"window must be a positive integer or None, got {window!r}")
        if not 0 <= start < num_states:
            raise InputError(f"start state index {start} is outside 0..{num_states - 1}")
        self.num_states, self.num_stack = num_states, num_stack
        self.mode, self.window, self.start = mode, window, start
        self.bottom, self.normalize = bottom, normalize

    @classmethod
    def variant(cls, name: str, num_states: int, num_stack: int, **options
                ) -> NondeterministicStack:
        """The stack of one of the models the paper compares (§4): "ns" (normalised actions,
        tops read), "ns+s" (normalised, (state, top) read), "ns+u" (unnormalised, tops read)
        or "rns" (= NS+S+U: unnormalised, (state, top) read); ``options`` as for the class."""
        if name not in VARIANTS:
            raise InputError(f"variant must be one of {sorted(VARIANTS)}, got {name!r}")
        mode, normalize = VARIANTS[name]
        return cls(num_states, num_stack, mode=mode, normalize=normalize, **options)

    def action_shape(self, batch: int, time: int) -> tuple:
        Q, G = self.num_states, self.num_stack
        return (batch, time, Q, G, Q, 2 * G + 1)

    def _check(self, log_actions: torch.Tensor) -> None:
        if not isinstance(log_actions, torch.Tensor) or log_actions.dim() != 6:
            raise InputError(f"log actions must be a (B, T, Q, G, Q, 2G+1) tensor, got "
                             f"{getattr(log_actions, 'shape', type(log_actions).__name__)}")
        B, T = log_actions.shape[:2]
        if tuple(log_actions.shape) != self.action_shape(B, T):
            raise InputError(f"log actions have shape {tuple(log_actions.shape)}, expected "
                             f"{self.action_shape(B, T)} (batch, time, Q, G, Q, 2G+1) for "
                             f"Q={self.num_states}, G={self.num_stack}")
        if not log_actions.is_floating_point():
            raise InputError(f"log actions must be floating point, got {log_actions.dtype}")

    def forward(self, log_actions: torch.Tensor) -> NSResult:
        self._check(log_actions)
        B, T = log_actions.shape[:2]
        Q, G, D = self.num_states, self.num_stack, self.window
        QG = Q * G
        dev = log_actions.device
        paper = self.bottom != "extended"          # "reachable" runs the paper's equations
        # time-major (T, B, ...), so that each step reads one contiguous slab
        lact = log_actions.transpose(0, 1).contiguous()
        # the largest log action of each (step, batch): NaN or +inf if any entry is
        m = lact.detach().reshape(T, B, -1).amax(dim=2) if lact.numel() else lact.new_zeros(T, B)
        if not bool((m < float("inf")).all()):
            raise InputError("log actions contain NaN or +inf")
        if not paper:
            mask = valid_mask(G, dev)[None, None, None, :, None, :]
            lact = lact.masked_fill(~mask, float("-inf"))
        if self.normalize:            # Eq. 1 (a row without finite entries stays all 0)
            ok = torch.isfinite(lact).any(dim=(4, 5), keepdim=True)
            lse = torch.logsumexp(torch.where(ok, lact, torch.zeros_like(lact)), dim=(4, 5),
                                  keepdim=True)
            lact = lact - torch.where(ok, lse, torch.zeros_like(lse))
        if not paper or self.normalize:          # the entries changed: their largest too
            m = lact.detach().reshape(T, B, -1).amax(dim=2) if lact.numel() else m
        reach = self.bottom == "reachable"
        if reach:               # a first step that pushes ⊥ (weight 1) from (q0, ⊥) to q0
            first = lact.new_full((1,) + tuple(lact.shape[1:]), float("-inf"))
            first[0, :, self.start, 0, self.start, 0] = 0.0
            lact = torch.cat([first, lact])
            m = torch.cat([m.new_zeros(1, B), m])
            T += 1
        # m[t]: a detached max-shift per (step, batch); d = exp(log Δ − m) in linear scale
        m = torch.where(m > float("-inf"), m, 0.0)
        d = (lact - m[:, :, None, None, None, None]).exp_()
        v0 = d.new_full((B, Q, G), float("-inf"))
        v0[:, self.start, 0] = 0.0
        if D is None:     # per-step views (the backward of unbind is one stack per tensor)
            Vt, logs, stored = _unlimited(d[..., :G].unbind(0), replace_pop(d).unbind(0),
                                          None if paper else bottom_noop(d).unbind(0), v0)
        else:
            V, logs = windowed_chart(d, v0, D, paper)                      # (B, T+1, Q, G)
            stored = chart_entries(B, Q, G, D, T, V.requires_grad)
        P = torch.cat([m.new_zeros(1, B), torch.cumsum(m + logs, dim=0)])   # constants
        if D is None:
            V = _batch_major(Vt)                                         # (B, T+1, Q, G)
        Pb = P.t()
        log_alpha = V + Pb[:, :, None, None]
        flat = V.reshape(B, T + 1, QG)
        alive = flat.detach().amax(dim=-1, keepdim=True) > float("-inf")
        safe = torch.where(alive, flat, 0.0)        # rows without runs: 0, their reading 0
        lse = torch.logsumexp(safe, dim=-1, keepdim=True)
        reading = torch.exp(flat - lse).reshape(B, T + 1, Q, G)
        norm = torch.where(alive, lse, float("-inf")).squeeze(-1)
        if self.mode == "ns":
            reading = reading.sum(dim=2)
        log_norm = norm + Pb
        if reach:                                                        # drop the first step
            log_alpha, reading, log_norm = log_alpha[:, 1:], reading[:, 1:], log_norm[:, 1:]
        return NSResult(log_alpha, reading, log_norm, stored)

    # --- one step at a time ---------------------------------------------------------------
    def initial_state(self, batch: int, dtype: torch.dtype = torch.float32,
                      device: torch.device | str | None = None) -> NSState:
        """The stack at time 0 for ``batch`` strings: one run in (q0, ⊥) (Eq. 3); under the
        "reachable" bottom, after the extra first step that pushes ⊥ (module docstring)."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InputError(f"batch must be a positive integer, got {batch!r}")
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise InputError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
        Q, G = self.num_states, self.num_stack
        v0 = torch.full((batch, Q, G), float("-inf"), dtype=dtype, device=device)
        v0[:, self.start, 0] = 0.0
        P = v0.new_zeros(batch)
        state = NSState(0, 0, (None,), 0, (v0,), 0, P, _read(v0, self.mode), Q, G)
        if self.bottom == "reachable":      # push ⊥ from (q0, ⊥) to q0 with weight 1
            first = v0.new_full((batch, Q, G, Q, 2 * G + 1), float("-inf"))
            first[:, self.start, 0, self.start, 0] = 0.0
            state = self._advance(state, first, count=False)
        return state

    def step(self, state: NSState, log_actions: torch.Tensor) -> tuple[NSState, torch.Tensor]:
        """Apply one step's log actions (B, Q, G, Q, 2G+1) (the conventions of `forward`:
        Eq. 1 when ``normalize``, the bottom convention, the window) to ``state`` → (the new
        state, its reading: (B, Q, G) in RNS mode, (B, G) in NS mode). Stepping through
        ``log_actions[:, t]`` for t = 0..T−1 gives `forward`'s ``reading[:, t + 1]``,
        ``log_alpha`` and ``log_norm`` with the same arithmetic, and their gradients. Step t
        costs O(B·Q³G²·t²) time (the pop term of Eq. 2) and keeps O(B·Q²G²·t²) chart entries;
        with a window D, O(B·Q³G²·D²) and O(B·Q²G²·D²)."""
        if not isinstance(state, NSState):
            raise InputError(f"state must be an NSState from initial_state or step, got "
                             f"{type(state).__name__}")
        if (state.num_states, state.num_stack) != (self.num_states, self.num_stack):
            raise InputError(f"state is for Q={state.num_states}, G={state.num_stack}; this "
                             f"stack has Q={self.num_states}, G={self.num_stack}")
        Q, G = self.num_states, self.num_stack
        shape = (state.batch, Q, G, Q, 2 * G + 1)
        if not isinstance(log_actions, torch.Tensor) or tuple(log_actions.shape) != shape:
            raise InputError(f"log actions of one step must have shape {shape} (batch, Q, G, "
                             f"Q, 2G+1), got "
                             f"{tuple(getattr(log_actions, 'shape', ())) or type(log_actions)}")
        if log_actions.dtype != state.P.dtype or log_actions.device != state.P.device:
            raise InputError(f"log actions are {log_actions.dtype} on {log_actions.device}; the "
                             f"state is {state.P.dtype} on {state.P.device}")
        if torch.isnan(log_actions).any() or (log_actions == float("inf")).any():
            raise InputError("log actions contain NaN or +inf")
        lact = log_actions
        if self.bottom == "extended":
            lact = lact.masked_fill(~valid_mask(G, lact.device)[None, None, :, None, :],
                                    float("-inf"))
        if self.normalize:            # Eq. 1 (a row without finite entries stays all 0)
            ok = torch.isfinite(lact).any(dim=(3, 4), keepdim=True)
            lse = torch.logsumexp(torch.where(ok, lact, torch.zeros_like(lact)), dim=(3, 4),
                                  keepdim=True)
            lact = lact - torch.where(ok, lse, torch.zeros_like(lse))
        new = self._advance(state, lact, count=True)
        return new, new.reading

    def _lo(self, k: int) -> int:
        return 0 if self.window is None else max(0, k - self.window)

    def _advance(self, state: NSState, lact: torch.Tensor, count: bool) -> NSState:
        """Eqs. 2 and 4 for internal step t = state.step_index + 1 on the final log actions
        (masked and normalised) in the scaled arithmetic of the module docstring."""
        Q, G, D = self.num_states, self.num_stack, self.window
        QG = Q * G
        B = lact.shape[0]
        t = state.step_index + 1
        ext = self.bottom == "extended"
        with torch.no_grad():
            m = lact.amax(dim=(1, 2, 3, 4))
            m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        d = torch.exp(lact - m[:, None, None, None, None])
        push = d[..., :G]                                                # (B, Q, G, Q, G)
        rp = torch.cat([d[..., G:2 * G].reshape(B, QG, QG), d[..., 2 * G].reshape(B, QG, Q)], 2)
        lo = self._lo(t)
        cols, first = state.cols, state.first
        if t >= 2:
            plo = self._lo(t - 1)
            prev = cols[t - 1 - first]                                   # rows plo..t−2
            out = torch.bmm(prev.reshape(B, -1, QG), rp).view(B, t - 1 - plo, Q, G, QG + Q)
            rep = out[:, lo - plo:, :, :, :QG].reshape(B, t - 1 - lo, Q, G, Q, G)  # Eq. 2, repl.
            X = out[..., QG:]                                            # (B, K, U, Y, R)
            rows = t - 2 - lo                                            # pop rows lo..t−3
            if rows > 0:     # Eq. 2, pop: Σ_{k=i+1}^{t−2} Σ_u E[i→k][q,x→u,y] X[k][u,y→r]
                Gk = torch.stack([_pad_rows(cols[k - first][:, lo - self._lo(k):], rows)
                                  for k in range(lo + 1, t - 1)], 1)   # [b, k, i, q, x, u, y]
                popt = torch.einsum("bkiqxuy,bkuyr->biqxry", Gk, X[:, lo + 1 - plo:])
                C = torch.cat([rep[:, :rows] + popt, rep[:, rows:], push[:, None]], 1)
            else:
                C = torch.cat([rep, push[:, None]], 1)
            if ext:                                                      # bottom level
                Y = torch.cat([X[:, :, :, 0], d[:, :, 0, :, G][:, None]], 1)
        else:
            plo = 0
            C = push[:, None]
            if ext:
                Y = d[:, :, 0, :, G][:, None]
        with torch.no_grad():
            s = C.amax(dim=(1, 2, 3, 4, 5))
            s = torch.where(s > 0, s, torch.ones_like(s))
        E = C / s.view(B, 1, 1, 1, 1, 1)                                 # rows lo..t−1
        vs, fv = state.vs, state.first_v
        Vr = torch.stack(vs[lo - fv:], 1)                                # v[lo..t−1]
        with torch.no_grad():
            wm = Vr.amax(dim=(1, 2, 3)).nan_to_num(neginf=0.0)
        ev = torch.exp(Vr - wm[:, None, None, None])
        # Eq. 4: α[t][r,y] = Σ_i Σ_{q,x} α[i][q,x] γ[i→t][q,x→r,y]
        acc = torch.bmm(ev.reshape(B, 1, -1), E.reshape(B, -1, QG)).view(B, Q, G)
        if not ext:
            v = _safe_log(acc) + wm[:, None, None]
        else:            # the bottom level from v[plo..t−1]'s ⊥ entries, with its own shift
            V0 = torch.stack(vs[plo - fv:], 1)[..., 0]                   # (B, K+1, Q)
            with torch.no_grad():
                wm0 = V0.amax(dim=(1, 2)).nan_to_num(neginf=0.0)
                shift = wm[:, None, None].repeat(1, Q, G)
                shift[:, :, 0] = wm0[:, None]
            ev0 = torch.exp(V0 - wm0[:, None, None])
            accb = torch.bmm(ev0.reshape(B, 1, -1), Y.reshape(B, -1, Q)).view(B, Q, 1)
            acc = torch.cat([accb / s.view(B, 1, 1), acc[:, :, 1:]], dim=2)
            v = _safe_log(acc) + shift
        # keep what step t + 1 reads: columns k ≥ min(t, t + 2 − D) (its pop operands and
        # replace), v[k] for k ≥ t − D (its α and bottom level); everything when unlimited
        cols, vs = cols + (E,), vs + (v,)
        if D is not None:
            drop_c = max(0, min(t, t + 2 - D) - first)
            cols, first = cols[drop_c:], first + drop_c
            drop_v = max(0, t - D - fv)
            vs, fv = vs[drop_v:], fv + drop_v
        P = state.P + m + torch.log(s)
        return NSState(state.time + int(count), t, cols, first, vs, fv, P, _read(v, self.mode),
                       Q, G)


__all__ = ["BOTTOMS", "VARIANTS", "NSResult", "NSState", "NondeterministicStack",
           "valid_mask"]

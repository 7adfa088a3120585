"""The nondeterministic stack of the (R)NS-RNN (DuSell & Chiang 2021, §2.4, §3, §5.1) in torch.

Input: log action weights ``log Δ`` of shape (B, T, Q, G, Q, 2G+1) — for step t, from (state q,
top x) to state r with operation v — where stack symbol 0 is ⊥ and the Op axis is
``[push y for y < G] + [replace y for y < G] + [pop]``. Entries that would push ⊥, replace into
or out of ⊥ (except ⊥ → ⊥, a no-op at the bottom) or pop ⊥ are ignored. Output (`NSResult`):
``log_alpha`` (B, T+1, Q, G), the forward weights of Eqs. 3–4 (with the bottom level described in
`pdanet.automata.weighted`, so runs that empty the stack keep counting), and the reading: over
(state, top) pairs (RNS mode, §3.2) or over tops (NS mode, Eq. 5), zeros where no run survives.

Arithmetic: the stack WFA weights γ[i→t] (Eq. 2) are kept scaled, E[i→t] = γ[i→t]·e^{P[i]−P[t]},
with one log normaliser P[t] per time step and batch element, chosen so that every column
``E[·→t]`` has maximum 1. The products γ[i→k]γ[k→t−1] of the pop term then need no rescaling
(the P[k] cancel), so each step is a few batched matrix products in linear scale; α is kept in log
space. This equals the paper's log-space computation up to rounding; entries below the column
maximum by more than the dtype's range (~1e-38 in float32) flush to zero. The normalisers are
constants for autograd (the result does not depend on them), so gradients are exact.

Window D (§5.1): only γ[i→t] with t − i ≤ D are kept (D=None: unlimited). Time per step is then
O(B·Q³G²·min(t, D)²) and the kept state is O(B·Q²G²·min(t, D)) per step — linear in T for a
fixed D. The pop contraction is a custom autograd function that recomputes its gathered operand
in the backward pass instead of saving it, so memory stays that of the kept columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from pdanet.errors import InputError


@dataclass(frozen=True)
class NSResult:
    """``log_alpha`` (B, T+1, Q, G); ``reading`` (B, T+1, Q, G) in RNS mode or (B, T+1, G) in NS
    mode; ``log_norm`` (B, T+1): log Σ α (−inf where no run survives); ``stored`` the number of
    elements of the kept γ columns (state size)."""

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


def _safe_log(x: torch.Tensor) -> torch.Tensor:
    """log x with log 0 = −inf and a zero (not NaN) gradient there."""
    pos = x > 0
    return torch.where(pos, torch.log(torch.where(pos, x, torch.ones_like(x))),
                       torch.full_like(x, float("-inf")))


def _shift(x: torch.Tensor, dims: tuple) -> torch.Tensor:
    """A detached max over `dims` (keepdim), 0 where everything is −inf."""
    m = x.detach().amax(dim=dims, keepdim=True)
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def _gather(cols: tuple, spec: tuple, shape: tuple, like: torch.Tensor) -> torch.Tensor:
    """M[b, y, i, q, x, k, u] = E[i→k][q, x → u, y] for the pop term (zeros where i ≥ k)."""
    M = like.new_zeros(shape)
    for kk, (col, (start, count)) in enumerate(zip(cols, spec)):
        if count > 0:
            M[:, :, :count, :, :, kk, :] = col[:, :, start:start + count]
    return M


class _PopContract(torch.autograd.Function):
    """Σ_{k,u} E[i→k][q,x→u,y] · Xk[k][u,y→r] (Eq. 2, pop term), without saving the gathered
    operand: it is rebuilt from the kept columns in the backward pass."""

    @staticmethod
    def forward(ctx, Xk, shape, spec, *cols):
        B, Y, NI, Q, G, NK, U = shape
        M = _gather(cols, spec, shape, Xk)
        out = torch.bmm(M.reshape(B * Y, NI * Q * G, NK * U), Xk.reshape(B * Y, NK * U, -1))
        ctx.save_for_backward(Xk, *cols)
        ctx.shape, ctx.spec = shape, spec
        return out.reshape(B, Y, NI, Q, G, -1)

    @staticmethod
    def backward(ctx, grad):
        Xk, *cols = ctx.saved_tensors
        B, Y, NI, Q, G, NK, U = ctx.shape
        M = _gather(cols, ctx.spec, ctx.shape, Xk)
        g = grad.reshape(B * Y, NI * Q * G, -1)
        Mf = M.reshape(B * Y, NI * Q * G, NK * U)
        gX = torch.bmm(Mf.transpose(1, 2), g).reshape(Xk.shape)
        gM = torch.bmm(g, Xk.reshape(B * Y, NK * U, -1).transpose(1, 2)).reshape(ctx.shape)
        gcols = []
        for kk, (col, (start, count)) in enumerate(zip(cols, ctx.spec)):
            gc = torch.zeros_like(col)
            if count > 0:
                gc[:, :, start:start + count] = gM[:, :, :count, :, :, kk, :]
            gcols.append(gc)
        return (gX, None, None, *gcols)


class NondeterministicStack(nn.Module):
    """Parameter-free stack WFA of the (R)NS-RNN (see the module docstring).

    ``mode`` "rns" reads (state, top) pairs, "ns" reads tops; ``window`` is D of §5.1 (None =
    unlimited); ``start`` the index of the initial state q0.
    """

    def __init__(self, num_states: int, num_stack: int, mode: str = "rns",
                 window: int | None = None, start: int = 0):
        super().__init__()
        if mode not in ("rns", "ns"):
            raise InputError(f"mode must be 'rns' or 'ns', got {mode!r}")
        if num_states < 1 or num_stack < 2:
            raise InputError(f"need at least 1 state and 2 stack symbols (⊥ and one more), got "
                             f"{num_states} states and {num_stack} symbols")
        if window is not None and (not isinstance(window, int) or window < 1):
            raise InputError(f"window must be a positive integer or None, got {window!r}")
        if not 0 <= start < num_states:
            raise InputError(f"start state index {start} is outside 0..{num_states - 1}")
        self.num_states, self.num_stack = num_states, num_stack
        self.mode, self.window, self.start = mode, window, start

    def action_shape(self, batch: int, time: int) -> tuple:
        Q, G = self.num_states, self.num_stack
        return (batch, time, Q, G, Q, 2 * G + 1)

    def forward(self, log_actions: torch.Tensor) -> NSResult:
        if not isinstance(log_actions, torch.Tensor) or log_actions.dim() != 6:
            raise InputError(f"log actions must be a (B, T, Q, G, Q, 2G+1) tensor, got "
                             f"{getattr(log_actions, 'shape', type(log_actions).__name__)}")
        B, T = log_actions.shape[:2]
        if tuple(log_actions.shape) != self.action_shape(B, T):
            raise InputError(f"log actions have shape {tuple(log_actions.shape)}, expected "
                             f"{self.action_shape(B, T)} (batch, time, Q, G, Q, 2G+1) for "
                             f"Q={self.num_states}, G={self.num_stack}")
        if torch.isnan(log_actions).any() or (log_actions == float("inf")).any():
            raise InputError("log actions contain NaN or +inf")
        Q, G, D = self.num_states, self.num_stack, self.window
        mask = valid_mask(G, log_actions.device)[None, None, None, :, None, :]
        lact = log_actions.masked_fill(~mask, float("-inf"))
        dt = log_actions.dtype
        ymask = torch.ones(G, dtype=dt, device=log_actions.device)
        ymask[0] = 0
        ymask = ymask.view(1, G, 1, 1, 1, 1)
        la0 = torch.full((B, Q, G), float("-inf"), dtype=dt, device=log_actions.device)
        la0[:, self.start, 0] = 0.0
        la = [la0]                                   # log α[t] (B, Q, G)
        P = [torch.zeros(B, dtype=dt, device=log_actions.device)]
        cols: list = [None]                          # cols[t]: E[i→t] (B, Y, I, Q, X, R)
        los = [0]
        stored = 0
        for t in range(1, T + 1):
            ld = lact[:, t - 1]                                          # (B, Q, G, Q, O)
            m = _shift(ld, (1, 2, 3, 4))
            dd = torch.exp(ld - m)
            m = m.view(B)
            push, repl, pop = dd[..., :G], dd[..., G:2 * G], dd[..., 2 * G]
            lo = 0 if D is None else max(0, t - D)
            los.append(lo)
            rows = []
            if t >= 2:
                c, clo = cols[t - 1], los[t - 1]
                # replace term (Eq. 2): rows i in [lo, t-2]
                csel = c[:, :, lo - clo:]
                NI = csel.shape[2]
                a = csel.permute(0, 2, 3, 4, 1, 5).reshape(B, NI * Q * G, G * Q)
                rp = repl.permute(0, 2, 1, 3, 4).reshape(B, G * Q, Q * G)
                rep = torch.bmm(a, rp).reshape(B, NI, Q, G, Q, G).permute(0, 5, 1, 2, 3, 4)
                # X[k][u, y → r] = Σ_{s,z} E[k→t−1][u, y → s, z] Δ̃[s, z → r, ε], k in [clo, t-2]
                NKa = c.shape[2]
                xa = c.permute(0, 2, 3, 4, 1, 5).reshape(B, NKa * Q * G, G * Q)
                pp = pop.permute(0, 2, 1, 3).reshape(B, G * Q, Q)
                Xall = torch.bmm(xa, pp).reshape(B, NKa, Q, G, Q)         # (B, K, U, Y, R)
                if t >= 3 and t - 2 > lo:
                    # pop term (Eq. 2): rows i in [lo, t-3], k in [lo+1, t-2]
                    NI2 = t - 2 - lo
                    Xk = Xall[:, lo + 1 - clo:].permute(0, 3, 1, 2, 4).contiguous()
                    ks = range(lo + 1, t - 1)
                    spec = tuple((lo - los[k], k - lo) for k in ks)
                    shape = (B, G, NI2, Q, G, NI2, Q)
                    popt = _PopContract.apply(Xk, shape, spec, *(cols[k] for k in ks))
                    rep = rep + torch.cat([popt, rep.new_zeros(B, G, 1, Q, G, Q)], dim=2)
                rows.append(rep)
                # bottom level: β[t][r] (the pop part)
                lb = la[t - 1][:, :, 0]                                     # β[t−1] (B, Q)
                w = torch.stack([la[k][:, :, 0] - P[k][:, None] for k in range(clo, t - 1)], 1)
                wm = _shift(w, (1, 2))
                bpop = torch.einsum("bku,bkur->br", torch.exp(w - wm), Xall[:, :, :, 0])
                bpop = _safe_log(bpop) + wm.view(B, 1) + (P[t - 1] + m)[:, None]
            else:
                lb = la[0][:, :, 0]
                bpop = None
            rows.append(push.permute(0, 4, 1, 2, 3).unsqueeze(2))       # push term, row t−1
            lin = torch.cat(rows, dim=2) * ymask
            s = lin.detach().amax(dim=(1, 2, 3, 4, 5))
            s = torch.where(s > 0, s, torch.ones_like(s))
            E = lin / s.view(B, 1, 1, 1, 1, 1)
            cols.append(E)
            stored += E.numel()
            if D is not None and t - D - 1 >= 1:
                cols[t - D - 1] = None              # no longer reachable: frees memory
            P.append(P[t - 1] + m + torch.log(s))
            # α (Eq. 4): Σ_i α[i][q,x] γ[i→t][q,x→r,y], i in [lo, t−1]
            w = torch.stack([la[i] - P[i][:, None, None] for i in range(lo, t)], 1)
            wm = _shift(w, (1, 2, 3))
            acc = torch.einsum("biqx,byiqxr->bry", torch.exp(w - wm), E)
            lat = _safe_log(acc) + wm.view(B, 1, 1) + P[t].view(B, 1, 1)
            # bottom level, replace ⊥ by ⊥: Σ_s β[t−1][s] Δ[t][s,⊥→r,⊥]
            brep = torch.logsumexp(lb[:, :, None] + ld[:, :, 0, :, G], dim=1)
            beta = brep if bpop is None else torch.logaddexp(brep, bpop)
            la.append(torch.cat([beta[:, :, None], lat[:, :, 1:]], dim=2))
        log_alpha = torch.stack(la, dim=1)                             # (B, T+1, Q, G)
        flat = log_alpha.reshape(B, T + 1, Q * G)
        norm = torch.logsumexp(flat, dim=-1)
        alive = torch.isfinite(norm)
        safe = torch.where(alive[..., None], flat, torch.zeros_like(flat))
        reading = torch.where(alive[..., None], torch.softmax(safe, dim=-1),
                              torch.zeros_like(flat)).reshape(B, T + 1, Q, G)
        if self.mode == "ns":
            reading = reading.sum(dim=2)
        return NSResult(log_alpha, reading, norm, stored)


__all__ = ["NondeterministicStack", "NSResult", "valid_mask"]

"""DuSell & Chiang's stack WFA equations, literally: one Python loop per index, one cell at a time.

The reference against which `pdanet.constructions.stacks.ns.NondeterministicStack` is tested
(DuSell & Chiang 2021, "Learning Hierarchical Structures with Differentiable Nondeterministic
Stacks", §2.4, §3 and §5.1; Eq. 4 summed from i = 0, as the authors' code of that paper does). Every
entry of γ and α is a separate (batch,) tensor computed by the sums of the equations in the
order written, in real arithmetic; autograd runs through them, so the gradients are those of the
equations. Meant for small sizes (time O(T³·Q⁴·G³) Python operations) and float64.

Actions: ``log_actions`` (B, T, Q, G, Q, 2G+1) as for `NondeterministicStack` — Op axis
``[push y for y < G] + [replace y for y < G] + [pop]``, stack symbol 0 is ⊥. Under the paper's
equations every entry counts: ⊥ is an ordinary stack symbol that may be pushed, replaced and
popped when it was pushed; the initial ⊥ (time 0) can never be replaced or popped, so step 1
only pushes, and a run never pops back to the initial ⊥.

``bottom="reachable"``: the authors' later convention (DuSell & Chiang 2023, the "bottom symbol
fix" of their code): a row i = −1 with γ[−1→0][q0, ⊥ → q0, ⊥] = 1 and α[−1] = α[0] = 1 at
(q0, ⊥), Eq. 2 for −1 ≤ i < t and Eq. 4 summed from i = −1, so the initial ⊥ may be replaced
and popped back to (never popped).

Variants (§4 of the paper compares NS, NS+S, NS+U and RNS = NS+S+U): ``normalize`` applies
Eq. 1 (the action weights of each (q, x) are a softmax over (r, v)); otherwise Δ = exp(log Δ)
(§3.1, "+U"). ``mode`` "ns" reads tops (Eq. 5), "rns" reads (state, top) pairs (§3.2, "+S").
"""

from __future__ import annotations

import torch

from pdanet.errors import InputError


def _check(log_actions: torch.Tensor, start: int, window: int | None, mode: str) -> None:
    if not isinstance(log_actions, torch.Tensor) or log_actions.dim() != 6:
        raise InputError("log actions must be a (B, T, Q, G, Q, 2G+1) tensor, got "
                         f"{getattr(log_actions, 'shape', type(log_actions).__name__)}")
    Q, G = log_actions.shape[2:4]
    if log_actions.shape[4] != Q or log_actions.shape[5] != 2 * G + 1 or G < 1:
        raise InputError(f"log actions have shape {tuple(log_actions.shape)}: expected "
                         f"(B, T, Q, G, Q, 2G+1)")
    if not 0 <= start < Q:
        raise InputError(f"start state index {start} is outside 0..{Q - 1}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 1):
        raise InputError(f"window must be a positive integer or None, got {window!r}")
    if mode not in ("ns", "rns"):
        raise InputError(f"mode must be 'rns' or 'ns', got {mode!r}")


def action_weights(log_actions: torch.Tensor, normalize: bool) -> torch.Tensor:
    """Δ from the log actions: Eq. 1 (softmax over (r, v) for each (q, x); a row with no finite
    entry has weight 0 everywhere) with ``normalize``, else exp (§3.1)."""
    if not normalize:
        return torch.exp(log_actions)
    B, T, Q, G = log_actions.shape[:4]
    flat = log_actions.reshape(B, T, Q, G, Q * (2 * G + 1))
    ok = torch.isfinite(flat).any(dim=-1, keepdim=True)
    lse = torch.logsumexp(torch.where(ok, flat, torch.zeros_like(flat)), dim=-1, keepdim=True)
    out = torch.exp(flat - torch.where(ok, lse, torch.zeros_like(lse)))
    return out.reshape(log_actions.shape)


def reference_ns(log_actions: torch.Tensor, start: int = 0, window: int | None = None,
                 mode: str = "rns", normalize: bool = False,
                 bottom: str = "paper") -> dict[str, torch.Tensor]:
    """The stack WFA of the (R)NS-RNN by its equations, cell by cell (module docstring).

    ``window`` is D of §5.1: γ[i→t] = 0 for t − i > D (None: unlimited). Returns ``alpha``
    (B, T+1, Q, G) the forward weights (real), ``reading`` (B, T+1, Q, G) in "rns" mode or
    (B, T+1, G) in "ns" mode (zeros where α is all zero), ``log_norm`` (B, T+1) log Σ α."""
    _check(log_actions, start, window, mode)
    if bottom not in ("paper", "reachable"):
        raise InputError(f"bottom must be 'paper' or 'reachable', got {bottom!r}")
    lo = -1 if bottom == "reachable" else 0                     # the first row i
    B, T, Q, G = log_actions.shape[:4]
    D = T + 1 if window is None else window
    delta = action_weights(log_actions, normalize)
    push = lambda t, q, x, r, y: delta[:, t - 1, q, x, r, y]            # Δ[t][q, x → r, •y]
    repl = lambda t, q, x, r, y: delta[:, t - 1, q, x, r, G + y]        # Δ[t][q, x → r, y]
    pop = lambda t, q, x, r: delta[:, t - 1, q, x, r, 2 * G]            # Δ[t][q, x → r, ε]
    zero = log_actions.new_zeros(B)
    gamma: dict[tuple, torch.Tensor] = {}                       # (i, t, q, x, r, y) → (B,)
    g = lambda i, t, q, x, r, y: gamma.get((i, t, q, x, r, y), zero)   # 0 outside the band
    alpha: dict[tuple, torch.Tensor] = {}
    for r in range(Q):                                          # Eq. 3
        for y in range(G):
            for i in range(lo, 1):
                alpha[i, r, y] = zero + float(r == start and y == 0)
    if lo < 0:                                                  # γ[−1→0]: the initial ⊥
        gamma[-1, 0, start, 0, start, 0] = zero + 1.0
    for t in range(1, T + 1):
        for i in range(max(lo, t - D), t):                      # 0 ≤ i < t, t − i ≤ D (§5.1)
            for q in range(Q):
                for x in range(G):
                    for r in range(Q):
                        for y in range(G):
                            cell = push(t, q, x, r, y) if i == t - 1 else zero   # Eq. 2, push
                            for s in range(Q):                                   # Eq. 2, repl.
                                for z in range(G):
                                    cell = cell + g(i, t - 1, q, x, s, z) * repl(t, s, z, r, y)
                            for k in range(i + 1, t - 1):                        # Eq. 2, pop
                                for u in range(Q):
                                    for s in range(Q):
                                        for z in range(G):
                                            cell = cell + (g(i, k, q, x, u, y)
                                                           * g(k, t - 1, u, y, s, z)
                                                           * pop(t, s, z, r))
                            gamma[i, t, q, x, r, y] = cell
        for r in range(Q):                                      # Eq. 4 (i from 0)
            for y in range(G):
                a = zero
                for i in range(max(lo, t - D), t):
                    for q in range(Q):
                        for x in range(G):
                            a = a + alpha[i, q, x] * g(i, t, q, x, r, y)
                alpha[t, r, y] = a
    A = torch.stack([torch.stack([torch.stack([alpha[t, r, y] for y in range(G)], -1)
                                  for r in range(Q)], -2) for t in range(T + 1)], 1)
    total = A.sum(dim=(2, 3))
    live = total > 0
    safe = torch.where(live, total, torch.ones_like(total))
    reading = torch.where(live[..., None, None], A / safe[..., None, None], torch.zeros_like(A))
    if mode == "ns":                                            # Eq. 5
        reading = reading.sum(dim=2)
    log_norm = torch.where(live, torch.log(safe), torch.full_like(total, float("-inf")))
    return {"alpha": A, "reading": reading, "log_norm": log_norm}


__all__ = ["action_weights", "reference_ns"]

"""Dyck-(k, m) generators as Elman RNNs and LSTMs with exact weights (Hewitt et al. 2020).

Methods (one slot code each, see `dyck_codes`): ``hewitt`` (default; the distributed code,
d = 3⌈log₂k⌉ − 1 with ⌈log₂k⌉ := max(1, ⌈log₂k⌉) so k = 1 is covered), ``onehot`` (d = k) and
``compact`` (ours; binary(i + 1), d = ⌈log₂(k+1)⌉).

Elman (Hewitt et al. 2020, "RNN stacks through push/pop subcomponents"): two copies P (written on
push) and Q (written on pop) of an m-slot stack, top in slot 1; the stack is S = P + Q (one of them
is zero).  Units are sigmoid units run exactly as tanh units (σ(z) = (1 + tanh(z/2))/2, g = 2u − 1):
2·m·d units.

LSTM (Hewitt et al. 2020, "LSTM stacks through clever gating"): the cell holds the stack in place
(slot 1 = bottom, top = highest filled slot); the output gate lets only the top slot into h.  With
a_p = ρ·ω·h_p (ρ ≈ 1/tanh 1) one-hot over the top position, every gate is one threshold of
(a, input): m·d units.  Because the whole stack lives in c, the module's ``states`` are
[h, c] (width 2H); ``hidden_units`` is H.  The ``compact`` LSTM uses the nonzero code, whose
occupancy ω·φ ∈ [1, A] is not constant; the gate weights below are chosen to be correct for every
a ∈ [1, A] (A = d), which is what lets a first-order LSTM reach m⌈log₂(k+1)⌉ units.

Readout (all methods): features f = [Zφ_top ; ω·φ_slot m] and logits β(O f + o):
open ↦ ½ − occ_m, close c ↦ Ψ_c·Zφ_top − τ_c + ½, END ↦ ½ − occ_top (ideal margins ½).  When
2k+1 is large the product O·F is never formed: readout = F, out_embedding = O.
Networks are specified on *legal* prefixes; after an illegal symbol their state is unspecified.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import sympy as sp
import torch

from pdanet import limits
from pdanet.automata.bounded import DyckKM
from pdanet.constructions.abstraction import MAX_LABELS, DyckSlots
from pdanet.constructions.base import CompiledNetwork, ExactWeight, load_exact
from pdanet.constructions.dyck_codes import CODES, SlotCode, binary
from pdanet.constructions.modules import RecurrentBlocks, RecurrentNet, recurrent_state_dict
from pdanet.errors import InputError
from pdanet.verify.bounds import information_floor  # re-exported: bits to tell configs apart

K, M = sp.symbols("k m")  # plain symbols: CompiledNetwork.bound_value substitutes Symbol("k")
LOG_K = sp.Max(1, sp.ceiling(sp.log(K, 2)))
LOG_K1 = sp.ceiling(sp.log(K + 1, 2))

BOUNDS: dict[tuple[str, str], sp.Expr] = {
    ("elman", "hewitt"): 6 * M * LOG_K - 2 * M,
    ("lstm", "hewitt"): 3 * M * LOG_K - M,
    ("elman", "onehot"): 2 * M * K,
    ("lstm", "onehot"): M * K,
    ("elman", "compact"): 2 * M * LOG_K1,
    ("lstm", "compact"): M * LOG_K1,
}

DEFAULT_MAX_LENGTH = 10**6
HALF = Fraction(1, 2)


# --- shared pieces ------------------------------------------------------------------------------


class DyckElmanNet(RecurrentNet):
    """`RecurrentNet` (Elman) whose forward returns the same values as `RecurrentNet.forward` in
    the layouts the Dyck decoders and the verifier read fastest: ``states`` (B, T+1, H) is a view
    of a step-major buffer (T+1, B, H) (the ``nn.RNN`` output copied once, h0 prepended) and
    ``logits`` (B, T+1, O) a view of an output-major buffer (O, T+1, B). Same parameters and
    ``state_dict`` keys; with autograd on, the plain `RecurrentNet.forward`."""

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters()):
            return super().forward(ids)
        ids = torch.as_tensor(ids)
        B, T = ids.shape
        H = self.hidden_size
        out, _ = self.rnn(self.embedding(ids.clamp(min=0)), self.initial_state(B))
        buf = out.new_empty(T + 1, B, H)
        buf[0] = self.h0
        buf[1:] = out.transpose(0, 1)                  # nn.RNN's batch-first output is step-major
        logits = self.column_logits(buf.view(-1, H).T).view(-1, T + 1, B)
        return buf.transpose(0, 1), logits.permute(2, 1, 0)


def _unit_major(out: torch.Tensor, dst: torch.Tensor) -> None:
    """dst (H, T, B) ← the batch-first output out (B, T, H) of an nn.RNN/nn.LSTM (stored
    step-major), copied a few steps at a time so that each transposed block stays in cache
    (several times faster than one strided copy)."""
    B, T, H = out.shape
    chunk = max(1, (1 << 17) // max(1, B * H))
    for t in range(0, T, chunk):
        dst[:, t:t + chunk].copy_(out[:, t:t + chunk].permute(2, 1, 0))


class DyckLSTMNet(RecurrentNet):
    """`RecurrentNet` (LSTM) whose ``states`` are [h, c] (B, T+1, 2H): the stack lives in c.

    Same parameters and ``state_dict`` keys as `RecurrentNet`; logits read h only (the same
    readout layers, applied as W·h + b). h is the ``nn.LSTM`` output itself; c is recomputed from
    it, c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t with the gates of (x_t, h_{t−1}). Gate rows the weights
    share (i and f constant over groups of w consecutive units, g periodic with period w — how
    `build_lstm` lays out its slots) are evaluated once; any other weights work too (w = 1, g per
    unit). ``states`` and ``logits`` are (B, T+1, ·) views of buffers stored (·, T+1, B)
    (unit-major: each unit's cells over all steps and strings are one contiguous plane, which
    is what the recurrence for c and the decoder read). `forward_decoded` returns the cells
    alone (the decoder accepts [h, c] or c), which is what the verifier reads. With autograd on,
    an equivalent differentiable path.
    """

    def _run(self, ids: torch.Tensor):
        """(ids, x, h0, c0, out): the nn.LSTM on the embedded ids from the initial state."""
        ids = torch.as_tensor(ids)
        x = self.embedding(ids.clamp(min=0))
        h0, c0 = self.initial_state(ids.shape[0])
        return ids, x, h0, c0, self.rnn(x, (h0, c0))[0]

    def _autograd(self) -> bool:
        return torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters())

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids, x, h0, c0, out = self._run(ids)
        B, T = ids.shape
        H = self.hidden_size
        if self._autograd():
            return self._differentiable(x, h0, c0, out)
        buf = out.new_empty(2 * H, T + 1, B)                   # [h; c] by unit, then step, batch
        buf[:H, 0] = h0[0].T
        _unit_major(out, buf[:H, 1:])
        self._cells(ids, h0[0], c0[0], out, buf[H:])
        logits = self.column_logits(buf[:H].reshape(H, -1)).view(-1, T + 1, B)
        return buf.permute(2, 1, 0), logits.permute(2, 1, 0)

    def forward_decoded(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The part of the states the decoder reads, the cells c (B, T+1, H), and the logits:
        the same values as `forward` (its states[..., H:] and logits) without storing h a second
        time (the verifier's path). Views of buffers stored (·, T+1, B)."""
        if self._autograd():
            states, logits = self.forward(ids)
            return states[..., self.hidden_size:], logits
        ids, _, h0, c0, out = self._run(ids)
        B, T = ids.shape
        H = self.hidden_size
        cells = out.new_empty(H, T + 1, B)
        self._cells(ids, h0[0], c0[0], out, cells)
        hs = _step_major(out).view(T * B, H)
        first = self.column_logits(h0[0].T)                              # (O, B)
        logits = torch.cat([first[:, None], self.column_logits(hs.T).view(-1, T, B)], 1)
        return cells.permute(2, 1, 0), logits.permute(2, 1, 0)

    def _differentiable(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
                        out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The same states and logits without in-place writes, for autograd (slower)."""
        hs = torch.cat([h0[0].unsqueeze(1), out], dim=1)
        gi, gf, gg, _ = self.preactivations(x, hs[:, :-1]).chunk(4, dim=-1)
        ig, gf = torch.sigmoid(gi) * torch.tanh(gg), torch.sigmoid(gf)
        cs = [c0[0]]
        for t in range(x.shape[1]):                             # c_t = f c_{t−1} + i g
            cs.append(gf[:, t] * cs[-1] + ig[:, t])
        return torch.cat([hs, torch.stack(cs, dim=1)], dim=-1), self.logits(hs)

    def _shared_rows(self, blocks: RecurrentBlocks) -> tuple[int, bool]:
        """Largest group width w with i, f rows constant over each group of w units, and
        whether the g rows repeat with period w (else g is evaluated for every unit)."""
        H = self.hidden_size
        W = torch.cat([blocks.weight_ih, blocks.weight_hh, blocks.bias[:, None]], 1)
        i_f = W[:2 * H]
        g = W[2 * H:3 * H]
        for w in range(H, 1, -1):
            if H % w:
                continue
            groups = i_f.view(2 * H // w, w, -1)
            if bool((groups == groups[:, :1]).all()):
                return w, bool((g.view(H // w, w, -1) == g[:w]).all())
        return 1, bool((g == g[:1]).all())   # groups of one unit (NaN weights end up here)

    def _cells(self, ids: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, out: torch.Tensor,
               cells: torch.Tensor) -> None:
        """Fill cells (H, T+1, B) with c_0..c_T, from h_0 (B, H), c_0 (B, H) and the nn.LSTM's
        batch-first output h_1..h_T (B, T, H)."""
        blocks, H = self.blocks(), self.hidden_size
        T, B = cells.shape[1] - 1, cells.shape[2]
        w, periodic = self._shared_rows(blocks)
        m = H // w
        n_g = w if periodic else H
        sel = torch.cat([torch.arange(0, H, w), torch.arange(H, 2 * H, w),
                         2 * H + torch.arange(n_g)]).to(cells.device)
        bias = blocks.bias[sel]
        emb = blocks.embedding
        codes = torch.cat([emb, torch.ones_like(emb[:, :1])], 1)       # [input code, 1] per symbol
        x = torch.nn.functional.embedding(ids.T.clamp(min=0).reshape(-1), codes)  # by step
        pre = torch.mm(torch.cat([blocks.weight_ih[sel], bias[:, None]], 1), x.T)  # (gates, T·B)
        w_hh = blocks.weight_hh[sel]
        pre[:, :B].addmm_(w_hh, h0.T)                                   # h_{t−1} at t = 1: h_0
        if T > 1:                                                       # then h_1..h_{T−1}
            pre[:, B:].addmm_(w_hh, _step_major(out)[:T - 1].reshape(-1, H).T)
        pre[:2 * m].sigmoid_()
        pre[2 * m:].tanh_()
        pre = pre.view(-1, T, B)
        gi, gf = pre[:m, None], pre[m:2 * m, None]                       # (m, 1, T, B)
        gg = pre[2 * m:].view(1 if periodic else m, w, T, B)
        cells[:, 0] = c0.T
        cells = cells.view(m, w, T + 1, B)
        torch.mul(gi, gg, out=cells[:, :, 1:])                          # i ⊙ g, every step
        for t in range(T):                                              # c_t = i g + f c_{t−1}
            cells[:, :, t + 1].addcmul_(gf[:, :, t], cells[:, :, t])


def _step_major(out: torch.Tensor) -> torch.Tensor:
    """The (T, B, H) step-major form of a batch-first nn.LSTM output (a view: that is how
    nn.LSTM stores it; a copy otherwise)."""
    sm = out.transpose(0, 1)
    return sm if sm.is_contiguous() else sm.contiguous()


def _readout_rows(code: SlotCode) -> tuple[np.ndarray, np.ndarray]:
    """O ((2k+1) × (r+1), ints) and 2·o (ints): the logits β(O f + o) over f = [Zφ_top; occ_m]."""
    k, r = code.k, code.r
    O = np.zeros((2 * k + 1, r + 1), np.int64)
    o2 = np.ones(2 * k + 1, np.int64)                         # ½ for opens and END
    O[:k, r] = -1                                             # open: ½ − occ_m
    psi, tau = code.match(np.arange(k))
    O[k:2 * k, :r] = psi                                      # close c: Ψ_c·Zφ − τ_c + ½
    o2[k:2 * k] = 1 - 2 * tau
    O[2 * k, r - 1] = -1                                      # END: ½ − occ_top (last row of Z = ω)
    return O, o2


@dataclass(frozen=True)
class _Readout:
    """The readout blocks (`RecurrentBlocks` fields): ``weight``/``bias`` on h, then, when
    factored through the output code of width ``code_width``, ``out_weight``/``out_bias``."""

    weight: ExactWeight
    bias: ExactWeight
    out_weight: ExactWeight | None = None
    out_bias: ExactWeight | None = None
    code_width: int | None = None


def _readout_weights(code: SlotCode, F: np.ndarray, f0: np.ndarray, denom: int, H: int
                     ) -> _Readout:
    """Readout blocks for features (F h + f0)/denom (int arrays): factored through the output
    code when that has fewer parameters than the dense (2k+1) × H matrix."""
    O, o2 = _readout_rows(code)
    n_out, n_f = O.shape
    if n_out * H > n_out * n_f + n_f * H:
        return _Readout(ExactWeight(F, denom, False), ExactWeight(f0, denom, False),
                        ExactWeight(O, 1, True), ExactWeight(o2, 2, True), n_f)
    return _Readout(ExactWeight(2 * (O @ F), 2 * denom, True),
                    ExactWeight(2 * (O @ f0) + denom * o2, 2 * denom, True))


def _blocks(code: SlotCode, ro: _Readout, **recurrence: ExactWeight) -> dict[str, ExactWeight]:
    """The exact weights by meaning (`RecurrentBlocks`), keyed as the module's state_dict:
    the input code `_embedding`, the recurrence blocks given, and the readout."""
    return recurrent_state_dict(RecurrentBlocks(
        embedding=_embedding(code), readout_weight=ro.weight, readout_bias=ro.bias,
        out_weight=ro.out_weight, out_bias=ro.out_bias, **recurrence))


def _embedding(code: SlotCode) -> ExactWeight:
    """Input code of each symbol: [inputs(i); 1] for open i, zeros for every close (q + 1 wide)."""
    k = code.k
    E = np.zeros((2 * k, code.q + 1), np.int64)
    E[:k, :code.q] = code.inputs(np.arange(k))
    E[:k, code.q] = 1
    return ExactWeight(E, 1, False)


def _beta(eps: Fraction, mu: Fraction) -> tuple[sp.Integer, sp.Expr]:
    """Smallest integer β with σ(β·μ) ≥ 1 − ε, i.e. β ≥ ln((1 − ε)/ε)/μ (exact, via sympy)."""
    e, u = sp.Rational(eps.numerator, eps.denominator), sp.Rational(mu.numerator, mu.denominator)
    bound = sp.log((1 - e) / e) / u
    return sp.Integer(sp.ceiling(bound)), bound


def _reader(logits: np.ndarray) -> np.ndarray:
    return logits > 0


def _check(machine: DyckKM) -> None:
    if not isinstance(machine, DyckKM):
        raise InputError(f"expected a DyckKM machine, got {type(machine).__name__}")


def _top_first_to_stack(top_first: np.ndarray) -> dict[str, np.ndarray]:
    """Slots with the top first (…, m) → bottom-first stack (-1 padded) and depth."""
    m = top_first.shape[-1]
    depth = (top_first != -1).sum(-1)
    i = np.arange(m)
    idx = np.clip(depth[..., None] - 1 - i, 0, m - 1)
    stack = np.where(i < depth[..., None], np.take_along_axis(top_first, idx, -1), -1)
    return {"stack": stack, "depth": depth}


MAX_TABLE_BITS = 16


class _SlotReader:
    """Thresholded units (…, m, d) → slot types (…, m) as `code.decode` gives them.

    For d ≤ 16 the d bits of each slot are packed into an integer word (one vectorised pass per
    bit, none per slot) and looked up in a table of `code.decode` over all 2^d words. Results
    are returned as the transpose of a C-contiguous slot-major buffer ((m, …) in memory), the
    layout in which `DyckKM.run_batch` returns its fields, so the verifier compares the two
    with plain elementwise passes."""

    def __init__(self, code: SlotCode, dtype: np.dtype):
        self.code = code
        self.dtype = dtype
        d = code.d
        self.table = (code.decode(binary(np.arange(1 << d), d).astype(bool)).astype(dtype)
                      if d <= MAX_TABLE_BITS else None)
        self.word = np.uint8 if d <= 8 else np.uint16
        if self.table is not None and self.table[0] != -1:
            raise AssertionError(f"{code.name}: the all-zero word must decode to an empty slot")

    def words(self, on: np.ndarray) -> np.ndarray:
        """(…, m, d) bool → the packed words, slot-major: (m, …) C-contiguous (reversed axes)."""
        packed = on[..., 0].astype(self.word)
        for j in range(1, self.code.d):                       # the d code bits, not the slots
            packed |= on[..., j].astype(self.word) << self.word(j)
        return np.ascontiguousarray(packed.T)

    def types(self, on: np.ndarray) -> np.ndarray:
        """(…, m, d) bool → slot types (…, m) (-1 empty, -2 not a code word)."""
        if self.table is None:
            return self.code.decode(on).astype(self.dtype)
        return self.table.take(self.words(on)).T

    def top_first_to_stack(self, on: np.ndarray) -> dict[str, np.ndarray]:
        """Slots with the top first (…, m, d) → bottom-first ``stack`` (…, m) and ``depth``:
        depth = number of non-empty slots, stack[i] = slot depth−1−i for i < depth, else -1.

        Bottom first is the reversed slot order shifted by m − depth places (words past the end
        become the all-zero, empty word); the variable shift is done as a barrel shifter, one
        vectorised conditional shift per bit of m − depth (no loop over slots)."""
        if self.table is None:
            return _top_first_to_stack(self.code.decode(on).astype(self.dtype))
        words = self.words(on)                                # (m, …), top first
        m = words.shape[0]
        filled = (self.table != -1).take(words)
        shift = m - filled.sum(0, dtype=np.intp)
        out = words[::-1].copy()                              # bottom first when depth = m
        step = 1
        while step < m:                                       # out[i] ← out[i + step] where set
            moved = np.zeros_like(out)
            moved[:m - step] = out[step:]
            moved -= out                                      # (modular arithmetic on the words:
            moved *= (shift & step).astype(bool).view(np.uint8)  # much faster than np.where)
            out += moved
            step *= 2
        return {"stack": self.table.take(out).T, "depth": (m - shift).T}


# --- Elman ---------------------------------------------------------------------------------------


def build_elman(machine: DyckKM, method: str, dtype: torch.dtype = torch.float32) -> CompiledNetwork:
    """Push/pop copies (Hewitt et al. 2020): P_1 ← φ_x on open, P_s ← S_{s−1} on open,
    Q_s ← S_{s+1} on close, Q_m ≡ 0; every unit one sigmoid threshold with ideal margin ½."""
    _check(machine)
    k, m = machine.k, machine.m
    code: SlotCode = CODES[method](k)
    d, q = code.d, code.q
    H = 2 * m * d
    sgn = code.signs

    def unit(copy: int, slot: int) -> np.ndarray:
        return (copy * m + slot) * d + np.arange(d)

    # sigmoid space: u' = σ(β(A u + U e + b)), u ∈ {0, 1}^H, e = [inputs; open]
    A = np.zeros((H, H), np.int64)
    U = np.zeros((H, q + 1), np.int64)
    b2 = np.zeros(H, np.int64)                                # 2·b (half-integers)
    U[unit(0, 0)] = sgn[:, None] * code.Phi                   # P_1[j] = |φ_x[j]| on open
    b2[unit(0, 0)] = -1                                       #   |φ_x[j]| − ½
    for s in range(1, m):                                     # P_s[j] = S_{s−1}[j] ∧ open
        rows = unit(0, s)
        A[rows, unit(0, s - 1)] = 1
        A[rows, unit(1, s - 1)] = 1
        U[rows, q] = 1
        b2[rows] = -3
    for s in range(m - 1):                                    # Q_s[j] = S_{s+1}[j] ∧ close
        rows = unit(1, s)
        A[rows, unit(0, s + 1)] = 1
        A[rows, unit(1, s + 1)] = 1
        U[rows, q] = -1
        b2[rows] = -1
    b2[unit(1, m - 1)] = -1                                   # Q_m ≡ 0

    # readout features on u: [Z φ_top ; ω·φ_m], φ_slot = sgn ⊙ (u_P + u_Q)
    r = code.r
    F = np.zeros((r + 1, H), np.int64)
    Zs = code.feat * sgn[None, :]
    F[:r, unit(0, 0)] = Zs
    F[:r, unit(1, 0)] = Zs
    F[r, unit(0, m - 1)] = code.omega * sgn
    F[r, unit(1, m - 1)] = code.omega * sgn

    # tanh space (u = (1+g)/2, σ(z) = (1+tanh(z/2))/2): W = A/4, V = U/2, bias = A·1/4 + b/2
    ones = np.ones(H, np.int64)
    ro = _readout_weights(code, F, F @ ones, 2, H)            # u = (1+g)/2
    w = _blocks(code, ro,
                weight_ih=ExactWeight(U, 2, True),
                weight_hh=ExactWeight(A, 4, True),
                bias_ih=ExactWeight(A @ ones + b2, 4, True),
                bias_hh=ExactWeight(np.zeros(H, np.int64), 1, True),
                h0=ExactWeight(-ones, 1, False))              # u0 = 0: every slot empty

    # margin argument (sigmoid space)
    W = max(1, code.match_l1, int(np.abs(code.omega).sum()))
    eps = Fraction(1, 8 * W)
    mu = HALF - 2 * eps
    beta, exact = _beta(eps, mu)
    argument = (
        f"Every unit u is a sigmoid unit run as g = 2u − 1 = tanh(z/2). Invariant: every unit within "
        f"ε = 1/(8W) = {eps} of its ideal 0/1 value (tanh units within 2ε of ±1), W = {W} = max(1, "
        f"max_c‖Ψ_c Z‖₁, ‖ω‖₁). Each update pre-activation is β(ideal ± ½) with ideal |margin| ½ and "
        f"reads two units (P and Q of one cell), so its margin is ≥ ½ − 2ε = {mu}; "
        f"σ(β·{mu}) ≥ 1 − ε iff β ≥ ln((1−ε)/ε)/({mu}) = {sp.N(exact, 8)}; β = {beta}. Readout rows "
        f"read the top slot (or slot m) with ℓ₁ weight ≤ W on units of error ≤ 2ε, so every logit "
        f"keeps sign with |logit| ≥ β(½ − 2Wε) = β/4: margin c = 1/4."
    )
    return _finish(machine, "elman", method, code, H, w, beta, argument, ro.code_width, dtype,
                   _elman_decoder(code, m, machine.stack_dtype),
                   _elman_layout(code, m), {"eps": eps, "W": W})


def _elman_layout(code: SlotCode, m: int) -> DyckSlots:
    """Which unit holds what (read by structural certification; describes, never changes, the
    network): ``units[copy, slot, j]`` is the index of coordinate j of stack slot ``slot`` (0 =
    top) in copy P (copy 0, written on push) or Q (copy 1, written on pop). Ideal value of a
    unit: g = 2·signs[j]·φ[j] − 1 in the copy that the last operation wrote, −1 in the other copy
    and in empty slots (φ = the slot's code vector, `code.phi`)."""
    d = code.d
    labels = (tuple(f"{c} slot {s + 1}[{j}]" for c in "PQ" for s in range(m) for j in range(d))
              if 2 * m * d <= MAX_LABELS else ())
    return DyckSlots(labels=labels, cell="rnn", kind="push_pop", slots=m, slot_width=d,
                     top="first", units=np.arange(2 * m * d).reshape(2, m, d),
                     signs=code.signs.copy(), code=code)


def _elman_decoder(code: SlotCode, m: int, dtype: np.dtype
                   ) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    d = code.d
    reader = _SlotReader(code, dtype)

    def decoder(states: np.ndarray) -> dict[str, np.ndarray]:
        g = np.asarray(states)
        g = g.reshape(g.shape[:-1] + (2, m, d))
        on = g[..., 0, :, :] + g[..., 1, :, :] > -1              # S = P + Q: u_P + u_Q > ½
        return reader.top_first_to_stack(on)

    return decoder


# --- LSTM ----------------------------------------------------------------------------------------


def _rho() -> tuple[Fraction, sp.Rational]:
    """ρ ≈ 1/tanh 1 (rational) and an exact upper bound on |ρ·tanh 1 − 1|."""
    rho = Fraction(str(sp.N(1 / sp.tanh(1), 30))).limit_denominator(10**4)
    err = abs(sp.Rational(rho.numerator, rho.denominator) * sp.tanh(1) - 1)
    num = sp.N(err, 30)
    e = int(sp.floor(sp.log(num, 10)))                        # round up to 3 digits, then double
    return rho, 2 * sp.Rational(int(sp.ceiling(num * sp.Integer(10) ** (2 - e))), 10 ** (2 - e))


def lstm_slot_gates(m: int, A: int) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Gate rows on a_p (p = 0..m−1, the top-position signal) for every slot s (0 = bottom):
    gate -> (Wa (m × m) ints, open coefficient (m,), 2·bias (m,)); pre-activation/β =
    Wa[s]·a + u[s]·open + b[s].  Correct for every top signal a ∈ [1, A] (and a = 0 elsewhere)."""
    i_W = np.zeros((m, m), np.int64)
    i_W[0, :] = -1                                            # i_1 = open ∧ empty
    i_u = np.full(m, A, np.int64)
    i_u[0] = 1
    i_b2 = np.full(m, -2 * A - 1, np.int64)
    i_b2[0] = -1
    for s in range(1, m):                                     # i_s = open ∧ top = s − 1
        i_W[s, s - 1] = 1
    f_W = np.zeros((m, m), np.int64)                          # f_s = s ≤ top − close
    o_W = np.zeros((m, m), np.int64)                          # o_s = s is the new top
    for s in range(m):
        f_W[s, :s] = -1
        f_W[s, s] = 1
        f_W[s, s + 1:] = A + 1
        if s >= 1:
            o_W[s, s - 1] = 1
        else:
            o_W[s, s] = -1
        if s + 1 < m:
            o_W[s, s + 1] = -1
        o_W[s, s + 2:] = -(A + 1)
    f_u = np.full(m, A, np.int64)
    f_b2 = np.full(m, -2 * A - 1, np.int64)
    o_u = np.full(m, -(A + 1), np.int64)
    o_u[0] = -A
    o_b2 = np.full(m, 2 * A + 1, np.int64)
    return {"i": (i_W, i_u, i_b2), "f": (f_W, f_u, f_b2), "o": (o_W, o_u, o_b2)}


def build_lstm(machine: DyckKM, method: str, dtype: torch.dtype = torch.float32,
               max_length: int = DEFAULT_MAX_LENGTH) -> CompiledNetwork:
    """Gate-based in-place stack (Hewitt et al. 2020): c̃ = φ_x on open and 0 on close, i writes
    the slot above the top, f clears the popped slot (and every slot above the stack), o opens
    the new top only (slots above the stack are don't-care: their cell is ≈ 0)."""
    _check(machine)
    if not isinstance(max_length, int) or max_length < 1:
        raise InputError(f"max_length must be a positive int, got {max_length!r}")
    k, m = machine.k, machine.m
    code: SlotCode = CODES["compact" if method == "compact" else method](k)
    d, q, A = code.d, code.q, code.amax
    H = m * d
    rho, dk = _rho()
    rn, rd = rho.numerator, rho.denominator
    D = 2 * rd                                                # common denominator of the gates
    gates = lstm_slot_gates(m, A)
    Whh = np.zeros((4 * H, H), np.int64)
    Wih = np.zeros((4 * H, q + 1), np.int64)
    bias = np.zeros(4 * H, np.int64)
    read_a = np.kron(np.eye(m, dtype=np.int64), code.omega[None, :])   # a_p = ρ ω·h_p: (m, H)
    for g_idx, name in enumerate(("i", "f", "g", "o")):
        rows = slice(g_idx * H, (g_idx + 1) * H)
        if name == "g":                                        # c̃_s = tanh(β φ_x), every slot
            Wih[rows] = D * np.tile(code.Phi, (m, 1))
            continue
        Wa, uo, b2 = gates[name]
        Whh[rows] = 2 * rn * np.repeat(Wa @ read_a, d, axis=0)
        Wih[rows, q] = D * np.repeat(uo, d)
        bias[rows] = rd * np.repeat(b2, d)
    # readout features on h: [ρ Z Σ_p h_p ; ρ ω·h_m]
    r = code.r
    F = np.zeros((r + 1, H), np.int64)
    F[:r] = rn * np.tile(code.feat, (1, m))
    F[r, (m - 1) * d:] = rn * code.omega
    ro = _readout_weights(code, F, np.zeros(r + 1, np.int64), rd, H)
    w = _blocks(code, ro,
                weight_ih=ExactWeight(Wih, D, True),
                weight_hh=ExactWeight(Whh, D, True),
                bias_ih=ExactWeight(bias, D, True),
                bias_hh=ExactWeight(np.zeros(4 * H, np.int64), 1, True),
                h0=ExactWeight(np.zeros(H, np.int64), 1, False),
                c0=ExactWeight(np.zeros(H, np.int64), 1, False))

    # margin argument
    Wg = int(max(np.abs(gates[g][0]).sum(1).max() for g in ("i", "f", "o")))
    om1 = int(np.abs(code.omega).sum())
    P1 = code.match_l1
    R = sp.Rational(rho.numerator, rho.denominator)
    N = max_length
    grow = 1 + 3 * (N + 2)
    zeta = sp.Min((sp.Rational(1, 4 * max(Wg, m)) - dk * A) / (R * om1),
                  (sp.Rational(1, 4 * P1) - dk) / (R * m))
    eps_s = zeta / grow
    eps = Fraction(int(sp.fraction(eps_s)[0]), int(sp.fraction(eps_s)[1]))
    beta, exact = _beta(eps, Fraction(1, 4))
    assert 2 * sp.exp(-2 * beta) <= eps_s                      # c̃ is within ε of φ too
    argument = (
        f"Gates (σ) within ε = {sp.N(eps_s, 6)} of 0/1; cells within η = 3ε(N+2) of φ for every "
        f"prefix of length ≤ N = {N} (a kept cell moves by ≤ (1−f)|c| + i|c̃| ≤ 3ε per step, a "
        f"written, popped or empty cell is reset to within 3ε), hence h within ζ = ε + η of "
        f"o*·tanh(φ). The top signal a_p = ρ ω·h_p (ρ = {rho}, |ρ tanh 1 − 1| ≤ {dk}) is within "
        f"α = ρ‖ω‖₁ζ + |ρ tanh1 − 1|·A of its ideal (A = {A}); gate rows have ℓ₁ weight ≤ "
        f"{max(Wg, m)} on a and ideal margin ½, so they keep margin ≥ ¼ when ζ ≤ {sp.N(zeta, 6)}. "
        f"σ(β/4) ≥ 1 − ε iff β ≥ 4 ln((1−ε)/ε) = {sp.N(exact, 8)}; β = {beta}; also "
        f"1 − tanh β ≤ 2e^(−2β) ≤ ε. Readout rows (ℓ₁ ≤ {P1} on features) keep |logit| ≥ β/4: "
        f"margin c = 1/4. The cell integrates (f ≈ 1 is not contractive), so the guarantee is for "
        f"lengths ≤ N (compile with max_length=N to raise it; β grows like 4 ln N)."
    )
    return _finish(machine, "lstm", method, code, H, w, beta, argument, ro.code_width, dtype,
                   _lstm_decoder(code, m, H, machine.stack_dtype),
                   _lstm_layout(code, m), {"eps": eps, "max_length": N, "rho": rho})


def _lstm_layout(code: SlotCode, m: int) -> DyckSlots:
    """Which unit holds what (read by structural certification; describes, never changes, the
    network): ``units[slot, j]`` is coordinate j of stack slot ``slot`` (0 = bottom) in h and in
    c (state index H + unit). Ideal values: c = φ (0 for an empty slot); h = tanh(φ) in the top
    slot (slot depth − 1) and 0 elsewhere (φ = the slot's code vector, `code.phi`)."""
    d = code.d
    labels = (tuple(f"slot {s + 1}[{j}]" for s in range(m) for j in range(d))
              if m * d <= MAX_LABELS else ())
    return DyckSlots(labels=labels, cell="lstm", kind="cell_stack", slots=m, slot_width=d,
                     top="last", units=np.arange(m * d).reshape(m, d), code=code)


def _lstm_decoder(code: SlotCode, m: int, H: int, dtype: np.dtype
                  ) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    d = code.d
    reader = _SlotReader(code, dtype)

    def decoder(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        if states.shape[-1] not in (H, 2 * H):
            raise InputError(f"expected LSTM states [h, c] of width {2 * H} (or the cells c alone, "
                             f"width {H}), got {states.shape[-1]}")
        c = states[..., -H:]                                   # the cells: |c| > ½
        on = np.greater(c, 0.5) | np.less(c, -0.5)
        slots = reader.types(on.reshape(on.shape[:-1] + (m, d)))  # bottom first already
        return {"stack": slots, "depth": (slots != -1).sum(-1)}

    return decoder


# --- assembly ------------------------------------------------------------------------------------


def _finish(machine: DyckKM, target: str, method: str, code: SlotCode, H: int,
            weights: dict[str, ExactWeight], beta: sp.Integer, argument: str, n_code: int | None,
            dtype: torch.dtype, decoder, abstraction: DyckSlots, info: dict) -> CompiledNetwork:
    k, m = machine.k, machine.m
    cls = DyckElmanNet if target == "elman" else DyckLSTMNet
    module = cls("rnn" if target == "elman" else "lstm", 2 * k, code.q + 1, H, 2 * k + 1,
                 readout_code=n_code)
    module = load_exact(module, weights, beta, dtype)
    bound = BOUNDS[(target, method)]
    net = CompiledNetwork(
        machine=machine, module=module, target=target, method=method, hidden_units=H,
        bound=bound, params={"k": k, "m": m}, weights=weights, scale=beta,
        decoder=decoder, reader=_reader, margin=sp.Rational(1, 4), scale_argument=argument,
        info={"code": code.name, "slot_width": code.d, **info}, abstraction=abstraction,
    )
    if net.bound_value != H:
        raise AssertionError(f"{target}/{method}: {H} units but bound gives {net.bound_value}")
    return net


def check_size(machine: DyckKM, target: str, method: str) -> None:
    """ResourceError (`pdanet.limits`) before building a network that would not fit: H units
    from `BOUNDS`, slot width d = H/(2m) (Elman) or H/m (LSTM), and about 2k(d + 2) input and
    (2k + 1)(d + 2) output-embedding entries plus 4H² recurrent ones, each held exactly (int64)
    and as a float (with temporaries: 32 bytes per parameter)."""
    k, m = int(machine.k), int(machine.m)
    H = int(BOUNDS[(target, method)].subs({K: k, M: m}))
    d = H // (2 * m if target == "elman" else m)
    params = 2 * k * (d + 2) + (2 * k + 1) * (d + 2) + 4 * H * H + 4 * H * (d + 2)
    what = f"compiling {machine!r} to {target}/{method}"
    hint = ("use a smaller k or m" + (", or the 'hewitt' or 'compact' code (O(log k) units per "
                                      "slot)" if method == "onehot" else ""))
    limits.check(what, H, "max_units", hint=hint)
    limits.check(f"{what} ({params:,} parameters)", 32 * params, "max_bytes", hint=hint)


def _compile(target: str, machine: DyckKM, method: str, dtype: torch.dtype, options: dict
             ) -> CompiledNetwork:
    """Check the machine, the method and the size, then build (`build_elman` / `build_lstm`)."""
    _check(machine)
    if method not in CODES:
        raise InputError(f"unknown Dyck slot code {method!r}; choose one of {', '.join(CODES)}")
    check_size(machine, target, method)
    builder = build_elman if target == "elman" else build_lstm
    return builder(machine, method, dtype=dtype, **options)


def compile_dyck_elman(machine: DyckKM, method: str = "hewitt", dtype: torch.dtype = torch.float32,
                       **options) -> CompiledNetwork:
    """Dyck-(k, m) → Elman RNN with the push/pop slot copies of Hewitt et al. (2020), 2·m·d
    units for the slot code ``method`` (``hewitt``, ``onehot`` or ``compact``)."""
    return _compile("elman", machine, method, dtype, options)


def compile_dyck_lstm(machine: DyckKM, method: str = "hewitt", dtype: torch.dtype = torch.float32,
                      **options) -> CompiledNetwork:
    """Dyck-(k, m) → LSTM holding the stack in its cells (Hewitt et al. 2020, "clever gating"),
    m·d units for the slot code ``method``; option ``max_length`` (see `build_lstm`)."""
    return _compile("lstm", machine, method, dtype, options)


__all__ = [
    "BOUNDS",
    "DyckElmanNet",
    "DyckLSTMNet",
    "K",
    "M",
    "build_elman",
    "build_lstm",
    "compile_dyck_elman",
    "compile_dyck_lstm",
    "information_floor",
    "lstm_slot_gates",
]

"""The controller + memory model of Grefenstette et al. (2015), "Learning to Transduce with
Unbounded Memory", §3.4, as a trainable torch module, and its compilers (models
``"grefenstette_rnn"`` and ``"grefenstette_lstm"``).

The model (`GrefenstetteRNN`). At step t the controller (an Elman tanh RNN or an LSTM) reads the
input embedding concatenated with the previous reading and its previous state:
``(o'_t, h_t) = RNN(x_t ⊕ r_{t−1}, h_{t−1})`` (o'_t = h_t), and four heads give

    d_t = sigmoid(W_d o'_t + b_d)    u_t = sigmoid(W_u o'_t + b_u)
    v_t = tanh(W_v o'_t + b_v)       o_t = tanh(W_o o'_t + b_o),

the store (`NeuralStack` Eqs. 1–3, `NeuralQueue` Eqs. 1, 4–5, `NeuralDeQue` Eqs. 6–11, with two of
each head, top then bottom) steps with (v_t, u_t, d_t) and gives r_t, and the output distribution
is ``softmax(W_y o_t + b_y)`` (§4.3 decodes the most likely symbol of a softmax over the target
vocabulary; the logits are returned). h_0 (and, for the LSTM, c_0) are parameters; r_0 = 0 and
the store starts empty (§3.4). Parameters are randomly initialised (torch defaults).

Timing. o_t is computed from h_t, before the store steps, so the output at step t sees r_{t−1}
(through h_t) but not r_t. That is exactly the timing of a real-time machine's move: the move on
input a_t with top (front) X = r_{t−1} emits its output in the same step, so no delay is needed
for transducers and final-state recognisers (acceptance after step t is a function of the state
entered, known in h_t). A recogniser accepting by empty stack needs r_t and is refused (the
``stack_rnn`` controller of `pdanet.constructions.controllers` reads r_t).

The compiled controller factors the finite control from the data path. *Datums*: symbols of
the input, store and output alphabets that stand for one vocabulary item (the same object, or
related one-to-one by what some (state, reading) pushes or emits for each input symbol, or some
(state, input) for each symbol read — the reversal DPDT's bottom-marked s' is a variant of s).
A store symbol's code is [presence 1; datum bits; variant bits], its variant being the set of
maps that push it. Input symbols are partitioned into *classes*: two symbols share a class when
the machine's transitions on them agree in every state once the symbol pushed or emitted is
described relative to the step — "the input symbol's datum, variant v" (``in``), "the datum of
the symbol read, variant v" (``rd``) or a constant. The embedding of a symbol is [its class,
one-hot; its ±1 datum bits (0 where it has none)]. Hidden units:

- a start unit (on only in h_0);
- one *control unit* per (state c, input class A, reading test R) that the machine distinguishes
  (R: any, empty, nonempty, one variant, or one store code), with pre-activation
  ``z = Σ_{i → c} ind(h_{t−1,i}) + x_t[A] + m_R(r_{t−1}) − (n − 1/2)`` (n the number of terms);
- one *data unit* per datum bit copying x_t's, where some move pushes or emits the input's
  datum, and as many *reading units* per reading slot copying r_{t−1}'s datum bits, where some
  move pushes or emits the datum read.

v_t's datum bits are ``source bit + Σ_j 2·code(y_j)·ind(h_j)`` (a constant push overrides the
copied bits) and its variant bits are set by the control unit; the presence bit (+1) makes an
empty reading (0) differ from every code. o_t holds the datum bits of the output the same way
plus one flag per output symbol that is no datum's only output symbol (and "none"). So units
and parameters grow with the number of classes, not with |Σ|·|Γ|, when the machine only copies
symbols (queue copy, stack and DPDT reversal). Where one head would need
two sources (the input's datum in one move, the datum read in another), the factoring is
switched off and every symbol's behaviour is its own class (one unit per (state, symbol class,
reading) that acts differently, as the ``stack_rnn`` controller has); ``net.info["factoring"]``
says which ("none" also where no datum is copied).

Registers (``factoring == "registers"``). States of the form ``(tag, x)``, x an input symbol
(two or more per tag: bigram flip's ``("hold", x)`` and ``("owe", x)``), are one controller state
per tag plus a *register* holding x's datum bits (⌈log2 N⌉ for N datums), tried before the data
path. Every move of a tag must be the same for all its members once the next register, the
pushed datum and the emitted datum are each described as "the register" (``reg``), "the input
symbol" (``in``), "the symbol read" (``rd``) or a constant (a stack's no-op on top X counts as
replacing X by X where a member replaces); where that fails the machine takes the paths above.
Where several descriptions are right (the input equals the symbol read), the one right on every
data input of the (tag, reading) is taken, else one right on every nonempty reading of the
(tag, input), as the data path does: protocol bigram flipping's symbols stay one class.
Every copy is *gated*: per control unit j and copied source, one unit per datum bit k with
pre-activation ``z_j + (source bit k) − 1`` (z_j the control unit's, so it is on iff unit j fires
and the bit is 1); the register after a step is the sum of the gated units (and constant bits)
that load it, which the gated units of the next step read as the ``reg`` source, and the heads
read ``2·gated − ind(h_j)`` (±1 while unit j fires) for a copied pushed or emitted datum. So
units are 1 + U + (gated sources)·⌈log2 N⌉, U the control units over tags × classes × tests:
bigram flip at |Σ| = 128 has 48 hidden units (the StackRNN construction: 33k). The decoder
reads the tag from the active control unit and the member from the register's bits.

Long strings. For a stack, `GrefenstetteRNN.forward_window` runs the same controller and heads
with the stack kept as symbol ids (O(1) per step) and proves at every step that this is exact
(`pdanet.constructions.controllers.StackRNN.forward_window`'s argument); with the
``window_decoder`` the compiled network carries for DPDAs and DPDTs, `pdanet.verify` compares
long strings by their top cells in O(T). For a queue or a deque it keeps the cells at both ends
and the bottom end's offset (pops minus pushes there), which `pdanet.verify` compares with the
store machine's `run_batch_window` (equal sizes, offsets and end cells at every step imply equal
stores; see `pdanet.verify.lockstep`).

Saturation. Every pre-activation is ±1/2 or beyond (LSTM: ≥ 0.499, see below) and β = 2048, so
|βz| ≥ 1021: sigmoid is exactly 0 or 1 and tanh exactly ±1 in float32 and float64 (e^−745
underflows float64). Push/pop strengths are then exactly 0/1, pushed vectors exactly ±1 codes,
readings exact codes, and the network is bit-exact at every length. The Elman controller's
units are ±1 (ind(h) = (h+1)/2). The LSTM's units use forget gate 0, input gate 1: a control unit
has g = 1 and output gate sigmoid(βz), so h ∈ {0, tanh 1}; a data unit has g = tanh(β·bit), so
h = ±tanh 1. Downstream weights read ind(h) = κh with κ = 21/16 (κ·tanh 1 ∈ (0.9995, 0.9996);
h_0's start unit is 16/21, so κh_0 = 1), which costs 1 − κ tanh 1 < 0.0005 of margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp
import torch
from torch import nn
from torch.autograd.function import once_differentiable

from pdanet import limits
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DeterministicPushdown
from pdanet.automata.store import StoreTransducer
from pdanet.constructions.abstraction import ControllerMemory, ControllerUnit
from pdanet.constructions.base import CompiledNetwork, ExactWeight, load_exact
from pdanet.constructions.controllers import (
    SymbolStack,
    _decoder,
    _Plan,
    _reader,
    _Unit,
    _window_decoder,
    assemble_states,
    unit_label,
)
from pdanet.constructions.realtime import RealtimeTable
from pdanet.constructions.realtime import table as realtime_table
from pdanet.constructions.stacks.grefenstette import (
    NeuralDeQue,
    NeuralQueue,
    NeuralStack,
    StratifiedTape,
)
from pdanet.constructions.stacks.protocol import SymbolCodes, op_of, pack
from pdanet.errors import CompileError, InputError, PdanetError

STORES = {"stack": NeuralStack, "queue": NeuralQueue, "deque": NeuralDeQue}
CONTROLLERS = ("rnn", "lstm")
BETA = 2048
KAPPA = Fraction(21, 16)          # LSTM: ind(h) = κ h, κ tanh 1 ≈ 0.99959
MARGIN = {"rnn": sp.Rational(1, 2), "lstm": sp.Rational(499, 1000)}


# --- the model ----------------------------------------------------------------------------------
class _Recurrence(torch.autograd.Function):
    """`GrefenstetteRNN`'s T steps with a stack or queue as one autograd node: the forward runs
    the controller, the heads and the store (`StratifiedTape`) without autograd on preallocated
    buffers; the backward is backpropagation through time written out (the gradients autograd
    gives through the same equations, up to float rounding), its weight gradients one matmul
    each over all steps.

    forward(xp (T, B, G·H) the input projections W_x x_t + b of every step (LSTM gates in the
    order o, i, f, g), w_rec (G·H, m + H) the weights of [r_{t−1}; h_{t−1}], h0, c0 (H,), w_heads
    (2 + m, H) and b_heads: the rows of d, u, v, the tape, lstm, keep: per step None or the
    (B, 1) mask of the rows that are not padding) → [r_t; h_t] (T + 1, B, m + H). A padding row
    keeps h and c and gets d = u = 0, which leaves the store unchanged (as `forward`'s loop)."""

    @staticmethod
    def forward(ctx, xp, w_rec, h0, c0, w_heads, b_heads, tape, lstm, keep):
        T, B, _ = xp.shape
        H = h0.shape[0]
        m = w_heads.shape[0] - 2
        RH = xp.new_zeros(T + 1, B, m + H)
        RH[0, :, m:] = h0                                            # h_0; r_0 = 0 (§3.4)
        A = xp.new_empty(xp.shape)                                   # gate activations
        Z = xp.new_empty(T, B, 2 + m)                                # d_t, u_t, v_t
        C = TC = None
        rh, h, r = RH.unbind(0), RH[..., m:].unbind(0), RH[:, :, None, :m].unbind(0)
        a, x, z = A.unbind(0), xp.unbind(0), Z.unbind(0)
        d, u, v = Z[..., 0].unbind(0), Z[..., 1:2].unbind(0), Z[..., 2:].unbind(0)
        du = Z[..., :2].unbind(0)
        if lstm:
            C, TC = xp.new_empty(T + 1, B, H), xp.new_empty(T, B, H)
            C[0] = c0
            c, tc = C.unbind(0), TC.unbind(0)
            o_, i_, f_, g_ = (A[..., k * H:(k + 1) * H].unbind(0) for k in range(4))
            sig = A[..., :3 * H].unbind(0)
        wr, wh = w_rec.t(), w_heads.t()
        for t in range(T):
            torch.addmm(x[t], rh[t], wr, out=a[t])                   # RNN(x_t ⊕ r_{t−1}, h_{t−1})
            if lstm:
                sig[t].sigmoid_()
                g_[t].tanh_()
                torch.mul(f_[t], c[t], out=c[t + 1]).addcmul_(i_[t], g_[t])
                torch.mul(o_[t], torch.tanh(c[t + 1], out=tc[t]), out=h[t + 1])
            else:
                torch.tanh(a[t], out=h[t + 1])
            torch.addmm(b_heads, h[t + 1], wh, out=z[t])             # d_t, u_t, v_t (§3.4)
            du[t].sigmoid_()
            v[t].tanh_()
            if keep[t] is not None:                                  # padding: idle, keep h, c
                du[t].mul_(keep[t])
                torch.where(keep[t], h[t + 1], h[t], out=h[t + 1])
                if lstm:
                    torch.where(keep[t], c[t + 1], c[t], out=c[t + 1])
            tape.step(t, d[t], u[t], v[t], r[t + 1])                 # Eqs. 1–3 / 1, 4–5
        ctx.save_for_backward(w_rec, w_heads, RH)
        ctx.bufs, ctx.lstm, ctx.keep = (tape, A, Z, C, TC), lstm, keep
        return RH

    @staticmethod
    @once_differentiable
    def backward(ctx, g_rh):
        w_rec, w_heads, RH = ctx.saved_tensors
        tape, A, Z, C, TC = ctx.bufs
        T, B, G = A.shape
        m = Z.shape[2] - 2
        H = RH.shape[2] - m
        if g_rh is None:
            g_rh = RH.new_zeros(RH.shape)
        g_pre, g_z = torch.empty_like(A), torch.empty_like(Z)
        carry, g_c = RH.new_zeros(B, m + H), RH.new_zeros(B, H)
        # the local derivatives of every step at once: sigmoid' = y(1 − y), tanh' = 1 − y²
        dz = torch.cat([Z[..., :2] * (1 - Z[..., :2]), 1 - Z[..., 2:] ** 2], 2)
        if ctx.lstm:                    # a = [o, i, f, g]; c' = f c + i g, h = o tanh(c')
            o, i, f, g = A.split(H, 2)
            da = torch.cat([A[..., :3 * H] * (1 - A[..., :3 * H]), 1 - g ** 2], 2)
            d_o, d_i, d_f, d_g = da.split(H, 2)
            P = torch.cat([TC * d_o, g * d_i, C[:-1] * d_f, i * d_g], 2)  # ∂a/∂(h, c, c, c)
            oc = (o * (1 - TC ** 2)).unbind(0)                           # ∂h/∂c'
            f_, po, pc = f.unbind(0), P[..., :H].unbind(0), P[..., H:].unflatten(2, (3, H)).unbind(0)
            go, gc = g_pre[..., :H].unbind(0), g_pre[..., H:].unflatten(2, (3, H)).unbind(0)
        else:
            dh = (1 - RH[1:, :, m:] ** 2).unbind(0)                      # h = tanh(a)
        grh, gp, gz, dz = g_rh.unbind(0), g_pre.unbind(0), g_z.unbind(0), dz.unbind(0)
        gd, gu, gv = g_z[..., 0].unbind(0), g_z[..., 1].unbind(0), g_z[..., 2:].unbind(0)
        tape.begin_backward()
        for t in reversed(range(T)):
            g = grh[t + 1] + carry
            tape.backward(t, g[:, :m], gd[t], gu[t], gv[t])
            gz[t].mul_(dz[t])
            g_h, k = g[:, m:], ctx.keep[t]
            if k is not None:                   # a padding row's h_t, c_t are h_{t−1}, c_{t−1}
                kept_h, g_h = torch.where(k, 0.0, g_h), torch.where(k, g_h, 0.0)
                kept_c, g_c = torch.where(k, 0.0, g_c), torch.where(k, g_c, 0.0)
            g_h = g_h.addmm_(gz[t], w_heads)
            if ctx.lstm:
                g_c = torch.addcmul(g_c, g_h, oc[t])
                torch.mul(g_h, po[t], out=go[t])
                torch.mul(g_c.unsqueeze(1), pc[t], out=gc[t])
                g_c = g_c * f_[t]
            else:
                torch.mul(g_h, dh[t], out=gp[t])
            carry = torch.mm(gp[t], w_rec)
            if k is not None:
                carry[:, m:] += kept_h
                g_c = g_c + kept_c if ctx.lstm else g_c
        g_h0 = (carry[:, m:] + g_rh[0, :, m:]).sum(0)
        g_w_rec = g_pre.reshape(T * B, G).t() @ RH[:T].reshape(T * B, m + H)
        g_w_heads = g_z.reshape(T * B, 2 + m).t() @ RH[1:, :, m:].reshape(T * B, H)
        return (g_pre, g_w_rec, g_h0, g_c.sum(0) if ctx.lstm else None, g_w_heads,
                g_z.sum((0, 1)), None, None, None)


class GrefenstetteRNN(nn.Module):
    """Grefenstette et al. (2015) §3.4: an RNN or LSTM controller with a neural Stack, Queue or
    DeQue (see the module docstring). ``num_symbols`` input symbols (ids, −1 padding),
    ``hidden`` controller units, store vectors of ``width``, ``num_outputs`` logits; ``embedding``
    the input embedding size (default ``num_symbols``), ``output_size`` the size of o_t (default
    ``hidden``); ``codes`` an optional (G + 1, width) 0/1 table by which the read-back decodes
    store cells to symbol ids (cells with value bits > 1/2 matching row g are symbol g).

    forward(ids (B, T)) → (states (B, T+1, H + S·width + 1 + D), logits (B, T+1, num_outputs)),
    states[t] = [h_t; r_t; n_t; c_t] as in `pdanet.constructions.controllers.StackRNN`: n_t the
    number of cells of strength > 1/2 and c_t their decoded symbol ids (−1 padding).
    `forward_decoded` gives the same with the store kept as symbol ids where that is provably
    exact (what `pdanet.verify` runs), `forward_window` the end cells only (O(1) a step).

    Training: with a stack or queue (``fused``, the default) `forward` is one autograd node whose
    backward through time is written out (`_Recurrence`, `StratifiedTape`): the same values and
    gradients as the step-by-step autograd path (``fused = False``) up to float rounding, several
    times faster on CPU (``benchmarks/bench_training.py --model gref [--stepwise]``)."""

    #: Stack and queue: run `forward` as one autograd node with the backward through time
    #: written out (`_Recurrence`, several times faster to train); False: step by step under
    #: autograd, the store's `run` (the reference the fused path is tested against). The deque
    #: always runs step by step.
    fused = True

    def __init__(self, num_symbols: int, hidden: int, width: int, num_outputs: int,
                 controller: str = "rnn", store: str = "stack", embedding: int | None = None,
                 output_size: int | None = None, codes: np.ndarray | None = None):
        super().__init__()
        if controller not in CONTROLLERS:
            raise InputError(f"controller must be one of {CONTROLLERS}, got {controller!r}")
        if store not in STORES:
            raise InputError(f"store must be one of {tuple(STORES)}, got {store!r}")
        for name, value in (("num_symbols", num_symbols), ("hidden", hidden), ("width", width),
                            ("num_outputs", num_outputs)):
            if not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be a positive int, got {value!r}")
        self.controller_kind, self.store_kind = controller, store
        self.store = STORES[store]()
        self.slots, self.width = self.store.slots, width
        self.reading_size = width * self.slots
        E = num_symbols if embedding is None else embedding
        O = hidden if output_size is None else output_size
        self.embedding = nn.Embedding(num_symbols, E)
        cell = nn.LSTMCell if controller == "lstm" else nn.RNNCell
        self.cell = cell(E + self.reading_size, hidden)
        self.h0 = nn.Parameter(torch.randn(hidden) * 0.1)                   # §3.4: h_0 learned
        if controller == "lstm":
            self.c0 = nn.Parameter(torch.zeros(hidden))
        self.push = nn.Linear(hidden, self.slots)                            # d_t (W_d, b_d)
        self.pop = nn.Linear(hidden, self.slots)                             # u_t (W_u, b_u)
        self.value = nn.Linear(hidden, self.reading_size)                    # v_t (W_v, b_v)
        self.out = nn.Linear(hidden, O)                                      # o_t (W_o, b_o)
        self.readout = nn.Linear(O, num_outputs)                             # §4.3 softmax
        if codes is None:
            codes = np.zeros((1, width), dtype=np.int64)
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != width:
            raise InputError(f"codes must be a (G + 1, {width}) table, got {codes.shape}")
        self.codes = SymbolCodes(codes)

    @property
    def channels(self) -> tuple[str, ...]:
        """The store's action channels (`Store.channels`)."""
        return self.store.channels

    def actions(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The store's actions (B, channels) in channel order — (d, u), or (d_top, u_top,
        d_bot, u_bot) for the deque — and the pushed vectors [v_top; v_bot] (B, S·width)."""
        d = torch.sigmoid(self.push(h))                                      # d_t, §3.4
        u = torch.sigmoid(self.pop(h))                                       # u_t, §3.4
        v = torch.tanh(self.value(h))                                        # v_t, §3.4
        return torch.stack([d, u], 2).reshape(len(h), -1), v

    def _checked(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids`` (batch, time) on the module's device; InputError for another shape or an id
        beyond the vocabulary (−1 is padding)."""
        ids = torch.as_tensor(ids)
        if ids.dim() != 2:
            raise InputError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        ids = ids.to(self.h0.device)
        if bool((ids >= self.embedding.num_embeddings).any()):
            raise InputError(f"ids must be < {self.embedding.num_embeddings} (or −1 padding)")
        return ids

    def _initial(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(h_0, c_0, r_0) for the batch of embedded inputs ``x``: h_0 (and c_0) the parameters,
        r_0 = 0 (§3.4)."""
        B = x.shape[0]
        h = self.h0.view(1, -1).expand(B, -1)
        c = self.c0.view(1, -1).expand(B, -1) if self.controller_kind == "lstm" else None
        return h, c, x.new_zeros(B, self.reading_size)

    def _step(self, x_t: torch.Tensor, r: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None
              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One controller step, (o'_t, h_t) = RNN(x_t ⊕ r_{t−1}, h_{t−1}) (§3.4): (h_t, c_t),
        c_t None for the Elman controller."""
        inp = torch.cat([x_t, r], 1)
        if c is not None:
            return self.cell(inp, (h, c))
        return self.cell(inp, h), None

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = self._checked(ids)
        B, T = ids.shape
        valid = ids >= 0
        if self.fused and self.slots == 1 and B and T:
            return self._forward_tape(ids, valid)
        padded = (~valid).any(0).tolist()
        x = self.embedding(ids.clamp(min=0))
        lstm = self.controller_kind == "lstm"
        h, c, r = self._initial(x)
        mem = self.store.run(B, T, x, self.codes)
        hs, rs = [h], [r]
        blocks = [(x.new_zeros(B, 1, 0), x.new_zeros(B, 1))]
        for t in range(T):
            h_new, c_new = self._step(x[:, t], r, h, c)
            act, value = self.actions(h_new)
            v = None
            if padded[t]:                      # padding leaves the row's whole state unchanged
                v = valid[:, t]
                keep = v.unsqueeze(1)
                h_new = torch.where(keep, h_new, h)
                if lstm:
                    c_new = torch.where(keep, c_new, c)
                act = mem.idle(act, v)
            r = mem.step(act, value, v)                   # Eqs. 1–3 / 1, 4–5 / 6–11
            h, c = h_new, c_new
            hs.append(h)
            rs.append(r)
            if mem.k == mem.BLOCK or t == T - 1:
                blocks.append(mem.flush())
        hs_t, rs_t = torch.stack(hs, 1), torch.stack(rs, 1)
        states = assemble_states(hs_t, rs_t, blocks)
        logits = self.readout(torch.tanh(self.out(hs_t)))                    # o_t, then W_y o_t
        return states, logits

    def _forward_tape(self, ids: torch.Tensor, valid: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward` for a stack or queue as one autograd node (`_Recurrence`): the input
        projections of all steps in one matmul, the heads d, u, v in one, the store on
        preallocated buffers (`StratifiedTape`) and the backward written out."""
        B, T = ids.shape
        lstm, E, m = self.controller_kind == "lstm", self.embedding.embedding_dim, self.width
        cell = self.cell
        w_ih, w_hh, b = cell.weight_ih, cell.weight_hh, cell.bias_ih + cell.bias_hh
        if lstm:                            # torch's gate order i, f, g, o → o, i, f, g
            H = self.h0.shape[0]
            perm = torch.cat([torch.arange(3 * H, 4 * H), torch.arange(3 * H)]).to(w_ih.device)
            w_ih, w_hh, b = w_ih[perm], w_hh[perm], b[perm]
        x = self.embedding(ids.t().clamp(min=0))                             # (T, B, E)
        xp = nn.functional.linear(x, w_ih[:, :E], b)                         # every step's W x_t
        w_rec = torch.cat([w_ih[:, E:], w_hh], 1)                            # [r_{t−1}; h_{t−1}]
        w_heads = torch.cat([self.push.weight, self.pop.weight, self.value.weight])
        b_heads = torch.cat([self.push.bias, self.pop.bias, self.value.bias])
        tape = StratifiedTape(B, T, m, xp.detach(), top=self.store_kind == "stack")
        c0 = self.c0 if lstm else xp.new_zeros(0)
        padded = (~valid).any(0).tolist()
        mask = valid.t().unsqueeze(2)
        keep = [mask[t] if padded[t] else None for t in range(T)]
        rh = _Recurrence.apply(xp, w_rec, self.h0, c0, w_heads, b_heads, tape, lstm, keep)
        rh = rh.transpose(0, 1)                                              # (B, T + 1, m + H)
        hs, rs = rh[..., m:], rh[..., :m]
        alive = (tape.S[1:] > 0.5).transpose(0, 1)                           # (B, T, cells)
        contents, sizes = pack(alive, self.codes(tape.V)[:, None], reverse=tape.top)
        blocks = [(x.new_zeros(B, 1, 0), x.new_zeros(B, 1)), (contents, sizes)]
        states = assemble_states(hs, rs, blocks)
        logits = self.readout(torch.tanh(self.out(hs)))                      # o_t, then W_y o_t
        return states, logits

    @torch.no_grad()
    def forward_decoded(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`forward`'s (states, logits), computed with the store kept as symbol ids where that is
        exact, which is what `pdanet.verify` runs: every step costs the controller, the heads
        and O(B) index updates, instead of the store's pass over every cell (Eqs. 1–11). Exact
        under the conditions of `forward_window` (every action row exactly one of the store's
        one-step ops, `Store.actions`, and every pushed v_t exactly a symbol's ±1 vector), which
        are checked at every valid step; where one fails this returns `forward(ids)`. Then each
        strength of Eqs. 1–2, 4 and 6–9 stays exactly 0 or 1, a step pops the top (stack,
        deque top), front (queue, deque bottom) live cell and pushes at the top (bottom), and
        the readings of Eqs. 3, 5, 10–11 are exactly the end cells' vectors (0 when empty)."""
        ids = torch.as_tensor(ids)
        out = self._discrete(ids, None)
        return self.forward(ids) if out is None else out

    @torch.no_grad()
    def _discrete(self, ids: torch.Tensor, cells: int | None
                  ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The discrete-store run of `forward_decoded` (``cells`` None: states as `forward`'s)
        and of `forward_window` (``cells`` cells at the ends and, for a queue or a deque, the
        bottom end's offset: see there), or None where not exact."""
        ids = self._checked(ids)
        B, T = ids.shape
        valid = ids >= 0
        valid_np = valid.cpu().numpy()
        padded = (~valid_np).any(0)
        x = self.embedding(ids.clamp(min=0))
        lstm = self.controller_kind == "lstm"
        kind, S, m = self.store_kind, self.slots, self.width
        codes_np = np.asarray(self.codes.codes)
        G = codes_np.shape[0] - 1
        vecs_np = (2 * codes_np - 1).astype(np.float64)       # a pushed symbol's ±1 vector
        vecs_np[G] = 0                                         # the empty reading
        vecs = torch.as_tensor(vecs_np, dtype=x.dtype, device=x.device)
        lut = SymbolStack(0, 0, 1, codes_np)                   # symbol of a value vector
        rows = np.arange(B)
        mem = np.full((B, 2 * T + 2), -1, dtype=np.int64)
        lo = np.full(B, T + 1, dtype=np.int64)                 # live cells mem[lo:hi]
        hi = lo.copy()
        sizes = np.zeros((T + 1, B), dtype=np.int64)
        snaps: list = [np.zeros((B, 0), dtype=np.int64)]      # step 0: the store is empty
        if cells is not None and kind != "stack":            # no cells at either end, offset 0
            snaps[0] = np.concatenate([np.full((B, 2 * cells), -1, dtype=np.int64),
                                       np.zeros((B, 1), dtype=np.int64)], 1)
        h, c, r = self._initial(x)
        hs = x.new_empty(T + 1, B, h.shape[1])
        rs = x.new_empty(T + 1, B, self.reading_size)
        hs[0], rs[0] = h, r
        acts = np.zeros((T, B, 2 * S), dtype=np.float64)
        vals = np.zeros((T, B, S * m), dtype=np.float64)
        syms = np.full((T, B, S), -1, dtype=np.int64)
        for t in range(T):
            h_new, c_new = self._step(x[:, t], r, h, c)
            act, value = self.actions(h_new)                                 # d_t, u_t, v_t
            if padded[t]:
                keep = valid[:, t].unsqueeze(1)
                h_new = torch.where(keep, h_new, h)
                if lstm:
                    c_new = torch.where(keep, c_new, c)
            a, val, sy = acts[t], vals[t], syms[t]
            a[:] = act.double().cpu().numpy()
            val[:] = value.double().cpu().numpy()
            v = valid_np[:, t]
            on = [(a[:, 2 * k] == 1) & v for k in range(S)]              # d (top, bottom)
            off = [(a[:, 2 * k + 1] == 1) & v for k in range(S)]         # u (top, bottom)
            for k in range(S):
                if on[k].any():
                    sy[:, k] = lut.symbols(val[:, k * m:(k + 1) * m])
            if kind == "stack":
                hi -= off[0] & (hi > lo)
            elif kind == "queue":
                lo += off[0] & (hi > lo)
            else:                                                        # Eqs. 7, 8, then 9
                hi -= off[0] & (hi > lo)
                lo += off[1] & (hi > lo)
                lo -= on[1]
                mem[rows[on[1]], lo[on[1]]] = sy[on[1], 1]
            mem[rows[on[0]], hi[on[0]]] = sy[on[0], 0]
            hi += on[0]
            n = hi - lo
            sizes[t + 1] = n
            empty = n == 0
            top = np.where(empty, G, mem[rows, np.maximum(hi - 1, 0)])
            front = np.where(empty, G, mem[rows, lo])
            read = ([top] if kind == "stack" else [front] if kind == "queue" else [top, front])
            r_new = torch.cat([vecs[torch.from_numpy(e).to(x.device)] for e in read], 1)
            r = torch.where(valid[:, t].unsqueeze(1), r_new, r) if padded[t] else r_new
            h, c = h_new, c_new
            hs[t + 1], rs[t + 1] = h, r
            if cells is None:                  # the live cells, bottom (front) first
                w = int(n.max(initial=0))
                pos = np.minimum(lo[:, None] + np.arange(w), 2 * T + 1)
                snaps.append(np.where(pos < hi[:, None], mem[rows[:, None], pos], -1))
            else:                              # the top cells, top first
                pos = hi[:, None] - 1 - np.arange(cells)
                end = np.where(pos >= lo[:, None], mem[rows[:, None], np.maximum(pos, 0)], -1)
                if kind != "stack":            # then the bottom cells, bottom first; offset
                    pos = lo[:, None] + np.arange(cells)
                    bot = np.where(pos < hi[:, None],
                                   mem[rows[:, None], np.minimum(pos, 2 * T + 1)], -1)
                    end = np.concatenate([end, bot, (lo - (T + 1))[:, None]], 1)
                snaps.append(end)
        # the conditions that make the discrete store exact, on every valid step at once
        ops = np.array([self.store.actions(op) for op in self.store.ops], dtype=np.float64)
        exact = (acts[..., None, :] == ops).all(-1).any(-1) & np.isfinite(vals).all(-1)
        for k in range(S):
            pushing = acts[..., 2 * k] == 1
            sk = syms[..., k]
            code_ok = (sk >= 0) & (vals[..., k * m:(k + 1) * m]
                                   == vecs_np[np.maximum(sk, 0)]).all(-1)
            exact &= ~pushing | code_ok
        if not exact[valid_np.T].all():
            return None
        W = (max(s.shape[1] for s in snaps) if cells is None
             else cells if kind == "stack" else 2 * cells + 1)
        hs_t, rs_t = hs.transpose(0, 1), rs.transpose(0, 1)
        Hr = hs_t.shape[2] + rs_t.shape[2]
        states = torch.full((B, T + 1, Hr + 1 + W), -1.0, dtype=x.dtype, device="cpu")
        states[..., :Hr] = torch.cat([hs_t, rs_t], 2).cpu()
        tail = states.numpy()                      # a view: filled in place
        tail[..., Hr] = sizes.T
        for t, snap in enumerate(snaps):
            tail[:, t, Hr + 1:Hr + 1 + snap.shape[1]] = snap
        states = states.to(x.device)
        return states, self.readout(torch.tanh(self.out(hs_t)))

    @torch.no_grad()
    def weight_blocks(self) -> dict[str, np.ndarray]:
        """The weights by meaning, as float64 numpy arrays (detached copies): ``embedding``
        (K, E); ``w_ih`` (G·H, E + S·width) and ``w_hh`` (G·H, H) of the controller (G = 4 LSTM
        gates in torch's order i, f, g, o, or 1), ``b_ih``, ``b_hh``; ``h0`` (and ``c0`` for
        the LSTM); the heads ``push_w``/``push_b`` (d_t), ``pop_w``/``pop_b`` (u_t),
        ``value_w``/``value_b`` (v_t), ``out_w``/``out_b`` (o_t) and ``readout_w``/``readout_b``
        (the logits W_y o_t + b_y)."""
        arr = lambda t: t.detach().cpu().double().numpy().copy()
        out = {"embedding": arr(self.embedding.weight), "w_ih": arr(self.cell.weight_ih),
               "w_hh": arr(self.cell.weight_hh), "b_ih": arr(self.cell.bias_ih),
               "b_hh": arr(self.cell.bias_hh), "h0": arr(self.h0)}
        if self.controller_kind == "lstm":
            out["c0"] = arr(self.c0)
        for name, layer in (("push", self.push), ("pop", self.pop), ("value", self.value),
                            ("out", self.out), ("readout", self.readout)):
            out[f"{name}_w"], out[f"{name}_b"] = arr(layer.weight), arr(layer.bias)
        return out

    def forward_window(self, ids: torch.Tensor, cells: int = 3
                       ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`forward` in O(1) per step with the store's ends only, or None where that is not
        exact; logits as `forward`. states[t] = [h_t; r_t; n_t; window_t] with n_t the number of
        cells and window_t, for a stack, the symbol ids of the top ``cells`` cells, top first (−1
        below the bottom); for a queue or a deque, the top (back) ``cells`` cells top first, the
        bottom (front) ``cells`` cells bottom first (−1 past the other end), then the bottom
        end's offset: cells popped from the bottom minus cells pushed there since step 0. That is
        the layout of `pdanet.automata.store.StoreTransducer.run_batch_window`'s ``store_top``,
        ``store_bottom`` and ``offset``, which `pdanet.verify` compares on long strings.

        Why it is exact (the argument of `pdanet.constructions.controllers.StackRNN.
        forward_window`): while at every valid step d_t and u_t are each exactly 0 or 1 and a
        pushed v_t (d_t = 1) is exactly the ±1 vector 2·code − 1 of one store symbol, every
        strength of Eqs. 1–2 stays exactly 0 or 1, so the stack step is a discrete one (pop the
        top live cell when u = 1, then push v when d = 1), and each weight of Eq. 3 is exactly 0
        or 1, so r_t is exactly the top live cell's vector (0 when empty). This method keeps the
        stack as symbol ids with a size per row (`SymbolStack`), runs the same controller and
        heads as `forward` on the same inputs, and checks those conditions at every valid step
        at once; when one fails anywhere it returns None (then only `forward` says what the
        network does). The run is `forward_decoded`'s. The queue (Eqs. 1, 4–5) and the deque
        (Eqs. 6–11) are discrete under the same conditions: each strength stays 0 or 1, a step
        pops the live cell at the front (queue; deque: at the end u_top / u_bot names) and
        pushes at the back (deque: at the end d_top / d_bot names), and the readings are
        exactly the end cells' vectors (0 when empty); the store is kept as symbol ids in a
        buffer with room for T cells on either side. InputError for ``cells`` that is not an
        integer ≥ 1."""
        if isinstance(cells, bool) or not isinstance(cells, (int, np.integer)) or cells < 1:
            raise InputError(f"cells must be an integer ≥ 1, got {cells!r}")
        return self._discrete(torch.as_tensor(ids), int(cells))


# --- the machine, factored ---------------------------------------------------------------------
@dataclass(frozen=True)
class GrefenstetteUnit:
    """Control unit: "in state ``c``, read a symbol of input class ``A`` and a reading passing
    ``test``" (``("any",)``, ``("empty",)``, ``("nonempty",)``, ``("code", X)`` or
    ``("variant", v)``: any symbol of variant v) → state ``c2``,
    with store op ``op``, the pushed value per slot and the output, each None, ``("in",)`` (the
    input symbol), ``("rd", slot)`` (the symbol read at that slot), ``("reg",)`` (the register's
    symbol, register path) or ``("c", index)`` (pushed values end with their variant); ``reg``
    the next register (register path; None: the next state holds none)."""

    c: int
    A: int
    test: tuple
    c2: int
    op: str
    push: tuple
    out: tuple | None
    reg: tuple | None = None


@dataclass(frozen=True)
class GrefenstetteController(ControllerMemory):
    """`ControllerMemory` of a compiled `GrefenstetteRNN`: ``units[j]`` is hidden unit j + 1
    (unit 0 starts); ``classes[a]`` the input class of symbol a; ``tests[j]`` the reading test of
    unit j; ``data_units`` / ``reading_units`` the hidden ranges of the copied code bits;
    ``factoring``: ``"data_path"``, ``"registers"`` or ``"none"``; ``gated_units`` the hidden
    indices of the gated copies and ``registers`` the tags that hold a symbol (register path)."""

    classes: tuple = ()
    tests: tuple = ()
    data_units: tuple = ()
    reading_units: tuple = ()
    factoring: str = "data_path"
    gated_units: tuple = ()
    registers: tuple = ()


def _symbols(machine) -> tuple[list, list, list]:
    """(input symbols, store symbols by code, output symbols) of the machine."""
    if isinstance(machine, StoreTransducer):
        return list(machine.alphabet), list(machine.store_alphabet), list(machine.output_alphabet)
    if isinstance(machine, DeterministicPushdown):
        outs = list(getattr(machine, "output_alphabet", ()) or ())
        return list(machine.alphabet), list(machine.stack_alphabet), outs
    if isinstance(machine, DFA):
        outs = list(machine.output_alphabet) if machine.output_kind == "symbol" else []
        return list(machine.alphabet), [], outs
    return [], [], []


def _view(machine, model: str) -> RealtimeTable:
    cls = type(machine).__name__
    if not isinstance(machine, (StoreTransducer, DeterministicPushdown, DFA)):
        raise CompileError(
            f"{machine!r} ({cls}) is not a real-time deterministic machine; model {model!r} runs "
            "one deterministic store step per symbol. A nondeterministic PDA needs the "
            "nondeterministic stack of DuSell & Chiang (target 'ns_rnn')")
    view = realtime_table(machine)       # names the buffered target for ε-moves
    if view.empty_stack:
        raise CompileError(
            f"{machine!r} accepts by empty stack; in model {model!r} the output o_t is computed "
            "before the store steps and cannot see r_t. Compile it with "
            "pn.compile(m, target='stack_rnn') (its readout reads r_t), or convert it to "
            "final-state acceptance")
    return view


@dataclass(frozen=True)
class _Factored:
    view: RealtimeTable
    classes: np.ndarray           # input symbol → class
    reps: tuple                   # class → a representative symbol
    units: tuple                  # GrefenstetteUnit
    sources: dict                 # head → ("in",) / ("rd", slot) / None
    factoring: str
    reachable: tuple
    data: _Data
    registers: dict | None = None      # register path: tag → {datum: machine state}


@dataclass(frozen=True)
class _Data:
    """Symbol codes by datum: store symbol X has code [1; datum bits; variant bits]; an input
    symbol carries the datum bits of its datum (``in_datum``, −1: none), a data output symbol
    is emitted by its datum bits (``out_datum``, −1: a flag)."""

    codes: np.ndarray             # (G + 1, 1 + db + vb), row G (empty) zero
    db: int
    st_datum: tuple
    st_var: tuple
    in_datum: tuple
    out_datum: tuple
    dcodes: np.ndarray            # (datums, db) 0/1
    vcodes: np.ndarray            # (variants, vb) 0/1


def _bits(n: int, width: int) -> np.ndarray:
    return (np.arange(n)[:, None] >> np.arange(width - 1, -1, -1)[None, :]) & 1


def _data(view: RealtimeTable, machine, links: bool) -> _Data | None:
    """Datums: symbols of the input, store and output alphabets that stand for the same
    vocabulary item — the same object, or (with ``links``) related by a one-to-one map that
    some (state, reading) applies to the input symbol, or (state, input) to the symbol read, to
    push or emit. Store symbols of one datum differ by their *variant*: the set of maps that
    push them. None where two store symbols share datum and variant."""
    ins, gam, outs = _symbols(machine)
    K, G, n_out = view.K, view.G, view.n_out
    parent = list(range(K + G + n_out))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        parent[find(i)] = find(j)

    node: dict = {}
    for i, sym in enumerate(list(ins) + list(gam) + list(outs)):
        if sym in node:
            union(i, node[sym])
        node.setdefault(sym, i)
    roles: dict = {X: set() for X in range(G)}
    for X in range(G):
        if gam[X] in ins:
            roles[X].add(("id",))
    if links:
        maps: dict = {}
        for (p, a, X), (_, out, _, _, y) in view.trans.items():
            if y >= 0:
                maps.setdefault(("push_in", p, X), []).append((a, K + y))
                if X < G:
                    maps.setdefault(("push_rd", p, a), []).append((K + X, K + y))
            if out >= 0:
                maps.setdefault(("out_in", p, X), []).append((a, K + G + out))
                if X < G:
                    maps.setdefault(("out_rd", p, a), []).append((K + X, K + G + out))
        for key, pairs in maps.items():
            if len(pairs) >= 2 and len({v for _, v in pairs}) == len(pairs):   # one-to-one
                for u, v in pairs:
                    union(u, v)
                    if key[0].startswith("push"):
                        roles[v - K].add(key)
    datum_of_root: dict = {}
    st_datum = []
    for X in range(G):
        st_datum.append(datum_of_root.setdefault(find(K + X), len(datum_of_root)))
    role_ids: dict = {}
    st_var = [role_ids.setdefault(frozenset(roles[X]), len(role_ids)) for X in range(G)]
    if len(set(zip(st_datum, st_var))) < G:
        return None
    nd = max(len(datum_of_root), 1)
    db = max(1, int(np.ceil(np.log2(nd))))
    vb = int(np.ceil(np.log2(len(role_ids)))) if len(role_ids) > 1 else 0
    dcodes = _bits(nd, db)
    vcodes = _bits(max(len(role_ids), 1), max(vb, 1))[:, :vb]
    codes = np.zeros((G + 1, 1 + db + vb), dtype=np.int64)
    for X in range(G):
        codes[X] = np.concatenate([[1], dcodes[st_datum[X]], vcodes[st_var[X]]])
    in_datum = tuple(datum_of_root.get(find(a), -1) for a in range(K))
    count: dict = {}
    for o in range(n_out):
        d = datum_of_root.get(find(K + G + o), -1)
        count[d] = count.get(d, 0) + 1
    out_datum = tuple(d if d >= 0 and count[d] == 1 else -1
                      for d in (datum_of_root.get(find(K + G + o), -1) for o in range(n_out)))
    return _Data(codes, db, tuple(st_datum), tuple(st_var), in_datum, out_datum, dcodes, vcodes)


def _factor(view: RealtimeTable, machine, store, sources: bool) -> _Factored:
    """Input classes, reading classes and control units (see the module docstring)."""
    G = view.G
    data = (_data(view, machine, True) if sources else None) or _data(view, machine, False)
    if data is None:           # distinct store objects never share datum and variant
        raise CompileError(f"{machine!r}: store symbols without distinct codes")
    ind = data.in_datum if sources else (-1,) * view.K
    sd, sv, od = data.st_datum, data.st_var, data.out_datum
    deque = view.kind == "deque"
    by_variant: dict = {}
    if data.codes.shape[1] - 1 > data.db:        # variant bits: a reading test may read them
        for X in range(G):
            by_variant.setdefault(sv[X], []).append(X)
    by_variant = {v: tuple(xs) for v, xs in by_variant.items()}

    # a pushed / emitted symbol is a copy of "the symbol read" where its datum is the reading's
    # for every nonempty reading of that (state, input) (at least two), of "the input symbol"
    # where it is the input's for every data input of that (state, reading) (at least two)
    agree_rd: dict = {}
    agree_in: dict = {}
    for (p, a, X), (_, out, _, _, y) in view.trans.items():
        vals = (("push", sd[y] if y >= 0 else -2), ("out", od[out] if out >= 0 else -2))
        if X < G:
            for field, val in vals:
                n, ok = agree_rd.get((field, p, a), (0, True))
                agree_rd[(field, p, a)] = (n + 1, ok and val == sd[X])
        if ind[a] >= 0:
            for field, val in vals:
                n, ok = agree_in.get((field, p, X), (0, True))
                agree_in[(field, p, X)] = (n + 1, ok and val == ind[a])

    def copies(table: dict, key: tuple) -> bool:
        n, ok = table.get(key, (0, False))
        return sources and ok and n >= 2

    def slot(p: int) -> int:
        return 0 if (not deque or view.reads_top[p]) else 1

    def behaviour(p: int, a: int, X: int, mv: tuple) -> tuple:
        p2, out, pe, ue, y = mv
        op = op_of(store, pe, ue)
        if op is None:
            raise CompileError(f"{type(store).__name__} has no one-step op that pops at {pe} and "
                               f"pushes at {ue}; model grefenstette cannot run this move")
        ya = None
        if y >= 0:
            ya = (("in", sv[y]) if ind[a] >= 0 and copies(agree_in, ("push", p, X)) else
                  ("rd", slot(p), sv[y]) if X < G and copies(agree_rd, ("push", p, a))
                  else ("c", y))
        oa = None
        if out >= 0:
            oa = (("in",) if ind[a] >= 0 and copies(agree_in, ("out", p, X)) else
                  ("rd", slot(p)) if X < G and copies(agree_rd, ("out", p, a)) else ("c", out))
        return (p2, op, ya, oa)

    beh = {}
    for (p, a, X), mv in view.trans.items():
        beh[(p, a, X)] = behaviour(p, a, X, mv)
    classes, reps, units, seen = _units(view, {k: mv[0] for k, mv in view.trans.items()}, beh,
                                        by_variant, sv, store)
    heads: dict = {}
    for u in units:
        for s, y in enumerate(u.push):
            if y is not None and y[0] != "c":
                heads.setdefault(("push", s), set()).add(y[:-1])
        if u.out is not None and u.out[0] != "c":
            heads.setdefault(("out",), set()).add(u.out)
    if any(len(v) > 1 for v in heads.values()):
        raise _Conflict
    srcs = {h: next(iter(v)) for h, v in heads.items()}
    factoring = "data_path" if srcs else "none"      # no copied bits: one class per behaviour
    return _Factored(view, classes, reps, tuple(units), srcs, factoring, tuple(sorted(seen)),
                     data)


def _units(view: RealtimeTable, nxt: dict, beh: dict, by_variant: dict, sv: tuple, store
           ) -> tuple[np.ndarray, tuple, list, set]:
    """Input classes (symbols whose behaviour agrees in every state and reading), their
    representatives, the control units and the reachable controller states, from ``beh[(p, a,
    X)] = (p2, op, push, out[, register])`` and ``nxt[(p, a, X)] = p2``."""
    G = view.G
    sig_a: dict = {}
    sig_x: dict = {}
    for (p, a, X), b in beh.items():
        sig_a.setdefault(a, []).append((p, X, b))
        sig_x.setdefault(X, []).append((p, a, b))
    group_a: dict = {}
    classes = np.zeros(view.K, dtype=np.int64)
    for a in range(view.K):
        classes[a] = group_a.setdefault(frozenset(sig_a.get(a, ())), len(group_a))
    group_x: dict = {}
    xclass = np.zeros(G + 1, dtype=np.int64)
    for X in range(G + 1):
        xclass[X] = group_x.setdefault((X == G, frozenset(sig_x.get(X, ()))), len(group_x))
    reps = tuple(int(np.flatnonzero(classes == k)[0]) for k in range(len(group_a)))
    xmembers = [tuple(np.flatnonzero(xclass == k).tolist()) for k in range(len(group_x))]
    xreps = [mem[0] for mem in xmembers]
    # controller states reachable from q0 (through any reading)
    seen, todo = {view.q0}, [view.q0]
    while todo:
        p = todo.pop()
        for A in reps:
            for X in xreps:
                p2 = nxt.get((p, A, X))
                if p2 is not None and p2 not in seen:
                    seen.add(p2)
                    todo.append(p2)
    units = []
    for p in sorted(seen):
        for k, a in enumerate(reps):
            got = [(mem, beh.get((p, a, X))) for mem, X in zip(xmembers, xreps)]
            if all(b is None for _, b in got):
                continue

            def unit(test: tuple, X: int, _p=p, _k=k, _a=a) -> GrefenstetteUnit:
                b = beh[(_p, _a, X)]
                p2, op, ya, oa = b[:4]
                push = tuple(ya if e == store.ops[op][1] and ya is not None else None
                             for e in store.pushes)
                return GrefenstetteUnit(_p, _k, test, p2, op, push, oa,
                                        b[4] if len(b) > 4 else None)

            groups: dict = {}          # readings grouped by this (state, class)'s behaviour
            for (mem, b), X in zip(got, xreps):
                if b is not None:
                    groups.setdefault(b, []).extend(mem)
            if len(groups) == 1 and sum(len(mem) for mem in groups.values()) == G + 1:
                units.append(unit(("any",), xreps[0]))
                continue
            for mem in groups.values():
                rest = tuple(sorted(x for x in mem if x != G))
                if G in mem:
                    units.append(unit(("empty",), G))
                if rest and len(rest) == G and G > 1:
                    units.append(unit(("nonempty",), rest[0]))
                elif len(rest) > 1 and rest == by_variant.get(sv[rest[0]]):
                    units.append(unit(("variant", sv[rest[0]]), rest[0]))
                else:
                    units += [unit(("code", x), x) for x in rest]
    return classes, reps, units, seen


def _data_registers(view: RealtimeTable, machine) -> _Data | None:
    """Datums of the register path: the symbols (input, store, output: the same object) that
    some state ``(tag, x)`` holds or the store holds; store symbols of one datum differ by
    their variant (whether they are an input symbol). None where two store symbols would share
    a code."""
    ins, gam, outs = _symbols(machine)
    held = {q[1] for q in machine.states if isinstance(q, tuple) and len(q) == 2}
    items: dict = {}
    for x in list(gam) + [a for a in ins if _hashable_in(a, held)]:
        items.setdefault(x, len(items))
    G = view.G
    st_datum = tuple(items[x] for x in gam)
    st_var = tuple(int(x not in ins) for x in gam)
    if len(set(zip(st_datum, st_var))) < G:
        return None
    nd = max(len(items), 1)
    db = max(1, int(np.ceil(np.log2(nd))))
    nv = len(set(st_var)) if G else 1
    vb = 1 if nv > 1 else 0
    dcodes = _bits(nd, db)
    vcodes = _bits(2, 1)[:, :vb] if vb else np.zeros((2, 0), dtype=np.int64)
    codes = np.zeros((G + 1, 1 + db + vb), dtype=np.int64)
    for X in range(G):
        codes[X] = np.concatenate([[1], dcodes[st_datum[X]], vcodes[st_var[X]]])
    in_datum = tuple(items.get(a, -1) if _hashable_in(a, items) else -1 for a in ins)
    out_datum = tuple(items.get(o, -1) if _hashable_in(o, items) else -1 for o in outs)
    return _Data(codes, db, st_datum, st_var, in_datum, out_datum, dcodes, vcodes)


def _hashable_in(x, container) -> bool:
    try:
        return x in container
    except TypeError:
        return False


def _register_families(machine, view: RealtimeTable, data: _Data) -> dict | None:
    """States that hold one vocabulary item: ``(tag, x)`` with x an input symbol that has a
    datum, two or more per tag with distinct datums. {tag index (the smallest member's state
    index): {datum: state index}}, or None where there is no such family, the start state
    holds a symbol, or a tag's members disagree on acceptance."""
    states = {machine.state_index(q): q for q in machine.states}
    ins, _, _ = _symbols(machine)
    datum_of = {x: data.in_datum[i] for i, x in enumerate(ins) if data.in_datum[i] >= 0}
    fam: dict = {}
    for p, q in states.items():
        if isinstance(q, tuple) and len(q) == 2:
            try:
                d = datum_of.get(q[1])
            except TypeError:          # an unhashable part: not a symbol
                d = None
            if d is not None:
                fam.setdefault(("tag", q[0]), {}).setdefault(d, []).append(p)
    out: dict = {}
    for members in fam.values():
        if len(members) < 2 or any(len(ps) > 1 for ps in members.values()):
            continue
        flat = {d: ps[0] for d, ps in members.items()}
        if view.q0 in flat.values():
            return None
        if view.output == "accept" and len({view.accepting[p] for p in flat.values()}) > 1:
            return None
        out[min(flat.values())] = flat
    return out or None


def _sources(c: frozenset, push: bool) -> set:
    """A head's valid descriptions with a pushed value's variant dropped (constants kept)."""
    return {x[:-1] if push and x[0] != "c" else x for x in c}


def _agreement(desc: dict, ind: tuple, G: int) -> tuple[dict, dict, dict]:
    """Per head ``i`` (4: next register, 5: output, 6: push) of ``desc[(tag, a, X)]`` (each
    entry's valid descriptions, `_sources`): ``count[(i, tag, d)]``, how many of the tag's
    moves d is valid on; ``col[(i, tag, X)]``, the descriptions valid on every data input of
    (tag, reading X); ``row[(i, tag, a)]``, those valid on every nonempty reading of (tag,
    input a)."""
    count: dict = {}
    col: dict = {}
    row: dict = {}
    for (tag, a, X), old in desc.items():
        for i in (4, 5, 6):
            if old[i] is None:
                continue
            src = _sources(old[i], i == 6)
            for x in src:
                count[(i, tag, x)] = count.get((i, tag, x), 0) + 1
            if ind[a] >= 0:
                k = (i, tag, X)
                col[k] = col[k] & src if k in col else src
            if X < G:
                k = (i, tag, a)
                row[k] = row[k] & src if k in row else src
    return count, col, row


_KIND_ORDER = {"reg": 0, "in": 1, "rd": 2, "c": 3}


def _choose(c: frozenset, push: bool, agree: tuple, key: tuple, data_input: bool,
            nonempty: bool):
    """The description of head ``key[0]`` at the move ``key[1:] = (tag, a, X)`` among its
    valid ones ``c`` (each right for every member of the tag), chosen alike across inputs and
    readings as `_factor` does, so that input symbols and readings keep sharing behaviours:
    "the register" where valid; else one valid on every data input of (tag, X) (the column:
    inputs then agree there), else one valid on every nonempty reading of (tag, a) (the row:
    readings then agree), else any; among several, the one valid on the most of the tag's
    moves (ties: input, reading, constant). So bigram flipping's target side emits "the symbol
    read" on every teacher-forced input, not "the input symbol" where the two coincide. None
    where ``c`` is empty."""
    count, col, row = agree
    i, tag, a, X = key
    src = _sources(c, push)
    if ("reg",) in src:
        best = ("reg",)
    else:
        pool = (col.get((i, tag, X), set()) if data_input else set()) or \
            (row.get((i, tag, a), set()) if nonempty else set()) or src
        if not pool:
            return None
        best = min(pool, key=lambda x: (-count.get((i, tag, x), 0), _KIND_ORDER[x[0]], x))
    if not push or best[0] == "c":
        return best
    return next(x for x in c if x[:-1] == best)


def _factor_registers(view: RealtimeTable, machine, store) -> _Factored | None:
    """The register path (see the module docstring): the machine's states ``(tag, x)`` become
    one controller state per tag and a register holding x's datum bits. Every move of a tag is
    described relative to the step — the next register, the pushed datum and the emitted datum
    each "the register" (``reg``), "the input symbol" (``in``), "the symbol read" (``rd``) or a
    constant — the same for all of the tag's members; None where that fails (then the states are
    not factored)."""
    data = _data_registers(view, machine)
    if data is None:
        return None
    fams = _register_families(machine, view, data)
    if fams is None:
        return None
    G = view.G
    sd, sv, od, ind = data.st_datum, data.st_var, data.out_datum, data.in_datum
    tag_of: dict = {p: (p, -1) for p in range(view.Q)}
    for tag, members in fams.items():
        for d, p in members.items():
            tag_of[p] = (tag, d)
    deque = view.kind == "deque"

    def slot(p: int) -> int:
        return 0 if (not deque or view.reads_top[p]) else 1

    def cands(value: int, d: int, a: int, X: int, p: int) -> set:
        """The descriptions of a datum ``value`` at the move (p, a, X) of register d."""
        c = set()
        if value < 0:
            return c
        if d >= 0 and value == d:
            c.add(("reg",))
        if ind[a] >= 0 and value == ind[a]:
            c.add(("in",))
        if X < G and value == sd[X]:
            c.add(("rd", slot(p)))
        return c

    ops: dict = {}
    desc: dict = {}                    # (tag, a, X) → the move's description
    replacing = set()                  # a stack's noop on top X is a replace of X by X
    if view.kind == "stack":
        replacing = {(tag_of[p][0], a, X) for (p, a, X), mv in view.trans.items()
                     if mv[2] == "top" and mv[3] == "top"}
    for (p, a, X), (p2, out, pe, ue, y) in view.trans.items():
        tag, d = tag_of[p]
        if pe is None and ue is None and X < G and (tag, a, X) in replacing:
            pe, ue, y = "top", "top", X
        op = ops.get((pe, ue), False)
        if op is False:
            op = ops[(pe, ue)] = op_of(store, pe, ue)
        if op is None:
            return None
        tag2, d2 = tag_of[p2]
        r = frozenset(cands(d2, d, a, X, p) | {("c", d2)}) if d2 >= 0 else None
        o = None if out < 0 else frozenset(cands(od[out], d, a, X, p) | {("c", out)})
        ya = None if y < 0 else frozenset({c + (sv[y],) for c in cands(sd[y], d, a, X, p)}
                                          | {("c", y)})
        key = (tag, a, X)
        old = desc.get(key)
        if old is None:
            desc[key] = [1, tag2, op, slot(p), r, o, ya]
            continue
        if old[1:4] != [tag2, op, slot(p)]:
            return None                # the tag's members move apart
        old[0] += 1
        for i, new in ((4, r), (5, o), (6, ya)):
            if (old[i] is None) != (new is None):
                return None
            if new is not None and old[i] != new:
                old[i] = old[i] & new
    for (tag, _, _), old in desc.items():
        if old[0] != len(fams.get(tag, (0,))):
            return None                # defined for some members only
    agree = _agreement(desc, ind, G)
    beh: dict = {}
    nxt: dict = {}
    for (tag, a, X), (n, tag2, op, _, r, o, ya) in desc.items():
        fields = []
        for i, c in ((4, r), (5, o), (6, ya)):
            if c is None:
                fields.append(None)
                continue
            best = _choose(c, i == 6, agree, (i, tag, a, X), ind[a] >= 0, X < G)
            if best is None:
                return None
            fields.append(best)
        r_, o_, y_ = fields
        if r_ is not None and r_[0] == "c" and tag2 not in fams:
            return None
        if tag2 in fams and r_ is None:
            return None
        if r_ is not None and r_[0] == "c":
            r_ = ("c", r_[1])          # a constant datum
        beh[(tag, a, X)] = (tag2, op, y_, o_, r_)
        nxt[(tag, a, X)] = tag2
    by_variant: dict = {}
    if data.codes.shape[1] - 1 > data.db:
        for X in range(G):
            by_variant.setdefault(sv[X], []).append(X)
    by_variant = {v: tuple(xs) for v, xs in by_variant.items()}
    classes, reps, units, seen = _units(view, nxt, beh, by_variant, sv, store)
    srcs: dict = {}
    return _Factored(view, classes, reps, tuple(units), srcs, "registers", tuple(sorted(seen)),
                     data, fams)


class _Conflict(Exception):
    """One head would copy from two sources: factoring is switched off."""


def factor(machine, model: str = "grefenstette_lstm") -> _Factored:
    """The factored controller of ``machine`` (the data-path factoring where every head copies
    from at most one source, else one class per symbol)."""
    view = _view(machine, model)
    store = STORES[view.kind]()
    reg = _factor_registers(view, machine, store)
    if reg is not None:
        return reg
    try:
        return _factor(view, machine, store, True)
    except _Conflict:
        return _factor(view, machine, store, False)


# --- weights ------------------------------------------------------------------------------------
def _layout(f: _Factored, mb: int) -> dict:
    """Hidden indices: start 0, control units 1..U, then data units, then reading units."""
    U = len(f.units)
    srcs = set(f.sources.values())
    nxt = 1 + U
    data = ()
    if ("in",) in srcs:
        data, nxt = tuple(range(nxt, nxt + mb)), nxt + mb
    reading = {}
    for s in sorted(x[1] for x in srcs if x[0] == "rd"):
        reading[s], nxt = tuple(range(nxt, nxt + mb)), nxt + mb
    return {"H": nxt, "data": data, "reading": reading}


_D = 16     # weights are int64 sixteenths (exact dyadic rationals; no per-entry Fractions)


def _ew(arr: np.ndarray) -> ExactWeight:
    return ExactWeight(np.asarray(arr, dtype=np.int64), _D, True)


class _Blocks:
    """The weight blocks both compiled paths share (`_weights`: data path or no factoring;
    `_weights_registers`: registers), each built by one method. Units read ind(h) = (ka·h + kb)/16
    of a unit h: κ·h for the LSTM (ka = 21), (h + 1)/2 for the Elman controller."""

    def __init__(self, f: _Factored, lstm: bool, H: int):
        self.f, self.lstm, self.H = f, lstm, H
        self.view, self.units, self.data = f.view, f.units, f.data
        self.store = STORES[self.view.kind]()
        self.S = self.store.slots
        self.m = self.data.codes.shape[1]
        self.mb, self.db = self.m - 1, self.data.db
        self.sgn = 2 * self.data.codes[:, 1:] - 1             # ±1 code bits of each store symbol
        self.dsgn = 2 * self.data.dcodes - 1                  # ±1 datum bits
        self.vsgn = 2 * self.data.vcodes - 1                  # ±1 variant bits
        self.nA = len(f.reps)
        self.E = self.nA + self.db
        self.inp = self.E + self.S * self.m
        self.ka, self.kb = (21, 0) if lstm else (8, 8)        # 21/16 = κ; 1/2, 1/2

    def embedding(self, width: int) -> ExactWeight:
        """§3.4's input i_t: [class one-hot; ±1 datum bits of the symbol (0: none)]."""
        emb = np.zeros((self.view.K, width), dtype=np.int64)
        emb[np.arange(self.view.K), self.f.classes] = 1
        for a, d in enumerate(self.data.in_datum):
            if d >= 0:
                emb[a, self.nA:self.nA + self.db] = self.dsgn[d]
        return ExactWeight.of(emb, scaled=False)

    def controller(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Zero (W_ih, W_hh, bias) of the controller on i_t ⊕ r_{t−1} (§3.4), the start unit's
        bias set (on only in h_0)."""
        W_ih = np.zeros((self.H, self.inp), dtype=np.int64)
        W_hh = np.zeros((self.H, self.H), dtype=np.int64)
        bias = np.zeros(self.H, dtype=np.int64)
        bias[0] = -8
        return W_ih, W_hh, bias

    def predecessors(self) -> dict:
        """State → the units (start 0, control units j + 1) whose firing enters it."""
        into: dict = {}
        for j, u in enumerate(self.units):
            into.setdefault(u.c2, []).append(j + 1)
        into.setdefault(self.view.q0, []).append(0)
        return into

    def control(self, W_ih, W_hh, bias, into: dict, j: int) -> int:
        """Control unit j's row, ``Σ_{i → c} ind(h_{t−1,i}) + x_t[A] + m_R(r_{t−1})`` (module
        docstring; controller input i_t ⊕ r_{t−1}, §3.4) without the − (n − 1/2) threshold;
        returns n, the number of terms."""
        view, u, i, D = self.view, self.units[j], j + 1, _D
        m, mb, db = self.m, self.mb, self.db
        n = 2                                                     # predecessor, class
        for src in into.get(u.c, ()):
            W_hh[i, src] = self.ka
            bias[i] += self.kb
        W_ih[i, u.A] = D
        sl = 0 if (view.kind != "deque" or view.reads_top[u.c]) else 1
        base = self.E + sl * m
        kind = u.test[0]
        if kind == "empty":                                       # 1 − presence
            W_ih[i, base], bias[i], n = -D, bias[i] + D, 3
        elif kind == "nonempty":                                  # presence
            W_ih[i, base], n = D, 3
        elif kind == "code":                                      # Σ sgn·bits − mb + 1
            W_ih[i, base + 1:base + m] = D * self.sgn[u.test[1]]
            bias[i] += D * (1 - mb)
            n = 3
        elif kind == "variant":                                   # Σ vsgn·variant bits − vb + 1
            W_ih[i, base + 1 + db:base + m] = D * self.vsgn[u.test[1]]
            bias[i] += D * (1 - (mb - db))
            n = 3
        return n

    def cell(self, W_ih, W_hh, bias, copies: np.ndarray) -> dict[str, ExactWeight]:
        """The cell's weights and h_0 (a parameter, §3.4; c_0 = 0). Elman: h = tanh(βz). LSTM
        (gates i, f, g, o): i = 1, f = 0; a unit in ``copies`` has g = tanh(βz), o = 1, every
        other g = 1, o = σ(βz)."""
        H, D = self.H, _D
        w: dict[str, ExactWeight] = {}
        if self.lstm:
            Wi = np.zeros((4 * H, self.inp), dtype=np.int64)
            Wh = np.zeros((4 * H, H), dtype=np.int64)
            bb = np.zeros(4 * H, dtype=np.int64)
            bb[:H], bb[H:2 * H] = D, -D
            ctrl = ~copies
            Wi[3 * H:][ctrl], Wh[3 * H:][ctrl], bb[3 * H:][ctrl] = W_ih[ctrl], W_hh[ctrl], bias[ctrl]
            bb[2 * H:3 * H][ctrl] = D
            Wi[2 * H:3 * H][copies], Wh[2 * H:3 * H][copies] = W_ih[copies], W_hh[copies]
            bb[2 * H:3 * H][copies] = bias[copies]
            bb[3 * H:][copies] = D
            w["cell.weight_ih"], w["cell.weight_hh"] = _ew(Wi), _ew(Wh)
            w["cell.bias_ih"] = _ew(bb)
            w["cell.bias_hh"] = ExactWeight.of(np.zeros(4 * H, dtype=np.int64))
            h0 = np.full(H, Fraction(0), dtype=object)
            h0[0] = 1 / KAPPA
            w["h0"] = ExactWeight.of(h0, scaled=False)
            w["c0"] = ExactWeight.of(np.zeros(H, dtype=np.int64), scaled=False)
        else:
            w["cell.weight_ih"], w["cell.weight_hh"] = _ew(W_ih), _ew(W_hh)
            w["cell.bias_ih"] = _ew(bias)
            w["cell.bias_hh"] = ExactWeight.of(np.zeros(H, dtype=np.int64))
            h0 = -np.ones(H, dtype=np.int64)
            h0[0] = 1
            w["h0"] = ExactWeight.of(h0, scaled=False)
        return w

    def head(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((rows, self.H), dtype=np.int64), np.zeros(rows, dtype=np.int64)

    def add_ind(self, Wm, bv, r: int, i: int, coef) -> None:
        """Row r += coef · ind(h_i)."""
        Wm[r, i] += self.ka * coef
        bv[r] += self.kb * coef

    def store_heads(self, copy) -> dict[str, np.ndarray]:
        """d_t, u_t, v_t of §3.4 (sigmoid(W_d o'_t + b_d), sigmoid(W_u o'_t + b_u),
        tanh(W_v o'_t + b_v)) per slot, from the control units; ``copy(Wv, bv, r0, j, src)`` (or
        None) adds unit j's copied pushed datum (source ``src``) at rows r0…"""
        S, m, mb, db = self.S, self.m, self.mb, self.db
        store, chan = self.store, self.store.channels
        Wd, bd = self.head(S)
        Wu, bu = self.head(S)
        bd[:], bu[:] = -8, -8
        Wv, bv = self.head(S * m)
        bv[[s * m for s in range(S)]] = -_D
        for j, u in enumerate(self.units):
            act = store.actions(u.op)
            for s in range(S):
                d_ch, u_ch = (("push", "pop") if S == 1 else
                              (f"push_{store.pushes[s]}", f"pop_{store.pushes[s]}"))
                self.add_ind(Wd, bd, s, j + 1, act[chan.index(d_ch)])
                self.add_ind(Wu, bu, s, j + 1, act[chan.index(u_ch)])
                y = u.push[s]
                if y is None:
                    continue
                self.add_ind(Wv, bv, s * m, j + 1, 2)
                if y[0] == "c":
                    for k in range(mb):
                        self.add_ind(Wv, bv, s * m + 1 + k, j + 1, 2 * int(self.sgn[y[1], k]))
                    continue
                if copy is not None:                              # the datum is copied; the
                    copy(Wv, bv, s * m + 1, j, y[:-1])            # variant is the unit's
                for k in range(mb - db):
                    self.add_ind(Wv, bv, s * m + 1 + db + k, j + 1, 2 * int(self.vsgn[y[-1], k]))
        return {"push": (Wd, bd), "pop": (Wu, bu), "value": (Wv, bv)}

    def output_head(self, copy, info: dict) -> tuple[dict, int]:
        """o_t = tanh(W_o o'_t + b_o) (§3.4) and the readout W_y o_t + b_y (§4.3's softmax
        logits): an acceptance bit, or the output's datum bits (``copy(Wo, bo, 0, j, src)``, or
        None, adds unit j's copied emitted datum) plus one flag per output symbol that is no
        datum's only output symbol, and "none". Returns the blocks and O."""
        view, db, dsgn, D = self.view, self.db, self.dsgn, _D
        if view.output == "accept":
            Wo, bo = self.head(1)
            bo[0] = -D
            for j, u in enumerate(self.units):
                if view.accepting[u.c2]:
                    self.add_ind(Wo, bo, 0, j + 1, 2)
            if view.accepting[view.q0]:
                self.add_ind(Wo, bo, 0, 0, 2)
            Wy = np.array([[1]], dtype=np.int64)
            by = np.zeros(1, dtype=np.int64)
            return {"out": (Wo, bo), "readout": (Wy, by)}, 1
        od = self.data.out_datum
        flags = [o for o in range(view.n_out) if od[o] < 0] + [view.n_out]   # + "none"
        fpos = {o: k for k, o in enumerate(flags)}
        ob = db if any(x >= 0 for x in od) else 0
        O = ob + len(flags)
        Wo, bo = self.head(O)
        bo[ob:] = -D
        self.add_ind(Wo, bo, ob + fpos[view.n_out], 0, 2)               # start: "none"
        for j, u in enumerate(self.units):
            if u.out is None:
                self.add_ind(Wo, bo, ob + fpos[view.n_out], j + 1, 2)
            elif u.out[0] != "c":
                if copy is not None:
                    copy(Wo, bo, 0, j, u.out)
            elif od[u.out[1]] < 0:
                self.add_ind(Wo, bo, ob + fpos[u.out[1]], j + 1, 2)
            else:
                for k in range(db):
                    self.add_ind(Wo, bo, k, j + 1, 2 * int(dsgn[od[u.out[1]], k]))
        Wy = np.zeros((view.n_out + 1, O), dtype=object)
        Wy[:] = Fraction(0)
        by = np.full(view.n_out + 1, Fraction(0), dtype=object)
        for o in range(view.n_out):
            if od[o] >= 0:
                Wy[o, :ob] = [Fraction(int(x)) for x in dsgn[od[o]]]
        for o in flags:
            Wy[o, ob + fpos[o]] = Fraction(ob + 2, 2)
            by[o] = Fraction(ob + 2, 2)
        info["output_flags"] = len(flags)
        return {"out": (Wo, bo), "readout": (Wy, by)}, O

    @staticmethod
    def finish(w: dict, heads: dict) -> None:
        """Adds the head blocks to ``w`` (the readout exact and unscaled, the others sixteenths
        times β)."""
        for name in ("push", "pop", "value", "out"):
            W, b = heads[name]
            w[f"{name}.weight"], w[f"{name}.bias"] = _ew(W), _ew(b)
        Wy, by = heads["readout"]
        w["readout.weight"] = ExactWeight.of(Wy, scaled=False)
        w["readout.bias"] = ExactWeight.of(by, scaled=False)


def _weights(f: _Factored, lstm: bool) -> tuple[dict, dict]:
    """The data path's (and the unfactored) weights (module docstring)."""
    lay = _layout(f, f.data.db)
    b = _Blocks(f, lstm, lay["H"])
    H, E, m = b.H, b.E, b.m
    kbit = 21 if lstm else 16                                    # a copied bit = kbit/16·h
    into = b.predecessors()
    W_ih, W_hh, bias = b.controller()
    tests = []
    for j, u in enumerate(b.units):
        n = b.control(W_ih, W_hh, bias, into, j)
        bias[j + 1] -= 8 * (2 * n - 1)
        tests.append(u.test)
    for k, i in enumerate(lay["data"]):                          # data units copy x_t's bits
        W_ih[i, b.nA + k] = _D
    for s, idx in lay["reading"].items():                        # reading units copy r_{t−1}'s
        for k, i in enumerate(idx):
            W_ih[i, E + s * m + 1 + k] = _D
    w: dict[str, ExactWeight] = {"embedding.weight": b.embedding(max(E, 1))}
    copies = np.zeros(H, dtype=bool)
    copies[list(lay["data"]) + [i for idx in lay["reading"].values() for i in idx]] = True
    w.update(b.cell(W_ih, W_hh, bias, copies))

    def add_bits(Wm, r0: int, src: tuple | None) -> None:
        if src is None:
            return
        idx = lay["data"] if src == ("in",) else lay["reading"][src[1]]
        for k, i in enumerate(idx):
            Wm[r0 + k, i] += kbit

    heads = b.store_heads(None)
    Wv = heads["value"][0]
    for s in range(b.S):
        add_bits(Wv, s * m + 1, f.sources.get(("push", s)))
    info: dict[str, Any] = {}
    out, O = b.output_head(None, info)
    if b.view.output != "accept" and any(x >= 0 for x in b.data.out_datum):
        add_bits(out["out"][0], 0, f.sources.get(("out",)))
    heads.update(out)
    b.finish(w, heads)
    info.update(H=H, E=max(E, 1), O=O, layout=lay, tests=tuple(tests))
    return w, info


def _copy_src(desc: tuple | None, push: bool = False) -> tuple | None:
    """The copied source of a head's description (None: nothing, or a constant)."""
    if desc is None or desc[0] == "c":
        return None
    return desc[:-1] if push else desc


def _layout_registers(f: _Factored) -> dict:
    """Register path: start 0, control units 1..U, then per (unit j, copied source) the datum's
    bits — *gated copies*, on iff unit j fires and the source's bit is 1."""
    db = f.data.db
    nxt = 1 + len(f.units)
    gated: dict = {}
    for j, u in enumerate(f.units):
        srcs = {_copy_src(u.reg), _copy_src(u.out)} | {_copy_src(y, True) for y in u.push}
        for src in sorted(x for x in srcs if x is not None):
            gated[(j, src)], nxt = tuple(range(nxt, nxt + db)), nxt + db
    return {"H": nxt, "data": (), "reading": {}, "gated": gated}


def _weights_registers(f: _Factored, lstm: bool) -> tuple[dict, dict]:
    """The register path's weights (module docstring); the scale is that of `_weights`."""
    lay = _layout_registers(f)
    b = _Blocks(f, lstm, lay["H"])
    gated, data, db = lay["gated"], b.data, b.db
    ka, kb, E, m = b.ka, b.kb, b.E, b.m
    into = b.predecessors()
    holders: list = [[] for _ in range(db)]      # bit k of the register after a step
    for j, u in enumerate(b.units):
        if u.reg is None:
            continue
        if u.reg[0] == "c":
            for k in range(db):
                if data.dcodes[u.reg[1], k]:
                    holders[k].append(j + 1)
        else:
            for k, i in enumerate(gated[(j, u.reg)]):
                holders[k].append(i)
    W_ih, W_hh, bias = b.controller()
    tests = []
    for j, u in enumerate(b.units):
        i = j + 1
        n = b.control(W_ih, W_hh, bias, into, j)
        tests.append(u.test)
        for (jj, src), idx in gated.items():                      # gated copies: n + 1 terms
            if jj != j:
                continue
            for k, g in enumerate(idx):
                W_ih[g], W_hh[g], bias[g] = W_ih[i], W_hh[i], bias[i] - 8 * (2 * n + 1)
                if src == ("in",):                                # x_t's bit, (x + 1)/2
                    W_ih[g, b.nA + k] += 8
                    bias[g] += 8
                elif src[0] == "rd":                              # r_{t−1}'s bit, (r + 1)/2
                    W_ih[g, E + src[1] * m + 1 + k] += 8
                    bias[g] += 8
                else:                                             # the register's bit
                    for h in holders[k]:
                        W_hh[g, h] += ka
                        bias[g] += kb
        bias[i] -= 8 * (2 * n - 1)
    w: dict[str, ExactWeight] = {"embedding.weight": b.embedding(E)}
    w.update(b.cell(W_ih, W_hh, bias, np.zeros(b.H, dtype=bool)))   # every unit: g = 1

    def add_copy(Wm, bv, r0: int, j: int, src: tuple) -> None:
        """Rows r0… = 2·(gated bit) − 1 while unit j fires: ±1, the copied datum's bits."""
        for k, g in enumerate(gated[(j, src)]):
            b.add_ind(Wm, bv, r0 + k, g, 2)
            b.add_ind(Wm, bv, r0 + k, j + 1, -1)

    heads = b.store_heads(add_copy)
    info: dict[str, Any] = {}
    out, O = b.output_head(add_copy, info)
    heads.update(out)
    b.finish(w, heads)
    info.update(H=b.H, E=E, O=O, layout=lay, tests=tuple(tests), holders=tuple(map(tuple, holders)))
    return w, info


def _register_states(decode, f: _Factored, winfo: dict, lstm: bool):
    """A decoder of the register path: ``decode`` gives the tag (its smallest member's index)
    as ``state``; a tag that holds a symbol becomes the member whose datum the register's bits
    spell (−1 where no member has it)."""
    H, db = winfo["H"], f.data.db
    holders = winfo["holders"]
    table = np.full((f.view.Q, 1 << db), -1, dtype=np.int64)
    for tag, members in f.registers.items():
        for d, p in members.items():
            table[tag, d] = p
    fam = np.zeros(f.view.Q + 1, dtype=bool)
    fam[list(f.registers)] = True
    pow2 = 1 << np.arange(db - 1, -1, -1, dtype=np.int64)

    def run(states: np.ndarray) -> dict[str, np.ndarray]:
        out = decode(states)
        h = np.nan_to_num(np.asarray(states[..., :H], dtype=np.float64), nan=0.0)
        bits = np.stack([(h[..., list(hs)] > 0.5 if hs else np.zeros(h.shape[:-1] + (0,), bool)
                          ).any(-1) for hs in holders], -1)
        datum = bits.astype(np.int64) @ pow2
        state = out["state"]
        held = fam[state] & (state >= 0)
        out["state"] = np.where(held, table[np.maximum(state, 0), datum], state)
        return out

    return run


# --- compile ------------------------------------------------------------------------------------
def requires_grefenstette(machine, controller: str = "lstm") -> str | PdanetError | None:
    """None when ``machine`` compiles to model ``grefenstette_<controller>``, else why not (the
    typed error it would raise), without building weights."""
    try:
        factor(machine, f"grefenstette_{controller}")
    except PdanetError as exc:
        return exc
    return None


def requires_grefenstette_rnn(machine) -> str | PdanetError | None:
    """`requires_grefenstette` for the Elman controller."""
    return requires_grefenstette(machine, "rnn")


def requires_grefenstette_lstm(machine) -> str | PdanetError | None:
    """`requires_grefenstette` for the LSTM controller."""
    return requires_grefenstette(machine, "lstm")


def estimate(machine, controller: str = "lstm") -> dict[str, int]:
    """Hidden units and parameters of the compiled model, from the factoring alone."""
    f = factor(machine, f"grefenstette_{controller}")
    return _size(f, controller)


def _size(f: _Factored, controller: str) -> dict[str, int]:
    view = f.view
    S = STORES[view.kind].slots
    m = f.data.codes.shape[1]
    H = (_layout_registers(f) if f.registers else _layout(f, f.data.db))["H"]
    E = max(len(f.reps) + f.data.db, 1)
    O = 1 if view.output == "accept" else view.n_out + 1       # an upper bound on o_t's size
    gates = 4 if controller == "lstm" else 1
    params = (view.K * E + gates * H * (E + S * m + H + 2) + H * (1 + (controller == "lstm"))
              + (H + 1) * (2 * S + S * m + O) + (O + 1) * (view.n_out + 1 if O > 1 else 1))
    return {"hidden_units": H, "parameters": params, "classes": len(f.reps),
            "control_units": len(f.units)}


def compile_grefenstette(machine, controller: str = "lstm", dtype: torch.dtype = torch.float32
                         ) -> CompiledNetwork:
    """Compile a real-time deterministic machine (DPDA / DPDT with final-state acceptance, DFA or
    Mealy machine, stack / queue / deque store transducer) into `GrefenstetteRNN` with an Elman
    (``"rnn"``) or LSTM (``"lstm"``) controller; the store is the machine's (a DFA gets a stack
    that stays empty). See the module docstring for the construction, its timing and its
    saturation argument. CompileError for ε-moves (the buffered model of Hao et al. can),
    empty-stack acceptance (target 'stack_rnn' can), a nondeterministic machine (target
    'ns_rnn' can) or a move that no Grefenstette store does in one step."""
    if controller not in CONTROLLERS:
        raise InputError(f"controller must be one of {CONTROLLERS}, got {controller!r}")
    model = f"grefenstette_{controller}"
    f = factor(machine, model)
    view = f.view
    size = _size(f, controller)
    what = f"compiling {machine!r} to model {model} ({size['hidden_units']:,} hidden units)"
    hint = "use a smaller machine (for a task, a smaller vocabulary)"
    limits.check(what, size["hidden_units"], "max_units", hint=hint)
    limits.check(f"{what}, {size['parameters']:,} parameters", 32 * size["parameters"],
                 "max_bytes", hint=hint)
    lstm = controller == "lstm"
    codes = f.data.codes
    weights, winfo = (_weights_registers if f.registers else _weights)(f, lstm)
    H = winfo["H"]
    n_out = 1 if view.output == "accept" else view.n_out + 1
    module = GrefenstetteRNN(view.K, H, codes.shape[1], n_out, controller, view.kind,
                             embedding=winfo["E"], output_size=winfo["O"], codes=codes)
    module = load_exact(module, weights, BETA, dtype)
    store = module.store
    plan_units = tuple(_Unit(u.c, u.A, None, u.c2, store.actions(u.op), (), -1) for u in f.units)
    plan = _Plan(view, store, 1, view.q0, plan_units)
    decoder = _decoder(plan, codes, H, False)
    if view.fields == "pushdown":        # `forward_window`: pn.verify's O(1)-per-step compare
        module.window_decoder = _window_decoder(plan, codes, H, False)
    if f.registers:
        decoder = _register_states(decoder, f, winfo, lstm)
        if view.fields == "pushdown":
            module.window_decoder = _register_states(module.window_decoder, f, winfo, lstm)
    cunits = tuple(ControllerUnit(u.c, u.A, u.test[1] if u.test[0] == "code" else None, u.c2)
                   for u in f.units)
    abstraction = GrefenstetteController(
        labels=("start",) + tuple(unit_label(cu) if u.test[0] in ("any", "code") else
                                  f"c{u.c}·{u.A}·{u.test[0]}" for cu, u in zip(cunits, f.units))
        + tuple(f"in{k}" for k in range(len(winfo["layout"]["data"])))
        + tuple(f"r{s}.{k}" for s, idx in winfo["layout"]["reading"].items()
                for k in range(len(idx)))
        + tuple(f"g{j}·{''.join(map(str, src))}·{k}"
                for (j, src), idx in winfo["layout"].get("gated", {}).items()
                for k in range(len(idx))),
        memory="grefenstette", store=view.kind, code="binary", codes=codes, linear=False,
        start=0, units=cunits, classes=tuple(int(c) for c in f.classes),
        tests=tuple(u.test for u in f.units), data_units=winfo["layout"]["data"],
        reading_units=tuple(i for idx in winfo["layout"]["reading"].values() for i in idx),
        factoring=f.factoring,
        gated_units=tuple(i for idx in winfo["layout"].get("gated", {}).values() for i in idx),
        registers=tuple(sorted(f.registers)) if f.registers else ())
    Qs, As, Ts, Gs, Ss, Ws = sp.symbols("Q A T G S W")
    per = {}
    for u in f.units:
        per[(u.c, u.A)] = per.get((u.c, u.A), 0) + 1
    params = {"Q": view.Q, "A": len(f.reps), "T": max(per.values(), default=0), "G": view.G,
              "S": store.slots}
    if f.registers:     # per unit at most 4 copied sources (in, two readings, the register)
        bound = 1 + Qs * As * Ts * (1 + 4 * Ws)
        params.update(Q=len(f.reachable), W=f.data.db)
    else:
        bound = 1 + Qs * As * Ts + (1 + Ss) * sp.ceiling(sp.log(Gs + 1, 2))
    info = {
        "model": model, "controller": controller, "store": view.kind,
        "factoring": f.factoring,
        "factoring_note": {
            "data_path": "finite control × input classes × reading tests; symbol codes copied "
                         "through data/reading units",
            "registers": "states (tag, x) → tag × a register of x's datum bits; every copy "
                         "(register, pushed or emitted datum) through gated units",
            "none": "a head copies from two sources: one class per symbol (no data path)",
        }[f.factoring],
        "gated_units": len(abstraction.gated_units),
        "registers": len(f.registers or ()),
        "hidden_units": H, "control_units": len(f.units), "input_classes": len(f.reps),
        "data_units": len(winfo["layout"]["data"]),
        "reading_units": sum(len(v) for v in winfo["layout"]["reading"].values()),
        "parameters": sum(p.numel() for p in module.parameters()),
        "num_states": view.Q, "num_inputs": view.K, "num_store_symbols": view.G,
        "code_width": codes.shape[1], "datum_bits": f.data.db,
        "variant_bits": codes.shape[1] - 1 - f.data.db,
        "embedding": winfo["E"], "output_size": winfo["O"],
        "position_bytes": limits.position_bytes(H, "lstm" if lstm else "rnn",
                                                2 * module.reading_size + winfo["O"]),
        "sources": {"/".join(map(str, k)): v[0] + (str(v[1]) if len(v) > 1 else "")
                    for k, v in f.sources.items()},
        "step": "one network step reads one input symbol and applies one store step; the "
                "output at step t is the machine's output on that step (it reads r_{t-1})",
    }
    return CompiledNetwork(
        machine=machine, module=module, target="stack_rnn", method=model, hidden_units=H,
        bound=bound, params=params,
        weights=weights, scale=sp.Integer(BETA), decoder=decoder,
        reader=_reader(view), margin=MARGIN[controller], steps_per_symbol=1,
        scale_argument=("every pre-activation is beyond ±1/2 (LSTM: ±0.499, κ tanh 1 > 0.9995); "
                        "β = 2048 gives |βz| ≥ 1021, where sigmoid is exactly 0/1 and tanh "
                        "exactly ±1 in float32 and float64, so strengths, pushed codes and "
                        "readings stay exact at every length"),
        abstraction=abstraction, info=info)


def compile_grefenstette_rnn(machine, dtype: torch.dtype = torch.float32) -> CompiledNetwork:
    """`compile_grefenstette` with the Elman tanh controller (model ``"grefenstette_rnn"``)."""
    return compile_grefenstette(machine, "rnn", dtype)


def compile_grefenstette_lstm(machine, dtype: torch.dtype = torch.float32) -> CompiledNetwork:
    """`compile_grefenstette` with the LSTM controller (model ``"grefenstette_lstm"``), the
    controller of the paper's experiments (§4.4)."""
    return compile_grefenstette(machine, "lstm", dtype)


def _example():
    from pdanet.automata.store import sequence_copy
    return sequence_copy(3, "queue")


EXAMPLE_GREFENSTETTE_RNN = EXAMPLE_GREFENSTETTE_LSTM = _example()

__all__ = ["BETA", "EXAMPLE_GREFENSTETTE_LSTM", "EXAMPLE_GREFENSTETTE_RNN", "GrefenstetteController",
           "GrefenstetteRNN", "GrefenstetteUnit", "compile_grefenstette",
           "compile_grefenstette_lstm", "compile_grefenstette_rnn", "estimate", "factor",
           "requires_grefenstette", "requires_grefenstette_lstm", "requires_grefenstette_rnn"]

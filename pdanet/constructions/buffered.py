"""DPDTs and DPDAs with ε-moves compiled into the buffered stack RNN of Hao et al. (2018) §2.3
(target ``"buffered_stack_rnn"``, method ``"grefenstette"``).

The network is a controller, a Grefenstette neural Stack (Eqs. 1–3), a read-only input buffer and
a write-only output buffer (neural Queues, Eqs. 4–5; `InputBuffer` / `OutputBuffer`).

**What a network step is.** The number of network steps per input symbol is variable
(``steps_per_symbol = 0``). Network step k: the input buffer dequeues strength i_{k−1} and reads
x_k (the one-hot code of the next unread symbol, or 0 once the input is used up); the controller
reads [x_k; r_{k−1}] and h_{k−1} and makes *one machine move*: an input move (i_k = 1, consuming
x_k), an ε-move (i_k = 0, x_k is read again at k+1), or, with the input used up and no ε-move, an
idle move (nothing changes, ``halt`` = 1). It emits the stack actions (push d_k, pop u_k, pushed
vector v_k; a replace is pop + push in one step), i_k, the output strength o_k ∈ {0, 1} and the
output vector y_k (one-hot), enqueued to the output buffer. A move that emits n > 1 symbols is
followed by n − 1 ε-steps of helper controller states that emit the rest. Transitions that push
more than one symbol are split by `DPDT.normal_form` (more ε-moves).

**What is reported.** ``forward(ids)`` runs until every row is halted (or dead) and returns the
states at *input-symbol boundaries*: states[:, t] is the state after the last network step that
had consumed exactly t symbols — the end of the ε-closure after symbol t, which is the machine's
configuration after t symbols. states[t] = [h; r; n; e; c]: controller state, stack reading, the
number n of stack cells with strength > 1/2, the output count e (Σ o_j up to that step), and those
cells' values decoded to stack symbol ids (bottom first). The output sequence is read by draining
the output buffer (`OutputBuffer.drain`); ``logits[:, t]`` holds the output vectors enqueued by
input step t (the move that read symbol t and its ε-closure; t = 0: the initial closure), W per
step, so `reader` gives the machine's ``output`` field. Rows whose input blocks stay dead.

The controller is the Elman construction of `controllers` (β = 64, every pre-activation ±1/2 or
beyond, so every unit is exactly ±1 and every strength exactly 0 or 1): hidden unit j stands for
(c, a, R) — controller state c, input condition a (a symbol; ε = any input; ⊣ = input used up)
and reading condition R (a stack code, or any):

    input unit:  z = x[a] + Σ_{i→c} ind(h_i) + m_R(r) − 5/2
    ε unit:      z =        Σ_{i→c} ind(h_i) + m_R(r) − 3/2
    idle unit:   z = (1 − Σ_b x[b]) + Σ_{i→c} ind(h_i) + m_R(r) − 5/2     (one less −1 without R)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp
import torch
from torch import nn

from pdanet import limits
from pdanet.automata.alphabet import EPSILON
from pdanet.automata.pda import DeterministicPushdown
from pdanet.automata.pdt import DPDT
from pdanet.constructions.abstraction import BufferedController, ControllerUnit
from pdanet.constructions.base import CompiledNetwork, ExactWeight, load_exact
from pdanet.constructions.controllers import BETA, read_back, unit_label
from pdanet.constructions.realtime import store_codes
from pdanet.constructions.stacks.buffered import OutputBuffer
from pdanet.constructions.stacks.common import pop_front, read_front_weights
from pdanet.constructions.stacks.grefenstette import NeuralStack
from pdanet.constructions.stacks.protocol import SymbolCodes
from pdanet.errors import CompileError, InputError

_EPS, _END = "eps", "end"


@dataclass(frozen=True)
class _Move:
    c2: int               # controller state after
    push: int             # pushed stack code (-1 none)
    pop: int              # 1 when the move pops
    out: int              # emitted output index (-1 none)
    consume: int          # 1 for an input move
    halt: int = 0


@dataclass(frozen=True)
class _Unit:
    c: int
    a: Any                # input index, _EPS or _END
    R: int | None
    move: _Move


def _units(m: DeterministicPushdown) -> tuple[list[_Unit], int, int, list]:
    """Units of the controller; returns (units, number of controller states, start, names)
    where controller states 0 … |Q'|−1 are the (normal-form) machine states, then helper states
    that emit the rest of a multi-symbol output."""
    Q = list(m.states)
    G, K = len(m.stack_alphabet), len(m.alphabet)
    is_pdt = isinstance(m, DPDT)
    out_index = (lambda y: m.output_alphabet.index(y)) if is_pdt else None
    names: list = list(Q)
    moves: dict = {}          # (c, a or _EPS, R) -> _Move
    for key, value in m.transitions.items():
        q, a, x = key
        op, y = m.op(key)
        outs = [out_index(s) for s in value[1]] if is_pdt else []
        c2 = m.state_index(value[0])
        for extra in reversed(outs[1:]):           # helper ε-steps emit the rest, in order
            names.append(("emit", key, extra))
            helper = len(names) - 1
            for R in range(G + 1):
                moves[(helper, _EPS, R)] = _Move(c2, -1, 0, extra, 0)
            c2 = helper
        moves[(m.state_index(q), _EPS if a is EPSILON else m.alphabet.index(a),
               m.stack_code(x))] = _Move(
            c2, m.stack_code(y) if op in ("push", "replace") else -1,
            int(op in ("pop", "replace")), outs[0] if outs else -1, int(a is not EPSILON))
    C = len(names)
    units: list[_Unit] = []
    for c in range(C):
        eps = {R: moves.get((c, _EPS, R)) for R in range(G + 1)}
        conds: dict = {}
        for R in range(G + 1):
            if eps[R] is not None:
                conds.setdefault(_EPS, {})[R] = eps[R]
                continue
            for a in range(K):
                if (c, a, R) in moves:
                    conds.setdefault(a, {})[R] = moves[(c, a, R)]
            conds.setdefault(_END, {})[R] = _Move(c, -1, 0, -1, 0, halt=1)
        for a, by_R in conds.items():
            if len(by_R) == G + 1 and len(set(by_R.values())) == 1:
                units.append(_Unit(c, a, None, next(iter(by_R.values()))))
            else:
                units.extend(_Unit(c, a, R, mv) for R, mv in by_R.items())
    return units, C, m.state_index(m.start), names


def _weights(units: list[_Unit], K: int, codes: np.ndarray, n_out: int, c0: int) -> dict:
    Fr = Fraction
    m = codes.shape[1]
    H = len(units) + 1                                   # unit 0: start
    into: dict[int, list] = {}
    for j, u in enumerate(units):
        into.setdefault(u.move.c2, []).append(j + 1)
    into.setdefault(c0, []).append(0)
    W_ih = np.full((H, K + m), Fr(0), dtype=object)
    W_hh = np.full((H, H), Fr(0), dtype=object)
    bias = np.full(H, Fr(0), dtype=object)
    bias[0] = Fr(-1, 2)                                  # the start unit is off after step 0
    for j, u in enumerate(units):
        i = j + 1
        for src in into.get(u.c, ()):
            W_hh[i, src] = Fr(1, 2)
        terms = 1 + (u.a != _EPS) + (u.R is not None)       # each term is 0 or 1
        bias[i] = Fr(len(into.get(u.c, ())), 2) - terms + Fr(1, 2)
        if u.a == _END:                                  # 1 − Σ_b x[b]
            W_ih[i, :K] = Fr(-1)
            bias[i] += 1
        elif u.a != _EPS:                                # x[a]
            W_ih[i, u.a] = Fr(1)
        if u.R is not None:                              # m_R(r)
            cR = codes[u.R]
            W_ih[i, K:K + m] = [Fr(int(2 * b - 1)) for b in cR]
            bias[i] += Fr(int(1 - cR.sum()))
    w: dict[str, Any] = {
        "cell.weight_ih": ExactWeight.of(W_ih), "cell.weight_hh": ExactWeight.of(W_hh),
        "cell.bias_ih": ExactWeight.of(bias),
        "cell.bias_hh": ExactWeight.of(np.zeros(H, dtype=np.int64)),
    }
    h0 = -np.ones(H, dtype=np.int64)
    h0[0] = 1
    w["h0"] = ExactWeight.of(h0, scaled=False)

    def affine(name: str, coef: np.ndarray, start: list | None = None) -> None:
        """Rows Σ_j coef[k, j] ind(h_{j+1}) (+ start[k] ind(h_0)), ind(h) = (h + 1)/2."""
        full = np.zeros((coef.shape[0], H), dtype=np.int64)
        full[:, 1:] = coef
        if start is not None:
            full[:, 0] = start
        Wm = np.array([[Fr(int(v), 2) for v in row] for row in full], dtype=object)
        b = np.array([Fr(int(s), 2) for s in full.sum(1)], dtype=object)
        w[f"{name}.weight"], w[f"{name}.bias"] = ExactWeight.of(Wm, False), ExactWeight.of(b, False)

    mv = [u.move for u in units]
    affine("actions", np.array([[x.push >= 0 for x in mv], [x.pop for x in mv]], dtype=np.int64))
    val = np.zeros((m, len(units)), dtype=np.int64)
    out = np.zeros((n_out, len(units)), dtype=np.int64)
    for j, x in enumerate(mv):
        if x.push >= 0:
            val[:, j] = codes[x.push]
        if x.out >= 0:
            out[x.out, j] = 1
    affine("values", val)
    affine("io", np.array([[x.consume for x in mv], [x.out >= 0 for x in mv],
                                [x.halt for x in mv]], dtype=np.int64))
    affine("output", out)
    w["embedding.weight"] = ExactWeight.of(np.eye(K, dtype=np.int64), scaled=False)
    return w


class BufferedStackRNN(nn.Module):
    """Controller + Grefenstette stack + Hao et al.'s input and output buffers (see the module
    docstring for the step and for the layout of ``states`` and ``logits``)."""

    def __init__(self, num_symbols: int, hidden: int, width: int, num_outputs: int,
                 codes: np.ndarray, max_rounds: int, acceptance: str | None = None):
        super().__init__()
        # a recogniser (DPDA) reads its verdict from the controller state: the logits at each
        # input boundary are [Σ ind(h_j) over units entering an accepting state − 1/2 (or, under
        # empty-stack acceptance, over all units: alive); the number of stack cells]
        self.acceptance = acceptance
        if acceptance is not None:
            self.accept = nn.Linear(hidden, 1)
        self.width, self.num_outputs, self.max_rounds = width, num_outputs, max_rounds
        self.embedding = nn.Embedding(num_symbols, num_symbols)   # the input buffer's items
        self.cell = nn.RNNCell(num_symbols + width, hidden, nonlinearity="tanh")
        self.h0 = nn.Parameter(torch.zeros(hidden))
        self.actions = nn.Linear(hidden, 2)                       # push d, pop u
        self.values = nn.Linear(hidden, width)                    # pushed vector v
        self.io = nn.Linear(hidden, 3)                            # input pop i, output push o, halt
        self.output = nn.Linear(hidden, num_outputs)              # output vector y
        self.codes = SymbolCodes(codes)
        self.store = NeuralStack()                                # the stack (Eqs. 1–3)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(ids)
        if ids.dim() != 2:
            raise InputError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        ids = ids.to(self.h0.device)
        B, T = ids.shape
        lengths = (ids >= 0).sum(1)
        if T > 1 and bool((ids[:, :-1] < 0).logical_and(ids[:, 1:] >= 0).any()):
            raise InputError("padding (-1) must come after each row's symbols")
        items = self.embedding(ids.clamp(min=0))                  # I_0 (Hao et al. §2.3)
        s_in = (ids >= 0).to(items.dtype)                         # strength 1 per symbol
        m = self.width
        Wx, Wr = self.cell.weight_ih[:, :items.shape[2]].T, self.cell.weight_ih[:, items.shape[2]:].T
        Wh, b = self.cell.weight_hh.T, self.cell.bias_ih + self.cell.bias_hh
        head_w = torch.cat([self.actions.weight, self.values.weight, self.io.weight,
                            self.output.weight]).T
        head_b = torch.cat([self.actions.bias, self.values.bias, self.io.bias,
                            self.output.bias])
        cap = self.max_rounds * (T + 1) + 1
        mem = self.store.run(B, cap, items, self.codes)
        h = self.h0.view(1, -1).expand(B, -1)
        r = items.new_zeros(B, m)
        i_prev = items.new_zeros(B)
        zero = items.new_zeros(B)
        hs, rs, ptrs, lives, ys, os_ = [h], [r], [zero], [torch.ones(B, dtype=torch.bool)], [], []
        blocks = [(items.new_zeros(B, 1, 0), items.new_zeros(B, 1))]
        ptr = zero
        for k in range(cap):
            s_in = pop_front(s_in, i_prev)                                    # ι_k
            x = torch.bmm(read_front_weights(s_in).unsqueeze(1), items).squeeze(1)  # x_k
            h = torch.tanh(torch.addmm(torch.addmm(torch.addmm(b, x, Wx), r, Wr), h, Wh))
            head = torch.addmm(head_b, h, head_w)
            act, v = head[:, :2], head[:, 2:2 + m]
            i_k, o_k, halt = head[:, 2 + m], head[:, 3 + m], head[:, 4 + m]
            r = mem.step(act, v)
            ptr = ptr + i_k
            alive = (h > 0).any(1)
            hs.append(h), rs.append(r), ptrs.append(ptr), lives.append(alive)
            ys.append(head[:, 5 + m:5 + m + self.num_outputs]), os_.append(o_k)
            i_prev = i_k
            done = bool(((halt > 0.5) | ~alive).all())
            if mem.k == mem.BLOCK or done:
                blocks.append(mem.flush())
            if done:
                break
        else:
            raise InputError(f"the network did not halt within {cap} steps; the machine's "
                             "ε-closures are longer than the construction's bound")
        return self._boundaries(ids, lengths, hs, rs, ptrs, lives, ys, os_, blocks)

    def _boundaries(self, ids, lengths, hs, rs, ptrs, lives, ys, os_, blocks):
        """Pick, for every row and t ≤ T, the last live network step with t symbols consumed."""
        B, T = ids.shape
        Hs, Rs = torch.stack(hs, 1), torch.stack(rs, 1)          # (B, K+1, ·)
        P = torch.round(torch.stack(ptrs, 1)).long()
        L = torch.stack(lives, 1)
        Kp = Hs.shape[1]
        O = torch.stack(os_, 1) if os_ else Hs.new_zeros(B, 0)
        count = torch.cat([Hs.new_zeros(B, 1), torch.round(O).cumsum(1)], 1)   # e after each step
        sizes, contents = read_back(blocks, Hs)
        slot = torch.where(L & (P <= T), P, T + 1)
        last = torch.full((B, T + 2), -1, dtype=torch.long, device=Hs.device)
        last.scatter_reduce_(1, slot, torch.arange(Kp, device=Hs.device).expand(B, Kp), "amax")
        last = last[:, :T + 1]
        t = torch.arange(T + 1, device=Hs.device)
        last = torch.gather(last, 1, torch.minimum(t[None, :], lengths[:, None]))  # hold past n
        dead = last < 0
        k = last.clamp(min=0)

        def pick(X):
            return torch.gather(X, 1, k.view(B, T + 1, *([1] * (X.dim() - 2))).expand(
                B, T + 1, *X.shape[2:]))

        h = torch.where(dead[..., None], -torch.ones_like(pick(Hs)), pick(Hs))
        e = pick(count)
        e = torch.where(dead, torch.cummax(torch.where(dead, 0, e), 1).values, e)
        n = pick(sizes)
        states = torch.cat([h, pick(Rs), n[..., None], e[..., None], pick(contents)], 2)
        if self.acceptance is not None:
            return states, torch.cat([self.accept(h), n[..., None]], 2)
        # the output buffer (Hao et al. §2.3): enqueue every y_k with strength o_k, then drain
        total = int(count[:, -1].max()) if count.numel() else 0
        outbuf = OutputBuffer()
        Y = torch.stack(ys, 1) if ys else Hs.new_zeros(B, 0, self.num_outputs)
        drained = outbuf.drain(outbuf.scan(Y, O), total)               # (B, total, n_out)
        start = torch.cat([e.new_zeros(B, 1), e[:, :-1]], 1)
        per = (e - start).clamp(min=0)
        Wo = max(1, int(per.max()) if per.numel() else 1)
        j = start[..., None] + torch.arange(Wo, device=Hs.device)      # (B, T+1, Wo)
        ok = torch.arange(Wo, device=Hs.device) < per[..., None]
        padded = torch.cat([drained, drained.new_zeros(B, 1, self.num_outputs)], 1)
        idx = torch.where(ok, j, total).long().clamp(max=total)
        logits = torch.gather(padded, 1, idx.view(B, -1, 1).expand(-1, -1, self.num_outputs))
        return states, logits.view(B, T + 1, Wo * self.num_outputs)


def _decoder(units: list[_Unit], C: int, c0: int, n_states: int, G: int, m: int, H: int):
    target = np.zeros((H, C), dtype=np.float32)
    target[0, c0] = 1
    for j, u in enumerate(units):
        target[j + 1, u.move.c2] = 1
    q_of = np.array([c if c < n_states else -2 for c in range(C)], dtype=np.int64)

    def decode(states: np.ndarray) -> dict[str, np.ndarray]:
        states = np.asarray(states)
        B, T1 = states.shape[:2]
        hits = (states[..., :H] > 0).astype(np.float32) @ target
        c = np.where(hits.max(-1) > 0.5, hits.argmax(-1), -1)
        dead = c < 0
        state = np.where(dead, -1, q_of[np.maximum(c, 0)])
        n = np.rint(states[..., H + m]).astype(np.int64)
        contents = np.rint(states[..., H + m + 2:]).astype(np.int64)
        depth = np.where(dead, -1, n)
        D = max(int(depth.max(initial=0)) + 1, 1)
        stack = np.full((B, T1, D), -1, dtype=np.int64)
        stack[..., 0] = G
        w = min(D - 1, contents.shape[2])
        stack[..., 1:1 + w] = contents[..., :w]
        stack[dead] = -1
        top = np.where(dead, -1, np.take_along_axis(stack, np.maximum(depth, 0)[..., None],
                                                    axis=2)[..., 0])
        return {"state": state, "stack": stack, "depth": depth, "top": top}

    return decode


def _accept_weights(units: list[_Unit], c0: int, machine: DeterministicPushdown,
                    acceptance: str) -> dict:
    """The DPDA verdict head: Σ_j a_j ind(h_j) − 1/2 with a_j = 1 for the units (and the start
    unit) entering an accepting controller state, or for every unit under empty-stack
    acceptance (then it says "alive" and the reader also asks for zero stack cells)."""
    Fr = Fraction
    n = len(machine.states)

    def good(c: int) -> bool:
        return acceptance == "empty_stack" or (c < n and machine.states[c] in machine.accepting)

    a = [good(c0)] + [good(u.move.c2) for u in units]
    W = np.array([[Fr(int(x), 2) for x in a]], dtype=object)
    b = np.array([Fr(sum(a), 2) - Fr(1, 2)], dtype=object)
    return {"accept.weight": ExactWeight.of(W, False), "accept.bias": ExactWeight.of(b, False)}


def _reader(n_out: int, kind: str, acceptance: str | None = None):
    if acceptance is not None:             # a DPDA: [accepting-state score, stack cells]
        def accept(logits: np.ndarray) -> np.ndarray:
            y = np.asarray(logits)
            ok = y[..., 0] > 0
            return ok & (np.rint(y[..., 1]) == 0) if acceptance == "empty_stack" else ok

        return accept

    def read(logits: np.ndarray) -> np.ndarray:
        y = np.asarray(logits)
        y = y.reshape(y.shape[:2] + (-1, max(n_out, 1)))
        k = np.where(y.max(-1) > 0.5, y.argmax(-1), -1)
        return k[..., 0] if kind == "symbol" else k

    return read


def compile_buffered(machine: DeterministicPushdown, dtype: torch.dtype = torch.float32,
                     code: str = "binary") -> CompiledNetwork:
    """Compile a DPDT or DPDA with ε-moves into the buffered stack RNN (module docstring).
    ``code``: "binary" or "one_hot" stack-symbol codes. For a DPDA the readout is its verdict at
    each input boundary: the controller state is accepting (``final_state``), or the network is
    alive with no stack cell (``empty_stack``)."""
    if not isinstance(machine, DeterministicPushdown):
        raise CompileError(f"{machine!r} is not a DPDT or DPDA; the buffered target compiles "
                           "deterministic pushdown machines")
    acceptance = None if isinstance(machine, DPDT) else machine.acceptance
    m = machine if machine.is_normal else machine.normal_form()
    units, C, c0, _ = _units(m)
    K, G = len(m.alphabet), len(m.stack_alphabet)
    H = len(units) + 1
    params = H * (K + G + 1) + H * H + H * (G + 6 + len(machine.output_alphabet or ()))
    what = f"compiling {machine!r} to buffered_stack_rnn ({H:,} hidden units)"
    limits.check(what, H, "max_units", hint="use a smaller machine")
    limits.check(f"{what}, {params:,} parameters", 32 * params, "max_bytes",
                 hint="use a smaller machine")
    n_out = max(len(machine.output_alphabet or ()), 1)
    codes = store_codes(G, code)
    weights = _weights(units, K, codes, n_out, c0)
    # a bound on network steps per input symbol: an ε-chain that does not pop has no repeated
    # (controller state, top) pair, and each pop removes a symbol pushed by an earlier move
    rounds = 2 * (C * (G + 1) + 1)
    if acceptance is not None:
        weights.update(_accept_weights(units, c0, machine, acceptance))
    module = BufferedStackRNN(K, len(units) + 1, codes.shape[1], n_out, codes, rounds,
                              acceptance)
    module = load_exact(module, weights, BETA, dtype)
    kind = getattr(machine, "output_kind", "accept")
    Qs, Ks, Gs = sp.symbols("Q K G")
    cunits = tuple(ControllerUnit(u.c, {_EPS: -1, _END: -2}.get(u.a, u.a), u.R, u.move.c2)
                   for u in units)
    abstraction = BufferedController(
        labels=("start",) + tuple(unit_label(u) for u in cunits), memory=module.store.name,
        store=module.store.kind, code=code, codes=codes, linear=False, start=0, units=cunits)
    return CompiledNetwork(
        machine=machine, module=module, target="buffered_stack_rnn", method="grefenstette",
        hidden_units=len(units) + 1, bound=Qs * (Ks + 2) * (Gs + 1) + 1,
        params={"Q": C, "K": K, "G": G}, weights=weights, scale=sp.Integer(BETA),
        decoder=_decoder(units, C, c0, len(machine.states), G, codes.shape[1], len(units) + 1),
        reader=_reader(n_out, "symbol" if kind == "symbol" else "string", acceptance),
        margin=sp.Rational(1, 2), steps_per_symbol=0,
        scale_argument="as for stack_rnn: pre-activations ±1/2 or beyond, β = 64 saturates tanh "
                       "exactly, so strengths, buffer pops and outputs are exactly 0 or 1",
        abstraction=abstraction,
        info={"controller": "elman", "memory": "grefenstette", "controller_states": C,
              "helper_states": C - len(m.states), "hidden_units": len(units) + 1,
              "step": "variable: one machine move per network step; states reported at "
                      "input-symbol boundaries", "max_steps_per_symbol": rounds})


def output_sequences(net: CompiledNetwork, strings) -> list[tuple]:
    """The network's whole output per string: its output buffer drained, as output symbols."""
    m = net.machine
    ids, lengths = m.encode(list(strings))
    if ids.shape[1] == 0:
        ids = np.full((len(lengths), 1), -1, dtype=np.int64)
    _, logits = net.forward(ids)
    got = np.asarray(net.readout(logits))
    got = got.reshape(got.shape[:2] + (-1,))
    syms = tuple(m.output_alphabet)
    return [tuple(syms[int(k)] for k in got[b, :n + 1].reshape(-1) if k >= 0)
            for b, n in enumerate(lengths)]


__all__ = ["BufferedStackRNN", "compile_buffered", "output_sequences"]

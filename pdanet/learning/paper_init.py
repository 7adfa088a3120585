"""Weight-noise tolerance and initialisation for the source papers' own models (`pdanet.models`:
every model that `pdanet.constructions.table.MODELS` lists, compiled with ``pn.compile(machine,
target=…, model=NAME)``; a model added to ``MODELS`` is covered with no new code as long as its
forward uses the operations below).

The compiled paper models are exact by saturation: every squashing site (σ, tanh, softmax) sees a
pre-activation far beyond where float32 σ rounds to exactly 1 and tanh to ±1, or a softmax gap
that makes it one-hot, so the memory receives 0/1 strengths and exact codes.

`paper_tolerance(net)` proves a δ*: changing every weight by at most δ* (absolutely, each
independently), except those named in ``fixed``, leaves a network whose decoded configuration
(`CompiledNetwork.decode`) and readout (`CompiledNetwork.readout`) equal the compiled network's at
every step of every live string of length ≤ ``max_length`` — so `pn.verify` passes on them. The
proof runs the compiled network once per length on every live prefix
(`pdanet.verify.strings.live_prefixes`) and carries, next to every tensor that depends on a
weight, a radius bounding how far it can move under any such change (interval arithmetic, Moore
1966, as a ``TorchFunctionMode`` over the model's own forward, so no model's equations are
re-written here):

- a weight has radius δ (0 if fixed); an affine map (``linear``, ``addmm``, ``mm``, ``matmul``,
  embeddings, RNN/LSTM cells) of x ± r_x by W ± r_W moves by |W| r_x + r_W |x| + r_W r_x, plus
  2γ_n (|W| + r_W)(|x| + r_x) for the rounding of both runs (γ_n = nu/(1 − nu), Higham 2002
  §3.1); sums, products, cumulative sums and the stores' dot products likewise;
- σ/tanh of z ± r: exactly the compiled 1/±1 (radius 0) where z − r (|z| − r) stays beyond the
  threshold of `pdanet.verify.intervals.saturation` (every float32 there was evaluated); elsewhere
  the monotone enclosure |f(z ± r) − f(z)|; softmax: e^{−gap} per entry of a row whose largest
  entry keeps its lead, else half the row's largest radius; each plus the kernel error of both
  runs (`pdanet.verify.intervals.ACTIVATION_ULPS` ulps and the smallest normal) — so the tiny
  strengths an almost-closed gate leaves are carried through the memory, not assumed away;
- a comparison (``>``, ``<``) of a tensor with a radius must not be able to change its result;
- the decoder must give the same configuration over the states' box — it reads by argmax (the
  most active unit), sign and thresholds at half-integers (rint, > 1/2), so: no coordinate's
  interval reaches a half-integer, and the decoding is unchanged at the corners all low, all
  high, and for each coordinate j with a radius, j high and the rest low and j low and the rest
  high; the readout (argmax or sign of each logit) likewise at its corners;
- any other operation on a tensor with a radius ends the pass (nothing is assumed about it).

δ* is the largest δ (bisection to ``rel_tol``) whose pass goes through. The initial state
(``h0``, ``c0``) is fixed: it is the machine's start configuration, and an LSTM cell held by a
forget gate at 1 would carry its noise to every later step. The argument covers the lengths it
enumerated only — no all-lengths argument is made for these models (a controller state × reading
pair first reached after ``max_length`` steps, or ghost strengths accumulating over longer runs,
are not covered), so ``max_length`` is part of the result. Where the compiled weights leave a
value at exactly 0 that the decoder or the memory's read-back compares (the Grefenstette models'
data units on machines that copy symbols), δ* is tiny or no δ > 0 goes through
(CertificationError says which site stops it).

`paper_learner(net)` builds a fresh, randomly initialised module of the compiled network's class
and sizes (its symbol-code table and store copied); `initialize_paper(model, net, noise=ρ)`
copies the compiled weights into it with independent U(−ρδ*, ρδ*) noise on every non-fixed weight.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from pdanet.constructions.base import CompiledNetwork
from pdanet.errors import CertificationError, CompileError, InputError

_FIXED_STATE = ("h0", "c0")


def paper_model_names() -> tuple[str, ...]:
    """The paper models' names, read from `pdanet.constructions.table.MODELS`."""
    from pdanet.constructions.table import MODELS

    return tuple(name for _, name, *_ in MODELS)


def is_paper_network(net: Any) -> bool:
    """Whether `net` is a compiled paper model (its method is a model of ``MODELS``)."""
    return isinstance(net, CompiledNetwork) and getattr(net, "method", None) in paper_model_names()


def _check_seed(seed: Any) -> int:
    if seed is None:
        return 0
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise InputError(f"seed must be None or an int, got {seed!r}")
    return int(seed)


def _check_net(net: Any) -> nn.Module:
    if not is_paper_network(net):
        raise CompileError(
            f"expected a compiled paper model (pn.compile(machine, target=…, model=NAME) with NAME "
            f"in {paper_model_names()}); got "
            f"{getattr(net, 'construction', type(net).__name__)}")
    return net.module


# --- radii ------------------------------------------------------------------------------------------
class NotExact(Exception):
    """The run does not go through at this δ (which site, how)."""


class NoRule(Exception):
    """An operation on a tensor with a nonzero radius that the analysis has no rule for."""


def _gamma(n: int, u: float) -> float:
    return n * u / (1.0 - n * u)


@dataclass
class _Site:
    """The tightest squashing site seen: its kind and its slack (saturation left after the
    radius) in units of the threshold."""

    kind: str = ""
    slack: float = math.inf


class _Radius(TorchFunctionMode):
    """Runs the model's own forward and carries a radius next to every tensor that depends on a
    weight (module docstring)."""

    STRUCTURAL = frozenset({
        "__getitem__", "view", "reshape", "expand", "expand_as", "unsqueeze", "squeeze",
        "transpose", "t", "permute", "contiguous", "clone", "flatten", "narrow", "select",
        "index_select", "repeat", "flip", "detach", "chunk", "split", "unbind", "movedim",
        "gather", "pad", "view_as", "reshape_as", "masked_select", "roll", "tril", "triu",
        "diagonal"})
    INERT = frozenset({"dim", "size", "__len__", "numel", "new_zeros", "new_full", "new_ones",
                       "new_empty", "zeros_like", "ones_like", "full_like", "empty_like",
                       "is_floating_point", "__format__", "__repr__", "stride", "element_size"})

    def __init__(self, radii: dict[int, tuple[torch.Tensor, torch.Tensor]], dtype: torch.dtype,
                 sat: Any):
        super().__init__()
        self.radii = radii
        self.u = float(torch.finfo(dtype).eps) / 2
        self.tiny = float(torch.finfo(dtype).tiny)
        self.sat = sat
        self.site = _Site()
        from pdanet.verify.intervals import ACTIVATION_ULPS
        self.act_ulps = ACTIVATION_ULPS

    # -- bookkeeping
    def rad(self, t: Any) -> torch.Tensor | None:
        if not isinstance(t, torch.Tensor):
            return None
        hit = self.radii.get(id(t))
        return hit[1] if hit is not None and hit[0] is t else None

    def put(self, t: Any, r: torch.Tensor | None) -> None:
        if not isinstance(t, torch.Tensor):
            return
        if r is None or not bool((r != 0).any()):
            self.radii.pop(id(t), None)
            return
        if not bool(torch.isfinite(r).all()):
            raise NotExact("a radius overflowed")
        self.radii[id(t)] = (t, r.to(torch.float64) if r.dtype != torch.float64 else r)

    def r0(self, t: torch.Tensor) -> torch.Tensor:
        r = self.rad(t)
        return torch.zeros(t.shape, dtype=torch.float64) if r is None else r

    # -- arithmetic rules (x: values, float64 copies; r: radii)
    def _affine(self, pairs: list, bias: list, out: torch.Tensor) -> torch.Tensor:
        """Σ_k A_k @ B_k + Σ biases: the radius of the result (module docstring). ``pairs``:
        (A, B) tensors, or (A, B, transpose B) where B is a weight given untransposed."""
        r = torch.zeros(out.shape, dtype=torch.float64)
        mag = torch.zeros(out.shape, dtype=torch.float64)
        n = len(bias)
        for pair in pairs:
            A, B = pair[0], pair[1]
            a, b, ra, rb = A.detach().double().abs(), B.detach().double().abs(), self.r0(A), \
                self.r0(B)
            if len(pair) > 2 and pair[2]:
                b, rb = b.T, rb.T
            r = r + a @ rb + ra @ b + ra @ rb
            mag = mag + (a + ra) @ (b + rb)
            n += A.shape[-1]
        for c in bias:
            if c is None:
                continue
            rc = self.r0(c)
            r = r + rc
            mag = mag + c.detach().double().abs() + rc
        return r + 2 * _gamma(n + 1, self.u) * mag + 2 * self.tiny * (mag > 0)

    def _round(self, r: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        a = out.detach().double().abs()
        return r * (1 + 2 * self.u) + 2 * self.u * a + 2 * self.tiny * ((r > 0) | (a > 0))

    def squash(self, kind: str, z: torch.Tensor, rz: torch.Tensor | None, dim: int = -1,
               out: torch.Tensor | None = None) -> torch.Tensor | None:
        """The radius of σ/tanh/softmax(z) where z has radius rz (module docstring): 0 where z
        stays beyond the scanned threshold where σ is exactly 1 and tanh exactly ±1; elsewhere
        the monotone enclosure |f(z ± r) − f(z)| (softmax: e^{−gap} per entry of a row whose top
        entry keeps the lead, else half the row's largest radius) plus the kernel error
        (`pdanet.verify.intervals.ACTIVATION_ULPS` ulps and the normal floor) of both runs."""
        if rz is None:
            return None
        zz = z.detach().double()
        rz = rz.expand(zz.shape)
        live = rz > 0
        if not bool(live.any()):
            return None
        reach = float(torch.where(live, zz.abs() + rz, 0.0).max())
        self._scan(reach)
        kern = 2 * (self.act_ulps * 2 * self.u + 4 * 2.0**-53)
        if kind == "softmax":
            top = zz.argmax(dim, keepdim=True)
            lo_top = (zz - rz).gather(dim, top)
            gap = lo_top - (zz + rz)                         # per entry; the top's own is −2r
            lead = gap.scatter(dim, top, math.inf).amin(dim, keepdim=True)
            p = torch.softmax(zz, dim)
            tail = torch.exp(-gap.clamp(min=0)).scatter(dim, top, 0.0) + p.scatter(dim, top, 0.0)
            tail_sum = tail.sum(dim, keepdim=True)
            rad = torch.where(torch.zeros_like(zz, dtype=torch.bool).scatter(dim, top, True),
                              tail_sum.expand(zz.shape), tail)
            lip = 0.5 * rz.amax(dim, keepdim=True).expand(zz.shape)
            rad = torch.where((lead > 0).expand(zz.shape), torch.minimum(rad, lip), lip)
            slack = float((lead - 0).min()) if bool((lead > 0).all()) else -math.inf
            scale = 1.0
            rad = rad + kern * (p + rad) + 2 * self.tiny
            exact = torch.zeros_like(zz, dtype=torch.bool)
        else:
            f = torch.sigmoid if kind == "sigmoid" else torch.tanh
            thr = self.sat.sigmoid if kind == "sigmoid" else self.sat.tanh
            y = f(zz)
            rad = torch.maximum(f(zz + rz) - y, y - f(zz - rz))
            rad = rad + kern * (y.abs() + rad) + 2 * self.tiny
            if kind == "sigmoid":
                exact = (zz - rz) >= thr
                slack_t = torch.where(live, (zz - rz) - thr, -zz - rz)
            else:
                exact = (zz.abs() - rz) >= thr
                slack_t = torch.where(live, zz.abs() - rz - thr, torch.inf)
            slack = float(slack_t.min())
            scale = thr
        if slack / scale < self.site.slack:
            self.site = _Site(kind, slack / scale)
        rad = torch.where(exact | ~live, 0.0, rad)
        return rad

    def _scan(self, reach: float) -> None:
        """Extend the saturation scan to `reach` (it only ever confirms the thresholds used;
        NotExact if a larger scan moved one)."""
        from pdanet.verify import intervals as iv

        if reach > 2.0 ** 20:
            raise NotExact(f"a pre-activation reaches {reach:g}, beyond the scanned range 2^20")
        if reach > self.sat.upto:
            new = iv.saturation(torch.float32, upto=reach)
            if new.sigmoid > self.sat.sigmoid or new.tanh > self.sat.tanh:
                raise NotExact("a saturation threshold moved when the scan was extended")
            self.sat = new

    def cell(self, name: str, args: tuple, out: Any) -> Any:
        """nn.RNNCell / nn.LSTMCell: the affine gates, each squashing site, and (LSTM)
        c' = f c + i g, h' = o tanh(c'). Returns the radius of the output (a tensor, or a pair
        (r_h, r_c) for the LSTM)."""
        x, hx, w_ih, w_hh = args[:4]
        b_ih, b_hh = (args[4], args[5]) if len(args) > 5 else (None, None)
        h, c = hx if name == "lstm_cell" else (hx, None)
        z = x.detach().double() @ w_ih.detach().double().T + h.detach().double() \
            @ w_hh.detach().double().T
        for b in (b_ih, b_hh):
            if b is not None:
                z = z + b.detach().double()
        rz = self._affine([(x, w_ih, True), (h, w_hh, True)], [b_ih, b_hh], z)
        if name != "lstm_cell":
            return self.squash("tanh", z, rz, out=out)
        H = w_hh.shape[1]
        parts = []
        for k, kind in enumerate(("sigmoid", "sigmoid", "tanh", "sigmoid")):
            zk = z[:, k * H:(k + 1) * H]
            val = torch.sigmoid(zk) if kind == "sigmoid" else torch.tanh(zk)
            rk = self.squash(kind, zk, rz[:, k * H:(k + 1) * H])
            parts.append((val.abs() * (1 + 1e-6) + 1e-7,
                          torch.zeros_like(zk) if rk is None else rk))
        (i, ri), (f, rf), (g, rg), (o, ro) = parts
        c_abs = c.detach().double().abs()
        rc = self.r0(c)
        rc2 = f * rc + rf * c_abs + rf * rc + i * rg + ri * g + ri * rg
        if not bool((rc2 > 0).any()):
            return None
        rc2 = self._round(rc2, out[1])
        rt = self.squash("tanh", out[1], rc2, out=out[0])
        rt = torch.zeros_like(rc2) if rt is None else rt
        tc = out[1].detach().double().tanh().abs() * (1 + 1e-6) + 1e-7
        rh = self._round(o * rt + ro * tc + ro * rt, out[0])
        return rh, rc2

    def _logspace(self, name: str, args: tuple, kwargs: dict, out: torch.Tensor) -> None:
        """Log-space operations (NS stacks): log_softmax moves by r_i + max r over the row,
        logsumexp and amax by the largest r reduced, logaddexp by max(r_a, r_b), exp and log by
        their monotone enclosures (log needs x − r > 0), sum by the sum of radii; each plus the
        rounding of both runs."""
        x = args[0]
        rx = self.r0(x)
        xv = x.detach().double()
        mag = out.detach().double().abs()
        if name in ("log_softmax", "logsumexp", "amax", "sum"):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            keep = bool(kwargs.get("keepdim", args[2] if len(args) > 2 and name != "log_softmax"
                                   else False))
            if dim is None:
                dims = tuple(range(x.dim()))
            else:
                dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
            if name == "sum":
                r = rx.sum(dims, keepdim=keep)
                n = int(np.prod([x.shape[d] for d in dims])) if dims else 1
                self.put(out, r + 2 * _gamma(n + 1, self.u) * (xv.abs() + rx).sum(dims, keepdim=keep))
                return
            top = rx.amax(dims, keepdim=True)
            r = rx + top if name == "log_softmax" else (top if keep else top.squeeze(dims))
            n = int(np.prod([x.shape[d] for d in dims]))
            self.put(out, self._round(r * (1 + 2 * _gamma(n + 2, self.u)), out)
                     + 8 * _gamma(n + 2, self.u) * (xv.abs().amax(dims, keepdim=True)
                                                   if name == "log_softmax" or keep
                                                   else xv.abs().amax(dims)))
        elif name == "logaddexp":
            rb = self.r0(args[1]) if isinstance(args[1], torch.Tensor) else 0.0
            r = torch.maximum(rx, torch.as_tensor(rb, dtype=torch.float64))
            self.put(out, self._round(r, out).expand(out.shape).clone()
                     + 8 * self.u * (xv.abs() + mag))
        elif name == "exp":
            e = torch.exp(xv)
            r = e * torch.expm1(rx)
            self.put(out, r + 32 * self.u * (e + r) + 2 * self.tiny)
        else:                                                   # log
            if bool(((xv - rx) <= 0).logical_and(rx > 0).any()):
                raise NotExact("the argument of a log may reach 0")
            r = torch.where(rx > 0, -torch.log1p(-rx / xv.clamp(min=self.tiny)), 0.0)
            self.put(out, r + 32 * self.u * (mag + r) + 2 * self.tiny * (rx > 0))

    # -- dispatch
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        flat: list = []

        def walk(a: Any) -> None:
            if isinstance(a, torch.Tensor):
                flat.append(a)
            elif isinstance(a, (list, tuple)):
                for b in a:
                    walk(b)

        walk(args)
        walk(list(kwargs.values()))
        if not any(self.rad(t) is not None for t in flat):
            return out
        name = getattr(func, "__name__", str(func))
        if name == "__get__":
            prop = getattr(getattr(func, "__self__", None), "__name__", "")
            if not isinstance(out, torch.Tensor):
                return out
            if prop in ("T", "mT", "data"):
                self.put(out, func(self.rad(args[0])))
                return out
            raise NoRule(f"property {prop!r}")
        if name in self.INERT:
            return out
        with torch.no_grad():
            self._rule(name, func, args, kwargs, out)
        return out

    def _rule(self, name: str, func, args: tuple, kwargs: dict, out: Any) -> None:
        base = name.strip("_")
        if name in self.STRUCTURAL:
            r = func(self.r0(args[0]), *args[1:], **kwargs)
            if isinstance(out, (tuple, list)):
                for o, ro in zip(out, r):
                    self.put(o, ro)
            else:
                self.put(out, r)
        elif name in ("cat", "stack", "concat"):
            seq = args[0]
            r = func([self.r0(t) for t in seq], *args[1:], **kwargs)
            self.put(out, r)
        elif name == "where":
            cond, a, b = args[0], args[1], args[2]
            if self.rad(cond) is not None:
                raise NoRule("where on a condition with a radius")
            ra = self.r0(a) if isinstance(a, torch.Tensor) else torch.zeros((), dtype=torch.float64)
            rb = self.r0(b) if isinstance(b, torch.Tensor) else torch.zeros((), dtype=torch.float64)
            self.put(out, torch.where(cond, ra, rb).expand(out.shape).clone())
        elif name in ("to", "float", "double", "type_as"):
            self.put(out, self._round(self.r0(args[0]), out) if out.dtype != args[0].dtype
                     else self.r0(args[0]))
        elif base in ("add", "sub", "rsub", "radd", "iadd", "isub"):
            alpha = abs(kwargs.get("alpha", 1))
            a, b = args[0], args[1]
            ra = self.r0(a) if isinstance(a, torch.Tensor) else 0
            rb = self.r0(b) * alpha if isinstance(b, torch.Tensor) else 0
            r = self._round(ra + rb, out)
            target = args[0] if base in ("iadd", "isub") else out
            self.put(target, r.expand(target.shape).clone())
        elif base in ("mul", "rmul", "imul"):
            a, b = args[0], args[1]
            if not isinstance(b, torch.Tensor):
                r = self.r0(a) * abs(float(b))
            else:
                ra, rb = self.r0(a), self.r0(b)
                r = a.detach().double().abs() * rb + b.detach().double().abs() * ra + ra * rb
            self.put(args[0] if base == "imul" else out, self._round(r, out).expand(out.shape)
                     .clone())
        elif base in ("neg",):
            self.put(out, self.r0(args[0]))
        elif base in ("div", "truediv"):
            a, b = args[0], args[1]
            if isinstance(b, torch.Tensor) and self.rad(b) is not None:
                raise NoRule("division by a tensor with a radius")
            d = b.detach().double().abs() if isinstance(b, torch.Tensor) else abs(float(b))
            self.put(out, self._round(self.r0(a) / d, out))
        elif name in ("linear",):
            x, W = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            self.put(out, self._affine([(x, W, True)], [b], out))
        elif name in ("mm", "matmul", "__matmul__", "bmm"):
            self.put(out, self._affine([(args[0], args[1])], [], out))
        elif name == "addmm":
            C, A, B = args[0], args[1], args[2]
            if kwargs.get("beta", 1) != 1 or kwargs.get("alpha", 1) != 1:
                raise NoRule("addmm with beta/alpha")
            self.put(out, self._affine([(A, B)], [C], out))
        elif name == "embedding":
            idx, W = args[0], args[1]
            if self.rad(idx) is not None:
                raise NoRule("embedding indices with a radius")
            self.put(out, self.r0(W)[idx])
        elif name == "linalg_vecdot":
            a, b = args[0], args[1]
            dim = kwargs.get("dim", -1)
            ra, rb = self.r0(a), self.r0(b)
            x, y = a.detach().double().abs(), b.detach().double().abs()
            r = (x * rb + ra * y + ra * rb).sum(dim)
            mag = ((x + ra) * (y + rb)).sum(dim)
            self.put(out, r + 2 * _gamma(a.shape[dim] + 1, self.u) * mag
                     + 2 * self.tiny * (mag > 0))
        elif name == "cumsum":
            x, rx = args[0], self.r0(args[0])
            dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
            mag = (x.detach().double().abs() + rx).cumsum(dim)
            self.put(out, rx.cumsum(dim) + 2 * _gamma(x.shape[dim] + 1, self.u) * mag
                     + 2 * self.tiny * (mag > 0))
        elif name in ("relu", "relu_", "clamp", "clamp_", "clamp_min", "clamp_min_"):
            self.put(out if not name.endswith("_") else args[0], self.r0(args[0]).clone())
        elif name in ("minimum", "maximum"):
            self.put(out, torch.maximum(self.r0(args[0]), self.r0(args[1])).expand(out.shape)
                     .clone())
        elif name in ("isfinite", "isinf", "isnan", "isneginf", "isposinf"):
            pass        # finite radii: a finite value stays finite, an infinite one is exact
        elif name in ("log_softmax", "logsumexp", "amax", "logaddexp", "exp", "log", "sum"):
            self._logspace(name, args, kwargs, out)
        elif name in ("addcmul", "addcmul_"):
            c, t1, t2 = args[0], args[1], args[2]
            v = abs(float(kwargs.get("value", args[3] if len(args) > 3 else 1)))
            a1, a2 = t1.detach().double().abs(), t2.detach().double().abs()
            r1, r2 = self.r0(t1), self.r0(t2)
            r = self.r0(c) + v * (a1 * r2 + r1 * a2 + r1 * r2)
            target = args[0] if name.endswith("_") else out
            self.put(target, self._round(r, target).expand(target.shape).clone())
        elif name in ("sub_", "add_"):
            alpha = abs(kwargs.get("alpha", 1))
            b = args[1]
            rb = self.r0(b) * alpha if isinstance(b, torch.Tensor) else 0
            self.put(args[0], self._round((self.r0(args[0]) + rb), args[0]).expand(
                args[0].shape).clone())
        elif name in ("sigmoid", "tanh"):
            self.put(out, self.squash(name, args[0], self.rad(args[0]), out=out))
        elif name in ("softmax", "_softmax"):
            dim = kwargs.get("dim", args[1] if len(args) > 1 else -1)
            self.put(out, self.squash("softmax", args[0], self.rad(args[0]), dim, out=out))
        elif name == "rnn_tanh_cell":
            self.put(out, self.cell(name, args, out))
        elif name == "lstm_cell":
            r = self.cell(name, args, out)
            if r is not None:
                self.put(out[0], r[0])
                self.put(out[1], r[1])
        elif name in ("gt", "__gt__", "lt", "__lt__", "ge", "__ge__", "le", "__le__"):
            a, b = args[0], args[1]
            if isinstance(b, torch.Tensor) and self.rad(b) is not None:
                raise NoRule(f"comparison {name!r} of two tensors with radii")
            thr = b.detach().double() if isinstance(b, torch.Tensor) else float(b)
            if not bool(((a.detach().double() - thr).abs() > self.r0(a)).all()):
                raise NotExact(f"a comparison ({name}) can change its result")
        elif name == "__setitem__":
            target, idx, value = args[0], args[1], args[2]
            rt = self.r0(target).clone()
            rt[idx] = self.r0(value) if isinstance(value, torch.Tensor) else 0.0
            self.put(target, rt)
        else:
            raise NoRule(f"operation {name!r} on a tensor that depends on a perturbed weight")


# --- the tolerance ---------------------------------------------------------------------------------
def _levels(net: CompiledNetwork, max_length: int) -> list[np.ndarray]:
    from pdanet.verify.strings import live_prefixes

    return [x for x in live_prefixes(net.machine, max_length) if len(x)]


def _fixed(module: nn.Module) -> tuple[str, ...]:
    return tuple(n for n, _ in module.named_parameters() if n in _FIXED_STATE)


def _corners(reader, logits: np.ndarray, r: np.ndarray) -> bool:
    """Whether the readout decides the same at the corners of logits ± r that decide an argmax
    or a per-logit sign (module docstring)."""
    want = reader(logits)
    tries = [logits - r, logits + r]
    for j in range(logits.shape[-1]):
        c = logits - r
        c[..., j] = logits[..., j] + r[..., j]
        tries.append(c)
    return all(np.array_equal(reader(c), want) for c in tries)


def _decoded_corners(net: CompiledNetwork, states: torch.Tensor, r: torch.Tensor) -> bool:
    """Whether the decoder gives the same configuration over states ± r, for decoders that read
    by argmax (most active unit), sign and thresholds at half-integers (rint, > 1/2): no
    coordinate's interval reaches a half-integer, and the decoding is the same at the corners
    all low, all high, and for each coordinate j with a radius: j high and the rest low, j low
    and the rest high."""
    x = states.detach().double().cpu().numpy()
    rr = r.expand(states.shape).cpu().numpy()
    live = rr > 0
    lo, hi = x - rr, x + rr
    # no coordinate may reach a threshold at ±1/2, 3/2, … (rint, "> 1/2")
    half = np.floor(hi - 0.5) >= np.ceil(lo - 0.5)
    if bool((live & half).any()):
        return False
    want = net.decode(x)
    tries = [lo, hi]
    for j in np.flatnonzero(live.any(axis=(0, 1))):
        for base, other in ((lo, hi), (hi, lo)):
            c = base.copy()
            c[..., j] = other[..., j]
            tries.append(c)
    for c in tries:
        got = net.decode(c)
        if any(not np.array_equal(np.asarray(got[k]), np.asarray(v)) for k, v in want.items()):
            return False
    return True


def _run(net: CompiledNetwork, levels: list[np.ndarray], delta: float, fixed: tuple[str, ...],
         sat: Any) -> _Site:
    """One pass at δ: raises NotExact / NoRule where it does not go through."""
    module = net.module
    dtype = net.dtype
    was = module.training
    module.eval()
    site = _Site()
    try:
        for ids in levels:
            radii: dict = {}
            mode = _Radius(radii, dtype, sat)
            for n, p in module.named_parameters():
                if n not in fixed and delta > 0:
                    radii[id(p)] = (p, torch.full(p.shape, float(delta), dtype=torch.float64))
            with torch.no_grad(), mode:
                states, logits = module(torch.as_tensor(ids))
            rs = mode.rad(states)
            if rs is not None and not _decoded_corners(net, states, rs):
                raise NotExact("a decoded configuration can change")
            rl = mode.rad(logits)
            if rl is not None:
                lg = logits.detach().double().cpu().numpy()
                if not _corners(net.reader, lg, rl.expand(logits.shape).numpy()):
                    raise NotExact("the readout's decision can change")
            if mode.site.slack < site.slack:
                site = mode.site
    finally:
        module.train(was)
    return site


@dataclass(frozen=True)
class PaperTolerance:
    """What `paper_tolerance` proves (``pdanet.learning.init.weight_tolerance`` returns it as a
    `WeightTolerance`): ``delta`` δ*, the ``fixed`` parameter names, ``max_length``, the
    ``argument`` and ``details`` (the tightest site, what stops a larger δ and at which δ)."""

    delta: float
    fixed: tuple[str, ...]
    max_length: int
    argument: str
    details: dict


def paper_tolerance(net: CompiledNetwork, max_length: int = 8, rel_tol: float = 0.05):
    """δ* of a compiled paper model over every live string of length ≤ ``max_length`` (module
    docstring), a `PaperTolerance` (``fixed``: the initial state).
    CompileError for another network; CertificationError when no δ > 0 goes through (e.g. a
    float64 network: float64 σ/tanh are not checked to saturate)."""
    from pdanet.verify import intervals as iv

    module = _check_net(net)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise InputError(f"max_length must be a positive int, got {max_length!r}")
    if not (isinstance(rel_tol, (int, float)) and 0 < rel_tol < 1):
        raise InputError(f"rel_tol must be a number in (0, 1), got {rel_tol!r}")
    if net.dtype != torch.float32:
        raise CertificationError(
            f"the paper models' tolerance rests on σ/tanh/softmax rounding to exactly 0/1/±1, "
            f"checked for float32 kernels only; {net.construction} runs in {net.dtype}. Compile "
            "with dtype=torch.float32")
    sat = iv.saturation(torch.float32)
    levels = _levels(net, max_length)
    fixed = _fixed(module)

    def attempt(delta: float) -> _Site | str:
        try:
            return _run(net, levels, delta, fixed, sat)
        except (NotExact, CertificationError) as exc:
            return str(exc)
        except NoRule as exc:
            return f"{exc} (no rule: nothing is assumed about it)"

    base = attempt(0.0)
    if isinstance(base, str):
        raise CertificationError(f"{net.construction} is not exact even at its compiled weights "
                                 f"on strings of length ≤ {max_length}: {base}")
    lo, lo_site, hi, why = 0.0, base, 1.0, ""
    while not isinstance(got := attempt(hi), str) and hi < 1e4:
        lo, lo_site, hi = hi, got, hi * 4
    if isinstance(got, str):
        why = got
    if lo == 0.0:
        for _ in range(40):
            hi /= 4
            got = attempt(hi)
            if not isinstance(got, str):
                lo, lo_site, hi = hi, got, hi * 4
                break
            why = got
    if lo == 0.0:
        raise CertificationError(f"no weight tolerance for {net.construction}: {why}")
    while hi - lo > rel_tol * lo:
        mid = (lo + hi) / 2
        got = attempt(mid)
        if isinstance(got, str):
            hi, why = mid, got
        else:
            lo, lo_site = mid, got
    return PaperTolerance(
        delta=lo, fixed=fixed, max_length=max_length,
        argument=(f"radius propagation through the model's own forward "
                  f"(pdanet.learning.paper_init) over every live string of length ≤ {max_length} "
                  f"({sum(len(x) for x in levels):,} prefixes): at δ = {lo:.4g} the decoded "
                  f"configuration and the readout are unchanged at every step; at δ = {hi:.4g}: "
                  f"{why or 'not tried'}. The initial state ({', '.join(fixed) or 'none'}) is "
                  "fixed. No all-lengths argument"),
        details={"parameters": fixed, "site": lo_site.kind,
                 "slack": lo_site.slack, "stopped": why, "upper": hi})


# --- the learner ---------------------------------------------------------------------------------
def paper_learner(net: CompiledNetwork, seed: int | None = None) -> nn.Module:
    """A fresh module of the compiled network's class and sizes (its symbol-code table and store
    configuration copied), every parameter re-drawn as the module's own layers draw them
    (``reset_parameters``; the initial state N(0, 0.1²)), as its paper trains it."""
    module = _check_net(net)
    gen = torch.Generator().manual_seed(_check_seed(seed))
    fresh = copy.deepcopy(module)
    with torch.no_grad():
        state = torch.random.get_rng_state()
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        try:
            for sub in fresh.modules():
                if sub is not fresh and hasattr(sub, "reset_parameters"):
                    sub.reset_parameters()
            for n, p in fresh.named_parameters(recurse=False):
                p.copy_(torch.randn(p.shape, dtype=p.dtype) * 0.1)
        finally:
            torch.random.set_rng_state(state)
    fresh.train()
    return fresh


def initialize_paper(model: nn.Module, net: CompiledNetwork, noise: float = 0.0,
                     seed: int | None = None, tolerance: Any = None) -> nn.Module:
    """Copy the compiled paper model's weights into `model` (in place; returns it), each
    non-fixed weight plus independent U(−ρδ*, ρδ*) noise for ``noise=ρ`` (δ* and the fixed names
    from ``tolerance`` — anything with ``delta`` and ``fixed``, e.g. a `PaperTolerance` or
    ``weight_tolerance(net)`` — else `paper_tolerance(net)`). CompileError when `model` is not of
    the compiled module's class or its parameters differ in name or shape."""
    src = _check_net(net)
    if type(model) is not type(src):
        raise CompileError(f"the compiled network is a {type(src).__name__}; the model is a "
                           f"{type(model).__name__}. Build it with paper_learner(net)")
    if isinstance(noise, bool) or not (isinstance(noise, (int, float)) and 0 <= noise < math.inf):
        raise InputError(f"noise must be a number ≥ 0 (a fraction ρ of the weight tolerance δ*), "
                         f"got {noise!r}")
    if tolerance is not None and not (isinstance(getattr(tolerance, "delta", None), float)
                                      and isinstance(getattr(tolerance, "fixed", None), tuple)):
        raise InputError(f"tolerance must be a WeightTolerance (weight_tolerance(net)), got "
                         f"{type(tolerance).__name__}")
    want = {n: p.shape for n, p in src.named_parameters()}
    have = {n: p.shape for n, p in model.named_parameters()}
    if want != have:
        diff = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
        raise CompileError(f"the model's parameters differ from the compiled "
                           f"{type(src).__name__}'s in {diff}: build it with paper_learner(net)")
    codes_src, codes_model = getattr(src, "codes", None), getattr(model, "codes", None)
    if codes_src is not None and (codes_model is None or not np.array_equal(
            np.asarray(codes_src.codes), np.asarray(codes_model.codes))):
        raise CompileError("the model's symbol-code table differs from the compiled network's: "
                           "build it with paper_learner(net)")
    tol = None
    if noise:
        tol = tolerance if tolerance is not None else paper_tolerance(net)
    fixed = set(tol.fixed) if tol is not None else set()
    gen = torch.Generator().manual_seed(_check_seed(seed))
    with torch.no_grad():
        params = dict(model.named_parameters())
        for n, p in src.named_parameters():
            value = p.detach().double().clone()
            if tol is not None and n not in fixed and tol.delta > 0:
                u = torch.rand(value.shape, generator=gen, dtype=torch.float64) * 2 - 1
                value = value + u * (noise * tol.delta)
            params[n].copy_(value.to(params[n].dtype))
    return model


__all__ = ["PaperTolerance", "initialize_paper", "is_paper_network", "paper_learner",
           "paper_model_names", "paper_tolerance"]

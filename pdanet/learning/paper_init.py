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
- radius 0 means the same value in both runs (±0 counted as one value; no rule divides by a
  zero), and is claimed only where that holds whatever order a kernel adds in: a correctly
  rounded +, −, ×, ÷ of operands with radius 0 (or with an exact-zero factor); a matrix product
  or einsum entry with at most one term that can be nonzero, both its factors of radius 0; a
  max attained by a radius-0 entry that no other entry can reach; exp only at 0 (exactly 1), at
  −inf and throughout the range where float32 exp underflows to exactly 0 (`exp_underflow`:
  every float32 of the range evaluated on the vector and the scalar kernel, not assumed); log
  only at 0 and 1; ±inf plus a finite number;
- a max-shift x − max(x) (DuSell & Chiang's action head inside the NS stack's step: Eq. 1 or
  §3.1's exp after subtracting the maximum): in a group whose maximum is unique and keeps its
  lead over the radii, that entry is exactly 0 in both runs (a float minus itself), so exp gives
  exactly 1 there and exactly 0 wherever x − max + r stays in the underflow range — saturated
  action weights then carry no radius into the stack, and its chart, α and readings are the same
  floats (NS+U, RNS). Eq. 1's softmax rows that no run occupies are uniform (1/(Q(2N+1)) each,
  not one-hot): their radius is carried, and the rules above show that they only ever meet exact
  zeros (products with the occupied rows' zero actions) and do not reach the column maxima — a
  valid but much smaller δ* (NS, NS+S; the radius of exp grows as e^{r}). A pass that fails after
  such an exp names it;
- a comparison (``>``, ``<``, ``==``, ``!=``) of a tensor with a radius must not be able to change
  its result;
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


#: the largest magnitude up to which the float32 exp underflow is scanned (2^13: the compiled
#: action gaps are a few thousand; a larger argument is not claimed to underflow)
EXP_SCAN_CAP = 2.0 ** 13
_EXP_UNDERFLOW: dict[int, int] = {}


def exp_underflow(reach: float) -> tuple[float, float]:
    """(a*, U): float32 ``torch.exp`` on this CPU returns exactly 0 at every float32 x with
    −U ≤ x ≤ −a*, on the contiguous (vectorised) and the strided (scalar) kernel path alike —
    every float32 of [a*, U] was evaluated (`pdanet.verify.intervals._scan`, as for the σ/tanh
    saturation thresholds), U the least power of two ≥ max(reach, 128). Also checked: exp(0) =
    exp(−0) = 1 and exp(−inf) = 0 on both paths. a* = inf when no such range exists or
    ``reach`` exceeds `EXP_SCAN_CAP` (nothing is claimed there). Scanned once per process and U."""
    from pdanet.verify import intervals as iv

    if not reach <= EXP_SCAN_CAP:
        return math.inf, 0.0
    upto = 2.0 ** max(7, math.ceil(math.log2(max(reach, 1.0))))
    hi = iv._bits(upto)
    if hi not in _EXP_UNDERFLOW:
        special = torch.tensor([0.0, -0.0, -math.inf, 0.0, -0.0, -math.inf])
        want = torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0, 0.0])
        if not (torch.equal(torch.exp(special), want)
                and torch.equal(torch.exp(special[::2]), want[::2])
                and torch.equal(torch.exp(special[1::2]), want[1::2])):
            _EXP_UNDERFLOW[hi] = hi + 1
        else:
            def zero(z: torch.Tensor) -> torch.Tensor:
                neg = -z
                ok = torch.exp(neg) == 0                           # contiguous: vector path
                n = len(neg) // 2 * 2
                for off in (0, 1):                                 # stride 2: scalar path
                    ok[off:n:2] &= torch.exp(neg[off:n:2]) == 0
                if n < len(neg):
                    ok[n:] &= torch.exp(neg[n:]) == 0
                return ok
            _EXP_UNDERFLOW[hi] = iv.cached_scan("exp_underflow", zero, iv._bits(64.0), hi)
    t = _EXP_UNDERFLOW[hi]
    return (iv._from_bits(t) if t <= hi else math.inf), upto


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
    # structural operations that keep the row-major order of the elements
    ORDERED = frozenset({"view", "reshape", "unsqueeze", "squeeze", "contiguous", "clone",
                         "detach", "view_as", "reshape_as", "flatten"})
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
        # relations that interval radii lose (each entry starts (tensor, its version), so an
        # in-place change drops it): id(m) -> (m, v, x, x's version, keepdim shape) for m = the
        # max of x over some dims (kept through order-preserving views and an all-true where);
        # id(y) -> (y, v) for y = x − max(x) (the max-shifted exp argument)
        self.maxof: dict[int, tuple] = {}
        self.shifted: dict[int, tuple] = {}
        self.note = ""                      # a site that may explain a later failure
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

    def _ieee(self, r: torch.Tensor, out: torch.Tensor, same: Any) -> torch.Tensor:
        """`_round` for one correctly rounded IEEE operation (+, −, ×, ÷ of two operands):
        where ``same`` (the operands are the same values in both runs, or a factor is an exact 0
        and the other stays finite) the result is the same value, radius 0 (±0 are one value
        here: `put`'s "radius 0" means equal floats, and no rule divides by a zero)."""
        return torch.where(torch.as_tensor(same), 0.0, self._round(r, out))

    def _inf(self, t: Any) -> torch.Tensor | bool:
        """Entries that are ±inf with radius 0 (the same infinity in both runs)."""
        if not isinstance(t, torch.Tensor):
            return math.isinf(float(t))
        return torch.isinf(t.detach()) & (self.r0(t) == 0)

    def _finite(self, t: Any) -> torch.Tensor | bool:
        """Entries finite in both runs (finite, with a finite radius)."""
        if not isinstance(t, torch.Tensor):
            return math.isfinite(float(t))
        return torch.isfinite(t.detach())

    def _exact_terms(self, fn, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """Entries of the contraction fn(A, B) (a matrix product or a two-operand einsum) that
        are the same value in both runs: at most one term can be nonzero and its two factors
        have radius 0 (every other term has an exact-zero factor, the other factor finite) —
        the sum is then that one product, rounded once, in whatever order the kernel adds."""
        rA, rB = self.r0(A).expand(A.shape), self.r0(B).expand(B.shape)
        a, b = A.detach().double(), B.detach().double()
        nzA, nzB = ((a != 0) | (rA > 0)).double(), ((b != 0) | (rB > 0)).double()
        exA, exB = ((a != 0) & (rA == 0)).double(), ((b != 0) & (rB == 0)).double()
        every, exact = fn(nzA, nzB), fn(exA, exB)
        return (every <= 1) & (every == exact)

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

    @staticmethod
    def _plain_index(idx: Any) -> bool:
        """An index that only adds axes or takes whole axes (None, ..., :): order-preserving."""
        parts = idx if isinstance(idx, tuple) else (idx,)
        return all(p is None or p is Ellipsis or (isinstance(p, slice) and p == slice(None))
                   for p in parts)

    # -- exact underflow (the compiled action heads: Eq. 1 / §3.1 of DuSell & Chiang)
    @staticmethod
    def _is(table: dict, t: Any) -> bool:
        """Whether ``t`` is recorded in ``table`` and was not modified in place since."""
        hit = table.get(id(t)) if isinstance(t, torch.Tensor) else None
        return hit is not None and hit[0] is t and hit[1] == t._version

    def _exp_exact(self, x: torch.Tensor, xv: torch.Tensor, rx: torch.Tensor) -> torch.Tensor:
        """Entries of exp(x ± r) that are the same float in both runs: x exactly ±0 with radius 0
        (exp gives exactly 1), x = −inf with radius 0 (exactly 0), and x + r ≤ −a*, x − r ≥ −U
        (exactly 0: every float32 of [−U, −a*] underflows, `exp_underflow`). CPU float32 only."""
        rx = rx.expand(xv.shape)
        exact = torch.zeros(xv.shape, dtype=torch.bool)
        if x.dtype != torch.float32 or x.device.type != "cpu":
            return exact
        exact |= (rx == 0) & ((xv == 0) | (xv == -math.inf))
        cand = ~exact & torch.isfinite(xv) & (xv + rx < 0)
        if bool(cand.any()):
            reach = float((rx - xv)[cand].max())
            a, upto = exp_underflow(reach)
            exact |= cand & (xv + rx <= -a) & (xv - rx >= -upto)
        return exact

    def _shifted_note(self, xv: torch.Tensor, rx: torch.Tensor, exact: torch.Tensor) -> str:
        """The site, for the message of a pass that then fails: exp of a max-shifted tensor (the
        NS stack's action weights, Eq. 1 / §3.1) whose entries are not all provably 0 or 1."""
        rx = rx.expand(xv.shape)
        bad = ~exact
        worst = float((xv + rx)[bad].max())
        low = float((rx - xv)[bad].max())
        a, _ = exp_underflow(low)
        where = (f"provably below −{a:.6g}, where float32 exp underflows to exactly 0 (scanned)"
                 if a < math.inf else f"inside the scanned range (to −{EXP_SCAN_CAP:g})")
        return (f"at the exp of the max-shifted log action weights (DuSell & Chiang Eq. 1 / "
                f"§3.1, inside the NS stack's step) {int(bad.sum())} of {bad.numel()} entries "
                f"are neither the maximum (exactly 1) nor {where}: z − max z + r reaches "
                f"{worst:.4g}, z − max z − r {-low:.4g}")

    def _shift(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
        """a − b where b is max(a) over some dims (`maxof`): in every group whose maximum is
        unique and keeps its lead over the others' radii, the maximum's entry is exactly 0 in
        both runs (x − x) — radius 0; the others move by r_j + r_max plus rounding. Returns
        False (no relation) to leave it to the plain rule."""
        if not (self._is(self.maxof, b) and isinstance(a, torch.Tensor)):
            return False
        _, _, x, version, shape = self.maxof[id(b)]
        pad = (1,) * (a.dim() - b.dim()) + tuple(b.shape)
        if x is not a or version != a._version or pad != shape \
                or tuple(out.shape) != tuple(a.shape):
            return False
        dims = tuple(d for d, n in enumerate(shape) if n == 1 and a.shape[d] != 1)
        if not dims:
            return False
        xv, rx = a.detach().double(), self.r0(a).expand(a.shape)
        top = xv == xv.amax(dims, keepdim=True)
        unique = top.sum(dims, keepdim=True) == 1
        r_top = torch.where(top, rx, 0.0).amax(dims, keepdim=True)
        others = torch.where(top, -math.inf, xv + rx).amax(dims, keepdim=True)
        lead = unique & (xv.amax(dims, keepdim=True) - r_top > others)
        zero = top & lead.expand(a.shape)
        if not bool((out.detach()[zero] == 0).all()):
            return False
        r = self._round(rx + r_top, out)
        plain = self._round(rx + self.r0(b), out)
        self.put(out, torch.where(zero, 0.0, torch.where(lead, r, plain)))
        self.shifted[id(out)] = (out, out._version)
        return True

    def _einsum(self, args: tuple, out: torch.Tensor) -> None:
        """A two-operand einsum (explicit output, no ellipsis) as a sum of products: the radius
        of `_affine`, n the number of terms per output entry; `_exact_terms` entries exact."""
        eq = args[0]
        ops = tuple(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) \
            else tuple(args[1:])
        if len(ops) != 2 or "->" not in eq or "." in eq:
            raise NoRule(f"einsum {eq!r} on {len(ops)} operands")
        A, B = ops
        lhs, rhs = eq.replace(" ", "").split("->")
        sizes = {}
        for subs, t in zip(lhs.split(","), (A, B)):
            sizes.update(zip(subs, t.shape))
        n = int(np.prod([sizes[c] for c in set(sizes) - set(rhs)] or [1]))

        def fn(x, y):
            return torch.einsum(eq, x, y)
        a, b, ra, rb = A.detach().double().abs(), B.detach().double().abs(), self.r0(A), \
            self.r0(B)
        ra, rb = ra.expand(A.shape), rb.expand(B.shape)
        r = fn(a, rb) + fn(ra, b) + fn(ra, rb)
        mag = fn(a + ra, b + rb)
        r = r + 2 * _gamma(n + 1, self.u) * mag + 2 * self.tiny * (mag > 0)
        self.put(out, torch.where(self._exact_terms(fn, A, B), 0.0, r))

    def _keep_max(self, src: Any, out: Any) -> None:
        """Carry a `maxof` relation through an order-preserving view of the max."""
        if self._is(self.maxof, src) and isinstance(out, torch.Tensor) \
                and out.numel() == src.numel():
            _, _, x, version, shape = self.maxof[id(src)]
            self.maxof[id(out)] = (out, out._version, x, version, shape)

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
            rad = self._round(r * (1 + 2 * _gamma(n + 2, self.u)), out) \
                + 8 * _gamma(n + 2, self.u) * (xv.abs().amax(dims, keepdim=True)
                                               if name == "log_softmax" or keep
                                               else xv.abs().amax(dims))
            if name == "amax":     # a max attained by an exact entry that no other can reach
                re = rx.expand(xv.shape)
                m = xv.amax(dims, keepdim=True)
                hit = torch.where(re == 0, xv, -math.inf).amax(dims, keepdim=True) == m
                below = (torch.where(re > 0, xv + re, -math.inf).amax(dims, keepdim=True) < m) \
                    | ~(re > 0).any(dim=dims, keepdim=True) if dims else hit
                same = hit & below
                rad = torch.where(same if keep else same.squeeze(dims), 0.0, rad)
            self.put(out, rad)
            if name == "amax" and bool(torch.isfinite(xv).all()):
                dims = tuple(d % x.dim() for d in dims)
                shape = tuple(1 if d in dims else n for d, n in enumerate(x.shape))
                self.maxof[id(out)] = (out, out._version, x, x._version, shape)
        elif name == "logaddexp":
            rb = self.r0(args[1]) if isinstance(args[1], torch.Tensor) else 0.0
            r = torch.maximum(rx, torch.as_tensor(rb, dtype=torch.float64))
            self.put(out, self._round(r, out).expand(out.shape).clone()
                     + 8 * self.u * (xv.abs() + mag))
        elif name == "exp":
            e = torch.exp(xv)
            r = e * torch.expm1(rx)
            r = r + 32 * self.u * (e + r) + 2 * self.tiny
            exact = self._exp_exact(x, xv, rx)
            if not bool(exact.all()) and self._is(self.shifted, x):
                self.note = self._shifted_note(xv, rx, exact)
            self.put(out, torch.where(exact, 0.0, r))
        else:                                                   # log
            if bool(((xv - rx) <= 0).logical_and(rx > 0).any()):
                raise NotExact("the argument of a log may reach 0")
            r = torch.where(rx > 0, -torch.log1p(-rx / xv.clamp(min=self.tiny)), 0.0)
            r = r + 32 * self.u * (mag + r) + 2 * self.tiny * (rx > 0)
            # log(±0) = −inf and log(1) = 0 exactly, in every kernel
            self.put(out, torch.where((rx == 0) & ((xv == 0) | (xv == 1)), 0.0, r))

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
                if name in self.ORDERED or (name == "__getitem__" and self._plain_index(args[1])):
                    self._keep_max(args[0], out)
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
            if isinstance(cond, torch.Tensor) and bool(cond.all()) \
                    and tuple(out.shape) == tuple(getattr(a, "shape", ())):
                self._keep_max(a, out)
        elif name in ("to", "float", "double", "type_as"):
            self.put(out, self._round(self.r0(args[0]), out) if out.dtype != args[0].dtype
                     else self.r0(args[0]))
        elif name in ("sub", "__sub__") and kwargs.get("alpha", 1) == 1 \
                and self._shift(args[0], args[1], out):
            pass
        elif base in ("add", "sub", "rsub", "radd", "iadd", "isub"):
            alpha = abs(kwargs.get("alpha", 1))
            a, b = args[0], args[1]
            ra = self.r0(a) if isinstance(a, torch.Tensor) else 0
            rb = self.r0(b) * alpha if isinstance(b, torch.Tensor) else 0
            same = (torch.as_tensor(ra) == 0) & (torch.as_tensor(rb) == 0) & (alpha == 1)
            if base not in ("iadd", "isub"):   # (in place, a already holds the result)
                # ±inf (radius 0) plus a finite number is that infinity in both runs
                same = same | (self._inf(a) & self._finite(b)) | (self._inf(b) & self._finite(a))
            r = self._ieee(ra + rb, out, same)
            target = args[0] if base in ("iadd", "isub") else out
            self.put(target, r.expand(target.shape).clone())
        elif base in ("mul", "rmul", "imul"):
            a, b = args[0], args[1]
            if not isinstance(b, torch.Tensor):
                r = self.r0(a) * abs(float(b))
                same = r == 0
            else:
                ra, rb = self.r0(a), self.r0(b)
                av, bv = a.detach().double(), b.detach().double()
                r = av.abs() * rb + bv.abs() * ra + ra * rb
                same = (ra == 0) & (rb == 0)
                if base != "imul":             # (in place, a already holds the result)
                    same = same | ((av == 0) & (ra == 0)) | ((bv == 0) & (rb == 0))
            self.put(args[0] if base == "imul" else out, self._ieee(r, out, same)
                     .expand(out.shape).clone())
        elif base in ("neg",):
            self.put(out, self.r0(args[0]))
        elif base in ("div", "truediv"):
            a, b = args[0], args[1]
            if isinstance(b, torch.Tensor) and self.rad(b) is not None:
                raise NoRule("division by a tensor with a radius")
            d = b.detach().double().abs() if isinstance(b, torch.Tensor) else abs(float(b))
            if isinstance(d, torch.Tensor) and bool((d == 0).any()):
                raise NoRule("division by a tensor with a zero entry")
            ra = self.r0(a)
            self.put(out, self._ieee(ra / d, out, ra == 0))
        elif name in ("linear",):
            x, W = args[0], args[1]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            self.put(out, self._affine([(x, W, True)], [b], out))
        elif name in ("mm", "matmul", "__matmul__", "bmm"):
            r = self._affine([(args[0], args[1])], [], out)
            self.put(out, torch.where(self._exact_terms(func, args[0], args[1]), 0.0, r))
        elif name == "einsum":
            self._einsum(args, out)
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
        elif name == "new_tensor":           # a copy of the data, not of the tensor it is called on
            data = args[1] if len(args) > 1 else kwargs.get("data")
            self.put(out, self.r0(data).clone() if isinstance(data, torch.Tensor) else None)
        elif name == "nan_to_num":
            x, rx = args[0], self.r0(args[0])
            bad = ~torch.isfinite(x.detach())
            if bool((bad & (rx > 0)).any()):
                raise NoRule("nan_to_num of a non-finite entry with a radius")
            self.put(out, torch.where(bad, 0.0, rx).expand(out.shape).clone())
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
        elif name in ("gt", "__gt__", "lt", "__lt__", "ge", "__ge__", "le", "__le__", "eq",
                      "__eq__", "ne", "__ne__"):
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
            try:
                with torch.no_grad(), mode:
                    states, logits = module(torch.as_tensor(ids))
            except (NotExact, NoRule) as exc:
                if mode.note:
                    raise type(exc)(f"{exc} ({mode.note})") from exc
                raise
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

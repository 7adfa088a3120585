"""The box induction, written once: per-unit radii grown to a fixed point, and the drift bound
for LSTM cells that do not contract.

Let E be the network's encoding of abstract configurations (box centres). Fix a cap ε > 0. The
induction checks, for every case a family enumerates (a configuration, or a local view covering
many, and an input symbol that keeps the machine live):

1. *step*: every state h with |h − E(c)| ≤ R (per unit, and per abstract state of c) is mapped by
   one network step into the R-box of E(δ(c, a)), and
2. *readout*: every such h gives the machine's output in c,

and that the initial state lies in its box. By induction the network's state stays in the box
of the machine's configuration on every string all of whose prefixes are live, of every length,
and its outputs agree with the machine's at every step.

Radii start at the initial state's own deviation (at least ``1e-3·ε``) and are widened to 1.5×
the image's deviation until the family of boxes is invariant (at most `MAX_ROUNDS` rounds; a
radius that would pass its limit stops the search). The verdict is always about the radii the
last pass used, so an invariance claimed is one that was checked.

LSTM cells (c = f·c + i·g) are not contracting where the forget gate is saturated at 1: cells
keep the cap as their radius, and a cell whose box is not kept moves by at most its drift D per
step (the own-cell term enters with a factor ≤ 1): ρ' ≤ (1+2u)·ρ + D. The cap then holds for every
length L with (ρ₀ + L·D)·(1+2u)^L ≤ ε, which is what the certificate reports (`drift_length`).
Under the "saturating" kernel model the gate is exactly 1 and `intervals.lstm_cell` maps the box
onto itself: D = 0 and every length is covered.

A family supplies only its enclosure (`BoxFamily`): one pass over its cases at radii R, the
readout check, and the description of a failing unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import torch

from pdanet.verify import intervals as iv
from pdanet.verify.certify.core import (
    MAX_ROUNDS,
    Certificate,
    FailingCase,
    Run,
    best_over_caps,
    ulp_then_saturating,
)

LIVE_NOTE = ("agreement covers every string whose prefixes are all live (the machine's prefix "
             "language)")


class StepPass(Protocol):
    """One pass over every case at radii R (S units × A abstract states)."""

    dev: np.ndarray       # (S, A) worst deviation of an image from its target, by successor state
    drift: np.ndarray     # (S,) cells: worst point-image deviation where the box is not kept
    settled: np.ndarray   # (S,) cells: worst box-image deviation where the box is kept
    cases: int            # cases enclosed


class BoxFamily(Protocol):
    """What a family of networks gives the box induction."""

    s0: np.ndarray            # (S,) the network's initial state
    E0: np.ndarray            # (S,) its box centre
    cells: np.ndarray         # (S,) bool: LSTM cells (radius = the cap, drift bounded)
    states: int               # A: abstract states that radii are indexed by (1: per unit only)
    initial: int              # the initial configuration's abstract state
    initial_config: str       # the initial configuration, for messages
    growth: tuple[float, ...]  # non-cell radii may grow to f·ε (f in growth, tried in order)

    def step(self, R: np.ndarray, kernel: str, stage: str) -> StepPass:
        """Enclose one step of every case with the boxes of radii R (S, A)."""

    def readout(self, R: np.ndarray) -> tuple[FailingCase | None, float, int]:
        """Check every output on the boxes of radii R: (failing case or None, slack, cases)."""

    def failing(self, kind: str, j: int, ps: Any, R: np.ndarray) -> FailingCase:
        """The case where unit j's deviation is worst in pass ``ps``, as a failing case."""

    def label(self, j: int) -> str:
        """What state unit j holds (j ≥ H: an LSTM cell)."""


@dataclass(frozen=True)
class LSTMImage:
    """One LSTM step on boxes, per case: the images of h and of the cell box, the cell box's
    deviation from its target, and the two cell statistics the drift bound needs — a case
    either contracts its cell box (to ≤ half the successor's radius: ``settled`` is its
    deviation) or counts as drift (``drift``: the deviation of the image of the cell's centre as
    a point; the radius it carries enters with a factor f ≤ 1, so ρ′ ≤ (1+2u)·ρ + drift). A NaN
    box image is not kept, and its NaN reaches ``d_box``."""

    h: iv.Interval
    c: iv.Interval
    d_box: np.ndarray
    settled: np.ndarray
    drift: np.ndarray


def lstm_image(z: tuple[iv.Interval, iv.Interval, iv.Interval, iv.Interval], c: np.ndarray,
               rho: np.ndarray, target: np.ndarray, rho_next: np.ndarray, dtype: torch.dtype,
               kernel: str) -> LSTMImage:
    """`LSTMImage` of the gate pre-activations ``z`` = (i, f, g, o) on the cell box of centre
    ``c`` and radius ``rho``, against the target cell ``target`` of radius ``rho_next``."""
    zi, zf, zg, zo = z
    gi, gf = iv.sigmoid(zi, dtype, kernel), iv.sigmoid(zf, dtype, kernel)
    gg, go = iv.tanh(zg, dtype, kernel), iv.sigmoid(zo, dtype, kernel)
    cn = iv.lstm_cell(gf, iv.Interval.around(c, rho), gi, gg, dtype)
    hn = iv.mul(go, iv.tanh(cn, dtype, kernel), dtype)
    cpt = iv.lstm_cell(gf, iv.Interval.point(c), gi, gg, dtype)
    d_point = np.maximum(cpt.hi - target, target - cpt.lo)
    d_box = np.maximum(cn.hi - target, target - cn.lo)
    kept = d_box <= 0.5 * rho_next
    return LSTMImage(hn, cn, d_box, np.where(kept, d_box, 0.0), np.where(kept, 0.0, d_point))


def drift_length(rho0: float, D: float, cap: float, u: float) -> int:
    """The largest L ≤ 10¹⁵ with (ρ₀ + L·D)·(1+2u)^L ≤ cap (bisection; 1 at least)."""
    lo, hi = 1, 10**15
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if math.log(rho0 + mid * D) + mid * math.log1p(2 * u) <= math.log(cap):
            lo = mid
        else:
            hi = mid - 1
    return lo


def induct(fam: BoxFamily, run: Run, cap: float) -> Certificate:
    """One box induction at cap ``cap`` under ``run.kernel`` (module docstring). Every
    comparison is written so that NaN fails ("within" is ``dev <= R``)."""
    dtype = run.dtype

    def result(ok: bool, failing: FailingCase | None, sm: float, rm: float, cases: int,
               **kw) -> Certificate:
        return run.certificate(ok, eps=cap, state_margin=sm, readout_margin=rm, cases=cases,
                               failing=failing, **kw)

    s0, E0, cells = fam.s0, fam.E0, fam.cells
    nc = ~cells
    dev0 = np.abs(s0 - E0)
    # the induction starts inside the ε-box: every unit, cells included (a cell's radius is the
    # cap whatever its initial deviation, so nothing below would compare it)
    if not (dev0 <= cap).all():
        j = int(np.argmax(~(dev0 <= cap)))
        fc = FailingCase("initial", fam.initial_config, None, j, fam.label(j),
                         (float(s0[j]), float(s0[j])), (float(E0[j] - cap), float(E0[j] + cap)))
        return result(False, fc, cap - float(dev0[j]), math.nan, 0)
    floor = 1e-3 * cap
    for limit in (f * cap for f in fam.growth):
        R = np.full((len(s0), fam.states), floor)
        R[:, fam.initial] = np.maximum(dev0, floor)
        R[cells] = cap
        for r in range(MAX_ROUNDS):
            ps = fam.step(R, run.kernel, f"check ε={cap:g} round {r + 1}")
            grow = ~(ps.dev <= R) & nc[:, None]
            if not grow.any() or not (ps.dev[nc] <= limit).all() or r == MAX_ROUNDS - 1:
                break  # R is the radii `ps` was computed with: the verdict below is about them
            R = np.where(grow, np.minimum(np.maximum(ps.dev * 1.5, R), limit), R)
        if (ps.dev[nc] <= R[nc]).all():
            break
    cases = ps.cases
    finite = (np.isfinite(ps.dev).all(1) & np.isfinite(ps.drift) & np.isfinite(ps.settled)
              & np.isfinite(R).all(1))
    if not finite.all():
        j = int(np.argmax(~finite))
        return result(False, fam.failing("nonfinite", j, ps, R), math.nan, math.nan, cases)
    slack = R - ps.dev
    if not (ps.dev[nc] <= R[nc]).all():  # non-cell units must be invariant within their limit
        j = int(np.argmax(np.where(nc, -slack.min(1), -np.inf)))
        return result(False, fam.failing("step", j, ps, R), float(slack[nc].min()), math.nan,
                      cases)
    state_margin = float(slack[nc].min()) if nc.any() else cap
    fail, rslack, rcases = fam.readout(R)
    cases += rcases
    if fail is not None or not rslack > 0:
        return result(False, fail, state_margin, rslack, cases)
    if (ps.dev[cells] <= R[cells]).all():
        return result(True, None, state_margin, rslack, cases)
    # cells still moving: a cell's radius grows by ≤ D per step; the cap holds while ≤ ε
    D = float(ps.drift[cells].max())
    # a cell whose box is kept lands within `settled`; one that moves grows by ≤ D per step
    rho0 = max(float(dev0[cells].max()), float(ps.settled[cells].max()))
    if D == 0.0 and rho0 == 0.0:  # points map exactly onto points
        return result(True, None, state_margin, rslack, cases)
    if not D < cap - rho0:
        j = int(np.argmax(np.where(cells, ps.drift, -np.inf)))
        return result(False, fam.failing("step", j, ps, R), cap - D, rslack, cases)
    L = drift_length(rho0, D, cap, iv.unit_roundoff(dtype))
    note = (f"LSTM cells are not contracting where forget gates are saturated at 1: each step may "
            f"move a cell by ≤ {D:.3g} in {str(dtype).replace('torch.', '')}, so the cap "
            f"ε = {cap:g} holds for {L:,} steps")
    return result(True, None, min(state_margin, cap - D), rslack, cases, all_lengths=False,
                  max_length=L, extra=(note,))


def prove(fam: BoxFamily, run: Run, eps: float | None, retry: bool = False) -> Certificate:
    """`induct` at the cap ``eps``, or the best over `EPS_LADDER` (`best_over_caps`); with
    ``retry``, under the saturating kernel model too when the ulp model proves less than every
    length (`ulp_then_saturating`)."""
    def attempt(kernel: str) -> Certificate:
        at = replace(run, kernel=kernel)
        return best_over_caps(lambda cap: induct(fam, at, cap), eps)

    return ulp_then_saturating(attempt, run.kernel, run.dtype) if retry else attempt(run.kernel)


__all__ = ["LIVE_NOTE", "BoxFamily", "LSTMImage", "StepPass", "drift_length", "induct",
           "lstm_image", "prove"]

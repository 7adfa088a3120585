"""Run a machine and its compiled network side by side on the same strings and compare.

At every step t = 0 … len(s) of every checked string s, two things are compared: (a) each field
that the network decodes (``net.decode(states)``) and the machine's batch simulator also has
(``"state"``, ``"stack"``, ``"depth"``, …), and (b) the network's readout (``net.readout(logits)``)
with the machine's ``"output"``. Only live prefixes are compared (a dead prefix is outside the
language's prefix set; what a network does there is unspecified).

Strings come in phases, checked in this order and stopping at the first disagreement:

1. ``given``: explicit strings passed by the caller, in the order given;
2. ``exhaustive``: every live prefix of length ≤ ``max_length``, in shortlex order;
3. ``random``: random live strings (lengths uniform in ``sample_lengths``), shortest first;
4. ``long``: strings of ``long_length`` symbols that keep the stack busy.

Integer and boolean fields are compared exactly. Real-valued fields (the machine's array is
float, e.g. the ``"reading"`` of a weighted PDA against an NS-RNN) are compared with a tolerance:
an entry agrees when ``|got − expected| ≤ atol + rtol·|expected|`` (equal infinities agree, NaN
never does). The defaults follow the network's dtype: ``rtol=1e-5, atol=1e-7`` for float64 and
``rtol=1e-3, atol=1e-6`` otherwise (float32, half); `verify` takes ``rtol``/``atol`` to override.

The counterexample is therefore the first failing string in that order and the first failing
step within it; at one step the fields are compared in the machine's field order, output last.
All comparisons are whole-array numpy operations per batch; the only loop is over batches. The
network runs in a worker thread while the machine simulates the same batch (torch releases the
GIL), so on two or more free cores a batch costs about max(network, machine) plus the
comparison; a large batch runs as two halves, the first decoded and compared while the worker
runs the second (``overlap=False``: one thread, network then machine). Networks whose decoder
reads only part of the state say so with ``forward_decoded`` (`CompiledNetwork`), which the
verifier runs instead of ``forward``. A module with ``forward_bounded`` (DuSell & Chiang's, whose
full model is O(T³) a string) is run through it instead: positions it could not compute within
its memory and time budget are not compared, and the report says how many and what they would
need (`Coverage`; the report is then not ``ok`` unless a counterexample was found first).

Long strings (a batch of at least `WINDOW_MIN_STEPS` steps) of a real-time pushdown machine
against a stack RNN are compared incrementally: the network runs with its memory kept as a
discrete stack (``StackRNN.forward_window``, which proves at every step that this is exact) and
the machine without whole stacks (``run_batch_window``); the fields compared are ``state``,
``depth``, ``top``, ``output`` and ``stack_top`` (the top three cells), which by induction decide
equality of the whole stacks (see `_forward_window`). Each step then costs O(1) however deep the
stack gets, instead of O(depth); where the proof does not go through, whole stacks are compared.
Long strings of a `pdanet.automata.store.StoreTransducer` (stack, queue or deque) against a
network with the same store (``module.store_kind``, e.g. `pdanet.models.grefenstette.
GrefenstetteRNN`) are compared the same way, by ``state``, ``size``, ``offset``, ``output`` and
the `WINDOW_CELLS` cells at each end (``store_top``, ``store_bottom``; see
`_compare_store_window`); a row where these differ is compared again with whole stores, so the
verdict and the counterexample are those of the whole comparison.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from pdanet import limits
from pdanet.automata.base import Machine
from pdanet.constructions.base import as_dtype
from pdanet.errors import InputError, VerificationError
from pdanet.verify import strings as S
from pdanet.verify.report import Counterexample, Coverage, PhaseResult, Report, readable

if TYPE_CHECKING:
    from pdanet.verify.distribution import LMReport

DEFAULT_MAX_BATCH_STEPS = 1 << 19  # positions (rows × (T+1)) per network call
# a batch at least this long is compared incrementally (top cells only) where both sides can
WINDOW_MIN_STEPS = 512
WINDOW_CELLS = 3


@dataclass(frozen=True)
class BatchOutcome:
    """Result of comparing one batch: positions compared and the first failure, if any."""

    strings: int
    steps: int
    fields: tuple[str, ...]
    failure: tuple[int, int, str] | None = None  # (row, step, field)
    expected: Any = None
    got: Any = None
    coverage: Coverage | None = None  # partial coverage (a network's ``forward_bounded``)


def _device(net) -> torch.device:
    for p in net.module.parameters():
        return p.device
    for b in net.module.buffers():
        return b.device
    return torch.device("cpu")


def _forward(net, ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """The network's states (only the part its decoder reads, where it says so), logits, and
    the module's ``forward_bounded`` run or None.

    Partial-coverage hook: a module with ``forward_bounded`` (`pdanet.models.dusell_chiang.
    DuSellChiangRNN`, whose full model costs O(T²) memory and O(T³) time a string) gives
    `forward`'s values only up to a step per row (``checked``) within a memory and time budget;
    `compare_batch` compares those positions only and counts the rest as unchecked
    (`Coverage`), instead of failing on the whole batch."""
    ids = torch.as_tensor(ids, device=_device(net))
    with torch.no_grad():
        bounded = getattr(getattr(net, "module", None), "forward_bounded", None)
        if bounded is not None and ids.ndim == 2 and ids.shape[1] > 0:
            run = bounded(ids)
            return run.states, run.logits, run
        fwd = getattr(net, "forward_decoded", None)  # the decoded part of the state suffices
        return (*(fwd(ids) if fwd is not None else net.forward(ids)), None)


def _bounded_mask(mask: np.ndarray, rows: slice, run: Any
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """Partial-coverage hook (see `_forward`): restrict ``mask[rows]`` to the positions the
    ``forward_bounded`` run computed; (unchecked, from the full model) position masks of the
    rows, or None for an ordinary network."""
    if run is None:
        return None
    t = np.arange(mask.shape[1])[None, :]
    m = mask[rows]
    checked = np.asarray(run.checked)[:, None]
    unchecked = m & (t > checked)
    full = m & (t > np.asarray(run.exact)[:, None]) & (t <= checked)
    mask[rows] = m & ~unchecked
    return unchecked, full


def _coverage(parts: tuple[np.ndarray, np.ndarray], run: Any, upto: int, step: int | None
              ) -> Coverage:
    """The `Coverage` of rows 0 … upto−1 of a bounded run (the last one only to ``step``
    when it holds the counterexample)."""
    unchecked, full = (p[:upto].copy() for p in parts)
    if step is not None and upto:
        unchecked[upto - 1, step + 1:] = False
        full[upto - 1, step + 1:] = False
    short = unchecked.any(1)
    need = np.asarray(run.needed_bytes)[:upto][short]
    return Coverage(int(full.any(1).sum()), int(full.sum()), int(short.sum()),
                    int(unchecked.sum()), int(need.max()) if len(need) else 0,
                    run.reason if short.any() else "")


def _forward_window(machine: Machine, net, ids: np.ndarray):
    """(fields, decoded) of the incremental comparison, or None when it does not apply.

    For a real-time pushdown machine (``run_batch_window``) and a stack network with
    ``forward_window`` and a ``window_decoder`` (`StackRNN`), both sides give, per step, the
    state, depth, output and the top `WINDOW_CELLS` stack cells only, in O(1) per step. That
    decides agreement of the whole stacks at every step: by induction, if the stacks agree at
    step t−1 (depth d), each side's step keeps the cells below d − 1 and writes at most two
    (the machine's γ has length ≤ 2 and the network, proven saturated at every step by
    ``forward_window``, pops at most one memory cell, pushes at most one and may change the top
    it holds in its controller), so with equal depths at t the stacks can only differ within
    the top three cells, which are compared."""
    T = ids.shape[1]
    module = getattr(net, "module", None)
    window = getattr(module, "window_decoder", None)
    run_window = getattr(machine, "run_batch_window", None)
    if (T < WINDOW_MIN_STEPS or window is None or run_window is None
            or not getattr(machine, "is_realtime", False)
            or not getattr(machine, "is_normal", False)
            or getattr(net, "steps_per_symbol", 1) != 1):
        return None
    with torch.no_grad():
        out = module.forward_window(torch.as_tensor(ids, device=_device(net)), WINDOW_CELLS)
    if out is None:
        return None
    states, logits = out
    got = dict(window(states.cpu().numpy()))
    got["output"] = net.readout(logits)
    return got


# the window fields a network gives per store kind (besides state, size and output): a stack's
# bottom end never moves, so its top cells suffice
STORE_WINDOW_FIELDS = {"stack": ("store_top",),
                       "queue": ("store_top", "store_bottom", "offset"),
                       "deque": ("store_top", "store_bottom", "offset")}


def _store_window_applies(machine: Machine, net, T: int) -> bool:
    """True when a batch of T steps is compared by store ends (`_compare_store_window`): a long
    batch, a store machine with ``run_batch_window`` and a one-step-per-symbol network whose
    module has the same store kind and a ``forward_window``."""
    kind = getattr(machine, "store", None)
    module = getattr(net, "module", None)
    return (T >= WINDOW_MIN_STEPS and isinstance(kind, str) and kind in STORE_WINDOW_FIELDS
            and getattr(module, "store_kind", None) == kind
            and callable(getattr(module, "forward_window", None))
            and callable(getattr(machine, "run_batch_window", None))
            and getattr(machine, "is_realtime", False)
            and getattr(net, "steps_per_symbol", 1) == 1)


def _forward_store_window(machine: Machine, net, ids: np.ndarray) -> dict[str, np.ndarray] | None:
    """The network's side of `_compare_store_window`: ``state`` (the decoder's, read from the
    controller part of the states), ``size``, the window fields of `STORE_WINDOW_FIELDS` and
    ``output``, from ``module.forward_window`` (states [h; r; n; top cells; bottom cells;
    offset], the layout of `StoreTransducer.run_batch_window`); None where that run is not
    provably exact. Dead positions (state −1) read size −1, cells −1 and offset 0, as the
    machine's."""
    kind = machine.store
    c = WINDOW_CELLS
    with torch.no_grad():
        out = net.module.forward_window(torch.as_tensor(ids, device=_device(net)), c)
    if out is None:
        return None
    states, logits = out
    s = states.cpu().numpy()
    tail = c if kind == "stack" else 2 * c + 1
    Hr = s.shape[-1] - 1 - tail                   # [h; r] before n and the window
    head = np.concatenate([s[..., :Hr], np.zeros(s.shape[:2] + (1,), s.dtype)], -1)
    state = np.asarray(net.decode(head)["state"])   # n = 0: the decoder reads no cells
    dead = state < 0
    win = np.rint(s[..., Hr:]).astype(np.int64)
    got = {"state": state, "size": np.where(dead, -1, win[..., 0]),
           "store_top": np.where(dead[..., None], -1, win[..., 1:1 + c])}
    if kind != "stack":
        got["store_bottom"] = np.where(dead[..., None], -1, win[..., 1 + c:1 + 2 * c])
        got["offset"] = np.where(dead, 0, win[..., 1 + 2 * c])
    got["output"] = net.readout(logits)
    return got


def _compare_store_window(machine: Machine, net, ids: np.ndarray, lengths: np.ndarray,
                          check_live: bool, executor: Executor | None, tol: Tolerance
                          ) -> BatchOutcome | None:
    """`compare_batch` for a long batch of a store machine by the stores' ends, O(1) per step,
    or None where the network's `forward_window` is not provably exact.

    Both sides give, per step, ``state``, ``size``, ``output``, the `WINDOW_CELLS` cells at the
    top end and (queue, deque) at the bottom end, and the bottom end's ``offset`` (pops minus
    pushes there so far). Read each store in a fixed frame: its cells sit at positions
    offset … offset + size − 1. Induction: if the whole stores agree at step t − 1 and the
    offsets and sizes agree at step t, then so do the whole stores at step t, exactly when the
    end windows agree. A step of either side (the machine's, by definition; the network's, a
    discrete pop and push at each end, which ``forward_window`` proves at every step) removes
    at most the end cell at each end and writes only the new end cells, at positions
    offset_t and offset_t + size_t − 1; every other cell of the new store is an old cell that
    keeps its position. With equal frames, the new stores can differ only at those two
    positions, and these are in the windows (at least one cell each). A stack's bottom end never
    moves (offset 0), so its top cells suffice. Equal sizes and windows without the offsets are
    not enough: on a queue X X X X Y X X X X a no-op and a replace X → X agree in size and in
    three cells at each end, but not in the middle.

    Conversely, the offsets may differ where the stores agree (a replace X → X against a no-op
    on a queue of X's), so a row with any difference is compared again with whole stores
    (`compare_batch` with ``window=False``): the outcome (first failing row, step and field, and
    the values) is then exactly that of the whole comparison. Rows before it agree in every
    window field at every step, hence in whole stores, by the induction above."""
    B, T = ids.shape
    pending = executor.submit(_forward_store_window, machine, net, ids) if executor else None
    try:
        trace = machine.run_batch_window(ids, lengths, WINDOW_CELLS)
        got = pending.result() if pending else _forward_store_window(machine, net, ids)
    finally:
        if pending:
            pending.cancel()
            wait([pending])
    if got is None:
        return None
    expected = dict(trace.fields)
    mask = np.arange(T + 1)[None, :] <= lengths[:, None]
    if check_live:
        dead = S.dead_batch(machine, expected)
        mask &= ~dead if dead is not None else S.live_mask(machine, ids, lengths, expected)
    names = [n for n in expected if n in got and n != "output"] + ["output"]
    bad_any, _ = _differences(expected, got, names, mask, slice(0, B), tol)
    for b in np.flatnonzero(bad_any.any(axis=1)):
        b = int(b)
        whole = compare_batch(machine, net, ids[b:b + 1], lengths[b:b + 1], check_live, None,
                              tol, window=False)
        if whole.failure is not None:
            _, t, name = whole.failure
            return BatchOutcome(b + 1, int(mask[:b].sum()) + whole.steps, whole.fields,
                                (b, t, name), whole.expected, whole.got)
    return BatchOutcome(B, int(mask.sum()), tuple(names))


def _decode(net, states: torch.Tensor, logits: torch.Tensor) -> dict[str, np.ndarray]:
    """The network's decoded fields and its readout (as ``"output"``)."""
    got = dict(net.decode(states))
    got["output"] = net.readout(logits)
    return got


# with an executor, a batch of at least this many rows (of a machine with fixed-width fields) is
# run as two halves, so that the first half is decoded and compared while the network runs the
# second
PIPELINE_ROWS = 256


@dataclass(frozen=True)
class Tolerance:
    """Real-valued fields agree where ``|got − expected| ≤ atol + rtol·|expected|``."""

    rtol: float
    atol: float

    @classmethod
    def for_dtype(cls, dtype: Any, rtol: float | None = None,
                  atol: float | None = None) -> Tolerance:
        """The defaults of the module docstring for a network dtype, with overrides."""
        wide = dtype in (torch.float64, np.float64) or str(dtype).endswith("float64")
        d_rtol, d_atol = (1e-5, 1e-7) if wide else (1e-3, 1e-6)
        out = cls(d_rtol if rtol is None else float(rtol), d_atol if atol is None else float(atol))
        if not (out.rtol >= 0 and out.atol >= 0):
            raise InputError(f"rtol and atol must be ≥ 0, got rtol={rtol!r}, atol={atol!r}")
        return out


def _net_dtype(net) -> Any:
    """The network's float dtype, or None when it has no weights to tell."""
    try:
        return getattr(net, "dtype", None)
    except StopIteration:
        return None


def _is_real(a: np.ndarray) -> bool:
    return np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.complexfloating)


def _positions_differ(expected: np.ndarray, got: np.ndarray,
                      tol: Tolerance | None = None) -> np.ndarray:
    """(B, T+1) bool: positions where any entry of a (B, T+1, ...) field differs (exactly, or
    beyond `tol` when the machine's field is real-valued).

    When both arrays keep their trailing (field) axes outermost in memory (Fortran order, as
    the transpose of a field-major buffer), the entries of a position are OR-ed plane by plane;
    otherwise they are counted with one float32 matrix-vector product (exact for 0/1 counts),
    which is several times faster than ``.any(axis=-1)`` over a short contiguous last axis."""
    if tol is not None and _is_real(expected):
        e = np.asarray(expected, dtype=np.float64)
        g = np.asarray(got, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            diff = ~np.isclose(g, e, rtol=tol.rtol, atol=tol.atol)
    else:
        diff = np.not_equal(expected, got)  # order K: a layout the inputs share is kept
    if diff.ndim == 2:
        return diff
    B, T1 = diff.shape[:2]
    if diff.flags.f_contiguous and not diff.flags.c_contiguous:
        return np.logical_or.reduce(diff.reshape(B, T1, -1, order="F"), axis=-1)
    flat = np.ascontiguousarray(diff).reshape(B * T1, -1)
    if flat.shape[1] == 1:
        return flat[:, 0].reshape(B, T1)
    counts = flat.view(np.uint8).astype(np.float32) @ np.ones(flat.shape[1], dtype=np.float32)
    return (counts > 0).reshape(B, T1)


def compare_batch(machine: Machine, net, ids: np.ndarray, lengths: np.ndarray,
                  check_live: bool = True, executor: Executor | None = None,
                  tol: Tolerance | None = None, window: bool = True) -> BatchOutcome:
    """Run machine and network on one padded batch and find its first disagreement.

    Real-valued fields are compared within `tol` (default: `Tolerance.for_dtype` of the
    network's dtype); integer and boolean fields exactly.

    Positions compared: t ≤ length, and (with ``check_live``) only where the prefix is live.
    With an ``executor`` the network runs in a worker thread while the machine is simulated
    (torch releases the GIL during the forward pass, so the two overlap); a batch of at least
    `PIPELINE_ROWS` rows of a machine whose fields have a fixed width
    (``machine.fixed_width_fields``: the decoded width of part of a batch is that of the whole)
    then runs as two halves, the first decoded and compared in this thread while the worker
    runs the second. The outcome is the same either way.

    ``window`` (default True): a long batch (`WINDOW_MIN_STEPS` steps or more) is compared by the
    ends of the stacks or stores where both sides can (see the module docstring); False
    compares whole stacks and stores.
    """
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    B, T = ids.shape
    if tol is None:
        tol = Tolerance.for_dtype(_net_dtype(net))
    if window and _store_window_applies(machine, net, T):
        outcome = _compare_store_window(machine, net, ids, lengths, check_live, executor, tol)
        if outcome is not None:
            return outcome
    windowed = _forward_window(machine, net, ids) if window else None
    if windowed is not None:       # long strings: compare the top cells, O(1) per step
        trace = machine.run_batch_window(ids, lengths, WINDOW_CELLS)
        expected = dict(trace.fields)
        mask = np.arange(T + 1)[None, :] <= lengths[:, None]
        if check_live:
            dead = S.dead_batch(machine, expected)
            mask &= ~dead if dead is not None else S.live_mask(machine, ids, lengths, expected)
        names = [n for n in expected if n in windowed and n != "output"] + ["output"]
        bad = _first_difference(expected, windowed, names, mask, slice(0, B), tol)
        if bad is not None:
            b, t, name = bad
            steps_done = int(mask[:b].sum()) + int(mask[b, : t + 1].sum())
            return BatchOutcome(b + 1, steps_done, tuple(names), (b, t, name),
                                expected[name][b, t], np.asarray(windowed[name])[b, t])
        return BatchOutcome(B, int(mask.sum()), tuple(names))
    split = (executor is not None and B >= PIPELINE_ROWS
             and getattr(machine, "fixed_width_fields", False))
    chunks = [slice(0, B // 2), slice(B // 2, B)] if split else [slice(0, B)]
    pending = [executor.submit(_forward, net, ids[c]) for c in chunks] if executor else None
    try:
        trace = machine.run_batch(ids, lengths)
        expected = dict(trace.fields)
        if "output" not in expected:
            raise VerificationError(
                f"{type(machine).__name__}.run_batch returned no 'output' field; the verifier "
                "needs the machine's output at every step"
            )
        mask = np.arange(T + 1)[None, :] <= lengths[:, None]
        if check_live:
            dead = S.dead_batch(machine, expected)
            if dead is not None:
                mask &= ~dead
            else:
                mask &= S.live_mask(machine, ids, lengths, expected)
        names = None
        cover = None
        for i, rows in enumerate(chunks):
            states, logits, run = pending[i].result() if pending else _forward(net, ids)
            parts = _bounded_mask(mask, rows, run)      # partial coverage (`_forward`)
            got = _decode(net, states, logits)
            if names is None:
                names = [n for n in expected if n in got and n != "output"] + ["output"]
            bad = _first_difference(expected, got, names, mask, rows, tol)
            if parts is not None:
                upto = (bad[0] + 1 if bad is not None else rows.stop) - rows.start
                part = _coverage(parts, run, upto, bad[1] if bad is not None else None)
                cover = part if cover is None else cover + part
            if bad is not None:
                b, t, name = bad
                steps_done = int(mask[:b].sum()) + int(mask[b, : t + 1].sum())
                return BatchOutcome(b + 1, steps_done, tuple(names), (b, t, name),
                                    expected[name][b, t], np.asarray(got[name])[b - rows.start, t],
                                    cover)
        return BatchOutcome(B, int(mask.sum()), tuple(names), coverage=cover)
    finally:                          # never leave the worker running on this batch
        if pending:
            for p in pending:
                p.cancel()
            wait(pending)


CELL_FIELDS = ("stack", "store")  # (B, T, W) cells, −1 past the end; W is each side's own


def _same_width(name: str, e: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stack or store field (`CELL_FIELDS`) of both sides padded with −1 to one width: a network
    that decodes more (or fewer) cells than the machine holds then differs at a position, which is
    a counterexample, not a format error. Other fields are returned as they are."""
    if (name in CELL_FIELDS and e.ndim == g.ndim == 3 and e.shape[:2] == g.shape[:2]
            and e.shape[2] != g.shape[2]):
        W = max(e.shape[2], g.shape[2])
        pad = lambda a: np.pad(a, ((0, 0), (0, 0), (0, W - a.shape[2])), constant_values=-1)
        return pad(e), pad(g)
    return e, g


def _first_difference(expected: dict, got: dict, names: list, mask: np.ndarray, rows: slice,
                      tol: Tolerance) -> tuple[int, int, str] | None:
    """(row, step, field) of the first compared position in `rows` where the network's decoded
    fields or readout `got` (for those rows) differ from the machine's, or None."""
    bad_any, bad_by_field = _differences(expected, got, names, mask, rows, tol)
    rows_bad = bad_any.any(axis=1)
    if not rows_bad.any():
        return None
    b = int(rows_bad.argmax())
    t = int(bad_any[b].argmax())
    name = next(n for n, d in zip(names, bad_by_field) if d[b, t])
    return rows.start + b, t, name


def _differences(expected: dict, got: dict, names: list, mask: np.ndarray, rows: slice,
                 tol: Tolerance) -> tuple[np.ndarray, list[np.ndarray]]:
    """(positions where any field differs, the same per field), each (len(rows), T+1), for the
    compared positions (`mask`) of `rows`; VerificationError for fields of different shapes."""
    n = rows.stop - rows.start
    m = mask[rows]
    bad_any = np.zeros((n, mask.shape[1]), dtype=bool)
    bad_by_field = []
    for name in names:
        e, g = _same_width(name, np.asarray(expected[name])[rows], np.asarray(got[name]))
        if e.shape != g.shape:
            what = "readout" if name == "output" else f"decoded field {name!r}"
            raise VerificationError(
                f"the network's {what} has shape {g.shape} but the machine's has {e.shape} (rows "
                f"{rows.start}..{rows.stop - 1} of the batch); the decoder/reader must return "
                "arrays in the machine's run_batch format"
            )
        diff = _positions_differ(e, g, tol)
        diff &= m
        bad_by_field.append(diff)
        bad_any |= diff
    return bad_any, bad_by_field


def _batches(ids: np.ndarray, lengths: np.ndarray, batch_size: int, max_batch_steps: int
             ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Consecutive slices of at most `batch_size` rows and about `max_batch_steps` positions,
    each trimmed to its longest string (but at least one step wide)."""
    n = len(lengths)
    lo = 0
    while lo < n:
        width = int(lengths[lo:lo + batch_size].max(initial=0)) + 1
        rows = max(1, min(batch_size, max_batch_steps // width))
        hi = min(n, lo + rows)
        T = int(lengths[lo:hi].max(initial=0))
        if T == 0:  # only empty strings: give the network one (uncompared) padding step,
            yield np.full((hi - lo, 1), -1, dtype=np.int64), lengths[lo:hi]  # torch RNNs need T ≥ 1
        else:
            yield ids[lo:hi, :T], lengths[lo:hi]
        lo = hi


@dataclass(frozen=True)
class _Phase:
    name: str
    description: str
    make: Callable[[], tuple[np.ndarray, np.ndarray]]
    check_live: bool
    want_length: int | None = None  # every string should have this length (long phase)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    """A real number that is not a boolean and not NaN."""
    return (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            and not math.isnan(value))


_INT_FIELDS = {"samples": 0, "long_length": 0, "long_samples": 0, "batch_size": 1,
               "max_strings": 1, "max_batch_steps": 1}  # name -> least value


@dataclass(frozen=True, eq=False)
class VerifyOptions:
    """What `verify` checks and how: one immutable value, validated on construction (InputError
    naming the bad field); `verify(machine, net, options, **overrides)` takes one, with keyword
    overrides replaced into it and validated the same way.

    ``max_length``: every live prefix up to this length (None: skip); ``samples`` random live
    strings with lengths uniform in ``sample_lengths`` (an int or an inclusive (low, high); default
    ``(max_length + 1, max(4·max_length, 16))``, beyond what the exhaustive phase covers, or
    (0, 16) without one); ``long_samples`` strings of ``long_length`` symbols kept busy
    (``machine.sample(..., busy=)`` when available, ``busy`` in [0, 1]); ``strings``: explicit
    strings checked first (InputError names any symbol outside the alphabet), or the same already
    encoded as a 2-D array of alphabet indices padded with -1 (as `Machine.encode` returns them).
    ``dtype`` rebuilds the network in that floating dtype first (`CompiledNetwork.with_scale`).
    ``rtol``/``atol``: tolerance for real-valued fields (e.g. an NS-RNN's ``"reading"``):
    agreement is ``|got − expected| ≤ atol + rtol·|expected|``; by default 1e-5/1e-7 for a float64
    network and 1e-3/1e-6 otherwise. Integer and boolean fields (states, stacks, outputs) are
    always compared exactly. ``seed`` seeds the random phases. ``batch_size`` rows and about
    ``max_batch_steps`` positions per network call; ``max_strings`` caps the exhaustive phase.
    ``overlap``: run the network in a worker thread while the machine simulates the same batch
    (faster when a core is free; on a saturated CPU, ``False`` avoids the two threads
    contending). ``progress``: progress bars (tqdm).
    """

    max_length: int | None = 6
    samples: int = 1000
    long_length: int = 1000
    long_samples: int = 16
    dtype: Any = None
    batch_size: int = 1024
    seed: Any = 0
    progress: bool = False
    strings: Sequence | np.ndarray | None = None
    sample_lengths: int | tuple[int, int] | None = None
    busy: float = 0.7
    max_strings: int = S.DEFAULT_MAX_STRINGS
    max_batch_steps: int = DEFAULT_MAX_BATCH_STEPS
    rtol: float | None = None
    atol: float | None = None
    overlap: bool = True

    def __post_init__(self) -> None:
        def need(name: str, ok: bool, what: str) -> None:
            if not ok:
                raise InputError(f"{name} must be {what}, got {getattr(self, name)!r}")

        for name, least in _INT_FIELDS.items():
            value = getattr(self, name)
            need(name, _is_int(value) and value >= least, f"an integer ≥ {least}")
            object.__setattr__(self, name, int(value))
        if self.max_length is not None:
            need("max_length", _is_int(self.max_length) and self.max_length >= 0,
                 "an integer ≥ 0 or None")
            object.__setattr__(self, "max_length", int(self.max_length))
        for name in ("progress", "overlap"):
            need(name, isinstance(getattr(self, name), (bool, np.bool_)), "True or False")
            object.__setattr__(self, name, bool(getattr(self, name)))
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            need(name, value is None or (_is_number(value) and value >= 0), "a number ≥ 0 or None")
        need("busy", _is_number(self.busy) and 0 <= self.busy <= 1, "a probability in [0, 1]")
        need("seed", self.seed is None or (_is_int(self.seed) and self.seed >= 0)
             or isinstance(self.seed, (np.random.Generator, np.random.BitGenerator,
                                       np.random.SeedSequence)),
             "an integer ≥ 0, None or a numpy Generator")
        if self.sample_lengths is not None:
            try:
                lo_hi = S.length_range(self.sample_lengths)
            except (InputError, TypeError, ValueError):
                lo_hi = None
            need("sample_lengths", lo_hi is not None,
                 "a length ≥ 0 or a range (low, high) with 0 ≤ low ≤ high")
            object.__setattr__(self, "sample_lengths", lo_hi)
        if self.dtype is not None:
            object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if self.strings is not None and not isinstance(self.strings, np.ndarray):
            need("strings", isinstance(self.strings, Iterable)
                 and not isinstance(self.strings, (str, bytes)),
                 "a sequence of strings or a 2-D array of symbol indices")
            object.__setattr__(self, "strings", tuple(self.strings))

    @classmethod
    def of(cls, options: VerifyOptions | None = None, **overrides: Any) -> VerifyOptions:
        """`options` (default: the defaults) with `overrides` replaced into it; InputError for
        anything but a VerifyOptions or None, and for a name that is not a field."""
        if options is None:
            options = cls()
        elif not isinstance(options, cls):
            raise InputError(f"options must be a VerifyOptions or None, got {options!r}; pass "
                             "verify's settings by keyword (e.g. max_length=6) or as "
                             "VerifyOptions(max_length=6)")
        unknown = sorted(set(overrides) - {f.name for f in fields(cls)})
        if unknown:
            raise InputError(f"verify takes no option(s) {', '.join(unknown)}; it takes: "
                             f"{', '.join(f.name for f in fields(cls))}")
        return replace(options, **overrides) if overrides else options

    def _key(self) -> tuple:
        s = self.strings
        if isinstance(s, np.ndarray):
            s = ("array", s.dtype.str, s.shape, s.tobytes())
        return tuple(s if f.name == "strings" else getattr(self, f.name) for f in fields(self))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def verify(machine: Machine, net, options: VerifyOptions | None = None, **overrides: Any
           ) -> Report | LMReport:
    """Check that `net` agrees with `machine` at every step of every checked string.

    What is checked is a `VerifyOptions` (its docstring lists the fields and their defaults):
    ``options``, with any keyword ``overrides`` replaced into it, e.g.
    ``verify(m, net, max_length=8, samples=0)`` or ``verify(m, net, VerifyOptions(seed=1),
    long_samples=0)``; a bad value is an InputError naming its field. Raises VerificationError
    when the check cannot be carried out (too many prefixes: lower ``max_length``; decoder
    shapes that do not match the machine's).

    Language models (a network whose abstraction is `pdanet.constructions.lm.LMUnits`, compiled
    from a PFSA or a bounded probabilistic DPDA) are compared by distribution instead: the result
    is `pdanet.verify.distribution.verify_lm`'s `LMReport` (the next-symbol log-probabilities at
    every position, in nats). The options passed through are `LM_OPTIONS` (``max_length``,
    ``samples``, ``strings``, ``seed``, ``dtype``, ``batch_size``, ``max_strings``,
    ``sample_lengths`` and ``long_samples``/``long_length`` — random prefixes drawn without EOS —
    with the defaults above) and the keyword ``tolerance`` (nats; default: verify_lm's per dtype); any
    other option set to a non-default value is an InputError, as is ``tolerance`` for any other
    network.
    """
    tolerance = overrides.pop("tolerance", _UNSET)
    o = VerifyOptions.of(options, **overrides)
    if _is_lm(net):
        return _verify_lm(machine, net, o, None if tolerance is _UNSET else tolerance)
    if tolerance is not _UNSET:
        raise InputError("tolerance applies to language-model networks only; give rtol/atol "
                         "for real-valued fields")
    machine = _compiled_machine(machine, net)
    if o.dtype is not None:
        net = net.with_scale(dtype=o.dtype)
    tol = Tolerance.for_dtype(_net_dtype(net), o.rtol, o.atol)
    rng = np.random.default_rng(o.seed)

    phases: list[_Phase] = []
    if o.strings is not None:
        given = S.encode_strings(machine, o.strings)  # validates symbols before any work
        phases.append(_Phase("given", f"{len(given[1])} explicit strings", lambda: given, True))
    max_length = o.max_length
    if max_length is not None:
        def exhaustive():
            levels = S.live_prefixes(machine, max_length, o.max_strings)
            ids = np.full((sum(len(x) for x in levels), max_length), -1, dtype=np.int64)
            lengths = np.concatenate([np.full(len(x), n, dtype=np.int64)
                                      for n, x in enumerate(levels)])
            row = 0
            for n, x in enumerate(levels):
                ids[row:row + len(x), :n] = x
                row += len(x)
            return ids, lengths

        phases.append(_Phase("exhaustive", f"every live prefix of length ≤ {max_length}",
                             exhaustive, False))
    if o.samples > 0:
        if o.sample_lengths is not None:
            lo_hi = o.sample_lengths
        elif max_length is not None and max_length > 0:
            # the exhaustive phase covers every length ≤ max_length: sample beyond it
            lo_hi = (max_length + 1, max(4 * max_length, 16))
        else:
            lo_hi = (0, 16)

        def random_phase():
            ids, lengths = S.random_live_strings(machine, o.samples, lo_hi, rng)
            order = np.argsort(lengths, kind="stable")
            return ids[order], lengths[order]

        phases.append(_Phase("random", f"{o.samples} random live strings, lengths "
                                       f"{lo_hi[0]}–{lo_hi[1]}", random_phase, True))
    if o.long_samples > 0 and o.long_length > 0:
        phases.append(_Phase("long", f"{o.long_samples} busy strings of length {o.long_length}",
                             lambda: S.long_strings(machine, o.long_samples, o.long_length, rng,
                                                    busy=o.busy), True, o.long_length))

    start = time.perf_counter()
    if o.overlap:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pdanet-verify") as executor:
            results, cex, fields_, notes, cover = _check_phases(
                machine, net, phases, o.batch_size, o.max_batch_steps, o.progress, executor, tol)
    else:
        results, cex, fields_, notes, cover = _check_phases(
            machine, net, phases, o.batch_size, o.max_batch_steps, o.progress, None, tol)
    done = {p.name for p in results if p.complete}
    if {"exhaustive", "random"} <= done and lo_hi[1] <= max_length:
        notes.append("the random strings were no longer than max_length, so the exhaustive phase "
                     "already covered them; pass sample_lengths=(low, high) to go beyond")
    seconds = time.perf_counter() - start
    return Report(
        ok=cex is None and (cover is None or cover.unchecked_steps == 0),
        machine=str(getattr(machine, "name", None) or repr(machine)),
        network=str(getattr(net, "construction", type(net).__name__)),
        fields=fields_,
        strings_checked=sum(p.strings for p in results),
        steps_checked=sum(p.steps for p in results),
        phases=tuple(results),
        seconds=seconds,
        counterexample=cex,
        notes=tuple(notes),
        dtype=str(getattr(net, "dtype", "")).replace("torch.", ""),
        coverage=cover,
    )


_UNSET = object()
LM_OPTIONS = ("max_length", "samples", "strings", "seed", "dtype", "batch_size", "max_strings",
              "sample_lengths", "long_samples", "long_length")


def _is_lm(net) -> bool:
    from pdanet.constructions.lm import LMUnits
    from pdanet.constructions.ns_lm import NSLMChart

    return isinstance(getattr(net, "abstraction", None), (LMUnits, NSLMChart))


def _verify_lm(machine: Machine, net, o: VerifyOptions, tolerance: Any):
    """`verify` for a language model: `verify_lm` with the options that apply to it."""
    from pdanet.verify.distribution import verify_lm

    default = VerifyOptions()
    unused = [f.name for f in fields(o) if f.name not in LM_OPTIONS
              and getattr(o, f.name) != getattr(default, f.name)]
    if unused:
        raise InputError(f"option(s) {', '.join(unused)} do not apply to a language model, "
                         f"whose distributions verify compares; it takes {', '.join(LM_OPTIONS)} "
                         "and tolerance")
    strings = o.strings
    if isinstance(strings, np.ndarray):  # encoded rows, padded with -1
        syms = machine.alphabet.symbols
        strings = [tuple(syms[i] for i in row if i >= 0) for row in strings]
    return verify_lm(machine, net, max_length=o.max_length, samples=o.samples,
                     strings=None if strings is None else list(strings), seed=o.seed,
                     tolerance=tolerance, dtype=o.dtype, batch_size=o.batch_size,
                     max_strings=o.max_strings, sample_lengths=o.sample_lengths,
                     long_samples=o.long_samples, long_length=o.long_length)


def _compiled_machine(machine: Machine, net) -> Machine:
    """The machine to run beside `net`: ``net.machine`` when `machine` is it (or equal to it),
    or is the machine it was converted from before compiling (``net.compiled_from``,
    e.g. a DPDA compiled to ``ns_rnn`` through its weighted PDA, whose fields the network
    decodes); VerificationError for any other machine."""
    compiled_for = getattr(net, "machine", machine)
    if compiled_for is machine or compiled_for == machine:
        return compiled_for
    source = getattr(net, "compiled_from", None)
    if source is not None and (source is machine or source == machine):
        return compiled_for
    origin = f" (converted from {source!r})" if source is not None else ""
    raise VerificationError(
        f"the network was compiled for {compiled_for!r}{origin}, not for {machine!r}; verify it "
        "against the machine it was compiled from, or compile this machine")


def _dtype_bytes(net) -> int:
    """Bytes per float of the network's run (4 unless it says float64)."""
    dt = getattr(net, "dtype", None)
    return torch.finfo(dt).bits // 8 if isinstance(dt, torch.dtype) and dt.is_floating_point \
        else 4


def _check_phases(machine: Machine, net, phases: list[_Phase], batch_size: int,
                  max_batch_steps: int, progress: bool, executor: Executor | None,
                  tol: Tolerance | None = None
                  ) -> tuple[list[PhaseResult], Counterexample | None, tuple[str, ...], list[str],
                             Coverage | None]:
    """Check the phases in order, stopping at the first counterexample; the last item is the
    summed `Coverage` of partially covered batches (None: every step was compared)."""
    results: list[PhaseResult] = []
    notes: list[str] = []
    cex = None
    cover: Coverage | None = None
    fields: tuple[str, ...] = ()
    for phase in phases:
        t0 = time.perf_counter()
        ids, lengths = phase.make()
        if phase.want_length is not None and (lengths < phase.want_length).any():
            short = int((lengths < phase.want_length).sum())
            notes.append(f"{short} of the {phase.name} strings stop before length "
                         f"{phase.want_length}: their walk reached a live configuration with no "
                         "live extension")
        n_strings = n_steps = 0
        bar = _progress(progress, phase.name, int((lengths + 1).sum()))
        try:
            steps = limits.positions_per_call(      # the network's own memory estimate
                net, max_batch_steps, int(lengths.max(initial=0)) + 1, _dtype_bytes(net))
            for bids, blens in _batches(ids, lengths, batch_size, steps):
                out = compare_batch(machine, net, bids, blens, check_live=phase.check_live,
                                    executor=executor, tol=tol)
                n_strings += out.strings
                n_steps += out.steps
                if out.coverage is not None:
                    cover = out.coverage if cover is None else cover + out.coverage
                fields = fields or out.fields
                if bar is not None:
                    bar.update(int((blens + 1).sum()))
                if out.failure is not None:
                    b, t, name = out.failure
                    cex = _counterexample(machine, phase.name, bids[b, : blens[b]], t, name,
                                          out.expected, out.got)
                    break
        finally:
            if bar is not None:
                bar.close()
        results.append(PhaseResult(phase.name, phase.description, n_strings, n_steps,
                                   time.perf_counter() - t0, complete=cex is None))
        if cex is not None:
            break
    if cover is not None and not (cover.full_steps or cover.unchecked_steps):
        cover = None                      # every step came from the exact fast path
    return results, cex, fields, notes, cover


def _counterexample(machine: Machine, phase: str, ids: np.ndarray, t: int, name: str,
                    expected: Any, got: Any) -> Counterexample:
    symbols = machine.alphabet.decode(ids)
    config = machine.trace(symbols)[t].config
    return Counterexample(
        phase=phase,
        string=symbols,
        formatted=machine.alphabet.format(symbols),
        step=t,
        field=name,
        expected=readable(machine, name, expected),
        got=readable(machine, name, got),
        config=config,
    )


def _progress(enabled: bool, name: str, total: int):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"verify {name}", unit="step", unit_scale=True, leave=False)


__all__ = ["LM_OPTIONS", "BatchOutcome", "Tolerance", "VerifyOptions", "compare_batch", "verify"]

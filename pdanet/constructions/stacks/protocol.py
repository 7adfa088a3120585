"""The memory protocol: one class per store, used by people and by compiled controllers alike.

A `Store` is a public memory class (`NeuralStack`, `NeuralQueue`, `NeuralDeQue`,
`SuperpositionStack`, `SuzgunStack`) that also describes itself to the compiler and the certifier:

- ``name``: the memory family (``"grefenstette"``, ``"joulin_mikolov"``, ``"suzgun"``);
- ``kind``: the discrete store it is when saturated (``"stack"``, ``"queue"``, ``"deque"``);
- ``channels``: its action channels, in the order a controller emits them;
- ``slots``, ``reads``, ``pushes``: value slots per step, and the end (``"top"`` or ``"bottom"``)
  that reading slot s reads and pushed value slot s writes (the deque: top, bottom);
- ``ops``: ``{op: (pop end, push end)}``, the discrete operations one saturated step performs,
  named as `StoreTransducer` names them (``noop``, ``push``, ``pop``, ``replace``; ``push_top``…);
- ``actions(op)``: the exact 0/1 channel values of ``op`` — the compiler's encoding;
- ``apply(contents, op, y)``: the discrete semantics on a tuple written bottom → top;
- ``run(batch, steps, like, codes)``: a `StoreRun`, the store's step on preallocated buffers
  that a compiled controller drives one step at a time.

`check_store` runs ``store.run`` on every saturated op sequence of a few steps and compares its
readings and read-back, bit for bit, with ``store.apply`` (Lemma 2 of the stack-RNN certificate).
Adding a store is adding one file whose class mixes in `StoreOps` and defines ``run``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
import torch

from pdanet.errors import InputError


# --- the symbol code reader and the read-back ---------------------------------------------------
class SymbolCodes:
    """Value vectors (…, m) → store symbol ids (float), bits thresholded at 1/2; −2 for a vector
    that is no symbol's code. ``codes`` is the (G + 1, m) 0/1 table, row G (empty) all zero."""

    def __init__(self, codes: np.ndarray):
        self.codes = np.asarray(codes)
        G, m = self.codes.shape[0] - 1, self.codes.shape[1]
        self.one_hot = m > 20
        self._cache: dict = {}
        if not self.one_hot:
            lut = np.full(1 << m, -2.0)
            lut[self.codes[:G].astype(np.int64) @ (1 << np.arange(m - 1, -1, -1))] = np.arange(G)
            self.lut = torch.tensor(lut)
            self.pow2 = torch.tensor([float(1 << k) for k in range(m - 1, -1, -1)])

    @classmethod
    def of(cls, codes: SymbolCodes | np.ndarray) -> SymbolCodes:
        """``codes`` itself if it is a reader, else a reader of the (G + 1, m) table."""
        return codes if isinstance(codes, SymbolCodes) else cls(codes)

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        bits = (v > 0.5).to(v.dtype)
        if self.one_hot:
            return torch.where(bits.sum(-1) == 1, bits.argmax(-1).to(v.dtype), -2.0)
        key = (v.dtype, v.device)
        if key not in self._cache:
            self._cache = {key: (self.pow2.to(v), self.lut.to(v))}
        pow2, lut = self._cache[key]
        return lut[(bits @ pow2).long()]


def pack(alive: torch.Tensor, sym: torch.Tensor, reverse: bool = False
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per (b, k): the symbols of the alive cells in cell order (reversed with ``reverse``), as
    (B, K, D) with −1 padding (D = most alive cells), and the counts (B, K). ``alive`` (B, K, n),
    ``sym`` (B, K, n) or (B, 1, n). One scan for the alive cells, then work per alive cell only;
    no loop over cells."""
    B, K, _ = alive.shape
    b, k, i = alive.nonzero(as_tuple=True)                    # row-major: grouped by (b, k)
    group = b * K + k
    size = torch.bincount(group, minlength=B * K)
    rank = torch.arange(len(group), device=alive.device) - (size.cumsum(0) - size)[group]
    if reverse:
        rank = size[group] - 1 - rank
    D = int(size.max()) if size.numel() else 0
    out = sym.new_full((B, K, D), -1.0)
    out[b, k, rank] = sym[b, k if sym.shape[1] > 1 else 0, i]
    return out, size.view(B, K).to(sym.dtype)


class BlockRun:
    """Base of the in-place runs: each ``step`` records the cells alive after it (strength or
    occupancy > 1/2) in row ``k`` of a block of ``BLOCK`` rows; the driver calls ``flush()`` when
    ``k == BLOCK`` and after the last step, which packs the block into the read-back (contents
    (B, k, D) bottom → top, −1 padding; sizes (B, k)) and empties it."""

    BLOCK = 32

    def __init__(self, batch: int, cells: int, like: torch.Tensor, codes):
        self.alive = torch.zeros(batch, self.BLOCK, cells, dtype=torch.bool, device=like.device)
        self.k, self.t, self.codes = 0, 0, SymbolCodes.of(codes)
        self.grad = torch.is_grad_enabled()

    def idle(self, act: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The actions that leave a row with ``valid`` False unchanged (padding)."""
        raise NotImplementedError

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor:
        raise NotImplementedError

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError


# --- the protocol --------------------------------------------------------------------------------
@runtime_checkable
class StoreRun(Protocol):
    """A store's run on preallocated buffers (`BlockRun`): ``step(act (B, C), value (B, slots·m),
    valid (B,) bool or None) → reading (B, slots·m)`` — rows with ``valid`` False keep their
    contents where the store has no no-op; ``idle(act, valid)`` the actions for padding;
    ``flush()`` the read-back since the last flush (call it when ``k == BLOCK``)."""

    BLOCK: int
    k: int

    def step(self, act: torch.Tensor, value: torch.Tensor, valid=None) -> torch.Tensor: ...

    def idle(self, act: torch.Tensor, valid: torch.Tensor) -> torch.Tensor: ...

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]: ...


@runtime_checkable
class Store(Protocol):
    """See the module docstring."""

    name: str
    kind: str
    channels: tuple[str, ...]
    slots: int
    reads: tuple[str, ...]
    pushes: tuple[str, ...]
    ops: Mapping[str, tuple[str | None, str | None]]

    def actions(self, op: str) -> tuple[int, ...]: ...

    def apply(self, contents: tuple, op: str, y: int) -> tuple | None: ...

    def run(self, batch: int, steps: int, like: torch.Tensor, codes) -> StoreRun: ...


class StoreOps:
    """Mixin: `Store.actions` and `Store.apply` from the class's ``channels`` and ``ops``.

    Encoding: op (pop end e, push end e') turns on the channel ``pop`` (or ``pop_e`` where the
    store pops at both ends) and ``push`` (or ``push_e'``); an op with neither turns on ``noop``
    where the store has that channel (Joulin–Mikolov), else nothing (Grefenstette: d = u = 0)."""

    name: ClassVar[str]
    kind: ClassVar[str] = "stack"
    channels: ClassVar[tuple[str, ...]]
    slots: ClassVar[int] = 1
    reads: ClassVar[tuple[str, ...]] = ("top",)
    pushes: ClassVar[tuple[str, ...]] = ("top",)
    ops: ClassVar[Mapping[str, tuple[str | None, str | None]]]
    depth: int | None = None      # a fixed number of cells (a push drops the bottom), or None
    takes_depth: ClassVar[bool] = False   # the constructor takes ``depth``

    def actions(self, op: str) -> tuple[int, ...]:
        """The exact 0/1 value of each channel (in ``channels`` order) that performs ``op``
        (InputError for an op this store does not do in one step)."""
        if op not in self.ops:
            raise InputError(f"{type(self).__name__} has no one-step op {op!r}; its ops are "
                             f"{tuple(self.ops)}")
        on = set()
        for verb, end in zip(("pop", "push"), self.ops[op]):
            if end is not None:
                on.add(verb if verb in self.channels else f"{verb}_{end}")
        if not on and "noop" in self.channels:
            on.add("noop")
        return tuple(int(ch in on) for ch in self.channels)

    def apply(self, contents: tuple, op: str, y: int) -> tuple | None:
        """``contents`` (bottom → top) after ``op`` (pushing ``y``); popping an empty store
        leaves it empty, as the saturated memory does. None: ``op`` is no one-step op here."""
        if op not in self.ops:
            return None
        pop_end, push_end = self.ops[op]
        c = tuple(contents)
        if pop_end is not None:
            c = c[:-1] if pop_end == "top" else c[1:]
        if push_end is not None:
            c = c + (y,) if push_end == "top" else (y,) + c
            if self.depth is not None and len(c) > self.depth:
                c = c[-self.depth:] if push_end == "top" else c[:self.depth]
        return c


def op_of(store: Store, pop_end: str | None, push_end: str | None) -> str | None:
    """The store's one-step op with these ends, or None where it takes more than one step."""
    return next((op for op, ends in store.ops.items() if ends == (pop_end, push_end)), None)


def pushed(store: Store, op: str, y: int) -> tuple[int, ...]:
    """Per value slot, the code pushed there by ``op`` (−1: none)."""
    end = store.ops[op][1]
    return tuple(y if end is not None and end == e else -1 for e in store.pushes)


def readings(store: Store, contents: tuple, empty: int) -> tuple[int, ...]:
    """Per reading slot, the symbol at the end it reads (``empty`` for an empty store)."""
    if not contents:
        return (empty,) * store.slots
    return tuple(contents[-1] if e == "top" else contents[0] for e in store.reads)


def holds_top(store: Store) -> bool:
    """True for a stack that cannot replace in one step (Joulin–Mikolov, Suzgun): a compiled
    controller then holds the machine's top itself (modes H_X, `realtime.one_op`)."""
    return store.kind == "stack" and op_of(store, "top", "top") is None


def check_store(store: Store, codes: np.ndarray, dtype: torch.dtype, steps: int | None = None,
                limit: int = 20_000) -> str | None:
    """Lemma 2 of the stack-RNN certificate, checked: run ``store.run`` on every sequence of
    ``steps`` saturated ops (exact 0/1 actions from ``store.actions``, exact codes; default: as
    many steps as keep ≤ ``limit`` sequences, at least 2) and compare every reading and the
    read-back, bit for bit, with ``store.apply``. Returns None, or the first mismatch."""
    codes = np.asarray(getattr(codes, "codes", codes), dtype=np.float64)
    G, m = codes.shape[0] - 1, codes.shape[1]
    ops = [(op, y) for op, (_, push_end) in store.ops.items()
           for y in (range(G) if push_end is not None else (-1,))]
    if steps is None:
        steps = 4 if len(ops) < 2 else max(2, int(math.log(limit) // math.log(len(ops))))
    seqs = list(itertools.product(range(len(ops)), repeat=steps))
    B = len(seqs)
    run = store.run(B, steps, torch.zeros(B, 1, dtype=dtype), codes)
    enc = torch.tensor([store.actions(op) for op, _ in ops], dtype=dtype)
    val = torch.zeros(len(ops), store.slots * m, dtype=dtype)
    for i, (op, y) in enumerate(ops):
        for s, code in enumerate(pushed(store, op, y)):
            if code >= 0:
                val[i, s * m:(s + 1) * m] = torch.as_tensor(codes[code])
    contents: list[tuple] = [()] * B
    idx = torch.tensor(seqs, dtype=torch.long).reshape(B, steps)
    for t in range(steps):
        contents = [store.apply(c, *ops[s[t]]) for c, s in zip(contents, seqs)]
        with torch.no_grad():
            r = run.step(enc[idx[:, t]], val[idx[:, t]], None)
            cells, sizes = (x[:, -1] for x in run.flush())
        tops = np.array([readings(store, c, G) for c in contents], dtype=np.int64)
        want_r = torch.as_tensor(codes[tops].reshape(B, -1), dtype=dtype)
        W = max([cells.shape[1]] + [len(c) for c in contents])
        want = np.full((B, W), -1.0)
        for b, c in enumerate(contents):
            want[b, :len(c)] = c
        have = torch.nn.functional.pad(cells, (0, W - cells.shape[1]), value=-1.0)
        bad = ((r != want_r).any(1) | (sizes != torch.as_tensor([len(c) for c in contents]))
               | (have != torch.as_tensor(want, dtype=have.dtype)).any(1))
        if bool(bad.any()):
            b = int(bad.nonzero()[0, 0])
            seq = [ops[k] for k in seqs[b][:t + 1]]
            return (f"{type(store).__name__} ({store.name}): after saturated ops {seq} the "
                    f"reading is {r[b].tolist()} and the read-back "
                    f"{cells[b, :int(sizes[b])].tolist()}; the discrete {store.kind} holds "
                    f"{list(contents[b])} and reads {want_r[b].tolist()}")
    return None


__all__ = ["BlockRun", "Store", "StoreOps", "StoreRun", "SymbolCodes", "check_store",
           "holds_top", "op_of", "pack", "pushed", "readings"]

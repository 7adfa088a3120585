"""Depth-bounded stack automata: the Dyck-(k, m) generator of Hewitt et al. (2020), and
`BoundedPDA`, a deterministic pushdown machine restricted to stack depth ≤ m (defined with the
deterministic pushdown machines in `pdanet.automata.pda`, whose ``bounded`` builds it; re-exported
here).

Dyck-(k, m) is the language of well-nested strings over k bracket types whose nesting depth never
exceeds m. The machine is a *generator*: after each prefix its output is the set of allowed next
symbols — every open bracket when the depth is below m, the close bracket matching the top of the
stack when the stack is non-empty, and the end marker ``$`` when the stack is empty. A prefix that
breaks these rules leads to the dead configuration (output: the empty set).

Stacks are written bottom first; the top is the last element. Nothing here enumerates the
Σ_{i≤m} kⁱ configurations, so k = 100000 is as cheap as k = 2.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from pdanet import limits
from pdanet.automata.alphabet import Alphabet
from pdanet.automata.base import BatchTrace, Machine
from pdanet.automata.lazy import LAZY_ABOVE, BracketAlphabet, BracketSymbols, NextSet, bracket
from pdanet.automata.pda import BoundedPDA
from pdanet.errors import InputError

_PAIRS = ("()", "[]", "{}", "<>")
END = "$"  # the same as pdanet.automata.lazy.END


@dataclass(frozen=True)
class DyckConfig:
    """Stack of bracket types (bottom first, top last); ``dead`` once the prefix is illegal."""

    stack: tuple[int, ...] = ()
    dead: bool = False

    @property
    def depth(self) -> int:
        return len(self.stack)


MAX_K = 2**60  # 2k + 1 symbols must be indexable by a machine integer (len(), numpy codes)


class DyckKM(Machine):
    """The Dyck-(k, m) generator (Hewitt et al. 2020). Input symbols: k opens then k closes.

    For k ≤ 4 the brackets are the characters ``()[]{}<>``; for k ≥ 5 they are the tokens
    ``(0 (1 … (k-1`` and ``)0 )1 … )k-1`` (strings are then written space-separated, e.g.
    ``"(0 (7 )7 )0"``). Above `pdanet.automata.lazy.LAZY_ABOVE` symbols the alphabets are
    `BracketAlphabet` s, which print and parse the i-th bracket arithmetically, and the outputs
    are `NextSet` s, which do not list the opens: so stepping Dyck-(10⁹, m) costs what
    Dyck-(5, m) does. What must enumerate the alphabet (dense networks, diagrams, exhaustive
    verification, the ``output`` field of `run_batch`) checks `pdanet.limits` first.
    """

    output_kind = "next_set"
    file_kind = "dyck"
    fixed_width_fields = True                       # stack fields are (B, T+1, m)

    def __init__(self, k: int, m: int):
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise InputError(f"Dyck-(k, m) needs k ≥ 1 bracket types, got k={k!r}")
        if k > MAX_K:
            raise InputError(f"Dyck-(k, m) supports k ≤ 2^60 bracket types (symbols are indexed "
                             f"by machine integers), got k={k!r}")
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise InputError(f"Dyck-(k, m) needs a depth bound m ≥ 1, got m={m!r}")
        self.k, self.m = int(k), int(m)
        self.name = f"dyck({self.k},{self.m})"

    # symbols -----------------------------------------------------------------------------------
    @property
    def lazy(self) -> bool:
        """True when the symbols are computed on demand (2k + 1 > `LAZY_ABOVE`)."""
        return 2 * self.k + 1 > LAZY_ABOVE

    @cached_property
    def opens(self) -> Sequence[str]:
        """The open brackets, in order (a tuple, or a `BracketSymbols` view when `lazy`)."""
        if self.k <= len(_PAIRS):
            return tuple(p[0] for p in _PAIRS[: self.k])
        if self.lazy:
            return BracketSymbols(self.k, part="opens")
        return tuple(bracket(i, self.k) for i in range(self.k))

    @cached_property
    def closes(self) -> Sequence[str]:
        """The close brackets, in order (as `opens`)."""
        if self.k <= len(_PAIRS):
            return tuple(p[1] for p in _PAIRS[: self.k])
        if self.lazy:
            return BracketSymbols(self.k, part="closes")
        return tuple(bracket(self.k + i, self.k) for i in range(self.k))

    @cached_property
    def alphabet(self) -> Alphabet:  # type: ignore[override]
        if self.lazy:
            return BracketAlphabet(self.k)
        return Alphabet(self.opens + self.closes)

    @cached_property
    def output_alphabet(self) -> Alphabet:  # type: ignore[override]
        if self.lazy:
            return BracketAlphabet(self.k, with_end=True)
        return Alphabet(self.opens + self.closes + (END,))

    def open_id(self, i: int) -> int:
        return i

    def close_id(self, i: int) -> int:
        return self.k + i

    @property
    def end_id(self) -> int:
        return 2 * self.k

    @property
    def stack_dtype(self) -> np.dtype:
        """The smallest signed integer type holding every bracket type and -1: the dtype of the
        ``stack`` field of `run_batch` (and of the Dyck networks' decoded stacks)."""
        return np.dtype(np.min_scalar_type(-self.k))

    # identity ----------------------------------------------------------------------------------
    @property
    def _key(self) -> tuple:
        return (self.k, self.m)

    def __repr__(self) -> str:
        return f"<DyckKM k={self.k} m={self.m}>"

    @property
    def num_configs(self) -> int:
        """Σ_{i=0..m} kⁱ reachable live configurations (an exact integer: for huge k and m ask
        `configs_exceed` instead, which never builds it)."""
        return sum(self.k**i for i in range(self.m + 1))

    def configs_exceed(self, n: int) -> bool:
        """Whether Σ_{i=0..m} kⁱ > n, in O(log n) steps whatever k and m are."""
        if self.k == 1:
            return self.m + 1 > n
        total, term = 0, 1
        for _ in range(self.m + 1):
            total += term
            if total > n:
                return True
            term *= self.k
        return False

    # protocol ----------------------------------------------------------------------------------
    def initial(self) -> DyckConfig:
        return DyckConfig()

    def step(self, config: DyckConfig, symbol: Hashable) -> DyckConfig:
        s = self.alphabet.index(symbol)
        if config.dead:
            return config
        if s < self.k:
            if config.depth >= self.m:
                return DyckConfig(config.stack, True)
            return DyckConfig(config.stack + (s,))
        if config.depth == 0 or config.stack[-1] != s - self.k:
            return DyckConfig(config.stack, True)
        return DyckConfig(config.stack[:-1])

    def output(self, config: DyckConfig) -> frozenset | NextSet:
        """The allowed next symbols (a frozenset; a `NextSet` equal to it when `lazy`)."""
        if config.dead:
            return frozenset()
        if self.lazy:
            close = self.closes[config.stack[-1]] if config.depth > 0 else END
            return NextSet(self.k, config.depth < self.m, close)
        allowed = set()
        if config.depth < self.m:
            allowed.update(self.opens)
        if config.depth > 0:
            allowed.add(self.closes[config.stack[-1]])
        else:
            allowed.add(END)
        return frozenset(allowed)

    def is_dead(self, config: DyckConfig) -> bool:
        return config.dead

    def accepts(self, string) -> bool:
        c = self.run(string)
        return not c.dead and c.depth == 0

    def is_accepting(self, config: DyckConfig) -> bool:
        return not config.dead and config.depth == 0

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None,
                  with_output: bool = True) -> BatchTrace:
        """Fields: ``stack`` (B, T+1, m; bottom first, -1 empty; dtype `stack_dtype`, the smallest
        that holds k − 1), ``depth``, ``state`` (0 live,
        -1 dead), ``top`` (-1 when empty) and ``output`` (B, T+1, 2k+1) unless ``with_output`` is
        False (for huge k). A dead configuration keeps the stack it had before the illegal
        symbol; past its length a row holds its last configuration.

        No loop over time or stack cells: the tentative depth is the running sum of ±1 over the
        string; the symbol in stack cell s after step t is the type of the last open at or
        before t that reached depth s + 1 — the running maximum over time, in each cell, of the
        keys (step, type) of the pushes into it. This is exact up to the first illegal step
        (found from the depths and tops), after which each row holds its last live
        configuration. Every field is returned as the transpose of a C-contiguous buffer
        ((m, T+1, B) for ``stack``, (T+1, B) for the scalar fields, (2k+1, T+1, B) for
        ``output``): the layout the Dyck networks' decoders produce, so that `verify` compares
        the two plane by plane."""
        ids, lengths = self.check_ids(ids, lengths)
        B, T = ids.shape
        k, m = self.k, self.m
        if with_output:
            limits.check(f"the 'output' field of {self!r}.run_batch ({B}×{T + 1} steps × "
                         f"{2 * k + 1} symbols)", B * (T + 1) * (2 * k + 1), "max_bytes",
                         hint="pass with_output=False (the allowed sets follow from depth and "
                              "top), or use a smaller k")
        bits = max(1, (k - 1).bit_length())                           # an open's type fits in bits
        key_dtype = next(t for t in (np.uint16, np.uint32, np.uint64)
                         if (T + 1) << bits <= np.iinfo(t).max)
        small = np.int16 if max(T, m, 2 * k) < np.iinfo(np.int16).max else np.int64
        sym = np.empty((T + 1, B), dtype=small)                        # sym[t]: symbol of step t
        sym[0] = 0
        sym[1:] = ids.T
        steps = np.arange(T + 1)[:, None]                              # configuration index
        read = steps[1:] <= lengths                                    # step t is in the string
        opens = np.zeros((T + 1, B), dtype=bool)                       # step t pushes
        np.logical_and(read, sym[1:] < k, out=opens[1:])
        depth = np.zeros((T + 1, B), dtype=small)                      # tentative depth
        np.cumsum((opens[1:].view(np.int8) << 1) - read.view(np.int8), axis=0, dtype=small,
                  out=depth[1:])                                       # +1 per open, −1 per close
        cells = np.arange(1, m + 1, dtype=small)[:, None, None]        # cell s holds depth s + 1
        # key of a push: (step, type), ordered by step; its running maximum over time in each cell
        # is the last push into that cell. (Arithmetic on masks rather than np.where: faster.)
        key = (np.arange(T + 1, dtype=key_dtype)[:, None] << key_dtype(bits)) \
            | (sym.astype(key_dtype) & key_dtype((1 << bits) - 1))
        last = _running_max(key * (opens & (depth == cells)))          # (m, T+1, B)
        typ1 = (last & key_dtype((1 << bits) - 1)).astype(small) + small(1)   # type + 1
        stack = np.multiply(typ1, depth >= cells, dtype=self.stack_dtype)
        stack -= 1
        top = (typ1 * (depth == cells)).sum(axis=0, dtype=np.int64) - 1  # -1 when empty
        # step t is illegal: an open at depth m, or a close not matching the top (-1 if empty)
        bad = read & ((opens[1:] & (depth[:-1] >= m)) | (~opens[1:] & (top[:-1] != sym[1:] - k)))
        dies = bad.any(axis=0)
        first_dead = np.where(dies, bad.argmax(axis=0) + 1, T + 1) if T else np.ones(B, np.int64)
        alive = steps < first_dead
        depth = depth.astype(np.int64)
        hold = np.minimum(first_dead - 1, lengths)                     # last configuration moved to
        rows = np.flatnonzero(hold < T)
        if len(rows):
            src = np.minimum(steps, hold[rows])
            stack[:, :, rows] = np.take_along_axis(stack[:, :, rows], src[None], axis=1)
            depth[:, rows] = np.take_along_axis(depth[:, rows], src, axis=0)
            top[:, rows] = np.take_along_axis(top[:, rows], src, axis=0)
        fields: dict[str, Any] = {
            "stack": stack.T,
            "depth": depth.T,
            "state": alive.astype(np.int64).T - 1,
            "top": top.T,
        }
        if with_output:
            fields["output"] = self._next_set_planes(depth, top, alive).T
        return BatchTrace(lengths, fields)

    def _next_set_planes(self, depth: np.ndarray, top: np.ndarray, alive: np.ndarray
                         ) -> np.ndarray:
        """Allowed-next-symbol sets as one plane per output symbol: (2k+1,) + depth.shape."""
        k = self.k
        out = np.empty((2 * k + 1,) + depth.shape, dtype=bool)
        out[:k] = alive & (depth < self.m)
        has_top = alive & (depth > 0)
        if k <= 64:                                           # one comparison per close bracket
            np.equal(top, np.arange(k).reshape((k,) + (1,) * top.ndim), out=out[k:2 * k])
            out[k:2 * k] &= has_top
        else:                                                 # huge k: set one entry per row
            out[k:2 * k] = False
            idx = np.nonzero(has_top & (top >= 0))
            out[(k + top[idx],) + idx] = True
        out[2 * k] = alive & (depth == 0)
        return out

    def next_set_batch(self, depth: np.ndarray, top: np.ndarray, alive: np.ndarray) -> np.ndarray:
        """Allowed-next-symbol sets (…, 2k+1) from depth, top and liveness arrays."""
        return np.moveaxis(self._next_set_planes(depth, top, alive), 0, -1)

    # sampling ----------------------------------------------------------------------------------
    def sample(self, n: int, length: int, rng: np.random.Generator | int | None = None,
               busy: float = 0.5, complete: bool = False) -> np.ndarray:
        """n random legal prefixes of exactly `length` symbols, as an (n, length) index array.

        At each step an allowed symbol is chosen: a close bracket with probability ``1 - busy``
        when one is allowed and opens are too, so a large ``busy`` keeps the stack near depth m.
        With ``complete`` the walk is steered to end with an empty stack (length must be even).
        Vectorised over the n strings.
        """
        rng = np.random.default_rng(rng)
        k, m = self.k, self.m
        ids = np.empty((n, length), dtype=np.int64)
        stack = np.full((n, m), -1, dtype=np.int64)
        depth = np.zeros(n, dtype=np.int64)
        rows = np.arange(n)
        for t in range(length):
            remaining = length - t
            can_open = depth < m
            can_close = depth > 0
            if complete:
                can_open &= depth + 1 <= remaining - 1
                must_close = depth >= remaining
                can_open &= ~must_close
            want_open = rng.random(n) < busy
            do_open = can_open & (want_open | ~can_close)
            opened = rng.integers(0, k, size=n)
            top = stack[rows, np.maximum(depth - 1, 0)]
            ids[:, t] = np.where(do_open, opened, k + top)
            push = do_open
            pop = ~do_open
            stack[rows[push], depth[push]] = opened[push]
            stack[rows[pop], depth[pop] - 1] = -1
            depth = depth + push - pop
        return ids


def _running_max(a: np.ndarray) -> np.ndarray:
    """The running maximum along axis 1 (overwrites `a`): a log-step scan, ⌈log₂ n⌉ passes each
    vectorised over the whole array (several times faster than np.maximum.accumulate along a
    middle axis)."""
    n = a.shape[1]
    out = np.empty_like(a)
    shift = 1
    while shift < n:
        out[:, :shift] = a[:, :shift]
        np.maximum(a[:, shift:], a[:, :-shift], out=out[:, shift:])
        a, out = out, a
        shift *= 2
    return a


def dyck(k: int, m: int) -> DyckKM:
    """The Dyck-(k, m) generator of Hewitt et al. (2020)."""
    return DyckKM(k, m)


__all__ = ["BoundedPDA", "DyckConfig", "DyckKM", "dyck"]

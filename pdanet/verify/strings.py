"""Strings to verify on: every live prefix up to a length, random live strings, long busy strings.

A string is *live* for a machine when its configuration is not dead (`Machine.is_dead`): some
continuation is still in the language. Dead strings are outside the language's prefix set, and a
network's behaviour on them is unspecified, so the verifier only ever compares on live prefixes.
Live prefixes are prefix-closed (a dead configuration never comes back to life).

Strings are handled as index arrays: a batch is ``(ids, lengths)`` with ``ids`` of shape (B, T)
holding alphabet indices and -1 padding. Everything is vectorised over the batch through a
`Stepper`, which advances many configurations by one symbol each:

- `TableStepper` for DFAs (a transition table and a co-reachability mask; exact and O(1)),
- `ReplayStepper` for machines whose batched simulator marks dead configurations (`dead_batch`),
  re-running the prefixes through ``run_batch`` (cheap for short prefixes),
- `ConfigStepper` for any other machine: its own ``step``/``is_dead`` on configuration objects.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from pdanet import limits
from pdanet.automata.base import Machine, draw_allowed
from pdanet.errors import InputError, VerificationError

DEFAULT_MAX_STRINGS = 1_000_000
_CHUNK_CELLS = 1 << 20  # candidate extensions examined per chunk while enumerating


# --- dead configurations in batch ---------------------------------------------------------------

def _is_table_machine(machine: Machine) -> bool:
    return isinstance(getattr(machine, "table", None), np.ndarray) and isinstance(
        getattr(machine, "live_mask", None), np.ndarray)


def dead_batch(machine: Machine, fields: dict[str, np.ndarray]) -> np.ndarray | None:
    """Which configurations of a batch trace are dead (same shape as ``fields["state"]``).

    Uses the machine's own ``dead_batch(fields)`` when it has one; for a DFA, a state is dead when
    it is missing (-1) or cannot reach an accepting state (as `DFA.is_dead`); otherwise the
    `BatchTrace` convention ``state == -1``. None when the trace has no ``state`` field (then only
    `Machine.is_dead`, one configuration at a time, can tell).
    """
    hook = getattr(machine, "dead_batch", None)
    if callable(hook):
        return np.asarray(hook(fields), dtype=bool)
    if "state" not in fields:
        return None
    state = np.asarray(fields["state"])
    if _is_table_machine(machine):
        return (state < 0) | ~machine.live_mask[np.maximum(state, 0)]
    return state < 0


def has_dead_batch(machine: Machine) -> bool:
    """True when `dead_batch` can mark dead configurations of this machine in batch."""
    if callable(getattr(machine, "dead_batch", None)) or _is_table_machine(machine):
        return True
    probe = machine.run_batch(np.zeros((1, 0), dtype=np.int64), np.zeros(1, dtype=np.int64))
    return "state" in probe.fields


def live_mask(machine: Machine, ids: np.ndarray, lengths: np.ndarray,
              fields: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """(B, T+1) bool: is the prefix of length t of each string live (False past its length)."""
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    B, T = ids.shape
    valid = np.arange(T + 1)[None, :] <= lengths[:, None]
    if fields is None:
        fields = dict(machine.run_batch(ids, lengths).fields)
    dead = dead_batch(machine, fields)
    if dead is not None:
        return valid & ~dead
    live = np.zeros((B, T + 1), dtype=bool)
    for b in range(B):  # no batched dead test: the machine's own configurations
        for t, row in enumerate(machine.iter_trace(machine.alphabet.decode(ids[b, : lengths[b]]))):
            if machine.is_dead(row.config):
                break
            live[b, t] = True
    return live


# --- steppers -------------------------------------------------------------------------------------

class Stepper(ABC):
    """Advances a batch of configurations by one symbol each (an opaque per-row state)."""

    @abstractmethod
    def start(self, n: int) -> Any:
        """n copies of the initial configuration."""

    @abstractmethod
    def step(self, state: Any, symbols: np.ndarray) -> Any:
        """Each row after reading its symbol (alphabet indices, shape (n,))."""

    @abstractmethod
    def dead(self, state: Any) -> np.ndarray:
        """(n,) bool: rows whose configuration is dead."""

    @abstractmethod
    def take(self, state: Any, rows: np.ndarray) -> Any:
        """The rows selected (or repeated) by an index array."""


class TableStepper(Stepper):
    """DFA states as indices; dead = missing transition or no accepting state reachable."""

    def __init__(self, machine: Machine):
        self.table = machine.table
        self.live = machine.live_mask
        self.start_index = machine.state_index(machine.start)

    def start(self, n: int) -> np.ndarray:
        return np.full(n, self.start_index, dtype=np.int64)

    def step(self, state: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        ok = state >= 0
        return np.where(ok, self.table[np.maximum(state, 0), symbols], -1)

    def dead(self, state: np.ndarray) -> np.ndarray:
        return (state < 0) | ~self.live[np.maximum(state, 0)]

    def take(self, state: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return state[rows]


class ReplayStepper(Stepper):
    """The state is the prefix itself; deadness comes from re-running it through ``run_batch``."""

    def __init__(self, machine: Machine):
        self.machine = machine

    def start(self, n: int) -> np.ndarray:
        return np.zeros((n, 0), dtype=np.int64)

    def step(self, state: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        return np.concatenate([state, np.asarray(symbols, dtype=np.int64)[:, None]], axis=1)

    def dead(self, state: np.ndarray) -> np.ndarray:
        n, t = state.shape
        lengths = np.full(n, t, dtype=np.int64)
        if "with_output" in inspect.signature(self.machine.run_batch).parameters:
            trace = self.machine.run_batch(state, lengths, with_output=False)  # (Dyck: 2k+1 wide)
        else:
            trace = self.machine.run_batch(state, lengths)
        last = {name: arr[:, -1] for name, arr in trace.fields.items()}
        return dead_batch(self.machine, last)

    def take(self, state: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return state[rows]


class ConfigStepper(Stepper):
    """Configuration objects stepped by the machine itself (exact for any machine, not fast)."""

    def __init__(self, machine: Machine):
        self.machine = machine
        self.symbols = machine.alphabet.symbols

    def start(self, n: int) -> np.ndarray:
        out = np.empty(n, dtype=object)
        init = self.machine.initial()
        for i in range(n):
            out[i] = init
        return out

    def step(self, state: np.ndarray, symbols: np.ndarray) -> np.ndarray:
        out = np.empty(len(state), dtype=object)
        for i, (c, a) in enumerate(zip(state, symbols)):
            out[i] = self.machine.step(c, self.symbols[int(a)])
        return out

    def dead(self, state: np.ndarray) -> np.ndarray:
        return np.fromiter((self.machine.is_dead(c) for c in state), dtype=bool, count=len(state))

    def take(self, state: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return state[rows]


def stepper(machine: Machine, replay: bool = False) -> Stepper:
    """The fastest exact stepper: a table for DFAs; with ``replay`` (short prefixes) re-running
    ``run_batch`` when it marks dead configurations; otherwise the machine's own ``step``."""
    if _is_table_machine(machine):
        return TableStepper(machine)
    if replay and has_dead_batch(machine):
        return ReplayStepper(machine)
    return ConfigStepper(machine)


# --- exhaustive enumeration -------------------------------------------------------------------------

def live_prefixes(machine: Machine, max_length: int,
                  max_strings: int = DEFAULT_MAX_STRINGS) -> list[np.ndarray]:
    """Every live prefix of length ≤ `max_length`, by breadth-first extension.

    Returns one array per length n = 0..max_length, of shape (N_n, n), rows in lexicographic
    order of symbol indices (so the concatenation is in shortlex order). Raises VerificationError
    when there are more than `max_strings` of them in all.
    """
    if max_length < 0:
        raise InputError(f"max_length must be ≥ 0, got {max_length}")
    k = len(machine.alphabet)
    if max_length > 0:   # one extension round holds up to `chunk` × k candidates (≥ k)
        limits.check(f"enumerating the live prefixes of {machine!r} ({k:,} symbols, each "
                     "prefix extended by every symbol)", 48 * max(k, _CHUNK_CELLS), "max_bytes",
                     hint="check random or explicit strings instead (samples=, strings=, "
                          "max_length=None)")
    st = stepper(machine, replay=True)
    init = st.start(1)
    levels = [np.zeros((1 if not st.dead(init)[0] else 0, 0), dtype=np.int64)]
    states = st.take(init, np.flatnonzero(~st.dead(init)))
    total = len(levels[0])
    chunk = max(1, _CHUNK_CELLS // max(k, 1))
    for n in range(max_length):
        prev = levels[-1]
        kept_ids, kept_states = [], []
        for lo in range(0, len(prev), chunk):
            rows = np.arange(lo, min(lo + chunk, len(prev)))
            parent = np.repeat(rows, k)
            syms = np.tile(np.arange(k, dtype=np.int64), len(rows))
            cand = st.step(st.take(states, parent), syms)
            alive = ~st.dead(cand)
            total += int(alive.sum())
            if total > max_strings:
                raise VerificationError(
                    f"exhaustive enumeration of live prefixes of {machine!r} passes max_strings="
                    f"{max_strings:,} at length {n + 1}; lower max_length to at most {n} (or raise "
                    "max_strings)"
                )
            kept_ids.append(np.concatenate([prev[parent[alive]], syms[alive, None]], axis=1))
            kept_states.append(st.take(cand, np.flatnonzero(alive)))
        if kept_ids:
            levels.append(np.concatenate(kept_ids, axis=0))
            states = _concat_states(kept_states)
        else:
            levels.append(np.zeros((0, n + 1), dtype=np.int64))
            states = st.take(states, np.zeros(0, dtype=np.int64))
    return levels


def _concat_states(parts: list) -> Any:
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=0)
    raise TypeError("stepper states must be numpy arrays")


# --- random strings -----------------------------------------------------------------------------------

def length_range(length: int | tuple[int, int]) -> tuple[int, int]:
    lo, hi = (length, length) if np.isscalar(length) else tuple(length)
    lo, hi = int(lo), int(hi)
    if lo < 0 or hi < lo:
        raise InputError(f"bad length range ({lo}, {hi}): need 0 ≤ low ≤ high")
    return lo, hi


def random_walks(machine: Machine, n: int, length: int, rng: np.random.Generator,
                 extendable: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """n random live strings of `length` symbols: each step picks uniformly among the symbols
    whose extension is live. A walk that reaches a live configuration with no live extension stops
    there (its length is then shorter). Returns (ids (n, length) padded with -1, lengths).

    With ``extendable`` (long strings), a finite-state machine's walk picks, before its last
    step, only among the symbols into states from which live walks of every length start
    (`unbounded_states`) whenever there is one, so it runs to `length` wherever the machine has
    arbitrarily long live strings through that state; the last symbol is any live one.
    A machine with its own batched walk (``machine.random_walks``, e.g. a real-time DPDA or DPDT
    and its depth-bounded `BoundedPDA`: the same rule and draws without stepping configuration
    objects) runs that one."""
    fast = getattr(machine, "random_walks", None)
    if callable(fast) and not _is_table_machine(machine):
        got = fast(n, length, rng)
        if got is not None:
            return got
    return _stepped_walks(machine, n, length, rng, extendable)


def unbounded_states(machine: Machine) -> np.ndarray:
    """(n_states,) bool for a table machine (`TableStepper`): the live states from which live
    walks of every length start — those that reach a cycle through live states (the live states
    left after repeatedly removing those with no successor left)."""
    table, keep = machine.table, machine.live_mask.copy()
    while True:
        succ = np.where(table >= 0, keep[np.maximum(table, 0)], False).any(axis=1)
        new = keep & succ
        if (new == keep).all():
            return keep
        keep = new


def _stepped_walks(machine: Machine, n: int, length: int, rng: np.random.Generator,
                   extendable: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """`random_walks` through the machine's `stepper` (any machine)."""
    st = stepper(machine, replay=False)
    k = len(machine.alphabet)
    ids = np.full((n, length), -1, dtype=np.int64)
    lengths = np.full(n, length, dtype=np.int64)
    states = st.start(n)
    going = ~st.dead(states)
    lengths[~going] = 0
    syms_all = np.arange(k, dtype=np.int64)
    far = unbounded_states(machine) if extendable and isinstance(st, TableStepper) else None
    for t in range(length):
        rows = np.flatnonzero(going)
        if len(rows) == 0:
            break
        cand = st.step(st.take(states, np.repeat(rows, k)), np.tile(syms_all, len(rows)))
        alive = ~st.dead(cand).reshape(len(rows), k)
        if far is not None and t < length - 1:
            onward = alive & far[np.maximum(cand, 0)].reshape(len(rows), k)
            alive = np.where(onward.any(axis=1, keepdims=True), onward, alive)
        choice, stuck = draw_allowed(alive, rng)
        lengths[rows[stuck]] = t
        going[rows[stuck]] = False
        moved = np.flatnonzero(~stuck)
        ids[rows[moved], t] = choice[moved]
        new_states = st.take(cand, moved * k + choice[moved])
        states = _assign(states, rows[moved], new_states)
    return ids, lengths


def _assign(states: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = states.copy()
    out[rows] = values
    return out


def _from_sampler(machine: Machine, n: int, length: int, rng: np.random.Generator,
                  **kwargs) -> tuple[np.ndarray, np.ndarray]:
    got = machine.sample(n, length, rng, **kwargs)
    if isinstance(got, tuple):
        ids, lengths = got
    else:
        ids = got
        lengths = (np.asarray(ids) >= 0).sum(axis=1)
    return np.asarray(ids, dtype=np.int64), np.asarray(lengths, dtype=np.int64)


def random_live_strings(machine: Machine, n: int, length: int | tuple[int, int],
                        rng: np.random.Generator | int | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """n random live strings with lengths drawn uniformly from `length` (an int or an inclusive
    (low, high) range): random live walks (the machine's ``sample`` when it has one) cut to each
    row's drawn length. Returns (ids padded with -1, lengths)."""
    rng = np.random.default_rng(rng)
    lo, hi = length_range(length)
    want = rng.integers(lo, hi + 1, size=n)
    if callable(getattr(machine, "sample", None)):
        ids, got = _from_sampler(machine, n, hi, rng)
    else:
        ids, got = random_walks(machine, n, hi, rng)
    lengths = np.minimum(want, got)
    ids = np.where(np.arange(ids.shape[1])[None, :] < lengths[:, None], ids, -1)
    return ids, lengths


def long_strings(machine: Machine, n: int, length: int,
                 rng: np.random.Generator | int | None = None, busy: float = 0.7
                 ) -> tuple[np.ndarray, np.ndarray]:
    """n live strings of `length` symbols that keep the stack busy: the machine's
    ``sample(n, length, rng, busy=busy)`` when it has one, otherwise random live walks (which,
    on a finite-state machine, keep to states with live strings of every length until the last
    step: ``random_walks(..., extendable=True)``)."""
    rng = np.random.default_rng(rng)
    if callable(getattr(machine, "sample", None)):
        return _from_sampler(machine, n, length, rng, busy=busy)
    return random_walks(machine, n, length, rng, extendable=True)


def encode_strings(machine: Machine, strings: Sequence | np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Explicit strings as (ids, lengths); InputError naming any symbol outside the alphabet.

    `strings` is a sequence of strings, or an already encoded 2-D integer array of alphabet
    indices, one string per row, padded with -1 after its end (lengths = the entries ≥ 0)."""
    if isinstance(strings, np.ndarray) and strings.ndim == 2 and strings.dtype.kind in "iu":
        ids = strings.astype(np.int64, copy=False)
        lengths = (ids >= 0).sum(axis=1)
        inside = np.arange(ids.shape[1])[None, :] < lengths[:, None]
        if ((ids < 0) & inside).any():
            b = int(((ids < 0) & inside).any(axis=1).argmax())
            raise InputError(f"encoded string {b} has padding (-1) before its last symbol; pad "
                             "only after the end")
        return machine.check_ids(ids, lengths)
    if isinstance(strings, np.ndarray) and strings.dtype.kind in "iu":
        raise InputError(f"encoded strings must be a 2-D (strings, positions) index array, got "
                         f"shape {strings.shape}")
    return machine.alphabet.encode_batch(list(strings))


__all__ = [
    "DEFAULT_MAX_STRINGS",
    "ConfigStepper",
    "ReplayStepper",
    "Stepper",
    "TableStepper",
    "dead_batch",
    "encode_strings",
    "has_dead_batch",
    "length_range",
    "live_mask",
    "live_prefixes",
    "long_strings",
    "random_live_strings",
    "random_walks",
    "stepper",
    "unbounded_states",
]

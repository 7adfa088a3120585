"""Deterministic real-time transducers with one store: a stack, a queue or a double-ended queue.

`StoreTransducer` reads one input symbol per step, looks at one end of its store, emits at most one
output symbol and applies one store operation. Transitions are written
``{(q, a, X): (q2, y, op)}``: in state ``q`` reading ``a`` with ``X`` at the end the machine looks
at (a store symbol, or `BOTTOM` when the store is empty), it emits ``y`` (an output symbol, or
`EPSILON`/None for nothing), applies ``op`` and goes to ``q2``. A missing transition blocks the
machine (dead configuration, ``state=None``).

Store contents are a tuple written *bottom end first* (index 0) and *top end last*:

- ``"stack"``: looks at the top; ops ``"noop"``, ``("push", Y)``, ``"pop"``, ``("replace", Y)``
  (pop then push).
- ``"queue"``: the front is the bottom end (index 0), pushes go to the back (top end); looks at
  the front; ops ``"noop"``, ``("push", Y)`` (enqueue), ``"pop"`` (dequeue), ``("replace", Y)``
  (dequeue, then enqueue Y).
- ``"deque"``: looks at the end named by ``reads[q]`` ("top" unless given); ops ``"noop"``,
  ``("push_top", Y)``, ``("push_bottom", Y)``, ``"pop_top"``, ``"pop_bottom"``.

A stack's contents are a `pdanet.automata.pda.Stack`, a queue's and a deque's a `Deque`: both are
persistent values equal to (and hashing like) the tuple of their symbols, so a step is O(1)
(amortised for `Deque`) and never copies the store. Popping an empty store is an error at
construction (a transition reading `BOTTOM` may not pop).
`run_batch` fields (B, T+1, …): ``state`` (-1 dead), ``store`` (codes bottom end first, -1
padding, width = the longest store in the batch, at least 1), ``size`` (-1 dead) and ``output``
(index into ``output_alphabet``, -1 for none). `StoreTransducer.run_batch_window` gives the same
without whole stores (a few cells at each end, and the bottom end's ``offset``) for long strings.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from pdanet import limits
from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet
from pdanet.automata.base import BatchTrace, Machine, hold_after_length, index_states
from pdanet.automata.pda import Stack
from pdanet.errors import AutomatonError, InputError

STORE_KINDS = ("stack", "queue", "deque")
_OPS = {
    "stack": ("noop", "push", "pop", "replace"),
    "queue": ("noop", "push", "pop", "replace"),
    "deque": ("noop", "push_top", "push_bottom", "pop_top", "pop_bottom"),
}
# (pop end, push end) of each op; "top" = last element, "bottom" = element 0.
_ENDS = {
    ("stack", "noop"): (None, None), ("stack", "push"): (None, "top"),
    ("stack", "pop"): ("top", None), ("stack", "replace"): ("top", "top"),
    ("queue", "noop"): (None, None), ("queue", "push"): (None, "top"),
    ("queue", "pop"): ("bottom", None), ("queue", "replace"): ("bottom", "top"),
    ("deque", "noop"): (None, None), ("deque", "push_top"): (None, "top"),
    ("deque", "push_bottom"): (None, "bottom"), ("deque", "pop_top"): ("top", None),
    ("deque", "pop_bottom"): ("bottom", None),
}


class Deque(Sequence):
    """An immutable double-ended queue written bottom end first (``d[0]`` the bottom, ``d[-1]``
    the top), used for queue and deque stores.

    It is two shared-tail `Stack` values: ``_bot`` holds the bottom part with ``d[0]`` on its top, and
    ``_top`` the top part with ``d[-1]`` on its top. Pushing at either end is O(1); popping or
    reading an end whose stack is empty first splits the contents in halves between the two
    stacks (O(n), done once per value and cached), so any sequence of n operations on successive
    values costs O(n) in all. It is a value: it compares equal to any tuple, `Stack` or `Deque`
    with the same symbols bottom end first, and hashes like that tuple (O(n) the first time, then
    cached). Iterating, ``tuple(d)`` and ``d[i]`` (other than ``d[0]`` and ``d[-1]``) cost O(n).
    """

    __slots__ = ("__weakref__", "_bot", "_even", "_hash", "_top")

    #: cells built by splits so far (all instances); a run of n steps adds O(n) to it.
    cells_moved = 0

    _bot: Stack
    _top: Stack
    _even: Deque | None       # the same contents split in halves, made on first need
    _hash: int | None

    def __new__(cls, symbols: Iterable[Hashable] = ()) -> Deque:  # noqa: PYI034
        if isinstance(symbols, Deque):
            return symbols
        items = list(symbols)
        k = len(items) // 2
        return cls._make(Stack(reversed(items[:k])), Stack(items[k:]))

    @classmethod
    def _make(cls, bot: Stack, top: Stack) -> Deque:
        d = object.__new__(cls)
        d._bot, d._top, d._even, d._hash = bot, top, None, None
        return d

    def _split(self) -> Deque:
        """The same contents with both stacks holding half (at least one symbol each when
        ``len >= 2``); built once per value."""
        if self._even is None:
            items = list(self)
            Deque.cells_moved += len(items)
            self._even = Deque(items)
        return self._even

    # --- amortised O(1) ------------------------------------------------------------------------
    def settled(self, end: str) -> Deque:
        """An equal deque whose ``end`` ("top" or "bottom") reads and pops in O(1): ``self``, or
        its split in halves when that end's stack is empty. Values derived from the result keep
        the split, so a run reading one end splits O(1) times per symbol on average."""
        side = self._top if end == "top" else self._bot
        if side or len(self) <= 1:
            return self
        return self._split()

    def push_top(self, symbol: Hashable) -> Deque:
        """The deque with ``symbol`` added after the top end (a queue's enqueue)."""
        return Deque._make(self._bot, self._top.push(symbol))

    def push_bottom(self, symbol: Hashable) -> Deque:
        """The deque with ``symbol`` added before the bottom end."""
        return Deque._make(self._bot.push(symbol), self._top)

    def _pop(self, end: str) -> Deque:
        if len(self) <= 1:
            if not self:
                raise IndexError("pop from an empty deque")
            return _EMPTY_DEQUE
        d = self.settled(end)             # both stacks non-empty unless ``end``'s already was
        if end == "top":
            return Deque._make(d._bot, d._top.pop())
        return Deque._make(d._bot.pop(), d._top)

    def pop_top(self) -> Deque:
        """The deque without its top symbol; IndexError when empty."""
        return self._pop("top")

    def pop_bottom(self) -> Deque:
        """The deque without its bottom symbol (a queue's dequeue); IndexError when empty."""
        return self._pop("bottom")

    def _end(self, end: str) -> Any:
        if not self:
            raise IndexError("the deque is empty")
        d = self.settled(end)
        near, far = (d._top, d._bot) if end == "top" else (d._bot, d._top)
        return (near or far).top          # one symbol in all: it is at both ends

    @property
    def top(self) -> Any:
        """The symbol at the top end (``d[-1]``); IndexError when empty."""
        return self._end("top")

    @property
    def bottom(self) -> Any:
        """The symbol at the bottom end (``d[0]``); IndexError when empty."""
        return self._end("bottom")

    def __len__(self) -> int:
        return len(self._bot) + len(self._top)

    def __bool__(self) -> bool:
        return bool(self._bot) or bool(self._top)

    # --- O(n) ----------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        yield from reversed(self._bot)
        yield from self._top

    def __reversed__(self) -> Iterator[Any]:
        yield from reversed(self._top)
        yield from self._bot

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return tuple(self)[i]
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"deque indices must be integers or slices, not {type(i).__name__}")
        n, nb = len(self), len(self._bot)
        j = int(i) + n if i < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError("deque index out of range")
        if j == 0:
            return self.bottom
        if j == n - 1:
            return self.top
        return self._bot[nb - 1 - j] if j < nb else self._top[j - nb]

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (tuple, Stack, Deque)):
            return NotImplemented
        if self is other:
            return True
        if len(self) != len(other):
            return False
        if isinstance(other, Deque) and self._hash is not None and other._hash is not None \
                and self._hash != other._hash:
            return False
        return tuple(self) == tuple(other)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self):
        return (Deque, (tuple(self),))


_EMPTY_DEQUE = Deque._make(Stack(), Stack())


@dataclass(frozen=True)
class StoreConfig:
    """State (None = dead), store contents (bottom end first: a `Stack` or a `Deque` after a step,
    equal to the tuple of its symbols) and the symbol emitted by the last step (None for none)."""

    state: Hashable | None
    store: Sequence = ()
    emitted: Hashable | None = None


@dataclass(frozen=True)
class StoreMove:
    """A normalised transition result: target state, emitted symbol (None), op name, pushed
    symbol (None), and the ends it pops from / pushes to (None for none)."""

    target: Hashable
    output: Hashable | None
    op: str
    symbol: Hashable | None
    pop_end: str | None
    push_end: str | None


class StoreTransducer(Machine):
    """A deterministic real-time transducer with a stack, queue or deque (see the module
    docstring). ``accepting`` (optional) restricts the domain as for `DPDT`."""

    output_kind = "symbol"

    def __init__(self, store: str, states: Iterable[Hashable],
                 input_alphabet: Alphabet | Iterable[Hashable] | str,
                 output_alphabet: Alphabet | Iterable[Hashable] | str,
                 store_alphabet: Alphabet | Iterable[Hashable] | str,
                 transitions: Mapping[tuple, Any], start: Hashable,
                 accepting: Iterable[Hashable] = (), reads: Mapping[Hashable, str] | None = None,
                 name: str | None = None):
        if store not in STORE_KINDS:
            raise AutomatonError(f"store {store!r} is not one of {STORE_KINDS}")
        self.store = store
        self.states, self._state_index = index_states(states, none_is_dead=True)
        self.alphabet = Alphabet.of(input_alphabet)
        self.output_alphabet = Alphabet.of(output_alphabet)
        self.store_alphabet = Alphabet.of(store_alphabet)
        if start not in self._state_index:
            raise AutomatonError(f"start state {start!r} is not among the declared states")
        self.start = start
        self.accepting = frozenset(accepting)
        for q in self.accepting:
            if q not in self._state_index:
                raise AutomatonError(f"accepting state {q!r} is not among the declared states")
        reads = dict(reads or {})
        if reads and store != "deque":
            raise AutomatonError(f"`reads` is only for deques; a {store} looks at one fixed end")
        for q, end in reads.items():
            if q not in self._state_index or end not in ("top", "bottom"):
                raise AutomatonError(f"reads[{q!r}] = {end!r}: need a declared state and "
                                     "'top' or 'bottom'")
        self.reads = {q: reads.get(q, "top" if store != "queue" else "bottom")
                      for q in self.states}
        if store == "stack":
            self.reads = {q: "top" for q in self.states}
        self.name = name
        self._trans: dict[tuple, StoreMove] = {}
        for key, value in dict(transitions).items():
            self._trans[key] = self._parse(key, value)

    # --- validation -----------------------------------------------------------------------------
    def _parse(self, key: Any, value: Any) -> StoreMove:
        if not (isinstance(key, tuple) and len(key) == 3):
            raise AutomatonError(f"transition key {key!r} must be (state, input symbol, read symbol)")
        q, a, x = key
        if q not in self._state_index:
            raise AutomatonError(f"transition {key!r} leaves undeclared state {q!r}")
        if a not in self.alphabet:
            raise AutomatonError(f"transition {key!r} reads {a!r}, not in the input alphabet "
                                 f"{self.alphabet!r} (store transducers are real-time: no ε)")
        if x is not BOTTOM and x not in self.store_alphabet:
            raise AutomatonError(f"transition {key!r} expects {x!r}, neither BOTTOM nor in the "
                                 f"store alphabet {self.store_alphabet!r}")
        if not (isinstance(value, tuple) and len(value) == 3):
            raise AutomatonError(f"transition {key!r} must map to (next state, output, op), got "
                                 f"{value!r}")
        q2, y, op = value
        if q2 not in self._state_index:
            raise AutomatonError(f"transition {key!r} goes to undeclared state {q2!r}")
        if y is EPSILON:
            y = None
        if y is not None and y not in self.output_alphabet:
            raise AutomatonError(f"transition {key!r} emits {y!r}, not in the output alphabet "
                                 f"{self.output_alphabet!r}")
        name, sym = (op, None) if isinstance(op, str) else (tuple(op) + (None,))[:2]
        if name not in _OPS[self.store]:
            raise AutomatonError(f"transition {key!r}: op {op!r} is not one of "
                                 f"{_OPS[self.store]} for a {self.store}")
        pop_end, push_end = _ENDS[(self.store, name)]
        if (push_end is None) != (sym is None):
            raise AutomatonError(f"transition {key!r}: op {op!r} needs a pushed symbol exactly "
                                 "when it pushes, e.g. ('push', 'a')")
        if sym is not None and sym not in self.store_alphabet:
            raise AutomatonError(f"transition {key!r} pushes {sym!r}, not in the store alphabet "
                                 f"{self.store_alphabet!r}")
        if pop_end is not None and x is BOTTOM:
            raise AutomatonError(f"transition {key!r} pops an empty {self.store}; drop the pop "
                                 "or the transition")
        return StoreMove(q2, y, name, sym, pop_end, push_end)

    # --- structure ------------------------------------------------------------------------------
    @property
    def transitions(self) -> dict:
        return dict(self._trans)

    @property
    def is_realtime(self) -> bool:
        return True

    def state_index(self, q: Hashable) -> int:
        try:
            return self._state_index[q]
        except KeyError:
            raise AutomatonError(f"{q!r} is not a state of {self!r}") from None

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return (f"<StoreTransducer{label} ({self.store}): {len(self.states)} states, "
                f"{len(self.alphabet)} input symbols, {len(self.store_alphabet)} store symbols>")

    @cached_property
    def _key(self) -> tuple:
        return (self.store, self.states, self.alphabet, self.output_alphabet, self.store_alphabet,
                frozenset(self._trans.items()), self.start, self.accepting,
                tuple(sorted(self.reads.items(), key=repr)))


    # --- the protocol ---------------------------------------------------------------------------
    def initial(self) -> StoreConfig:
        """The start state with an empty store: an empty `Stack` for a stack, an empty `Deque`
        for a queue or a deque (both equal to ``()``, and O(1) per push and pop)."""
        return StoreConfig(self.start, Stack() if self.store == "stack" else _EMPTY_DEQUE, None)

    def _look(self, q: Hashable, store: Sequence) -> Hashable:
        if not store:
            return BOTTOM
        return store[-1] if self.reads[q] == "top" else store[0]

    def step(self, config: StoreConfig, symbol: Hashable) -> StoreConfig:
        if symbol not in self.alphabet:
            self.alphabet.index(symbol)
        if config.state is None:
            return StoreConfig(None, (), None)
        s = config.store
        if self.store != "stack":           # make the end looked at readable in O(1)
            s = Deque(s).settled(self.reads[config.state])
        move = self._trans.get((config.state, symbol, self._look(config.state, s)))
        if move is None:
            return StoreConfig(None, (), None)
        if self.store == "stack":           # shared-tail stack: O(1) per step
            s = Stack(s)
            if move.pop_end == "top":
                s = s.pop()
            if move.push_end == "top":
                s = s.push(move.symbol)
            return StoreConfig(move.target, s, move.output)
        if move.pop_end == "top":           # two-stack deque: amortised O(1) per step
            s = s.pop_top()
        elif move.pop_end == "bottom":
            s = s.pop_bottom()
        if move.push_end == "top":
            s = s.push_top(move.symbol)
        elif move.push_end == "bottom":
            s = s.push_bottom(move.symbol)
        return StoreConfig(move.target, s, move.output)

    def output(self, config: StoreConfig) -> Hashable | None:
        return config.emitted

    def is_dead(self, config: StoreConfig) -> bool:
        return config.state is None

    def is_accepting(self, config: StoreConfig) -> bool:
        return config.state is not None and (not self.accepting or config.state in self.accepting)

    def transduce(self, string) -> tuple:
        """The output string; InputError when the machine blocks or ends outside ``accepting``."""
        config = self.initial()
        out = []
        for pos, sym in enumerate(self.alphabet.split(string)):
            config = self.step(config, sym)
            if config.state is None:
                raise InputError(f"{self!r} blocks at position {pos} of {string!r}: the string is not "
                                 "in the transducer's domain")
            if config.emitted is not None:
                out.append(config.emitted)
        if not self.is_accepting(config):
            raise InputError(f"{self!r} ends {string!r} outside its accepting states: the string "
                             "is not in the transducer's domain")
        return tuple(out)

    # --- batched simulation ---------------------------------------------------------------------
    @cached_property
    def tables(self) -> dict[str, np.ndarray]:
        """Dense tables indexed by (state, input, read code; BOTTOM = |store alphabet|):
        ``next`` (-1 missing), ``out`` (-1 none), ``pop`` / ``push`` (0 none, 1 top, 2 bottom),
        ``sym`` (pushed code, -1 none); and ``reads_top`` per state."""
        n, k, g = len(self.states), len(self.alphabet), len(self.store_alphabet) + 1
        nxt = np.full((n, k, g), -1, dtype=np.int64)
        out = np.full((n, k, g), -1, dtype=np.int64)
        pop = np.zeros((n, k, g), dtype=np.int64)
        push = np.zeros((n, k, g), dtype=np.int64)
        sym = np.full((n, k, g), -1, dtype=np.int64)
        end = {None: 0, "top": 1, "bottom": 2}
        for (q, a, x), mv in self._trans.items():
            i = (self._state_index[q], self.alphabet.index(a),
                 g - 1 if x is BOTTOM else self.store_alphabet.index(x))
            nxt[i] = self._state_index[mv.target]
            out[i] = -1 if mv.output is None else self.output_alphabet.index(mv.output)
            pop[i], push[i] = end[mv.pop_end], end[mv.push_end]
            sym[i] = -1 if mv.symbol is None else self.store_alphabet.index(mv.symbol)
        reads_top = np.array([self.reads[q] == "top" for q in self.states], dtype=bool)
        return {"next": nxt, "out": out, "pop": pop, "push": push, "sym": sym,
                "reads_top": reads_top}

    def _walk(self, ids: np.ndarray, lengths: np.ndarray) -> Iterator[tuple]:
        """The batched run, one step at a time: after each step t + 1 it yields ``(buf, lo, hi,
        q, out)``, each row's store being ``buf[lo:hi]`` (bottom end first) in a buffer with room
        for T symbols on either side (a dead row has ``lo = hi = T``), ``q`` the states (-1
        dead) and ``out`` the step's outputs (-1 none). The arrays are updated in place."""
        tab = self.tables
        B, T = ids.shape
        G = len(self.store_alphabet)
        buf = np.full((B, 2 * T + 1), -1, dtype=np.int64)
        lo = np.full(B, T, dtype=np.int64)
        hi = lo.copy()
        q = np.full(B, self._state_index[self.start], dtype=np.int64)
        out = np.full(B, -1, dtype=np.int64)
        rows = np.arange(B)
        for t in range(T):
            active = (t < lengths) & (q >= 0)
            r = rows[active]
            empty = lo[r] == hi[r]
            top_first = tab["reads_top"][q[r]]
            look = np.where(top_first, buf[r, np.maximum(hi[r] - 1, 0)], buf[r, lo[r]])
            look = np.where(empty, G, look)
            idx = (q[r], ids[r, t], look)
            q2 = tab["next"][idx]
            pop, push, sym = tab["pop"][idx], tab["push"][idx], tab["sym"][idx]
            hi[r] -= pop == 1
            lo[r] += pop == 2
            put_top, put_bot = r[push == 1], r[push == 2]
            buf[put_top, hi[put_top]] = sym[push == 1]
            hi[put_top] += 1
            lo[put_bot] -= 1
            buf[put_bot, lo[put_bot]] = sym[push == 2]
            q[r] = q2
            out[:] = -1
            out[r] = np.where(q2 >= 0, tab["out"][idx], -1)
            dead = r[q2 < 0]
            lo[dead] = hi[dead] = T
            yield buf, lo, hi, q, out

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """Vectorised over the batch: each row's store is a window ``buf[lo:hi]`` of a buffer with
        room for T symbols on either side (see the module docstring for the fields)."""
        ids, lengths = self.check_ids(ids, lengths)
        B, T = ids.shape
        states = np.empty((B, T + 1), dtype=np.int64)
        sizes = np.empty((B, T + 1), dtype=np.int64)
        outs = np.full((B, T + 1), -1, dtype=np.int64)
        snaps = [np.full((B, 0), -1, dtype=np.int64)]      # the stores, as wide as needed
        held = 0                                             # bytes held by the snapshots
        cols = np.arange(T)
        states[:, 0] = self._state_index[self.start]
        sizes[:, 0] = 0
        for t, (buf, lo, hi, q, out) in enumerate(self._walk(ids, lengths)):
            states[:, t + 1] = q
            outs[:, t + 1] = out
            size = np.where(q >= 0, hi - lo, -1)
            sizes[:, t + 1] = size
            w = int(size.max(initial=0))                     # O(B·w) per step, not O(B·T)
            held += 8 * B * w
            if held > limits.current().max_bytes:
                limits.check(f"the 'store' field of {self!r}.run_batch ({B} rows, {T} steps, "
                             f"stores up to {w} symbols so far)", 2 * held, "max_bytes",
                             hint="check fewer or shorter strings per batch, or use "
                                  "run_batch_window")
            gather = np.minimum(lo[:, None] + cols[None, :w], 2 * T)
            snaps.append(np.where(cols[None, :w] < size[:, None],
                                  np.take_along_axis(buf, gather, axis=1), -1))
        W = max(int(sizes.max(initial=0)), 1)
        limits.check(f"the 'store' field of {self!r}.run_batch ({B} rows, {T} steps, stores up "
                     f"to {W} symbols)", held + 8 * B * (T + 1) * W, "max_bytes",
                     hint="check fewer or shorter strings per batch, or use run_batch_window")
        store = np.full((B, T + 1, W), -1, dtype=np.int64)
        for t, snap in enumerate(snaps):
            store[:, t, :snap.shape[1]] = snap
        fields = {"state": hold_after_length(states, lengths),
                  "store": hold_after_length(store, lengths),
                  "size": hold_after_length(sizes, lengths),
                  "output": hold_after_length(outs, lengths)}
        return BatchTrace(lengths, fields)

    def run_batch_window(self, ids: np.ndarray, lengths: np.ndarray | None = None,
                         cells: int = 3) -> BatchTrace:
        """`run_batch` without whole stores, for very long strings: O(B·cells) work a step and
        O(B·T·cells) memory however long the stores get (the DPDA's analogue is
        `pdanet.automata.pda.DeterministicPushdown.run_batch_window`). Fields (B, T+1, …):

        - ``state``, ``size`` and ``output`` as in `run_batch`;
        - ``store_top`` (B, T+1, cells): the codes of the ``cells`` symbols at the top end (a
          queue's back), top first; ``store_bottom`` (B, T+1, cells): those at the bottom end (a
          queue's front), bottom first. -1 past the other end (a store of fewer than ``cells``
          symbols shows all of them in both) and once dead;
        - ``offset``: the symbols removed from the bottom end minus those added there so far (a
          queue's dequeues; 0 for a stack; 0 once dead). With ``size`` it places the store in a
          fixed frame — its cells are at positions offset … offset + size − 1, and a cell that
          stays keeps its position — which is what lets end windows decide equality of whole
          stores step by step (`pdanet.verify` relies on it; equal sizes and ends alone do not).

        InputError for ``cells`` that is not an integer ≥ 1."""
        if isinstance(cells, bool) or not isinstance(cells, (int, np.integer)) or cells < 1:
            raise InputError(f"cells must be an integer ≥ 1, got {cells!r}")
        cells = int(cells)
        ids, lengths = self.check_ids(ids, lengths)
        B, T = ids.shape
        limits.check(f"{self!r}.run_batch_window ({B} rows, {T} steps, {cells} cells an end)",
                     8 * B * (T + 1) * (2 * cells + 3), "max_bytes",
                     hint="check fewer or shorter strings per batch")
        states = np.empty((B, T + 1), dtype=np.int64)
        sizes = np.empty((B, T + 1), dtype=np.int64)
        outs = np.full((B, T + 1), -1, dtype=np.int64)
        offsets = np.zeros((B, T + 1), dtype=np.int64)
        tops = np.full((B, T + 1, cells), -1, dtype=np.int64)
        bottoms = np.full((B, T + 1, cells), -1, dtype=np.int64)
        states[:, 0] = self._state_index[self.start]
        sizes[:, 0] = 0
        k = np.arange(cells)
        for t, (buf, lo, hi, q, out) in enumerate(self._walk(ids, lengths)):
            states[:, t + 1] = q
            outs[:, t + 1] = out
            sizes[:, t + 1] = np.where(q >= 0, hi - lo, -1)
            offsets[:, t + 1] = lo - T                       # dead rows: lo = T
            pos = hi[:, None] - 1 - k                        # top first
            tops[:, t + 1] = np.where(pos >= lo[:, None],
                                      np.take_along_axis(buf, np.maximum(pos, 0), axis=1), -1)
            pos = lo[:, None] + k                            # bottom first
            bottoms[:, t + 1] = np.where(pos < hi[:, None],
                                         np.take_along_axis(buf, np.minimum(pos, 2 * T), axis=1),
                                         -1)
        fields = {"state": hold_after_length(states, lengths),
                  "size": hold_after_length(sizes, lengths),
                  "offset": hold_after_length(offsets, lengths),
                  "store_top": hold_after_length(tops, lengths),
                  "store_bottom": hold_after_length(bottoms, lengths),
                  "output": hold_after_length(outs, lengths)}
        return BatchTrace(lengths, fields)


# --- instances (Grefenstette et al. 2015, §4.1, delayed-output form w #^|w| -> #^|w| f(w)) -------
BLANK = "#"


def _vocab(vocab_size: int) -> tuple:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise InputError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    return tuple(f"s{i}" for i in range(vocab_size))


def _read_then_write(V: tuple, push: str, pop: str) -> dict:
    """Transitions of w #^|w| → #^|w| f(w): store each symbol of w (emitting #), then on each #
    emit the symbol the store yields and remove it."""
    t: dict = {}
    for x in V:
        for s in V + (BOTTOM,):
            t[("read", x, s)] = ("read", BLANK, (push, x))
    for s in V:
        for q in ("read", "write"):
            t[(q, BLANK, s)] = ("write", s, pop)
    return t


def sequence_copy(vocab_size: int = 4, store: str = "queue") -> StoreTransducer:
    """w #^|w| -> #^|w| w with a queue (enqueue w, then dequeue one symbol per #) or a deque
    (push w on top, then pop the bottom). Domain: the strings read without blocking."""
    if store not in ("queue", "deque"):
        raise InputError(f"sequence copy needs a queue or a deque, not a {store!r}")
    V = _vocab(vocab_size)
    push, pop = ("push", "pop") if store == "queue" else ("push_top", "pop_bottom")
    t = _read_then_write(V, push, pop)
    return StoreTransducer(store, ("read", "write"), V + (BLANK,), V + (BLANK,), V, t, "read",
                           reads={"read": "bottom", "write": "bottom"} if store == "deque" else None,
                           name=f"sequence_copy_{store}")


def sequence_reversal(vocab_size: int = 4, store: str = "deque") -> StoreTransducer:
    """w #^|w| -> #^|w| w^R with a stack or a deque (push w on top, pop the top per #)."""
    if store not in ("stack", "deque"):
        raise InputError(f"sequence reversal needs a stack or a deque, not a {store!r}")
    V = _vocab(vocab_size)
    push, pop = ("push", "pop") if store == "stack" else ("push_top", "pop_top")
    t = _read_then_write(V, push, pop)
    return StoreTransducer(store, ("read", "write"), V + (BLANK,), V + (BLANK,), V, t, "read",
                           name=f"sequence_reversal_{store}")


def bigram_flip(vocab_size: int = 4) -> StoreTransducer:
    """w #^|w| -> #^|w| flip(w) (|w| even; flip swaps positions 2i-1 and 2i) with a queue.

    The queue lags one symbol behind: x_{2i} is enqueued when read and x_{2i-1} (held in the
    state) when x_{2i+1} is read, so after w it holds x2 x1 x4 x3 … x_n and the state owes
    x_{n-1}. The first # dequeues x2 and enqueues x_{n-1} (a replace); later #s dequeue."""
    V = _vocab(vocab_size)
    states = ("start", "write") + tuple(("hold", x) for x in V) + tuple(("owe", x) for x in V)
    t: dict = {}
    G = V + (BOTTOM,)
    for x in V:
        for s in G:
            t[("start", x, s)] = (("hold", x), BLANK, "noop")
            for y in V:
                t[(("hold", x), y, s)] = (("owe", x), BLANK, ("push", y))
                t[(("owe", y), x, s)] = (("hold", x), BLANK, ("push", y))
        for s in V:
            t[(("owe", x), BLANK, s)] = ("write", s, ("replace", x))
            t[("write", BLANK, x)] = ("write", x, "pop")
    return StoreTransducer("queue", states, V + (BLANK,), V + (BLANK,), V, t, "start",
                           name="bigram_flip_queue")


__all__ = [
    "BLANK",
    "STORE_KINDS",
    "Deque",
    "StoreConfig",
    "StoreMove",
    "StoreTransducer",
    "bigram_flip",
    "sequence_copy",
    "sequence_reversal",
]

"""The Machine protocol that every automaton implements and every verifier relies on.

A machine reads one input symbol per `step`. Its *configuration* is a frozen value; `output`
maps a configuration to what the machine says after reading a prefix:

- ``output_kind == "accept"``: a recogniser; the output is ``True`` when the prefix is accepted.
- ``output_kind == "next_set"``: a generator; the output is the frozenset of allowed next symbols
  (drawn from ``output_alphabet``, which may contain an end marker).
- ``output_kind == "symbol"``: a real-time transducer; the output is the symbol emitted by the
  last step (``None`` for none, e.g. at the start).

`run_batch` simulates a padded batch of strings with numpy, vectorised over the batch, and returns
a `BatchTrace` whose fields are the configurations and outputs at every step in array form.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdanet.automata import spec
from pdanet.automata.alphabet import Alphabet
from pdanet.errors import AutomatonError, FrozenMachineError, InputError

OUTPUT_KINDS = ("accept", "next_set", "symbol")


@dataclass(frozen=True)
class Step:
    """One row of a trace: the symbol read (None for the initial row), the configuration reached,
    and the machine's output there."""

    symbol: Hashable | None
    config: Any
    output: Any


@dataclass(frozen=True)
class BatchTrace:
    """Batched simulation result.

    ``fields[name]`` has shape ``(B, T + 1, ...)``: index 0 is the initial configuration and index t
    the configuration after t symbols; rows past a string's length repeat its last value. Standard
    field names: ``state`` (int, -1 = dead/rejected), ``stack`` (int, bottom first, -1 padding),
    ``depth`` (int), ``output`` (bool for "accept", bool (…, |Out|) for "next_set", int index into
    the output alphabet with -1 for none for "symbol").
    """

    lengths: np.ndarray
    fields: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.fields[name]

    @property
    def batch_size(self) -> int:
        return int(self.lengths.shape[0])


class Frozen:
    """Immutable after construction, with equality and hashing by a structural key.

    An instance is frozen once its outermost ``__init__`` returns (every ``__init__`` a subclass
    defines is wrapped for this, so subclasses need nothing special): setting or deleting any
    attribute afterwards raises `FrozenMachineError`. Caches are written straight into
    ``__dict__``: by `functools.cached_property`, or by `_cache` for hand-made ones.

    Two instances are equal when they have the same type and equal ``_key`` (a hashable tuple each
    class supplies); the hash is the key's, cached (and not pickled: string hashes differ between
    processes).
    """

    _key: Hashable

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_freezes", False):
            return

        @functools.wraps(init)
        def __init__(self: Frozen, *args: Any, **kw: Any) -> None:
            d = self.__dict__
            d["_init_depth"] = d.get("_init_depth", 0) + 1
            try:
                init(self, *args, **kw)
            finally:
                d["_init_depth"] -= 1
                if not d["_init_depth"]:
                    del d["_init_depth"]
                    d["_frozen"] = True

        __init__._freezes = True  # type: ignore[attr-defined]
        cls.__init__ = __init__  # type: ignore[misc]

    def _refuse(self, name: str, verb: str) -> FrozenMachineError:
        cls = type(self).__name__
        return FrozenMachineError(
            f"cannot {verb} attribute {name!r} of {self!r}: a {cls} is immutable once built "
            f"(its caches and batched tables would go stale); construct a new {cls} with the "
            "changed value instead"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen"):
            raise self._refuse(name, "set")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if self.__dict__.get("_frozen"):
            raise self._refuse(name, "delete")
        object.__delattr__(self, name)

    def _cache(self, name: str, value: Any) -> Any:
        """Store a derived value (never part of the key) on a frozen instance; returns it."""
        self.__dict__[name] = value
        return value

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return False
        return self._key == other._key  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(self._key)
        return h

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state


class Machine(Frozen, ABC):
    """Abstract base of all machines (see module docstring for the semantics of outputs).

    Machines are immutable after construction and compare by type and ``_key`` (see `Frozen`).
    """

    alphabet: Alphabet
    output_kind: str
    output_alphabet: Alphabet | None
    # True when every `run_batch` field has the same shape past (B, T+1) for any batch (bounded
    # stores, finite state): the verifier may then compare a batch in parts
    fixed_width_fields: bool = False
    # the machine's kind in the JSON file format (`pdanet.automata.spec.KINDS`); None: no format
    file_kind: str | None = None

    # --- the protocol -------------------------------------------------------------------------
    @abstractmethod
    def initial(self) -> Any:
        """The initial configuration."""

    @abstractmethod
    def step(self, config: Any, symbol: Hashable) -> Any:
        """The configuration after reading `symbol` (a dead configuration once rejected)."""

    @abstractmethod
    def output(self, config: Any) -> Any:
        """What the machine says in `config` (see `output_kind`)."""

    @abstractmethod
    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """Vectorised simulation of a padded batch of symbol indices (padding -1)."""

    # --- derived ------------------------------------------------------------------------------
    def is_dead(self, config: Any) -> bool:
        """True when the configuration has rejected for good (no continuation is accepted)."""
        return False

    def run(self, string: str | Sequence[Hashable]) -> Any:
        """The configuration after reading the whole string."""
        config = self.initial()
        for sym in self.alphabet.split(string):
            config = self.step(config, sym)
        return config

    def iter_trace(self, string: str | Sequence[Hashable]) -> Iterator[Step]:
        config = self.initial()
        yield Step(None, config, self.output(config))
        for sym in self.alphabet.split(string):
            config = self.step(config, sym)
            yield Step(sym, config, self.output(config))

    def trace(self, string: str | Sequence[Hashable]) -> list[Step]:
        """Step by step: the initial row, then one row per symbol read."""
        return list(self.iter_trace(string))

    def accepts(self, string: str | Sequence[Hashable]) -> bool:
        """Membership of the whole string (recognisers and generators)."""
        config = self.run(string)
        return self.is_accepting(config)

    def is_accepting(self, config: Any) -> bool:
        out = self.output(config)
        if self.output_kind == "accept":
            return bool(out)
        raise InputError(
            f"{type(self).__name__} is a {self.output_kind!r} machine; acceptance is not defined"
        )

    def outputs(self, string: str | Sequence[Hashable]) -> list:
        """The output after each prefix (the initial output first)."""
        return [s.output for s in self.iter_trace(string)]

    def save(self, path: str) -> None:
        """Write the machine to a JSON spec file (format: docs/spec-format.md)."""
        spec.save(self, path, self.file_kind)

    def encode(self, strings: Sequence) -> tuple[np.ndarray, np.ndarray]:
        """Symbol indices of a batch of strings, padded with -1, and their lengths."""
        return self.alphabet.encode_batch(strings)

    def check_ids(self, ids: np.ndarray, lengths: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Validate a padded index batch; returns (ids, lengths) as int64 arrays."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 2:
            raise InputError(f"expected a (batch, time) array of symbol indices, got shape {ids.shape}")
        if lengths is None:
            lengths = (ids >= 0).sum(axis=1)
        lengths = np.asarray(lengths, dtype=np.int64)
        T = ids.shape[1]
        if lengths.shape != ids.shape[:1]:
            raise InputError(f"lengths must have shape ({ids.shape[0]},), one per batch row, got "
                             f"{lengths.shape}")
        out = (lengths < 0) | (lengths > T)
        if out.any():
            b = int(np.argmax(out))
            raise InputError(f"length {int(lengths[b])} of batch row {b} is outside [0, {T}] "
                             f"(T = {T} columns of symbol indices)")
        valid = np.arange(T)[None, :] < lengths[:, None]
        bad = valid & ((ids < 0) | (ids >= len(self.alphabet)))
        if bad.any():
            b, t = map(int, np.argwhere(bad)[0])
            raise InputError(
                f"symbol index {int(ids[b, t])} at batch row {b}, position {t} is outside the "
                f"alphabet of {len(self.alphabet)} symbols"
            )
        return ids, lengths


def index_states(states: Iterable[Hashable], none_is_dead: bool = False) -> tuple[tuple, dict]:
    """The states as a tuple and ``{state: position}``. AutomatonError naming a state that is
    unhashable, a boolean (True would be the same state as 1), declared twice, or None when
    ``none_is_dead`` (None then marks the dead configuration)."""
    states = tuple(states)
    index: dict = {}
    for i, q in enumerate(states):
        try:
            hash(q)
        except TypeError as exc:
            raise AutomatonError(f"state {q!r} is not hashable") from exc
        if q is None and none_is_dead:
            raise AutomatonError("None cannot be a state (it marks the dead configuration)")
        if isinstance(q, (bool, np.bool_)):
            raise AutomatonError(f"state {q!r} is a boolean; name states with strings or "
                                 "integers (True would be the same state as 1)")
        if q in index:
            raise AutomatonError(f"state {q!r} is declared twice")
        index[q] = i
    return states, index


def short_name(name: Any) -> Any:
    """A machine name as shown in a repr: a str longer than 60 characters is cut in the middle."""
    if not isinstance(name, str) or len(name) <= 60:
        return name
    return f"{name[:40]}…{name[-15:]}"


class StateIndexed:
    """Mixin for machines with a finite tuple ``states`` and a ``_state_index`` dict."""

    states: tuple
    _state_index: dict

    @property
    def num_states(self) -> int:
        return len(self.states)

    def state_index(self, q: Hashable) -> int:
        """The position of state `q`; AutomatonError naming it when it is not a state."""
        try:
            return self._state_index[q]
        except KeyError:
            raise AutomatonError(f"{q!r} is not a state of {self!r}") from None


def hold_after_length(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Repeat each row's value at its length over the padding that follows (in place, returned)."""
    T1 = values.shape[1]
    t = np.arange(T1)
    idx = np.minimum(t[None, :], lengths[:, None])
    gather = idx.reshape(idx.shape + (1,) * (values.ndim - 2))
    return np.take_along_axis(values, np.broadcast_to(gather, idx.shape + values.shape[2:]), axis=1)


def draw_allowed(allowed: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One uniform draw per row among the True columns of ``allowed`` (rows, k), from one
    ``rng.random((rows, k))``: (choice, stuck), stuck where a row allows nothing (its choice is
    then meaningless). The rule of every random walk (`pdanet.verify.strings.random_walks` and a
    pushdown machine's batched walk), so walks through either draw the same strings."""
    keys = np.where(allowed, rng.random(allowed.shape), -1.0)
    return keys.argmax(axis=1), ~allowed.any(axis=1)


__all__ = [
    "OUTPUT_KINDS",
    "BatchTrace",
    "Frozen",
    "Machine",
    "StateIndexed",
    "Step",
    "draw_allowed",
    "hold_after_length",
    "index_states",
    "short_name",
]

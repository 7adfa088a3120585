"""Depth-bounded stack automata: the Dyck-(k, m) generator of Hewitt et al. (2020), and
`BoundedPDA`, a deterministic pushdown machine restricted to stack depth ≤ m.

Dyck-(k, m) is the language of well-nested strings over k bracket types whose nesting depth never
exceeds m. The machine is a *generator*: after each prefix its output is the set of allowed next
symbols — every open bracket when the depth is below m, the close bracket matching the top of the
stack when the stack is non-empty, and the end marker ``$`` when the stack is empty. A prefix that
breaks these rules leads to the dead configuration (output: the empty set).

Stacks are written bottom first; the top is the last element. Nothing here enumerates the
Σ_{i≤m} kⁱ configurations, so k = 100000 is as cheap as k = 2.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Hashable

import numpy as np

from pdanet.automata.alphabet import Alphabet
from pdanet.automata.base import BatchTrace, Machine, hold_after_length
from pdanet.automata.dfa import DFA
from pdanet.errors import CompileError, InputError, SearchBoundError

_PAIRS = ("()", "[]", "{}", "<>")
END = "$"


@dataclass(frozen=True)
class DyckConfig:
    """Stack of bracket types (bottom first, top last); ``dead`` once the prefix is illegal."""

    stack: tuple[int, ...] = ()
    dead: bool = False

    @property
    def depth(self) -> int:
        return len(self.stack)


class DyckKM(Machine):
    """The Dyck-(k, m) generator (Hewitt et al. 2020). Input symbols: k opens then k closes.

    For k ≤ 4 the brackets are the characters ``()[]{}<>``; for larger k they are the tokens
    ``(i`` and ``)i`` for i = 0..k-1 (strings are then written space-separated).
    """

    output_kind = "next_set"

    def __init__(self, k: int, m: int):
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise InputError(f"Dyck-(k, m) needs k ≥ 1 bracket types, got k={k!r}")
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise InputError(f"Dyck-(k, m) needs a depth bound m ≥ 1, got m={m!r}")
        self.k, self.m = int(k), int(m)
        self.name = f"dyck({self.k},{self.m})"

    # symbols -----------------------------------------------------------------------------------
    @cached_property
    def opens(self) -> tuple[str, ...]:
        if self.k <= len(_PAIRS):
            return tuple(p[0] for p in _PAIRS[: self.k])
        return tuple(f"({i}" for i in range(self.k))

    @cached_property
    def closes(self) -> tuple[str, ...]:
        if self.k <= len(_PAIRS):
            return tuple(p[1] for p in _PAIRS[: self.k])
        return tuple(f"){i}" for i in range(self.k))

    @cached_property
    def alphabet(self) -> Alphabet:  # type: ignore[override]
        return Alphabet(self.opens + self.closes)

    @cached_property
    def output_alphabet(self) -> Alphabet:  # type: ignore[override]
        return Alphabet(self.opens + self.closes + (END,))

    def open_id(self, i: int) -> int:
        return i

    def close_id(self, i: int) -> int:
        return self.k + i

    @property
    def end_id(self) -> int:
        return 2 * self.k

    # identity ----------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, DyckKM) and (self.k, self.m) == (other.k, other.m)

    def __hash__(self) -> int:
        return hash(("DyckKM", self.k, self.m))

    def __repr__(self) -> str:
        return f"<DyckKM k={self.k} m={self.m}>"

    @property
    def num_configs(self) -> int:
        """Σ_{i=0..m} kⁱ reachable live configurations."""
        return sum(self.k**i for i in range(self.m + 1))

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

    def output(self, config: DyckConfig) -> frozenset:
        if config.dead:
            return frozenset()
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
        """Fields: ``stack`` (B, T+1, m; bottom first, -1 empty), ``depth``, ``state`` (0 live,
        -1 dead), ``top`` (-1 when empty) and ``output`` (B, T+1, 2k+1) unless ``with_output`` is
        False (for huge k)."""
        ids, lengths = self.check_ids(ids, lengths)
        B, T = ids.shape
        k, m = self.k, self.m
        # time-major buffers (each step writes one contiguous block), returned as (B, T+1, …) views
        stacks = np.empty((T + 1, B, m), dtype=np.int64)
        depths = np.empty((T + 1, B), dtype=np.int64)
        alives = np.empty((T + 1, B), dtype=bool)
        tops = np.empty((T + 1, B), dtype=np.int64)
        stack = np.full((B, m), -1, dtype=np.int64)
        flat = stack.reshape(-1)
        depth = np.zeros(B, dtype=np.int64)
        alive = np.ones(B, dtype=bool)
        top = np.full(B, -1, dtype=np.int64)
        stacks[0], depths[0], alives[0], tops[0] = stack, depth, alive, top
        base = np.arange(B) * m
        ids_t = np.ascontiguousarray(ids.T)
        active_len = np.arange(T)[:, None] < lengths[None, :]
        for t in range(T):              # a row past its length is never active: its fields hold
            s = ids_t[t]
            act = active_len[t] & alive
            is_open = s < k
            ok_open = is_open & (depth < m)
            ok_close = ~is_open & (top == s - k)          # top is -1 on an empty stack
            alive = np.where(act, ok_open | ok_close, alive)
            do_push = act & ok_open
            do_pop = act & ok_close
            pos = base + np.where(do_push, np.minimum(depth, m - 1), np.maximum(depth - 1, 0))
            flat[pos] = np.where(do_push, s, np.where(do_pop, -1, flat[pos]))
            depth = depth + do_push - do_pop
            below = base + np.maximum(depth - 1, 0)
            top = np.where(depth > 0, flat[below], -1)
            stacks[t + 1], depths[t + 1], alives[t + 1], tops[t + 1] = stack, depth, alive, top
        stacks = stacks.transpose(1, 0, 2)
        depths, alives, tops = depths.T, alives.T, tops.T
        fields: dict[str, Any] = {
            "stack": stacks,
            "depth": depths,
            "state": np.where(alives, 0, -1),
            "top": tops,
        }
        if with_output:
            fields["output"] = self.next_set_batch(depths, tops, alives)
        return BatchTrace(lengths, fields)

    def next_set_batch(self, depth: np.ndarray, top: np.ndarray, alive: np.ndarray) -> np.ndarray:
        """Allowed-next-symbol sets (…, 2k+1) from depth, top and liveness arrays."""
        k = self.k
        out = np.empty(depth.shape + (2 * k + 1,), dtype=bool)
        out[..., :k] = (alive & (depth < self.m))[..., None]
        has_top = alive & (depth > 0)
        if k <= 64:                                           # one comparison per close bracket
            np.equal(top[..., None], np.arange(k), out=out[..., k:2 * k])
            out[..., k:2 * k] &= has_top[..., None]
        else:                                                 # huge k: set one entry per row
            out[..., k:2 * k] = False
            idx = np.nonzero(has_top & (top >= 0))
            out[idx + (k + top[idx],)] = True
        out[..., 2 * k] = alive & (depth == 0)
        return out

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


def dyck(k: int, m: int) -> DyckKM:
    """The Dyck-(k, m) generator of Hewitt et al. (2020)."""
    return DyckKM(k, m)


# --- depth-bounded deterministic pushdown machines ------------------------------------------------
class BoundedPDA(Machine):
    """A `DPDA` or `DPDT` restricted to stack depth ≤ m: a finite-state machine.

    It behaves exactly like the underlying machine (same configurations, outputs and batch fields)
    on every prefix whose closure-end configurations all have depth ≤ m (depth = symbols above
    BOTTOM, as in `depth_profile`; ε-moves inside a step may go deeper in between). The first
    configuration deeper than m is replaced by the dead one, which rejects every extension.

    The explicit automaton is built only by `to_dfa` (breadth-first search over the reachable
    live configurations, which become the DFA's states); construction costs nothing.
    """

    def __init__(self, machine: Machine, m: int):
        from pdanet.automata.pda import PDA, DeterministicPushdown

        if isinstance(machine, PDA):
            raise CompileError(
                f"{machine!r} is nondeterministic: `bounded` needs a DPDA or DPDT. Compile the "
                "PDA to the nondeterministic stack target (DuSell & Chiang's NS-RNN) instead, or "
                "give an equivalent deterministic machine"
            )
        if not isinstance(machine, DeterministicPushdown):
            raise InputError(f"bounded() takes a DPDA or DPDT, got {type(machine).__name__}")
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise InputError(f"the depth bound must be an integer m ≥ 1, got m={m!r}")
        self.machine = machine
        self.m = int(m)
        self.alphabet = machine.alphabet
        self.output_alphabet = machine.output_alphabet
        self.output_kind = machine.output_kind
        self.name = f"{machine.name or type(machine).__name__.lower()}[depth≤{self.m}]"
        self._dfa: Any = None

    # identity ----------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return isinstance(other, BoundedPDA) and (self.machine, self.m) == (other.machine, other.m)

    def __hash__(self) -> int:
        return hash(("BoundedPDA", self.machine, self.m))

    def __repr__(self) -> str:
        return f"<BoundedPDA m={self.m} of {self.machine!r}>"

    @property
    def _key(self) -> tuple:
        return ("BoundedPDA", self.machine._key, self.m)

    # protocol ----------------------------------------------------------------------------------
    def _clip(self, config: Any) -> Any:
        if config.state is not None and config.depth > self.m:
            return self.machine.dead_config()
        return config

    def initial(self) -> Any:
        return self._clip(self.machine.initial())

    def step(self, config: Any, symbol: Hashable) -> Any:
        return self._clip(self.machine.step(config, symbol))

    def output(self, config: Any) -> Any:
        return self.machine.output(config)

    def is_dead(self, config: Any) -> bool:
        return config.state is None

    def is_accepting(self, config: Any) -> bool:
        return self.machine.is_accepting(config)

    def run_batch(self, ids: np.ndarray, lengths: np.ndarray | None = None) -> BatchTrace:
        """The underlying machine's fields, with every row dead (state, depth, top, stack -1;
        output False / -1) from the first time its depth exceeds m. ``stack`` has width m + 1
        (BOTTOM and at most m symbols)."""
        ids, lengths = self.check_ids(ids, lengths)
        trace = self.machine.run_batch(ids, lengths)
        over = np.maximum.accumulate(trace["depth"] > self.m, axis=1)
        fields = dict(trace.fields)
        for name in ("state", "depth", "top"):
            fields[name] = np.where(over, -1, fields[name])
        stack = fields["stack"]
        width = self.m + 1
        if stack.shape[2] < width:
            pad = np.full(stack.shape[:2] + (width - stack.shape[2],), -1, dtype=stack.dtype)
            stack = np.concatenate([stack, pad], axis=2)
        fields["stack"] = np.where(over[..., None], -1, stack[:, :, :width])
        out = fields["output"]
        mask = over.reshape(over.shape + (1,) * (out.ndim - 2))
        fields["output"] = np.where(mask, False if out.dtype == bool else -1, out)
        return BatchTrace(trace.lengths, fields)

    # the explicit automaton --------------------------------------------------------------------
    def _canonical(self, config: Any) -> Any:
        """The configuration as a DFA state: a transducer's last emission is dropped (a Mealy
        machine puts outputs on transitions)."""
        return replace(config, emitted=()) if hasattr(config, "emitted") else config

    def reachable_configs(self, max_states: int = 1_000_000) -> tuple[list, dict]:
        """Breadth-first search: the reachable live configurations (initial first) and the
        transitions {(config, symbol): (next config, last emission or None)} between them."""
        start = self._canonical(self.initial())
        order = [start]
        seen = {start}
        edges: dict = {}
        if start.state is None:
            return order, edges
        queue = deque([start])
        while queue:
            c = queue.popleft()
            for sym in self.alphabet:
                c2 = self.step(c, sym)
                if c2.state is None:
                    continue
                key = self._canonical(c2)
                edges[(c, sym)] = (key, getattr(c2, "emitted", None))
                if key not in seen:
                    seen.add(key)
                    order.append(key)
                    queue.append(key)
                    if len(order) > max_states:
                        raise SearchBoundError(
                            f"{self!r} has more than max_states={max_states} reachable "
                            "configurations; raise `max_states` or lower the depth bound"
                        )
        return order, edges

    def to_dfa(self, max_states: int = 1_000_000) -> DFA:
        """The explicit automaton (built once, on first call). States are the reachable live
        configurations (`PDAConfig` / `PDTConfig` with ``emitted=()``), in BFS order from the
        initial one; a missing transition is the dead state. For a DPDA: a recogniser with the same
        accepting configurations. For a DPDT: a Mealy machine. Its outputs are the DPDT's output
        symbols when every reachable step emits exactly one symbol and the initial ε-closure emits
        nothing (so it agrees with the DPDT's `output` symbol for symbol); otherwise each
        transition emits the *tuple* of symbols of the step, and the output alphabet is the set of
        those tuples (in order of discovery)."""
        if self._dfa is not None:
            return self._dfa
        order, edges = self.reachable_configs(max_states)
        trans = {k: v[0] for k, v in edges.items()}
        if self.machine.output_alphabet is None:  # a DPDA
            accepting = [c for c in order if self.machine.output(c)]
            dfa = DFA(order, self.alphabet, trans, order[0], accepting, name=self.name)
        else:
            emitted = [v[1] for v in edges.values()]
            initial_emits = self.initial().emitted if order[0].state is not None else ()
            if self.output_kind == "symbol" and all(len(e) == 1 for e in emitted) \
                    and not initial_emits:
                outputs = {k: v[1][0] for k, v in edges.items()}
                out_alpha: Any = self.machine.output_alphabet
            else:
                outputs = {k: tuple(v[1]) for k, v in edges.items()}
                out_alpha = list(dict.fromkeys(outputs.values())) or [()]
            accepting = [c for c in order if self.machine.is_accepting(c)]
            dfa = DFA(order, self.alphabet, trans, order[0], accepting, outputs=outputs,
                      output_alphabet=out_alpha, name=self.name)
        self._dfa = dfa
        return dfa

    @property
    def num_configs(self) -> int:
        """Number of reachable live configurations (the DFA's states; builds it)."""
        return self.to_dfa().num_states


__all__ = ["DyckKM", "DyckConfig", "dyck", "BoundedPDA"]

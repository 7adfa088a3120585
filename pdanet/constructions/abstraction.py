"""What a compiled network's units mean: one frozen type per family of network.

`CompiledNetwork.abstraction` is an instance of one of these classes. It is the typed contract
between a construction and everything that reads its network: `pdanet.certify` chooses its
certificate family by the abstraction's type (`pdanet.verify.certify.FAMILIES`, no target
strings), and certifiers, plots and decoders read unit meanings from its fields — never from
parsed label strings or dict keys. An abstraction describes the network; it never changes it.

Adding a family of network is adding one subclass here (or in the construction's own module)
and, if it can be certified, one certifier module named in `FAMILIES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_LABELS = 10_000  # constructions leave ``labels`` empty for networks with more hidden units


@dataclass(frozen=True, eq=False)
class Abstraction:
    """Base: ``labels[j]`` names hidden unit j for messages and plots (one per hidden unit, or
    none at all for networks of more than `MAX_LABELS` units)."""

    labels: tuple[str, ...] = ()

    def groups(self) -> tuple[int, ...]:
        """Unit indices where a new group of units of one meaning starts (for plots): none."""
        return ()


@dataclass(frozen=True, eq=False)
class RecurrentUnits(Abstraction):
    """A `RecurrentNet` (``nn.RNN`` tanh or ``nn.LSTM``, one step per symbol) whose state
    encodes the machine's configuration, certified by box induction over explored
    (configuration, state) pairs. ``cell`` is ``"rnn"`` or ``"lstm"`` (state [h; c], 2H)."""

    cell: str = "rnn"


@dataclass(frozen=True, eq=False)
class DyckSlots(RecurrentUnits):
    """A Dyck-(k, m) network of Hewitt et al. (2020): m stack slots of ``slot_width`` units.

    ``kind``: ``"push_pop"`` (Elman; ``units[copy, slot, j]`` is coordinate j of slot ``slot``
    (0 = top) in copy P (0, written on push) or Q (1, written on pop); ideal value
    2·signs[j]·φ[j] − 1 in the copy the last operation wrote, −1 elsewhere) or
    ``"cell_stack"`` (LSTM; ``units[slot, j]``, slot 0 = bottom, in h and in c; c = φ, h =
    tanh(φ) in the top slot and 0 elsewhere). ``code`` is the `SlotCode` (φ per bracket type).
    """

    kind: str = "push_pop"
    slots: int = 0
    slot_width: int = 0
    top: str = "first"
    units: np.ndarray = None  # type: ignore[assignment]
    signs: np.ndarray | None = None
    code: Any = None

    def groups(self) -> tuple[int, ...]:
        """Each slot (of each copy) is a group of ``slot_width`` consecutive units."""
        size = 0 if self.units is None else int(np.asarray(self.units).size)
        return tuple(range(self.slot_width, size, self.slot_width)) if self.slot_width else ()


@dataclass(frozen=True)
class SlotTest:
    """A linear test on stack slot ``slot`` (0 = top) of the slot units (the stack *before* the
    step): ``kind`` ``"equals"`` (the slot holds stack code ``code``), ``"empty"`` or
    ``"nonempty"``. Its violation count is 0 iff it holds (see `CompactSlots`)."""

    kind: str
    slot: int
    code: int = -1


@dataclass(frozen=True)
class LookupCase:
    """What lookup unit means: on at time t iff step t read input ``a`` in state ``p`` (the
    state after step t − 1), the previous step's stack operation was ``source`` (``"start"``:
    t = 1; ``"push"``/``"replace"`` of code ``source_symbol``; ``"noop"``; ``"pop"``), the top
    X of the stack before step t is one of the codes ``top`` (G = ⊥, the empty stack) and the
    ``tests`` on the slot units hold; the step then went to ``p2`` with stack operation ``op``
    (``"push"``, ``"pop"``, ``"noop"``, ``"replace"``), pushed/written code ``y`` (−1: none),
    emitted output index ``out`` (−1: none or a recogniser), and after it the stack is empty iff
    ``empty_after`` (None: not tracked — only empty-stack acceptance needs it); ``accepts`` is
    the recogniser's output after the step. States, symbols, outputs and stack codes are indices
    as `pdanet.constructions.realtime.table` gives them.

    ``source_symbol`` −1 with source ``"push"``/``"replace"`` means *any written code*: the
    unit's gate sums every lookup unit that entered ``p`` by that operation, whatever code it
    wrote (``top`` lists those codes, at least two), and such a unit exists only where the step
    on ``a`` (``tests``, ``p2``, ``op``, ``y``, ``out``, ``empty_after``, ``accepts``) is the
    same after each of them; where it differs there is one unit per written code instead, and
    never both for one (``p``, ``a``, ``source``). For the other sources ``source_symbol`` is −1
    and means nothing."""

    p: int
    a: int
    source: str
    source_symbol: int
    top: tuple[int, ...]
    tests: tuple[SlotTest, ...]
    p2: int
    op: str
    y: int
    out: int
    empty_after: bool | None
    accepts: bool


@dataclass(frozen=True, eq=False)
class CompactSlots(RecurrentUnits):
    """A depth-bounded real-time DPDA/DPDT in the compact construction
    (`pdanet.constructions.compact`): a start unit, lookup units and slot-copy units, every unit
    a 0/1 threshold unit u run as a tanh unit.

    Unit value: Elman (``cell="rnn"``) u = (1 + h)/2; LSTM (``cell="lstm"``, a saturated Elman
    unit in each cell: i ≈ 1, f ≈ 0, o ≈ 1) u = (1 + ρ·h)/2 with ρ = ``rho`` ≈ 1/tanh 1 (c ≈ ±1).

    Timing: at time t (after t symbols) ``start`` (a unit index) is on iff t = 0; lookup unit
    ``lookup[i]`` (index) is on iff step t fired case ``cases[i]`` (`LookupCase`; at most one is on;
    none on: t = 0 or the machine is dead, and stays dead); slot-copy unit ``units[c, s, j]`` (c
    indexes ``copies``, s the slot, 0 = top, j the code bit) holds bit j of slot s of the stack
    *before* step t (one step behind the state), in the copy named ``copies[c]`` — ``"push"``
    (step t − 1 pushed; slot 0 also when it replaced), ``"pop"`` (step t − 1 popped) or
    ``"keep"`` (step t − 1 was a noop, or a replace for the slots below the top) — and 0 in the
    other copies; all copies 0 at t ≤ 1 (empty stack) and from one step after the machine dies;
    the slot's bits are the sum over copies. ``codes`` ((G + 1) × ``slot_width``, 0/1) are the
    slot codes: row i < G is stack symbol i (binary(i + 1), most significant bit first), row G
    (all zero) is an empty slot. ``acceptance``: ``"final_state"``, ``"empty_stack"`` or
    ``"transducer"``."""

    slots: int = 0
    slot_width: int = 0
    start: int = 0
    lookup: np.ndarray = None  # type: ignore[assignment]
    cases: tuple[LookupCase, ...] = ()
    copies: tuple[str, ...] = ()
    units: np.ndarray = None  # type: ignore[assignment]
    codes: np.ndarray = None  # type: ignore[assignment]
    acceptance: str = "final_state"
    rho: Any = None

    def groups(self) -> tuple[int, ...]:
        """The start and lookup units, then each slot (of each copy) as a group."""
        first = 1 + len(self.cases)
        size = 0 if self.units is None else int(np.asarray(self.units).size)
        w = self.slot_width
        return (first,) + (tuple(range(first + w, first + size, w)) if w else ())


@dataclass(frozen=True)
class ControllerUnit:
    """Hidden unit "the controller was in state ``c``, read input ``a`` and memory reading
    ``R``" (R = None: any reading; a = −1: ε, −2: input used up, for the buffered model),
    after which the controller is in ``c2``."""

    c: int
    a: int
    R: int | None
    c2: int


@dataclass(frozen=True, eq=False)
class ControllerMemory(Abstraction):
    """An Elman (or linear) controller driving a differentiable memory (target ``stack_rnn``).

    ``units[j]`` is the meaning of controller unit ``j + (start is not None)``; ``start`` the
    index of the start unit (+1 only before the first symbol; None for a linear controller).
    ``memory`` names the store class (``grefenstette``, ``joulin_mikolov``, ``suzgun``),
    ``store`` the machine's store (``stack``, ``queue``, ``deque``), ``code`` the symbol code
    (``binary`` or ``one_hot``) and ``codes`` its (G + 1, width) 0/1 rows (row G: empty)."""

    memory: str = "grefenstette"
    store: str = "stack"
    code: str = "binary"
    codes: np.ndarray = None  # type: ignore[assignment]
    linear: bool = False
    start: int | None = 0
    units: tuple[ControllerUnit, ...] = ()


@dataclass(frozen=True, eq=False)
class BufferedController(ControllerMemory):
    """The buffered stack RNN of Hao et al. (2018) §2.3: a `ControllerMemory` whose units may
    be ε-units (a = −1) or idle units (a = −2), with a variable number of steps per symbol."""


@dataclass(frozen=True, eq=False)
class NSChart(Abstraction):
    """The RNS-RNN of DuSell & Chiang (2021): unit (q, x) is the reading's log-weight of state
    q with network stack symbol x on top — under the paper's bottom semantics (the default) the
    network's 2G symbols are the machine's G and their copies marking the lowest cell, whose
    readings add up to the machine's; ``neg`` is L, the stand-in for log 0; ``window`` the stack
    window (None: unbounded)."""

    neg: int = 10_000
    window: int | None = None


@dataclass(frozen=True, eq=False)
class SteppedUnits(Abstraction):
    """A network that is not certified (second-order units, several steps per symbol): its
    labels only. `pdanet.verify` checks it."""


__all__ = ["MAX_LABELS", "Abstraction", "BufferedController", "CompactSlots", "ControllerMemory",
           "ControllerUnit", "DyckSlots", "LookupCase", "NSChart", "RecurrentUnits", "SlotTest",
           "SteppedUnits"]

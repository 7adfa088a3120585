"""The table of constructions: which compile function builds which (machine type, target,
method), read by `compile` and `available`.

`TABLE` is explicit and fixed: one `Entry` per (machine type, target, method) names its compile
function (``"module:function"``, imported on first use), the options it fixes, whether it is the
target's default method, a cheap precondition (why the construction does not apply to a machine,
found without building weights) and a small example machine of its type. `REFUSALS` name the
(type, target, method) choices that never compile, each with the error that says what to do
instead. `compile` looks a machine's type up along its MRO; `available(machine)` lists the
entries whose precondition accepts the machine.

Adding a construction is adding one `Entry` (and the module-level compile function it names):
``tests/test_construction_table.py`` then compiles, verifies and (where its family of network has
a certificate) certifies the entry's example with no new test. `register` adds an entry at run
time (no precondition, no example); it never replaces an entry of `TABLE`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sized
from dataclasses import dataclass
from typing import Any

import torch

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.base import Machine
from pdanet.automata.bounded import DyckKM
from pdanet.automata.dfa import DFA
from pdanet.automata.pda import DPDA, PDA, BoundedPDA
from pdanet.automata.pdt import DPDT
from pdanet.automata.probabilistic import PFSA, BoundedPDPDA, ProbabilisticDPDA, marked_reversal
from pdanet.automata.store import StoreTransducer, sequence_copy, sequence_reversal
from pdanet.automata.weighted import WeightedPDA
from pdanet.constructions import realtime
from pdanet.constructions.base import CompiledNetwork, as_dtype, check_options
from pdanet.constructions.controllers import STORES
from pdanet.errors import AutomatonError, CompileError, InputError, PdanetError, UnboundedStackError

Precondition = Callable[[Any], "str | PdanetError | None"]
Build = Callable[..., CompiledNetwork]


# --- entries ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One construction: ``function`` (``"module:attr"``, or the callable itself for an entry
    added by `register`) compiles a ``machine_type`` to ``target`` by ``method``, called as
    ``function(machine, dtype=…, **options, **user options)``.

    ``options``: (name, value) pairs the entry fixes (a user may not pass them); ``default``: the
    target's method when none is asked for; ``requires``: the precondition, ``requires(machine)``
    → None when the construction applies, else why not — a message (compile raises CompileError
    with it) or the typed error compile raises — decided from the machine's description alone,
    never by building weights; ``example``: a small machine of the type that the construction
    accepts (the registry-wide test compiles, verifies and certifies it)."""

    machine_type: type
    target: str
    method: str
    function: str | Build
    options: tuple[tuple[str, Any], ...] = ()
    default: bool = False
    requires: Precondition | None = None
    example: Callable[[], Machine] | None = None

    @property
    def key(self) -> tuple[type, str, str]:
        return self.machine_type, self.target, self.method

    @property
    def construction(self) -> str:
        """``"target/method"``, as `CompiledNetwork.construction` names it."""
        return f"{self.target}/{self.method}"

    def refusal(self, machine: Any) -> PdanetError | None:
        """The error compiling `machine` with this entry raises before building anything, or
        None when its precondition accepts it."""
        why = None if self.requires is None else self.requires(machine)
        return CompileError(why) if isinstance(why, str) else why

    def accepts(self, machine: Any) -> bool:
        """Whether the construction applies to `machine` (its type and its precondition)."""
        return isinstance(machine, self.machine_type) and self.refusal(machine) is None

    def load(self) -> Build:
        """The compile function (imported by name on first use)."""
        if callable(self.function):
            return self.function
        module, _, attr = self.function.partition(":")
        return getattr(importlib.import_module(module), attr)

    def build(self, machine: Any, dtype: torch.dtype, options: Mapping[str, Any]
              ) -> CompiledNetwork:
        """Compile `machine` (precondition already checked) with the user's `options`."""
        fixed = dict(self.options)
        clash = sorted(set(options) & set(fixed))
        if clash:
            given = ", ".join(f"{k}={fixed[k]!r}" for k in clash)
            raise InputError(f"{self.construction} fixes {given}; choose another method instead "
                             "of passing it")
        fn = self.load()
        _check_keywords(fn, self.construction, options, fixed)
        try:
            return fn(machine, dtype=dtype, **fixed, **options)
        except TypeError as exc:
            if "unexpected keyword argument" not in str(exc):
                raise
            raise InputError(f"{self.construction}: {exc}; its docstring lists the options it "
                             "takes") from None


@dataclass(frozen=True)
class Refusal:
    """A (type, target, method) choice that never compiles: ``error(machine)`` says why and what
    to do instead. ``methods`` None: every method of the target. ``example``: a machine it
    refuses, for a type that no entry's example covers."""

    machine_type: type
    target: str
    methods: tuple[str, ...] | None
    error: Callable[[Any], PdanetError]
    example: Callable[[], Machine] | None = None

    def matches(self, mtype: type, target: str, method: str | None) -> bool:
        return (self.machine_type is mtype and self.target == target
                and (self.methods is None or (method is not None and method in self.methods)))


# --- preconditions (cheap: read the machine's description, build no weights) -------------------


def _realtime_with(memory: str) -> Precondition:
    """A real-time deterministic machine that `realtime.table` reads (one input symbol, one
    store operation and at most one output symbol per step) whose store ``memory`` provides
    (`controllers.STORES`: the one-operation memories hold no queue or deque)."""

    def requires(machine: Any) -> str | PdanetError | None:
        try:
            view = realtime.table(machine)
        except CompileError as exc:
            return exc
        if (memory, view.kind) not in STORES:
            holders = ", ".join(f"{m!r} ({cls.__name__})" for (m, k), cls in STORES.items()
                                if k == view.kind)
            return (f"{machine!r} has a {view.kind}; memory {memory!r} holds none (memories "
                    f"with a {view.kind}: {holders})")
        return None

    return requires


def _one_op_pushdown(machine: Any) -> PdanetError | None:
    """A (D)PDA that reads as a real-time weighted PDA (`WeightedPDA.from_pda`: no ε-moves, one
    stack operation per move); its AutomatonError otherwise."""
    try:
        WeightedPDA.from_pda(machine)
    except AutomatonError as exc:
        return exc
    return None


# --- example machines (small; one per entry) --------------------------------------------------


def _dfa() -> DFA:
    """A partial recogniser over {a, b}: an even number of a's and no "bb" (after "bb": dead)."""
    t = {(0, "a"): 2, (1, "a"): 2, (2, "a"): 0, (3, "a"): 0, (0, "b"): 1, (2, "b"): 3}
    return DFA(range(4), "ab", t, 0, accepting={0, 1}, name="even_a_no_bb")


def _dfa_next_set() -> DFA:
    """`_dfa` as a generator: the output is the set of allowed next symbols (and the end)."""
    return _dfa().with_output_kind("next_set")


def _mealy() -> DFA:
    """Cumulative xor as a Mealy machine: emit the parity of the 1s read so far."""
    t = {(p, b): p ^ int(b) for p in (0, 1) for b in "01"}
    return DFA((0, 1), "01", t, 0, outputs={(p, b): str(q) for (p, b), q in t.items()},
               output_alphabet="01", name="cumulative_xor")


def _anbn() -> DPDA:
    """aⁿbⁿ (n ≥ 1), real-time, final-state acceptance: the first a pushes F (the bottom of the
    count), later ones A; the b that pops F accepts."""
    t = {(0, "a", BOTTOM): (1, ("F", BOTTOM))}
    for x in "AF":
        t[(1, "a", x)] = (1, ("A", x))
    t.update({(1, "b", "A"): (2, ()), (2, "b", "A"): (2, ()), (1, "b", "F"): (3, ()),
              (2, "b", "F"): (3, ())})
    return DPDA(range(4), "ab", "AF", t, 0, accepting={3}, name="anbn")


def _anbn_eps() -> DPDA:
    """aⁿbⁿ (n ≥ 1) accepted by an ε-move at the bottom (not real-time)."""
    t = {(0, "a", BOTTOM): (0, ("A", BOTTOM)), (0, "a", "A"): (0, ("A", "A")),
         (0, "b", "A"): (1, ()), (1, "b", "A"): (1, ()), (1, EPSILON, BOTTOM): (2, (BOTTOM,))}
    return DPDA(range(3), "ab", "A", t, 0, accepting={2}, name="anbn_eps")


def _echo_reversal() -> DPDT:
    """w # #^|w| → _^(|w|+1) wᴿ, real-time, one output symbol per step (blank ``_``)."""
    t: dict = {}
    for s in "ab":
        for x in ("A", "B", BOTTOM):
            t[("p", s, x)] = ("p", "_", (s.upper(), x))
    for x in ("A", "B", BOTTOM):
        t[("p", "#", x)] = ("r", "_", (x,))
    t[("r", "#", "A")] = ("r", "a", ())
    t[("r", "#", "B")] = ("r", "b", ())
    return DPDT(("p", "r"), "ab#", "ab_", "AB", t, "p", name="echo_reversal")


def _burst() -> DPDT:
    """A DPDT emitting several symbols in one move, pushing two, and moving on ε."""
    t = {("p", "a", BOTTOM): ("p", ("x", "y", "x"), ("A", "A", BOTTOM)),
         ("p", "a", "A"): ("p", "y", ("A", "A")), ("p", "b", "A"): ("p", (), ()),
         ("p", EPSILON, "B"): ("p", "x", ()), ("p", "c", "A"): ("p", EPSILON, ("B", "A"))}
    return DPDT(["p"], "abc", "xy", "AB", t, "p", name="burst")


def _copy_queue() -> StoreTransducer:
    return sequence_copy(2, "queue")


def _reversal_stack() -> StoreTransducer:
    return sequence_reversal(2, "stack")


def _palindromes() -> PDA:
    """Even palindromes over {a, b} (nondeterministic: guess the middle), empty-stack
    acceptance, one stack operation per move."""
    t: dict = {}
    for s in "ab":
        S = s.upper()
        for x in ("A", "B", BOTTOM):
            t[("p", s, x)] = {("p", (S, x))} | ({("q", ())} if x == S else set())
        t[("q", s, S)] = {("q", ())}
    return PDA(("p", "q"), "ab", "AB", t, "p", acceptance="empty_stack", name="palindromes")


def _weighted() -> WeightedPDA:
    """Two states that push, pop and replace, with weights other than one, so the reading of
    (q, x) sums the weights of the runs that end in q with top x."""
    t = {(0, BOTTOM, "x", 0, "push", "a"): 0.5, (0, BOTTOM, "x", 1, "push", "a"): 0.25,
         (0, "a", "x", 0, "push", "a"): 0.75, (0, "a", "y", 1, "pop", None): 2.0,
         (1, "a", "y", 1, "pop", None): 0.3, (1, "a", "x", 0, "replace", "a"): 1.0,
         (1, BOTTOM, "y", 1, "replace", BOTTOM): 1.5}
    return WeightedPDA((0, 1), "xy", "a", t, 0, accepting={1}, name="weighted")


def _bounded_anbn() -> BoundedPDA:
    """`_anbn` bounded at depth 3 (push, pop; the fourth a kills the run)."""
    return _anbn().bounded(3)


def _bounded_echo() -> BoundedPDA:
    """`_echo_reversal` (a DPDT: noop, push, pop, one output symbol per step) at depth 2."""
    return _echo_reversal().bounded(2)


def _bounded_realtime(machine: Any) -> str | PdanetError | None:
    """The compact construction's precondition: a bounded real-time DPDA/DPDT that
    `realtime.table` reads (its CompileError names the ε-move or the move that does not fit)."""
    try:
        realtime.table(machine.machine)
    except CompileError as exc:
        return exc
    return None


def _pfsa() -> PFSA:
    return PFSA.random(4, 2, 0, exact=True)


def _realtime_weighted(machine: Any) -> str | None:
    if machine.is_realtime:
        return None
    return (f"{machine!r} has ε-arcs; the NS-RNN reads one symbol per step: compile "
            "pdanet.automata.weighted_epsilon.remove_epsilon(machine), which has the same weight "
            "on every nonempty string")


def _probabilistic_realtime(machine: Any) -> str | PdanetError | None:
    """A real-time weighted PDA whose rows are probabilities (`ns_lm.lm_rows`)."""
    why = _realtime_weighted(machine)
    if why is not None:
        return why
    from pdanet.constructions.ns_lm import lm_rows

    try:
        lm_rows(machine)
    except PdanetError as exc:
        return exc
    return None


def _bounded_pdpda() -> BoundedPDPDA:
    return marked_reversal().bounded(3, overflow="renormalise")


def _lm_marked_reversal() -> WeightedPDA:
    from pdanet.constructions.ns_lm import example_lm_machine

    return example_lm_machine()


def _dyck() -> DyckKM:
    return DyckKM(2, 2)


# --- the table ----------------------------------------------------------------------------------

_C = "pdanet.constructions."
_MEMORIES = tuple(dict.fromkeys(memory for memory, _ in STORES))
_STACK_RNN_EXAMPLES: dict[type, Callable[[], Machine]] = {
    DFA: _mealy, DPDA: _anbn, DPDT: _echo_reversal, StoreTransducer: _reversal_stack,
    DyckKM: _dyck, BoundedPDA: _bounded_anbn}


# further examples a model may take where it refuses the stack-RNN one (a recogniser DFA for a
# model whose readout is one acceptance logit)
_MORE_EXAMPLES: dict[type, tuple[Callable[[], Machine], ...]] = {DFA: (_dfa,)}


def _stack_rnn(mtype: type, memory: str) -> Entry:
    queue_ok = (memory, "queue") in STORES
    example = _copy_queue if mtype is StoreTransducer and queue_ok else _STACK_RNN_EXAMPLES[mtype]
    return Entry(mtype, "stack_rnn", memory, _C + "controllers:compile_stack_rnn",
                 (("memory", memory),), default=memory == _MEMORIES[0],
                 requires=_realtime_with(memory), example=example)


# the source papers' own models (`pdanet.models`): method = the model's name, compile function
# ``compile_<name>``, precondition ``requires_<name>`` and example ``EXAMPLE_<NAME>`` in its file
_M = "pdanet.models."


def _model_requires(module: str, name: str) -> Precondition:
    """The model's own precondition, imported on first use."""

    def requires(machine: Any) -> str | PdanetError | None:
        return getattr(importlib.import_module(_M + module), f"requires_{name}")(machine)

    return requires


def _model_example(module: str, name: str, mtype: type) -> Callable[[], Machine]:
    """The model's own example where it is a ``mtype``, else the first of the table's examples
    of that type (the stack-RNN one, then a recogniser) that the model's precondition accepts."""

    def build() -> Machine:
        mod = importlib.import_module(_M + module)
        own = getattr(mod, f"EXAMPLE_{name.upper()}")
        if isinstance(own, mtype):
            return own
        requires = getattr(mod, f"requires_{name}")
        candidates = [_STACK_RNN_EXAMPLES[mtype]()] + [f() for f in _MORE_EXAMPLES.get(mtype, ())]
        return next((m for m in candidates if requires(m) is None), candidates[0])

    build.__name__ = f"_{name}_{mtype.__name__.lower()}"
    return build


def _model(mtype: type, target: str, module: str, name: str, default: bool) -> Entry:
    return Entry(mtype, target, name, f"{_M}{module}:compile_{name}", default=default,
                 requires=_model_requires(module, name),
                 example=_model_example(module, name, mtype))


# (file in pdanet.models, model name, target, machine types it compiles, types for which it is
# the target's default method)
MODELS: tuple[tuple[str, str, str, tuple[type, ...], tuple[type, ...]], ...] = (
    ("grefenstette", "grefenstette_rnn", "stack_rnn", (DFA, DPDA, DPDT, StoreTransducer), ()),
    ("grefenstette", "grefenstette_lstm", "stack_rnn", (DFA, DPDA, DPDT, StoreTransducer), ()),
    ("hao", "hao_linear", "stack_rnn", (DPDT,), ()),
    ("hao", "hao_lstm", "stack_rnn", (DFA, DPDA, DPDT), ()),
    ("hao", "hao_buffered", "buffered_stack_rnn", (DFA, DPDT), (DFA,)),
    ("joulin_mikolov", "joulin_mikolov_stack_rnn", "stack_rnn", (DFA, DPDA, DPDT), ()),
    ("suzgun", "suzgun_stack_rnn", "stack_rnn", (DFA, DPDA, DPDT), ()),
    ("suzgun", "suzgun_stack_lstm", "stack_rnn", (DFA, DPDA, DPDT), ()),
    ("suzgun", "suzgun_baby_ntm", "stack_rnn", (DFA, BoundedPDA, DyckKM), (BoundedPDA, DyckKM)),
    ("dusell_chiang", "dusell_chiang_ns", "ns_rnn", (DFA, DPDA), ()),
    ("dusell_chiang", "dusell_chiang_ns_s", "ns_rnn", (DFA, DPDA), ()),
    ("dusell_chiang", "dusell_chiang_ns_u", "ns_rnn", (DFA, DPDA), ()),
    ("dusell_chiang", "dusell_chiang_rns", "ns_rnn", (DFA, DPDA), (DFA,)),
)


TABLE: tuple[Entry, ...] = (
    # Dyck-(k, m): Hewitt et al. (2020), three slot codes in an Elman or LSTM network
    *(Entry(DyckKM, target, code, f"{_C}dyck:compile_dyck_{target}", (("method", code),),
            default=code == "hewitt", example=_dyck)
      for target in ("elman", "lstm") for code in ("hewitt", "onehot", "compact")),
    # DFAs and Mealy machines
    Entry(DFA, "elman", "minsky", _C + "dfa_rnn:compile_minsky", default=True, example=_dfa),
    Entry(DFA, "lstm", "minsky", _C + "dfa_rnn:compile_lstm", default=True, example=_mealy),
    Entry(DFA, "second_order", "omlin_giles", _C + "dfa_rnn:compile_second_order",
          default=True, example=_dfa_next_set),
    Entry(DFA, "elman", "compressed", _C + "dfa_rnn:compile_compressed", example=_dfa),
    # real-time deterministic machines: a controller driving a differentiable memory
    *(_stack_rnn(mtype, memory)
      for mtype in (DFA, DPDA, DPDT, StoreTransducer) for memory in _MEMORIES),
    # ε-moves, several outputs or pushes per move: the buffered stack RNN of Hao et al. (2018)
    Entry(DPDT, "buffered_stack_rnn", "grefenstette", _C + "buffered:compile_buffered",
          default=True, example=_burst),
    Entry(DPDA, "buffered_stack_rnn", "grefenstette", _C + "buffered:compile_buffered",
          default=True, example=_anbn_eps),
    # the source papers' own models, compiled (method = model name; `compile(..., model=…)`)
    *(_model(mtype, target, module, name, mtype in default_for)
      for module, name, target, types, default_for in MODELS for mtype in types),
    # the nondeterministic stack RNN of DuSell & Chiang (2021)
    Entry(WeightedPDA, "ns_rnn", "embedding", _C + "ns:compile_weighted", default=True,
          requires=_realtime_weighted, example=_weighted),
    Entry(DPDA, "ns_rnn", "embedding", _C + "ns:compile_dpda", default=True,
          requires=_one_op_pushdown, example=_anbn),
    Entry(PDA, "ns_rnn", "embedding", _C + "ns:compile_pda", default=True,
          requires=_one_op_pushdown, example=_palindromes),
    # a probabilistic real-time PDA as a language model: next-symbol probabilities linear in
    # the RNS reading (exact head) or the paper's softmax layer on it; verified by distribution
    Entry(WeightedPDA, "ns_lm", "exact", _C + "ns_lm:compile_ns_lm", (("head", "exact"),),
          default=True, requires=_probabilistic_realtime, example=_lm_marked_reversal),
    Entry(WeightedPDA, "ns_lm", "softmax", _C + "ns_lm:compile_ns_lm", (("head", "softmax"),),
          requires=_probabilistic_realtime, example=_lm_marked_reversal),
    # depth-bounded real-time DPDAs/DPDTs: slot copies and a lookup (compact), or Minsky's units
    # on the explicit automaton `to_dfa()` (exponential in m; for comparison)
    Entry(BoundedPDA, "elman", "compact", _C + "compact:compile_compact_elman", default=True,
          requires=_bounded_realtime, example=_bounded_anbn),
    Entry(BoundedPDA, "lstm", "compact", _C + "compact:compile_compact_lstm", default=True,
          requires=_bounded_realtime, example=_bounded_echo),
    Entry(BoundedPDA, "elman", "minsky", _C + "compact:compile_minsky_elman",
          requires=_bounded_realtime, example=_bounded_anbn),
    Entry(BoundedPDA, "lstm", "minsky", _C + "compact:compile_minsky_lstm",
          requires=_bounded_realtime, example=_bounded_echo),
    # probabilistic machines as RNN language models (Svete & Cotterell 2023): Minsky's units on
    # the (bounded machine's) PFSA, log-probabilities as readout
    *(Entry(mtype, target, "minsky_lm", f"{_C}lm:compile_lm_{target}", default=True,
            example=example)
      for mtype, example in ((PFSA, _pfsa), (BoundedPDPDA, _bounded_pdpda))
      for target in ("elman", "lstm")),
)


def _nondeterministic(machine: Any) -> PdanetError:
    return CompileError(f"{machine!r} is nondeterministic; a stack_rnn controller follows one run. "
                        "Use the nondeterministic stack: pn.compile(machine, target='ns_rnn')")


def _fixed_rows(machine: Any) -> PdanetError:
    return UnboundedStackError(
        f"{machine!r} has an unbounded store but a BabyNTM has a fixed number of rows; use "
        "memory 'grefenstette', 'joulin_mikolov' or 'suzgun' (sized to each input), or bound "
        "its depth with .bounded(m) and use model='suzgun_baby_ntm'")


def _bounded_rows(machine: Any) -> PdanetError:
    """Why Suzgun's Baby-NTM (a fixed number of memory rows) does not take `machine`."""
    why = importlib.import_module(_M + "suzgun").requires_suzgun_baby_ntm(machine)
    return why if isinstance(why, PdanetError) else CompileError(str(why))


def _unbounded_lm(machine: Any) -> PdanetError:
    return UnboundedStackError(f"{machine!r} has an unbounded stack; an RNN language model has "
                               "finitely many states: bound its depth with .bounded(m) first")


REFUSALS: tuple[Refusal, ...] = (
    Refusal(PDA, "stack_rnn", None, _nondeterministic),
    *(Refusal(ProbabilisticDPDA, target, None, _unbounded_lm, example=marked_reversal)
      for target in ("elman", "lstm")),
    *(Refusal(mtype, "stack_rnn", ("baby_ntm",), _fixed_rows)
      for mtype in (DPDA, DPDT, StoreTransducer)),
    *(Refusal(mtype, "stack_rnn", ("suzgun_baby_ntm",), _bounded_rows)
      for mtype in (DPDA, DPDT, StoreTransducer)),
)

# the index `compile` and `available` read: `TABLE` plus entries added by `register`
_REGISTRY: dict[tuple[type, str, str], Entry] = {e.key: e for e in TABLE}
if len(_REGISTRY) != len(TABLE):                     # one entry per (type, target, method)
    raise AssertionError("the construction table names a (type, target, method) twice: "
                         f"{sorted({str(e.key) for e in TABLE if [f.key for f in TABLE].count(e.key) > 1})}")
_DEFAULT_METHOD: dict[tuple[type, str], str] = {
    (e.machine_type, e.target): e.method for e in TABLE if e.default}
_FIXED = frozenset(e.key for e in TABLE)


def register(machine_type: type, target: str, method: str, default: bool = False
             ) -> Callable[[Build], Build]:
    """Decorator: add `fn(machine, dtype=…, **options) -> CompiledNetwork` as the construction
    for (type, target, method), with no precondition. A choice that `TABLE` or `REFUSALS`
    already holds is left as it is (the decorator returns `fn` unchanged)."""

    def deco(fn: Build) -> Build:
        key = (machine_type, target, method)
        if key in _FIXED or any(r.matches(*key) for r in REFUSALS):
            return fn
        _REGISTRY[key] = Entry(machine_type, target, method, fn, default=default)
        if default or (machine_type, target) not in _DEFAULT_METHOD:
            _DEFAULT_METHOD[(machine_type, target)] = method
        return fn

    return deco


def entries() -> tuple[Entry, ...]:
    """Every construction: `TABLE` and the entries `register` added, in that order."""
    return tuple(_REGISTRY.values())


def available(machine: Machine | None = None) -> list[tuple[str, str]]:
    """Sorted (target, method) pairs that compile `machine`: the entries for its type whose
    precondition accepts it (size limits, which depend on options, are checked by compiling).
    Without a machine: every (target, method) of the table."""
    return sorted({(e.target, e.method) for e in _REGISTRY.values()
                   if machine is None or e.accepts(machine)})


def compile(machine: Machine, target: str = "lstm", method: str | None = None,
            dtype: torch.dtype = torch.float32, **options) -> CompiledNetwork:
    """Compile `machine` into a network for `target` ("elman", "lstm", "second_order",
    "stack_rnn", "ns_rnn", …) with construction `method` (the target's default when None).
    ``model=`` names a source paper's model (e.g. "grefenstette_lstm" for target "stack_rnn"):
    it is the method that builds weights for exactly that module (`pdanet.models`).

    ``dtype`` is a floating torch dtype or its name ("float32", "float64", "float16",
    "bfloat16"). Options are validated before compiling (`check_options`): ``scale`` finite and
    > 0, integer options integers (not booleans) in range; an option the construction does not
    take is an InputError listing the ones it does. A machine the construction does not apply to
    raises the entry's precondition error (CompileError saying what to do instead) before any
    weight is built.
    """
    dtype = as_dtype(dtype)
    if "model" in options:
        model = options.pop("model")
        if method is not None and method != model:
            raise InputError(f"model={model!r} and method={method!r} disagree: a paper model is "
                             "the method of its target, give one of them")
        method = model
    for name, value in (("target", target), ("method", method)):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{name}={value!r} must be a string such as 'lstm'")
    options = check_options(options)
    alphabet = getattr(machine, "alphabet", None)
    if isinstance(alphabet, Sized) and len(alphabet) == 0:
        raise CompileError(f"{machine!r} has an empty input alphabet; a network reads at least "
                           "one symbol: add a symbol to the alphabet")
    entry = _lookup(machine, target, method)
    refusal = entry.refusal(machine)
    if refusal is not None:
        raise refusal
    return entry.build(machine, dtype, options)


def _lookup(machine: Machine, target: str, method: str | None) -> Entry:
    """The entry for the nearest type in the machine's MRO that has `target` (a `Refusal` there
    raises its error); CompileError naming what is available otherwise."""
    for mtype in type(machine).__mro__:
        for refusal in REFUSALS:
            if refusal.matches(mtype, target, method):
                raise refusal.error(machine)
        if (mtype, target) in _DEFAULT_METHOD:
            meth = method or _DEFAULT_METHOD[(mtype, target)]
            entry = _REGISTRY.get((mtype, target, meth))
            if entry is None:
                methods = sorted(m for (t, tg, m) in _REGISTRY if t is mtype and tg == target)
                raise CompileError(
                    f"no method {meth!r} for target {target!r} on {type(machine).__name__}; "
                    f"methods: {methods}"
                )
            return entry
    found = available(machine)
    options_text = ", ".join(f"{t}/{m}" for t, m in found) or "none"
    hint = getattr(machine, "compile_hint", "")
    refused = {} if found else {e.construction: e.refusal(machine)
                                for e in _REGISTRY.values() if isinstance(machine, e.machine_type)}
    if refused:
        hint += "".join(f" {name} refuses it: {why}" for name, why in refused.items())
    elif not hint and hasattr(machine, "bounded") and not found:
        hint = " The stack is unbounded: bound its depth with `.bounded(m)` first."
    message = (f"cannot compile {type(machine).__name__} to target {target!r}; available: "
               f"{options_text}.{hint}")
    if (hasattr(machine, "bounded") and not isinstance(machine, (PDA, BoundedPDA))
            and (BoundedPDA, target) in _DEFAULT_METHOD):
        raise UnboundedStackError(
            f"{message} A {target} network has a fixed number of units, so the stack must be "
            f"bounded: pn.compile(machine.bounded(m), target={target!r}) for a depth bound m")
    raise CompileError(message)


def _check_keywords(fn: Callable[..., Any], name: str, options: Mapping[str, Any],
                    fixed: Mapping[str, Any]) -> None:
    """InputError for an option that `fn` does not take (when its signature says so)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [p for p in list(params)[1:] if p != "dtype" and p not in fixed]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InputError(f"{name} does not take the option(s) {', '.join(unknown)}; it takes: "
                         f"{', '.join(accepted) or 'none'}")


__all__ = ["REFUSALS", "TABLE", "Entry", "Refusal", "available", "compile",
           "entries", "register"]

"""Context-free grammars and probabilistic context-free grammars.

A `CFG` is immutable and validated: nonterminals and terminals are disjoint, every rule's left side
is a nonterminal and every body symbol is declared. A body is a tuple of symbols; ``()`` is the
empty body (ε). `EPSILON` (or the text "ε") in a body means the empty string, never a terminal:
``S -> ε`` is the empty body and ``S -> a ε b`` is ``S -> a b``. Strings are tuples of terminals.

What a grammar can do:

- `generates(string)`: membership by a chart parser over spans (ε- and unit rules allowed).
- `to_pda(mode=...)`: the standard nondeterministic PDA with ε-moves that expand nonterminals
  (final-state by default, or the textbook empty-stack one).
- `count(n)` / `sample_length(rng, n)`: exact length-conditioned sampling from counting tables over
  (symbol, length). A `CFG` samples uniformly over the *derivations* of length n (exact integer
  counts); a `PCFG` samples from its distribution conditioned on the length (log-space weights).
  Tables need a grammar in which no nonterminal derives itself without consuming input
  (no A ⇒⁺ A); a `GrammarError` names the offending nonterminals otherwise.
- `sample(rng, min_length, max_length)`: top-down sampling with rejection of lengths outside the
  range; `sample_depth(rng, max_depth)`: top-down sampling of derivations of bounded depth.

A `CFG` samples top-down with each nonterminal's rules equally likely; a `PCFG` uses its rule
probabilities.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np

from pdanet.automata.alphabet import BOTTOM, EPSILON, Alphabet, is_special
from pdanet.errors import AutomatonError, InputError


class GrammarError(AutomatonError):
    """A grammar is malformed, or cannot be used for the requested operation."""


@dataclass(frozen=True)
class Rule:
    """A production ``lhs → body``; ``body == ()`` is an ε-rule."""

    lhs: Hashable
    body: tuple

    def __str__(self) -> str:
        return f"{self.lhs} → {' '.join(map(str, self.body)) if self.body else 'ε'}"


def _is_epsilon(x: Any) -> bool:
    return x is EPSILON or (isinstance(x, str) and x == "ε")


def _body(body: Any) -> tuple:
    """A rule body as a tuple of symbols. A str is split on whitespace. `EPSILON` and the text
    "ε" stand for the empty string wherever they occur (a whole body, or one symbol of it, which
    is then dropped: ``a ε b`` is ``a b``); "" and ``()`` are the empty body."""
    if body is EPSILON:
        return ()
    if isinstance(body, str):
        parts = tuple(body.split())
    elif isinstance(body, (tuple, list)):
        parts = tuple(body)
    else:
        raise GrammarError(
            f"rule body {body!r} is not a tuple or list of symbols, a whitespace-separated str, "
            "or EPSILON")
    return tuple(x for x in parts if not _is_epsilon(x))


def _rule_pairs(rules: Any) -> list[tuple[Hashable, tuple]]:
    """Normalise rules given as {lhs: [bodies]}, [(lhs, body)], or [Rule]."""
    if isinstance(rules, Mapping):
        out = []
        for lhs, bodies in rules.items():
            if bodies is EPSILON or isinstance(bodies, (str, tuple)):
                bodies = [bodies]
            elif not isinstance(bodies, (list, set, frozenset)):
                raise GrammarError(
                    f"the bodies of {lhs!r} must be a list of bodies (or one body), got "
                    f"{bodies!r}")
            for b in bodies:
                out.append((lhs, _body(b)))
        return out
    if isinstance(rules, (str, bytes)) or not isinstance(rules, Iterable):
        raise GrammarError(f"rules must be a mapping {{lhs: [bodies]}} or a list of (lhs, body) "
                           f"pairs or Rules, got {type(rules).__name__}")
    out = []
    for r in rules:
        if isinstance(r, Rule):
            out.append((r.lhs, _body(r.body)))
        elif isinstance(r, (tuple, list)) and len(r) == 2:
            out.append((r[0], _body(r[1])))
        else:
            raise GrammarError(f"rule {r!r} is not a pair (lhs, body) or a Rule")
    return out


def _count(value: Any, name: str, minimum: int = 0) -> int:
    """An integer argument (not a bool) of at least `minimum`; InputError naming it otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise InputError(f"{name} must be at least {minimum}, got {value!r}")
    return int(value)


def _check_rng(rng: Any) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise InputError(f"expected a numpy Generator or an integer seed, got {rng!r}")


def _randbelow(rng: np.random.Generator, n: int) -> int:
    """A uniform integer in [0, n) for any positive Python int n (exact, by rejection)."""
    bits = n.bit_length()
    while True:
        x = 0
        for _ in range(0, bits, 32):
            x = (x << 32) | int(rng.integers(0, 1 << 32))
        x >>= (-bits) % 32
        if x < n:
            return x


class CFG:
    """A context-free grammar (immutable, validated). See the module docstring."""

    def __init__(self, nonterminals: Iterable[Hashable], terminals: Alphabet | Iterable[Hashable] | str,
                 rules: Any, start: Hashable, name: str | None = None):
        nts = tuple(nonterminals)
        if len(set(nts)) != len(nts):
            dup = next(x for x in nts if nts.count(x) > 1)
            raise GrammarError(f"nonterminal {dup!r} is declared twice")
        for a in nts:
            if is_special(a):
                raise GrammarError(f"{a!r} is a distinguished symbol and cannot be a nonterminal")
        terms = Alphabet.of(terminals)
        clash = [a for a in nts if a in terms]
        if clash:
            raise GrammarError(f"{clash[0]!r} is declared both as a nonterminal and as a terminal")
        if start not in nts:
            raise GrammarError(f"start symbol {start!r} is not a declared nonterminal")
        pairs = _rule_pairs(rules)
        seen: set = set()
        rule_list = []
        for lhs, body in pairs:
            if lhs not in nts:
                raise GrammarError(f"rule {lhs!r} → {body!r}: left side is not a declared nonterminal")
            for x in body:
                if x not in nts and x not in terms:
                    raise GrammarError(
                        f"rule {Rule(lhs, body)}: symbol {x!r} is neither a declared nonterminal nor a "
                        "terminal; declare it")
            if (lhs, body) in seen:
                raise GrammarError(f"rule {Rule(lhs, body)} is given twice")
            seen.add((lhs, body))
            rule_list.append(Rule(lhs, body))
        lhs_set = {r.lhs for r in rule_list}
        for a in nts:
            if a not in lhs_set:
                raise GrammarError(f"nonterminal {a!r} has no rules; add a rule for it or remove it")
        self._nonterminals = nts
        self._terminals = terms
        self._rules = tuple(rule_list)
        self._start = start
        self._name = name
        self._nt_set = frozenset(nts)

    # --- immutable accessors ------------------------------------------------------------------
    nonterminals = property(lambda self: self._nonterminals)
    terminals = property(lambda self: self._terminals)
    rules = property(lambda self: self._rules)
    start = property(lambda self: self._start)
    name = property(lambda self: self._name)

    def __setattr__(self, key: str, value: Any) -> None:
        if key.startswith("_") and key not in self.__dict__:
            object.__setattr__(self, key, value)
            return
        raise AttributeError(f"{type(self).__name__} is immutable; build a new one")

    @classmethod
    def parse(cls, text: str, start: Hashable | None = None, name: str | None = None) -> CFG:
        """A grammar from lines ``A -> x y | z | ε`` (symbols separated by whitespace).

        Nonterminals are the left sides (the first one is the start unless `start` is given); every
        other body symbol is a terminal, in order of first appearance."""
        nts, pairs = _parse_lines(text)
        terms = _terminals_of(nts, pairs)
        return cls(nts, terms, pairs, start if start is not None else nts[0], name)

    # --- identity -----------------------------------------------------------------------------
    def _key(self) -> tuple:
        return (self._nonterminals, self._terminals, frozenset(self._rules), self._start)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        label = f" {self._name!r}" if self._name else ""
        return (f"<{type(self).__name__}{label}: {len(self._nonterminals)} nonterminals, "
                f"{len(self._terminals)} terminals, {len(self._rules)} rules>")

    def __str__(self) -> str:
        return "\n".join(self._rule_text(i) for i in range(len(self._rules)))

    def _rule_text(self, i: int) -> str:
        return str(self._rules[i])

    # --- structure ----------------------------------------------------------------------------
    def is_nonterminal(self, x: Hashable) -> bool:
        return x in self._nt_set

    @cached_property
    def _by_lhs(self) -> dict:
        out: dict = {a: [] for a in self._nonterminals}
        for i, r in enumerate(self._rules):
            out[r.lhs].append(i)
        return {a: tuple(v) for a, v in out.items()}

    def rules_for(self, lhs: Hashable) -> tuple[Rule, ...]:
        if lhs not in self._nt_set:
            raise GrammarError(f"{lhs!r} is not a nonterminal of {self!r}")
        return tuple(self._rules[i] for i in self._by_lhs[lhs])

    def rule_weights(self) -> tuple:
        """The weight of each rule for top-down sampling: uniform among a nonterminal's rules."""
        return tuple(Fraction(1, len(self._by_lhs[r.lhs])) for r in self._rules)

    @cached_property
    def nullable(self) -> frozenset:
        """Nonterminals that derive ε."""
        null: set = set()
        changed = True
        while changed:
            changed = False
            for r in self._rules:
                if r.lhs not in null and all(x in null for x in r.body):
                    null.add(r.lhs)
                    changed = True
        return frozenset(null)

    @cached_property
    def min_yield(self) -> dict:
        """The length of a shortest terminal string each nonterminal derives (inf if none)."""
        best = {a: math.inf for a in self._nonterminals}
        changed = True
        while changed:
            changed = False
            for r in self._rules:
                v = sum(best[x] if x in self._nt_set else 1 for x in r.body)
                if v < best[r.lhs]:
                    best[r.lhs] = v
                    changed = True
        return best

    @cached_property
    def min_height(self) -> dict:
        """The least height of a derivation tree of each nonterminal (a rule with only terminals
        in its body has height 1); inf for non-productive nonterminals."""
        best = {a: math.inf for a in self._nonterminals}
        changed = True
        while changed:
            changed = False
            for r in self._rules:
                v = 1 + max((best[x] for x in r.body if x in self._nt_set), default=0)
                if v < best[r.lhs]:
                    best[r.lhs] = v
                    changed = True
        return best

    @cached_property
    def _same_length_order(self) -> tuple:
        """Nonterminals in an order where A comes after every B with A ⇒ αBβ, α, β ⇒* ε.

        Raises GrammarError when this relation has a cycle (some A ⇒⁺ A), since then a string can
        have infinitely many derivations and counting tables do not exist."""
        deps: dict = {a: set() for a in self._nonterminals}
        null = self.nullable
        for r in self._rules:
            for i, x in enumerate(r.body):
                if x in self._nt_set and all(y in null for j, y in enumerate(r.body) if j != i):
                    deps[r.lhs].add(x)
        order: list = []
        state: dict = {}
        for root in self._nonterminals:
            if root in state:
                continue
            stack = [(root, iter(sorted(deps[root], key=repr)))]
            state[root] = 1
            path = [root]
            while stack:
                node, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    path.pop()
                    state[node] = 2
                    order.append(node)
                elif state.get(nxt) == 1:
                    cycle = path[path.index(nxt):] + [nxt]
                    raise GrammarError(
                        "the grammar has a cycle of derivations that consume no input ("
                        + " ⇒ ".join(map(repr, cycle)) + "), so strings have infinitely many "
                        "derivations; rewrite it without such cycles (one arises from S → S S when S ⇒* ε) "
                        "to use length tables, or sample with `sample(rng, min_length, max_length)`")
                elif nxt not in state:
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append((nxt, iter(sorted(deps[nxt], key=repr))))
        return tuple(order)

    # --- membership ---------------------------------------------------------------------------
    def generates(self, string: str | Sequence[Hashable]) -> bool:
        """Membership of a terminal string, by a chart over spans with a fixpoint per span
        (handles ε-rules, unit rules and left recursion). O(n³·|G|)."""
        w = self._terminals.split(string)
        n = len(w)
        chart: dict = {}
        for length in range(n + 1):
            for i in range(n - length + 1):
                j = i + length
                cell: set = set()
                chart[(i, j)] = cell
                changed = True
                while changed:
                    changed = False
                    for r in self._rules:
                        if r.lhs not in cell and self._body_spans(r.body, i, j, w, chart):
                            cell.add(r.lhs)
                            changed = True
        return self._start in chart[(0, n)]

    def _body_spans(self, body: tuple, i: int, j: int, w: tuple, chart: dict) -> bool:
        cur = {i}
        for x in body:
            nxt: set = set()
            if x in self._nt_set:
                for m in cur:
                    for m2 in range(m, j + 1):
                        if x in chart[(m, m2)]:
                            nxt.add(m2)
            else:
                for m in cur:
                    if m < j and w[m] == x:
                        nxt.add(m + 1)
            if not nxt:
                return False
            cur = nxt
        return j in cur

    # --- automata -----------------------------------------------------------------------------
    def to_pda(self, name: str | None = None, max_configs: int = 100_000,
               mode: str = "final_state"):
        """The standard PDA for the grammar (nondeterministic, with ε-moves).

        ``mode="final_state"`` (the default): states ``start``, ``loop``, ``accept``.
        ``(start, ε, ⊥) → (loop, S ⊥)`` pushes the start symbol; in ``loop`` a nonterminal A on top
        is replaced by a body of one of A's rules (ε-move; the body's first symbol ends on top), a
        terminal on top is popped when it is read, and ``(loop, ε, ⊥) → (accept, ⊥)``. Accepting
        by final state ``accept`` is the same as accepting by empty stack in ``loop``.

        ``mode="empty_stack"``: the one-state PDA of Hopcroft–Motwani–Ullman Thm 6.13 (state
        ``loop``, the same expand and match moves, acceptance by empty stack), entered from a
        state ``start`` by ``(start, ε, ⊥) → (loop, S ⊥)`` since pdanet's stack starts as ⊥
        rather than S. Its initial configuration has only ⊥, so it accepts ε: GrammarError unless
        the start symbol derives ε (pdanet's empty-stack PDAs all accept ε).

        A left-recursive grammar gives unbounded ε-expansion: its PDA raises SearchBoundError
        past `max_configs` configurations in one ε-closure."""
        from pdanet.automata.pda import ACCEPTANCE_MODES, PDA

        max_configs = _count(max_configs, "max_configs", 1)
        if mode not in ACCEPTANCE_MODES:
            raise InputError(f"mode {mode!r} is not one of {ACCEPTANCE_MODES}")
        if mode == "empty_stack" and self._start not in self.nullable:
            raise GrammarError(
                f"the start symbol {self._start!r} does not derive ε, but every empty-stack PDA "
                "accepts ε (its initial stack is just ⊥); use mode='final_state'")
        stack_alphabet = tuple(self._nonterminals) + tuple(self._terminals)
        trans: dict = {("start", EPSILON, BOTTOM): {("loop", (self._start, BOTTOM))}}
        if mode == "final_state":
            trans[("loop", EPSILON, BOTTOM)] = {("accept", (BOTTOM,))}
        for r in self._rules:
            trans.setdefault(("loop", EPSILON, r.lhs), set()).add(("loop", tuple(r.body)))
        for a in self._terminals:
            trans[("loop", a, a)] = {("loop", ())}
        label = name or (f"pda({self._name})" if self._name else None)
        if mode == "empty_stack":
            return PDA(("start", "loop"), self._terminals, stack_alphabet, trans, "start",
                       acceptance="empty_stack", name=label, max_configs=max_configs)
        return PDA(("start", "loop", "accept"), self._terminals, stack_alphabet, trans, "start",
                   accepting=("accept",), acceptance="final_state", name=label,
                   max_configs=max_configs)

    # --- sampling -----------------------------------------------------------------------------
    def length_table(self, max_length: int, weighted: bool | None = None) -> LengthTable:
        """Counting tables up to `max_length` (see `LengthTable`). ``weighted`` defaults to True
        for a PCFG (its distribution) and False for a CFG (uniform over derivations)."""
        if weighted is None:
            weighted = isinstance(self, PCFG)
        return LengthTable(self, max_length, weighted)

    def count(self, n: int) -> int:
        """The number of derivations of strings of length n from the start symbol."""
        return self.length_table(_count(n, "n"), weighted=False).total(n)

    def sample_length(self, rng: Any, n: int, weighted: bool | None = None,
                      table: LengthTable | None = None) -> tuple:
        """One string of exactly n symbols (see `length_table` for the distribution)."""
        if table is None:
            table = self.length_table(n, weighted)
        return table.sample(_check_rng(rng), n)

    def sample(self, rng: Any, min_length: int = 0, max_length: int = 100,
               max_tries: int = 1000) -> tuple:
        """Top-down sampling; strings outside [min_length, max_length] are rejected and redrawn.

        A draw is abandoned as soon as its length must exceed `max_length`. Raises
        GrammarError after `max_tries` rejected draws."""
        rng = _check_rng(rng)
        min_length, max_length = _count(min_length, "min_length"), _count(max_length, "max_length")
        max_tries = _count(max_tries, "max_tries", 1)
        if min_length > max_length:
            raise InputError(f"min_length {min_length} exceeds max_length {max_length}")
        if self.min_yield[self._start] > max_length:
            raise GrammarError(
                f"the shortest string of the grammar has length {self.min_yield[self._start]}, "
                f"more than max_length={max_length}")
        for _ in range(max_tries):
            s = self._draw(rng, max_length, None)
            if s is not None and min_length <= len(s) <= max_length:
                return s
        raise GrammarError(
            f"no string with length in [{min_length}, {max_length}] after {max_tries} draws; "
            "widen the range, raise max_tries, adjust the rule probabilities, or use "
            "sample_length (exact length-conditioned sampling)")

    def sample_depth(self, rng: Any, max_depth: int, max_tries: int = 1000) -> tuple:
        """Top-down sampling of a derivation of height at most `max_depth`: at each node only
        the rules that can still finish within the remaining height are allowed, with their
        weights renormalised."""
        rng = _check_rng(rng)
        max_depth, max_tries = _count(max_depth, "max_depth"), _count(max_tries, "max_tries", 1)
        if self.min_height[self._start] > max_depth:
            raise GrammarError(
                f"every derivation of {self._start!r} has height at least "
                f"{self.min_height[self._start]}, more than max_depth={max_depth}")
        s = self._draw(rng, None, max_depth)
        assert s is not None
        return s

    @cached_property
    def _weights_float(self) -> np.ndarray:
        return np.array([float(p) for p in self.rule_weights()], dtype=np.float64)

    def _draw(self, rng: np.random.Generator, max_length: int | None,
              max_depth: int | None) -> tuple | None:
        """One top-down draw (explicit stack; leftmost expansion). None when abandoned."""
        weights = self._weights_float
        by_lhs = self._by_lhs
        out: list = []
        pending_min = self.min_yield[self._start]
        stack: list = [(self._start, 1)]  # (symbol, depth of the node that would expand it)
        while stack:
            x, d = stack.pop()
            if x not in self._nt_set:
                out.append(x)
                continue
            idx = by_lhs[x]
            if max_depth is not None:
                idx = tuple(i for i in idx if 1 + max(
                    (self.min_height[y] for y in self._rules[i].body if y in self._nt_set),
                    default=0) <= max_depth - d + 1)
            p = weights[list(idx)]
            i = idx[int(rng.choice(len(idx), p=p / p.sum()))]
            body = self._rules[i].body
            if max_length is not None:
                pending_min += sum(self.min_yield[y] if y in self._nt_set else 1 for y in body)
                pending_min -= self.min_yield[x]
                if len(out) + pending_min > max_length:
                    return None
            for y in reversed(body):
                stack.append((y, d + 1))
        return tuple(out)


class PCFG(CFG):
    """A probabilistic CFG: each rule has a probability in (0, 1], summing to 1 per nonterminal.

    ``rules`` is ``{(lhs, body): p}`` or ``{lhs: {body: p}}``; probabilities may be Fractions,
    ints or floats (float sums are checked to within 1e-9)."""

    def __init__(self, nonterminals: Iterable[Hashable], terminals: Alphabet | Iterable[Hashable] | str,
                 rules: Mapping, start: Hashable, name: str | None = None):
        if not isinstance(rules, Mapping):
            raise GrammarError("PCFG rules must be a mapping {(lhs, body): probability} or "
                               "{lhs: {body: probability}}")
        probs: dict = {}
        for key, val in rules.items():
            if isinstance(val, Mapping):
                for body, p in val.items():
                    probs[(key, _body(body))] = p
            else:
                if not (isinstance(key, tuple) and len(key) == 2):
                    raise GrammarError(f"PCFG rule key {key!r} must be a pair (lhs, body)")
                probs[(key[0], _body(key[1]))] = val
        super().__init__(nonterminals, terminals, list(probs), start, name)
        ps = []
        for r in self.rules:
            p = probs[(r.lhs, r.body)]
            if isinstance(p, bool) or not isinstance(p, (int, float, Fraction, np.floating, np.integer)):
                raise GrammarError(f"rule {r}: probability {p!r} is not a number")
            if not (0 < p <= 1) or (isinstance(p, float) and not math.isfinite(p)):
                raise GrammarError(f"rule {r}: probability {p!r} is not in (0, 1]; drop rules "
                                   "with probability 0")
            ps.append(p)
        for a in self.nonterminals:
            ps_a = [ps[i] for i in self._by_lhs[a]]
            total = sum(ps_a)
            exact = all(isinstance(p, (int, Fraction, np.integer)) for p in ps_a)
            ok = total == 1 if exact else abs(float(total) - 1.0) <= 1e-9
            if not ok:
                raise GrammarError(
                    f"the probabilities of the rules of nonterminal {a!r} sum to {total}, not 1; "
                    "normalise them")
        self._probabilities = tuple(ps)

    probabilities = property(lambda self: self._probabilities)

    def probability(self, lhs: Hashable, body: Any) -> Any:
        """The probability of the rule lhs → body (0 when there is no such rule)."""
        key = Rule(lhs, _body(body))
        for r, p in zip(self.rules, self._probabilities):
            if r == key:
                return p
        return 0

    def rule_weights(self) -> tuple:
        return self._probabilities

    def _key(self) -> tuple:
        return super()._key() + (frozenset(zip(self.rules, self._probabilities)),)

    def _rule_text(self, i: int) -> str:
        return f"{self.rules[i]}  [{self._probabilities[i]}]"

    def cfg(self) -> CFG:
        """The underlying grammar without probabilities."""
        return CFG(self.nonterminals, self.terminals, self.rules, self.start, self.name)

    @classmethod
    def parse(cls, text: str, start: Hashable | None = None, name: str | None = None) -> PCFG:
        """Lines ``A -> x y [0.5] | z [1/2]``: each alternative ends with its probability in
        brackets (a decimal or a fraction, read exactly)."""
        nts, pairs = _parse_lines(text, with_probs=True)
        terms = _terminals_of(nts, [(a, b) for a, b, _ in pairs])
        return cls(nts, terms, {(a, b): p for a, b, p in pairs},
                   start if start is not None else nts[0], name)


def _parse_lines(text: str, with_probs: bool = False):
    nts: list = []
    pairs: list = []
    for lineno, line in enumerate(text.strip().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "->" not in line:
            raise GrammarError(f"line {lineno}: {line!r} has no '->'")
        lhs, rhs = line.split("->", 1)
        lhs = lhs.strip()
        if lhs not in nts:
            nts.append(lhs)
        for alt in rhs.split(" | "):
            alt = alt.strip()
            if with_probs:
                if not (alt.endswith("]") and "[" in alt):
                    raise GrammarError(f"line {lineno}: alternative {alt!r} has no [probability]")
                alt, p = alt[:-1].rsplit("[", 1)
                try:
                    prob = Fraction(p.strip())
                except ValueError:
                    raise GrammarError(f"line {lineno}: {p!r} is not a probability") from None
                pairs.append((lhs, _body(alt), prob))
            else:
                pairs.append((lhs, _body(alt)))
    return nts, pairs


def _terminals_of(nts: list, pairs: list) -> list:
    terms: list = []
    for _, body in pairs:
        for x in body:
            if x not in nts and x not in terms:
                terms.append(x)
    return terms


class LengthTable:
    """Counting tables w(X, n) for every symbol X and length n ≤ max_length.

    Unweighted: w(A, n) is the exact number of derivations A ⇒* u with |u| = n (Python ints).
    Weighted: log of the total probability of those derivations (float64, -inf for none).
    `sample(rng, n)` draws a derivation of length n with probability proportional to its weight,
    top-down: a rule with probability ∝ p(rule)·w(body, n), then the split of n over the body
    symbols one at a time.

    Tables are arrays over n: w(A, ·) per nonterminal and s(r, i, ·), the weight of body[i:] of
    rule r, per rule position; s(r, i, n) = Σ_j w(body[i], j)·s(r, i+1, n − j) is one vector
    product, and each split drawn while sampling is one vector of weights (O(n) numpy work per
    node, no Python loop over lengths)."""

    def __init__(self, grammar: CFG, max_length: int, weighted: bool):
        if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) \
                or max_length < 0:
            raise InputError(f"max_length must be a non-negative integer, got {max_length!r}")
        self.grammar = grammar
        self.max_length = int(max_length)
        self.weighted = bool(weighted)
        g = grammar
        order = g._same_length_order
        self._nt = g._nt_set
        probs = g.rule_weights()
        if self.weighted:
            self._rule_w = [math.log(float(p)) for p in probs]
        else:
            self._rule_w = [1] * len(g.rules)
        N = self.max_length
        self._w: dict = {a: self._zeros() for a in g.nonterminals}
        self._s: dict = {}
        for r, rule in enumerate(g.rules):
            for i in range(len(rule.body)):
                self._s[r, i] = self._zeros()
            end = self._zeros()
            end[0] = self._one
            self._s[r, len(rule.body)] = end
        for n in range(N + 1):
            # w(A, n) in an order where every w(B, n) that A's rules use with all other body
            # symbols empty is already known; the other terms of s(·, ·, n) that read a w(B, n)
            # not yet computed are multiplied by a zero, so they do not affect w(A, n) ...
            for a in order:
                terms = []
                for r in g._by_lhs[a]:
                    self._fill(r, n)
                    terms.append(self._mul(self._rule_w[r], self._s[r, 0][n]))
                self._w[a][n] = self._sum(terms)
            # ... and once all w(·, n) are known, every s(·, ·, n) is recomputed exactly
            for r in range(len(g.rules)):
                self._fill(r, n)

    # semiring ------------------------------------------------------------------------------------
    @property
    def _zero(self):
        return -math.inf if self.weighted else 0

    @property
    def _one(self):
        return 0.0 if self.weighted else 1

    def _zeros(self) -> np.ndarray:
        if self.weighted:
            return np.full(self.max_length + 1, -math.inf)
        out = np.empty(self.max_length + 1, dtype=object)   # exact Python ints
        out[:] = 0
        return out

    def _is_zero(self, v) -> bool:
        return v == self._zero

    def _mul(self, a, b):
        """a ⊗ b (element-wise for arrays)."""
        return a + b if self.weighted else a * b

    def _sum(self, values: list):
        """⊕ over a list of weights."""
        return self._total(np.array(values, dtype=np.float64 if self.weighted else object))

    def _total(self, terms: np.ndarray):
        """⊕ over a vector of weights (log-sum-exp, or an exact integer sum)."""
        if not self.weighted:
            return int(terms.sum()) if len(terms) else 0
        top = terms.max(initial=-math.inf)
        if top == -math.inf:
            return -math.inf
        return float(top + math.log(np.exp(terms - top).sum()))

    def _row(self, x: Hashable) -> np.ndarray | None:
        """w(x, ·) for a nonterminal; None for a terminal (weight one at length 1 only)."""
        return self._w[x] if x in self._nt else None

    def _fill(self, r: int, n: int) -> None:
        """s(r, i, n) for every position i of rule r, last position first."""
        body = self.grammar.rules[r].body
        for i in range(len(body) - 1, -1, -1):
            nxt = self._s[r, i + 1]
            row = self._row(body[i])
            if row is None:                                     # a terminal takes one symbol
                v = nxt[n - 1] if n else self._zero
            else:
                v = self._total(self._mul(row[:n + 1], nxt[n::-1]))
            self._s[r, i][n] = v

    def sym(self, x: Hashable, n: int):
        """w(x, n) for a terminal or nonterminal x."""
        row = self._row(x)
        if row is None:
            return self._one if n == 1 else self._zero
        return self._w[x][n]

    def total(self, n: int, symbol: Hashable | None = None):
        """w(start, n) (or w(symbol, n))."""
        self._check_n(n)
        return self.sym(self.grammar.start if symbol is None else symbol, n)

    def _check_n(self, n: int) -> None:
        if not 0 <= n <= self.max_length:
            raise InputError(f"length {n} is outside the table's range [0, {self.max_length}]")

    def _pick(self, rng: np.random.Generator, weights) -> int:
        """An index drawn with probability ∝ weights (log weights when weighted)."""
        if self.weighted:
            arr = np.asarray(weights, dtype=np.float64)
            p = np.exp(arr - arr.max())
            cum = np.cumsum(p)
            return int(min(np.searchsorted(cum, rng.random() * cum[-1], side="right"),
                           len(cum) - 1))
        cum = list(itertools.accumulate(int(w) for w in weights))
        return bisect.bisect_right(cum, _randbelow(rng, cum[-1]))

    def sample(self, rng: Any, n: int, symbol: Hashable | None = None) -> tuple:
        """A string of length n drawn as described in the class docstring."""
        rng = _check_rng(rng)
        self._check_n(n)
        root = self.grammar.start if symbol is None else symbol
        if self._is_zero(self.sym(root, n)):
            raise InputError(f"the grammar derives no string of length {n} from {root!r}")
        out: list = []
        stack: list = [(root, n)]
        g = self.grammar
        while stack:
            x, m = stack.pop()
            if x not in self._nt:
                out.append(x)
                continue
            rules = g._by_lhs[x]
            r = rules[self._pick(rng, [self._mul(self._rule_w[r], self._s[r, 0][m])
                                       for r in rules])]
            body = g.rules[r].body
            parts = []
            rest = m
            for i, y in enumerate(body):
                row = self._row(y)
                if row is None:
                    j = 1                                       # a terminal
                elif i == len(body) - 1:
                    j = rest                                    # the last symbol takes the rest
                else:
                    j = self._pick(rng, self._mul(row[:rest + 1], self._s[r, i + 1][rest::-1]))
                parts.append((y, j))
                rest -= j
            stack.extend(reversed(parts))
        return tuple(out)


__all__ = ["CFG", "PCFG", "GrammarError", "LengthTable", "Rule"]

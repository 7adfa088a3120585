"""Regular expressions over a single-character alphabet, compiled to minimal DFAs.

Syntax (loosest binding first): union ``r|s``; concatenation ``rs``; postfix repetition ``r*``
(zero or more), ``r+`` (one or more), ``r?`` (zero or one), which may be stacked (``a*?`` is
``(a*)?``); parentheses ``(r)``; ``.`` for any symbol of the alphabet; ``\\c`` for the literal
character c (to write a symbol that is a metacharacter ``|*+?().\\``); any other character is a
symbol, which must be in the alphabet. An empty alternative or empty parentheses stand for the
empty string, as in Python's ``re``. Matching is of whole strings (``re.fullmatch``).
Stacked repetitions are simplified as they are read (``r**`` is ``r*``, ``r+?`` is ``r*``, …).
Groups may nest at most `MAX_DEPTH` deep (InputError naming the position beyond).

`regex_to_dfa` goes Thompson NFA → subset construction → Hopcroft minimisation. The subset
construction is guarded by ``pdanet.limits`` (``max_states``, ``max_configs``): a pattern whose
DFA blows up exponentially, such as ``(a|b)*a(a|b)(a|b)…``, raises ResourceError as soon as the
limit is passed, naming the pattern.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from pdanet.automata.alphabet import EPSILON, Alphabet
from pdanet.automata.dfa import DFA
from pdanet.automata.nfa import NFA
from pdanet.errors import InputError

METACHARS = frozenset("|*+?().\\")
MAX_DEPTH = 100  # nested groups; deeper patterns are refused (the parser is recursive)
# the one repetition equivalent to two stacked ones: (inner, outer) -> kind
_STACKED = {("star", "star"): "star", ("plus", "plus"): "plus", ("opt", "opt"): "opt"}


@dataclass(frozen=True)
class Node:
    """A regex syntax tree node: ``kind`` is one of "sym", "any", "eps", "cat", "alt", "star",
    "plus", "opt"; ``symbol`` is set for "sym" and ``children`` for the others."""

    kind: str
    children: tuple[Node, ...] = ()
    symbol: Hashable | None = None


class _Parser:
    def __init__(self, pattern: str, alphabet: Alphabet):
        self.text = pattern
        self.alphabet = alphabet
        self.pos = 0
        self.depth = 0

    def error(self, message: str, pos: int | None = None) -> InputError:
        pos = self.pos if pos is None else pos
        shown = self.text if len(self.text) <= 60 else f"{self.text[:40]}…{self.text[-15:]}"
        return InputError(f"regex {shown!r}, position {pos}: {message}")

    def peek(self) -> str | None:
        return self.text[self.pos] if self.pos < len(self.text) else None

    def parse(self) -> Node:
        node = self.union()
        if self.peek() is not None:  # only an unmatched ')' stops the union early
            raise self.error("unmatched ')'; remove it or add a '(' before it")
        return node

    def union(self) -> Node:
        branches = [self.concat()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.concat())
        return branches[0] if len(branches) == 1 else Node("alt", tuple(branches))

    def concat(self) -> Node:
        parts = []
        while self.peek() is not None and self.peek() not in "|)":
            parts.append(self.repeat())
        if not parts:
            return Node("eps")
        return parts[0] if len(parts) == 1 else Node("cat", tuple(parts))

    def repeat(self) -> Node:
        node = self.atom()
        kinds = {"*": "star", "+": "plus", "?": "opt"}
        while self.peek() is not None and self.peek() in kinds:
            kind = kinds[self.peek()]
            if node.kind in ("star", "plus", "opt"):  # stacked: one repetition means the same
                kind = _STACKED.get((node.kind, kind), "star")
                node = Node(kind, node.children)
            else:
                node = Node(kind, (node,))
            self.pos += 1
        return node

    def atom(self) -> Node:
        c = self.peek()
        start = self.pos
        if c in ("*", "+", "?"):
            raise self.error(f"{c!r} has nothing to repeat; put a symbol or a group before it")
        self.pos += 1
        if c == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.error(f"groups nest more than {MAX_DEPTH} deep; remove redundant "
                                 "parentheses", start)
            node = self.union()
            if self.peek() != ")":
                raise self.error("'(' is never closed; add a ')'", start)
            self.pos += 1
            self.depth -= 1
            return node
        if c == ".":
            return Node("any")
        if c == "\\":
            if self.peek() is None:
                raise self.error("the pattern ends with a lone '\\'; escape it as '\\\\'", start)
            c = self.peek()
            self.pos += 1
        if c not in self.alphabet:
            raise self.error(f"symbol {c!r} is not in the alphabet {self.alphabet!r}", start)
        return Node("sym", symbol=c)


def parse_regex(pattern: str, alphabet: Alphabet | Iterable[Hashable] | str) -> Node:
    """The syntax tree of `pattern`; InputError naming the position of a syntax error."""
    alphabet = _single_char(alphabet)
    if not isinstance(pattern, str):
        raise InputError(f"a regex is a str, got {type(pattern).__name__}")
    return _Parser(pattern, alphabet).parse()


def regex_to_nfa(pattern: str, alphabet: Alphabet | Iterable[Hashable] | str) -> NFA:
    """Thompson's construction: an ε-NFA with one start and one accepting state."""
    alphabet = _single_char(alphabet)
    tree = parse_regex(pattern, alphabet)
    trans: dict[tuple, set] = {}
    count = 0

    def new() -> int:
        nonlocal count
        count += 1
        return count - 1

    def edge(p: int, a: Hashable, q: int) -> None:
        trans.setdefault((p, a), set()).add(q)

    def build(node: Node) -> tuple[int, int]:
        if node.kind == "cat":
            first, last = build(node.children[0])
            for child in node.children[1:]:
                s, e = build(child)
                edge(last, EPSILON, s)
                last = e
            return first, last
        s, e = new(), new()
        if node.kind == "sym":
            edge(s, node.symbol, e)
        elif node.kind == "any":
            for a in alphabet:
                edge(s, a, e)
        elif node.kind == "eps":
            edge(s, EPSILON, e)
        elif node.kind == "alt":
            for child in node.children:
                cs, ce = build(child)
                edge(s, EPSILON, cs)
                edge(ce, EPSILON, e)
        else:  # star, plus, opt
            cs, ce = build(node.children[0])
            edge(s, EPSILON, cs)
            edge(ce, EPSILON, e)
            if node.kind in ("star", "opt"):
                edge(s, EPSILON, e)
            if node.kind in ("star", "plus"):
                edge(ce, EPSILON, cs)
        return s, e

    start, end = build(tree)
    return NFA(range(count), alphabet, trans, start, {end}, name=pattern)


def regex_to_dfa(pattern: str, alphabet: Alphabet | Iterable[Hashable] | str) -> DFA:
    """The minimal DFA (states 0..n-1, trim, see `DFA.minimize`) of the strings over `alphabet`
    that fully match `pattern`."""
    dfa = regex_to_nfa(pattern, alphabet).determinise().minimize()
    return DFA(dfa.states, dfa.alphabet, dfa.transitions, dfa.start, dfa.accepting, name=pattern)


def _single_char(alphabet: Alphabet | Iterable[Hashable] | str) -> Alphabet:
    alphabet = Alphabet.of(alphabet)
    if not alphabet.single_char:
        raise InputError(
            f"regular expressions need an alphabet of single characters, got {alphabet!r}"
        )
    return alphabet


__all__ = ["METACHARS", "Node", "parse_regex", "regex_to_dfa", "regex_to_nfa"]

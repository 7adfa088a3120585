"""Tasks of DuSell & Chiang (2021), Learning Hierarchical Structures with Differentiable
Nondeterministic Stacks, §4 (the tasks of DuSell & Chiang 2020): marked, unmarked and padded
reversal, and Greibach's hardest context-free language. (Dyck-2, the fifth, is `dyck2` of
`pdanet.automata.tasks.suzgun2019`.) Where the text gives no rule probabilities, ours say so."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.grammar import CFG, PCFG
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.tasks.probability import WeightedCFG, normalise_grammar, push_weights
from pdanet.automata.tasks.sampling import check_alphabet, grammar_sampler, primed
from pdanet.automata.tasks.task import BLANK
from pdanet.automata.weighted import WeightedPDA, hardest_cfl_realtime
from pdanet.errors import InputError


def marked_palindrome(syms: tuple, marker: str, phi: dict, name: str):
    """Real-time DPDA for { w marker phi(w^R) }: push w (the first symbol primed), then pop one
    symbol per matching phi-image; accept when the primed symbol is popped (or at once for w = ε)."""
    stack = syms + tuple(primed(x) for x in syms)
    t: dict = {("start", marker, BOTTOM): ("done", (BOTTOM,))}
    for x in syms:
        t[("start", x, BOTTOM)] = ("push", (primed(x), BOTTOM))
        for s in stack:
            t[("push", x, s)] = ("push", (x, s))
        t[("push", marker, x)] = ("pop", (x,))
        t[("push", marker, primed(x))] = ("pop", (primed(x),))
        t[("pop", phi[x], x)] = ("pop", ())
        t[("pop", phi[x], primed(x))] = ("done", ())
    input_syms = syms + (marker,) + tuple(v for v in dict.fromkeys(phi.values()) if v not in syms)
    return DPDA(("start", "push", "pop", "done"), input_syms, stack, t, "start",
                accepting=("done",), name=name)


def marked_reversal_machine(alphabet: Any = "01", marker: str = BLANK):
    """DuSell & Chiang (2021) §4 "Marked reversal"; Suzgun et al. (2019) §6.2: { w # w^R }.
    Real-time DPDA."""
    syms = check_alphabet(alphabet, (marker,))
    return marked_palindrome(syms, marker, {x: x for x in syms}, "marked_reversal")


def marked_reversal_reference(string: Sequence, alphabet: Any = "01", marker: str = BLANK) -> bool:
    syms = set(check_alphabet(alphabet, (marker,)))
    s = tuple(string)
    if s.count(marker) != 1:
        return False
    i = s.index(marker)
    w, v = s[:i], s[i + 1:]
    return all(x in syms for x in w) and v == tuple(reversed(w))


def _continue_probability(mean: Any, name: str) -> Fraction:
    """DuSell & Chiang's rule probability for a geometric count with the given mean: X → a X with
    probability mean / (mean + 1), X → ε with 1 / (mean + 1) (their grammars/util.py)."""
    if isinstance(mean, bool) or not isinstance(mean, (int, float, Fraction)) or not mean >= 0:
        raise InputError(f"{name} must be a non-negative number, got {mean!r}")
    m = Fraction(str(mean)) if isinstance(mean, float) else Fraction(mean)
    return 1 - 1 / (m + 1)


def _end_probability(p_end: Any, mean_length: Any) -> Fraction:
    if p_end is None:
        return 1 - _continue_probability(mean_length, "mean_length")
    p = Fraction(str(p_end)) if isinstance(p_end, float) else p_end
    if isinstance(p, bool) or not isinstance(p, (int, Fraction)) or not 0 < p <= 1:
        raise InputError(f"p_end must be a probability in (0, 1], got {p_end!r}")
    return Fraction(p)


def marked_reversal_grammar(alphabet: Any = "01", marker: str = BLANK, p_end: Any = None,
                            mean_length: Any = 60) -> PCFG:
    """DuSell & Chiang (2020, 2021) marked reversal: S → x S x (probability (1 − p_end)/|Σ| each)
    | marker (p_end). By default p_end = 1/(mean_length + 1) with mean_length = 60, the mean
    length of w in the papers' experiments (the authors' grammar, mean_to_continue_prob);
    ``p_end=Fraction(1, 10)`` gives this library's earlier choice."""
    syms = check_alphabet(alphabet, (marker,))
    p_end = _end_probability(p_end, mean_length)
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", (marker,))] = p_end
    return PCFG(("S",), syms + (marker,), rules, "S", name="marked_reversal")


def marked_reversal_sampler(n, lengths, rng=None, alphabet: Any = "01", marker: str = BLANK):
    return grammar_sampler(marked_reversal_grammar(alphabet, marker), n, lengths, rng)


def unmarked_reversal_machine(alphabet: Any = "01"):
    """DuSell & Chiang (2021) §4 "Unmarked reversal": { w w^R }. Real-time PDA that guesses the
    middle: reading x with x on top it may pop instead of push."""
    syms = check_alphabet(alphabet)
    stack = syms + tuple(primed(x) for x in syms)
    t: dict = {}
    for x in syms:
        t[("start", x, BOTTOM)] = {("push", (primed(x), BOTTOM))}
        for s in stack:
            t[("push", x, s)] = {("push", (x, s))}
        t[("push", x, x)].add(("pop", ()))
        t[("push", x, primed(x))].add(("done", ()))
        t[("pop", x, x)] = {("pop", ())}
        t[("pop", x, primed(x))] = {("done", ())}
    return PDA(("start", "push", "pop", "done"), syms, stack, t, "start",
               accepting=("start", "done"), name="unmarked_reversal")


def unmarked_reversal_reference(string: Sequence, alphabet: Any = "01") -> bool:
    syms = set(check_alphabet(alphabet))
    s = tuple(string)
    h = len(s) // 2
    return (len(s) % 2 == 0 and all(x in syms for x in s)
            and s[h:] == tuple(reversed(s[:h])))


def unmarked_reversal_grammar(alphabet: Any = "01", p_end: Any = None,
                              mean_length: Any = 60) -> PCFG:
    """DuSell & Chiang (2020, 2021) unmarked reversal: S → x S x ((1 − p_end)/|Σ| each) | ε
    (p_end); p_end = 1/(mean_length + 1), mean_length = 60 as in the papers' experiments
    (``p_end=Fraction(1, 10)``: this library's earlier choice)."""
    syms = check_alphabet(alphabet)
    p_end = _end_probability(p_end, mean_length)
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", ())] = p_end
    return PCFG(("S",), syms, rules, "S", name="unmarked_reversal")


def unmarked_reversal_sampler(n: int, lengths, rng=None, alphabet: Any = "01") -> list:
    """Strings of `unmarked_reversal_grammar` of exact lengths."""
    return grammar_sampler(unmarked_reversal_grammar(alphabet), n, lengths, rng)


def padded_reversal_machine(alphabet: Any = "01"):
    """DuSell & Chiang (2021) §4 "Padded reversal": { w a^p w^R : a a symbol, p ≥ 0 }. Real-time
    PDA that guesses the middle (pop instead of push) or the single middle symbol (skip it). As a
    set this is every palindrome; the padding shows in the PCFG's distribution."""
    syms = check_alphabet(alphabet)
    stack = syms + tuple(primed(x) for x in syms)
    t: dict = {}
    for x in syms:
        t[("start", x, BOTTOM)] = {("push", (primed(x), BOTTOM)), ("done", (BOTTOM,))}
        for s in stack:
            t[("push", x, s)] = {("push", (x, s)), ("pop", (s,))}
        t[("push", x, x)].add(("pop", ()))
        t[("push", x, primed(x))].add(("done", ()))
        t[("pop", x, x)] = {("pop", ())}
        t[("pop", x, primed(x))] = {("done", ())}
    return PDA(("start", "push", "pop", "done"), syms, stack, t, "start",
               accepting=("start", "done"), name="padded_reversal")


def padded_reversal_reference(string: Sequence, alphabet: Any = "01") -> bool:
    """Literally: some split s = w a^p w^R."""
    syms = set(check_alphabet(alphabet))
    s = tuple(string)
    if any(x not in syms for x in s):
        return False
    n = len(s)
    for p in range(n % 2, n + 1, 2):
        h = (n - p) // 2
        mid = s[h:h + p]
        if len(set(mid)) <= 1 and s[h + p:] == tuple(reversed(s[:h])):
            return True
    return False


def padded_reversal_grammar(alphabet: Any = "01", p_end: Any = None, p_pad: Any = None,
                            mean_content_length: Any = 60, mean_padding_length: Any = 30) -> PCFG:
    """DuSell & Chiang (2020, 2021) padded reversal: S → x S x ((1 − p_end)/|Σ| each) | P (p_end);
    P → A_x (1/|Σ| each); A_x → x A_x (p_pad) | ε — the authors' S → T_x with probability
    p_end/|Σ|, through one extra unary rule. Defaults as in the papers' experiments: p_end =
    1/(mean_content_length + 1), p_pad = mean_padding_length/(mean_padding_length + 1), means 60
    and 30. ``p_end=Fraction(1, 10), p_pad=Fraction(9, 10)``: this library's earlier choice."""
    syms = check_alphabet(alphabet)
    p_end = _end_probability(p_end, mean_content_length)
    if p_pad is None:
        p_pad = _continue_probability(mean_padding_length, "mean_padding_length")
    p_pad = Fraction(str(p_pad)) if isinstance(p_pad, float) else p_pad
    if isinstance(p_pad, bool) or not isinstance(p_pad, (int, Fraction)) or not 0 < p_pad < 1:
        raise InputError(f"p_pad must be a probability in (0, 1), got {p_pad!r}")
    rules = {("S", (x, "S", x)): (1 - p_end) / len(syms) for x in syms}
    rules[("S", ("P",))] = p_end
    pads = tuple(("pad", x) for x in syms)
    for x, a in zip(syms, pads):
        rules[("P", (a,))] = Fraction(1, len(syms))
        rules[(a, (x, a))] = p_pad
        rules[(a, ())] = 1 - p_pad
    return PCFG(("S", "P") + pads, syms, rules, "S", name="padded_reversal")


def padded_reversal_sampler(n: int, lengths, rng=None, alphabet: Any = "01") -> list:
    """Strings of `padded_reversal_grammar` of exact lengths."""
    return grammar_sampler(padded_reversal_grammar(alphabet), n, lengths, rng)


HARDEST_ALPHABET = ("(", ")", "[", "]", ",", ";", "$")
"""The 7 symbols of DuSell & Chiang's hardest CFL (their order ``()[],;$``)."""
HARDEST_ALPHABET_NO_DOLLAR = ("(", ")", "[", "]", ",", ";")
"""The 6 symbols of the variant without ``$`` (``dollar=False``)."""

_OPEN = {"(": ")", "[": "]"}
_CLOSE = {")": "(", "]": "["}


def _check_dollar(dollar: Any) -> bool:
    if not isinstance(dollar, bool):
        raise InputError(f"dollar must be True or False, got {dollar!r}")
    return dollar


def hardest_cfl_grammar(dollar: bool = True, mean_num_commas: Any = 0.5,
                        mean_short_filler_length: Any = 0.5, mean_long_filler_length: Any = 2,
                        semicolon_probability: Any = Fraction(1, 4), mean_bracket_splits: Any = 1.5,
                        mean_nesting_depth: Any = 3, **dollarless: Any) -> WeightedCFG | PCFG:
    """Greibach's hardest context-free language as DuSell & Chiang (2020 §5; 2021 §4) use it: the
    strings x1 , y1 , z1 ; … xn , yn , zn ; (n ≥ 1) whose y-parts concatenate to ``$`` followed by a
    non-empty Dyck-2 word over ( ) [ ], each yi non-empty and comma-free, no block containing two
    adjacent commas, xi not ending and zi not starting with a comma (xi, zi over ( ) [ ] $ ,).
    Greibach (1973)'s c and d are ``,`` and ``;``.

    The authors' grammar (nondeterministic-stack-rnn, ``grammars/hardest_cfl.py``), with their
    weights (c, u, v, s, t = m/(m+1) for the means given, q = semicolon_probability):

        S' → R $ Q S L ;            L → L' , U       L' → , V L' (c) | ε (1−c)
        R → U , R'                  R' → R' V , (c) | ε (1−c)
        U → W U (u) | ε (1−u)       V → W V (v) | W (1−v)     W → ( | ) | [ | ] | $  (weight 1 each)
        Q → L ; R (q) | ε (1−q)     S → S Q T (s) | T (1−s)
        T → ( Q S Q ) (t/2) | [ Q S Q ] (t/2) | ( Q ) ((1−t)/2) | [ Q ] ((1−t)/2)

    Defaults are the papers' experiments (the authors' functions.bash): 0.5 commas, short filler
    0.5, long filler 2 (v from mean 2 − 1), q = 1/4, 1.5 bracket splits, nesting depth 3. The
    W rules have weight 1 each (their rule default), so the weights do not sum to one: the result
    is a `WeightedCFG`, a distribution only given the length — which is how the authors sample and
    score it (`pdanet.automata.tasks.probability`).

    ``dollar=False``: this library's earlier variant without ``$`` (blocks x , y , z ; with the
    y's in D_2, x and z free over ( ) [ ] ,), a `PCFG` with our own probabilities (keywords
    p_more, p_fill, p_nest, p_sep)."""
    if not _check_dollar(dollar):
        return hardest_cfl_dollarless_grammar(**dollarless)
    if dollarless:
        raise InputError(f"unknown parameters {sorted(dollarless)} for the hardest CFL with $; "
                         "p_more, p_fill, p_nest and p_sep belong to dollar=False")
    c = _continue_probability(mean_num_commas, "mean_num_commas")
    u = _continue_probability(mean_short_filler_length, "mean_short_filler_length")
    if not isinstance(mean_long_filler_length, (int, float, Fraction)) \
            or isinstance(mean_long_filler_length, bool) or not mean_long_filler_length > 1:
        raise InputError(f"mean_long_filler_length must be a number > 1, got "
                         f"{mean_long_filler_length!r}")
    v = _continue_probability(Fraction(str(mean_long_filler_length)) - 1,
                              "mean_long_filler_length")
    q = semicolon_probability
    q = Fraction(str(q)) if isinstance(q, float) else q
    if isinstance(q, bool) or not isinstance(q, (int, Fraction)) or not 0 < q < 1:
        raise InputError(f"semicolon_probability must be in (0, 1), got {semicolon_probability!r}")
    s_ = _continue_probability(mean_bracket_splits, "mean_bracket_splits")
    if isinstance(mean_nesting_depth, bool) or not isinstance(mean_nesting_depth, (int, float,
                                                                                    Fraction)) \
            or not mean_nesting_depth > 1:
        raise InputError(f"mean_nesting_depth must be a number > 1, got {mean_nesting_depth!r}")
    t = _continue_probability(mean_nesting_depth, "mean_nesting_depth")
    if c == 0 or u == 0 or s_ == 0:
        raise InputError("mean_num_commas, mean_short_filler_length and mean_bracket_splits must "
                         "be positive")
    q = Fraction(q)
    rules: dict = {
        ("S'", ("R", "$", "Q", "S", "L", ";")): 1,
        ("L", ("L'", ",", "U")): 1,
        ("L'", (",", "V", "L'")): c, ("L'", ()): 1 - c,
        ("R", ("U", ",", "R'")): 1,
        ("R'", ("R'", "V", ",")): c, ("R'", ()): 1 - c,
        ("U", ("W", "U")): u, ("U", ()): 1 - u,
        ("V", ("W", "V")): v, ("V", ("W",)): 1 - v,
        ("Q", ("L", ";", "R")): q, ("Q", ()): 1 - q,
        ("S", ("S", "Q", "T")): s_, ("S", ("T",)): 1 - s_,
    }
    for a in ("(", ")", "[", "]", "$"):
        rules[("W", (a,))] = 1
    for lo, hi in _OPEN.items():
        rules[("T", (lo, "Q", "S", "Q", hi))] = t / 2
        rules[("T", (lo, "Q", hi))] = (1 - t) / 2
    return WeightedCFG(("S'", "L", "L'", "R", "R'", "U", "V", "W", "Q", "S", "T"),
                       HARDEST_ALPHABET, rules, "S'", name="hardest_cfl")


def hardest_cfl_dollarless_grammar(p_more: Any = Fraction(1, 2), p_fill: Any = Fraction(1, 2),
                                   p_nest: Any = Fraction(1, 3),
                                   p_sep: Any = Fraction(1, 6)) -> PCFG:
    """The hardest-CFL variant without ``$`` (``hardest_cfl_grammar(dollar=False)``), written with
    ``,`` for Greibach's c and ``;`` for d:

        L = { x1 , y1 , z1 ; … xn , yn , zn ; : n ≥ 0, y1…yn ∈ D_2, yi ∈ {( ) [ ]}*,
              xi, zi ∈ {( ) [ ] ,}* }

    Grammar: S → ε | X , T , X ; (the n-1 other blocks are separators inside T);
    T → ε | ( T ) T | [ T ] T | Sep T (Dyck words with separators anywhere);
    Sep → , X ; X , ;  X → ε | x X for x in ( ) [ ] , .
    Probabilities are our choice: `p_more` for S → X , T , X ;, `p_fill` for X → x X (x uniform),
    `p_nest` for each bracket rule of T, `p_sep` for T → Sep T."""
    p_more, p_fill, p_nest, p_sep = map(Fraction, (p_more, p_fill, p_nest, p_sep))
    rules: dict = {
        ("S", ()): 1 - p_more, ("S", ("X", ",", "T", ",", "X", ";")): p_more,
        ("T", ("(", "T", ")", "T")): p_nest / 2, ("T", ("[", "T", "]", "T")): p_nest / 2,
        ("T", ("Sep", "T")): p_sep, ("T", ()): 1 - p_nest - p_sep,
        ("Sep", (",", "X", ";", "X", ",")): 1,
        ("X", ()): 1 - p_fill,
    }
    for x in ("(", ")", "[", "]", ","):
        rules[("X", (x, "X"))] = p_fill / 5
    return PCFG(("S", "T", "Sep", "X"), HARDEST_ALPHABET_NO_DOLLAR, rules, "S",
                name="hardest_cfl")


def hardest_cfl_machine(dollar: bool = True):
    """The top-down PDA of `hardest_cfl_grammar` (nondeterministic, with ε-moves: it guesses
    which comma-free segment of each block is y_i). With ``$`` the grammar's two left-recursive
    rules are written right-recursively first (R' → V , R' and S → T Q S: the same languages
    (V ,)* and T (Q T)*), so that the PDA's ε-closures are finite."""
    g = hardest_cfl_grammar(_check_dollar(dollar))
    if not dollar:
        return g.cfg().to_pda(name="hardest_cfl")
    swap = {("R'", ("R'", "V", ",")): ("R'", ("V", ",", "R'")),
            ("S", ("S", "Q", "T")): ("S", ("T", "Q", "S"))}
    rules = [swap.get((r.lhs, r.body), (r.lhs, r.body)) for r in g.rules]
    plain = CFG(g.nonterminals, g.terminals, rules, g.start, name=g.name)
    return plain.to_pda(name="hardest_cfl")


def dusell_dyck_grammar(k: int = 2, mean_bracket_splits: Any = 1,
                        mean_nesting_depth: Any = 40) -> PCFG:
    """DuSell & Chiang (2020, 2021)'s Dyck-k grammar: S → S T (s) | T (1 − s); T → l S r (t/k) |
    l r ((1 − t)/k) for each bracket pair l r, s = m/(m+1) for m = mean_bracket_splits and
    t = m/(m+1) for m = mean_nesting_depth − 1; defaults 1 and 40 as in their experiments. (The
    authors give each pair weight t and 1 − t; dividing by k changes no probability given the
    length, since every string of length 2n has n T's.) Brackets ( ) [ ] { } < > …, then a1 b1 …"""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"the number of bracket pairs k must be a positive integer, got {k!r}")
    if isinstance(mean_nesting_depth, bool) or not isinstance(mean_nesting_depth, (int, float,
                                                                                    Fraction)) \
            or not mean_nesting_depth > 1:
        raise InputError(f"mean_nesting_depth must be a number > 1, got {mean_nesting_depth!r}")
    s_ = _continue_probability(mean_bracket_splits, "mean_bracket_splits")
    t = _continue_probability(Fraction(str(mean_nesting_depth)) - 1, "mean_nesting_depth")
    pairs = [("()[]{}<>"[2 * i], "()[]{}<>"[2 * i + 1]) if i < 4 else (f"a{i}", f"b{i}")
             for i in range(k)]
    rules: dict = {("S", ("S", "T")): s_, ("S", ("T",)): 1 - s_}
    if s_ == 0:
        del rules[("S", ("S", "T"))]
    for lo, hi in pairs:
        rules[("T", (lo, "S", hi))] = t / k
        rules[("T", (lo, hi))] = (1 - t) / k
    return PCFG(("S", "T"), tuple(x for p in pairs for x in p), rules, "S", name=f"dyck{k}")


def _dyck_stacks(stacks: set, y: Sequence) -> set:
    """Every bracket stack reachable from one in `stacks` by reading the bracket string y."""
    out = set()
    for st in stacks:
        lst = list(st)
        for x in y:
            if x in _OPEN:
                lst.append(x)
            elif not lst or lst.pop() != _CLOSE[x]:
                break
        else:
            out.add(tuple(lst))
    return out


def hardest_cfl_reference(string: Sequence, dollar: bool = True) -> bool:
    """Membership by the definition (not the grammar): split at ``;`` into blocks; in each block
    y is a segment between two consecutive commas; track every reachable bracket stack. With ``$``:
    no block has two adjacent commas, y1 is ``$`` then brackets, the other y's are non-empty
    bracket strings, and at least one bracket is read."""
    if not _check_dollar(dollar):
        return _hardest_dollarless_reference(string)
    s = tuple(string)
    if not s or s[-1] != ";" or any(x not in HARDEST_ALPHABET for x in s):
        return False
    blocks = "".join(s[:-1]).split(";")
    # state: (dollar read?, bracket read?, stack)
    states = {(False, False, ())}
    for block in blocks:
        if ",," in block:
            return False
        segments = block.split(",")
        new = set()
        for y in segments[1:-1]:
            if not y:
                continue
            for seen, nonempty, st in states:
                body = y
                if not seen:
                    if y[0] != "$":
                        continue
                    body = y[1:]
                if "$" in body or "," in body or ";" in body:
                    continue
                for st2 in _dyck_stacks({st}, body):
                    new.add((True, nonempty or bool(body), st2))
        states = new
        if not states:
            return False
    return (True, True, ()) in states


def _hardest_dollarless_reference(string: Sequence) -> bool:
    s = tuple(string)
    if any(x not in HARDEST_ALPHABET_NO_DOLLAR for x in s):
        return False
    if not s:
        return True
    if s[-1] != ";":
        return False
    stacks = {()}
    for block in "".join(s[:-1]).split(";"):
        new = set()
        for y in block.split(",")[1:-1]:  # between two consecutive commas
            new |= _dyck_stacks(stacks, y)
        stacks = new
        if not stacks:
            return False
    return () in stacks


def hardest_cfl_sampler(n: int, lengths, rng=None, dollar: bool = True, **params) -> list:
    """Strings of `hardest_cfl_grammar` of exact lengths, each with probability proportional to
    its grammar weight among the strings of its length (the authors' length-conditioned
    sampling); lengths without strings raise InputError."""
    return grammar_sampler(hardest_cfl_grammar(dollar, **params), n, lengths, rng)


def hardest_cfl_realtime_dollar() -> WeightedPDA:
    """A real-time weighted PDA (weights one) for the hardest CFL with ``$`` of
    `hardest_cfl_grammar`: its accepting runs are the ways to choose each block's y, so a string's
    weight is its number of such choices. States (phase, f): phase b (block start), x / xc (in x,
    last symbol not a comma / a comma), ys (after the first separator), y, zs (after the second
    separator), z / zc; f = 0 before ``$``, 1 after ``$``, 2 after a bracket of y. Accepting: b
    with f = 2 and the empty stack."""
    fill = ("(", ")", "[", "]", "$")
    tops = (BOTTOM, "(", "[")
    t: dict = {}

    def keep(q, x, a, r):
        t[(q, x, a, r, "replace", x)] = 1.0

    for f in (0, 1, 2):
        b, x_, xc, ys, y, zs, z, zc = (f"{p}{f}" for p in ("b", "x", "xc", "ys", "y", "zs", "z",
                                                            "zc"))
        for top in tops:
            for a in fill:
                for q in (b, x_, xc):
                    keep(q, top, a, x_)
                for q in (zs, z, zc):
                    keep(q, top, a, z)
            keep(b, top, ",", xc)
            keep(b, top, ",", ys)
            keep(x_, top, ",", xc)
            keep(x_, top, ",", ys)
            keep(z, top, ",", zc)
            for q in (zs, z, zc):
                keep(q, top, ";", b)
            if f == 0:
                keep(ys, top, "$", "y1")
            else:
                for q in (ys, y):
                    for o in _OPEN:
                        t[(q, top, o, "y2", "push", o)] = 1.0
                keep(y, top, ",", zs)
        if f:
            for q in (ys, y):
                for o, c in _OPEN.items():
                    t[(q, o, c, "y2", "pop", None)] = 1.0
    states = tuple(f"{p}{f}" for f in (0, 1, 2) for p in ("b", "x", "xc", "ys", "y", "zs", "z",
                                                            "zc"))
    return WeightedPDA(states, HARDEST_ALPHABET, ("(", "["), t, "b0", "real", accepting=("b2",),
                       empty_stack=True, name="hardest_cfl_realtime")


#: the default length weight λ of the hardest CFL's language model (p(w) ∝ weight_G(w)·λ^|w|):
#: its mean length is about 58, near the papers' mean of 60 (λ < 0.36 keeps the total finite)
HARDEST_LENGTH_WEIGHT = Fraction(343, 1000)


def _length_weight(length_weight: Any) -> Fraction:
    lam = length_weight
    lam = Fraction(str(lam)) if isinstance(lam, float) else lam
    if isinstance(lam, bool) or not isinstance(lam, (int, Fraction)) or not 0 < lam:
        raise InputError(f"length_weight must be a positive number, got {length_weight!r}")
    return Fraction(lam)


def hardest_cfl_weighted_pda(length_weight: Any = HARDEST_LENGTH_WEIGHT,
                             **params: Any) -> WeightedPDA:
    """A real-time weighted PDA (rational semiring, exact) whose weight of every string w is
    weight_G(w)·λ^|w|, with weight_G the total weight of w's derivations in
    `hardest_cfl_grammar(**params)` (with ``$``) and λ = `length_weight` (each transition reads
    one symbol and carries a factor λ). Accepting: state ``F`` with the empty stack.

    Construction (specific to this grammar, a real-time weighted form in the spirit of
    Greibach's normal form). Between two consecutive *structural* brackets (those of T) the
    grammar has exactly one Q (after ``$`` too), and the last ``)`` is followed by L ``;``. So a
    state is a phase — O after an opening bracket or ``$``, C after a closing bracket — and a
    position in Q = ε | L ; R: ``e`` (the entry), ``l1``/``l2`` (in L' = (, V)*: after its comma,
    after a W of V), ``lU`` (in L's U), ``rU`` (in R's U), ``r2``/``r3`` (in R' = (V ,)*: after
    a comma, after a W of V); plus ``sU``, ``s2``, ``s3`` for S''s leading R and ``F``. The
    stack holds the open structural brackets ( and [ ; every pop returns to ``eC``. The rule
    weights are paid where the next symbol decides the rule: T's weight (A = ( Q S Q ), B = ( Q ))
    at the next structural bracket after its opening one (an opening bracket: A of the top; the
    matching closing one: B), S → S Q T (s) at each further T and S → T (1 − s) at the end of
    S (a closing bracket read in phase C, or the final ``;``), Q → L ; R (q) at Q's ``;`` and
    Q → ε (1 − q) at a bracket read from ``e``, the filler rules at their symbols, R' → ε at the
    bracket after R'. Every derivation is one run and every run one derivation, with the same
    weight (checked against the grammar's derivations on every string up to length 9 in the
    tests); 18 states, stack symbols ( and [."""
    g = hardest_cfl_grammar(True, **params)
    lam = _length_weight(length_weight)

    def w(lhs: str, body: tuple) -> Fraction:
        return Fraction(g.weight(lhs, body))

    fill = ("(", ")", "[", "]", "$")
    om = {a: w("W", (a,)) for a in fill}
    c, cb = w("L'", (",", "V", "L'")), w("L'", ())
    c_r, cb_r = w("R'", ("R'", "V", ",")), w("R'", ())
    u, ub = w("U", ("W", "U")), w("U", ())
    v, vb = w("V", ("W", "V")), w("V", ("W",))
    q, qb = w("Q", ("L", ";", "R")), w("Q", ())
    s_, sb = w("S", ("S", "Q", "T")), w("S", ("T",))
    w_l, w_r = w("L", ("L'", ",", "U")), w("R", ("U", ",", "R'"))
    w_top = w("S'", ("R", "$", "Q", "S", "L", ";"))
    rule_a = {lo: w("T", (lo, "Q", "S", "Q", hi)) for lo, hi in _OPEN.items()}
    rule_b = {lo: w("T", (lo, "Q", hi)) for lo, hi in _OPEN.items()}
    t: dict = {}

    def add(src, top, a, dst, op, y, weight) -> None:
        if weight:
            key = (src, top, a, dst, op, y)
            t[key] = t.get(key, Fraction(0)) + weight * lam

    for phase in "OC":
        e, l1, l2, lu, ru, r2, r3 = (f"{n}{phase}" for n in ("e", "l1", "l2", "lU", "rU", "r2",
                                                                "r3"))
        for x in (BOTTOM,) + tuple(_OPEN):
            def keep(src, a, dst, weight, x=x) -> None:
                add(src, x, a, dst, "replace", x, weight)

            keep(e, ",", l1, w_l * c)                    # Q = L ; R: L = L' , U starts
            keep(e, ",", lu, w_l * cb)
            for a in fill:
                keep(l1, a, l2, om[a])                   # V's first W
                keep(l2, a, l2, v * om[a])               # V → W V
                keep(lu, a, lu, u * om[a])               # U → W U
                keep(ru, a, ru, u * om[a])
                keep(r2, a, r3, c_r * om[a])             # R' → R' V ,
                keep(r3, a, r3, v * om[a])
            keep(l2, ",", l1, vb * c)                    # V → W ends; L' → , V L' again
            keep(l2, ",", lu, vb * cb)                   # ... or L' → ε and L's comma
            keep(lu, ";", ru, ub * q * w_r)              # Q's semicolon: Q → L ; R
            keep(ru, ",", r2, ub)                        # R = U , R'
            keep(r3, ",", r2, vb)
            if phase == "C" and x is BOTTOM:
                keep(lu, ";", "F", ub * sb)              # S ends; S' → … S L ;
            for ready, f in ((e, qb), (r2, cb_r)):       # Q = ε, or Q ended with R' → ε
                for lo in _OPEN:                         # an opening structural bracket
                    x_w = (1 if x is BOTTOM else rule_a[x]) if phase == "O" else s_
                    add(ready, x, lo, "eO", "push", lo, f * x_w)
                if x is not BOTTOM:                      # the closing one of the top
                    add(ready, x, _OPEN[x], "eC", "pop", None,
                        f * (rule_b[x] if phase == "O" else sb))
    for a in fill:                                       # S' → R $ …, R = U , R'
        add("sU", BOTTOM, a, "sU", "replace", BOTTOM, u * om[a])
        add("s2", BOTTOM, a, "s3", "replace", BOTTOM, c_r * om[a])
        add("s3", BOTTOM, a, "s3", "replace", BOTTOM, v * om[a])
    add("sU", BOTTOM, ",", "s2", "replace", BOTTOM, ub)
    add("s3", BOTTOM, ",", "s2", "replace", BOTTOM, vb)
    add("s2", BOTTOM, "$", "eO", "replace", BOTTOM, cb_r * w_r * w_top)
    states = ("sU", "s2", "s3") + tuple(f"{n}{p}" for p in "OC" for n in (
        "e", "l1", "l2", "lU", "rU", "r2", "r3")) + ("F",)
    return WeightedPDA(states, HARDEST_ALPHABET, tuple(_OPEN), t, "sU", "rational",
                       accepting=("F",), empty_stack=True, name="hardest_cfl_weighted")


def hardest_cfl_lm(length_weight: Any = HARDEST_LENGTH_WEIGHT,
                   **params: Any) -> tuple[WeightedPDA, PCFG]:
    """(probabilistic real-time PDA, PCFG) of the hardest CFL with ``$`` as a language model:
    both give every string w the probability p(w) = weight_G(w)·λ^|w| / Z(λ), weight_G from
    `hardest_cfl_grammar(**params)` (the authors' weights) and λ = `length_weight`, so that
    p(w | |w|) is the grammar's — the distribution DuSell & Chiang sample and score given the
    length (their grammar's weights do not normalise: any λ with a finite total Z(λ) gives the
    same conditional; the default's mean length is about 58). The PDA is
    `hardest_cfl_weighted_pda` locally normalised by `push_weights` (its completion weights
    solved by Newton's method to a relative residual of about 1e-16), the PCFG is the grammar
    renormalised by `normalise_grammar`. InputError for λ where Z(λ) is infinite (λ ≳ 0.36
    with the default parameters)."""
    lam = _length_weight(length_weight)
    machine, _ = push_weights(hardest_cfl_weighted_pda(lam, **params))
    machine = WeightedPDA(machine.states, machine.alphabet, machine.stack_alphabet,
                          machine.transitions, machine.start, "real", accepting=machine.accepting,
                          empty_stack=True, name="hardest_cfl_lm")
    return machine, normalise_grammar(hardest_cfl_grammar(True, **params), lam)


def hardest_cfl_task_machine(realtime: bool = False, dollar: bool = True):
    """The grammar's PDA (ε-moves), or with ``realtime=True`` a real-time weighted PDA (one symbol
    per step, as the NS-RNN): `hardest_cfl_realtime_dollar`, or with ``dollar=False``
    `pdanet.automata.weighted.hardest_cfl_realtime`."""
    if realtime:
        return hardest_cfl_realtime_dollar() if _check_dollar(dollar) else hardest_cfl_realtime()
    return hardest_cfl_machine(dollar)


__all__ = [
    "HARDEST_ALPHABET",
    "HARDEST_ALPHABET_NO_DOLLAR",
    "HARDEST_LENGTH_WEIGHT",
    "dusell_dyck_grammar",
    "hardest_cfl_dollarless_grammar",
    "hardest_cfl_grammar",
    "hardest_cfl_lm",
    "hardest_cfl_machine",
    "hardest_cfl_realtime_dollar",
    "hardest_cfl_reference",
    "hardest_cfl_sampler",
    "hardest_cfl_task_machine",
    "hardest_cfl_weighted_pda",
    "marked_palindrome",
    "marked_reversal_grammar",
    "marked_reversal_machine",
    "marked_reversal_reference",
    "marked_reversal_sampler",
    "padded_reversal_grammar",
    "padded_reversal_machine",
    "padded_reversal_reference",
    "padded_reversal_sampler",
    "unmarked_reversal_grammar",
    "unmarked_reversal_machine",
    "unmarked_reversal_reference",
    "unmarked_reversal_sampler",
]

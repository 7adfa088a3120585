"""Tasks of Hao et al. (2018), Context-Free Transductions with Neural Stacks: string reversal
(§3, §4.1; §2.3 without padding), cumulative and delayed XOR (§4.2), parenthesis prediction
(§4.3), boolean formula evaluation (§4.4) and subject–auxiliary agreement (§4.5; the
auxiliaries that may follow each prefix: `agreement_predictor`).

Transductions are written in the delayed-output form of §2.3: the source w followed by one blank
``#`` per output symbol still to come, so that the machine reads one symbol and emits one symbol
per step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Hashable, Sequence
from fractions import Fraction
from typing import Any

from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.dfa import DFA
from pdanet.automata.grammar import CFG, PCFG
from pdanet.automata.pdt import DPDT
from pdanet.automata.tasks.sampling import (
    check_alphabet,
    check_rng,
    draw_lengths,
    grammar_sampler,
    primed,
)
from pdanet.automata.tasks.task import BLANK
from pdanet.errors import InputError


def reversal_machine(alphabet: Any = "ab", blank: str = BLANK, name: str = "reversal"):
    """Hao et al. (2018) §3, §4.1 (Fig. 3): the DPDT computing f(w #^|w|) = #^|w| w^R, real-time.

    While reading w it pushes each symbol and emits the blank; on each blank it pops the top and
    emits it. The first symbol of w is pushed as a primed (bottom-most) stack symbol so the machine
    knows when the last one is popped and enters the accepting state ``done`` (domain: exactly
    the strings w #^|w|)."""
    syms = check_alphabet(alphabet, (blank,))
    stack = syms + tuple(primed(x) for x in syms)
    t: dict = {}
    for x in syms:
        t[("start", x, BOTTOM)] = ("push", blank, (primed(x), BOTTOM))
        for s in stack:
            t[("push", x, s)] = ("push", blank, (x, s))
        for q in ("push", "pop"):
            t[(q, blank, x)] = ("pop", x, ())
            t[(q, blank, primed(x))] = ("done", x, ())
    return DPDT(("start", "push", "pop", "done"), syms + (blank,), syms + (blank,), stack, t,
                "start", accepting=("start", "done"), name=name)


def delayed_output(string: Sequence, symbols: Collection, blank: Hashable,
                   f: Callable[[tuple], tuple]) -> tuple | None:
    """The per-step outputs of a task in the delayed-output form of §2.3: blank^|w| f(w) for
    s = w blank^|w| with w over `symbols`; None for any other string."""
    s = tuple(string)
    if len(s) % 2:
        return None
    h = len(s) // 2
    w, pad = s[:h], s[h:]
    if any(x not in symbols for x in w) or any(x != blank for x in pad):
        return None
    return (blank,) * h + f(w)


def reversal_reference(string: Sequence, alphabet: Any = "ab", blank: str = BLANK):
    """#^|w| w^R for s = w #^|w| (per-step outputs), else None."""
    syms = set(check_alphabet(alphabet, (blank,)))
    return delayed_output(string, syms, blank, lambda w: tuple(reversed(w)))


def reversal_sampler(n: int, lengths, rng=None, alphabet: Any = "ab", blank: str = BLANK):
    """Strings w #^|w| with w uniform over the alphabet; every length must be even."""
    rng = check_rng(rng)
    syms = check_alphabet(alphabet, (blank,))
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L % 2:
            raise InputError(f"strings w #^|w| have even length; {L} is odd")
        w = tuple(syms[i] for i in rng.integers(0, len(syms), size=L // 2))
        out.append(w + (blank,) * (L // 2))
    return out


def reversal_eps_machine(alphabet: Any = "ab", marker: str = BLANK, name: str = "reversal_eps"):
    """Hao et al. (2018) §2.3: string reversal without #-padding, w # -> w^R, as a DPDT with
    ε-moves. While reading w it pushes each symbol and emits nothing; on the end marker it follows
    ε-moves that pop the stack and emit each popped symbol, then (on ⊥) an ε-move to the accepting
    state ``done``. So the step that reads the marker emits all of w^R (output kind "string");
    the domain is exactly the strings w #."""
    syms = check_alphabet(alphabet, (marker,))
    t: dict = {}
    for s in syms + (BOTTOM,):
        for x in syms:
            t[("read", x, s)] = ("read", EPSILON, (x, s))
        t[("read", marker, s)] = ("emit", EPSILON, (s,))
    for x in syms:
        t[("emit", EPSILON, x)] = ("emit", x, ())
    t[("emit", EPSILON, BOTTOM)] = ("done", EPSILON, (BOTTOM,))
    return DPDT(("read", "emit", "done"), syms + (marker,), syms, syms, t, "read",
                accepting=("done",), name=name)


def reversal_eps_reference(string: Sequence, alphabet: Any = "ab", marker: str = BLANK):
    """Per-step outputs of w # -> w^R: () for each symbol of w, then w^R; None off the domain."""
    syms = set(check_alphabet(alphabet, (marker,)))
    s = tuple(string)
    if not s or s[-1] != marker or any(x not in syms for x in s[:-1]):
        return None
    return ((),) * (len(s) - 1) + (tuple(reversed(s[:-1])),)


def reversal_eps_sampler(n: int, lengths, rng=None, alphabet: Any = "ab", marker: str = BLANK):
    """Strings w # with w uniform over the alphabet (total lengths ≥ 1)."""
    rng = check_rng(rng)
    syms = check_alphabet(alphabet, (marker,))
    out = []
    for L in draw_lengths(n, lengths, rng):
        if L < 1:
            raise InputError("strings w # have length ≥ 1")
        out.append(tuple(syms[i] for i in rng.integers(0, len(syms), size=L - 1)) + (marker,))
    return out


def reversal_task_machine(alphabet: Any = "ab", blank: str = BLANK, epsilon: bool = False):
    """``epsilon=True``: the unpadded w # -> w^R with ε-moves (`reversal_eps_machine`, `blank`
    is its end marker); else the real-time padded DPDT (`reversal_machine`)."""
    if epsilon:
        return reversal_eps_machine(alphabet, blank)
    return reversal_machine(alphabet, blank)


def reversal_task_sampler(n: int, lengths, rng=None, alphabet: Any = "ab", blank: str = BLANK,
                           epsilon: bool = False):
    if epsilon:
        return reversal_eps_sampler(n, lengths, rng, alphabet, blank)
    return reversal_sampler(n, lengths, rng, alphabet, blank)


def reversal_task_reference(string: Sequence, alphabet: Any = "ab", blank: str = BLANK,
                             epsilon: bool = False):
    if epsilon:
        return reversal_eps_reference(string, alphabet, blank)
    return reversal_reference(string, alphabet, blank)




def cumulative_xor_machine() -> DFA:
    """Hao et al. (2018) §4.2 (Fig. 4 left): emits the XOR of all bits read so far (Mealy)."""
    return DFA((0, 1), "01", {(q, a): q ^ int(a) for q in (0, 1) for a in "01"}, 0,
               accepting=(0, 1), outputs={(q, a): str(q ^ int(a)) for q in (0, 1) for a in "01"},
               output_alphabet="01", name="cumulative_xor")


def cumulative_xor_reference(string: Sequence) -> tuple:
    out, acc = [], 0
    for a in string:
        acc ^= int(a)
        out.append(str(acc))
    return tuple(out)


def delayed_xor_machine() -> DFA:
    """Hao et al. (2018) §4.2: emits the XOR of all bits read before the current one (Mealy)."""
    return DFA((0, 1), "01", {(q, a): q ^ int(a) for q in (0, 1) for a in "01"}, 0,
               accepting=(0, 1), outputs={(q, a): str(q) for q in (0, 1) for a in "01"},
               output_alphabet="01", name="delayed_xor")


def delayed_xor_reference(string: Sequence) -> tuple:
    out, acc = [], 0
    for a in string:
        out.append(str(acc))
        acc ^= int(a)
    return tuple(out)



_PAREN_OPEN = {"(": ")", "[": "]"}


def parenthesis_grammar() -> PCFG:
    """Hao et al. (2018) §4.3: S → S T | T S | T; T → ( T ) | ( ) | [ T ] | [ ]. Its language is
    the non-empty concatenations of chains o1 … ok ck … c1 (each ci closing oi), a strict subset of
    the non-empty Dyck-2 words that `parenthesis_prediction_machine` accepts.
    Rule probabilities are not given in the paper; ours are uniform per nonterminal."""
    third, quarter = Fraction(1, 3), Fraction(1, 4)
    return PCFG(("S", "T"), "()[]", {
        ("S", ("S", "T")): third, ("S", ("T", "S")): third, ("S", ("T",)): third,
        ("T", ("(", "T", ")")): quarter, ("T", ("(", ")")): quarter,
        ("T", ("[", "T", "]")): quarter, ("T", ("[", "]")): quarter}, "S", name="parenthesis")


def parenthesis_prediction_machine():
    """Hao et al. (2018) §4.3 (Fig. 4 right): after each symbol, predict the next symbol where it
    is a closing bracket — the partner of the open bracket on top of the stack — and emit nothing
    when the stack is empty. Real-time DPDT: each stack symbol records its bracket and the bracket
    below it (``$`` for none), so that after a pop the machine knows the new top. Domain: every
    non-empty well-nested string over ( ) [ ] (the non-empty Dyck-2 words). That is a strict
    superset of the language of `parenthesis_grammar` — the paper's sampling grammar, whose T has a
    single child, so that its strings are concatenations of chains such as ``([()])()``: ``(()())``
    is in the domain but not in the grammar's language. The predictions are defined on the whole
    domain."""
    opens = tuple(_PAREN_OPEN)
    below = opens + ("$",)
    stack = tuple(o + b for o in opens for b in below)
    t: dict = {}
    for o in opens:
        for q in ("start", "out"):
            t[(q, o, BOTTOM)] = ("in", _PAREN_OPEN[o], (o + "$", BOTTOM))
        for s in stack:
            t[("in", o, s)] = ("in", _PAREN_OPEN[o], (o + s[0], s))
        for b in below:
            if b == "$":
                t[("in", _PAREN_OPEN[o], o + b)] = ("out", EPSILON, ())
            else:
                t[("in", _PAREN_OPEN[o], o + b)] = ("in", _PAREN_OPEN[b], ())
    return DPDT(("start", "in", "out"), "()[]", ")]", stack, t, "start", accepting=("out",),
                name="parenthesis_prediction")


def parenthesis_sampler(n: int, lengths, rng=None) -> list:
    """Strings of `parenthesis_grammar` of exact lengths."""
    return grammar_sampler(parenthesis_grammar(), n, lengths, rng)


def parenthesis_prediction_reference(string: Sequence):
    stack: list = []
    out = []
    closes = {v: k for k, v in _PAREN_OPEN.items()}
    for x in string:
        if x in _PAREN_OPEN:
            stack.append(x)
        elif x in closes:
            if not stack or stack[-1] != closes[x]:
                return None
            stack.pop()
        else:
            return None
        out.append(_PAREN_OPEN[stack[-1]] if stack else None)
    if stack or not out:
        return None
    return tuple(out)



_BOOL_OPS = {"∨": lambda a, b: a or b, "∧": lambda a, b: a and b}


def boolean_grammar() -> PCFG:
    """Hao et al. (2018) §4.4: S → S S ∨ | S S ∧ | T | F (reverse Polish notation).
    Rule probabilities are not given in the paper; ours are uniform."""
    q = Fraction(1, 4)
    return PCFG(("S",), ("T", "F", "∨", "∧"), {
        ("S", ("S", "S", "∨")): q, ("S", ("S", "S", "∧")): q, ("S", ("T",)): q,
        ("S", ("F",)): q}, "S", name="boolean_formula")


def boolean_formula_machine():
    """Hao et al. (2018) §4.4: after each symbol, the truth value of the longest sub-formula
    ending there. Real-time DPDT: the finite control holds the top value of the evaluation stack
    (states T/F, or T0/F0 when nothing is below it) and the stack holds the values below it; an
    operator combines the state's value with the popped one. Accepting: T0, F0 (one formula)."""
    vals = ("T", "F")
    stack = vals + tuple(primed(v) for v in vals)
    t: dict = {}
    for x in vals:
        t[("start", x, BOTTOM)] = (x + "0", x, (BOTTOM,))
        for v in vals:
            t[(v + "0", x, BOTTOM)] = (x, x, (primed(v), BOTTOM))
            for s in stack:
                t[(v, x, s)] = (x, x, (v, s))
    for op, f in _BOOL_OPS.items():
        for v in vals:
            for s in vals:
                r = "T" if f(s == "T", v == "T") else "F"
                t[(v, op, s)] = (r, r, ())
                t[(v, op, primed(s))] = (r + "0", r, ())
    return DPDT(("start", "T0", "F0", "T", "F"), ("T", "F", "∨", "∧"), vals, stack, t, "start",
                accepting=("T0", "F0"), name="boolean_formula")


def boolean_formula_sampler(n: int, lengths, rng=None) -> list:
    """Formulas of `boolean_grammar` of exact lengths."""
    return grammar_sampler(boolean_grammar(), n, lengths, rng)


def boolean_formula_reference(string: Sequence):
    """Recursive evaluation of the sub-formula ending at each position (None if s is not one
    formula)."""
    s = tuple(string)

    def ending_at(t: int):  # -> (value, start) or None
        if t < 0:
            return None
        x = s[t]
        if x in ("T", "F"):
            return (x == "T", t)
        if x not in _BOOL_OPS:
            return None
        right = ending_at(t - 1)
        if right is None:
            return None
        left = ending_at(right[1] - 1)
        if left is None:
            return None
        return (_BOOL_OPS[x](left[0], right[0]), left[1])

    if not s:
        return None
    whole = ending_at(len(s) - 1)
    if whole is None or whole[1] != 0:
        return None
    out = []
    for t in range(len(s)):
        r = ending_at(t)
        if r is None:
            return None
        out.append("T" if r[0] else "F")
    return tuple(out)




def agreement_grammar(p_base: Any = Fraction(3, 5), p_pp: Any = Fraction(1, 5)) -> PCFG:
    """Hao et al. (2018) §4.5, the subject–auxiliary agreement grammar, read as

        S → NP_sing has | NP_plur have          NP → NP_sing | NP_plur
        NP_sing → the lobster | NP_sing PP | NP_sing Rel_sing      (likewise NP_plur, lobsters)
        PP → in NP        Rel_sing → that has VP | Rel_obj     Rel_plur → that have VP | Rel_obj
        Rel_obj → that NP_sing has devoured | that NP_plur have devoured
        VP → slept | devoured NP

    (the text of the paper available to us drops a symbol in the NP rules; "NP_sing (PP |
    Rel_sing)" is read as left recursion). Words are symbols. Probabilities are not given in the
    paper: NP_x → the lobster(s) with `p_base`, → NP_x PP with `p_pp`, the rest to NP_x Rel_x;
    every other choice is uniform."""
    p_base, p_pp = Fraction(p_base), Fraction(p_pp)
    p_rel = 1 - p_base - p_pp
    h = Fraction(1, 2)
    rules: dict = {
        ("S", ("NP_sing", "has")): h, ("S", ("NP_plur", "have")): h,
        ("NP", ("NP_sing",)): h, ("NP", ("NP_plur",)): h,
        ("PP", ("in", "NP")): 1,
        ("Rel_sing", ("that", "has", "VP")): h, ("Rel_sing", ("Rel_obj",)): h,
        ("Rel_plur", ("that", "have", "VP")): h, ("Rel_plur", ("Rel_obj",)): h,
        ("Rel_obj", ("that", "NP_sing", "has", "devoured")): h,
        ("Rel_obj", ("that", "NP_plur", "have", "devoured")): h,
        ("VP", ("slept",)): h, ("VP", ("devoured", "NP")): h,
    }
    for num, noun in (("sing", "lobster"), ("plur", "lobsters")):
        np_ = f"NP_{num}"
        rules[(np_, ("the", noun))] = p_base
        rules[(np_, (np_, "PP"))] = p_pp
        rules[(np_, (np_, f"Rel_{num}"))] = p_rel
    return PCFG(("S", "NP", "NP_sing", "NP_plur", "PP", "Rel_sing", "Rel_plur", "Rel_obj", "VP"),
                AGREEMENT_WORDS, rules, "S", name="agreement")


AGREEMENT_WORDS = ("the", "lobster", "lobsters", "in", "that", "has", "have", "devoured", "slept")


def agreement_right_recursive() -> CFG:
    """The same language as `agreement_grammar` without left recursion (NP_x → the lobster(s) M_x,
    M_x → PP M_x | Rel_x M_x | ε), so that its PDA has finite ε-closures."""
    return CFG.parse("""
        S -> NP_sing has | NP_plur have
        NP -> NP_sing | NP_plur
        NP_sing -> the lobster M_sing
        NP_plur -> the lobsters M_plur
        M_sing -> PP M_sing | Rel_sing M_sing | ε
        M_plur -> PP M_plur | Rel_plur M_plur | ε
        PP -> in NP
        Rel_sing -> that has VP | Rel_obj
        Rel_plur -> that have VP | Rel_obj
        Rel_obj -> that NP_sing has devoured | that NP_plur have devoured
        VP -> slept | devoured NP
    """, name="agreement")


def agreement_machine():
    """Hao et al. (2018) §4.5: a recogniser of the agreement language — the PDA of an equivalent
    grammar without left recursion (`agreement_right_recursive`). Nondeterministic: it guesses
    where each modifier attaches."""
    return agreement_right_recursive().to_pda(name="agreement")


def agreement_reference(string: Sequence) -> bool:
    """Membership in the paper's (left-recursive) grammar, by the chart parser."""
    s = tuple(string)
    if any(w not in AGREEMENT_WORDS for w in s):
        return False
    return _agreement_cfg().generates(s)


@functools.lru_cache(maxsize=1)
def _agreement_cfg() -> CFG:
    return agreement_grammar().cfg()


def agreement_sampler(n: int, lengths, rng=None, **probabilities) -> list:
    """Sentences of `agreement_grammar` (``probabilities`` go to it) of exact lengths."""
    return grammar_sampler(agreement_grammar(**probabilities), n, lengths, rng)


_NUMBER = {"lobster": "sing", "lobsters": "plur"}
_AUX = {"has": "sing", "have": "plur"}
_AUX_OF = {"sing": "has", "plur": "have"}
#: the output symbols of `agreement_predictor`: the set of auxiliaries that may come next
AGREEMENT_SETS = ("{}", "{has}", "{have}", "{has,have}")


def _aux_set(numbers: Collection) -> str:
    return "{" + ",".join(_AUX_OF[n] for n in ("sing", "plur") if n in numbers) + "}"


def _run(kind: str, bottom: str, number: str, first: bool) -> str:
    """Stack symbol of a run of equal-number NPs: frame kind S (the sentence) or O (an object
    relative), the frame's bottom number, the run's number; a frame's first run has no colon."""
    return f"{kind}{bottom[0]}" if first else f"{kind}{bottom[0]}:{number[0]}"


def agreement_predictor(name: str = "agreement_predictor") -> DPDT:
    """Hao et al. (2018) §4.5, Experiment 4 as a transduction: after each word of a sentence
    prefix, the set of auxiliaries that may come next under `agreement_grammar` — one of the
    output symbols ``{}``, ``{has}``, ``{have}``, ``{has,have}`` (`AGREEMENT_SETS`); it blocks
    on a prefix of no sentence. The step that reads the last word of a sentence emits ``{}`` and
    ends in the accepting state ``end``. A DPDT with ε-moves (pops only); it emits exactly one
    symbol per word.

    **Derivation.** Call the NPs whose right edge is the current position the *chain* NP_1 ⊃ … ⊃
    NP_k (NP_{i+1} ends NP_i's last PP ``in NP`` or subject relative ``that aux devoured NP``).
    The chain is cut into *frames*: a frame starts at the subject of S or of an object relative
    ``that NP_y aux_y devoured`` and holds the NPs below it up to the next such subject. A
    modifier (``in``, ``that``) attaches to an NP of the innermost frame; an auxiliary after a
    complete NP closes the frame and agrees with the frame's first NP; after ``that`` a subject
    relative's auxiliary agrees with the NP the relative attaches to. Attaching every modifier to
    the innermost NP keeps the longest chain, whose continuations include those of every other
    attachment, so the union over parses (the set predicted) is read from that one chain. Only
    the numbers matter, so a frame is a stack of *runs* of equal-number NPs — the runs
    alternate, so a frame is its first number b and its number of runs r: after ``that`` the
    set is {aux(b)} when r = 1 and {has, have} when r ≥ 2; ``that has`` / ``that have`` pops
    one run when the top run has the other number (block when r = 1); a new NP of the other
    number pushes a run; the frame-closing auxiliary must agree with b. Each stack symbol is a
    run carrying (frame kind S/O, b, its number, first run or not); an object relative's
    auxiliary pops its whole frame by ε-moves (state ``close``). The paper calls its grammar
    unambiguous, but a relative clause after a PP or a VP object can attach to several NPs:
    48 of the 1303 non-empty prefixes of ≤ 11 words (4 of the 187 of ≤ 8) admit both
    auxiliaries (e.g. "the lobster in the lobsters that"); all of them end in ``that``.

    **Not real-time.** No real-time DPDT — one step per word, a bounded number of pops per step,
    as the Hao et al. controllers (`pdanet.models.hao`) compile — computes these sets, so the
    ε-moves are needed (compile target ``"buffered_stack_rnn"``). Sketch: let
    x_m = ``the lobster (in the lobsters in the lobster)^m`` (a frame of 2m + 1 runs), then
    ``that the lobster (in the lobsters in the lobster)^n`` (an inner frame of 2n + 1 runs,
    which later queries ``that have slept`` / ``that has slept`` force the machine to count, so
    its stack height above the lowest cell touched after x_m grows without bound in n), then
    ``has devoured`` and q_m = ``(that have slept that has slept)^m that``, whose last output is
    {has} for this m and {has, have} for any larger one. The 6m + 3 steps after the inner
    frame read only the top O(m) cells, which for large n lie above that lowest cell and are
    fixed by the finite (state, top symbol, phase in the period) at the last visit there; two
    m ≠ m' sharing it (pigeonhole) cross into a prefix on which the machine answers for m where
    m' is right. Verified against `agreement_next_auxiliaries` on every prefix of ≤ 11 words."""
    ss = ("sing", "plur")
    info = {}  # stack symbol -> (kind, bottom, number, first)
    for k in "SO":
        for b in ss:
            info[_run(k, b, b, True)] = (k, b, b, True)
            for n in ss:
                info[_run(k, b, n, False)] = (k, b, n, False)
    stack = tuple(info)
    t: dict = {}
    t[("start", "the", BOTTOM)] = ("det_S", "{}", (BOTTOM,))
    for noun, n in _NUMBER.items():
        # the subject of S, and of an object relative (a new frame's first run)
        t[("det_S", noun, BOTTOM)] = ("np", _aux_set((n,)), (_run("S", n, n, True), BOTTOM))
        for x in stack:
            t[("det_O", noun, x)] = ("np", _aux_set((n,)), (_run("O", n, n, True), x))
            # an NP extending the chain (in a PP or a VP object): a new run or the same run
            k, b, top, _ = info[x]
            push = (x,) if n == top else (_run(k, b, n, False), x)
            t[("det_C", noun, x)] = ("np", _aux_set((b,)), push)
    for x, (k, b, top, first) in info.items():
        t[("np", "in", x)] = ("pp", "{}", (x,))
        t[("pp", "the", x)] = ("det_C", "{}", (x,))
        t[("np", "that", x)] = ("that", _aux_set((b,) if first else ss), (x,))
        t[("that", "the", x)] = ("det_O", "{}", (x,))
        for aux, n in _AUX.items():
            # a subject relative attaches to the innermost NP of number n: pop a run if needed
            if n == top:
                t[("that", aux, x)] = ("subj", "{}", (x,))
            elif not first:
                t[("that", aux, x)] = ("subj", "{}", ())
        t[("subj", "slept", x)] = ("np", _aux_set((b,)), (x,))
        t[("subj", "devoured", x)] = ("vobj", "{}", (x,))
        t[("vobj", "the", x)] = ("det_C", "{}", (x,))
        # the frame-closing auxiliary agrees with the frame's first NP
        t[("np", _AUX_OF[b], x)] = ("end" if k == "S" else "close", "{}", (x,))
        if k == "O":  # pop the object relative's frame, its first run last
            t[("close", EPSILON, x)] = ("obj" if first else "close", EPSILON, ())
        t[("obj", "devoured", x)] = ("np", _aux_set((b,)), (x,))
    states = ("start", "det_S", "det_O", "det_C", "np", "pp", "that", "subj", "vobj", "close",
              "obj", "end")
    return DPDT(states, AGREEMENT_WORDS, AGREEMENT_SETS, stack, t, "start", accepting=("end",),
                name=name)


def agreement_prefix_grammar() -> CFG:
    """The prefixes of the sentences of `agreement_grammar` (ε included): for every nonterminal
    A a nonterminal ``A~`` with ``A~ → ε`` and ``A~ → X1 … X(i−1) Xi~`` for each rule A → X1 … Xn
    and each i (``a~`` is the terminal a itself)."""
    return _agreement_prefix_cfg()


@functools.lru_cache(maxsize=1)
def _agreement_prefix_cfg() -> CFG:
    g = _agreement_cfg()
    pre = {a: f"{a}~" for a in g.nonterminals}
    rules = [(r.lhs, r.body) for r in g.rules] + [(pre[a], ()) for a in g.nonterminals]
    for r in g.rules:
        for i, x in enumerate(r.body):
            rules.append((pre[r.lhs], r.body[:i] + (pre.get(x, x),)))
    return CFG(tuple(g.nonterminals) + tuple(pre.values()), AGREEMENT_WORDS,
               list(dict.fromkeys(rules)), pre[g.start], name="agreement_prefixes")


def agreement_next_auxiliaries(prefix: Sequence) -> frozenset | None:
    """The auxiliaries (``has``, ``have``) w such that prefix·w is a prefix of a sentence of
    `agreement_grammar`, by the chart parser on `agreement_prefix_grammar`; None when `prefix`
    itself is a prefix of no sentence. A brute-force oracle: O(n³) per call."""
    p = tuple(prefix)
    bad = [w for w in p if w not in AGREEMENT_WORDS]
    if bad:
        raise InputError(f"{bad[0]!r} is not a word of the agreement task; words: "
                         f"{', '.join(AGREEMENT_WORDS)}")
    g = _agreement_prefix_cfg()
    if not g.generates(p):
        return None
    return frozenset(a for a in _AUX if g.generates(p + (a,)))


def agreement_predictor_reference(string: Sequence) -> tuple | None:
    """The per-word outputs of `agreement_predictor` from the oracle
    (`agreement_next_auxiliaries` of every non-empty prefix, as `AGREEMENT_SETS` symbols); None
    when `string` is a prefix of no sentence."""
    s = tuple(string)
    out = []
    for t in range(1, len(s) + 1):
        nxt = agreement_next_auxiliaries(s[:t])
        if nxt is None:
            return None
        out.append(_aux_set({_AUX[a] for a in nxt}))
    return tuple(out)


__all__ = [
    "AGREEMENT_SETS",
    "AGREEMENT_WORDS",
    "agreement_grammar",
    "agreement_machine",
    "agreement_next_auxiliaries",
    "agreement_predictor",
    "agreement_predictor_reference",
    "agreement_prefix_grammar",
    "agreement_reference",
    "agreement_right_recursive",
    "agreement_sampler",
    "boolean_formula_machine",
    "boolean_formula_reference",
    "boolean_formula_sampler",
    "boolean_grammar",
    "cumulative_xor_machine",
    "cumulative_xor_reference",
    "delayed_output",
    "delayed_xor_machine",
    "delayed_xor_reference",
    "parenthesis_grammar",
    "parenthesis_prediction_machine",
    "parenthesis_prediction_reference",
    "parenthesis_sampler",
    "reversal_eps_machine",
    "reversal_eps_reference",
    "reversal_eps_sampler",
    "reversal_machine",
    "reversal_reference",
    "reversal_sampler",
    "reversal_task_machine",
    "reversal_task_reference",
    "reversal_task_sampler",
]

"""The tasks as their papers define them, against independent oracles: DuSell & Chiang's hardest
CFL (a brute-force generator written from the definition, the authors' grammar through a chart
parser and through its length table), their grammars' probabilities, and exact string
probabilities (inside weights) for the cross-entropy lower bound."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata import tasks as T
from pdanet.automata.grammar import CFG, PCFG
from pdanet.automata.tasks import dusell2021 as D
from pdanet.automata.tasks.probability import (
    WeightedCFG,
    cross_entropy_lower_bound,
    inside,
    log_probability_given_length,
)
from pdanet.errors import AutomatonError, InputError

FILL = "()[]$"


# --- a brute-force generator of the hardest CFL, from its definition ------------------------------
def _dyck_words(maxlen: int) -> set[str]:
    """Every non-empty Dyck-2 word over ( ) [ ] of length ≤ maxlen."""
    out: set[str] = set()

    def rec(prefix: str, closers: str) -> None:
        if not closers and prefix:
            out.add(prefix)
        if len(prefix) + len(closers) + 2 <= maxlen:
            rec(prefix + "(", closers + ")")
            rec(prefix + "[", closers + "]")
        if closers:
            rec(prefix + closers[-1], closers[:-1])

    rec("", "")
    return out


def _decoys(maxlen: int, is_x: bool) -> dict[int, list[str]]:
    """x (or z) parts by length: strings over ( ) [ ] $ , with no two adjacent commas, x not
    ending and z not starting with a comma."""
    out: dict[int, list[str]] = {}
    for k in range(maxlen + 1):
        out[k] = []
        for t in itertools.product(FILL + ",", repeat=k):
            s = "".join(t)
            if ",," in s or (is_x and s.endswith(",")) or (not is_x and s.startswith(",")):
                continue
            out[k].append(s)
    return out


def hardest_members(N: int) -> set[str]:
    """All strings x1 , y1 , z1 ; … xn , yn , zn ; of length ≤ N whose non-empty y's concatenate to
    $ followed by a non-empty Dyck-2 word."""
    X, Z = _decoys(max(N - 6, 0), True), _decoys(max(N - 6, 0), False)
    res: set[str] = set()
    for d in _dyck_words(N - 4):
        Y = "$" + d
        m = len(Y)
        for cuts in range(m):
            for pos in itertools.combinations(range(1, m), cuts):
                pieces = [Y[a:b] for a, b in zip((0,) + pos, pos + (m,))]
                base = sum(len(p) + 3 for p in pieces)
                if base > N:
                    continue

                def rec(i: int, acc: str, budget: int, pieces: list = pieces) -> None:
                    if i == len(pieces):
                        res.add(acc)
                        return
                    for a in range(budget + 1):
                        for b in range(budget - a + 1):
                            for x in X[a]:
                                for z in Z[b]:
                                    rec(i + 1, acc + x + "," + pieces[i] + "," + z + ";",
                                        budget - a - b, pieces)

                rec(0, "", N - base)
    return res


MEMBERS8 = hardest_members(8)
MEMBERS9 = hardest_members(9)


def _plain(g) -> CFG:
    return CFG(g.nonterminals, g.terminals, [(r.lhs, r.body) for r in g.rules], g.start)


def test_shortest_string_and_alphabet():
    assert T.HARDEST_ALPHABET == tuple("()[],;$")
    ref = T.reference("hardest_cfl")
    assert ref(tuple(",$(),;")) and not ref(()) and not ref(tuple(",(),;"))
    assert min(map(len, MEMBERS9)) == 6 and ",$(),;" in MEMBERS9
    m = T.get("hardest_cfl")
    assert m.accepts(",$(),;") and not m.accepts(",$(,;")
    # the variant without $ is one keyword away
    assert T.reference("hardest_cfl", dollar=False)(())
    assert T.grammar("hardest_cfl", dollar=False).generates(",(),;")


def test_reference_equals_generator_on_every_string_up_to_8():
    ref = T.reference("hardest_cfl")
    found = set()
    for n in range(8):  # strings of length ≤ 8 that end in ";" (no other string is a member)
        for t in itertools.product(T.HARDEST_ALPHABET, repeat=n):
            if ref(t + (";",)):
                found.add("".join(t) + ";")
            assert not ref(t) or t[-1:] == (";",)
    assert found == MEMBERS8


def test_reference_accepts_every_generated_string_of_length_9():
    ref = T.reference("hardest_cfl")
    assert all(ref(tuple(s)) for s in MEMBERS9)


def test_authors_grammar_generates_exactly_the_generated_strings_up_to_8():
    """Σ over the generated strings of each length of their inside weights equals the total
    weight of that length in the grammar's length table: the grammar has no other strings."""
    g = T.grammar("hardest_cfl")
    table = g.length_table(8, weighted=True)
    for n in range(9):
        mem = [s for s in MEMBERS8 if len(s) == n]
        ws = [inside(g, s) for s in mem]
        assert all(w > 0 for w in ws)
        total = table.total(n)
        if not mem:
            assert total == -math.inf
        else:
            assert math.isclose(sum(ws), math.exp(total), rel_tol=1e-9), n


def test_paper_probabilities():
    g = T.grammar("hardest_cfl")
    assert isinstance(g, WeightedCFG)
    assert g.weight("L'", (",", "V", "L'")) == Fraction(1, 3)      # 0.5 commas
    assert g.weight("U", ("W", "U")) == Fraction(1, 3)             # short filler 0.5
    assert g.weight("V", ("W", "V")) == Fraction(1, 2)             # long filler 2
    assert g.weight("Q", ("L", ";", "R")) == Fraction(1, 4)
    assert g.weight("S", ("S", "Q", "T")) == Fraction(3, 5)        # 1.5 splits
    assert g.weight("T", ("(", "Q", "S", "Q", ")")) == Fraction(3, 8)  # depth 3
    assert g.weight("W", ("$",)) == 1
    # ",$(),;": R = U , R' with U, R' empty; Q = ε; S = T = ( Q ); L = L' , U with L', U empty
    c, u, q, s, t = Fraction(1, 3), Fraction(1, 3), Fraction(1, 4), Fraction(3, 5), Fraction(3, 4)
    p = (1 - u) * (1 - c) * (1 - q) * (1 - s) * ((1 - t) / 2) * (1 - q) * (1 - c) * (1 - u)
    assert math.isclose(inside(g, ",$(),;"), float(p), rel_tol=1e-12)
    mr = T.grammar("marked_reversal")
    assert mr.probability("S", ("#",)) == Fraction(1, 61)
    assert mr.probability("S", ("0", "S", "0")) == Fraction(30, 61)
    assert T.grammar("marked_reversal", p_end=Fraction(1, 10)).probability("S", "#") == \
        Fraction(1, 10)
    assert T.grammar("unmarked_reversal").probability("S", ()) == Fraction(1, 61)
    pr = T.grammar("padded_reversal")
    assert pr.probability("S", ("P",)) == Fraction(1, 61)
    assert pr.probability(("pad", "0"), ("0", ("pad", "0"))) == Fraction(30, 31)
    dy = D.dusell_dyck_grammar()
    assert dy.probability("S", ("S", "T")) == Fraction(1, 2)
    assert dy.probability("T", ("(", "S", ")")) == Fraction(39, 80)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(MEMBERS9)), st.lists(st.tuples(st.integers(0, 9),
                                                              st.sampled_from(T.HARDEST_ALPHABET),
                                                              st.integers(0, 2)), max_size=2))
def test_grammar_chart_parser_machine_and_reference_agree_near_members(s, edits):
    """Members of length ≤ 9 with random substitutions, insertions and deletions (mostly
    non-members, up to length 11): the reference, the authors' grammar (chart parser), the
    inside weight and the grammar's PDA agree."""
    w = list(s)
    for i, a, op in edits:
        i = min(i, len(w))
        if op == 0 and i < len(w):
            w[i] = a
        elif op == 1:
            w.insert(i, a)
        elif w:
            del w[min(i, len(w) - 1)]
    w = tuple(w)
    g = T.grammar("hardest_cfl")
    expected = _plain(g).generates(w)
    assert T.reference("hardest_cfl")(w) == expected
    assert (inside(g, w) > 0) == expected
    assert T.get("hardest_cfl").accepts(w) == expected


def test_realtime_machine_counts_the_choices_of_y():
    m = T.get("hardest_cfl", realtime=True)
    assert m.is_realtime and m.alphabet.symbols == T.HARDEST_ALPHABET
    ref = T.reference("hardest_cfl")
    cases = [",$(),;", ",$(,),;", ",$(,;,),;", "(,$[],);", ",$(,;", ",(),;", "$,$(),;",
             ",$(),,;", ",,$(),;"]
    for s in cases:
        assert m.accepts(s) == ref(tuple(s)), s
    assert m.string_sum(",$(),;") == 1.0
    assert m.string_sum(",$,(),;") == 0.0          # y = "$" then "(),": z may not start with ","
    assert m.string_sum(",$(),(),;") == 1.0        # y = "$()" (then z = "(),")
    assert m.string_sum(",$(),$(),;") == 2.0       # either "$()" is y: two choices
    assert T.get("hardest_cfl", realtime=True, dollar=False).name == "hardest_cfl_realtime"


def test_sampler_draws_members_of_the_requested_lengths():
    ref = T.reference("hardest_cfl")
    rng = np.random.default_rng(0)
    for s in T.sample("hardest_cfl", 30, range(6, 25), rng):
        assert ref(s) and 6 <= len(s) <= 24
    with pytest.raises(InputError, match="no string of length"):
        T.sample("hardest_cfl", 3, 5, rng)


# --- inside weights and the cross-entropy lower bound ---------------------------------------------
@pytest.mark.parametrize("name,alphabet,n", [("marked_reversal", "01#", 7),
                                             ("unmarked_reversal", "01", 8),
                                             ("padded_reversal", "01", 8), ("dyck2", "()[]", 6)])
def test_inside_sums_to_the_length_table(name, alphabet, n):
    g = D.dusell_dyck_grammar() if name == "dyck2" else T.grammar(name)
    table = g.length_table(n, weighted=True)
    ref = (lambda s: T.reference("dyck2")(s)) if name == "dyck2" else T.reference(name)
    for L in range(n + 1):
        tot = 0.0
        for s in itertools.product(alphabet, repeat=L):
            p = inside(g, s)
            assert (p > 0) == bool(ref(s)) or (name == "dyck2" and L == 0), s
            tot += p
        t = table.total(L)
        assert (tot == 0 and t == -math.inf) or math.isclose(tot, math.exp(t), rel_tol=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from("01"), max_size=6),
       st.sampled_from([Fraction(1, 61), Fraction(1, 10), Fraction(1, 2)]))
def test_marked_reversal_probability_is_the_product_of_its_rules(w, p_end):
    g = T.grammar("marked_reversal", p_end=p_end)
    s = tuple(w) + ("#",) + tuple(reversed(w))
    assert math.isclose(inside(g, s), float(((1 - p_end) / 2) ** len(w) * p_end), rel_tol=1e-12)
    # given its length, every such string is equally likely
    assert math.isclose(log_probability_given_length(g, s), -len(w) * math.log(2),
                        abs_tol=1e-9)


def test_cross_entropy_lower_bound_by_hand():
    g = T.grammar("unmarked_reversal")
    strings = [tuple("0110"), tuple("11"), tuple("00")]
    # p(w) = (1/2 lengths) · 2^(-|w|/2)
    nll = sum(math.log(2) + len(s) / 2 * math.log(2) for s in strings)
    expected = nll / sum(len(s) + 1 for s in strings)
    assert math.isclose(cross_entropy_lower_bound(g, strings, 2), expected, rel_tol=1e-12)
    hard = T.grammar("hardest_cfl")
    xs = T.sample("hardest_cfl", 4, range(8, 12), 1)
    assert cross_entropy_lower_bound(hard, xs, 4) > 0


def test_inside_handles_unary_and_epsilon_cycles():
    g = PCFG(("S", "A"), "a", {("S", ("A",)): Fraction(1, 2), ("S", ("a",)): Fraction(1, 2),
                               ("A", ("S",)): Fraction(1, 2), ("A", ()): Fraction(1, 2)}, "S")
    # S = 1/2 A + 1/2 a, A = 1/2 S + 1/2 ε: p(a) = 1/2 / (1 - 1/4) = 2/3, p(ε) = 1/4 / (3/4)
    assert math.isclose(inside(g, "a"), 2 / 3) and math.isclose(inside(g, ""), 1 / 3)
    assert inside(g, "aa") == 0.0


def test_bad_inputs():
    g = T.grammar("hardest_cfl")
    with pytest.raises(InputError, match="not a terminal"):
        inside(g, "x")
    with pytest.raises(InputError, match="grammar"):
        inside("S -> a", "a")
    with pytest.raises(InputError, match="num_lengths"):
        cross_entropy_lower_bound(g, [",$(),;"], 0)
    with pytest.raises(InputError, match="probability 0"):
        cross_entropy_lower_bound(g, [",(),;"], 1)
    with pytest.raises(InputError, match="dollar"):
        T.get("hardest_cfl", dollar="yes")
    with pytest.raises(InputError, match="mean_nesting_depth"):
        T.grammar("hardest_cfl", mean_nesting_depth=1)
    with pytest.raises(InputError, match="p_more"):
        T.grammar("hardest_cfl", p_more=Fraction(1, 2))
    with pytest.raises(InputError, match="p_end"):
        T.grammar("marked_reversal", p_end=2)
    with pytest.raises(InputError, match="mean_length"):
        T.grammar("unmarked_reversal", mean_length=-1)
    with pytest.raises(InputError, match="bracket pairs"):
        D.dusell_dyck_grammar(0)
    with pytest.raises(AutomatonError, match="weight"):
        WeightedCFG(("S",), "a", {("S", ("a",)): 0}, "S")
    cyc = WeightedCFG(("S",), "a", {("S", ("S",)): 1, ("S", ("a",)): 1}, "S")
    with pytest.raises(InputError, match="infinite"):
        inside(cyc, "a")


# --- Suzgun et al. (2019): Dyck words from the paper's PCFG --------------------------------------
def test_dyck_nonempty_grammar_equals_the_papers_pcfg():
    from pdanet.automata.tasks.suzgun2019 import dyck_grammar, dyck_nonempty_grammar

    for p, q, top in ((Fraction(1, 2), Fraction(1, 4), 6), (Fraction(1, 3), Fraction(1, 3), 4)):
        paper, ours = dyck_grammar(2, p, q), dyck_nonempty_grammar(2, p, q)
        for L in range(1, top + 1):
            for s in itertools.product("()[]", repeat=L):
                assert math.isclose(inside(paper, s), inside(ours, s), rel_tol=1e-9,
                                    abs_tol=1e-300), s


def test_dyck_grammar_sampler_follows_the_papers_pcfg():
    from pdanet.automata.tasks.suzgun2019 import dyck_grammar

    paper = dyck_grammar(2)
    words = [s for s in itertools.product("()[]", repeat=6) if T.reference("dyck2")(s)]
    ps = np.array([inside(paper, s) for s in words])
    ps /= ps.sum()
    draws = 6000
    got = T.sample("dyck2", draws, 6, np.random.default_rng(5), grammar=True)
    counts = np.array([sum(1 for g in got if g == w) for w in words])
    assert counts.sum() == draws
    chi2 = float((((counts - draws * ps) ** 2) / (draws * ps)).sum())
    assert chi2 < len(words) + 6 * math.sqrt(2 * len(words)), chi2     # ~ 6 sd above the mean
    assert len(set(ps.round(12))) > 1      # not uniform: the test can tell the samplers apart
    assert T.sample("dyck2", 2, 0, 0, grammar=True) == [(), ()]
    with pytest.raises(InputError, match="grammar"):
        T.sample("dyck2", 2, 4, 0, grammar="yes")
    with pytest.raises(InputError, match="p \\+ q"):
        T.sample("dyck2", 2, 4, 0, grammar=True, p=Fraction(3, 4), q=Fraction(1, 4))


# --- Hao et al. (2018): the domain of parenthesis prediction -------------------------------------
def _dyck2(s) -> bool:
    stack: list = []
    for x in s:
        if x in "([":
            stack.append(x)
        elif not stack or stack.pop() != {")": "(", "]": "["}[x]:
            return False
    return not stack


def _chains(s) -> bool:
    """Non-empty concatenation of o1 … ok ck … c1 blocks."""
    s = "".join(s)
    if not s:
        return False
    i = 0
    while i < len(s):
        k = 0
        while i + k < len(s) and s[i + k] in "([":
            k += 1
        if k == 0 or i + 2 * k > len(s):
            return False
        opens, closes = s[i:i + k], s[i + k:i + 2 * k]
        if closes != "".join({"(": ")", "[": "]"}[o] for o in reversed(opens)):
            return False
        i += 2 * k
    return True


def test_parenthesis_prediction_domain_is_every_nonempty_dyck2_word():
    m = T.get("parenthesis_prediction")
    g = T.grammar("parenthesis_prediction")
    outside_grammar = 0
    for L in range(9):
        for s in itertools.product("()[]", repeat=L):
            in_domain = L > 0 and _dyck2(s)
            assert (T.apply(m, s) is not None) == in_domain, s
            assert (T.reference("parenthesis_prediction")(s) is not None) == in_domain, s
            if L <= 6:
                assert g.generates(s) == _chains(s), s
            outside_grammar += in_domain and not _chains(s)
    assert outside_grammar == 104       # e.g. "(()())": in the domain, not in the grammar
    assert T.apply(m, tuple("(()())")) == (")", ")", ")", ")", ")", None)


# --- Hao et al. (2018): evaluation masks ---------------------------------------------------------
def test_hao_masks_score_a_constant_blank_predictor_zero_on_reversal():
    pytest.importorskip("torch")
    from pdanet.learning import metrics
    from pdanet.learning.data import dataset

    d = dataset("reversal", 20, [2, 4, 6], seed=0)
    ids = np.stack([np.asarray(d[i][0]) for i in range(len(d))])
    tgt = np.stack([np.asarray(d[i][1]) for i in range(len(d))])
    out = T.get("reversal").output_alphabet.symbols
    blank = out.index("#")
    logits = np.zeros(tgt.shape + (len(out) + 1,))
    logits[..., blank] = 1.0                              # always predicts "#"
    plain = metrics.per_symbol_accuracy(logits, tgt, "symbol")
    mask = metrics.after_symbol_mask(ids, T.get("reversal").alphabet.symbols.index("#"))
    assert plain > 0.3
    assert metrics.masked_accuracy(logits, tgt, "symbol", mask) == 0.0
    # the masked positions are exactly the reversed half: targets there are symbols, not "#"
    assert mask.sum() == sum(int((np.asarray(d[i][0]) >= 0).sum()) // 2 for i in range(len(d)))
    perfect = np.zeros_like(logits)
    np.put_along_axis(perfect, np.maximum(tgt, 0)[..., None], 1.0, axis=-1)
    assert metrics.masked_accuracy(perfect, tgt, "symbol", mask) == 1.0


def test_before_symbol_mask_and_bad_inputs():
    from pdanet.learning import metrics

    ids = np.array([[0, 0, 2, 3, -1], [1, 3, 0, 2, 2]])      # ( ( ) ] pad / [ ] ( ) )
    m = metrics.before_symbol_mask(ids, [2, 3])
    assert m.tolist() == [[False, False, True, True, False, False],
                          [False, True, False, True, True, False]]
    a = metrics.after_symbol_mask(ids, 0)
    assert a.tolist() == [[False, True, True, False, False, False],
                          [False, False, False, True, False, False]]
    with pytest.raises(InputError, match="shape"):
        metrics.after_symbol_mask(np.zeros(3, int), 0)
    with pytest.raises(InputError, match="mask"):
        metrics.masked_accuracy(np.zeros((1, 2, 3)), np.zeros((1, 2), int), "symbol",
                                np.zeros((1, 3), bool))
    with pytest.raises(InputError, match="no position"):
        metrics.masked_accuracy(np.zeros((1, 2, 3)), np.zeros((1, 2), int), "symbol",
                                np.zeros((1, 2), bool))


# --- Suzgun et al. (2019): the k-hot next-symbol sets of §4.1 and Table 1 ------------------------
END = "⊣"


def _dyck_language(k: int, maxlen: int) -> set[tuple]:
    """Every word of the paper's D_k grammar S → (_i S )_i | S S | ε of length ≤ maxlen (words as
    tuples), by length: a word of length n > 0 is (_i w )_i with |w| = n − 2, or u v with u, v
    non-empty and shorter."""
    opens, closes = "([{"[:k], ")]}"[:k]
    by_len: list[set] = [{()}]
    for n in range(1, maxlen + 1):
        words = {(o, *w, c) for w in (by_len[n - 2] if n >= 2 else ())
                 for o, c in zip(opens, closes)}
        words |= {u + v for a in range(1, n) for u in by_len[a] for v in by_len[n - a]}
        by_len.append(words)
    return set().union(*by_len)


def _oracle_sets(prefix: tuple, members: set, prefixes: set, alphabet) -> frozenset:
    """The set of symbols x with prefix·x a prefix of some member, and ⊣ when prefix is one."""
    out = {x for x in alphabet if prefix + (x,) in prefixes}
    return frozenset(out | ({END} if prefix in members else set()))


def _prefix_closure(members: set) -> set:
    return {w[:i] for w in members for i in range(len(w) + 1)}


def _check_next_set_data(name, members_small, members_big, **params):
    """`label(name, members_small, "next_set")` against the oracle built from `members_big`."""
    from pdanet.learning.data import label

    prefixes = _prefix_closure(members_big)
    strings = sorted(members_small, key=lambda w: (len(w), w))
    d = label(name, strings, "next_set", **params)
    cols = list(d.output_alphabet)
    assert cols[-1] == END and d.kind == "next_set" and d.num_outputs == len(cols)
    tg = d.targets.numpy()
    for b, w in enumerate(strings):
        for t in range(len(w) + 1):
            got = frozenset(c for c, v in zip(cols, tg[b, t]) if v == 1.0)
            assert got == _oracle_sets(w[:t], members_big, prefixes, cols[:-1]), (w, t)
        assert (tg[b, len(w) + 1:] == -1).all()
    return len(strings)


def test_next_sets_match_table_1_of_suzgun():
    pytest.importorskip("torch")
    from pdanet.learning.data import label

    d = label("dyck2", ["([])"], "next_set", end_marker=False)
    cols = list(d.output_alphabet)
    rows = [frozenset(c for c, v in zip(cols, r) if v == 1.0) for r in d.targets[0].tolist()]
    assert rows[1:] == [frozenset("([)"), frozenset("([]"), frozenset("([)"), frozenset("([")]
    d = label("w_phi_wr", ["abc#zyx"], "next_set")
    cols = list(d.output_alphabet)
    rows = [frozenset(c for c, v in zip(cols, r) if v == 1.0) for r in d.targets[0].tolist()]
    assert rows[1:] == [frozenset("abc#")] * 3 + [frozenset(x) for x in "zyx"] + [frozenset([END])]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_dyck_next_sets_against_the_papers_grammar_up_to_length_8(k):
    pytest.importorskip("torch")
    big = _dyck_language(k, 10)          # every completion of a prefix of a word ≤ 8 fits in 10
    small = {w for w in big if len(w) <= 8}
    assert _check_next_set_data(f"dyck{k}", small, big) == len(small)
    # every string up to length 4: a prefix of the language gets the oracle's sets, any other
    # string a typed error
    prefixes = _prefix_closure(big)
    alphabet = "([{"[:k] + ")]}"[:k]
    for L in range(5):
        for s in itertools.product(alphabet, repeat=L):
            if s in prefixes:
                got = T.task(f"dyck{k}").next_sets(s)
                assert got == tuple(_oracle_sets(s[:t], big, prefixes, alphabet)
                                    for t in range(L + 1)), s
            else:
                with pytest.raises(InputError, match="not a prefix"):
                    T.task(f"dyck{k}").next_sets(s)


@pytest.mark.parametrize("name,phi", [("w_phi_wr", dict(zip("abc", "xyz"))),
                                      ("w_wr_marked", dict(zip("abc", "abc")))])
def test_palindrome_next_sets_against_the_papers_definition(name, phi):
    pytest.importorskip("torch")
    # §6.1/§6.2: w # φ(w^R), w ∈ {a, b, c}*; the sets of members ≤ 9 need members ≤ 11
    big = {w + ("#",) + tuple(phi[x] for x in reversed(w))
           for n in range(6) for w in itertools.product("abc", repeat=n)}
    small = {w for w in big if len(w) <= 9}
    assert _check_next_set_data(name, small, big) == 1 + 3 + 9 + 27 + 81
    prefixes = _prefix_closure(big)
    alphabet = sorted(set("abc#") | set(phi.values()))
    for L in range(5):
        for s in itertools.product(alphabet, repeat=L):
            if s in prefixes:
                assert T.task(name).next_sets(s) == tuple(
                    _oracle_sets(s[:t], big, prefixes, alphabet) for t in range(L + 1)), s
            else:
                with pytest.raises(InputError, match="not a prefix"):
                    T.task(name).next_sets(s)


def test_next_set_dataset_sampled_and_bad_inputs():
    pytest.importorskip("torch")
    from pdanet.learning.data import dataset, label

    d = dataset("dyck2", 30, [2, 4, 6], seed=3, target="next_set", grammar=True)
    assert d.targets.shape[-1] == 5 and d.kind == "next_set"
    d2 = dataset("dyck2", 30, [2, 4, 6], seed=3, target="next_set", end_marker=False)
    assert d2.targets.shape[-1] == 4 and END not in d2.output_alphabet
    assert dataset("dyck2", 4, 4, seed=0, grammar=True).kind == "accept"   # sampler-only param
    with pytest.raises(InputError, match="next-symbol sets"):
        dataset("parity", 3, 4, target="next_set")
    with pytest.raises(InputError, match="not a prefix"):
        label("dyck2", ["(]"], "next_set")
    with pytest.raises(InputError, match="end_marker"):
        label("dyck2", ["()"], "next_set", end_marker="yes")
    with pytest.raises(InputError, match="target must be"):
        label("dyck2", ["()"], "sets")
    with pytest.raises(InputError, match="no strings"):
        label("dyck2", [], "next_set")


def _accuracy_oracle(z, tgt, include_start):
    """Suzgun's accuracy, one sequence and one position at a time."""
    ok = 0
    for b in range(tgt.shape[0]):
        good = True
        for t in range(tgt.shape[1]):
            if (t == 0 and not include_start) or (tgt[b, t] < 0).all():
                continue
            pred = [1.0 / (1.0 + math.exp(-v)) > 0.5 for v in z[b, t]]
            good &= pred == [v > 0.5 for v in tgt[b, t]]
        ok += good
    return ok / tgt.shape[0]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.booleans())
def test_next_set_accuracy_against_a_loop(seed, include_start):
    pytest.importorskip("torch")
    from pdanet.learning import metrics
    from pdanet.learning.data import dataset

    rng = np.random.default_rng(seed)
    d = dataset("dyck2", 6, [2, 4, 6], seed=seed, target="next_set")
    tgt = d.targets.numpy()
    z = np.where(tgt > 0.5, 2.0, -2.0) + 0.0
    flips = rng.random(tgt.shape) < 0.03
    z = np.where(flips, -z, z)
    got = metrics.next_set_accuracy(z, tgt, include_start=include_start)
    assert got == pytest.approx(_accuracy_oracle(z, tgt, include_start))
    probs = 1 / (1 + np.exp(-z))
    assert metrics.next_set_accuracy(probs, tgt, probabilities=True,
                                     include_start=include_start) == pytest.approx(got)
    assert metrics.next_set_accuracy(np.where(tgt > 0.5, 1.0, -1.0), tgt) == 1.0
    with pytest.raises(InputError, match="threshold"):
        metrics.next_set_accuracy(z, tgt, threshold=1.0)
    with pytest.raises(InputError, match="must both be"):
        metrics.next_set_accuracy(z[..., :2], tgt)


# --- Hao et al. (2018) §4.5: language modelling scored at the auxiliaries -----------------------
_AGREEMENT_TEXT = {   # the grammar of §4.5, NP_x → the lobster(s) | NP_x (PP | Rel_x)
    "S": [("NP_sing", "has"), ("NP_plur", "have")],
    "NP": [("NP_sing",), ("NP_plur",)],
    "NP_sing": [("the", "lobster"), ("NP_sing", "PP"), ("NP_sing", "Rel_sing")],
    "NP_plur": [("the", "lobsters"), ("NP_plur", "PP"), ("NP_plur", "Rel_plur")],
    "PP": [("in", "NP")],
    "Rel_sing": [("that", "has", "VP"), ("Rel_obj",)],
    "Rel_plur": [("that", "have", "VP"), ("Rel_obj",)],
    "Rel_obj": [("that", "NP_sing", "has", "devoured"), ("that", "NP_plur", "have", "devoured")],
    "VP": [("slept",), ("devoured", "NP")],
}


def _agreement_sentences(maxlen: int) -> set[tuple]:
    """Every sentence of the §4.5 grammar with at most maxlen words (a fixed point of yields)."""
    yields: dict = {x: set() for x in _AGREEMENT_TEXT}
    changed = True
    while changed:
        changed = False
        for lhs, bodies in _AGREEMENT_TEXT.items():
            for body in bodies:
                parts: set = {()}
                for sym in body:
                    opts = yields.get(sym, {(sym,)})
                    parts = {p + o for p in parts for o in opts if len(p) + len(o) <= maxlen}
                new = parts - yields[lhs]
                if new:
                    yields[lhs] |= new
                    changed = True
    return yields["S"]


def test_agreement_next_word_targets_and_the_papers_mask():
    pytest.importorskip("torch")
    from pdanet.learning import metrics
    from pdanet.learning.data import dataset, label

    sentences = sorted(_agreement_sentences(11), key=lambda w: (len(w), w))
    assert ("the", "lobster", "has") in sentences and len(sentences) > 100
    assert all(T.reference("agreement")(s) for s in sentences)
    d = label("agreement", sentences, "next_symbol")
    alpha = list(d.output_alphabet)
    assert alpha[-1] == END and d.kind == "symbol" and d.num_outputs == len(alpha)
    tg, mask = d.targets.numpy(), d.eval_mask.numpy()
    follows: dict = {}                                # prefix -> the auxiliaries that follow it
    for b, s in enumerate(sentences):
        assert [alpha[i] for i in tg[b, :len(s) + 1]] == list(s) + [END]
        assert (tg[b, len(s) + 1:] == -1).all()
        scored = [t for t in range(len(s)) if s[t] in ("has", "have")]
        assert np.nonzero(mask[b])[0].tolist() == scored
        for t in scored:
            follows.setdefault(s[:t], set()).add(s[t])
    # the verb's number is a function of the prefix, except where a relative clause may attach
    # to either noun ("the lobster in the lobsters that" → has or have): the paper calls the
    # grammar unambiguous, but that attachment is not
    both = sorted(p for p, v in follows.items() if len(v) > 1)
    assert len(both) == 4 and all(p[-1] == "that" for p in both)
    assert ("the", "lobster", "in", "the", "lobsters", "that") in both
    # a model that prefers the right auxiliary scores 1, the wrong one 0 (Linzen et al.'s test)
    aux = [alpha.index("has"), alpha.index("have")]
    right = np.zeros(tg.shape + (len(alpha),))
    np.put_along_axis(right, np.maximum(tg, 0)[..., None], 1.0, axis=-1)
    assert metrics.choice_accuracy(right, tg, mask, aux) == 1.0
    assert metrics.masked_accuracy(right, tg, "symbol", mask) == 1.0
    wrong = right.copy()
    wrong[..., aux] = right[..., aux[::-1]]
    assert metrics.choice_accuracy(wrong, tg, mask, aux) == 0.0
    sampled = dataset("agreement", 20, [3, 6, 9], seed=1, target="next_symbol")
    assert sampled.eval_mask.shape == sampled.targets.shape and sampled.eval_mask.any()
    assert sampled.subset([0, 1]).eval_mask.shape[0] == 2
    with pytest.raises(InputError, match="not among the choices"):
        metrics.choice_accuracy(right, tg, mask | (tg == alpha.index("the")), aux)
    with pytest.raises(InputError, match="at least two"):
        metrics.choice_accuracy(right, tg, mask, [aux[0]])
    with pytest.raises(InputError, match="no position"):
        metrics.choice_accuracy(right, tg, np.zeros_like(mask), aux)


def test_next_symbol_targets_on_any_task():
    pytest.importorskip("torch")
    from pdanet.learning.data import dataset

    d = dataset("marked_reversal", 10, [3, 5, 7], seed=2, target="next_symbol")
    assert d.eval_mask is None and d.kind == "symbol"
    for (ids, tg), s in zip(d, d.strings()):
        n = len(s)
        assert tg[:n].tolist() == ids[:n].tolist() and tg[n] == d.num_outputs - 1

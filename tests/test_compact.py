"""The compact construction for depth-bounded real-time DPDAs/DPDTs (`pdanet.constructions.compact`):
Elman and LSTM networks agree with the bounded machine (verify, on task machines and on random
machines), their exact pre-activations have margin ½, the unit formula is the unit count, and bad
input is refused with typed errors."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pdanet as pn
from pdanet import limits
from pdanet.automata.alphabet import BOTTOM, EPSILON
from pdanet.automata.pda import DPDA, PDA
from pdanet.automata.pdt import DPDT
from pdanet.constructions import compact, realtime
from pdanet.constructions.abstraction import CompactSlots, RecurrentUnits
from pdanet.errors import CompileError, InputError, ResourceError, UnboundedStackError

CHECK = {"max_length": 6, "samples": 40, "sample_lengths": (7, 16), "long_samples": 2,
         "long_length": 60}
SMALL = {"max_length": 5, "samples": 20, "sample_lengths": (6, 14), "long_samples": 1,
         "long_length": 30}


def dyck_recogniser(k: int = 2) -> DPDA:
    """Dyck-k (final-state acceptance): push the bracket type on an open, pop it on its close."""
    opens, closes = "([{<"[:k], ")]}>"[:k]
    t: dict = {}
    for i, o in enumerate(opens):
        X = "ABCD"[i]
        t[(0, o, BOTTOM)] = (1, (X, BOTTOM))
        for Y in "ABCD"[:k]:
            t[(1, o, Y)] = (1, (X, Y))
        t[(1, closes[i], X)] = (1, ())
    for i, c in enumerate(closes):   # back at the bottom: state 0 (accepting)
        t[(1, c, "ABCD"[i])] = (1, ())
    return DPDA((0, 1), opens + closes, "ABCD"[:k], t, 0, accepting={0}, name=f"dyck{k}")


def dyck_empty_stack() -> DPDA:
    """Dyck-1 with empty-stack acceptance, noop moves on a separator '.' at any depth."""
    t = {(0, "(", BOTTOM): (0, ("A", BOTTOM)), (0, "(", "A"): (0, ("A", "A")),
         (0, ")", "A"): (0, ()), (0, ".", BOTTOM): (0, (BOTTOM,)), (0, ".", "A"): (0, ("A",))}
    return DPDA([0], "().", "A", t, 0, acceptance="empty_stack", name="dyck1_empty")


def tasks() -> list:
    out = [pn.tasks.get("marked_reversal"), pn.tasks.get("w_phi_wr"), dyck_recogniser(2),
           dyck_empty_stack()]
    bf = pn.tasks.get("boolean_formula")
    if bf.is_realtime and getattr(bf, "output_kind", "symbol") == "symbol":
        out.append(bf)
    return out


TASKS = tasks()


@pytest.mark.parametrize("machine", TASKS, ids=[m.name for m in TASKS])
@pytest.mark.parametrize("m", [2, 4, 8])
def test_tasks_verify(machine, m):
    bounded = machine.bounded(m)
    for target in ("elman", "lstm"):
        net = pn.compile(bounded, target=target, method="compact")
        assert isinstance(net.abstraction, CompactSlots)
        assert net.hidden_units == net.bound_value
        report = pn.verify(bounded, net, **(CHECK if m < 8 else SMALL))
        assert report.ok, report.counterexample
        assert {"state", "stack", "output"} <= set(report.fields)


def test_default_method_is_compact():
    b = pn.tasks.get("marked_reversal").bounded(3)
    assert pn.compile(b, target="elman").method == "compact"
    assert pn.compile(b, target="lstm").method == "compact"


def test_fewer_units_than_minsky_and_floor():
    b = pn.tasks.get("marked_reversal").bounded(8)
    net = pn.compile(b, target="elman", method="compact")
    minsky = pn.compile(b, target="elman", method="minsky")
    assert net.hidden_units < minsky.hidden_units
    assert pn.verify(b, minsky, **SMALL).ok
    info = net.info
    assert info["floor_exact"] == (b.num_configs - 1).bit_length()
    assert info["floor_exact"] <= info["floor_upper"] <= net.hidden_units


def test_floor_without_enumeration_at_large_depth():
    b = pn.tasks.get("marked_reversal").bounded(300)
    info = compact.floor_info(b, realtime.table(b.machine))
    assert "floor_exact" not in info and info["floor_upper"] > 300


# --- random machines ------------------------------------------------------------------------------

OPS = ("noop", "push", "pop", "replace")


def random_machine(seed: int, n: int, G: int, k: int, kind: str, uniform: float = 0.0,
                   missing: float = 1 / 12, gamma: str = "XYZW"):
    """A random real-time DPDA (kind "final_state" / "empty_stack") or DPDT ("dpdt") with n
    states, G stack symbols and k input symbols (⊥ is only kept or pushed on); a move is missing
    with probability ``missing``. With probability ``uniform`` a (state, symbol) makes one move
    (operation, next state, written symbol) whatever symbol of Γ is on top — what gives lookup
    units for any written code."""
    rng = np.random.default_rng(seed)
    sigma, gamma, outs = "abc"[:k], gamma[:G], "uv"
    t: dict = {}
    for q in range(n):
        for a in sigma:
            same = rng.random() < uniform
            one = (OPS[rng.integers(4)], int(rng.integers(n)), gamma[rng.integers(G)])
            for x in (BOTTOM, *gamma):
                if rng.random() < missing and not (same and x is not BOTTOM):
                    continue
                op = OPS[rng.integers(2)] if x is BOTTOM else OPS[rng.integers(4)]
                q2, y = int(rng.integers(n)), gamma[rng.integers(G)]
                if same and x is not BOTTOM:
                    op, q2, y = one
                pushed = {"noop": (x,), "push": (y, x), "pop": (), "replace": (y,)}[op]
                if kind == "dpdt":
                    t[(q, a, x)] = (q2, (EPSILON, *outs)[rng.integers(3)], pushed)
                else:
                    t[(q, a, x)] = (q2, pushed)
    if kind == "dpdt":
        return DPDT(range(n), sigma, outs, gamma, t, 0, name=f"random_dpdt_{seed}")
    acc = {q for q in range(n) if rng.random() < 0.5} if kind == "final_state" else ()
    return DPDA(range(n), sigma, gamma, t, 0, accepting=acc, acceptance=kind,
                name=f"random_dpda_{seed}")


machines = st.builds(random_machine, st.integers(0, 2**32 - 1), st.integers(1, 5),
                     st.integers(1, 4), st.integers(1, 3),
                     st.sampled_from(("final_state", "empty_stack", "dpdt")))


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines, st.integers(1, 6))
def test_random_machines_verify(machine, m):
    bounded = machine.bounded(m)
    for target in ("elman", "lstm"):
        net = pn.compile(bounded, target=target, method="compact")
        p = net.params
        assert net.hidden_units == p["L"] + 1 + p["C"] * p["m"] * p["d"] == net.bound_value
        assert net.module.hidden_size == net.hidden_units
        report = pn.verify(bounded, net, max_length=5, samples=15, sample_lengths=(6, 12),
                           long_samples=1, long_length=25)
        assert report.ok, report.counterexample


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines, st.integers(1, 3))
def test_random_machines_minsky_baseline(machine, m):
    """The Minsky baseline (through `to_dfa`) decodes the same fields and agrees too."""
    bounded = machine.bounded(m)
    for target in ("elman", "lstm"):
        net = pn.compile(bounded, target=target, method="minsky")
        assert net.machine is bounded
        report = pn.verify(bounded, net, max_length=4, samples=10, sample_lengths=(5, 10),
                           long_samples=1, long_length=20)
        assert report.ok, report.counterexample
        assert "stack" in report.fields


@pytest.mark.parametrize("target", ["elman", "lstm"])
def test_deep_stack_long_strings(target):
    """Depth 64 reached and emptied again, and one push too many (dead from there on)."""
    mr = pn.tasks.get("marked_reversal")
    b = mr.bounded(64)
    net = pn.compile(b, target=target)
    rng = np.random.default_rng(0)
    strings = []
    for n in (63, 64, 65):
        w = "".join(rng.choice(["0", "1"], n))
        strings += [w + "#" + w[::-1], w + "#" + w[::-1][:-1] + ("1" if w[0] == "0" else "0")]
    report = pn.verify(b, net, strings=strings, max_length=None, samples=0, long_samples=0)
    assert report.ok, report.counterexample
    assert report.steps_checked >= sum(len(s) for s in strings[:4])   # live steps
    outs = net.run(strings[2])["output"]
    assert bool(outs[-1]) and not pn.compile(b, target=target).run(strings[4])["output"][-1]


# --- exact arithmetic ---------------------------------------------------------------------------


def _exact_check(machine, m: int, strings: list[str]) -> int:
    """On the thresholded states the network reaches on `strings`: the exact u-space
    pre-activations of every step are integers + ½ whose signs give the next thresholded state,
    and the Elman weights compute exactly β·z/2 from h = 2u − 1. Returns the steps checked."""
    b = machine.bounded(m)
    net = pn.compile(b, target="elman", method="compact", dtype="float64")
    view = realtime.table(machine)
    cases = compact.lookup_cases(view, m, view.empty_stack, tuple(view.accepting))
    prog = compact.build_program(cases, view, m, view.empty_stack, isinstance(machine, DPDT))
    w = net.weights
    Whh = w["rnn.weight_hh_l0"].rationals()
    Wih = w["rnn.weight_ih_l0"].rationals()
    bias = w["rnn.bias_ih_l0"].rationals() + w["rnn.bias_hh_l0"].rationals()
    E = w["embedding.weight"].rationals()
    half = Fraction(1, 2)
    steps = 0
    for s in strings:
        ids, _ = net.encode([s])
        states, _ = net.forward(ids)
        u = (states[0].numpy() > 0).astype(np.int64)
        for t, a in enumerate(ids[0].tolist()):
            z = prog.step(u[t], a)
            assert all(abs(v) >= half and (v - half).denominator == 1 for v in z)
            assert np.array_equal(np.array([v > 0 for v in z]), u[t + 1].astype(bool))
            h = 2 * u[t] - 1
            pre = Whh.dot(h) + Wih.dot(E[a]) + bias          # tanh pre-activation / β
            assert all(p == v / 2 for p, v in zip(pre, z))
            steps += 1
    return steps


def test_exact_lstm_gates():
    """LSTM: on h = (2u − 1)/ρ (the ideal u exactly), the g rows give β·z/2 with z the Elman
    program's pre-activations; i and o are +β, f is −β."""
    mr = pn.tasks.get("marked_reversal")
    b = mr.bounded(3)
    net = pn.compile(b, target="lstm", method="compact")
    view = realtime.table(mr)
    cases = compact.lookup_cases(view, 3, False, tuple(view.accepting))
    prog = compact.build_program(cases, view, 3, False, False)
    H, rho = net.hidden_units, net.abstraction.rho
    w = net.weights
    Whh = w["rnn.weight_hh_l0"].rationals()
    Wih = w["rnn.weight_ih_l0"].rationals()
    bias = w["rnn.bias_ih_l0"].rationals() + w["rnn.bias_hh_l0"].rationals()
    E = w["embedding.weight"].rationals()
    ids, _ = net.encode(["011#110"])
    states, _ = net.forward(ids)
    u = (states[0].numpy() > 0).astype(np.int64)
    for t, a in enumerate(ids[0].tolist()):
        h = np.array([Fraction(int(2 * v - 1)) / rho for v in u[t]], dtype=object)
        pre = Whh.dot(h) + Wih.dot(E[a]) + bias
        z = prog.step(u[t], a)
        assert all(p == v / 2 for p, v in zip(pre[2 * H:3 * H], z))
        assert all(p == 1 for p in pre[:H]) and all(p == -1 for p in pre[H:2 * H])
        assert all(p == 1 for p in pre[3 * H:])


def test_exact_preactivations():
    mr = pn.tasks.get("marked_reversal")
    assert _exact_check(mr, 3, ["", "01#10", "001#100", "10#01", "011#", "#"]) > 10
    assert _exact_check(dyck_empty_stack(), 2, ["(.()).", "((.", "())"]) > 5


# --- certification ------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["elman", "lstm"])
def test_certify_marked_reversal(target):
    b = pn.tasks.get("marked_reversal").bounded(3)
    net = pn.compile(b, target=target, method="compact")
    assert isinstance(net.abstraction, RecurrentUnits)
    cert = pn.certify(b, net)
    assert cert.ok, cert


# --- bad input ------------------------------------------------------------------------------------


def test_epsilon_moves_refused():
    t = {(0, "a", BOTTOM): (0, ("A", BOTTOM)), (0, "a", "A"): (0, ("A", "A")),
         (0, "b", "A"): (1, ()), (1, "b", "A"): (1, ()), (1, EPSILON, BOTTOM): (2, (BOTTOM,))}
    m = DPDA(range(3), "ab", "A", t, 0, accepting={2}, name="anbn_eps")
    with pytest.raises(CompileError, match="ε"):
        pn.compile(m.bounded(3), target="elman", method="compact")
    with pytest.raises(CompileError, match="ε"):
        pn.compile(m.bounded(3), target="lstm")


def test_multi_symbol_push_refused():
    t = {(0, "a", BOTTOM): (0, ("A", "A", BOTTOM)), (0, "b", "A"): (0, ())}
    m = DPDA([0], "ab", "A", t, 0, accepting={0})
    with pytest.raises(CompileError, match="noop/push/pop/replace"):
        pn.compile(m.bounded(3), target="elman", method="compact")


def test_nondeterministic_refused():
    t = {("p", "a", BOTTOM): {("p", ("A", BOTTOM)), ("q", (BOTTOM,))}}
    pda = PDA(("p", "q"), "a", "A", t, "p", accepting={"q"})
    with pytest.raises(CompileError, match="nondeterministic"):
        pda.bounded(3)


def test_unbounded_refused():
    for target in ("elman", "lstm"):
        with pytest.raises(UnboundedStackError, match=r"\.bounded\(m\)"):
            pn.compile(pn.tasks.get("marked_reversal"), target=target)


def test_not_bounded_machine_refused():
    with pytest.raises(InputError, match="bounded"):
        compact.compile_compact(pn.tasks.get("marked_reversal"))
    with pytest.raises(InputError, match="target"):
        compact.compile_compact(pn.tasks.get("marked_reversal").bounded(2), target="gru")


def test_too_large_refused_before_allocating():
    b = pn.tasks.get("marked_reversal").bounded(100_000)
    with limits.raised(max_bytes=2**30), pytest.raises(ResourceError, match="units"):
        pn.compile(b, target="lstm", method="compact")
    with limits.raised(max_units=100), pytest.raises(ResourceError, match="hidden units"):
        pn.compile(pn.tasks.get("marked_reversal").bounded(50), target="elman")


def test_labels_and_abstraction_fields():
    b = dyck_empty_stack().bounded(2)
    net = pn.compile(b, target="elman", method="compact")
    a = net.abstraction
    assert len(a.labels) == net.hidden_units and a.labels[0] == "start"
    assert a.units.shape == (len(a.copies), 2, a.slot_width)
    assert set(a.copies) == {"push", "pop", "keep"}
    assert a.acceptance == "empty_stack"
    assert all(c.empty_after is not None for c in a.cases)
    assert a.codes.shape == (2, 1) and a.codes[-1].sum() == 0


# --- lookup size: O(|Q|·|Σ|), not |Σ|·|Γ| ------------------------------------------------------


def _lookup_sources(net) -> dict:
    """Lookup unit → the lookup units its gate sums (read off the exact recurrent weights)."""
    a = net.abstraction
    A = net.weights["rnn.weight_hh_l0"].numer
    lookup = set(a.lookup.tolist())
    return {int(u): {int(v) for v in np.nonzero(A[u])[0] if int(v) in lookup}
            for u in a.lookup}


def _large_alphabet_strings(bounded, rng, n: int, length: int, gen) -> list:
    """Strings of the machine's language from ``gen(rng)``, each also with one symbol changed."""
    syms = list(bounded.machine.alphabet.symbols)
    out = []
    for _ in range(n):
        w = list(gen(rng))
        out.append(tuple(w))
        if w:
            v = list(w)
            v[int(rng.integers(len(v)))] = syms[int(rng.integers(len(syms)))]
            out.append(tuple(v))
    return [s for s in out if len(s) <= length]


@pytest.mark.parametrize("which", ["dyck64", "marked_reversal128"])
def test_large_alphabet_lookup_is_linear(which):
    """Dyck-64 (|Σ| = |Γ| = 128) and marked reversal over 128 symbols (|Σ| = 129, |Γ| = 256) at
    m = 4: 512 and 770 lookup units (≤ 2·|Q|·|Σ|; one unit per written code would give 8,640
    and 33,665), and `pn.verify` agrees (every prefix to length 2, sampled live strings, and
    strings of the language up to and beyond depth 4 with one-symbol mutations)."""
    from pdanet.automata.tasks import dusell2021, suzgun2019
    rng = np.random.default_rng(1)
    if which == "dyck64":
        machine = suzgun2019.dyck_machine(64)
        opens, closes = suzgun2019.brackets(64)

        def gen(r):
            w, st = [], []
            for _ in range(int(r.integers(0, 14))):
                if st and r.random() < 0.5:
                    w.append(closes[st.pop()])
                else:
                    st.append(int(r.integers(64)))
                    w.append(opens[st[-1]])
            return w + [closes[i] for i in reversed(st)]
        expected = 512
    else:
        syms = tuple(f"s{i}" for i in range(128))
        machine = dusell2021.marked_reversal_machine(syms)
        marker = next(x for x in machine.alphabet.symbols if x not in syms)

        def gen(r):
            w = [syms[i] for i in r.integers(0, 128, int(r.integers(0, 6)))]
            return w + [marker] + w[::-1]
        expected = 770
    view = realtime.table(machine)
    b = machine.bounded(4)
    strings = _large_alphabet_strings(b, rng, 60, 20, gen)
    for target in ("elman", "lstm"):
        net = pn.compile(b, target=target, method="compact")
        assert net.params["L"] == expected <= 2 * view.Q * view.K
        assert net.hidden_units == net.bound_value
        report = pn.verify(b, net, strings=strings, max_length=2, samples=60,
                           sample_lengths=(3, 24), long_samples=2, long_length=60)
        assert report.ok, report.counterexample
    cases = net.abstraction.cases
    anyc = [c for c in cases if c.source in ("push", "replace") and c.source_symbol == -1]
    percode = [c for c in cases if c.source in ("push", "replace") and c.source_symbol >= 0]
    assert anyc and len(percode) == (128 if which == "dyck64" else 0)   # a close: per code


def _merged_semantics(machine, m: int) -> int:
    """Every "any written code" unit: its gate sums exactly the lookup units entering its state
    by its source, its ``top`` lists the codes those units write, and the machine's move on its
    input is the same after each of them (brute force over the table). The other push/replace
    units have a gate of the units writing their own code. Returns the number of merged units."""
    b = machine.bounded(m)
    net = pn.compile(b, target="elman", method="compact")
    a = net.abstraction
    view = realtime.table(machine)
    gates = _lookup_sources(net)
    unit = {i: int(u) for i, u in enumerate(a.lookup)}
    merged = 0
    for i, c in enumerate(a.cases):
        if c.source not in ("push", "replace"):
            continue
        enter = {unit[j] for j, e in enumerate(a.cases) if e.p2 == c.p and e.op == c.source
                 and (c.source_symbol == -1 or e.y == c.source_symbol)}
        assert gates[unit[i]] == enter
        if c.source_symbol == -1:
            merged += 1
            written = {e.y for e in a.cases if e.p2 == c.p and e.op == c.source}
            assert set(c.top) == written and len(written) >= 2
            moves = {view.trans.get((c.p, c.a, x)) for x in written}
            assert len(moves) == 1 and None not in moves
            assert not [e for e in a.cases if (e.p, e.a, e.source) == (c.p, c.a, c.source)
                        and e.source_symbol >= 0]
    return merged


def test_merged_units_brute_force():
    from pdanet.automata.tasks import suzgun2019
    assert _merged_semantics(pn.tasks.get("marked_reversal"), 3) > 0
    assert _merged_semantics(suzgun2019.dyck_machine(3), 4) > 0
    assert _merged_semantics(dyck_empty_stack(), 3) >= 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines, st.integers(1, 5))
def test_random_machines_merged_units(machine, m):
    _merged_semantics(machine, m)


# --- large networks: weights written in place --------------------------------------------------


@pytest.mark.parametrize("target", ["elman", "lstm"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_large_network_floats_are_the_exact_weights(target, dtype):
    """Above 2048 units the module is filled in place; every parameter is still exactly
    ``ExactWeight.to_float`` of its block (the values `load_exact` would set)."""
    import torch

    bounded = pn.tasks.get("marked_reversal").bounded(700)
    net = compact.compile_compact(bounded, target, getattr(torch, dtype))
    assert net.hidden_units > 2048
    state = net.module.state_dict()
    assert set(state) == set(net.weights)
    for name, w in net.weights.items():
        want = w.to_float(net.scale, getattr(torch, dtype))
        assert state[name].dtype == want.dtype
        assert torch.equal(state[name], want.reshape(state[name].shape)), name
    assert all(p.requires_grad for p in net.module.parameters())


def test_large_network_overflow_is_refused():
    import torch

    bounded = pn.tasks.get("marked_reversal").bounded(700)
    with pytest.raises(InputError, match="overflows float16"):
        compact.compile_compact(bounded, "elman", torch.float16, scale=10**6)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["int8", "int16", "int64"]), st.integers(1, 5), st.integers(1, 70),
       st.integers(-3000, 3000), st.integers(1, 9), st.booleans(),
       st.sampled_from(["float16", "bfloat16", "float32", "float64"]), st.integers(0, 2**31))
def test_fill_equals_to_float(idt, rows, cols, span, denom, scaled, dtype, seed):
    """`compact._fill` writes `ExactWeight.to_float` (fast path or not) or refuses overflow."""
    import sympy as sp
    import torch

    from pdanet.constructions.base import ExactWeight

    rng = np.random.default_rng(seed)
    hi = min(abs(span), np.iinfo(idt).max)
    numer = rng.integers(-hi, hi + 1, size=(rows, cols)).astype(idt)
    w = ExactWeight(numer, denom, scaled)
    beta = sp.Rational(int(rng.integers(1, 10**6)), int(rng.integers(1, 50)))
    tdt = getattr(torch, dtype)
    want = w.to_float(beta, tdt)
    out = torch.empty(rows, cols, dtype=tdt)
    if not bool(torch.isfinite(want).all()):
        with pytest.raises(InputError, match="overflows"):
            compact._fill(out, w, beta, tdt, "block")
        return
    compact._fill(out, w, beta, tdt, "block")
    assert torch.equal(out, want)

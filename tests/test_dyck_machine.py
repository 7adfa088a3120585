"""The Dyck-(k, m) generator: step semantics, batched simulation, sampling, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.automata.bounded import END, DyckKM, dyck
from pdanet.errors import InputError


def test_step_semantics_and_outputs():
    d = dyck(2, 2)
    assert d.output(d.initial()) == frozenset({"(", "[", END})
    c = d.run("([")
    assert c.stack == (0, 1) and not c.dead
    assert d.output(c) == frozenset({"]"})            # depth m: no opens
    assert d.run("([(").dead                           # too deep
    assert d.run("(]").dead                            # mismatched close
    assert d.accepts("([])") and not d.accepts("([]")
    assert d.output(d.run(")")) == frozenset()


@settings(max_examples=60)
@given(k=st.integers(1, 5), m=st.integers(1, 4), seed=st.integers(0, 2**31),
       length=st.integers(0, 12))
def test_run_batch_agrees_with_step(k, m, seed, length):
    d = DyckKM(k, m)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 2 * k, size=(6, length))
    lengths = rng.integers(0, length + 1, size=6)
    tr = d.run_batch(ids, lengths)
    for b in range(6):
        config = d.initial()
        for t in range(length + 1):
            if 0 < t <= lengths[b]:
                config = d.step(config, d.alphabet.symbols[ids[b, t - 1]])
            want_stack = list(config.stack) + [-1] * (m - config.depth)
            if not config.dead:
                assert tr["stack"][b, t].tolist() == want_stack
                assert tr["depth"][b, t] == config.depth
                assert tr["top"][b, t] == (config.stack[-1] if config.stack else -1)
            assert tr["state"][b, t] == (-1 if config.dead else 0)
            got = {d.output_alphabet.symbols[i] for i in np.nonzero(tr["output"][b, t])[0]}
            assert got == set(d.output(config))


@pytest.mark.parametrize("busy", [0.2, 0.9])
def test_sampled_strings_are_legal_prefixes(busy):
    d = dyck(3, 4)
    ids = d.sample(200, 50, rng=1, busy=busy)
    tr = d.run_batch(ids)
    assert (tr["state"] >= 0).all()
    mean_depth = tr["depth"].mean()
    assert (mean_depth > 2.5) if busy == 0.9 else (mean_depth < 1.5)


def test_complete_samples_are_words():
    d = dyck(2, 3)
    ids = d.sample(100, 20, rng=2, complete=True)
    assert all(d.accepts(d.alphabet.decode(r)) for r in ids)


def test_huge_k_is_cheap_and_uses_tokens():
    d = dyck(100_000, 3)
    assert len(d.alphabet) == 200_000 and d.num_configs == 1 + 10**5 + 10**10 + 10**15
    c = d.run("(7 (99999 )99999")
    assert c.stack == (7,)
    tr = d.run_batch(d.sample(4, 10, rng=0), with_output=False)
    assert "output" not in tr.fields and (tr["state"] == 0).all()


@pytest.mark.parametrize("k,m", [(0, 2), (2, 0), (-1, 3), (2.5, 2), (True, 2)])
def test_bad_parameters(k, m):
    with pytest.raises(InputError):
        DyckKM(k, m)


def test_unknown_symbol_named():
    with pytest.raises(InputError, match="'x'"):
        dyck(2, 2).run("(x")


def test_equality_and_hash():
    assert dyck(2, 3) == DyckKM(2, 3) and hash(dyck(2, 3)) == hash(DyckKM(2, 3))
    assert dyck(2, 3) != dyck(3, 2)

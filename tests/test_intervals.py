"""Soundness of the interval arithmetic: enclosures contain the float computation of torch."""

import functools
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pdanet.verify import intervals as iv


def _random_box(rng, shape, spread):
    c = rng.normal(0, spread, size=shape)
    r = np.abs(rng.normal(0, spread / 4, size=shape))
    return iv.Interval(c - r, c + r)


def _sample(box, rng, n):
    u = rng.random((n,) + box.lo.shape)
    return box.lo + u * (box.hi - box.lo)


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), n_in=st.integers(1, 12), n_out=st.integers(1, 6),
       spread=st.sampled_from([0.1, 1.0, 30.0]), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_affine_then_tanh_and_sigmoid_contain_torch(seed, n_in, n_out, spread, dtype):
    rng = np.random.default_rng(seed)
    W = torch.tensor(rng.normal(0, spread, (n_out, n_in)), dtype=dtype)
    b = torch.tensor(rng.normal(0, spread, n_out), dtype=dtype)
    box = _random_box(rng, (n_in,), spread)
    xs = torch.tensor(_sample(box, rng, 200), dtype=dtype)
    # the module's inputs are dtype values: enclose what it can see
    box = iv.Interval(np.minimum(box.lo, xs.double().min(0).values.numpy()),
                      np.maximum(box.hi, xs.double().max(0).values.numpy()))
    z = iv.affine(W.double().numpy(), box, b.double().numpy(), dtype)
    zt = torch.nn.functional.linear(xs, W, b)
    assert z.contains(zt.double().numpy()).all()
    th, sg = iv.tanh(z, dtype), iv.sigmoid(z, dtype)
    assert th.contains(torch.tanh(zt).double().numpy()).all()
    assert sg.contains(torch.sigmoid(zt).double().numpy()).all()


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_mul_add_contain_torch(seed, dtype):
    rng = np.random.default_rng(seed)
    a, b = _random_box(rng, (5,), 3.0), _random_box(rng, (5,), 3.0)
    xa = torch.tensor(_sample(a, rng, 100), dtype=dtype)
    xb = torch.tensor(_sample(b, rng, 100), dtype=dtype)
    a = iv.Interval(np.minimum(a.lo, xa.double().min(0).values.numpy()),
                    np.maximum(a.hi, xa.double().max(0).values.numpy()))
    b = iv.Interval(np.minimum(b.lo, xb.double().min(0).values.numpy()),
                    np.maximum(b.hi, xb.double().max(0).values.numpy()))
    assert iv.mul(a, b, dtype).contains((xa * xb).double().numpy()).all()
    assert iv.add(a, b, dtype).contains((xa + xb).double().numpy()).all()


def test_saturated_sigmoid_keeps_tiny_upper_bound_positive():
    z = iv.Interval.point(np.array([-40.0, -90.0]))
    s = iv.sigmoid(z, torch.float64)
    assert (s.hi > 0).all() and s.contains(torch.sigmoid(torch.tensor([-40.0, -90.0],
                                                                      dtype=torch.float64)).numpy()).all()


def test_interval_can_exclude_wrong_values():
    z = iv.affine(np.eye(2), iv.Interval.around(np.array([1.0, -1.0]), 0.01), None, torch.float32)
    assert not z.contains(np.array([1.5, -1.0])).all()


# --- the LSTM cell update with exact nearest rounding ----------------------------------------------

def _round32(x) -> float:
    """The float32 nearest to the exact rational x (ties to even)."""
    from fractions import Fraction

    x = Fraction(x)
    r = np.float32(float(x))
    cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
    dist = [abs(Fraction(float(c)) - x) for c in cands]
    best = min(dist)
    ties = [c for c, d in zip(cands, dist) if d == best]
    even = [c for c in ties if int(np.array(c, dtype=np.float32).view(np.int32)) % 2 == 0]
    return float((even or ties)[0])


def _box32(rng, shape, lo, hi):
    a, b = rng.uniform(lo, hi, shape), rng.uniform(lo, hi, shape)
    return iv.to_dtype(iv.Interval(np.minimum(a, b), np.maximum(a, b)), torch.float32)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), saturated=st.booleans())
def test_lstm_cell_contains_both_evaluation_orders(seed, saturated):
    """c' = f·c + i·g in float32, as ATen computes it (two products, one sum) and as a fused
    multiply-add computes it (exact f·c, one rounding), lies in `lstm_cell`'s enclosure."""
    from fractions import Fraction

    rng = np.random.default_rng(seed)
    n = 6
    f = (iv.Interval.point(np.ones(n)) if saturated else _box32(rng, n, 0, 1))
    i = _box32(rng, n, 0, 1e-6 if saturated else 1)
    c, g = _box32(rng, n, -2, 2), _box32(rng, n, -1, 1)
    out = iv.lstm_cell(f, c, i, g, torch.float32)
    for _ in range(20):
        pts = [torch.tensor(_sample(b, rng, 1)[0], dtype=torch.float32) for b in (f, c, i, g)]
        pts = [torch.clamp(p, torch.tensor(b.lo, dtype=torch.float32),
                           torch.tensor(b.hi, dtype=torch.float32)) for p, b in zip(pts, (f, c, i, g))]
        fp, cp, ip, gp = pts
        aten = (fp * cp + ip * gp).double().numpy()
        assert out.contains(aten).all()
        p = (ip * gp).double().numpy()
        fused = np.array([_round32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(q)))
                          for a, b, q in zip(fp.double().numpy(), cp.double().numpy(), p)])
        assert out.contains(fused).all()


def test_saturated_cell_box_is_invariant():
    """f = 1 exactly and |i·g| below half an ulp of the box ends: the box maps onto itself —
    outward rounding would grow it every step."""
    c = iv.to_dtype(iv.Interval.around(np.array([1.0, -1.0, 0.0]), 0.01), torch.float32)
    f = iv.Interval.point(np.ones(3))
    i = iv.Interval(np.zeros(3), np.full(3, 1e-10))
    g = iv.Interval(np.full(3, -1.0), np.full(3, 1.0))
    out = iv.lstm_cell(f, c, i, g, torch.float32)
    assert (out.lo == c.lo).all() and (out.hi == c.hi).all()
    grown = iv.add(iv.mul(f, c, torch.float32), iv.mul(i, g, torch.float32), torch.float32)
    assert (grown.hi > c.hi).all()


def test_module_lstm_step_lies_in_the_enclosure():
    """End to end against nn.LSTM itself (oneDNN on CPU): affine → gates → cell → h."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    H, X = 5, 3
    lstm = torch.nn.LSTM(X, H, batch_first=True)
    with torch.no_grad():
        for p in lstm.parameters():
            p.mul_(8)
    W = {k: v.detach().double().numpy() for k, v in lstm.state_dict().items()}
    x = torch.tensor(rng.normal(size=(64, 1, X)), dtype=torch.float32)
    h0 = torch.tensor(rng.uniform(-1, 1, (1, 64, H)), dtype=torch.float32)
    c0 = torch.tensor(rng.uniform(-2, 2, (1, 64, H)), dtype=torch.float32)
    with torch.no_grad():
        out, (_, c1) = lstm(x, (h0, c0))
    f32 = torch.float32
    for model in iv.KERNEL_MODELS:
        inp = iv.Interval.point(np.concatenate([x[:, 0].double().numpy(),
                                                h0[0].double().numpy()], 1))
        Wcat = np.concatenate([W["weight_ih_l0"], W["weight_hh_l0"]], 1)
        z = iv.affine(Wcat, inp, W["bias_ih_l0"] + W["bias_hh_l0"], f32, extra_terms=1)
        zi, zf, zg, zo = (z[:, k * H:(k + 1) * H] for k in range(4))
        cell = iv.lstm_cell(iv.sigmoid(zf, f32, model), iv.Interval.point(c0[0].double().numpy()),
                            iv.sigmoid(zi, f32, model), iv.tanh(zg, f32, model), f32)
        h = iv.mul(iv.sigmoid(zo, f32, model), iv.tanh(cell, f32, model), f32)
        assert cell.contains(c1[0].double().numpy()).all(), model
        assert h.contains(out[:, 0].double().numpy()).all(), model


def test_saturation_thresholds_hold_for_every_kernel():
    sat = iv.saturation(torch.float32)
    # near where correctly rounded kernels reach 1: ln 2^25 ≈ 17.33 and ½ ln 2^26 ≈ 9.01
    assert 16 < sat.sigmoid < 20 and 8.5 < sat.tanh < 10.5 and "every float32" in sat.checked
    z = torch.tensor([sat.sigmoid, sat.sigmoid * 1.5, 1e6], dtype=torch.float32)
    assert (torch.sigmoid(z) == 1).all() and (iv._layer_probe("sigmoid", z) == 1).all()
    t = torch.tensor([sat.tanh, 20.0, 1e30], dtype=torch.float32)
    for k in (torch.tanh, lambda v: iv._layer_probe("tanh", v),
              lambda v: iv._layer_probe("rnn_tanh", v)):
        assert (k(t) == 1).all() and (k(-t) == -1).all()
    # just below the threshold some kernel is not yet exactly 1
    below = torch.tensor([np.nextafter(np.float32(sat.sigmoid), np.float32(0))])
    assert (torch.sigmoid(below) < 1).any() or (iv._layer_probe("sigmoid", below) < 1).any()
    # the saturating model uses them: a gate beyond the threshold is exactly 1
    s = iv.sigmoid(iv.Interval(np.array([sat.sigmoid]), np.array([50.0])), torch.float32,
                   kernel="saturating")
    assert s.lo[0] == 1.0 and s.hi[0] == 1.0


def test_results_flushed_to_zero_are_enclosed():
    """float32 sigmoid(−90) is 8e-40 (subnormal) in exact arithmetic; the kernel returns 0.0."""
    z = np.array([-90.0, -88.0, -100.0])
    got = torch.sigmoid(torch.tensor(z, dtype=torch.float32)).double().numpy()
    for model in iv.KERNEL_MODELS:
        assert iv.sigmoid(iv.Interval.point(z), torch.float32, model).contains(got).all(), model


# --- the exact-saturation scan: chunked, exhaustive, cached --------------------------------------

def _fake_mask(bad: set):
    """A saturation mask that fails exactly at the bit patterns in ``bad``."""
    def mask(z):
        bits = z.view(torch.int32)
        return ~torch.isin(bits, torch.tensor(sorted(bad), dtype=torch.int32))
    return mask


@settings(max_examples=40)
@given(lo=st.integers(0x41000000, 0x41000400), span=st.integers(0, 600),
       bad=st.sets(st.integers(0, 700), max_size=4), chunk=st.integers(1, 97))
def test_scan_in_chunks_finds_the_float_after_the_last_failure(lo, span, bad, chunk):
    hi = lo + span
    bad_bits = {lo + b for b in bad}
    expect = max([b + 1 for b in bad_bits if b <= hi], default=lo)
    expect = max(expect, lo)
    assert iv._scan(_fake_mask(bad_bits), lo, hi, chunk=chunk) == expect
    assert iv._scan(_fake_mask(bad_bits), lo, hi, chunk=span + 1) == expect


def test_chunked_scan_of_the_real_kernels_equals_an_unchunked_one():
    for kind, (a, b) in (("sigmoid", (17.2, 17.45)), ("tanh", (8.95, 9.05))):
        values = iv._wide_probes(kind)
        mask = functools.partial(iv._saturated, kind, values)
        lo, hi = iv._bits(a), iv._bits(b)
        whole = iv._scan(mask, lo, hi, chunk=hi - lo + 1)
        assert iv._scan(mask, lo, hi, chunk=4099) == whole
        assert lo < whole <= hi                                     # the threshold lies inside
        # the same answer from the one-unit probes and the elementwise kernels, float by float
        z = torch.arange(lo, hi + 1, dtype=torch.int32).view(torch.float32)
        kernels = ([torch.sigmoid, lambda v: iv._layer_probe("sigmoid", v)] if kind == "sigmoid"
                   else [torch.tanh, lambda v: iv._layer_probe("tanh", v),
                         lambda v: iv._layer_probe("rnn_tanh", v)])
        ok = torch.ones(len(z), dtype=torch.bool)
        for k in kernels:
            ok &= k(z) == 1
            if kind == "tanh":
                ok &= k(-z) == -1
        assert bool(ok[whole - lo:].all()) and not bool(ok[whole - lo - 1])


def test_wide_probes_compute_the_one_unit_probes_values():
    z = torch.cat([torch.linspace(0.01, 30.0, 4000), torch.tensor([1e5, 3e38])])
    z = torch.cat([z, z[:(-len(z)) % iv._LANES]])
    sig = iv._wide_probes("sigmoid")(z)
    assert torch.equal(sig[1][0].reshape(-1), iv._layer_probe("sigmoid", z))
    th = iv._wide_probes("tanh")(z)
    assert torch.equal(th[2][0][:, 0].reshape(-1), iv._layer_probe("tanh", z))
    assert torch.equal(th[2][0][:, 1].reshape(-1), iv._layer_probe("tanh", -z))
    assert torch.equal(th[3][0][:, 0].reshape(-1), iv._layer_probe("rnn_tanh", z))
    assert torch.equal(th[3][0][:, 1].reshape(-1), iv._layer_probe("rnn_tanh", -z))


def test_infinity_is_probed_through_the_bias():
    inf = torch.tensor([float("inf"), float("-inf")])
    assert torch.equal(iv._layer_probe("sigmoid", inf[:1]), torch.tensor([1.0]))
    assert torch.equal(iv._layer_probe("tanh", inf), torch.tensor([1.0, -1.0]))
    assert torch.equal(iv._layer_probe("rnn_tanh", inf), torch.tensor([1.0, -1.0]))
    z = torch.tensor([100.0, float("inf")])
    for kind in ("sigmoid", "tanh"):
        assert bool(iv._saturated(kind, iv._wide_probes(kind), z).all())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty scan cache (directory and in-process memo)."""
    monkeypatch.setenv("PDANET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(iv, "_MEMO", {})
    return tmp_path / "cache"


def _counting_scan(monkeypatch, answer=None):
    calls = []

    def fake(mask, lo, hi, chunk=iv.SCAN_CHUNK):
        calls.append((lo, hi))
        return lo if answer is None else answer
    monkeypatch.setattr(iv, "_scan", fake)
    return calls


def test_cache_dir_respects_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("PDANET_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert iv.cache_dir() == tmp_path / "xdg" / "pdanet"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert iv.cache_dir().parts[-2:] == (".cache", "pdanet")
    monkeypatch.setenv("PDANET_CACHE_DIR", str(tmp_path / "mine"))
    assert iv.cache_dir() == tmp_path / "mine"


def test_scan_result_round_trips_through_the_disk_cache(cache, monkeypatch):
    calls = _counting_scan(monkeypatch)
    need = iv._upto_bits(0)
    t, u = iv._checked("tanh", need)
    assert (t, u) == (iv._start_bits("tanh"), need) and len(calls) == 1
    files = list(cache.glob("saturation-tanh-*.json"))
    assert len(files) == 1 and not list(cache.glob(".saturation-*"))   # no temporary left
    monkeypatch.setattr(iv, "_MEMO", {})                            # a new process: disk only
    assert iv._checked("tanh", need) == (t, u) and len(calls) == 1
    assert iv._checked("tanh", need) == (t, u) and len(calls) == 1   # in-process memo
    # a larger range scans only what is missing, and keeps the threshold if that all saturates
    assert iv._checked("tanh", need + (1 << 23)) == (t, need + (1 << 23))
    assert calls[-1] == (need + 1, need + (1 << 23))


@pytest.mark.parametrize("content", [
    "not json", "", "[]", '{"key": 1}', None,
    '{"threshold_bits": "x", "upto_bits": 1140850688}',
    '{"threshold_bits": 1091579059, "upto_bits": 1140850689}',        # not a power of two
    '{"threshold_bits": 5, "upto_bits": 1140850688}',                 # below where a scan starts
    '{"threshold_bits": true, "upto_bits": 1140850688}',
])
def test_a_corrupt_cache_file_is_ignored_and_rewritten(cache, monkeypatch, content):
    calls = _counting_scan(monkeypatch)
    need = iv._upto_bits(0)
    key = iv._build_key("sigmoid")
    path = iv._cache_file(key)
    path.parent.mkdir(parents=True)
    if content is None:                                             # valid shape, other build
        other = dict(key, torch="0.0-other")
        path.write_text(json.dumps({"key": other, "threshold_bits": iv._bits(20.0),
                                    "upto_bits": need}))
    elif content.startswith('{"threshold'):
        path.write_text(json.dumps(dict(json.loads(content), key=key)))
    else:
        path.write_text(content)
    assert iv._load(key) is None
    assert iv._checked("sigmoid", need) == (iv._start_bits("sigmoid"), need)
    assert len(calls) == 1 and iv._load(key) == (iv._start_bits("sigmoid"), need)


def test_an_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("PDANET_CACHE_DIR", str(blocker / "cache"))  # cannot be a directory
    monkeypatch.setattr(iv, "_MEMO", {})
    calls = _counting_scan(monkeypatch)
    need = iv._upto_bits(0)
    assert iv._checked("sigmoid", need) == (iv._start_bits("sigmoid"), need)
    assert iv._checked("sigmoid", need) == (iv._start_bits("sigmoid"), need)
    assert len(calls) == 1                                          # the memo still holds it


def test_saturation_is_relied_on_only_up_to_what_was_checked(cache, monkeypatch):
    """A box reaching past the checked range extends the scan first; where the extension finds a
    float that does not saturate, the box keeps the ulp enclosure."""
    answer = {}

    def fake(mask, lo, hi, chunk=iv.SCAN_CHUNK):
        return answer.get(hi, lo)
    monkeypatch.setattr(iv, "_scan", fake)
    big = iv._upto_bits(1e6)
    answer[big] = big + 1                                           # the float 2^20 fails
    sat = functools.partial(iv.sigmoid, dtype=torch.float32, kernel="saturating")
    th = functools.partial(iv.tanh, dtype=torch.float32, kernel="saturating")
    inside = sat(iv.Interval(np.array([20.0]), np.array([100.0])))
    t = th(iv.Interval(np.array([10.0]), np.array([100.0])))
    beyond = sat(iv.Interval(np.array([20.0]), np.array([1e6])))
    t_beyond = th(iv.Interval(np.array([-1e6]), np.array([-10.0])))
    assert inside.lo[0] == inside.hi[0] == 1.0 and t.lo[0] == t.hi[0] == 1.0
    assert beyond.lo[0] < 1.0 and t_beyond.hi[0] > -1.0          # the ulp enclosures
    assert iv.saturation(torch.float32).sigmoid == math.inf         # nothing saturates to 2^20


def test_float64_claims_no_exact_saturation():
    sat = iv.saturation(torch.float64)
    assert sat.sigmoid == sat.tanh == math.inf and sat.upto == 0.0
    s = iv.sigmoid(iv.Interval.point(np.array([60.0])), torch.float64, kernel="saturating")
    assert s.lo[0] < 1.0


def test_kernel_model_is_a_value():
    """The kernel model is an argument of tanh/sigmoid, not module state."""
    assert not hasattr(iv, "set_kernel_model") and not hasattr(iv, "_kernel_model")
    z = iv.Interval.point(np.array([60.0]))
    assert iv.sigmoid(z, torch.float32, "saturating").lo[0] == 1.0
    assert iv.sigmoid(z, torch.float32).lo[0] < 1.0                 # the default: ulp
    with pytest.raises(ValueError, match="kernel model"):
        iv.tanh(z, torch.float32, kernel="exact")

"""Soundness of the interval arithmetic: enclosures contain the float computation of torch."""

import numpy as np
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

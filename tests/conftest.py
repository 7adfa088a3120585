"""Shared test settings: one torch thread per worker, deterministic hypothesis profile in CI."""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(1)

settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def _ns_checks(net, la, window, loss, rng):
    """Run ``net`` on log actions ``la`` (float64, requires grad): its log α equals Lang's
    algorithm with the same window, and the gradient of ``loss`` (a function of the result)
    along a random direction equals a central difference."""
    import numpy as np

    from pdanet.automata.weighted import lang_log_batch

    res = net(la)
    ref = lang_log_batch(la.detach().numpy(), 0, window)
    assert np.allclose(res.log_alpha.detach().numpy(), ref, rtol=1e-9, atol=1e-9)
    loss(res).backward()
    v = torch.tensor(rng.normal(size=la.shape))
    eps = 1e-6
    with torch.no_grad():
        fd = (loss(net(la + eps * v)) - loss(net(la - eps * v))) / (2 * eps)
    assert torch.isclose((la.grad * v).sum(), fd, rtol=1e-6)
    return res


@pytest.fixture
def ns_checks():
    """`_ns_checks`: an NS stack against Lang's algorithm and a central difference."""
    return _ns_checks

"""The smallest saturation scale β at which a construction certifies."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pdanet.automata.base import Machine
from pdanet.constructions.base import CompiledNetwork
from pdanet.errors import CertificationError, InputError
from pdanet.verify.certify.core import Certificate, check_arguments, check_pair, is_int
from pdanet.verify.certify.dispatch import certify


def min_scale(machine: Machine, construction: CompiledNetwork | str | tuple[str, str],
              dtype: torch.dtype = torch.float32, min_length: int | None = None,
              kernel: str = "ulp", rel_tol: float = 0.01, **options) -> tuple[Any, Certificate]:
    """The smallest saturation scale β (to `rel_tol`) at which the construction certifies, by
    bisection on β with the construction's exact weights; returns (β, its certificate).

    ``construction`` is a compiled network, "target/method", or (target, method). A certificate
    counts when it holds for every length, or (given `min_length`) for at least that many steps.
    ``rel_tol`` is a real in (0, 1); ``min_length`` None or a positive int; other options go
    to `certify` and are validated there. Raises InputError on a bad argument.
    """
    import sympy as sp

    if isinstance(rel_tol, (bool, np.bool_)) or not isinstance(
            rel_tol, (int, float, np.integer, np.floating)) or not 0 < float(rel_tol) < 1:
        raise InputError(f"`rel_tol` must be a real number in (0, 1), got {rel_tol!r}")
    if min_length is not None and (not is_int(min_length) or min_length < 1):
        raise InputError(f"`min_length` must be None or a positive int, got {min_length!r}")
    check_arguments(kernel=kernel, dtype=dtype, **{k: v for k, v in options.items()
                                                   if k in ("eps", "chunk", "max_configs",
                                                            "progress")})

    from pdanet.constructions.table import compile as compile_machine

    if isinstance(construction, CompiledNetwork):
        check_pair(machine, construction)
        net = construction
    else:
        target, method = (construction.split("/") if isinstance(construction, str)
                          else construction)
        net = compile_machine(machine, target=target, method=method, dtype=dtype)
    net = net.with_scale(dtype=dtype)

    def good(beta) -> Certificate | None:
        try:
            cert = certify(machine, net.with_scale(beta), kernel=kernel, **options)
        except CertificationError:  # e.g. too weakly saturated to have few centres
            return None
        ok = cert.ok and (cert.all_lengths or (min_length is not None
                                               and (cert.max_length or 0) >= min_length))
        return cert if ok else None

    hi = sp.Rational(net.scale)
    cert_hi = good(hi)
    tries = 0
    while cert_hi is None:
        hi, tries = hi * 2, tries + 1
        if tries > 8:
            raise CertificationError(
                f"{net.construction} does not certify even at β = {hi}; see certify()'s failing case")
        cert_hi = good(hi)
    lo = sp.Rational(0)
    while hi - lo > rel_tol * hi:
        mid = sp.nsimplify(round(float((lo + hi) / 2), 4), rational=True)
        if mid <= lo or mid >= hi:
            break
        cert = good(mid)
        if cert is None:
            lo = mid
        else:
            hi, cert_hi = mid, cert
    return hi, cert_hi


__all__ = ["min_scale"]

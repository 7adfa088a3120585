"""Probabilistic machines as exact RNN language models: a random 50-state deterministic PFSA and
the marked-reversal probabilistic DPDA bounded at depth 8, compiled to Elman and LSTM language
models (`method="minsky_lm"`).

    python benchmarks/bench_lm.py [--samples 1000] [--no-certify]

One row per (machine, network, dtype): units, β, compile seconds; on ``--samples`` strings drawn
from the machine, the largest error of a next-symbol log-probability and of the per-string
log-likelihood in nats per symbol (`pdanet.verify.distribution.verify_lm`); then the certified
log-probability error bound for every length (the ``lm`` family of `pn.certify`, tolerance 1 nat
so that the bound is reported even where it is loose: per-node image boxes, float64 saturation
under `pdanet.verify.certify.lm.F64_LIMIT_GAP`), the share of it that is the log-softmax's own
evaluation in the dtype, whether the measured errors lie within it, and its time. Timings are
wall clock on this machine.
"""

from __future__ import annotations

import argparse
import time

import torch

import pdanet as pn
from pdanet.automata.probabilistic import PFSA, marked_reversal
from pdanet.verify.certify.lm import certify as certify_lm
from pdanet.verify.distribution import verify_lm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--no-certify", action="store_true")
    args = ap.parse_args()
    machines = {"pfsa50": PFSA.random(50, 4, 0),
                "marked_reversal_d8": marked_reversal().bounded(8, overflow="renormalise")}
    for name, m in machines.items():
        for target in ("elman", "lstm"):
            t0 = time.perf_counter()
            net64 = pn.compile(m, target=target, dtype=torch.float64)
            secs = time.perf_counter() - t0
            for dtype in (torch.float32, torch.float64):
                net = net64.with_scale(dtype=dtype)
                r = verify_lm(m, net, max_length=None, samples=args.samples, seed=0)
                row = (f"{name:<19} {target:<5} {str(dtype)[6:]:<7} units={net.hidden_units:<5} "
                       f"β={float(net.scale):<6.4g} compile={secs:.1f}s | ok={r.ok} "
                       f"max|Δlog p|={r.max_logprob_error:.1e} "
                       f"LL err/sym max={r.max_loglik_error:.1e}")
                if not args.no_certify:
                    t0 = time.perf_counter()
                    c = certify_lm(m, net, tolerance=1.0)
                    within = max(r.max_logprob_error, r.max_loglik_error) <= c.logprob_error
                    row += (f" | certified bound {c.logprob_error:.1e} nats/sym (log-softmax "
                            f"evaluation {c.evaluation_error:.1e}; measured within: {within}; "
                            f"all lengths: {c.all_lengths}, ε={c.eps:g}, "
                            f"{time.perf_counter() - t0:.1f}s)")
                print(row, flush=True)


if __name__ == "__main__":
    main()

"""Certificates the proof issue asks for, with their time: every Dyck construction at
(2,3), (4,5) and (100000,3), a 1,000-state DFA's Minsky network, the stack-RNN compilations of
the reversal and parenthesis-prediction PDTs, and the smallest safe β next to each
construction's own β and the blanket 10⁴ of the original code.

    python benchmarks/bench_certify.py [--no-min-scale]

Prints one row per certificate: what it proves (every length, or up to L), the kernel model the
proof used, ε, the number of cases, and seconds (wall clock, this machine).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

import pdanet as pn
from pdanet.verify.bounds import HEWITT_BLANKET_SCALE

DYCK = ((2, 3), (4, 5), (100_000, 3))
METHODS = ("hewitt", "onehot", "compact")


def _row(what: str, cert, seconds: float, extra: str = "") -> bool:
    proves = ("every length" if cert.all_lengths else
              f"length ≤ {cert.max_length:,}" if cert.ok else "NOT CERTIFIED")
    print(f"{what:<36} {proves:<16} {cert.kernel:<11} ε={cert.eps:<7g} "
          f"{cert.cases:>11,} cases {seconds:7.1f} s {extra}", flush=True)
    return cert.ok and cert.all_lengths


def _random_dfa(n: int, k: int, seed: int = 0) -> pn.DFA:
    rng = np.random.default_rng(seed)
    symbols = [chr(ord("a") + i) for i in range(k)]
    delta = {(q, a): int(rng.integers(n)) for q in range(n) for a in symbols}
    accept = {q for q in range(n) if rng.random() < 0.5}
    return pn.DFA(states=list(range(n)), alphabet=symbols, transitions=delta, start=0,
                  accepting=accept)


def main(argv: list[str]) -> int:
    torch.set_num_threads(2)
    with_min = "--no-min-scale" not in argv
    ok = True
    print("== Dyck-(k,m), float32 ==")
    for k, m in DYCK:
        d = pn.tasks.dyck(k, m)
        for target in ("elman", "lstm"):
            for method in METHODS:
                if method == "onehot" and k > 1000:
                    continue  # 2mk units: not a construction anyone runs at k = 10^5
                net = pn.compile(d, target=target, method=method)
                t0 = time.perf_counter()
                cert = pn.certify(d, net)
                dt = time.perf_counter() - t0
                extra = f"β = {net.scale}"
                if with_min and k < 1000:
                    beta, _ = pn.certify.min_scale(d, net)
                    extra += f", min β = {float(beta):.4g}, blanket {HEWITT_BLANKET_SCALE:g}"
                ok &= _row(f"Dyck-({k},{m}) {target}/{method}", cert, dt, extra)
    print("== DFAs ==")
    big = _random_dfa(1000, 3)
    for target in ("elman", "lstm"):
        net = pn.compile(big, target=target)
        t0 = time.perf_counter()
        cert = pn.certify(big, net)
        ok &= _row(f"random 1000-state DFA {net.construction}", cert, time.perf_counter() - t0)
    print("== stack RNNs ==")
    for name in ("reversal", "parenthesis_prediction"):
        m = pn.tasks.get(name)
        for memory in ("grefenstette", "joulin_mikolov", "suzgun"):
            net = pn.compile(m, target="stack_rnn", method=memory)
            t0 = time.perf_counter()
            cert = pn.certify(m, net)
            ok &= _row(f"{name} stack_rnn/{memory}", cert, time.perf_counter() - t0)
    print("ALL CERTIFIED" if ok else "SOME NOT CERTIFIED FOR EVERY LENGTH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

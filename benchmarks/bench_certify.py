"""Certificates the proof issue asks for, with their time: every Dyck construction at
(2,3), (4,5) and (100000,3), a 1,000-state DFA's Minsky network, the stack-RNN compilations of
the reversal and parenthesis-prediction PDTs, and the smallest safe β next to each
construction's own β and the blanket 10⁴ of the original code.

    python benchmarks/bench_certify.py [--no-min-scale] [--cost-only]

First, the cost of `pn.certify` on the Dyck-(2,3) and Dyck-(100000,3) LSTMs (compact, and the
CLI's default construction), each in a fresh subprocess: seconds and peak resident-set growth
during the call, with a cold saturation cache (an empty ``PDANET_CACHE_DIR``: the kernel scan
runs) and then warm (the same directory: the scan's result is read back). ``--cost-only`` stops
there. Then one row per certificate: what it proves (every length, or up to L), the kernel model
the proof used, ε, the number of cases, and seconds (wall clock, this machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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


_CHILD = """
import json, resource, sys, time
import pdanet as pn
k, m, method = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
d = pn.tasks.dyck(k, m)
net = pn.compile(d, target="lstm", method=method)
with open("/proc/self/statm") as fh:
    before = int(fh.read().split()[1]) * resource.getpagesize()
t0 = time.perf_counter()
cert = pn.certify(d, net)
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "growth": max(0, peak - before), "peak": peak,
                  "ok": bool(cert.ok and cert.all_lengths), "kernel": cert.kernel}))
"""

COST = ((2, 3, "compact"), (2, 3, "hewitt"), (100_000, 3, "compact"), (100_000, 3, "hewitt"))


def _cost(k: int, m: int, method: str, cache: str) -> dict:
    env = dict(os.environ, PDANET_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(k), str(m), method], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cost_rows() -> bool:
    """Seconds and peak RSS growth of pn.certify, cold then warm saturation cache."""
    print("== pn.certify cost, fresh process (peak RSS growth during the call) ==")
    ok = True
    for k, m, method in COST:
        with tempfile.TemporaryDirectory() as cache:
            for label in ("cold", "warm"):
                r = _cost(k, m, method, cache)
                ok &= r["ok"]
                print(f"Dyck-({k},{m}) lstm/{method:<8} {label} cache {r['seconds']:7.2f} s  "
                      f"peak +{r['growth'] / 2**20:7.1f} MB (process peak "
                      f"{r['peak'] / 2**20:7.1f} MB)  {'certified' if r['ok'] else 'NOT CERTIFIED'} "
                      f"({r['kernel']})", flush=True)
    return ok


def main(argv: list[str]) -> int:
    torch.set_num_threads(2)
    with_min = "--no-min-scale" not in argv
    ok = cost_rows()
    if "--cost-only" in argv:
        return 0 if ok else 1
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

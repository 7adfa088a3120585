"""Compile time, peak memory and forward throughput of the DFA constructions.

Random complete DFAs with 100, 1,000 and 10,000 states over 20 symbols (recognisers). Each
(size, construction) runs in a fresh subprocess so that its peak resident memory is its own.
Columns: units (and the construction's bound), compile seconds, peak traced Python/numpy memory
(tracemalloc) and peak RSS of the process, and forward throughput in symbols per second on a
batch of 32 strings of 256 symbols, with the ratio to the same module's bare torch forward pass
without decoding. Minsky-style constructions that would need a dense block beyond the limit are
refused with a CompileError, reported as such. Usage: ``python benchmarks/bench_dfa.py [sizes]``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

CONSTRUCTIONS = [("elman", "minsky"), ("lstm", "minsky"), ("second_order", "omlin_giles"),
                 ("elman", "compressed")]
SYMBOLS, BATCH, LENGTH = 20, 32, 256


def one(n: int, target: str, method: str) -> dict:
    import numpy as np
    import torch

    import pdanet as pn
    from pdanet.automata.dfa import DFA
    from pdanet.errors import CompileError

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    dfa = DFA.from_table(rng.integers(0, n, size=(n, SYMBOLS)), [f"s{i}" for i in range(SYMBOLS)],
                         0, np.flatnonzero(rng.random(n) < 0.5))
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        net = pn.compile(dfa, target=target, method=method)
    except CompileError as exc:
        return {"refused": str(exc).split(":")[0]}
    seconds = time.perf_counter() - t0
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    ids = torch.as_tensor(rng.integers(0, SYMBOLS, size=(BATCH, LENGTH)))
    with torch.no_grad():
        net.module(ids[:, :8])
        t0 = time.perf_counter()
        net.module(ids)
        bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    states, logits = net.forward(ids)
    net.decode(states)
    net.readout(logits)
    full = time.perf_counter() - t0
    ok = bool((net.decode(states)["state"] == dfa.run_batch(ids.numpy())["state"]).all())
    return {"units": net.hidden_units, "bound": f"{net.bound} = {net.bound_value}",
            "minsky": n * SYMBOLS, "compile_s": seconds, "traced_mib": traced / 2**20,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "sym_per_s": BATCH * LENGTH / full, "vs_bare": full / bare, "agrees": ok}


def main(sizes: list[int]) -> None:
    head = (f"{'states':>7} {'construction':<26} {'units':>7} {'Minsky':>7} {'compile s':>9} "
            f"{'traced MiB':>10} {'RSS MiB':>8} {'sym/s':>10} {'vs bare':>7} agrees")
    print(head)
    print("-" * len(head))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for n in sizes:
        for target, method in CONSTRUCTIONS:
            proc = subprocess.run([sys.executable, __file__, "--one", str(n), target, method],
                                  capture_output=True, text=True, env=env, check=False)
            name = f"{target}/{method}"
            if proc.returncode != 0:
                print(f"{n:>7} {name:<26} failed: {proc.stderr.strip().splitlines()[-1]}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            if "refused" in r:
                print(f"{n:>7} {name:<26} refused (CompileError: dense block too large)")
                continue
            print(f"{n:>7} {name:<26} {r['units']:>7} {r['minsky']:>7} {r['compile_s']:>9.2f} "
                  f"{r['traced_mib']:>10.1f} {r['rss_mib']:>8.0f} {r['sym_per_s']:>10.0f} "
                  f"{r['vs_bare']:>7.2f} {r['agrees']}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(one(int(sys.argv[2]), sys.argv[3], sys.argv[4])))
    else:
        main([int(a) for a in sys.argv[1:]] or [100, 1_000, 10_000])

"""Compile time of the Dyck-(k, m) constructions, up to Dyck-(100000, 3) (target: < 1 s, no
state enumeration), with unit counts and parameter counts.

    python benchmarks/bench_compile.py
"""

from __future__ import annotations

import time

import pdanet as pn


def main() -> None:
    pn.compile(pn.tasks.dyck(2, 2), target="lstm")  # imports and first-call set-up
    for k, m in [(2, 3), (64, 5), (1000, 3), (100_000, 3)]:
        d = pn.tasks.dyck(k, m)
        for target in ("lstm", "elman"):
            for method in ("hewitt", "compact"):
                best = float("inf")
                for _ in range(3):
                    t0 = time.perf_counter()
                    net = pn.compile(d, target=target, method=method)
                    best = min(best, time.perf_counter() - t0)
                params = sum(p.numel() for p in net.module.parameters())
                print(f"Dyck-({k},{m}) {target:>5}/{method:<8} {net.hidden_units:>4} units "
                      f"{params:>11,} parameters  compile {best:6.3f} s")


if __name__ == "__main__":
    main()

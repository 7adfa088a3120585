"""Batched symbolic simulation: `run_batch` throughput against a Python loop over `run`.

    python benchmarks/bench_simulation.py

Dyck-(2,10), 10,000 strings of length 100 (target: run_batch ≥ 50× the loop), plus a DPDA and a
DFA for comparison. Prints symbols per second and the ratio. Then `DPDA.accepts` / `trace` of
the Dyck-1 DPDA on one (ⁿ)ⁿ string of 125,000 … 1,000,000 symbols, and `StoreTransducer.accepts`
with a queue and a deque store (sequence copy, w #^|w|) at the same lengths, with the time ratio
per doubling (×2 = linear, ×4 = quadratic).

    python benchmarks/bench_simulation.py --doubling     # only the doubling sections
"""

from __future__ import annotations

import time

import numpy as np

import pdanet as pn


def _time(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench(name: str, machine, ids: np.ndarray, loop_rows: int = 1000) -> None:
    strings = [machine.alphabet.decode(r) for r in ids[:loop_rows]]
    t_batch = _time(lambda: machine.run_batch(ids))
    t_loop = _time(lambda: [machine.trace(s) for s in strings], repeat=1) * len(ids) / loop_rows
    n = ids.size
    print(f"{name:<34} run_batch {n / t_batch:14,.0f} symbols/s   Python loop "
          f"{n / t_loop:12,.0f} symbols/s   ratio {t_loop / t_batch:8.1f}×")


def main() -> None:
    rng = np.random.default_rng(0)
    d = pn.tasks.dyck(2, 10)
    bench("Dyck-(2,10), 10,000 × 100", d, d.sample(10_000, 100, rng))
    dyck2 = pn.tasks.get("dyck2")
    strings = pn.tasks.sample("dyck2", 10_000, 100, rng)
    ids, _ = dyck2.encode(strings)
    bench("Dyck-2 DPDA, 10,000 × 100", dyck2, ids)
    parity = pn.tasks.get("parity")
    bench("parity DFA, 10,000 × 100", parity, rng.integers(0, len(parity.alphabet), (10_000, 100)))
    doubling()
    store_doubling()


def doubling(lengths: tuple[int, ...] = (125_000, 250_000, 500_000, 1_000_000)) -> None:
    """`DPDA.accepts` and `trace` of the Dyck-1 DPDA on (ⁿ)ⁿ (stack depth n) for doubling lengths:
    the time ratio per doubling should be ×2 (O(1) per step: shared-tail stacks), not ×4."""
    m = pn.tasks.get("dyck1")
    prev: dict = {}
    for L in lengths:
        s = "(" * (L // 2) + ")" * (L // 2)
        for name, fn in (("accepts", m.accepts), ("trace", m.trace)):
            t = _time(lambda fn=fn, s=s: fn(s), repeat=1)
            ratio = f"×{t / prev[name]:.2f}" if name in prev else ""
            print(f"(ⁿ)ⁿ DPDA.{name:<8} L = {L:9,d}   {t:7.2f} s   {t / L * 1e6:5.2f} µs/symbol   "
                  f"{ratio}")
            prev[name] = t


def store_doubling(lengths: tuple[int, ...] = (125_000, 250_000, 500_000, 1_000_000)) -> None:
    """`accepts` of sequence copy with a queue and a deque store (store size up to L/2) for doubling
    lengths: ×2 per doubling (amortised O(1) per step: two-stack persistent deques), not ×4."""
    from pdanet.automata.store import BLANK, sequence_copy

    for store in ("queue", "deque"):
        m = pn.tasks.get("sequence_copy", vocab_size=4) if store == "queue" \
            else sequence_copy(4, store)
        prev = None
        for L in lengths:
            s = tuple(f"s{i % 4}" for i in range(L // 2)) + (BLANK,) * (L // 2)
            t = _time(lambda m=m, s=s: m.accepts(s), repeat=1)
            ratio = f"×{t / prev:.2f}" if prev else ""
            print(f"sequence_copy ({store}).accepts L = {L:9,d}   {t:7.2f} s   "
                  f"{t / L * 1e6:5.2f} µs/symbol   {ratio}")
            prev = t


if __name__ == "__main__":
    import sys

    if "--doubling" in sys.argv[1:]:
        doubling()
        store_doubling()
    else:
        main()

"""Run the acceptance checks of the constructions at the sizes their issues state, and print a
table (construction, machine, strings and steps checked, seconds, verdict).

    python benchmarks/acceptance.py [dyck] [dfa[:TASKS[:TARGETS]]] [stacks]

The test suite runs the same checks at reduced sizes (tests/test_acceptance.py); this script is
the full-size run, minutes rather than seconds on 2 cores.
"""

from __future__ import annotations

import sys
import time

import torch

import pdanet as pn

DYCK_METHODS = ("hewitt", "onehot", "compact")


def _row(what: str, machine, net, **kw) -> bool:
    t0 = time.perf_counter()
    report = pn.verify(machine, net, **kw)
    dt = time.perf_counter() - t0
    verdict = "ok" if report.ok else f"FAIL: {report.counterexample}"
    print(f"{what:<44} {net.construction:<22} {net.hidden_units:>6} units "
          f"{report.strings_checked:>10,} strings {report.steps_checked:>13,} steps "
          f"{dt:8.1f} s  {verdict}", flush=True)
    return report.ok


def dyck() -> bool:
    """Issue: Dyck-(k,m) into RNNs and LSTMs — float32, every method and target."""
    ok = True
    cases = [
        ((2, 3), dict(max_length=12, samples=0, long_length=0, long_samples=0)),
        ((3, 4), dict(max_length=12, samples=0, long_length=0, long_samples=0,
                      max_strings=10**7)),
        ((4, 3), dict(max_length=9, samples=0, long_length=0, long_samples=0)),
        ((5, 7), dict(max_length=None, samples=10_000, sample_lengths=(1, 40), long_length=0,
                      long_samples=0)),
        ((100, 3), dict(max_length=None, samples=10_000, sample_lengths=(1, 40), long_length=0,
                        long_samples=0)),
        ((2, 10), dict(max_length=None, samples=0, long_length=100_000, long_samples=4)),
    ]
    for (k, m), kw in cases:
        d = pn.tasks.dyck(k, m)
        for target in ("elman", "lstm"):
            for method in DYCK_METHODS:
                net = pn.compile(d, target=target, method=method)
                ok &= _row(f"Dyck-({k},{m})", d, net, **kw)
    return ok


def finite_state_machines() -> dict:
    return {
        "parity": pn.tasks.get("parity"),
        "cumulative_xor": pn.tasks.get("cumulative_xor"),
        "delayed_xor": pn.tasks.get("delayed_xor"),
        "modular_counter(5)": pn.tasks.get("modular_counter", modulus=5),
        "bigram_flip(4)": pn.tasks.get("bigram_flip", vocab_size=4),
        "dyck3 depth ≤ 4": pn.tasks.get("dyck3").bounded(4).to_dfa(),
        "marked_reversal depth ≤ 6": pn.tasks.get("marked_reversal").bounded(6).to_dfa(),
    }


DFA_TARGETS = (("elman", "minsky"), ("lstm", "minsky"), ("second_order", "omlin_giles"),
               ("elman", "compressed"))


def dfa(select: str = "") -> bool:
    """Issue: any DFA or finite-state transducer — exhaustive to length 10 and 10,000 strings of
    length 1,000 for every finite-state task and target.

    ``select`` = "TASKS[:TARGETS]", comma-separated substrings of the task names and of
    "target/method" (e.g. "dyck3,marked:lstm"); empty = all. Rows run cheapest first (by
    hidden units² × gates × steps per symbol), so a run cut short has the most rows done."""
    tasks, _, targets = select.partition(":")
    want_task = [t for t in tasks.split(",") if t]
    want_target = [t for t in targets.split(",") if t]
    rows = []
    for name, m in finite_state_machines().items():
        if want_task and not any(t in name for t in want_task):
            continue
        for target, method in DFA_TARGETS:
            if want_target and not any(t in f"{target}/{method}" for t in want_target):
                continue
            net = pn.compile(m, target=target, method=method)
            gates = 4 if target == "lstm" else 1
            rows.append((net.hidden_units ** 2 * gates * net.steps_per_symbol, name, m, net))
    rows.sort(key=lambda row: row[0])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread per matmul is faster on a shared, loaded machine
    ok = True
    try:
        for _, name, m, net in rows:
            ok &= _row(name, m, net, max_length=10, samples=0, long_length=1000,
                       long_samples=10_000, max_strings=10**7, max_batch_steps=1 << 18)
    finally:
        torch.set_num_threads(threads)
    return ok


def stacks() -> bool:
    """Issue: DPDAs/PDTs into neural-stack controllers — every task × memory, exhaustive to
    length 10 and 1,000 strings of length 2,000 (the slow test at full size)."""
    import os
    import subprocess

    env = dict(os.environ, PDANET_FULL="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "slow", "-k", "full_sizes",
           "--durations=0", "tests/test_controllers.py"]
    return subprocess.call(cmd, env=env) == 0


def main(argv: list[str]) -> int:
    torch.set_num_threads(2)
    chosen = argv or ["dyck", "dfa", "stacks"]
    ok = True
    for part in chosen:
        print(f"== {part} ==", flush=True)
        name, _, select = part.partition(":")  # "dfa:TASKS[:TARGETS]" selects rows of dfa
        parts = {"dyck": dyck, "dfa": dfa, "stacks": stacks}
        ok &= parts[name](select) if select else parts[name]()
    print("ALL OK" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

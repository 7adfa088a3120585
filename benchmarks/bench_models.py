"""Controller size against the vocabulary: the ``stack_rnn`` controller (one unit per (state,
symbol, reading)) against the factored Grefenstette et al. (2015) models (finite control ×
symbol classes, with the symbol codes carried in a data path).

For Grefenstette's three tasks — sequence copy (queue), sequence reversal (the DPDT, and the
stack store transducer ``store="stack"``), bigram flip (the Mealy DFA, and the queue transducer
``store="queue"``) — at |Σ| = 2, 8, 32, 128, 512, 1024, prints hidden units and parameters of

- ``before``: ``pn.compile(m, target="stack_rnn")``; where that is over the default limits,
  "would need N" from its size estimate (`controllers.check_size`'s count);
- ``after``: ``compile_grefenstette_lstm(m)`` (LSTM controller, the paper's), with compile time
  and peak RSS increase (each compile in a forked child: the parent's RSS is the baseline).

A machine with more than ``--max-transitions`` transition-table entries (|Q|·|Σ|·(|Γ|+1)) is
not built ("—"). Memory in MB; times in seconds.

    OMP_NUM_THREADS=1 python benchmarks/bench_models.py [--sizes 2 8 32 128 512 1024]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time

import pdanet as pn
from pdanet.errors import ResourceError

TASKS = (("sequence_copy", {}), ("sequence_reversal", {}),
         ("sequence_reversal", {"store": "stack"}), ("bigram_flip", {}),
         ("bigram_flip", {"store": "queue"}))


def _table_size(name: str, params: dict, V: int) -> int:
    """Transition-table entries |Q|·|Σ|·(|Γ|+1) of the task's machine, without building it."""
    if name == "sequence_copy" or (name == "sequence_reversal" and params):
        return 2 * (V + 1) * (V + 1)
    if name == "sequence_reversal":
        return 4 * (V + 1) * (2 * V + 1)
    if params:                                  # bigram flip, queue transducer
        return (2 * V + 2) * (V + 1) * (V + 1)
    return (2 * V + 2) * (V + 1)                # bigram flip, Mealy DFA


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _before(m) -> str:
    from pdanet.constructions.controllers import _plan, store_for
    from pdanet.constructions.realtime import table

    try:
        net = pn.compile(m, target="stack_rnn")
        params = sum(p.numel() for p in net.module.parameters())
        return f"{net.hidden_units:>8,} {params:>14,}"
    except ResourceError:
        view = table(m)
        plan = _plan(view, store_for("grefenstette", view.kind))
        H = len(plan.units) + 1
        width = max(1, (view.G).bit_length())
        r = width * plan.store.slots
        params = H * (view.K + r) + H * H + H * (len(plan.store.channels) + r + view.n_out + 1)
        return f"would need {H:,} units, {params:,} parameters"


def _after(m, out) -> None:
    from pdanet.models.grefenstette import compile_grefenstette_lstm

    base = _rss_mb()
    t = time.perf_counter()
    try:
        net = compile_grefenstette_lstm(m)
        dt = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        params = sum(p.numel() for p in net.module.parameters())
        out.put(f"{net.hidden_units:>8,} {params:>12,} {dt:>7.2f} {max(peak - base, 0):>7.0f} "
                f"{net.info['factoring']}")
    except ResourceError as exc:
        out.put(f"over the limits: {str(exc)[:60]}")


def _in_child(fn, m) -> str:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=fn, args=(m, q))
    p.start()
    res = q.get()
    p.join()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 8, 32, 128, 512, 1024])
    ap.add_argument("--max-transitions", type=int, default=3_000_000)
    args = ap.parse_args()
    print(f"{'task':<26}{'|Σ|':>6}  {'before: units / params':<44}  after (LSTM): units / "
          "params / compile s / peak ΔRSS MB / factoring")
    for name, params in TASKS:
        label = name + (f"[{params['store']}]" if params else "")
        for V in args.sizes:
            if _table_size(name, params, V) > args.max_transitions:
                print(f"{label:<26}{V:>6}  — machine not built "
                      f"({_table_size(name, params, V):,} table entries)")
                continue
            m = pn.tasks.get(name, vocab_size=V, **params)
            before = _before(m)
            after = _in_child(_after, m)
            print(f"{label:<26}{V:>6}  {before:<44}  {after}", flush=True)


if __name__ == "__main__":
    main()

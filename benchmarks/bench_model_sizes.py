"""Controller size against the vocabulary for Grefenstette et al. (2015)'s three tasks, before and
after the factored Grefenstette model.

For sequence copy (the queue transducer), sequence reversal (the DPDT w #^|w| → #^|w| w^R) and
bigram flip (the Mealy DFA w # → # flip(w), whose states hold the pending symbol), at
|Σ| = 2, 4, …, 1024, prints hidden units and parameters, compile seconds and peak traced memory
(MB, `tracemalloc`, a second compile) of

- ``before``: ``pn.compile(m, target="stack_rnn")``, the generic StackRNN construction (one
  unit per (state, symbol, reading)); "refused" where it is over the default resource limits
  (`pdanet.limits`: it would not fit in memory);
- ``after``: ``compile_grefenstette_lstm(m)``, the paper's LSTM controller with the factored
  controller (data path, or a register for states that hold a symbol); the paper's sizes are
  LSTM hidden 256 and stack width 256.

Machine construction is not timed. ``--before-max-vocab N`` does not compile ``before`` above |Σ| = N (minutes there): it prints
the size `controllers.check_size` estimates ("est.") or "refused" where the limits refuse it. A
machine with more than ``--max-transitions`` transition
table entries (|Q|·|Σ|·(|Γ|+1)) is not built ("—").

    OMP_NUM_THREADS=1 python benchmarks/bench_model_sizes.py [--sizes 2 4 8 … 1024]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import pdanet as pn
from pdanet.errors import ResourceError

TASKS = ("sequence_copy", "sequence_reversal", "bigram_flip")
SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def table_size(name: str, V: int) -> int:
    """Transition-table entries |Q|·|Σ|·(|Γ|+1) of the task's machine, without building it."""
    if name == "sequence_copy":
        return 2 * (V + 1) * (V + 1)
    if name == "sequence_reversal":
        return 4 * (V + 1) * (2 * V + 1)
    return (2 * V + 2) * (V + 1)


def measure(build) -> tuple[object, float, float]:
    """(result, seconds, peak traced MB): ``build()`` timed, then again under tracemalloc."""
    gc.collect()
    t = time.perf_counter()
    net = build()
    seconds = time.perf_counter() - t
    del net
    gc.collect()
    tracemalloc.start()
    try:
        net = build()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    return net, seconds, peak


def before_estimate(m) -> str:
    """The stack_rnn size without building weights (`controllers.check_size`'s count):
    "refused" where the default limits refuse it, else "est. units params"."""
    from pdanet.constructions.controllers import _plan, check_size, store_for
    from pdanet.constructions.realtime import table

    view = table(m)
    plan = _plan(view, store_for("grefenstette", view.kind))
    H = len(plan.units) + 1
    r = max(1, view.G.bit_length()) * plan.store.slots
    params = H * (view.K + r) + H * H + H * (len(plan.store.channels) + r + view.n_out + 1)
    try:
        check_size(m, plan, False, "binary")
    except ResourceError:
        return f"refused ({H:,} units)"
    return f"est. {H:,} units {params:,} params"


def row(net, seconds: float, peak: float) -> str:
    params = sum(p.numel() for p in net.module.parameters())
    return f"{net.hidden_units:>7,} {params:>11,} {seconds:>7.2f} {peak:>8.1f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    ap.add_argument("--max-transitions", type=int, default=10_000_000)
    ap.add_argument("--no-before", action="store_true", help="skip the stack_rnn column")
    ap.add_argument("--before-max-vocab", type=int, default=None,
                    help="compile stack_rnn only up to this |Σ| (slow above 256: minutes)")
    args = ap.parse_args(argv)
    from pdanet.models.grefenstette import compile_grefenstette_lstm

    compile_grefenstette_lstm(pn.tasks.get("sequence_copy", vocab_size=2))   # warm up imports
    head = f"{'units':>7} {'params':>11} {'s':>7} {'MB':>8}"
    print(f"{'':<24} | {'before: stack_rnn':<{len(head)}} | after: grefenstette_lstm")
    print(f"{'task':<18} {'|Σ|':>5} | {head} | {head} width factoring")
    for name in args.tasks:
        for V in args.sizes:
            if table_size(name, V) > args.max_transitions:
                print(f"{name:<18} {V:>5} | —  ({table_size(name, V):,} transitions: not built)")
                continue
            m = pn.tasks.get(name, vocab_size=V)
            if args.no_before:
                before = "not run"
            elif args.before_max_vocab is not None and V > args.before_max_vocab:
                before = before_estimate(m)
            else:
                try:
                    before = row(*measure(lambda m=m: pn.compile(m, target="stack_rnn")))
                except ResourceError:
                    before = "refused"
            try:
                net, seconds, peak = measure(lambda m=m: compile_grefenstette_lstm(m))
                after = (f"{row(net, seconds, peak)} {net.module.width:>5} "
                         f"{net.info['factoring']}")
            except ResourceError:
                after = "refused"
            print(f"{name:<18} {V:>5} | {before:>{len(head)}} | {after}", flush=True)


if __name__ == "__main__":
    main()

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

``--part seed``: every paper model of `pdanet.constructions.table.MODELS` × every seed task of
`pdanet.tasks` whose machine the model's precondition accepts (default sizes): compile, verify
every live prefix up to length 10 (the longest length ≤ 10 whose live prefixes number at most
``--max-prefixes``), verify ``--long-samples`` busy strings of ``--long-length`` symbols in
float32, and certify where a certificate family covers the model. Prints model, task, hidden
units, parameters, the exhaustive length n reached (and the prefixes checked), the long strings
checked (and their mean length: a machine whose walks die early gives shorter ones), certify's
outcome and the seconds of each phase.

    OMP_NUM_THREADS=1 python benchmarks/bench_models.py --part seed [--models hao_lstm ...]
        [--tasks dyck2 ...] [--long-samples 1000] [--long-length 2000] [--certify-only]

``--certify-only``: compile and certify each pair, no verify (certify column: ``proved`` for
every length, ``≤L`` up to length L, ``failed``, ``refused`` by the family, ``—`` no family).
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing as mp
import resource
import time
from typing import Any

import numpy as np

import pdanet as pn
from pdanet.errors import CertificationError, InputError, ResourceError, VerificationError

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


# --- every model × every seed task -----------------------------------------------------------
EXHAUSTIVE_LENGTH = 10
# the long-string task of each model, first applicable of these (tests/test_models_seed_tasks)
LONG_TASKS = ("dyck2", "parenthesis_prediction", "boolean_formula", "cumulative_xor")


def seed_pairs() -> list[tuple[str, str, str]]:
    """(task, model, target) for every model of `MODELS` and every seed task (default sizes)
    that is an instance of one of the model's machine types and passes its precondition."""
    from pdanet.constructions.table import MODELS

    machines = {name: pn.tasks.get(name) for name in pn.tasks.names()}
    pairs = []
    for module, model, target, types, _ in MODELS:
        requires = getattr(importlib.import_module(f"pdanet.models.{module}"),
                           f"requires_{model}")
        pairs += [(task, model, target) for task, m in machines.items()
                  if isinstance(m, types) and requires(m) is None]
    return pairs


def exhaustive_prefixes(machine: Any, max_prefixes: int, max_length: int = EXHAUSTIVE_LENGTH
                        ) -> tuple[int, np.ndarray]:
    """(n, ids): every live prefix of length ≤ n, as rows padded with −1 (shortlex order), for
    the largest n ≤ ``max_length`` with at most ``max_prefixes`` of them."""
    from pdanet.verify.strings import live_prefixes

    if max_length < 0 or max_prefixes < 1:
        raise InputError(f"max_length must be ≥ 0 and max_prefixes ≥ 1, got {max_length} and "
                         f"{max_prefixes}")
    levels = None
    for n in range(max_length + 1):          # upwards: each try costs less than the failing one
        try:
            levels = live_prefixes(machine, n, max_prefixes)
        except VerificationError:
            break
    if levels is None:
        raise VerificationError(f"{machine!r} has more than {max_prefixes} live prefixes of "
                                "length 0")
    n = len(levels) - 1
    ids = np.full((sum(len(x) for x in levels), max(n, 1)), -1, dtype=np.int64)
    row = 0
    for k, x in enumerate(levels):
        ids[row:row + len(x), :k] = x
        row += len(x)
    return n, ids


def long_task(model: str, pairs: list[tuple[str, str, str]]) -> str | None:
    """The task on which `model` is checked on long strings in CI (`LONG_TASKS` order), or
    None when it has no seed task."""
    tasks = [t for t, mo, _ in pairs if mo == model]
    return next((t for t in LONG_TASKS if t in tasks), tasks[0] if tasks else None)


def certify_outcome(machine: Any, net: Any) -> str:
    """``proved`` (every length), ``≤L`` (every length up to L), ``failed`` or ``refused`` (a
    typed error: the family does not cover this network) where a certificate family covers the
    network's abstraction, else ``—``."""
    from pdanet.verify.certify.dispatch import family

    try:
        family(net)
    except CertificationError:
        return "—"
    try:
        cert = pn.certify(machine, net)
    except (CertificationError, ResourceError):
        return "refused"
    if not cert:
        return "failed"
    return "proved" if cert.all_lengths else f"≤{cert.max_length}"


def seed_row(task: str, model: str, target: str, exhaustive: tuple[int, np.ndarray],
             long_ids: np.ndarray, certify_only: bool = False) -> str:
    """One table row: compile, certify, verify the exhaustive prefixes and the long strings
    (given, so that every model of a task checks the same strings); ``certify_only``: compile
    and certify."""
    m = pn.tasks.get(task)
    t0 = time.perf_counter()
    try:
        net = pn.compile(m, target=target, method=model)
    except ResourceError as exc:          # a controller that grows as |Σ|·|Γ|, at |Σ| = 128
        return f"{model:<26}{task:<28}  over the limits: {str(exc).split(' would need')[0][-60:]}"
    t_compile = time.perf_counter() - t0
    params = sum(p.numel() for p in net.module.parameters())
    n, ids = exhaustive
    t0 = time.perf_counter()
    cert = certify_outcome(m, net)
    t_cert = time.perf_counter() - t0
    if certify_only:
        return (f"{model:<26}{task:<28}{net.hidden_units:>6}{params:>10,}  {cert:<8}"
                f"{t_compile:>7.2f}{t_cert:>8.2f}")
    t0 = time.perf_counter()
    try:
        rep = pn.verify(m, net, strings=ids, max_length=None, samples=0, long_samples=0)
        t_exh = time.perf_counter() - t0
        t0 = time.perf_counter()
        lrep = pn.verify(m, net, strings=long_ids, max_length=None, samples=0, long_samples=0,
                         dtype="float32", max_batch_steps=1 << 21)
    except ResourceError as exc:          # one string's run over the memory limit
        return (f"{model:<26}{task:<28}{net.hidden_units:>6}{params:>10,}  verify over the "
                f"limits: {str(exc)[:80]}")
    t_long = time.perf_counter() - t0
    mean_len = lrep.steps_checked / max(lrep.strings_checked, 1) - 1
    bad = rep.counterexample or lrep.counterexample
    status = "ok" if rep.ok and lrep.ok else f"FAIL {bad}"
    return (f"{model:<26}{task:<28}{net.hidden_units:>6}{params:>10,}{n:>4}{len(ids):>9,}"
            f"{lrep.strings_checked:>7,}{mean_len:>7.0f}  {cert:<7}{t_compile:>7.2f}{t_exh:>7.2f}"
            f"{t_long:>8.2f}  {status}")


def seed_main(args: argparse.Namespace) -> None:
    pairs = [p for p in seed_pairs() if (not args.models or p[1] in args.models)
             and (not args.tasks or p[0] in args.tasks)]
    if args.certify_only:
        print(f"{'model':<26}{'task':<28}{'units':>6}{'params':>10}  {'certify':<8}"
              f"{'comp s':>7}{'cert s':>8}")
    else:
        print(f"{'model':<26}{'task':<28}{'units':>6}{'params':>10}{'n':>4}{'prefixes':>9}"
              f"{'long':>7}{'len':>7}  {'certify':<7}{'comp s':>7}{'exh s':>7}{'long s':>8}")
    start = time.perf_counter()
    for task in dict.fromkeys(t for t, _, _ in pairs):
        if args.certify_only:
            for _, model, target in [p for p in pairs if p[0] == task]:
                print(seed_row(task, model, target, (0, None), None, True), flush=True)
            continue
        m = pn.tasks.get(task)
        t0 = time.perf_counter()
        exhaustive = exhaustive_prefixes(m, args.max_prefixes)
        t1 = time.perf_counter()
        long_ids, _ = pn.tasks.long_strings(task, args.long_samples, args.long_length,
                                            np.random.default_rng(0))
        t2 = time.perf_counter()
        print(f"# {task}: {len(exhaustive[1]):,} live prefixes of length ≤ {exhaustive[0]} "
              f"({t1 - t0:.1f} s), {len(long_ids):,} long strings ({t2 - t1:.1f} s)", flush=True)
        for _, model, target in [p for p in pairs if p[0] == task]:
            print(seed_row(task, model, target, exhaustive, long_ids), flush=True)
    print(f"# total {time.perf_counter() - start:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("size", "seed"), default="size")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 8, 32, 128, 512, 1024])
    ap.add_argument("--max-transitions", type=int, default=3_000_000)
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--tasks", nargs="*", default=None)
    ap.add_argument("--max-prefixes", type=int, default=200_000)
    ap.add_argument("--long-samples", type=int, default=1000)
    ap.add_argument("--long-length", type=int, default=2000)
    ap.add_argument("--certify-only", action="store_true",
                    help="--part seed: compile and certify only")
    args = ap.parse_args()
    if args.part == "seed":
        seed_main(args)
        return
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

"""Depth-bounded DPDAs and DPDTs as compact Elman/LSTM networks (`method="compact"`) against the
Minsky construction on the bounded machine's product automaton (`method="minsky"`, through
`BoundedPDA.to_dfa`).

    python benchmarks/bench_compact.py [--depths 4,16,64,1000] [--sizes 2,16,128] [--verify]
        [--certify] [--long-samples 1000] [--machines NAME,...] [--sparse auto|yes|no]
        [--compare-sparse N]

One row per (machine, |Σ|, depth m): compact compile time and hidden units (Elman and LSTM), the
bound formula's value, Minsky's units when the product automaton has at most `--max-configs`
configurations (else "would need ≥ N units", from a lower bound on the reachable configurations
that enumerates nothing), and the ratio of compact units to the information floor
⌈log₂(reachable configurations)⌉ (a lower bound on the units of any network whose saturated
units tell the configurations apart). Machines: marked reversal w#w^R and w#φ(w^R) (φ a shift of
the alphabet) over |Σ| symbols, a Dyck-k recogniser (k = |Σ|/2 bracket pairs), Hao et al.'s
boolean formula (fixed alphabet) and a random real-time 5-state DPDA (seed 0).

Columns ``compile s`` (Elman/LSTM), ``form`` (dense `RecurrentNet` or sparse
`SparseRecurrentNet`: ``--sparse auto`` is the construction's own choice, by its memory
estimate) and ``peak MB`` (the process's peak resident memory during the larger of the two
compiles — interpreter, torch and earlier rows' leftovers included, so an upper bound —, from
/proc/self/status VmHWM after resetting it; "?" where the kernel does not offer that). One
small compile runs first, so that no row's time includes first-use costs. ``--compare-sparse N`` compiles each row's Elman
network both ways (where the dense one fits) and compares their decisions and decoded stacks at
every prefix of N busy strings of length 4m + 8.

``--verify`` also runs `pn.verify` at m ≤ 16 (exhaustive to length 10, or to the largest length
whose |Σ|^L strings number at most 200,000 — the column says which —, 1,000 random strings, and
``--long-samples`` strings of length 2,000 that keep the stack busy) and at m = 1000 on the long
strings only, in batches whose states take at most 512 MiB (`_batch_steps`: a network of H
units holds 4·H bytes a position; at m = 1000 over |Σ| = 128 that is 8 strings a batch);
``--certify`` runs `pn.certify` (float32, every length) at m ≤ 16, Elman and LSTM.
Timings are wall clock on this machine and only meant as ratios.
"""

from __future__ import annotations

import argparse
import math
import re
import time
from pathlib import Path

import numpy as np

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.tasks import dusell2021, hao2018, suzgun2019
from pdanet.automata.tasks.dusell2021 import marked_palindrome
from pdanet.verify import strings as S


def _symbols(k: int) -> tuple[str, ...]:
    return tuple(f"s{i}" for i in range(k))


def marked_reversal(k: int) -> pn.DPDA:
    return dusell2021.marked_reversal_machine(_symbols(k))


def marked_phi_reversal(k: int) -> pn.DPDA:
    syms = _symbols(k)
    return marked_palindrome(syms, "#", {x: syms[(i + 1) % k] for i, x in enumerate(syms)},
                             "w_phi_wr")


def dyck_recogniser(k: int) -> pn.DPDA:
    return suzgun2019.dyck_machine(max(1, k // 2))


def boolean_formula(k: int) -> pn.DPDT:
    return hao2018.boolean_formula_machine()


def random_dpda(k: int, states: int = 5, stack: int = 4, seed: int = 0) -> pn.DPDA:
    """A random real-time DPDA: every (state, symbol, top) has a move with probability 0.9 —
    push (of one of `stack` symbols), pop, replace or no-op, uniformly."""
    rng = np.random.default_rng(seed)
    Q, S, G = list(range(states)), _symbols(k), tuple(f"X{i}" for i in range(stack))
    t = {}
    for q in Q:
        for a in S:
            for x in (*G, BOTTOM):
                if rng.random() > 0.9:
                    continue
                op = int(rng.integers(4)) if x is not BOTTOM else int(rng.choice([0, 3]))
                y = G[int(rng.integers(stack))]
                body = {0: (y, x), 1: (), 2: (y,), 3: (x,)}[op]
                t[(q, a, x)] = (int(rng.integers(states)), body)
    return pn.DPDA(Q, S, G, t, 0, accepting=[q for q in Q if rng.random() < 0.5],
                   name=f"random5_k{k}")


MACHINES = {"marked_reversal": marked_reversal, "w#φ(w^R)": marked_phi_reversal,
            "dyck_k": dyck_recogniser, "boolean_formula": boolean_formula,
            "random_5_state": random_dpda}


def config_bound(machine, m: int) -> int:
    """An upper bound on the reachable configurations of ``machine.bounded(m)``:
    |Q| · Σ_{i ≤ m} |Γ|^i."""
    G = len(machine.stack_alphabet)
    return len(machine.states) * sum(G**i for i in range(m + 1))


def reachable(bounded, cap: int) -> int | None:
    """The number of reachable live configurations of `bounded`, or None when above `cap`."""
    try:
        order, _ = bounded.reachable_configs(cap)
    except pn.errors.PdanetError:
        return None
    return len(order)


def _rss_kb(field: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; False where unavailable."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _compile(bounded, target: str, method: str, sparse: bool | None = None):
    """(net, seconds, the process's peak resident memory during the compile in MB, or None)."""
    options = {} if sparse is None else {"sparse": sparse}
    reset = _reset_peak()
    t0 = time.perf_counter()
    net = pn.compile(bounded, target=target, method=method, **options)
    secs = time.perf_counter() - t0
    peak = _rss_kb("VmHWM") if reset else None
    return net, secs, peak / 1024 if peak is not None else None


def _batch_steps(net, budget: int = 512 << 20) -> int:
    """`pn.verify`'s ``max_batch_steps`` keeping a batch's states (4·H bytes a position) within
    ``budget`` — at least one string of the long phase (2,001 positions)."""
    return max(2001, min(1 << 19, budget // (4 * net.hidden_units)))


def compare_sparse(bounded, n: int, seed: int = 0) -> str:
    """Elman compact, dense and sparse, on n busy strings of length 4m + 8: "same" when their
    decisions (readout) and decoded stacks agree at every prefix, else where they differ."""
    length = 4 * bounded.m + 8
    ids, lengths = S.long_strings(bounded, n, length, np.random.default_rng(seed))
    nets = [pn.compile(bounded, target="elman", method="compact", sparse=sp) for sp in (False, True)]
    mask = np.arange(ids.shape[1] + 1)[None, :] <= lengths[:, None]
    out = []
    for net in nets:                              # 25 strings at a time: states are B·T·H floats
        parts = [net.forward(ids[i:i + 25]) for i in range(0, len(ids), 25)]
        out.append((np.concatenate([net.readout(lg) for _, lg in parts]),
                    np.concatenate([net.decode(st)["stack"] for st, _ in parts])))
    (r0, s0), (r1, s1) = out
    bad = int((mask & (r0 != r1)).sum()) + int((mask & (s0 != s1).any(-1)).sum())
    return (f"sparse=dense on {n}×{length}" if bad == 0 else f"sparse≠dense at {bad} positions")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="4,16,64,1000")
    ap.add_argument("--sizes", default="2,16,128")
    ap.add_argument("--max-configs", type=int, default=20_000)
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--certify", action="store_true")
    ap.add_argument("--long-samples", type=int, default=1000)
    ap.add_argument("--machines", default=",".join(MACHINES))
    ap.add_argument("--sparse", choices=("auto", "yes", "no"), default="auto")
    ap.add_argument("--compare-sparse", type=int, default=0)
    args = ap.parse_args()
    depths = [int(x) for x in args.depths.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]
    sparse = {"auto": None, "yes": True, "no": False}[args.sparse]
    print(f"{'machine':<16} {'|Σ|':>4} {'m':>5} {'compile s':>9} {'elman':>8} {'lstm':>8} "
          f"{'bound':>8} {'minsky':>16} {'floor':>7} {'elman/floor':>11} {'form':>6} "
          f"{'peak MB':>7}  verify")
    for target in ("elman", "lstm"):                     # first-use costs, outside the table
        pn.compile(marked_reversal(2).bounded(4), target=target, method="compact", sparse=True)
    seen = set()
    for name in args.machines.split(","):
        make = MACHINES[name]
        for k in sizes:
            machine = make(k)
            key = (name, len(machine.alphabet))
            if key in seen:
                continue
            seen.add(key)
            for m in depths:
                bounded = machine.bounded(m)
                nets, secs, peaks, refused = {}, {}, [], []
                for target in ("elman", "lstm"):
                    try:
                        nets[target], secs[target], p = _compile(bounded, target, "compact",
                                                                 sparse)
                        peaks += [p] if p is not None else []
                    except pn.errors.PdanetError as exc:
                        refused.append(f"{target} refused: {str(exc).split(';')[0]}")
                if "elman" not in nets:
                    print(f"{name:<16} {len(machine.alphabet):>4} {m:>5}  {' | '.join(refused)}")
                    continue
                elman, lstm = nets["elman"], nets.get("lstm")
                n_configs = reachable(bounded, args.max_configs)
                if n_configs is not None:
                    try:
                        minsky = pn.compile(bounded, target="elman", method="minsky")
                        minsky_text = f"{minsky.hidden_units:,}"
                    except pn.errors.PdanetError:  # the dense block is over the limit
                        _, edges = bounded.reachable_configs(args.max_configs)
                        units = len({(v[0], a) for (_, a), v in edges.items()})
                        minsky_text = f"{units:,} (unbuilt)"
                    floor_text = str(math.ceil(math.log2(max(2, n_configs))))
                    floor = int(floor_text)
                else:  # too many to build: Minsky needs a unit per configuration at least
                    minsky_text = f"> {args.max_configs:,}*"
                    floor = math.ceil(math.log2(config_bound(machine, m)))
                    floor_text = f"≤{floor}"
                bound = elman.bound_value if hasattr(elman, "bound_value") else elman.bound
                verdict = ""
                if args.verify:
                    k = len(machine.alphabet)
                    L = 10 if k**10 <= 200_000 else int(math.log(200_000) / math.log(k))
                    for name_t, net in nets.items():
                        t0 = time.perf_counter()
                        rep = pn.verify(bounded, net, max_length=L if m <= 16 else None,
                                        samples=1000 if m <= 16 else 0,
                                        long_samples=args.long_samples, long_length=2000,
                                        max_batch_steps=_batch_steps(net))
                        exh = f"≤{L}" if m <= 16 else "long"
                        verdict += (f"{name_t} {exh}:{'ok' if rep.ok else 'FAILS'} "
                                    f"{time.perf_counter() - t0:.0f}s ")
                if args.certify and m <= 16:
                    for name_t, net in nets.items():
                        t0 = time.perf_counter()
                        cert = pn.certify(bounded, net)
                        ok = "all lengths" if cert.ok and cert.all_lengths else "NOT CERTIFIED"
                        verdict += f"cert {name_t}: {ok} {time.perf_counter() - t0:.1f}s "
                if args.compare_sparse:
                    try:
                        verdict += compare_sparse(bounded, args.compare_sparse) + " "
                    except pn.errors.ResourceError:
                        verdict += "dense form over the limit: not compared "
                lstm_units = f"{lstm.hidden_units:,}" if lstm is not None else "—"
                form = "sparse" if elman.info.get("sparse") else "dense"
                peak_text = f"{max(peaks):.0f}" if peaks else "?"
                secs_text = "/".join(f"{secs[t]:.2f}" for t in ("elman", "lstm") if t in secs)
                print(f"{name:<16} {len(machine.alphabet):>4} {m:>5} {secs_text:>9} "
                      f"{elman.hidden_units:>8,} {lstm_units:>8} {bound!s:>8} "
                      f"{minsky_text:>16} {floor_text:>7} {elman.hidden_units / floor:>11.2f} "
                      f"{form:>6} {peak_text:>7}  {verdict}{' | '.join(refused)}", flush=True)
    print("* more reachable configurations than --max-configs: the product automaton is not "
          "built; Minsky needs at least one unit per configuration.\n"
          "≤ the floor from the upper bound |Q|·Σ_{i≤m}|Γ|^i on the configurations.")


if __name__ == "__main__":
    main()

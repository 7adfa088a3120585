"""Depth-bounded DPDAs and DPDTs as compact Elman/LSTM networks (`method="compact"`) against the
Minsky construction on the bounded machine's product automaton (`method="minsky"`, through
`BoundedPDA.to_dfa`).

    python benchmarks/bench_compact.py [--depths 4,16,64,1000] [--sizes 2,16,128] [--verify]
        [--certify] [--long-samples 1000]

One row per (machine, |Σ|, depth m): compact compile time and hidden units (Elman and LSTM), the
bound formula's value, Minsky's units when the product automaton has at most `--max-configs`
configurations (else "would need ≥ N units", from a lower bound on the reachable configurations
that enumerates nothing), and the ratio of compact units to the information floor
⌈log₂(reachable configurations)⌉ (a lower bound on the units of any network whose saturated
units tell the configurations apart). Machines: marked reversal w#w^R and w#φ(w^R) (φ a shift of
the alphabet) over |Σ| symbols, a Dyck-k recogniser (k = |Σ|/2 bracket pairs), Hao et al.'s
boolean formula (fixed alphabet) and a random real-time 5-state DPDA (seed 0).

``--verify`` also runs `pn.verify` at m ≤ 16 (exhaustive to length 10, or to the largest length
whose |Σ|^L strings number at most 200,000 — the column says which —, 1,000 random strings, and
``--long-samples`` strings of length 2,000 that keep the stack busy) and at m = 1000 on the long
strings only; ``--certify`` runs `pn.certify` (float32, every length) at m ≤ 16, Elman and LSTM.
Timings are wall clock on this machine and only meant as ratios.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import pdanet as pn
from pdanet.automata.alphabet import BOTTOM
from pdanet.automata.tasks import dusell2021, hao2018, suzgun2019
from pdanet.automata.tasks.dusell2021 import marked_palindrome


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


def _compile(bounded, target: str, method: str):
    t0 = time.perf_counter()
    net = pn.compile(bounded, target=target, method=method)
    return net, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="4,16,64,1000")
    ap.add_argument("--sizes", default="2,16,128")
    ap.add_argument("--max-configs", type=int, default=20_000)
    ap.add_argument("--verify", action="store_true")
    ap.add_argument("--certify", action="store_true")
    ap.add_argument("--long-samples", type=int, default=1000)
    args = ap.parse_args()
    depths = [int(x) for x in args.depths.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"{'machine':<16} {'|Σ|':>4} {'m':>5} {'compile s':>9} {'elman':>8} {'lstm':>8} "
          f"{'bound':>8} {'minsky':>16} {'floor':>7} {'elman/floor':>11}  verify")
    seen = set()
    for name, make in MACHINES.items():
        for k in sizes:
            machine = make(k)
            key = (name, len(machine.alphabet))
            if key in seen:
                continue
            seen.add(key)
            for m in depths:
                bounded = machine.bounded(m)
                nets, secs, refused = {}, 0.0, []
                for target in ("elman", "lstm"):
                    try:
                        nets[target], t = _compile(bounded, target, "compact")
                        secs = t if target == "elman" else secs
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
                                        long_samples=args.long_samples, long_length=2000)
                        exh = f"≤{L}" if m <= 16 else "long"
                        verdict += (f"{name_t} {exh}:{'ok' if rep.ok else 'FAILS'} "
                                    f"{time.perf_counter() - t0:.0f}s ")
                if args.certify and m <= 16:
                    for name_t, net in nets.items():
                        t0 = time.perf_counter()
                        cert = pn.certify(bounded, net)
                        ok = "all lengths" if cert.ok and cert.all_lengths else "NOT CERTIFIED"
                        verdict += f"cert {name_t}: {ok} {time.perf_counter() - t0:.1f}s "
                lstm_units = f"{lstm.hidden_units:,}" if lstm is not None else "—"
                print(f"{name:<16} {len(machine.alphabet):>4} {m:>5} {secs:>9.3f} "
                      f"{elman.hidden_units:>8,} {lstm_units:>8} {bound!s:>8} "
                      f"{minsky_text:>16} {floor_text:>7} {elman.hidden_units / floor:>11.2f}  "
                      f"{verdict}{' | '.join(refused)}", flush=True)
    print("* more reachable configurations than --max-configs: the product automaton is not "
          "built; Minsky needs at least one unit per configuration.\n"
          "≤ the floor from the upper bound |Q|·Σ_{i≤m}|Γ|^i on the configurations.")


if __name__ == "__main__":
    main()

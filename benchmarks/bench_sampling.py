"""Exact-length sampling of long in-domain strings: the task samplers at length ~2,000.

    python benchmarks/bench_sampling.py [--n 200] [--length 2000]

For each grammar-sampled task (length-conditioned sampling from its PCFG's counting tables) and
each Dyck-k (uniform over the words of a length, by ballot numbers): the time to build the
tables once and the time per string, and the ratio of the per-string time to the length (a flat
µs/symbol across lengths means sampling is linear in the length). This is what the full-size
acceptance runs (1,000 strings of length 2,000 per task) spend before any checking.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import pdanet as pn
from pdanet.automata import tasks as T

GRAMMARS = {
    "parenthesis_prediction": T.parenthesis_grammar,
    "boolean_formula": T.boolean_grammar,
    "w_phi_wr": T.w_phi_wr_grammar,
    "hardest_cfl": T.hardest_cfl_grammar,
}
ODD = {"w_phi_wr", "boolean_formula"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="strings per task")
    ap.add_argument("--length", type=int, default=2000)
    args = ap.parse_args()
    print(f"{'task':<24}{'length':>7}{'table s':>9}{'ms/string':>11}{'µs/symbol':>11}")
    for name, grammar in GRAMMARS.items():
        for L in (args.length // 4, args.length):
            L = L - 1 if name in ODD else L
            t0 = time.perf_counter()
            table = grammar().length_table(L)
            t1 = time.perf_counter()
            rng = np.random.default_rng(0)
            for _ in range(args.n):
                table.sample(rng, L)
            per = (time.perf_counter() - t1) / args.n
            print(f"{name:<24}{L:>7}{t1 - t0:>9.3f}{per * 1e3:>11.2f}{per / L * 1e6:>11.2f}")
    for k in (2, 3, 6):
        for L in (args.length // 4, args.length):
            t0 = time.perf_counter()
            pn.tasks.sample(f"dyck{k}", args.n, L, rng=0)
            per = (time.perf_counter() - t0) / args.n
            print(f"{'dyck' + str(k):<24}{L:>7}{'-':>9}{per * 1e3:>11.2f}{per / L * 1e6:>11.2f}")


if __name__ == "__main__":
    main()

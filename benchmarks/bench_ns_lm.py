"""DuSell & Chiang's tasks: the RNS-RNN compiled from each task's probabilistic real-time PDA
(`pdanet.constructions.ns_lm`), with the exact head and with the paper's softmax head.

    python benchmarks/bench_ns_lm.py [--samples 100] [--lengths 40 80] [--dtype float32]
                                     [--hardest-lengths 12 24] [--tasks …]

Strings are drawn as the paper does (§4: a length uniform over the valid lengths of the range,
then the PCFG given the length). One row per task, in nats per symbol (one EOS per string):

- ``bound``: the paper's lower bound, the true distribution's cross-entropy
  (`cross_entropy_lower_bound`: p(w) = p_G(w | |w|) / number of lengths);
- ``exact|len``: the exact head's cross-entropy given the length, the network's ln p(w) minus
  ln P_G(|w|) (the grammar's length table) plus ln(1 / number of lengths) — the same
  distribution, so it should equal ``bound`` (``|Δ|``);
- ``exact``, ``pcfg``: the exact head's plain LM cross-entropy and the PCFG's own
  (−Σ ln p_G(w) by the inside algorithm), which it should equal;
- ``KL soft``: the paper's softmax head (weights ln P, floor −20), as its expected gap to the
  true next-symbol distribution at the sampled prefixes: Σ_prefixes KL(p_exact ‖ p_softmax) per
  symbol (the cross-entropy it loses if the next symbol follows the task's PDA; ≥ 0, 0 for an
  exact head). Comparing plain cross-entropies on these strings would mix in the length prior:
  they are drawn given a length range, which no head's EOS probability knows; ``KL soft*``: the
  best floor of −2, −5, −10, −20; ``KL fit``: the best affine softmax head on the same readings,
  fitted by L-BFGS on another sample of the same size and evaluated here;
- ``s``: seconds to compile and run the stack on the strings; ``floor*``: the best floor.

The stack is run once per task; the heads are applied to its readings (`NSLMNet.log_probs`).

The hardest CFL (`hardest_cfl_lm`: 18 states, stack symbols ( and [, p(w) ∝ weight_G(w)·λ^|w|)
runs on ``--hardest-lengths`` (default 12–24): its stack has (Q·G)² = 108² cells per chart
entry under the paper's bottom encoding against at most 6² for the other tasks, about a minute
for 100 strings there on 2 CPU cores and far more at 40–80. Its row also prints the relative
residual of the Newton solve of the completion weights (``residual``).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from pdanet.automata.tasks.dusell2021 import HARDEST_LENGTH_WEIGHT, hardest_cfl_weighted_pda
from pdanet.automata.tasks.probability import cross_entropy_lower_bound, inside, push_weights
from pdanet.automata.tasks.sampling import grammar_sampler
from pdanet.constructions.base import as_dtype
from pdanet.constructions.ns_lm import LM_TASKS, compile_ns_lm, dusell_lm_machine, sum_log_probs

FLOORS = (-2, -5, -10, -20)


def readings(net, strings, batch: int = 50):
    """[(ids, lengths, states)] per batch: the stack's readings, computed once."""
    out = []
    for lo in range(0, len(strings), batch):
        ids, lengths = net.encode(strings[lo:lo + batch])
        with torch.no_grad():
            states, _ = net.module.ns(ids)
        out.append((ids, lengths, states))
    return out


def head_ce(module, runs, symbols: int) -> tuple[float, np.ndarray]:
    with torch.no_grad():
        lp = np.concatenate([sum_log_probs(module.log_probs(s), ids, n) for ids, n, s in runs])
    return float(-lp.sum() / symbols), lp


def excess(module, runs, exact_module, symbols: int, grad: bool = False):
    """Σ over the strings' prefixes (every position up to EOS) of KL(p_exact(· | prefix) ||
    p_head(· | prefix)), per symbol: the head's expected cross-entropy gap against the true next
    symbol, at the paper's prefixes (0 for an exact head)."""
    total = torch.zeros((), dtype=torch.float64)
    for ids, lengths, states in runs:
        with torch.no_grad():
            lp_true = exact_module.log_probs(states).double()
        lp = module.log_probs(states.to(module.head.weight.dtype)).double()
        mask = torch.arange(ids.shape[1] + 1)[None, :] <= torch.as_tensor(lengths)[:, None]
        p = lp_true.exp()
        kl = torch.where(p > 0, p * (lp_true - lp), torch.zeros_like(p)).sum(-1)
        total = total + torch.where(mask, kl, torch.zeros_like(kl)).sum()
    out = total / symbols
    return out if grad else float(out.detach())


def fit_head(module, runs, exact_module, symbols: int, steps: int = 100) -> None:
    """Fit the softmax head's weight and bias (an affine map of the readings) by L-BFGS to the
    exact next-symbol distributions at `runs`' prefixes (`excess`: convex in the head, the
    readings being fixed), from the ln P initialisation."""
    opt = torch.optim.LBFGS([module.head.weight, module.head.bias], max_iter=steps,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = excess(module, runs, exact_module, symbols, grad=True)
        loss.backward()
        return loss

    opt.step(closure)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--lengths", type=int, nargs=2, default=(40, 80))
    ap.add_argument("--hardest-lengths", type=int, nargs=2, default=(12, 24))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", nargs="*", default=list(LM_TASKS))
    args = ap.parse_args()
    dtype = as_dtype(args.dtype)
    print(f"{args.samples} strings per task, lengths {args.lengths[0]}..{args.lengths[1]} "
          f"(hardest_cfl: {args.hardest_lengths[0]}..{args.hardest_lengths[1]}), {args.dtype}; "
          "nats/symbol")
    cols = ("task", "bound", "exact|len", "|Δ|", "exact", "pcfg", "KL soft", "KL soft*",
            "KL fit", "s", "floor*")
    print(f"{cols[0]:>17} " + " ".join(f"{c:>10}" for c in cols[1:]))
    for task in args.tasks:
        lo, hi = args.hardest_lengths if task == "hardest_cfl" else args.lengths
        m, g = dusell_lm_machine(task)
        table = g.length_table(hi, weighted=True)
        lengths = [n for n in range(lo, hi + 1) if math.isfinite(float(table.total(n)))]
        rng = np.random.default_rng(args.seed)
        test = grammar_sampler(g, args.samples, lengths, rng)
        train = grammar_sampler(g, args.samples, lengths, rng)
        symbols = sum(len(s) + 1 for s in test)
        t0 = time.perf_counter()
        exact = compile_ns_lm(m, dtype=dtype)
        runs = readings(exact, test)
        secs = time.perf_counter() - t0
        ce_exact, lp = head_ce(exact.module, runs, symbols)
        log_len = np.array([float(table.total(len(s))) for s in test])
        given_len = float((-(lp - log_len).sum() + len(test) * math.log(len(lengths))) / symbols)
        bound = cross_entropy_lower_bound(g, test, len(lengths))
        pcfg = -sum(math.log(inside(g, s)) for s in test) / symbols
        kl = {f: excess(compile_ns_lm(m, dtype=dtype, head="softmax", floor=f).module, runs,
                        exact.module, symbols) for f in FLOORS}
        fitted = compile_ns_lm(m, dtype=torch.float64, head="softmax").module
        train_runs = readings(exact, train)
        fit_head(fitted, train_runs, exact.module, sum(len(s) + 1 for s in train))
        kl_fit = excess(fitted, runs, exact.module, symbols)
        row = (bound, given_len, abs(given_len - bound), ce_exact, pcfg, kl[-20],
               min(kl.values()), kl_fit)
        print(f"{task:>17} " + " ".join(f"{v:10.1e}" if i == 2 else f"{round(v, 6) + 0.0:10.6f}"
                                        for i, v in enumerate(row))
              + f" {secs:10.1f} {min(kl, key=kl.get):>10}")
        if task == "hardest_cfl":
            _, residual = push_weights(hardest_cfl_weighted_pda(HARDEST_LENGTH_WEIGHT))
            print(f"{'':>17} residual of the completion weights (Newton): {residual:.1e}; "
                  f"exact head − bound: {given_len - bound:+.1e}, softmax head's CE − exact "
                  f"head's: {head_ce(compile_ns_lm(m, dtype=dtype, head='softmax').module, runs, symbols)[0] - ce_exact:+.2e}")


if __name__ == "__main__":
    main()

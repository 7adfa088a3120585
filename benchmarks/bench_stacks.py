"""Time the stratified stack (Grefenstette et al.) against its cost formula and the superposition
stack.

For B = 32, width m = 32 and T in {64, 128, 256, 512}: the forward pass (readings of T steps) and
forward + backward, in float32. Each time is printed with its ratio to the cost formula
B·T²·m/2 multiply-adds (nanoseconds per multiply-add) and its ratio to the superposition stack
(Joulin & Mikolov, no depth limit) on the same actions, whose own times close the row (its
readings update only the live band, min(t+1, T−t) cells at step t: about B·T²·m/4 multiply-adds
for each of its three terms). Side by side with the authors' code: bench_peers.py.

    OMP_NUM_THREADS=2 python benchmarks/bench_stacks.py [--T 64 128 256 512] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import torch

from pdanet.constructions.stacks import (
    NeuralStack,
    StackActions,
    SuperpositionActions,
    SuperpositionStack,
)


def best_time(fn, repeats: int) -> float:
    fn()                                                  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench(T: int, B: int, m: int, repeats: int, device: str) -> dict[str, float]:
    gen = torch.Generator().manual_seed(0)
    push = torch.rand(B, T, generator=gen).to(device).requires_grad_(True)
    pop = torch.rand(B, T, generator=gen).to(device).requires_grad_(True)
    value = torch.randn(B, T, m, generator=gen).to(device).requires_grad_(True)
    ops = torch.softmax(torch.randn(B, T, 3, generator=gen), -1).to(device).requires_grad_(True)
    stratified, superposition = NeuralStack(), SuperpositionStack()

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def run(module, actions, backward: bool):
        def go():
            if backward:
                module(actions).sum().backward()
            else:
                with torch.no_grad():
                    module(actions)
            sync()
        return go

    s_act, p_act = StackActions(push, pop, value), SuperpositionActions(ops, value)
    return {
        "strat_fwd": best_time(run(stratified, s_act, False), repeats),
        "strat_fb": best_time(run(stratified, s_act, True), repeats),
        "super_fwd": best_time(run(superposition, p_act, False), repeats),
        "super_fb": best_time(run(superposition, p_act, True), repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--T", type=int, nargs="+", default=[64, 128, 256, 512])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--keep-denormals", action="store_true",
                        help="do not flush denormal floats to zero (deep superposition cells decay "
                             "into denormals, which are very slow on CPUs)")
    args = parser.parse_args()
    if not args.keep_denormals:
        torch.set_flush_denormal(True)
    B, m = args.batch, args.width
    print(f"B={B} width={m} float32 device={args.device} threads={torch.get_num_threads()} "
          f"flush_denormal={not args.keep_denormals}")
    print(f"{'T':>5} {'fwd s':>9} {'ns/MAC':>7} {'x super':>8} {'fwd+bwd s':>10} {'ns/MAC':>7} "
          f"{'x super':>8} {'super fwd s':>12} {'super f+b s':>12}")
    for T in args.T:
        r = bench(T, B, m, args.repeats, args.device)
        macs = B * T * T * m / 2                      # cost formula: B·T²·width/2 multiply-adds
        print(f"{T:>5} {r['strat_fwd']:>9.4f} {1e9 * r['strat_fwd'] / macs:>7.3f} "
              f"{r['strat_fwd'] / r['super_fwd']:>8.2f} {r['strat_fb']:>10.4f} "
              f"{1e9 * r['strat_fb'] / macs:>7.3f} {r['strat_fb'] / r['super_fb']:>8.2f} "
              f"{r['super_fwd']:>12.4f} {r['super_fb']:>12.4f}")


if __name__ == "__main__":
    main()

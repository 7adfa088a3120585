"""Benchmark of the nondeterministic stack (DuSell & Chiang 2021): forward and forward+backward.

Times are the best of 5 runs (CPU seconds of this process on the CPU, see `timed`).
Unlimited stack, (|Q|, |Γ|) ∈ {(2, 3), (3, 3)} (|Γ| counts ⊥), B = 8, T ∈ {32, 64, 128}: seconds
and nanoseconds per unit of the cost formula B·(|Q|³|Γ|²T³/3 + |Q|³|Γ|³T²/2) (the multiply-adds
of Lang's algorithm); a flat ratio means the time follows the formula.
Windowed stack (§5.1, D = 10), (2, 3), B = 8, T ∈ {128, 256, 512, 1024}: seconds, the ratio to
the time at T/2 (linear in T means ≤ 2; the sizes are timed in interleaved rounds so that a
shared machine's load falls on all of them alike), and the peak memory allocated by torch during the
forward and during forward+backward. Peak memory is accounted from the profiler's allocation
events (tracemalloc does not see torch's allocator): op allocations at their start, frees at
theirs, the running maximum of the sum.

Run: OMP_NUM_THREADS=1 python benchmarks/bench_ns.py [--threads N] [--device cuda]
"""

from __future__ import annotations

import argparse
import time

import torch

from pdanet.constructions.stacks.ns import NondeterministicStack


def cost(B: int, Q: int, G: int, T: int) -> float:
    return B * (Q ** 3 * G ** 2 * T ** 3 / 3 + Q ** 3 * G ** 3 * T ** 2 / 2)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str, repeats: int = 5) -> float:
    """Best of `repeats`: wall-clock seconds on a GPU; on the CPU the process's CPU seconds
    (with one thread the same as wall-clock on an idle machine, and much steadier on a shared
    one, where other processes' time slices would otherwise count)."""
    fn()                                                   # warm-up
    clock = time.perf_counter if device.startswith("cuda") else time.process_time
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        t0 = clock()
        fn()
        _sync(device)
        best = min(best, clock() - t0)
    return best


def peak_bytes(fn) -> int:
    """Peak bytes allocated by torch (CPU) while `fn` runs, from the profiler's events."""
    with torch.profiler.profile(profile_memory=True) as prof:
        fn()
    events = sorted((e.time_range.start,
                     e.cpu_memory_usage if e.name == "[memory]" else e.self_cpu_memory_usage)
                    for e in prof.events())
    cur = peak = 0
    for _, b in events:
        cur += b
        peak = max(peak, cur)
    return peak


def peak_bytes_cuda(fn) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def case(B: int, Q: int, G: int, T: int, window: int | None, device: str):
    """(forward, forward+backward) closures for one size."""
    net = NondeterministicStack(Q, G, window=window)
    x = torch.randn(B, T, Q, G, Q, 2 * G + 1, device=device)

    def fwd():
        with torch.no_grad():
            net(x)

    def fwd_bwd():
        y = x.clone().requires_grad_()
        net(y).log_norm[:, -1].sum().backward()

    return fwd, fwd_bwd


def interleaved(cases: dict, device: str, rounds: int) -> dict:
    """Best time of each case over `rounds` rounds that run every case once in turn, so that
    all sizes see the same share of a shared machine's quiet and busy moments."""
    best = {k: float("inf") for k in cases}
    for fn in cases.values():
        fn()                                               # warm-up
    for _ in range(rounds):
        for k, fn in cases.items():
            best[k] = min(best[k], timed(fn, device, repeats=1))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    B = 8
    clock = "wall-clock" if args.device.startswith("cuda") else "process CPU"
    print(f"device {args.device}, {torch.get_num_threads()} threads, B = {B}, {clock} seconds")
    print("unlimited stack")
    print(f"{'Q':>2} {'G':>2} {'T':>5} {'fwd s':>8} {'fwd+bwd s':>10} {'fwd ns/unit':>12} "
          f"{'f+b ns/unit':>12}")
    for Q, G in [(2, 3), (3, 3)]:
        for T in (32, 64, 128):
            fwd, fwd_bwd = case(B, Q, G, T, None, args.device)
            f, fb = timed(fwd, args.device), timed(fwd_bwd, args.device)
            c = cost(B, Q, G, T)
            print(f"{Q:>2} {G:>2} {T:>5} {f:8.3f} {fb:10.3f} {1e9 * f / c:12.3f} "
                  f"{1e9 * fb / c:12.3f}")
    print("windowed stack, D = 10, Q = 2, G = 3 (sizes interleaved, best of 7 rounds)")
    print(f"{'T':>5} {'fwd s':>8} {'x prev':>7} {'fwd+bwd s':>10} {'x prev':>7} "
          f"{'peak fwd MiB':>13} {'peak f+b MiB':>13}")
    Ts = (128, 256, 512, 1024)
    cases = {}
    for T in Ts:
        cases[T, "f"], cases[T, "fb"] = case(B, 2, 3, T, 10, args.device)
    best = interleaved(cases, args.device, 7)
    peak = peak_bytes_cuda if args.device.startswith("cuda") else peak_bytes
    for j, T in enumerate(Ts):
        f, fb = best[T, "f"], best[T, "fb"]
        rf = f"{f / best[Ts[j - 1], 'f']:7.2f}" if j else f"{'':>7}"
        rb = f"{fb / best[Ts[j - 1], 'fb']:7.2f}" if j else f"{'':>7}"
        mf, mfb = peak(cases[T, "f"]), peak(cases[T, "fb"])
        print(f"{T:>5} {f:8.3f} {rf} {fb:10.3f} {rb} {mf / 2 ** 20:13.2f} {mfb / 2 ** 20:13.2f}")


if __name__ == "__main__":
    main()

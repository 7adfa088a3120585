"""Benchmark of the nondeterministic stack (DuSell & Chiang 2021): forward and forward+backward.

Times are medians over interleaved rounds (CPU seconds of this process on the CPU, see
`timed`; every round runs every size once in turn, so that a shared machine's load falls on all
sizes alike). Set the thread count with --threads (default 1) and keep it fixed when comparing.
Unlimited stack, (|Q|, |Γ|) ∈ {(2, 3), (3, 3)} (|Γ| counts ⊥), B = 8, T ∈ {32, 64, 128}: seconds
and nanoseconds per unit of the cost formula B·(|Q|³|Γ|²T³/3 + |Q|³|Γ|³T²/2) (the multiply-adds
of Lang's algorithm); a flat ratio means the time follows the formula.
Windowed stack (§5.1, D = 10), (|Q|, |Γ|) ∈ {(2, 3), (3, 3)}, B = 8, T ∈ {128, 256, 512, 1024}:
forward and forward+backward seconds, the ratio t(T)/t(T/2) (the median over rounds of the
ratio within a round; linear in T means 2, or a little less for the fixed per-call work; on a
shared machine expect ±10% noise), and the peak memory of the forward (without gradients) and
of forward+backward with its ratio to the peak at T/2. On the CPU the peak is the growth of the
process's resident set over one call (`peak_growth`), each size in a fresh process after its
inputs are made, with glibc told to map every block of 64 KiB or more on its own, so that a
freed tensor leaves the resident set at once and the peak is that of the live tensors (the
profiler's per-op memory records count a free twice when it happens
inside a Python autograd function, so they are not used); on a GPU it is torch's peak
allocation.

Run: OMP_NUM_THREADS=1 python benchmarks/bench_ns.py [--threads N] [--rounds R]
     [--part all|unlimited|windowed] [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from pdanet.constructions.stacks.ns import NondeterministicStack


def cost(B: int, Q: int, G: int, T: int) -> float:
    return B * (Q ** 3 * G ** 2 * T ** 3 / 3 + Q ** 3 * G ** 3 * T ** 2 / 2)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str) -> float:
    """Seconds of one call: wall-clock on a GPU; on the CPU the process's CPU seconds (with one
    thread the same as wall-clock on an idle machine, and much steadier on a shared one, where
    other processes' time slices would otherwise count)."""
    clock = time.perf_counter if device.startswith("cuda") else time.process_time
    _sync(device)
    t0 = clock()
    fn()
    _sync(device)
    return clock() - t0


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def peak_growth(fn) -> int:
    """Bytes by which the resident set peaks above its level before ``fn`` (Linux: the peak
    is reset through /proc/self/clear_refs, then read from VmHWM)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - before) * 1024


def peak_bytes_cpu(B: int, Q: int, G: int, T: int, window: int | None, part: str) -> int:
    """`peak_growth` of one call of `case`'s ``part`` ("f" or "fb"), in a fresh process (so that
    memory the allocator kept from other sizes does not hide the growth)."""
    here = str(Path(__file__).parent)
    code = (f"import sys; sys.path.insert(0, {here!r}); import bench_ns as b, torch; "
            f"torch.set_num_threads(1); f = dict(zip('f fb'.split(), "
            f"b.case({B}, {Q}, {G}, {T}, {window}, 'cpu')))[{part!r}]; "
            f"b.case(2, {Q}, {G}, 8, {window}, 'cpu')[1](); print(b.peak_growth(f))")
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")   # tensors ≥ 64 KiB: own mappings
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env)
    return int(out.stdout.split()[-1])


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
    """Times of each case over `rounds` rounds that run every case once in turn, so that all
    sizes see the same share of a shared machine's quiet and busy moments."""
    times: dict = {k: [] for k in cases}
    for fn in cases.values():
        fn()                                               # warm-up
    for _ in range(rounds):
        for k, fn in cases.items():
            times[k].append(timed(fn, device))
    return times


def unlimited(B: int, device: str, rounds: int) -> None:
    print("unlimited stack")
    print(f"{'Q':>2} {'G':>2} {'T':>5} {'fwd s':>8} {'fwd+bwd s':>10} {'fwd ns/unit':>12} "
          f"{'f+b ns/unit':>12}")
    for Q, G in [(2, 3), (3, 3)]:
        cases = {}
        for T in (32, 64, 128):
            cases[T, "f"], cases[T, "fb"] = case(B, Q, G, T, None, device)
        med = {k: statistics.median(v) for k, v in interleaved(cases, device, rounds).items()}
        for T in (32, 64, 128):
            f, fb = med[T, "f"], med[T, "fb"]
            c = cost(B, Q, G, T)
            print(f"{Q:>2} {G:>2} {T:>5} {f:8.3f} {fb:10.3f} {1e9 * f / c:12.3f} "
                  f"{1e9 * fb / c:12.3f}")


def windowed(B: int, device: str, rounds: int, D: int = 10) -> None:
    """Median seconds; "x prev" for times is the median over rounds of t(T)/t(T/2) within the
    round (the two sizes ran moments apart), for memory the plain ratio."""
    Ts = (128, 256, 512, 1024)
    for Q, G in [(2, 3), (3, 3)]:
        print(f"windowed stack, D = {D}, Q = {Q}, G = {G} (sizes interleaved, {rounds} rounds; "
              f"x prev = ratio to T/2)")
        print(f"{'T':>5} {'fwd s':>8} {'x prev':>7} {'fwd+bwd s':>10} {'x prev':>7} "
              f"{'peak fwd MiB':>13} {'x prev':>7} {'peak f+b MiB':>13} {'x prev':>7}")
        cases = {}
        for T in Ts:
            cases[T, "f"], cases[T, "fb"] = case(B, Q, G, T, D, device)
        times = interleaved(cases, device, rounds)
        if device.startswith("cuda"):
            mem = {(T, k): peak_bytes_cuda(cases[T, k]) for T in Ts for k in ("f", "fb")}
        else:
            mem = {(T, k): peak_bytes_cpu(B, Q, G, T, D, k) for T in Ts for k in ("f", "fb")}
        for j, T in enumerate(Ts):
            cols = []
            for k in ("f", "fb"):
                r = statistics.median(a / b for a, b in zip(times[T, k], times[Ts[j - 1], k]))
                rs = f"{r:7.2f}" if j else f"{'':>7}"
                cols.append(f"{statistics.median(times[T, k]):{8 if k == 'f' else 10}.3f} {rs}")
            for k in ("f", "fb"):
                rs = f"{mem[T, k] / mem[Ts[j - 1], k]:7.2f}" if j else f"{'':>7}"
                cols.append(f"{mem[T, k] / 2 ** 20:13.2f} {rs}")
            print(f"{T:>5} " + " ".join(cols))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--part", choices=("all", "unlimited", "windowed"), default="all")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    B = 8
    clock = "wall-clock" if args.device.startswith("cuda") else "process CPU"
    print(f"device {args.device}, {torch.get_num_threads()} threads, B = {B}, {clock} seconds")
    if args.part in ("all", "unlimited"):
        unlimited(B, args.device, args.rounds)
    if args.part in ("all", "windowed"):
        windowed(B, args.device, args.rounds)


if __name__ == "__main__":
    main()

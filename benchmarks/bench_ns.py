"""Benchmark of the nondeterministic stack (DuSell & Chiang 2021): forward and forward+backward.

The unlimited and windowed parts run the default (the paper's) bottom convention.

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

Side by side with the authors' code (``--part peers``): the memory-limited stack
(`LimitedNondeterministicStack`, log semiring, block size 128) of github.com/bdusell/
nondeterministic-stack-rnn at tag ``iclr2022`` (the RNS-RNN paper's code: our
``bottom="paper"``, the default) and at ``main`` (their 2023 code with its bottom-symbol change:
our ``bottom="reachable"``), on identical random log actions (float32; ``--peer-dtype float64``
for the exactness check), RNS reading, D = 10, B = 8: median ms of the forward (no gradients)
and of forward+backward (the loss Σ readings·w), the ratio theirs / ours (the median over
rounds of the ratio within a round: the four calls of a round run in turn), and the largest
|reading| and |gradient| differences. The peers are looked for under ``--peers DIR`` (default
/tmp/peers): ``DIR/ns-iclr2022/src`` and ``DIR/nondeterministic-stack-rnn/src`` (archives of
those revisions), with torch_semiring_einsum (and its pynvml import) importable or under
``DIR/_site``; a missing peer is skipped with a line saying how to get it.

Run: OMP_NUM_THREADS=1 python benchmarks/bench_ns.py [--threads N] [--rounds R]
     [--part all|unlimited|windowed|peers] [--device cuda] [--peers DIR]
     [--peer all|iclr2022|2023] [--peer-dtype float32|float64]
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


# peer name -> (archive folder under --peers, git tag, our bottom convention that it computes)
PEERS = {"iclr2022": ("ns-iclr2022", "iclr2022", "paper"),
         "2023": ("nondeterministic-stack-rnn", "main", "reachable")}
GET_PEER = ("get it with: git clone https://github.com/bdusell/nondeterministic-stack-rnn N && "
            "mkdir -p {d}/{folder} && git -C N archive {tag} | tar -x -C {d}/{folder} "
            "&& pip install --no-deps --target {d}/_site torch-semiring-einsum==1.2.0 "
            "nvidia-ml-py")


def load_peer(peers: str, name: str):
    """A function (log actions (B, T, Q, G, Q, 2G+1), D) → readings (B, T, Q·G) of steps 1..T
    running the authors' windowed stack, or a string saying why it is not there."""
    folder = PEERS[name][0]
    src = Path(peers) / folder / "src"
    pkg = "nsrnn/models" if name == "iclr2022" else "stack_rnn_models"
    if not (src / pkg / "limited_nondeterministic_stack.py").exists():
        return f"not found: {src}/{pkg}/limited_nondeterministic_stack.py"
    for mod in [m for m in sys.modules if m.split(".")[0] == "torch_rnn_tools"]:
        del sys.modules[mod]                           # both archives ship their own copy
    sys.path[:] = [p for p in sys.path if not p.endswith("/src") or p == str(src)]
    for extra in (str(Path(peers) / "_site"), str(src)):
        if extra not in sys.path:
            sys.path.insert(0, extra)
    try:
        if name == "iclr2022":
            from nsrnn.models.limited_nondeterministic_stack import (
                LimitedNondeterministicStack,
                LimitedNondeterministicStackRNN,
            )
            from nsrnn.semiring import log
        else:
            from lib.semiring import log  # type: ignore[import-not-found]
            from stack_rnn_models.limited_nondeterministic_stack import (  # type: ignore
                LimitedNondeterministicStack,
            )
    except ImportError as exc:
        return f"not importable ({exc})"

    def run(x: torch.Tensor, D: int, block: int = 128) -> torch.Tensor:
        B, T, Q, G = x.shape[:4]
        if name == "iclr2022":     # their initial chart: γ = 1 (log 0), α[0] = 1 at (q0, ⊥)
            gamma = torch.zeros((B, D - 1, D - 1, Q, G, Q, G), dtype=x.dtype, device=x.device)
            alpha = torch.full((B, D, Q, G), float("-inf"), dtype=x.dtype, device=x.device)
            alpha[:, -1, 0, 0] = 0.0
            init = LimitedNondeterministicStackRNN.InitialStackState(gamma, alpha, log)
            stack = LimitedNondeterministicStack(Q, G, T, D, True, True, init, log, block,
                                                 x.dtype, x.device)
        else:
            stack = LimitedNondeterministicStack(B, Q, G, T + 1, D, True, None, log, block,
                                                 x.dtype, x.device)
        out = []
        for t in range(T):
            a = x[:, t]
            stack.update(a[..., :G], a[..., G:2 * G], a[..., 2 * G])
            out.append(stack.reading())
        return torch.stack(out, 1)

    return run


def peers(peers_dir: str, device: str, rounds: int, dtype: torch.dtype, D: int = 10,
          B: int = 8, only: str = "all") -> None:
    for name, (folder, tag, bottom) in PEERS.items():
        if only not in ("all", name):
            continue
        print(f"windowed stack against the authors' ({tag}: LimitedNondeterministicStack, ours "
              f"with bottom={bottom!r}), D = {D}, B = {B}, {str(dtype)[6:]}, RNS reading, "
              f"median ms over {rounds} rounds, x = theirs / ours")
        theirs = load_peer(peers_dir, name)
        if isinstance(theirs, str):
            print(f"  skipped: the authors' code is {theirs}; "
                  + GET_PEER.format(d=peers_dir, folder=folder, tag=tag))
            continue
        print(f"{'Q':>2} {'G':>2} {'T':>5} {'fwd ours':>9} {'fwd theirs':>11} {'x':>6} "
              f"{'f+b ours':>9} {'f+b theirs':>11} {'x':>6} {'max |Δ reading|':>16} "
              f"{'max |Δ grad|':>13}")
        for Q, G, T in [(2, 3, 128), (3, 3, 128), (2, 3, 256)]:
            gen = torch.Generator().manual_seed(Q * 1000 + T)
            la = torch.randn(B, T, Q, G, Q, 2 * G + 1, generator=gen, dtype=dtype).to(device)
            w = torch.rand(B, T, Q * G, generator=gen, dtype=dtype).to(device)
            net = NondeterministicStack(Q, G, window=D, bottom=bottom)

            def ours_f(net=net, la=la, B=B, T=T):
                with torch.no_grad():
                    return net(la).reading[:, 1:].reshape(B, T, -1)

            def theirs_f(la=la, theirs=theirs):
                with torch.no_grad():
                    return theirs(la, D)

            def ours_fb(net=net, la=la, w=w, B=B, T=T):
                x = la.clone().requires_grad_()
                (net(x).reading[:, 1:].reshape(B, T, -1) * w).sum().backward()
                return x.grad

            def theirs_fb(la=la, w=w, theirs=theirs):
                x = la.clone().requires_grad_()
                (theirs(x, D) * w).sum().backward()
                return x.grad

            diff = (ours_f() - theirs_f()).abs().max().item()
            gdiff = (ours_fb() - theirs_fb()).abs().max().item()
            cases = {"of": ours_f, "tf": theirs_f, "ob": ours_fb, "tb": theirs_fb}
            times = interleaved(cases, device, rounds)
            med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
            # x: the median over rounds of theirs / ours within a round (the two ran moments
            # apart, so that a shared machine's load changes both alike)
            xf, xb = (statistics.median(a / b for a, b in zip(times["t" + k], times["o" + k]))
                      for k in "fb")
            print(f"{Q:>2} {G:>2} {T:>5} {med['of']:9.1f} {med['tf']:11.1f} "
                  f"{xf:6.1f} {med['ob']:9.1f} {med['tb']:11.1f} "
                  f"{xb:6.1f} {diff:16.2e} {gdiff:13.2e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--part", choices=("all", "unlimited", "windowed", "peers"), default="all")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--peers", default="/tmp/peers", help="where the authors' code lies")
    ap.add_argument("--peer-dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--peer", choices=("all",) + tuple(PEERS), default="all",
                    help="which of the authors' revisions to run against")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    B = 8
    clock = "wall-clock" if args.device.startswith("cuda") else "process CPU"
    print(f"device {args.device}, {torch.get_num_threads()} threads, B = {B}, {clock} seconds")
    if args.part in ("all", "unlimited"):
        unlimited(B, args.device, args.rounds)
    if args.part in ("all", "windowed"):
        windowed(B, args.device, args.rounds)
    if args.part in ("all", "peers"):
        peers(args.peers, args.device, args.rounds, getattr(torch, args.peer_dtype),
              only=args.peer)


if __name__ == "__main__":
    main()

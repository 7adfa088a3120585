"""Verification throughput of compiled stack RNNs (target "stack_rnn") against the bare controller.

For a few tasks and memories: N strings of length L (default 64 × 1,000), verified with
`pn.verify` (network forward + exact read-back + decode + the machine's batched simulation +
comparison). Printed per case, in input symbols per second:

- ``verify``: the whole verification;
- ``network``: the compiled module's forward alone (controller + memory + read-back);
- ``controller``: the bare controller forward — the same Elman recurrence (input part
  precomputed, one tanh per step) on the same ids, with no memory (readings held at zero);

and the ratios network / controller and verify / network. Then (alone with ``--doubling``) one
string of length L = 12,500 … 100,000 per memory, verified by itself, with the time ratio per
doubling of L (×2 = constant work per step: long strings are compared on their top cells).

    OMP_NUM_THREADS=1 python benchmarks/bench_controllers.py [--n 64] [--length 1000] [--doubling]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import pdanet as pn

CASES = (
    ("dyck2", "grefenstette"),
    ("dyck2", "joulin_mikolov"),
    ("dyck2", "suzgun"),
    ("parenthesis_prediction", "grefenstette"),
    ("reversal", "grefenstette"),
    ("sequence_copy_queue", "grefenstette"),
)


def _machine(name: str):
    if name == "sequence_copy_queue":
        return pn.tasks.get("sequence_copy", vocab_size=4, store="queue")
    return pn.tasks.get(name)


def _strings(name: str, machine, n: int, length: int, rng) -> list:
    if name == "sequence_copy_queue":
        V = [s for s in machine.alphabet.symbols if s != "#"]
        return [tuple(V[i] for i in rng.integers(0, len(V), length // 2)) + ("#",) * (length // 2)
                for _ in range(n)]
    return pn.tasks.sample(name, n, length, rng=rng)


@torch.no_grad()
def _controller_only(module, ids: torch.Tensor) -> None:
    x = module.embedding(ids.clamp(min=0))
    pre, cell = module.controller(x)
    B = ids.shape[0]
    h = module.h0.view(1, -1).expand(B, -1)
    r = x.new_zeros(B, module.reading_size)
    for t in range(ids.shape[1]):
        h = cell(pre[:, t], r, h)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def doubling(lengths: tuple[int, ...] = (12_500, 25_000, 50_000, 100_000)) -> None:
    """One marked-reversal string w#wᴿ per length, verified alone (the stack grows to L/2): the
    time per doubling of L should be ×2 (constant work per step), not ×4."""
    machine = pn.tasks.get("marked_reversal")
    rng = np.random.default_rng(0)
    for memory in ("grefenstette", "joulin_mikolov", "suzgun"):
        net = pn.compile(machine, target="stack_rnn", method=memory)
        prev = None
        for L in lengths:
            w = list(rng.choice(["0", "1"], L // 2))
            s = w + ["#"] + w[::-1]
            t = _timed(lambda net=net, s=s: pn.verify(machine, net, strings=[s], max_length=None,
                                                      samples=0, long_samples=0))
            ratio = f"×{t / prev:.2f}" if prev else ""
            print(f"one string   {memory:15s} L = {len(s):7,d}   {t:7.2f} s   "
                  f"{t / len(s) * 1e6:6.1f} µs/step   {ratio}")
            prev = t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--length", type=int, default=1000)
    ap.add_argument("--batch-steps", type=int, default=1 << 16)
    ap.add_argument("--doubling", action="store_true",
                    help="only the one-long-string doubling series")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.doubling:
        doubling()
        return
    rng = np.random.default_rng(0)
    print(f"{'task':24s} {'memory':15s} {'verify':>10s} {'network':>10s} {'controller':>11s} "
          f"{'net/ctrl':>9s} {'verify/net':>10s}   (input symbols per second)")
    for name, memory in CASES:
        machine = _machine(name)
        net = pn.compile(machine, target="stack_rnn", method=memory)
        strings = _strings(name, machine, args.n, args.length, rng)
        symbols = sum(len(s) for s in strings)
        rep = pn.verify(machine, net, max_length=None, samples=0, long_samples=0, strings=strings,
                        max_batch_steps=args.batch_steps)
        assert rep.ok, rep.counterexample
        ids = net.encode(strings)[0]
        rows = max(1, args.batch_steps // (args.length + 1))
        t_net = sum(_timed(lambda b=b: net.forward(ids[b:b + rows]))
                    for b in range(0, len(strings), rows))
        t_ctrl = sum(_timed(lambda b=b: _controller_only(net.module, ids[b:b + rows]))
                     for b in range(0, len(strings), rows))
        v, nw, c = symbols / rep.seconds, symbols / t_net, symbols / t_ctrl
        print(f"{name:24s} {memory:15s} {v:10.0f} {nw:10.0f} {c:11.0f} {c / nw:9.1f}x "
              f"{nw / v:9.1f}x")
    doubling()


if __name__ == "__main__":
    main()

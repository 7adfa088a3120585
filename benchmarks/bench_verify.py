"""Verification cost against the bare network: Dyck-(4, 5), batch 1024, length 256.

For each construction (hewitt, compact) × (lstm, elman) it prints the time of the bare torch
recurrent layer of the same size on the same batch (``nn.LSTM`` for lstm, ``nn.RNN`` for elman;
embedding included, no grad), the compiled network's forward + decode + readout, the machine's
batch simulation, one `verify` run over the batch (string sampling + lockstep + comparison), and

    ratio = verify / bare forward.          Target for lstm/hewitt: ≤ 1.5.

Threads: torch's default (set OMP_NUM_THREADS), or --threads.

Usage:  OMP_NUM_THREADS=2 python benchmarks/bench_verify.py [--k 4 --m 5 --batch 1024
        --length 256 --repeat 5 --methods hewitt,compact --targets lstm,elman]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, not an installed copy

import pdanet as pn
from pdanet.automata import dyck
from pdanet.verify import verify
from pdanet.verify.strings import long_strings

TARGET_RATIO = 1.5


def best_of(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bare_forward_time(cell: str, hidden: int, inputs: int, ids: np.ndarray, repeat: int) -> float:
    """One-layer nn.LSTM / nn.RNN (hidden → hidden) after an embedding, batch first, no grad."""
    emb = torch.nn.Embedding(inputs, hidden)
    layer = (torch.nn.LSTM if cell == "lstm" else torch.nn.RNN)(hidden, hidden, batch_first=True)
    x = torch.as_tensor(ids)

    def run():
        with torch.no_grad():
            layer(emb(x.clamp(min=0)))

    return best_of(run, repeat)


def network_time(net, ids: np.ndarray, repeat: int) -> float:
    """The compiled network's own forward pass plus its decoding and readout."""

    def run():
        states, logits = net.forward(torch.as_tensor(ids))
        net.decode(states)
        net.readout(logits)

    return best_of(run, repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--methods", default="hewitt,compact")
    ap.add_argument("--targets", default="lstm,elman")
    args = ap.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    machine = dyck(args.k, args.m)
    ids, lengths = long_strings(machine, args.batch, args.length, rng=0, busy=0.7)
    print(f"Dyck-({args.k}, {args.m}), batch {args.batch}, length {args.length}, "
          f"{torch.get_num_threads()} torch thread(s)")
    t_machine = best_of(lambda: machine.run_batch(ids, lengths), args.repeat)
    t_sample = best_of(lambda: long_strings(machine, args.batch, args.length, rng=0, busy=0.7),
                       args.repeat)
    print(f"machine simulation (run_batch): {t_machine * 1e3:.1f} ms; "
          f"string sampling: {t_sample * 1e3:.1f} ms")
    head = (f"{'network':<16}{'units':>6}{'bare fwd ms':>13}{'net+decode ms':>15}"
            f"{'verify ms':>11}{'ratio':>8}")
    print(head)
    print("-" * len(head))
    for target in args.targets.split(","):
        for method in args.methods.split(","):
            net = pn.compile(machine, target=target, method=method)
            hidden = net.hidden_units
            t_bare = bare_forward_time(target, hidden, len(machine.alphabet), ids, args.repeat)
            t_net = network_time(net, ids, args.repeat)

            def run_verify():
                report = verify(machine, net, max_length=None, samples=0,
                                long_length=args.length, long_samples=args.batch,
                                batch_size=args.batch)
                assert report.ok, str(report)

            t_verify = best_of(run_verify, args.repeat)
            ratio = t_verify / t_bare
            mark = "" if target != "lstm" or method != "hewitt" else (
                "  (target ≤ 1.5: " + ("met)" if ratio <= TARGET_RATIO else "NOT met)"))
            print(f"{target + '/' + method:<16}{hidden:>6}{t_bare * 1e3:>13.1f}"
                  f"{t_net * 1e3:>15.1f}{t_verify * 1e3:>11.1f}{ratio:>8.2f}{mark}")
    print("bare fwd: nn.LSTM (lstm) or nn.RNN (elman) of the same hidden size; "
          "ratio = verify / bare fwd")


if __name__ == "__main__":
    main()

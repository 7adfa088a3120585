"""Verification cost against the bare network: Dyck-(4, 5), batch 1024, length 256, float32.

For each construction (hewitt, onehot, compact) × (lstm, elman), on one fixed batch of busy
strings (``DyckKM.sample``, generated once, outside every timing):

- ``bare``: the compiled network's own layers, as a user would run them: its ``nn.Embedding``,
  its ``nn.LSTM`` / ``nn.RNN`` (from its initial state) and its linear readout, no grad;
- ``verify``: ``pn.verify(machine, net, VerifyOptions(strings=ids, …))`` on the same batch: the
  machine's batch simulation, the network's forward pass with every hidden state the decoder
  reads (for the LSTM: the cells c, where the stack lives, recomputed from the gates of
  nn.LSTM's own output), decoding the full stack from every state, the readout, and the
  comparison of stack, depth and allowed-next-symbol set at every step of every string;
- ``+ sampling``: the same with the strings drawn inside `verify` (its ``long`` phase).

ratio = verify / bare.  Target: ≤ 1.5.  Rounds alternate bare and verify runs so that both see
the same machine load; each ratio is the median over rounds of the per-round ratio.
Threads: torch's default (set OMP_NUM_THREADS), or --threads; both sides use the same. By
default `verify` runs the network in a worker thread while the machine is simulated (its
documented design), and runs a batch this large as two halves, decoding and comparing the first
while the worker runs the second; --no-overlap measures it in one thread (``overlap=False``),
which is the fairer figure on a busy machine and the only one with a single core.

Usage:  OMP_NUM_THREADS=1 python benchmarks/bench_verify.py [--k 4 --m 5 --batch 1024
        --length 256 --repeat 7 --methods hewitt,onehot,compact --targets lstm,elman]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, not an installed copy

import pdanet as pn
from pdanet.automata import dyck
from pdanet.verify import VerifyOptions, verify
from pdanet.verify.strings import long_strings

TARGET_RATIO = 1.5


def seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bare_forward(net, ids: torch.Tensor):
    """The network's embedding → nn.LSTM / nn.RNN → readout, batch first, no grad."""
    module = net.module

    def run():
        with torch.no_grad():
            x = module.embedding(ids.clamp(min=0))
            out, _ = module.rnn(x, module.initial_state(ids.shape[0]))
            module.logits(out)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--m", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=7, help="rounds (median taken)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--methods", default="hewitt,onehot,compact")
    ap.add_argument("--targets", default="lstm,elman")
    ap.add_argument("--no-sampling", action="store_true", help="skip the '+ sampling' column")
    ap.add_argument("--no-overlap", action="store_true",
                    help="verify in one thread (overlap=False): network, then machine")
    args = ap.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    machine = dyck(args.k, args.m)
    ids, lengths = long_strings(machine, args.batch, args.length, rng=0, busy=0.7)
    tids = torch.as_tensor(ids)
    overlap = not args.no_overlap
    print(f"Dyck-({args.k}, {args.m}), batch {args.batch}, length {args.length}, float32, "
          f"{torch.get_num_threads()} torch thread(s), median of {args.repeat} rounds, verify "
          + ("overlapping network and machine (2 Python threads)" if overlap
             else "in one thread (overlap=False)"))
    t_machine = statistics.median(seconds(lambda: machine.run_batch(ids, lengths))
                                  for _ in range(args.repeat))
    t_sample = statistics.median(
        seconds(lambda: long_strings(machine, args.batch, args.length, rng=0, busy=0.7))
        for _ in range(args.repeat))
    print(f"machine simulation (run_batch): {t_machine * 1e3:.1f} ms; "
          f"string sampling: {t_sample * 1e3:.1f} ms")
    head = (f"{'network':<16}{'units':>6}{'bare ms':>9}{'verify ms':>11}{'ratio':>7}"
            f"{'+ sampling ms':>15}{'ratio':>7}")
    print(head)
    print("-" * len(head))
    # the given strings only, or busy strings drawn inside verify (the same batch shape)
    on_given = VerifyOptions(max_length=None, samples=0, long_samples=0, strings=ids,
                             batch_size=args.batch, overlap=overlap)
    on_sampled = replace(on_given, strings=None, long_length=args.length,
                         long_samples=args.batch)
    ratios = {}
    for target in args.targets.split(","):
        for method in args.methods.split(","):
            net = pn.compile(machine, target=target, method=method)
            bare = bare_forward(net, tids)

            def given(net=net):
                report = verify(machine, net, on_given)
                assert report.ok and report.steps_checked == int((lengths + 1).sum()), report

            def sampled(net=net):
                report = verify(machine, net, on_sampled)
                assert report.ok, report

            bare(), given()                                   # warm up
            rows = []
            for _ in range(args.repeat):
                tb = seconds(bare)
                tg = seconds(given)
                ts = float("nan") if args.no_sampling else seconds(sampled)
                rows.append((tb, tg, ts, tg / tb, ts / tb))
            tb, tg, ts, rg, rs = (statistics.median(c) for c in zip(*rows))
            ratios[(target, method)] = rg
            print(f"{target + '/' + method:<16}{net.hidden_units:>6}{tb * 1e3:>9.1f}"
                  f"{tg * 1e3:>11.1f}{rg:>7.2f}{ts * 1e3:>15.1f}{rs:>7.2f}")
    print("bare: the net's own embedding + nn.LSTM/nn.RNN + readout; verify: pn.verify on the "
          "same pre-generated strings (stack, depth and next-symbol set checked at every step); "
          "+ sampling: strings drawn inside verify")
    worst = max(ratios.values())
    print(f"target ratio ≤ {TARGET_RATIO}: " + ("met" if worst <= TARGET_RATIO else "NOT met")
          + f" (worst {worst:.2f})")


if __name__ == "__main__":
    main()

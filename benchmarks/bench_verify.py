"""Verification cost against the bare network: Dyck-(4, 5), batch 1024, length 256.

Prints the ratio  (time of `verify` on one batch of busy strings) / (time of the bare
``nn.LSTM`` forward pass of the same size on the same batch).  Target: ≤ 1.5.

When no Dyck-(k, m) LSTM construction is registered yet, it says so and prints instead the
verifier's own share, measured with a stand-in network that decodes to the machine's fields for
free: string sampling + machine simulation + comparison, over the bare forward.

Usage:  python benchmarks/bench_verify.py [--k 4 --m 5 --batch 1024 --length 256 --repeat 5]
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
from pdanet.errors import CompileError
from pdanet.verify import verify
from pdanet.verify.strings import long_strings


def best_of(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bare_forward_time(hidden: int, inputs: int, ids: np.ndarray, repeat: int) -> float:
    """One-layer nn.LSTM forward (plus embedding), batch first, no grad."""
    emb = torch.nn.Embedding(inputs, hidden)
    lstm = torch.nn.LSTM(hidden, hidden, batch_first=True)
    x = torch.as_tensor(ids)

    def run():
        with torch.no_grad():
            lstm(emb(x.clamp(min=0)))

    return best_of(run, repeat)


class StandIn:
    """Stand-in network: a bare nn.LSTM forward of the construction's size (the real cost), with
    decoding replaced by a lookup of the machine's fields precomputed for the benchmark batch."""

    construction = "stand-in (bare LSTM + precomputed decoding)"

    def __init__(self, machine, hidden: int, ids: np.ndarray, lengths: np.ndarray):
        self.machine = machine
        self.module = torch.nn.Module()
        self.emb = torch.nn.Embedding(len(machine.alphabet), hidden)
        self.lstm = torch.nn.LSTM(hidden, hidden, batch_first=True)
        self.key = ids.tobytes()
        self.fields = dict(machine.run_batch(ids, lengths).fields)

    def forward(self, ids):
        if ids.numpy().tobytes() != self.key:
            raise RuntimeError("the stand-in only knows the benchmark batch")
        out, _ = self.lstm(self.emb(ids.clamp(min=0)))
        return out, out

    def decode(self, states):
        return {k: v.copy() for k, v in self.fields.items() if k != "output"}

    def readout(self, logits):
        return self.fields["output"].copy()


def network_time(net, ids: np.ndarray, repeat: int) -> float:
    """The compiled network's own forward pass plus its decoding and readout."""

    def run():
        with torch.no_grad():
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
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--stand-in", action="store_true",
                    help="use the stand-in network even when a construction is available")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    machine = dyck(args.k, args.m)
    ids, lengths = long_strings(machine, args.batch, args.length, rng=0, busy=0.7)
    print(f"Dyck-({args.k}, {args.m}), batch {args.batch}, length {args.length}, "
          f"{torch.get_num_threads()} torch thread(s)")

    net = None
    if not args.stand_in:
        try:
            net = pn.compile(machine, target="lstm")
        except CompileError as exc:
            print(f"no Dyck LSTM construction is available yet ({exc});")
            print("measuring with a stand-in network (bare LSTM, decoding precomputed) instead.")
    if net is not None:
        hidden = net.hidden_units
        label = f"{net.construction} ({hidden} hidden units)"
    else:
        hidden = 3 * args.m * max(1, (args.k - 1).bit_length()) - args.m  # Hewitt et al. LSTM
        net = StandIn(machine, hidden, ids, lengths)
        label = net.construction

    t_bare = bare_forward_time(hidden, len(machine.alphabet), ids, args.repeat)
    t_net = network_time(net, ids, args.repeat)
    t_sample = best_of(lambda: long_strings(machine, args.batch, args.length, rng=0, busy=0.7),
                       args.repeat)
    t_machine = best_of(lambda: machine.run_batch(ids, lengths), args.repeat)

    def run_verify():
        report = verify(machine, net, max_length=None, samples=0, long_length=args.length,
                        long_samples=args.batch, batch_size=args.batch)
        assert report.ok, str(report)

    t_verify = best_of(run_verify, args.repeat)
    rows = [
        (f"bare nn.LSTM forward ({hidden} units)", t_bare),
        ("network forward + decode + readout", t_net),
        ("machine simulation (run_batch)", t_machine),
        ("string sampling (machine.sample)", t_sample),
        ("verify (sampling + lockstep + comparison)", t_verify),
    ]
    print(f"network: {label}")
    for name, t in rows:
        print(f"{name:<46}: {t * 1e3:9.1f} ms")
    print(f"{'ratio verify / bare nn.LSTM forward':<46}: {t_verify / t_bare:9.2f}   (target ≤ 1.5)")
    print(f"{'ratio verify / network forward + decode':<46}: {t_verify / t_net:9.2f}")

if __name__ == "__main__":
    main()

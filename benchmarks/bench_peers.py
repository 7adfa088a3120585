"""pdanet's stores side by side with the source papers' authors' code, on identical actions.

Stores and peers (each row runs the same random actions through every implementation, checks
that the readings agree — the largest absolute difference is printed — and times them):

- stratified stack (Grefenstette et al. 2015): `NeuralStack` vs rau's ``StratificationStack``
  (``next([push, pop], v)`` then ``reading()``) and stacknn-core's ``structs.Stack``
  (``forward(v, pop, push)``, which pops, pushes and reads one unit);
- stratified queue: `NeuralQueue` vs stacknn-core's ``structs.Queue`` (rau has none);
- superposition stack (Joulin & Mikolov 2015): `SuperpositionStack` vs rau's
  ``SuperpositionStack`` (``next(push, pop, noop, v)`` with each weight repeated over the
  width, then ``reading()``; rau trims the stack to the cells that can still be read before
  its ``max_sequence_length``, which is set to T + 1 because rau's RNN reads the stack after
  step t at step t + 1) and stacknn-core's ``superpos.NoOpStack`` (``update([push, noop, pop],
  v)``, reading cell 0);
- RNS stack (DuSell & Chiang 2022): `NondeterministicStack` with its default options vs rau's
  ``NondeterministicStack`` in the log semiring with (state, top) readings normalised (the
  RNS-RNN's stack). pdanet's log Δ[b, t, q, x, r, op] with op = [push y | replace y | pop] is
  split into rau's push[b, q, x, r, y], repl[b, q, x, r, y] and pop[b, q, x, r]; pdanet's
  reading after step t (``reading[:, t + 1]``) is compared with rau's ``reading()`` after
  update t, both over (state, top) pairs. These readings differ (|Δ| ≈ 0.4) by the bottom
  convention: rau lets step 1 replace the initial ⊥ and lets runs pop back down to it, which
  pdanet's default ("paper") does not; with the step-1 replace weights set to −∞ the two agree
  at step 1 to 1e-16 and differ later.

Stacks: B = 32, width 32, T ∈ {64, 128, 256}; RNS: B = 8, |Q| = 2, |Γ| = 3 (⊥ included),
T ∈ {32, 64, 128}. Float32, 1 thread, denormals flushed to zero for every implementation
(deep superposition cells decay into denormals, which are very slow on CPUs; --keep-denormals
turns this off). Times are medians over interleaved rounds of the process's CPU time for the
forward pass (no gradients) and for forward + backward (of a fixed random projection of the
readings); "×" is the peer's time over pdanet's (above 1: pdanet is faster).

The peers are not dependencies of pdanet and no test imports them. Put them under one
directory DIR:

    DIR/rau               the repository bdusell/rau, branch differentiable-stacks
    DIR/semiring-einsum   the repository bdusell/semiring-einsum (rau's NS stack needs it)
    DIR/stacknn-core      the repository viking-sudo-rm/stacknn-core
    DIR/site              pip install --no-deps --target DIR/site overrides nvidia-ml-py

    OMP_NUM_THREADS=1 python benchmarks/bench_peers.py --peers DIR [--rounds 3] [--T 64 128 256]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from pdanet.constructions.stacks import (
    NeuralQueue,
    NeuralStack,
    NondeterministicStack,
    StackActions,
    SuperpositionActions,
    SuperpositionStack,
)

HOW = {
    "rau": "DIR/rau: the repository bdusell/rau, branch differentiable-stacks",
    "semiring": "DIR/semiring-einsum: the repository bdusell/semiring-einsum, and "
                "pip install --no-deps --target DIR/site nvidia-ml-py",
    "stacknn": "DIR/stacknn-core: the repository viking-sudo-rm/stacknn-core, and "
               "pip install --no-deps --target DIR/site overrides",
}


def load_peers(root: Path) -> dict:
    """Import what is there under ``root``; print how to get what is missing."""
    for sub in ("site", "semiring-einsum", "rau/src", "stacknn-core"):
        if (root / sub).is_dir():
            sys.path.insert(0, str(root / sub))
    peers: dict = {}
    try:
        from rau.models.stack_nn.differentiable_stacks import stratification, superposition
        peers["rau_strat"] = stratification.StratificationStack
        peers["rau_super"] = superposition.SuperpositionStack
    except ImportError as e:
        print(f"skip rau ({e}); get {HOW['rau']}")
    try:
        from rau.models.stack_nn.differentiable_stacks import nondeterministic, semiring
        from torch_semiring_einsum import AutomaticBlockSize
        peers["rau_ns"] = (nondeterministic.NondeterministicStack, semiring.log,
                           AutomaticBlockSize())
    except ImportError as e:
        print(f"skip rau's NS stack ({e}); get {HOW['rau']}; {HOW['semiring']}")
    try:
        from stacknn.structs import Queue, Stack
        from stacknn.superpos import NoOpStack
        peers["sn_stack"], peers["sn_queue"], peers["sn_super"] = Stack, Queue, NoOpStack
    except ImportError as e:
        print(f"skip stacknn-core ({e}); get {HOW['stacknn']}")
    return peers


# --- one function per implementation: actions -> readings (B, T, width) ------------------------

def pdanet_stratified(module):
    def run(push, pop, value):
        return module(StackActions(push, pop, value))
    return run


def rau_stratified(cls):
    def run(push, pop, value):
        B, T, m = value.shape
        stack = cls.new_empty(B, m, value.dtype, value.device)
        out = []
        for t in range(T):
            stack = stack.next(torch.stack([push[:, t], pop[:, t]], 1), value[:, t])
            out.append(stack.reading())
        return torch.stack(out, 1)
    return run


def stacknn_stratified(cls):
    def run(push, pop, value):
        B, T, m = value.shape
        struct = cls(B, m)
        return torch.stack([struct(value[:, t], pop[:, t], push[:, t]) for t in range(T)], 1)
    return run


def pdanet_superposition(ops, value):
    return SuperpositionStack()(SuperpositionActions(ops, value))


def rau_superposition(cls):
    def run(ops, value):
        B, T, m = value.shape
        stack = cls.new_empty(B, m, T + 1, float("inf"), value.dtype, value.device)
        out = []
        for t in range(T):
            push, noop, pop = (ops[:, t, k, None].expand(B, m) for k in range(3))
            stack = stack.next(push, pop, noop, value[:, t])
            out.append(stack.reading())
        return torch.stack(out, 1)
    return run


def stacknn_superposition(cls):
    def run(ops, value):
        B, T, m = value.shape
        stack = cls.empty(B, m)
        return torch.stack([stack.update(ops[:, t], value[:, t])[:, 0] for t in range(T)], 1)
    return run


def pdanet_rns(Q, G):
    stack = NondeterministicStack(Q, G)

    def run(log_actions):
        return stack(log_actions).reading[:, 1:]
    return run


def rau_rns(spec, Q, G):
    cls, log, block = spec

    def run(log_actions):
        B, T = log_actions.shape[:2]
        stack = cls.new_empty(B, Q, G, T, True, True, block, log_actions.dtype,
                              log_actions.device, log)
        out = []
        for t in range(T):
            a = log_actions[:, t]
            stack.update(a[..., :G], a[..., G:2 * G], a[..., 2 * G])
            out.append(stack.reading().view(B, Q, G))
        return torch.stack(out, 1)
    return run


# --- timing -------------------------------------------------------------------------------------

def cpu_ms(fn) -> float:
    start = time.process_time()
    fn()
    return 1e3 * (time.process_time() - start)


def compare(title: str, impls: dict, inputs: tuple, rounds: int, gen: torch.Generator) -> None:
    """Readings and times of every implementation on the same ``inputs``; pdanet's first."""
    with torch.no_grad():
        readings = {name: fn(*inputs) for name, fn in impls.items()}
    probe = torch.randn(readings["pdanet"].shape, generator=gen)
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]

    def forward(fn):
        def go():
            with torch.no_grad():
                fn(*inputs)
        return go

    def backward(fn):
        def go():
            (fn(*leaves) * probe).sum().backward()
        return go

    times: dict = {(name, kind): [] for name in impls for kind in ("fwd", "fb")}
    for fn in impls.values():                                  # warm-up
        forward(fn)()
        backward(fn)()
    for _ in range(rounds):                                    # interleaved rounds
        for name, fn in impls.items():
            times[name, "fwd"].append(cpu_ms(forward(fn)))
            times[name, "fb"].append(cpu_ms(backward(fn)))
    med = {key: statistics.median(v) for key, v in times.items()}
    for name in impls:
        diff = (readings[name] - readings["pdanet"]).abs().max().item()
        fwd, fb = med[name, "fwd"], med[name, "fb"]
        print(f"{title:<28} {name:<14} {fwd:>10.1f} {fwd / med['pdanet', 'fwd']:>7.2f} "
              f"{fb:>11.1f} {fb / med['pdanet', 'fb']:>7.2f} {diff:>10.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peers", type=Path, required=True, help="directory holding the peers")
    parser.add_argument("--T", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--ns-T", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--ns-batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--keep-denormals", action="store_true")
    parser.add_argument("--only", nargs="+", default=["stack", "queue", "super", "rns"],
                        choices=["stack", "queue", "super", "rns"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(not args.keep_denormals)
    peers = load_peers(args.peers)
    B, m = args.batch, args.width
    print(f"torch {torch.__version__}, float32, threads={torch.get_num_threads()}, "
          f"flush_denormal={not args.keep_denormals}, median of {args.rounds} rounds (CPU ms); "
          f"× = peer time / pdanet time; |Δ| = max abs difference of the readings from pdanet's")
    print(f"{'store':<28} {'impl':<14} {'fwd ms':>10} {'×':>7} {'fwd+bwd ms':>11} {'×':>7} "
          f"{'|Δ|':>10}")
    gen = torch.Generator().manual_seed(0)
    for T in args.T:
        push, pop = torch.rand(B, T, generator=gen), torch.rand(B, T, generator=gen)
        value = torch.randn(B, T, m, generator=gen)
        for kind, module, rau_key, sn_key in (("stack", NeuralStack(), "rau_strat", "sn_stack"),
                                              ("queue", NeuralQueue(), None, "sn_queue")):
            if kind not in args.only:
                continue
            impls = {"pdanet": pdanet_stratified(module)}
            if rau_key and rau_key in peers:
                impls["rau"] = rau_stratified(peers[rau_key])
            if sn_key in peers:
                impls["stacknn-core"] = stacknn_stratified(peers[sn_key])
            compare(f"stratified {kind} T={T}", impls, (push, pop, value), args.rounds, gen)
        if "super" in args.only:
            ops = torch.softmax(torch.randn(B, T, 3, generator=gen), -1)
            impls = {"pdanet": pdanet_superposition}
            if "rau_super" in peers:
                impls["rau"] = rau_superposition(peers["rau_super"])
            if "sn_super" in peers:
                impls["stacknn-core"] = stacknn_superposition(peers["sn_super"])
            compare(f"superposition T={T}", impls, (ops, value), args.rounds, gen)
    if "rns" in args.only:
        Q, G = 2, 3
        for T in args.ns_T:
            log_actions = torch.randn(args.ns_batch, T, Q, G, Q, 2 * G + 1, generator=gen)
            impls = {"pdanet": pdanet_rns(Q, G)}
            if "rau_ns" in peers:
                impls["rau"] = rau_rns(peers["rau_ns"], Q, G)
            compare(f"RNS stack B={args.ns_batch} T={T}", impls, (log_actions,), args.rounds, gen)


if __name__ == "__main__":
    main()

"""Training speed against the authors' code: seconds per epoch, forward + backward + Adam step.

Two models, each ours beside the authors' implementation (github.com/bdusell/
nondeterministic-stack-rnn at tag ``iclr2022``, the code of DuSell & Chiang 2022, "Learning
hierarchical structures with differentiable nondeterministic stacks"), on the same batches:

- ``rns``: the RNS-RNN (NS+S+U: unnormalised actions, (state, top) reading, unlimited stack) —
  ours `pdanet.models.DuSellChiangRNN` (variant "rns"), theirs ``NondeterministicStackRNN``
  (``normalize_operations=False``, ``include_states_in_reading=True``, einsum block size 32 as
  in their experiment scripts);
- ``gref``: an LSTM controller with Grefenstette et al.'s (2015) stack — ours
  `pdanet.models.GrefenstetteRNN` (controller "lstm", store "stack"), theirs ``GrefenstetteRNN``
  (the stratification stack).

The authors' defaults for marked reversal (their ``experiments/train/marked-reversal`` scripts):
2 symbol types plus the marker ``#`` and EOS (vocabulary 4), strings w#wᴿ of lengths 40..80
(each batch one length, as their data generator does), batch size 10, LSTM controller of 20
hidden units, |Q| = 2 and |Γ| = 3 for the RNS-RNN, stack width 20 for Gref (the middle of
their grid 2, 20, 40), Adam, gradient clipping 5. The loss is theirs: the cross-entropy of
every next symbol (the first symbol and EOS included), summed over time, averaged over the
batch. Differences in the models that the timing includes: our Gref model has Grefenstette's
extra output layer o_t = tanh(W_o h_t) before the logits (theirs reads the logits from h_t);
the authors' NS-RNN skips the stack update of the last step (its reading is never used), ours
computes it (the model's ``run`` returns every reading). Our Gref model trains through one
autograd node with its backward through time written out (``GrefenstetteRNN.fused``);
``--stepwise`` times its step-by-step autograd path instead (the same values and gradients).

Each epoch runs every batch once; the epochs of the two implementations alternate (so that a
shared machine's load falls on both alike), after one warm-up batch each. Reported: the median
seconds per epoch (wall clock, ``torch.set_num_threads(--threads)``, default 1), the ratio
theirs / ours (above 1: ours is faster), and our mean loss on the first 3 batches after the
first and the last epoch (that training moves it).

The authors' code is looked for under ``--peers DIR`` (default /tmp/peers): ``DIR/ns-iclr2022``
(an archive of the tag) with torch_semiring_einsum (and its pynvml import) under ``DIR/_site``;
without it, only our times are printed, with a line saying how to get it.

Run: OMP_NUM_THREADS=1 python benchmarks/bench_training.py [--model all|rns|gref]
     [--epochs E] [--batches N] [--threads T] [--device cuda] [--peers DIR] [--stepwise]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from pdanet.models import DuSellChiangRNN, GrefenstetteRNN

VOCAB = 4              # 0, 1, # (2), EOS (3)
HIDDEN = 20
Q, G = 2, 3            # the RNS-RNN's states and stack symbols for marked reversal
WIDTH = 20             # Gref stack width
BLOCK = 32             # the authors' einsum block size in their experiments


def marked_reversal_batches(n: int, batch: int, seed: int) -> list[torch.Tensor]:
    """``n`` batches of ``batch`` strings w#wᴿ followed by EOS (each batch one length, odd,
    40..80) as (B, length + 1) symbol indices."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.choice(range(41, 80, 2))
        rows = []
        for _ in range(batch):
            w = [rng.randrange(2) for _ in range(length // 2)]
            rows.append(w + [2] + w[::-1] + [3])
        out.append(torch.tensor(rows))
    return out


def loss_of(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The authors' loss: cross-entropy per symbol, summed over time, averaged over the batch."""
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target, reduction="none")
    return ce.sum(1).mean()


def ours(kind: str, device: str, stepwise: bool = False):
    if kind == "rns":
        model = DuSellChiangRNN(VOCAB, Q, G, "rns", hidden=HIDDEN, num_outputs=VOCAB)

        def logits(seq):
            return model.run(seq[:, :-1]).logits
    else:
        model = GrefenstetteRNN(VOCAB, HIDDEN, WIDTH, VOCAB, controller="lstm", store="stack")
        model.fused = not stepwise

        def logits(seq):
            return model(seq[:, :-1])[1]
    return model.to(device), logits


def load_theirs(peers: str, kind: str, device: str):
    """(model, logits function) of the authors' implementation, or a string saying why not."""
    src = Path(peers) / "ns-iclr2022" / "src"
    if not (src / "nsrnn" / "models" / "nondeterministic_stack.py").exists():
        return (f"not found: {src}/nsrnn (git --git-dir=<mirror of bdusell/nondeterministic-"
                f"stack-rnn> archive iclr2022 | tar -x -C {peers}/ns-iclr2022)")
    for extra in (str(Path(peers) / "_site"), str(src)):
        if extra not in sys.path:
            sys.path.insert(0, extra)
    try:
        from nsrnn.models.grefenstette import GrefenstetteRNN as TheirGref
        from nsrnn.models.nondeterministic_stack import NondeterministicStackRNN
        from torch_extras.init import xavier_uniform_init
        from torch_rnn_tools import OutputLayerWrapper, UnidirectionalLSTM
    except ImportError as exc:
        return f"not importable ({exc})"

    def controller(size):
        return UnidirectionalLSTM(input_size=size, hidden_units=HIDDEN, layers=1)

    if kind == "rns":                       # their utils/model_util.py, model type "ns"
        rnn = NondeterministicStackRNN(input_size=VOCAB, num_states=Q, stack_alphabet_size=G,
                                       controller=controller, normalize_operations=False,
                                       normalize_reading=True, include_states_in_reading=True)
        kwargs = {"block_size": BLOCK}
    else:                                   # model type "gref"
        rnn = TheirGref(input_size=VOCAB, stack_embedding_size=WIDTH, controller=controller)
        kwargs = {}
    model = OutputLayerWrapper(rnn, VOCAB)

    def fallback(name, param, generator):   # their initialisation (init scale 0.1)
        param.data.uniform_(-0.1, 0.1, generator=generator)

    xavier_uniform_init(model, None, fallback)
    model = model.to(device)

    def logits(seq):
        x = torch.nn.functional.one_hot(seq[:, :-1], VOCAB).to(torch.float32)
        return model(x, **kwargs)

    return model, logits


def epoch(model, logits, opt, batches) -> float:
    """Seconds for one pass over ``batches``: forward, loss, backward, clipping, Adam step."""
    dev = next(model.parameters()).device
    _sync(dev)
    start = time.perf_counter()
    for seq in batches:
        opt.zero_grad()
        loss = loss_of(logits(seq), seq)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
    _sync(dev)
    return time.perf_counter() - start


def _sync(dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=("all", "rns", "gref"), default="all")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batches", type=int, default=10, help="batches per epoch")
    ap.add_argument("--batch-size", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--peers", default="/tmp/peers")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stepwise", action="store_true",
                    help="gref: our step-by-step autograd path instead of the fused recurrence")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    batches = [b.to(args.device) for b in
               marked_reversal_batches(args.batches, args.batch_size, args.seed)]
    symbols = sum(b.numel() for b in batches)
    print(f"device {args.device}, {torch.get_num_threads()} threads; marked reversal, "
          f"{args.batches} batches of {args.batch_size} (lengths 40..80, {symbols} symbols with "
          f"EOS), {args.epochs} epochs; seconds per epoch (median)")
    print(f"{'model':6} {'ours s':>9} {'theirs s':>9} {'theirs/ours':>12}  ours: loss after "
          "epoch 1 → last (first 3 batches)")
    kinds = ("rns", "gref") if args.model == "all" else (args.model,)
    for kind in kinds:
        runs = {"ours": ours(kind, args.device, args.stepwise)}
        theirs = load_theirs(args.peers, kind, args.device)
        if isinstance(theirs, str):
            print(f"  (theirs {theirs})")
        else:
            runs["theirs"] = theirs
        opts = {k: torch.optim.Adam(m.parameters(), lr=0.005) for k, (m, _) in runs.items()}
        for k, (m, f) in runs.items():                       # warm-up: one batch
            epoch(m, f, opts[k], batches[:1])
        times: dict[str, list[float]] = {k: [] for k in runs}
        first_loss = None
        for _ in range(args.epochs):
            for k, (m, f) in runs.items():
                times[k].append(epoch(m, f, opts[k], batches))
            with torch.no_grad():
                m, f = runs["ours"]
                loss = statistics.fmean(float(loss_of(f(b), b)) for b in batches[:3])
            first_loss = loss if first_loss is None else first_loss
        med = {k: statistics.median(v) for k, v in times.items()}
        if "theirs" in med:
            print(f"{kind:6} {med['ours']:9.3f} {med['theirs']:9.3f} "
                  f"{med['theirs'] / med['ours']:12.2f}  {first_loss:.2f} → {loss:.2f}")
        else:
            print(f"{kind:6} {med['ours']:9.3f} {'-':>9} {'-':>12}  {first_loss:.2f} → {loss:.2f}")


if __name__ == "__main__":
    main()

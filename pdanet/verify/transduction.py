"""Whole output sequences of buffered networks checked against the machine's transduction.

`pdanet.verify` compares configurations at input-symbol boundaries; a buffered stack RNN
(`pdanet.constructions.buffered`, Hao et al. 2018 §2.3) also writes an output buffer whose drained
contents must be the machine's output sequence. `verify_transduction` checks that.
"""

from __future__ import annotations

import time

import numpy as np

from pdanet.automata.pdt import DPDT
from pdanet.constructions.base import CompiledNetwork
from pdanet.constructions.buffered import output_sequences
from pdanet.verify import strings as S
from pdanet.verify.report import Counterexample, PhaseResult, Report


def verify_transduction(machine: DPDT, net: CompiledNetwork, max_length: int | None = 8,
                        samples: int = 100, sample_lengths: tuple[int, int] = (0, 100),
                        seed: int = 0, batch_size: int = 256) -> Report:
    """Check the network's whole output sequence against the machine's on every live string of
    length ≤ ``max_length`` and on ``samples`` random live strings (lengths in
    ``sample_lengths``): for a string in the domain the expected sequence is
    ``machine.transduce(s)``, for a live prefix outside it the concatenation of what its steps
    emit. Configurations at input boundaries are `pn.verify`'s job (same network); this checks
    the drained output buffer. The counterexample names the string (step = its length,
    field "output_sequence")."""
    rng = np.random.default_rng(seed)
    phases, cex, t_all = [], None, time.perf_counter()
    sets = []
    if max_length is not None:
        levels = S.live_prefixes(machine, max_length)
        sets.append(("exhaustive", f"every live prefix of length ≤ {max_length}",
                     [tuple(machine.alphabet.decode(row)) for lv in levels for row in lv]))
    if samples:
        ids, lengths = S.random_live_strings(machine, samples, S.length_range(sample_lengths), rng)
        sets.append(("random", f"{samples} random live strings, lengths {sample_lengths}",
                     [tuple(machine.alphabet.decode(ids[b, :n])) for b, n in enumerate(lengths)]))
    total_strings = total_steps = 0
    for name, desc, strs in sets:
        t0, n_str, n_steps = time.perf_counter(), 0, 0
        for lo in range(0, len(strs), batch_size):
            batch = strs[lo:lo + batch_size]
            got = output_sequences(net, batch)
            for s, g in zip(batch, got):
                if machine.accepts(s):
                    want = machine.transduce(s)
                else:
                    want = tuple(y for st in machine.trace(s) for y in (st.config.emitted or ()))
                n_str += 1
                n_steps += len(s) + 1
                if g != want:
                    cex = Counterexample(name, s, machine.alphabet.format(s), len(s),
                                         "output_sequence", want, g, machine.run(s))
                    break
            if cex is not None:
                break
        phases.append(PhaseResult(name, desc, n_str, n_steps, time.perf_counter() - t0,
                                  complete=cex is None))
        total_strings += n_str
        total_steps += n_steps
        if cex is not None:
            break
    return Report(ok=cex is None, machine=str(machine.name or repr(machine)),
                  network=net.construction, fields=("output_sequence",),
                  strings_checked=total_strings, steps_checked=total_steps, phases=tuple(phases),
                  seconds=time.perf_counter() - t_all, counterexample=cex,
                  dtype=str(net.dtype).replace("torch.", ""))


__all__ = ["verify_transduction"]

"""Suzgun et al. (2019)'s tasks in their own models, as small as pdanet compiles them.

For Dyck-2, Dyck-3, Dyck-6 (§5), the homomorphic palindromes w # φ(w^R) (§6.1), the simple
palindromes w # w^R (§6.2) and string reversal (§7), prints the hidden units, the stack (or
memory row) width and the parameters of the compiled Stack-RNN, Stack-LSTM and Baby-NTM, with the
per-prefix accept readout and with the paper's own target, the next-symbol set with the end
marker (``readout="next_set"``, Table 1; the Stack-RNN and Stack-LSTM). The paper trains
controllers of 8 hidden units (§4) with stack width 5; "—" where a model refuses the task (the
typed error's class is printed).

    OMP_NUM_THREADS=1 python benchmarks/bench_suzgun_sizes.py
"""

from __future__ import annotations

import pdanet as pn
from pdanet.errors import PdanetError

TASKS = ("dyck2", "dyck3", "dyck6", "w_phi_wr", "w_wr_marked", "string_reversal")
MODELS = ("suzgun_stack_rnn", "suzgun_stack_lstm", "suzgun_baby_ntm")


def cell(machine, model: str, **options) -> str:
    """'units / width / params' of one compile, or the refusal's error class."""
    try:
        net = pn.compile(machine, target="stack_rnn", model=model, **options)
    except PdanetError as exc:
        return f"— ({type(exc).__name__})"
    mod = net.module
    width = getattr(mod, "width", None) or getattr(getattr(mod, "memory", None), "width", "?")
    params = sum(p.numel() for p in mod.parameters())
    return f"{net.hidden_units} / {width} / {params:,}"


def main() -> None:
    head = "units / width / params"
    print(f"{'task':<16}{'readout':<10}" + "".join(f"{m:<26}" for m in MODELS))
    print(f"{'':<16}{'':<10}" + "".join(f"{head:<26}" for _ in MODELS))
    for task in TASKS:
        m = pn.tasks.get(task)
        for readout in ("accept", "next_set"):
            opts = {"readout": "next_set"} if readout == "next_set" else {}
            if readout == "next_set" and m.output_kind != "accept":
                continue
            cells = [cell(m, model, **opts) for model in MODELS]
            print(f"{task:<16}{readout:<10}" + "".join(f"{c:<26}" for c in cells), flush=True)


if __name__ == "__main__":
    main()

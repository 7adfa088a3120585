"""The source papers' experiments, end to end: `run_experiment` runs one paper's protocol
(`protocols`) with a chosen model and initialisation — random (the paper's), compiled, or
compiled + noise at a fraction of the certified weight tolerance — and writes a JSON record and
plots (`run`); `jobs` and `sweep` run grids of such runs as independent, resumable jobs on a
local process pool or on Ray (`sweep`); `write_report` turns a directory of records into
``docs/experiments.md`` (`report`).

Modules: `protocols` (the papers' settings; no torch), `data` (strings and per-prefix labels),
`models` (compiled model and initialisations), `evaluation` (the papers' metrics, by length),
`lm` (DuSell & Chiang's language-model protocol: the NS-RNN language model scored by
cross-entropy difference against the task's PCFG), `training` (the training loop both
protocols share), `run`, `plots`, `sweep`, `report`. Importing this package imports torch.
"""

from pdanet.experiments.protocols import PROTOCOLS, Protocol, Size, papers, protocol
from pdanet.experiments.report import load, render, write_report
from pdanet.experiments.run import read_record, record_id, run_experiment
from pdanet.experiments.sweep import Job, jobs, sweep

__all__ = [
    "PROTOCOLS",
    "Job",
    "Protocol",
    "Size",
    "jobs",
    "load",
    "papers",
    "protocol",
    "read_record",
    "record_id",
    "render",
    "run_experiment",
    "sweep",
    "write_report",
]

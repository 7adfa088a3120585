"""Sweeps: a grid of independent jobs (tasks × models × initialisations × seeds, as the papers
run theirs), each writing its own record into one directory.

`jobs` builds the grid, `sweep` runs it: jobs whose record already exists in ``out`` (a finished
record, `pdanet.experiments.run.read_record`) are skipped, so an interrupted sweep resumes where
it stopped. Backends: ``"local"`` (default) — a process pool of ``workers`` processes
(``concurrent.futures.ProcessPoolExecutor``, spawned; ``workers=1`` runs the jobs in this
process, one after another), or ``"ray"`` — one ``ray.remote`` task per job on a Ray cluster
(``ray.init(address)``; without an address a local Ray instance with ``workers`` CPUs). Every
job runs with one torch thread, so a job's record does not depend on the backend (only its
timings do).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pdanet.errors import InputError
from pdanet.experiments.protocols import INITS, SIZES, protocol

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class Job:
    """One run of `run_experiment` (same arguments); ``overrides`` as there."""

    paper: str
    task: str
    model: str
    init: str = "random"
    noise: float = 0.0
    seed: int = 0
    size: str = "small"
    overrides: tuple[tuple[str, Any], ...] = field(default=())

    @property
    def id(self) -> str:
        from pdanet.experiments.run import record_id

        return record_id(self.paper, self.task, self.model, self.init, self.noise, self.seed,
                         self.size)


def jobs(papers: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
         models: Sequence[str] | None = None, inits: Sequence[str] = ("random", "compiled"),
         seeds: Iterable[int] = (0, 1, 2), size: str = "small", noise: float = 0.1,
         overrides: dict[str, Any] | None = None) -> list[Job]:
    """The grid: for each paper (default: every paper with a protocol) and each of its tasks
    (default: all; `tasks` keeps those named), each model (default: the protocol's), each
    initialisation and each seed, one `Job` (``compiled+noise`` jobs use ``noise``)."""
    from pdanet.experiments.protocols import PROTOCOLS
    from pdanet.experiments.protocols import papers as all_papers

    if size not in SIZES:
        raise InputError(f"size must be one of {SIZES}, got {size!r}")
    bad = [i for i in inits if i not in INITS]
    if bad:
        raise InputError(f"unknown init(s) {bad}; known: {INITS}")
    seeds = list(seeds)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise InputError(f"seeds must be ints ≥ 0, got {seeds}")
    chosen = list(papers) if papers else all_papers()
    unknown = [p_ for p_ in chosen if p_ not in all_papers()]
    if unknown:
        raise InputError(f"no protocol for paper(s) {unknown}; known: {', '.join(all_papers())}")
    over = tuple(sorted((overrides or {}).items()))
    out = []
    for paper in chosen:
        mine = sorted(t for (pp, t) in PROTOCOLS if pp == paper)
        if tasks:
            mine = [t for t in mine if t in tasks]
        for task in mine:
            p = protocol(paper, task)
            for model, init, seed in itertools.product(models or [p.model], inits, seeds):
                out.append(Job(paper, task, model, init,
                               float(noise) if init == "compiled+noise" else 0.0, seed, size,
                               over))
    if not out:
        raise InputError(f"the grid is empty (papers {chosen}, tasks {list(tasks or [])})")
    return out


def run_job(job: Job | dict[str, Any], out: str) -> dict[str, Any]:
    """Run one job with one torch thread and write its record into `out`; returns the record.
    A job whose record is already in `out` is not run again (its record is returned)."""
    import torch

    from pdanet.experiments.run import read_record, run_experiment

    job = Job(**job) if isinstance(job, dict) else job
    done = read_record(Path(out) / f"{job.id}.json")
    if done is not None:
        return done
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_experiment(job.paper, job.task, job.model, job.init, job.noise, job.seed,
                              job.size, out=out, progress=False,
                              overrides=dict(job.overrides) or None)
    finally:
        torch.set_num_threads(threads)


def pending(all_jobs: Sequence[Job], out: str | Path) -> list[Job]:
    """The jobs without a finished record in `out`."""
    from pdanet.experiments.run import read_record

    return [j for j in all_jobs if read_record(Path(out) / f"{j.id}.json") is None]


def sweep(all_jobs: Sequence[Job], out: str | Path, backend: str = "local", workers: int = 1,
          address: str | None = None, progress: bool | None = None) -> list[dict[str, Any]]:
    """Run the jobs that have no record in `out` yet (see the module docstring); returns every
    job's record, in the order of `all_jobs`."""
    from pdanet.experiments.run import read_record

    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be a positive int, got {workers!r}")
    if address is not None and backend != "ray":
        raise InputError("address applies to backend='ray' only")
    out = str(Path(out))
    Path(out).mkdir(parents=True, exist_ok=True)
    todo = pending(all_jobs, out)
    if todo:
        if backend == "ray":
            _ray(todo, out, workers, address, progress)
        elif workers == 1:
            _serial(todo, out, progress)
        else:
            _pool(todo, out, workers, progress)
    records = [read_record(Path(out) / f"{j.id}.json") for j in all_jobs]
    missing = [j.id for j, r in zip(all_jobs, records) if r is None]
    if missing:
        raise InputError(f"jobs finished without a record: {missing}")
    return records


def _bar(n: int, progress: bool | None):
    import sys

    from tqdm.auto import tqdm

    return tqdm(total=n, desc="jobs", unit="job",
                disable=not (sys.stderr.isatty() if progress is None else progress))


def _serial(todo: Sequence[Job], out: str, progress: bool | None) -> None:
    with _bar(len(todo), progress) as bar:
        for job in todo:
            run_job(job, out)
            bar.update(1)


def _pool(todo: Sequence[Job], out: str, workers: int, progress: bool | None) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool, \
            _bar(len(todo), progress) as bar:
        futures = [pool.submit(run_job, asdict(job), out) for job in todo]
        for f in as_completed(futures):
            f.result()
            bar.update(1)


def _ray(todo: Sequence[Job], out: str, workers: int, address: str | None,
         progress: bool | None) -> None:
    try:
        import ray
    except ImportError:
        raise InputError("backend='ray' needs Ray: pip install ray (or pdanet[dev])") from None
    started = False
    if not ray.is_initialized():
        if address is None:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(run_job)
        refs = [remote.remote(asdict(job), out) for job in todo]
        with _bar(len(refs), progress) as bar:
            while refs:
                ready, refs = ray.wait(refs, num_returns=1)
                ray.get(ready)
                bar.update(len(ready))
    finally:
        if started:
            ray.shutdown()


__all__ = ["BACKENDS", "Job", "jobs", "pending", "run_job", "sweep"]

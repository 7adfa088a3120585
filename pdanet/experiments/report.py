"""``docs/experiments.md`` from a directory of records: one table per paper, the paper's own
number beside ours, wall time, what compiled initialisation did to sample efficiency and to
lengths beyond training, and the length-generalisation curve per initialisation.

Rows group the records of one (task, model, initialisation, size) over their seeds; a number is
the median over seeds with [min, max]. "examples to 0.99" is the number of training examples
seen until the metric on the validation strings (training lengths) first reached 0.99 (epoch
granularity; 0 = before any training; "never" when no seed reached it, else the median over the
seeds that did, with how many). For a cross-entropy difference (lower is better) it is "examples
to ≤ 0.05 nats", DuSell & Chiang's near-optimal band.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pdanet.errors import InputError
from pdanet.experiments.protocols import LOWER_IS_BETTER, PROTOCOLS

INIT_ORDER = {"random": 0, "compiled": 1, "compiled+noise": 2}


def load(directory: str | Path) -> list[dict[str, Any]]:
    """Every finished record (``*.json``) in `directory`, sorted by id."""
    from pdanet.experiments.run import read_record

    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"{d} is not a directory of experiment records")
    recs = [r for r in (read_record(f) for f in sorted(d.glob("*.json"))) if r is not None]
    return sorted(recs, key=lambda r: r["id"])


def _med(values: Sequence[float]) -> str:
    if not values:
        return "—"
    m = statistics.median(values)
    if len(values) == 1 or min(values) == max(values):
        return f"{m:.3f}"
    return f"{m:.3f} [{min(values):.2f}, {max(values):.2f}]"


def _examples(values: Sequence[int | None]) -> str:
    hit = [v for v in values if v is not None]
    if not hit:
        return "never"
    s = f"{statistics.median(hit):g}"
    return s if len(hit) == len(values) else f"{s} ({len(hit)}/{len(values)} seeds)"


def _target(metric: str) -> tuple[str, str]:
    """(key in ``final`` of the examples-to-target count, its column label)."""
    if metric in LOWER_IS_BETTER:
        return "examples_to_valid_0.05", "examples to ≤ 0.05 nats"
    return "examples_to_valid_0.99", "examples to 0.99"


def _paper(prot: dict[str, Any]) -> str:
    v = prot.get("reported_value")
    return "—" if v is None else f"{v:.3f}"


def _key(r: dict[str, Any]) -> tuple:
    c = r["config"]
    return (c["paper"], c["task"], c["size"], c["model"], INIT_ORDER.get(c["init"], 9),
            c["init"], c["noise"])


def groups(records: Sequence[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    """Records grouped by (paper, task, size, model, init order, init, noise)."""
    g: dict[tuple, list] = defaultdict(list)
    for r in records:
        g[_key(r)].append(r)
    return dict(sorted(g.items()))


def _label(c: dict[str, Any]) -> str:
    return f"{c['init']} ρ={c['noise']:g}" if c["init"] == "compiled+noise" else c["init"]


def _length_table(rows: list[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """Median metric per length bin for each initialisation (bins from the first record)."""
    bins = [(b["lo"], b["hi"], b["beyond_training"]) for b in rows[0][1][0]["by_length"]]
    head = "| init | " + " | ".join(f"{lo}–{hi}{'*' if beyond else ''}" if lo != hi
                                    else f"{lo}{'*' if beyond else ''}"
                                    for lo, hi, beyond in bins) + " |"
    lines = [head, "|" + "---|" * (len(bins) + 1)]
    for label, recs in rows:
        cells = []
        for lo, hi, _ in bins:
            vals = [b["metric"] for r in recs for b in r["by_length"]
                    if b["lo"] == lo and b["hi"] == hi]
            cells.append(f"{statistics.median(vals):.2f}" if vals else "—")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def _finding(task_groups: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> str:
    """One generated sentence per task: what the compiled start did, from the numbers."""
    by = {(c["model"], _label(c)): recs for c, recs in task_groups}
    models = [m for m, label in by if label == "random" and (m, "compiled") in by]
    if not models:
        return ""
    rnd, cmp_ = by[(models[0], "random")], by[(models[0], "compiled")]   # one model, two starts
    metric = rnd[0]["config"]["metric"]

    def med(recs, key):
        return statistics.median(r["final"][key] for r in recs)

    def beyond(recs):
        vals = [b["metric"] for r in recs for b in r["by_length"] if b["beyond_training"]]
        return statistics.mean(vals) if vals else float("nan")

    key, label = _target(metric)
    ex_r = [r["final"].get(key) for r in rnd]
    ex_c = [r["final"].get(key) for r in cmp_]
    n_train = rnd[0]["config"]["n_train"] * rnd[0]["config"]["epochs"]
    return (f"Compiled start: validation {metric} {med(cmp_, 'valid'):.3f} after training, "
            f"{med(cmp_, 'valid_before'):.3f} before any, {label} {_examples(ex_c)}; "
            f"random start: {med(rnd, 'valid'):.3f} after {n_train} examples, {label} "
            f"{_examples(ex_r)}. Beyond the training lengths (mean over bins and seeds): "
            f"compiled {beyond(cmp_):.3f}, random {beyond(rnd):.3f}.")


def _lm_note(rows: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> str:
    """The language-model protocols' second figure: CE difference against the PCFG itself."""
    cells = [f"{_label(c)} {c['model']} {_med([r['final']['test_pcfg'] for r in recs])} "
             f"(before training {_med([r['final']['test_pcfg_before'] for r in recs])})"
             for c, recs in rows]
    return ("Cross-entropy difference in nats (lower is better, 0 optimal) against the true "
            "distribution p_G(w | |w|) / number of lengths (the paper's figure). Against the "
            "PCFG's own p_G(w), which has no length prior (test): " + "; ".join(cells) + ".")


def render(records: Sequence[dict[str, Any]], command: str = "pdanet results DIR",
           source: str = "DIR") -> str:
    """The markdown text of the report (see the module docstring)."""
    if not records:
        raise InputError("no experiment records to report")
    out = ["# Experiments: the source papers' protocols, random vs compiled initialisation", "",
           (f"Generated by `{command}` from the JSON records in `{source}` (one per run, "
           "written by `pdanet experiment` / `pdanet sweep`). Each row: median over seeds "
           "[min, max]. *valid*: strings of the training lengths; *test*: the longer test "
           "lengths. *examples to 0.99*: training examples seen until the validation metric "
           "first reached 0.99 (for a cross-entropy difference in nats: first fell to ≤ 0.05; "
           "0: before training). Wall time: mean seconds per run on the "
           "machine that ran it (`versions` in each record). Protocol sizes and deviations "
           "from the papers are listed under each table "
           "(`pdanet.experiments.protocols`)."), ""]
    by_paper: dict[str, list] = defaultdict(list)
    for key, recs in groups(records).items():
        by_paper[key[0]].append((recs[0]["config"], recs))
    for paper, items in by_paper.items():
        out += [f"## {paper}", ""]
        tasks = sorted({(c["task"], c["size"]) for c, _ in items})
        for task, size in tasks:
            rows = [(c, recs) for c, recs in items if c["task"] == task and c["size"] == size]
            c0, r0 = rows[0][0], rows[0][1][0]
            prot = r0["protocol"]
            out += [f"### {task} ({size}) — metric: {c0['metric']}", "",
                    (f"Protocol: {prot['section']}. Training lengths "
                    f"{min(c0['train_lengths'])}–{max(c0['train_lengths'])}, test lengths "
                    f"{min(c0['test_lengths'])}–{max(c0['test_lengths'])}; {c0['n_train']} "
                    f"training strings, {c0['epochs']} epochs, {c0['optimiser']} lr "
                    f"{c0['lr']:g}, batch {c0['batch_size']}. The paper reports: "
                    f"{prot['reported']}."), "",
                    ("| model | init | seeds | valid | test | test before training | "
                     f"{_target(c0['metric'])[1]} | wall time (s) | paper |"),
                    "|---|---|---|---|---|---|---|---|---|"]
            for c, recs in rows:
                out.append(
                    f"| {c['model']} | {_label(c)} | {len(recs)} | "
                    f"{_med([r['final']['valid'] for r in recs])} | "
                    f"{_med([r['final']['test'] for r in recs])} | "
                    f"{_med([r['final']['test_before'] for r in recs])} | "
                    f"{_examples([r['final'].get(_target(c['metric'])[0]) for r in recs])} | "
                    f"{statistics.mean(r['wall_time_s'] for r in recs):.1f} | "
                    f"{_paper(prot)} |")
            out.append("")
            finding = _finding(rows)
            if finding:
                out += [finding, ""]
            out += [("Metric by length bin (median over seeds; * = longer than any training "
                    "string):"), ""]
            out += _length_table([(f"{c['model']} {_label(c)}", recs) for c, recs in rows])
            out.append("")
            if c0["metric"] in LOWER_IS_BETTER:
                out += [_lm_note(rows), ""]
            if prot.get("deviation"):
                out += [f"Deviations from the paper: {prot['deviation']}", ""]
            if prot.get("notes"):
                out += [f"Notes: {prot['notes']}", ""]
    known = {p for p, _ in PROTOCOLS}
    missing = sorted(known - set(by_paper))
    if missing:
        out += ["## Not run", "", "No records for: " + ", ".join(missing) + ".", ""]
    return "\n".join(out)


def write_report(directory: str | Path, path: str | Path, preamble: str = "",
                 command: str | None = None) -> Path:
    """Render the records in `directory` into `path` (markdown); `preamble` (markdown) goes
    after the title's paragraph."""
    text = render(load(directory), command or f"pdanet results {directory} --output {path}",
                  str(directory))
    if preamble:
        head, _, rest = text.partition("\n## ")
        text = head.rstrip() + "\n\n" + preamble.strip() + "\n\n## " + rest
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


__all__ = ["groups", "load", "render", "write_report"]

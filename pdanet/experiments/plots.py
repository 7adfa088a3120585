"""The plots of one experiment record, written with matplotlib's Agg canvas (no display, no
pyplot state): the learning curve and the metric by length bin."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _figure(width: float = 6.0, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _ylim(ax, record: dict[str, Any]) -> None:
    """[0, 1] for accuracies; the data's own range for a cross-entropy difference (nats)."""
    if record["config"]["metric"] != "ce_difference":
        ax.set_ylim(-0.02, 1.02)


def _title(record: dict[str, Any]) -> str:
    c = record["config"]
    noise = f" ρ={c['noise']}" if c["init"] == "compiled+noise" else ""
    return f"{c['paper']} {c['task']} · {c['model']} · {c['init']}{noise} · seed {c['seed']}"


def _save(fig, ax, record: dict[str, Any], path: str | Path) -> Path:
    """Title `ax` with the run (`_title`), lay `fig` out and write it to `path`."""
    ax.set_title(_title(record), fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    return path


def learning_curve(record: dict[str, Any], path: str | Path) -> Path:
    """Training loss and the metric on the validation (training lengths) and test (longer)
    strings against training examples seen."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    curve = record["curve"]
    x = [row["examples"] for row in curve]
    metric = record["config"]["metric"]
    ax.plot(x, [row["valid"] for row in curve], marker="o", label=f"valid {metric}")
    ax.plot(x, [row["test"] for row in curve], marker="s", label=f"test {metric} (longer)")
    ax.set_xlabel("training examples seen")
    ax.set_ylabel(metric)
    _ylim(ax, record)
    ax2 = ax.twinx()
    ax2.plot(x[1:], [row["loss"] for row in curve[1:]], color="grey", ls="--", label="train loss")
    ax2.set_ylabel("training loss")
    lines = ax.get_legend_handles_labels()
    more = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="center right")
    return _save(fig, ax, record, path)


def by_length(record: dict[str, Any], path: str | Path) -> Path:
    """The metric by length bin after training (and before, dotted); the shaded bins are
    longer than any training string."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    rows = record["by_length"]
    x = [(r["lo"] + r["hi"]) / 2 for r in rows]
    ax.plot(x, [r["metric"] for r in rows], marker="o", label="after training")
    before = record.get("by_length_before")
    if before:
        ax.plot([(r["lo"] + r["hi"]) / 2 for r in before], [r["metric"] for r in before],
                ls=":", marker=".", label="before training")
    beyond = [r for r in rows if r["beyond_training"]]
    if beyond:
        ax.axvspan(beyond[0]["lo"] - 0.5, beyond[-1]["hi"] + 0.5, color="0.9", zorder=0,
                   label="beyond training lengths")
    ax.set_xlabel("string length (bin centre)")
    ax.set_ylabel(record["config"]["metric"])
    _ylim(ax, record)
    ax.legend(fontsize=7)
    return _save(fig, ax, record, path)


__all__ = ["by_length", "learning_curve"]

"""The whole pipeline on built-in examples: ``python -m pdanet.demo`` (``make demo``).

1. Dyck-(2, 3): compile every construction (Elman, LSTM × hewitt, onehot, compact);
2. verify each: every prefix up to length 8, random strings, long busy strings;
3. certify each for all lengths (the LSTM certificate of lstm/compact is written as JSON);
4. hidden units against their bounds and the information floor for a few (k, m);
5. named tasks (reversal, boolean_formula, cumulative_xor, marked_reversal): a short trace, a
   compiled network checked against the machine, and the state diagram (SVG, when Graphviz's
   ``dot`` is installed);
6. figures: a trace heatmap and the bounds plot (PNG, when matplotlib is installed);
7. weights saved as safetensors, loaded back and verified again.

Everything is written under ``out/`` (or ``main(out_dir=...)``).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

DYCK = (2, 3)
TARGETS = ("elman", "lstm")
METHODS = ("hewitt", "onehot", "compact")
BOUNDS_K = (2, 16, 1024)
BOUNDS_M = (3, 5)
BOUNDS_MAX_UNITS = 2000
TASK_STRINGS = {
    "reversal": "ab##",
    "boolean_formula": "TF∧T∨",
    "cumulative_xor": "1101",
    "marked_reversal": "01#10",
}
HEATMAP_STRING = "([()])"


class _Section:
    """Numbered section headings with the time each section took."""

    def __init__(self, out: TextIO):
        self.out, self.n, self.t0 = out, 0, None

    def __call__(self, title: str) -> None:
        self.close()
        self.n += 1
        self.t0 = time.perf_counter()
        print(f"\n{'=' * 78}\n{self.n}. {title}\n{'=' * 78}", file=self.out)

    def close(self) -> None:
        if self.t0 is not None:
            print(f"   ({time.perf_counter() - self.t0:.1f} s)", file=self.out)
            self.t0 = None


def _have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: Sequence[str] | None = None, out_dir: str | Path = "out",
         out: TextIO | None = None) -> int:
    """Run the demo, writing files to `out_dir`; returns 0 when every check passed."""
    import argparse

    import pdanet as pn
    from pdanet.cli import (
        bounds_rows,
        default_target,
        format_config,
        format_output,
        network_summary,
    )
    from pdanet.export import load_network, save_network
    from pdanet.verify.bounds import format_table

    parser = argparse.ArgumentParser(prog="python -m pdanet.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(out_dir), help="output folder (default: out)")
    out_dir = parser.parse_args(list(argv or [])).out
    out = out if out is not None else sys.stdout
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    section = _Section(out)
    failures: list[str] = []
    written: list[Path] = []
    t_start = time.perf_counter()

    def say(text: str = "") -> None:
        print(text, file=out)

    k, m = DYCK
    machine = pn.tasks.dyck(k=k, m=m)

    section(f"Compile Dyck-({k}, {m}) with every construction")
    nets = {}
    say(f"{'construction':<14} {'units':>5}  {'bound':<42} {'β':>4}  margin")
    for target in TARGETS:
        for method in METHODS:
            net = pn.compile(machine, target=target, method=method)
            nets[net.construction] = net
            info = network_summary(net)
            say(f"{net.construction:<14} {info['hidden_units']:>5}  "
                f"{info['bound'] + ' = ' + str(info['bound_value']):<42} {info['scale']:>4}  "
                f"{info['margin']}")

    section("Verify: every prefix up to length 8, 1000 random strings of length 9–32, "
            "16 busy strings of length 1000")
    for name, net in nets.items():
        report = pn.verify(machine, net, max_length=8, samples=1000, sample_lengths=(9, 32),
                           long_length=1000, long_samples=16)
        status = "OK" if report.ok else "FAILED"
        say(f"{name:<14} {status}: {report.strings_checked:,} strings, "
            f"{report.steps_checked:,} steps")
        if not report.ok:
            failures.append(f"verify {name}")
            say(f"    {report.counterexample}")

    section("Certify for every length (sound interval arithmetic in float32)")
    certificates = {}
    for name, net in nets.items():
        cert = pn.certify(machine, net)
        certificates[name] = cert
        reach = ("every length" if cert.all_lengths else
                 f"lengths ≤ {cert.max_length:,}" if cert.ok else "—")
        say(f"{name:<14} {'CERTIFIED' if cert.ok else 'NOT CERTIFIED'} for {reach} "
            f"(β = {cert.scale}, ε = {cert.eps:g}, {cert.configs} configurations)")
        if not cert.ok:
            failures.append(f"certify {name}")
    cert_path = out_dir / f"certificate_dyck_{k}_{m}_lstm_compact.json"
    cert_path.write_text(certificates["lstm/compact"].to_json() + "\n", encoding="utf-8")
    written.append(cert_path)
    say(f"\nwrote {cert_path}")

    section("Hidden units against bounds and the information floor ⌈log₂ Σ kⁱ⌉")
    rows = bounds_rows(BOUNDS_K, BOUNDS_M, TARGETS, METHODS, BOUNDS_MAX_UNITS)
    say(format_table(rows, ("k", "m", "construction", "bound", "hidden_units", "floor",
                            "ratio", "note")))
    if any(r.matches is False for r in rows):
        failures.append("bounds")

    section("Named tasks: traces, compiled networks, diagrams")
    have_dot = shutil.which("dot") is not None
    if not have_dot:
        say("(Graphviz `dot` is not installed: diagrams are not rendered)")
    for task, string in TASK_STRINGS.items():
        tm = pn.tasks.get(task)
        say(f"\n{task}: {tm!r}")
        say(f"  trace of {string!r}:")
        for t, step in enumerate(tm.trace(string)):
            symbol = "" if step.symbol is None else str(step.symbol)
            say(f"    {t:>2} {symbol:<2} {format_config(tm, step.config):<34} "
                f"{format_output(tm, step.output)}")
        target = default_target(tm)
        net = pn.compile(tm, target=target)
        report = pn.verify(net.machine, net, max_length=5, samples=200, long_length=200,
                           long_samples=4)
        say(f"  {net.construction}: {net.hidden_units} units; verify "
            f"{'OK' if report.ok else 'FAILED'} ({report.steps_checked:,} steps)")
        if not report.ok:
            failures.append(f"verify {task}")
        if have_dot:
            path = pn.render(tm, out_dir / f"{task}.svg")
            written.append(Path(path))
            say(f"  wrote {path}")

    section("Figures")
    if _have_matplotlib():
        from pdanet.plot import bounds_plot, trace_heatmap

        net = nets["lstm/compact"]
        path = out_dir / "trace_heatmap.png"
        trace_heatmap(net, HEATMAP_STRING).savefig(path, dpi=80)
        written.append(path)
        say(f"wrote {path} ({net.construction} on {HEATMAP_STRING!r})")
        path = out_dir / "bounds.png"
        bounds_plot(rows).savefig(path, dpi=80)
        written.append(path)
        say(f"wrote {path}")
    else:
        say("(matplotlib is not installed: figures are skipped; pip install 'pdanet[dev]')")

    section("Weights: save as safetensors, load back, verify again")
    net = nets["lstm/compact"]
    path = save_network(net, out_dir / f"dyck_{k}_{m}_lstm_compact.safetensors", task="dyck",
                        params={"k": k, "m": m})
    written.append(path)
    loaded = load_network(path)
    report = pn.verify(loaded.machine, loaded, max_length=8, samples=0, long_length=1000)
    say(f"wrote {path}; loaded {loaded.construction} for {loaded.machine!r}, β = "
        f"{loaded.scale}, weights {'as compiled' if loaded.info['weights_match_exact'] else 'differ'}"
        f"; verify {'OK' if report.ok else 'FAILED'}")
    if not report.ok:
        failures.append("verify loaded network")

    section.close()
    say(f"\n{len(written)} files in {out_dir}/: " + ", ".join(p.name for p in written))
    say(f"total {time.perf_counter() - t_start:.1f} s; "
        + ("every check passed" if not failures else f"FAILED: {', '.join(failures)}"))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

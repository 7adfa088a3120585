"""The README's claims, checked against the code: the tour runs, the task table and the notations
it documents are the ones the code uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pdanet as pn

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
def test_the_tour_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    tour = _python_blocks(README)[0]
    assert "pn.compile" in tour
    exec(compile(tour, "README.md:tour", "exec"), {"__name__": "__readme__"})


def test_every_task_in_the_table_exists_and_every_task_has_a_machine():
    section = README.split("## Tasks", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {n for row in rows for n in re.findall(r"`(\w+)`", row.split("|")[1])}
    documented -= {"epsilon"}
    assert len(documented) > 20
    names = set(pn.tasks.names())
    assert documented <= names, documented - names
    for n in names:
        assert pn.tasks.get(n) is not None, n


def test_sample_takes_the_documented_rng_keyword():
    a = pn.tasks.sample("dyck2", 3, 6, rng=0)
    b = pn.tasks.sample("dyck2", 3, 6, rng=0)
    assert a == b and len(a) == 3


def test_dyck_symbols_are_as_documented():
    assert list(pn.tasks.dyck(k=2, m=2).alphabet) == ["(", "[", ")", "]"]
    assert list(pn.tasks.dyck(k=5, m=2).alphabet)[:2] == ["(0", "(1"]
    assert "`(0 … (k−1`" in README
    m = pn.tasks.dyck(k=5, m=3)
    assert m.accepts("(0 (1 )1 )0") and not m.accepts("(0 )1")


def test_diagram_notation_is_as_documented():
    src = pn.draw(pn.tasks.get("reversal")).source
    # DPDT lines read "input : output, top → pushed (top first)"
    assert "a : #, a → aa" in src and "# : a, a → ε" in src
    assert "`a : y, X → γ`" in README

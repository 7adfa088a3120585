"""The package's import structure: no import cycles between pdanet's modules (every import
statement counts, those inside functions included), no module outside a network's own module
spells its ``state_dict`` keys, and ``import pdanet`` works without Graphviz's Python package."""

from __future__ import annotations

import ast
import itertools
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pdanet"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module named by a ``from ... import`` (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The pdanet modules that `source` (module `module`) imports anywhere: ``import a.b``
    names a.b; ``from pkg import name`` names pkg.name when that is a module, else pkg; a call
    ``importlib.import_module("...")`` or ``__import__("...")`` with a literal name counts too."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            pkg = _absolute(node, module, is_package)
            for a in node.names:
                out.add(f"{pkg}.{a.name}" if f"{pkg}.{a.name}" in known else pkg)
        elif isinstance(node, ast.Call) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name in ("import_module", "__import__"):
                out.add(node.args[0].value)
    return {m for m in out if m in known and m != module}


def import_graph() -> nx.DiGraph:
    mods = modules()
    known = set(mods)
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for name, path in mods.items():
        for target in imported(path.read_text(encoding="utf-8"), name,
                               path.name == "__init__.py", known):
            graph.add_edge(name, target)
    return graph


def test_the_import_walk_sees_every_kind_of_import():
    known = {"pdanet.a", "pdanet.a.b", "pdanet.a.c", "pdanet.a.f", "pdanet.d", "pdanet.e"}
    source = textwrap.dedent("""
        import numpy
        import pdanet.d
        from pdanet.a import c, some_function
        def later():
            from .f import g
            import importlib
            importlib.import_module("pdanet.e")
    """)
    assert imported(source, "pdanet.a.b", False, known) == {
        "pdanet.d", "pdanet.a.c", "pdanet.a", "pdanet.a.f", "pdanet.e"}
    assert imported("from . import c", "pdanet.a", True, known) == {"pdanet.a.c"}
    assert imported("from .. import d", "pdanet.a.b", False, known) == {"pdanet.d"}
    # function-level imports of the real package are seen (the tasks' dataset loads torch late)
    assert import_graph().has_edge("pdanet.automata.tasks", "pdanet.learning.data")


def test_no_import_cycles():
    graph = import_graph()
    components = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    cycles = [" -> ".join(c + [c[0]]) for c in itertools.islice(nx.simple_cycles(graph), 50)]
    assert not components, ("import cycles:\n" + "\n".join(sorted(cycles, key=len))
                            + f"\nstrongly connected modules: {components}")


# --- weights by meaning ---------------------------------------------------------------------------
# the modules that define the networks (nn.Module classes) and so may name their own parameters
NETWORK_MODULES = {
    "pdanet/constructions/modules.py",
    "pdanet/constructions/controllers.py",
    "pdanet/constructions/ns.py",
    "pdanet/constructions/second_order.py",
    "pdanet/constructions/dfa_rnn.py",
    "pdanet/constructions/buffered.py",
    "pdanet/constructions/dyck.py",
}
NETWORK_PACKAGES = ("pdanet/constructions/stacks/", "pdanet/models/")
STATE_DICT_KEYS = re.compile("|".join(re.escape(p) for p in (
    "rnn.weight_", "rnn.bias_", '"embedding.weight"', '"readout.weight"', "cell.weight_",
    "out_h.weight", "actions.weight", "values.weight")))


def test_network_module_list_is_current():
    for rel in NETWORK_MODULES:
        assert (ROOT / rel).is_file(), rel


def test_only_network_modules_spell_state_dict_keys():
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in NETWORK_MODULES or rel.startswith(NETWORK_PACKAGES):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if STATE_DICT_KEYS.search(line):
                hits.append(f"{rel}:{i}: {line.strip()}")
    assert not hits, ("state_dict keys spelled outside the network modules (read weights through "
                      "the module's blocks() accessor):\n" + "\n".join(hits))


# --- optional dependencies ------------------------------------------------------------------------
def test_import_pdanet_and_tasks_without_graphviz():
    code = textwrap.dedent("""
        import sys
        sys.modules["graphviz"] = None  # importing it now raises ImportError
        import pdanet as pn
        assert all(pn.tasks.get(name) is not None for name in pn.tasks.names())
        for name in ("reversal", "dyck2", "parity"):
            machine, reference = pn.tasks.get(name), pn.tasks.reference(name)
            for s in pn.tasks.sample(name, 5, [0, 4], 0):
                assert pn.tasks.apply(machine, s) == reference(s)
        m = pn.tasks.dyck(k=2, m=3)
        assert m.accepts("([])")
        print(sorted(n for n in ("graphviz", "torch") if sys.modules.get(n) is not None))
    """)
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"

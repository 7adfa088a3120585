"""Start-up: ``import pdanet`` and the light CLI commands import no torch; the lazily loaded
public names are the real objects; `pn.verify` stays the function whatever is imported after."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import pdanet as pn


def _python(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (so that nothing this test process imported counts)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False,
                          capture_output=True, text=True, timeout=300)


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_import_pdanet_imports_no_torch():
    out = _ok(_python("""
        import sys
        import pdanet as pn
        m = pn.tasks.dyck(k=2, m=3)
        assert m.accepts("([])") if hasattr(m, "accepts") else True
        pn.DFA, pn.NFA, pn.load, pn.regex_to_dfa, pn.errors, pn.limits
        import pdanet.verify, pdanet.constructions, pdanet.verify.bounds, pdanet.verify.report
        print(sorted(n for n in ("torch", "matplotlib") if n in sys.modules))
    """))
    assert out.strip() == "[]"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_light_cli_commands_import_no_torch():
    out = _ok(_python("""
        import io, sys
        from pdanet.cli import main
        runs = [["--help"], ["tasks"], ["tasks", "--json"], ["run", "dyck", "--k", "2", "--m", "3", "([])"],
                ["run", "reversal", "ab##", "--json"], ["draw", "dyck", "--k", "2", "--m", "2"],
                ["verify", "--help"], ["certify", "--help"], ["run", "dyck", "--k", "x", "()"],
                ["run", "dyck", "--k", "1000000000", "--m", "3", "(0 )0"]]
        for argv in runs:
            code = main(argv, io.StringIO(), io.StringIO())
            assert code == (2 if "x" in argv else 0), (argv, code)
        assert "torch" not in sys.modules
        # Dyck-(10^9, 3) is stepped without building anything of size k
        with open("/proc/self/status") as f:  # peak resident memory of this process (VmHWM)
            print(next(line.split()[1] for line in f if line.startswith("VmHWM")))
    """))
    assert int(out.strip()) < 200 * 1024  # KB


def test_verify_is_the_function_after_importing_every_submodule():
    out = _ok(_python("""
        import importlib, pkgutil
        import pdanet.verify.bounds  # the subpackage first, then the package's name
        import pdanet as pn
        names = sorted(m.name for m in pkgutil.walk_packages(pn.__path__, "pdanet.")
                       if m.name not in ("pdanet.demo",))
        for name in names:
            importlib.import_module(name)
        from pdanet.verify.lockstep import verify
        from pdanet.verify.certificate import certify
        import sys
        assert pn.verify is verify, pn.verify
        assert pn.certify is certify
        assert sys.modules["pdanet.verify"].__name__ == "pdanet.verify"
        from pdanet import verify as v
        assert v is verify
        print(len(names))
    """))
    assert int(out.strip()) > 20


def test_verify_is_the_function_in_this_process():
    import importlib

    importlib.import_module("pdanet.verify.structural")
    from pdanet.verify.lockstep import verify

    assert pn.verify is verify and callable(pn.verify)
    assert sys.modules["pdanet.verify"].Report.__name__ == "Report"


@pytest.mark.parametrize("name", pn.__all__)
def test_every_public_name_resolves(name):
    assert getattr(pn, name) is not None
    assert name in dir(pn)


def test_lazy_names_are_the_real_objects():
    from pdanet.constructions.base import CompiledNetwork
    from pdanet.constructions.table import compile
    from pdanet.export import load_network
    from pdanet.learning.init import initialize
    from pdanet.verify import bounds
    from pdanet.verify.certificate import Certificate

    assert pn.compile is compile and pn.CompiledNetwork is CompiledNetwork
    assert pn.load_network is load_network and pn.initialize is initialize
    assert pn.Certificate is Certificate and pn.bounds is bounds
    import pdanet.constructions as pc
    import pdanet.verify  # noqa: F401

    assert pc.compile is compile and "available" in dir(pc)
    assert sys.modules["pdanet.verify"].table is bounds.table
    with pytest.raises(AttributeError, match="no_such_name"):
        pn.no_such_name  # noqa: B018
    with pytest.raises(AttributeError, match="no_such_name"):
        pc.no_such_name  # noqa: B018
    with pytest.raises(AttributeError, match="no_such_name"):
        sys.modules["pdanet.verify"].no_such_name  # noqa: B018

"""Resource limits: every large allocation is estimated and checked here *before* it happens.

A limit is a plain number. Defaults come from the environment (``PDANET_MAX_BYTES``,
``PDANET_MAX_UNITS``, ``PDANET_MAX_CONFIGS``, ``PDANET_MAX_STATES``) or the values below; raise
them for one block of code with ``with pdanet.limits.raised(max_bytes=8 * 2**30): ...`` or for the
whole process with ``pdanet.limits.set_limits(...)``. A guard that trips raises
:class:`pdanet.errors.ResourceError` naming what was estimated, the estimate, the limit, and how
to raise it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pdanet.errors import InputError, ResourceError

__all__ = [
    "Limits",
    "check",
    "current",
    "human_bytes",
    "position_bytes",
    "positions_per_call",
    "raised",
    "run_bytes",
    "set_limits",
]


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(float(raw))
    except ValueError:
        raise InputError(f"environment variable {name}={raw!r} is not a number; "
                         f"give a positive integer such as {default}") from None
    if value <= 0:
        raise InputError(f"environment variable {name}={raw!r} must be positive")
    return value


@dataclass(frozen=True)
class Limits:
    """The limits in force. Each is a count; ``max_bytes`` is memory for one allocation plan.

    max_bytes: estimated bytes of one operation's working memory (arrays, tensors).
    max_units: hidden units (or parameters / 10) of one compiled network.
    max_configs: configurations a symbolic exploration or enumeration may visit.
    max_states: states of a machine drawn or determinised.
    """

    max_bytes: int = 4 * 2**30
    max_units: int = 1_000_000
    max_configs: int = 10_000_000
    max_states: int = 5_000

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise InputError(f"limit {f.name}={v!r} must be a positive integer")


def _from_env() -> Limits:
    d = Limits()
    return Limits(
        max_bytes=_env_int("PDANET_MAX_BYTES", d.max_bytes),
        max_units=_env_int("PDANET_MAX_UNITS", d.max_units),
        max_configs=_env_int("PDANET_MAX_CONFIGS", d.max_configs),
        max_states=_env_int("PDANET_MAX_STATES", d.max_states),
    )


_current: Limits | None = None


def current() -> Limits:
    """The limits in force now (read from the environment on first use)."""
    global _current
    if _current is None:
        _current = _from_env()
    return _current


def set_limits(**changes: int) -> Limits:
    """Replace some limits for the rest of the process; returns the previous limits."""
    global _current
    old = current()
    _current = dataclasses.replace(old, **changes)
    return old


@contextlib.contextmanager
def raised(**changes: int) -> Iterator[Limits]:
    """Within the block, use these limits (e.g. ``raised(max_bytes=16 * 2**30)``)."""
    global _current
    old = set_limits(**changes)
    try:
        yield current()
    finally:
        _current = old


_ENV = {"max_bytes": "PDANET_MAX_BYTES", "max_units": "PDANET_MAX_UNITS",
        "max_configs": "PDANET_MAX_CONFIGS", "max_states": "PDANET_MAX_STATES"}


def human_bytes(n: float) -> str:
    """``1.5 GB`` style (powers of 1024)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # unreachable


def check(what: str, estimate: float, kind: str = "max_bytes", hint: str = "") -> None:
    """Raise ResourceError if ``estimate`` exceeds the limit ``kind``; call before allocating.

    ``what`` names the operation ("compiling bigram_flip to stack_rnn"); ``hint`` says what else
    the user can do (a smaller parameter, another target).
    """
    limit = getattr(current(), kind)
    if estimate <= limit:
        return
    if kind == "max_bytes":
        est, lim = human_bytes(estimate), human_bytes(limit)
    else:
        est, lim = f"{estimate:,.0f}", f"{limit:,}"
    noun = {"max_bytes": "memory", "max_units": "hidden units", "max_configs": "configurations",
            "max_states": "states"}[kind]
    msg = (f"{what} would need about {est} of {noun} (limit {lim}); raise the limit with "
           f"`pdanet.limits.raised({kind}=...)` or the environment variable {_ENV[kind]}")
    if hint:
        msg += f", or {hint}"
    raise ResourceError(msg)


# --- the working memory of running a compiled network ------------------------------------------
# Bytes per (row, step) position and hidden unit that running a compiled stack-RNN family holds at
# its peak under `pn.verify` in float32 (forward states, pre-activations, the decoder's working
# copies), measured as the growth of the peak resident set over 20 strings of length 2,000
# (vocabulary-128 reversal and solve_equation, 600–1,200 units): four-gate LSTM controllers
# 8 (Suzgun) to 38 (Hao), one-gate controllers 12–21; Dyck-2 (7–15 units) 200–560 bytes per
# position in all.
# The constants below are those figures with headroom; a float64 run counts twice.
PER_UNIT = {"lstm": 48, "rnn": 32}
PER_POSITION = 512           # the readings, the store's cells, the logits and the comparison


def position_bytes(hidden_units: int, cell: str, width: int = 0) -> int:
    """Estimated bytes one (row, step) position of a float32 run holds: ``PER_UNIT[cell]`` per
    hidden unit (``cell`` "lstm" for four-gate controllers, "rnn" for one-gate ones), 16 per
    value of ``width`` (readings, pushed vectors, logits) and `PER_POSITION`."""
    if cell not in PER_UNIT:
        raise InputError(f"cell must be one of {sorted(PER_UNIT)}, got {cell!r}")
    for name, v in (("hidden_units", hidden_units), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InputError(f"{name} must be a non-negative integer, got {v!r}")
    return PER_UNIT[cell] * hidden_units + 16 * width + PER_POSITION


def run_bytes(net, dtype_bytes: int = 4) -> int | None:
    """Bytes per (row, step) position of running ``net`` (a CompiledNetwork whose compile
    function recorded ``info["position_bytes"]``, its float32 estimate), for values of
    ``dtype_bytes`` bytes; None when the network records no estimate."""
    info = getattr(net, "info", None)
    per = info.get("position_bytes") if isinstance(info, Mapping) else None
    if per is None:
        return None
    if dtype_bytes not in (2, 4, 8):
        raise InputError(f"dtype_bytes must be 2, 4 or 8, got {dtype_bytes!r}")
    return int(per) * max(dtype_bytes, 4) // 4     # float16/bfloat16 runs: as float32


def positions_per_call(net, requested: int, longest: int, dtype_bytes: int = 4) -> int:
    """How many (row, step) positions one call of ``net`` may take so that its working memory
    (`run_bytes`) stays within ``max_bytes``: min(``requested``, max_bytes // run_bytes), and never
    fewer than ``longest`` (one row of the longest string, which a call cannot split). Raises
    ResourceError, before anything is allocated, when that one row alone would exceed the limit.
    A network with no estimate gets ``requested``."""
    for name, v in (("requested", requested), ("longest", longest)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{name} must be a positive integer, got {v!r}")
    per = run_bytes(net, dtype_bytes)
    if per is None:
        return requested
    units = getattr(net, "hidden_units", None)
    size = f" ({units:,} hidden units)" if isinstance(units, int) else ""
    check(f"running {getattr(net, 'construction', 'the network')}{size} on one string of "
          f"{longest - 1:,} symbols", per * longest, "max_bytes",
          hint="check shorter strings, or compile to a model with fewer hidden units "
               "(`pn.available(machine)` lists them)")
    return max(longest, min(requested, current().max_bytes // per))

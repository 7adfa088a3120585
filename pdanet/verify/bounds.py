"""Hidden units against their bounds: the Dyck-(k, m) table and a DFA table.

For each construction the table shows its bound formula (``net.bound``), the formula's value, the
hidden units actually built (the two must agree; a disagreement is flagged), and the information
floor ⌈log₂ Σ_{i=0..m} kⁱ⌉ — the bits needed to tell apart the Σ_{i≤m} kⁱ live configurations of
Dyck-(k, m) (Hewitt et al. 2020, lower-bound argument) — with the ratio units / floor and the
saturation scale β. A construction that is not available is kept as a row with an explicit note.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pdanet.errors import CompileError

#: above this many bits the geometric sum is not materialised (see `information_floor`)
_EXACT_BITS = 1 << 16


def information_floor(k: int, m: int) -> int:
    """⌈log₂ n⌉ for n = Σ_{i=0..m} kⁱ, exactly, in time independent of the size of n.

    k = 1: n = m + 1. k = 2ʲ: n − 1 = 2ʲ(2^{jm} − 1)/(2ʲ − 1) has bit length jm + 1 (m ≥ 1).
    Otherwise, while n has at most 2¹⁶ bits, integer arithmetic; beyond, log₂ n = (m+1)·log₂ k −
    log₂(k − 1) + log₂(1 − k^{−(m+1)}) in 256-bit arithmetic, the last term below 2^{−2¹⁶}: the
    ceiling is exact unless log₂ n lies within 2⁻⁶⁴ of an integer, where integer arithmetic
    decides (guarded by `pdanet.limits`)."""
    if k < 1 or m < 0:
        raise ValueError(f"need k ≥ 1 and m ≥ 0, got k={k}, m={m}")
    if k == 1:
        return m.bit_length()  # n = m + 1
    if m == 0:
        return 0  # n = 1
    j = k.bit_length() - 1
    if k == 1 << j:
        return j * m + 1
    if (m + 1) * k.bit_length() > _EXACT_BITS:
        import mpmath

        with mpmath.workprec(256):
            log_n = (m + 1) * mpmath.log(k, 2) - mpmath.log(k - 1, 2)
            ceil = int(mpmath.ceil(log_n))
            if min(ceil - log_n, log_n - (ceil - 1)) > mpmath.mpf(2) ** -64:
                return ceil
        from pdanet import limits

        limits.check(f"the information floor of Dyck-({k}, {m})", (m + 1) * k.bit_length() / 8)
    n = (k ** (m + 1) - 1) // (k - 1)
    return (n - 1).bit_length()  # ⌈log₂ n⌉ for n ≥ 1


@dataclass(frozen=True)
class BoundRow:
    """One Dyck-(k, m) construction: bound, units, floor. ``None`` cells when not available."""

    k: int
    m: int
    target: str
    method: str
    construction: str
    formula: str | None = None
    bound: int | None = None
    hidden_units: int | None = None
    matches: bool | None = None
    floor: int | None = None
    ratio: float | None = None
    scale: str | None = None
    min_scale: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: the saturation scale used for every weight in the original code of Hewitt et al. (2020)
HEWITT_BLANKET_SCALE = 10_000


@dataclass(frozen=True)
class DFABoundRow:
    """One DFA construction: the machine's size and the construction's units against its bound."""

    machine: str
    states: int
    symbols: int
    target: str
    method: str
    formula: str | None = None
    bound: int | None = None
    hidden_units: int | None = None
    matches: bool | None = None
    scale: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _compile(machine, target: str, method: str | None, options: dict):
    from pdanet.constructions import compile as compile_net

    return compile_net(machine, target, method=method, **options)


def _mismatch_note(net) -> str:
    if net.hidden_units == net.bound_value:
        return ""
    return f"MISMATCH: {net.hidden_units} hidden units built, the bound says {net.bound_value}"


def table(
    k: Sequence[int] = (2, 4, 16),
    m: Sequence[int] = (2, 3, 5),
    targets: Iterable[str] = ("elman", "lstm"),
    methods: Iterable[str] = ("hewitt", "onehot", "compact"),
    machine_factory: Callable[[int, int], Any] | None = None,
    min_scale: bool = False,
    **options,
) -> list[BoundRow]:
    """Compile every Dyck-(k, m) construction for every k, m, target and method, and tabulate
    units against bounds (see the module docstring). ``machine_factory(k, m)`` defaults to
    `pdanet.automata.dyck`; ``options`` are passed to `pdanet.compile`.

    With ``min_scale`` each row also gets the smallest β that certifies (`certify.min_scale`,
    float32, every length; LSTMs under the saturating kernel model, see `certify`), to compare
    with the construction's own β and the blanket β = 10⁴ (`HEWITT_BLANKET_SCALE`) of the original code of Hewitt et al."""
    if machine_factory is None:
        from pdanet.automata import dyck as machine_factory
    targets, methods = tuple(targets), tuple(methods)
    rows = []
    for kk in k:
        for mm in m:
            machine = machine_factory(kk, mm)
            floor = information_floor(kk, mm)
            for target in targets:
                for method in methods:
                    name = f"{target}/{method}"
                    try:
                        net = _compile(machine, target, method, options)
                    except CompileError as exc:
                        rows.append(BoundRow(kk, mm, target, method, name, floor=floor,
                                             note=f"not available: {exc}"))
                        continue
                    units = int(net.hidden_units)
                    least, note = _least_scale(machine, net) if min_scale else (None, "")
                    rows.append(BoundRow(
                        kk, mm, target, method, name,
                        formula=str(net.bound),
                        bound=int(net.bound_value),
                        hidden_units=units,
                        matches=units == int(net.bound_value),
                        floor=floor,
                        ratio=units / floor if floor else None,
                        scale=str(net.scale),
                        min_scale=least,
                        note=_mismatch_note(net) or note,
                    ))
    return rows


def _least_scale(machine, net) -> tuple[str | None, str]:
    from pdanet.errors import CertificationError
    from pdanet.verify.certificate import min_scale

    try:
        beta, _ = min_scale(machine, net)
    except CertificationError as exc:
        return None, f"min β not found: {exc}"
    return f"{float(beta):.4g}", ""


def dfa_table(machines: Iterable[Any], targets: Iterable[str] = ("elman", "lstm"),
              method: str | None = None, **options) -> list[DFABoundRow]:
    """For each DFA and target: the default (or given) construction's units against its bound."""
    targets = tuple(targets)
    rows = []
    for machine in machines:
        label = str(getattr(machine, "name", None) or repr(machine))
        n_states = len(getattr(machine, "states", ()))
        n_symbols = len(machine.alphabet)
        for target in targets:
            try:
                net = _compile(machine, target, method, options)
            except CompileError as exc:
                rows.append(DFABoundRow(label, n_states, n_symbols, target, method or "default",
                                        note=f"not available: {exc}"))
                continue
            units = int(net.hidden_units)
            rows.append(DFABoundRow(
                label, n_states, n_symbols, target, net.method,
                formula=str(net.bound),
                bound=int(net.bound_value),
                hidden_units=units,
                matches=units == int(net.bound_value),
                scale=str(net.scale),
                note=_mismatch_note(net),
            ))
    return rows


def _cell(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def format_table(rows: Sequence[Any], columns: Sequence[str] | None = None,
                 max_note: int = 60) -> str:
    """Rows (dataclasses with ``to_dict`` or plain dicts) as an aligned plain-text table."""
    dicts = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in rows]
    if not dicts:
        return "(no rows)"
    columns = list(columns or dicts[0].keys())
    cells = []
    for d in dicts:
        row = []
        for c in columns:
            text = _cell(d.get(c))
            if c == "note" and len(text) > max_note:
                text = text[: max_note - 1] + "…"
            row.append(text)
        cells.append(row)
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()
    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


__all__ = [
    "HEWITT_BLANKET_SCALE",
    "BoundRow",
    "DFABoundRow",
    "dfa_table",
    "format_table",
    "information_floor",
    "table",
]

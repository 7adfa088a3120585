"""The table of constructions: which compile function builds which (machine type, target,
method), read by `compile` and `available`."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Sized

import torch

from pdanet.automata.base import Machine
from pdanet.constructions.base import CompiledNetwork, as_dtype, check_options
from pdanet.errors import CompileError, InputError


# --- the registry -----------------------------------------------------------------------------

_REGISTRY: dict[tuple[type, str, str], Callable[..., CompiledNetwork]] = {}
_DEFAULT_METHOD: dict[tuple[type, str], str] = {}


def register(machine_type: type, target: str, method: str, default: bool = False):
    """Decorator: register `fn(machine, **options) -> CompiledNetwork` for (type, target, method)."""

    def deco(fn):
        _REGISTRY[(machine_type, target, method)] = fn
        if default or (machine_type, target) not in _DEFAULT_METHOD:
            _DEFAULT_METHOD[(machine_type, target)] = method
        return fn

    return deco


def available(machine: Machine) -> list[tuple[str, str]]:
    """(target, method) pairs that can compile this machine."""
    found = []
    for (mtype, target, method) in _REGISTRY:
        if isinstance(machine, mtype):
            found.append((target, method))
    return sorted(set(found))


def compile(machine: Machine, target: str = "lstm", method: str | None = None,
            dtype: torch.dtype = torch.float32, **options) -> CompiledNetwork:
    """Compile `machine` into a network for `target` ("elman", "lstm", "second_order",
    "stack_rnn", "ns_rnn", …) with construction `method` (the target's default when None).

    ``dtype`` is a floating torch dtype or its name ("float32", "float64", "float16",
    "bfloat16"). Options are validated before compiling (`check_options`): ``scale`` finite and
    > 0, integer options integers (not booleans) in range; an option the construction does not
    take is an InputError listing the ones it does.
    """
    dtype = as_dtype(dtype)
    for name, value in (("target", target), ("method", method)):
        if value is not None and not isinstance(value, str):
            raise InputError(f"{name}={value!r} must be a string such as 'lstm'")
    options = check_options(options)
    alphabet = getattr(machine, "alphabet", None)
    if isinstance(alphabet, Sized) and len(alphabet) == 0:
        raise CompileError(f"{machine!r} has an empty input alphabet; a network reads at least "
                           "one symbol: add a symbol to the alphabet")
    _load_constructions()
    for mtype in type(machine).__mro__:
        if (mtype, target) in _DEFAULT_METHOD:
            meth = method or _DEFAULT_METHOD[(mtype, target)]
            fn = _REGISTRY.get((mtype, target, meth))
            if fn is None:
                methods = sorted(m for (t, tg, m) in _REGISTRY if t is mtype and tg == target)
                raise CompileError(
                    f"no method {meth!r} for target {target!r} on {type(machine).__name__}; "
                    f"methods: {methods}"
                )
            _check_keywords(fn, f"{target}/{meth}", options)
            try:
                return fn(machine, dtype=dtype, **options)
            except TypeError as exc:
                if "unexpected keyword argument" not in str(exc):
                    raise
                raise InputError(f"{target}/{meth}: {exc}; its docstring lists the options it "
                                 "takes") from None
    options_text = ", ".join(f"{t}/{m}" for t, m in available(machine)) or "none"
    hint = getattr(machine, "compile_hint", "")
    if not hint and hasattr(machine, "bounded") and not available(machine):
        hint = " The stack is unbounded: bound its depth with `.bounded(m)` first."
    raise CompileError(
        f"cannot compile {type(machine).__name__} to target {target!r}; available: "
        f"{options_text}.{hint}"
    )


def _check_keywords(fn: Callable[..., Any], name: str, options: Mapping[str, Any]) -> None:
    """InputError for an option that `fn` does not take (when its signature says so)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = [p for p in list(params)[1:] if p != "dtype"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InputError(f"{name} does not take the option(s) {', '.join(unknown)}; it takes: "
                         f"{', '.join(accepted) or 'none'}")


def _load_constructions() -> None:
    """Import the construction modules so that they register themselves."""
    import importlib

    for name in ("dyck", "dfa_rnn", "controllers", "ns", "buffered"):
        try:
            importlib.import_module(f"pdanet.constructions.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"pdanet.constructions.{name}":
                raise


__all__ = ["available", "compile", "register"]

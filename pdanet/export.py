"""Saving compiled networks to weight files and loading them back.

Two formats, chosen by the file name:

- ``.safetensors`` (any other suffix too): the module's ``state_dict`` as tensors, with string
  metadata (``metadata(net)``) in the file header;
- ``.pt``: ``torch.save({"state_dict": ..., "metadata": ...})``, readable with
  ``torch.load(path, weights_only=True)``.

The metadata says how to rebuild the network: the machine (its JSON spec from
`pdanet.automata.io.dumps` when its kind has one, and/or the named task and parameters it came
from; a depth-bounded machine — `BoundedPDA`, `BoundedPDPDA` — as the spec or task of the machine
it bounds plus ``machine_bound``, its ``.bounded(...)`` arguments as JSON), the construction (target, method), the saturation scale β as an exact rational, the dtype,
and for information the bound, hidden units, margin and package version.

`load_network` rebuilds the machine, recompiles the same construction at the same β and dtype
(``pn.compile(...).with_scale(β)``), and then loads the file's tensors into the module with
``load_state_dict(strict=True)``: the module holds exactly the saved weights (a trained or edited
network comes back as saved), while ``weights`` remain the construction's exact ones.
``net.info["weights_match_exact"]`` says whether the two agree.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import sympy as sp
import torch

from pdanet.errors import InputError, PdanetError

FORMAT = "pdanet-network"
FORMAT_VERSION = "1"
REQUIRED = ("format", "format_version", "target", "method", "scale", "dtype")


class WeightsFileError(InputError):
    """A weight file is missing, unreadable, not written by pdanet, or does not fit the network
    that its metadata describes. The message names the file and the bad field."""


def _version() -> str:
    from pdanet import __version__

    return __version__


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def metadata_params(net: Any) -> str:
    """The construction's parameters (e.g. k, m) as JSON text."""
    return json.dumps({k: int(v) for k, v in dict(net.params).items()}, sort_keys=True)


def metadata(net: Any, task: str | None = None, params: Mapping[str, Any] | None = None
             ) -> dict[str, str]:
    """The string metadata stored with a network (see the module docstring). ``task`` and
    ``params`` name the task the machine came from (needed for machines without a file format)."""
    from pdanet.automata.io import dumps

    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "pdanet_version": _version(),
        "machine": repr(net.machine),
        "machine_type": type(net.machine).__name__,
        "target": str(net.target),
        "method": str(net.method),
        "scale": str(sp.Rational(net.scale)),
        "margin": str(net.margin),
        "bound": str(net.bound),
        "bound_value": str(net.bound_value),
        "hidden_units": str(int(net.hidden_units)),
        "params": metadata_params(net),
        "steps_per_symbol": str(int(net.steps_per_symbol)),
        "dtype": _dtype_name(net.dtype),
    }
    name = getattr(net.machine, "name", None)
    if name is not None:
        meta["machine_name"] = str(name)
    # the machine the user compiled (a network built through a conversion, e.g. a language model
    # through the PFSA of a bounded probabilistic DPDA, records it as ``compiled_from``)
    source = net.compiled_from if getattr(net, "compiled_from", None) is not None else net.machine
    machine, bound = _unbounded(source)
    if bound is not None:
        meta["machine_bound"] = json.dumps(bound, sort_keys=True)
    try:
        meta["machine_spec"] = dumps(machine)
    except PdanetError:
        pass  # no file format for this kind: the task reference (if any) rebuilds it
    if task is not None:
        meta["task"] = str(task)
        meta["task_params"] = json.dumps(dict(params or {}), sort_keys=True)
    if "machine_spec" not in meta and "task" not in meta:
        raise InputError(
            f"{type(machine).__name__} has no machine file format, so the weight file could "
            "not rebuild it: pass task=NAME (and params=...) naming the task it came from")
    return meta


def _unbounded(machine: Any) -> tuple[Any, dict | None]:
    """(the machine a depth-bounded machine bounds, its ``.bounded`` arguments), or (machine,
    None) for any other machine."""
    from pdanet.automata.pda import BoundedPDA
    from pdanet.automata.probabilistic import BoundedPDPDA

    if isinstance(machine, BoundedPDA):
        return machine.machine, {"m": machine.m}
    if isinstance(machine, BoundedPDPDA):
        return machine.machine, {"m": machine.m, "overflow": machine.overflow}
    return machine, None


def _bounded(machine: Any, meta: Mapping[str, str], where: str) -> Any:
    """`machine` bounded as the metadata field ``machine_bound`` says (unchanged without it)."""
    if "machine_bound" not in meta:
        return machine
    try:
        bound = json.loads(meta["machine_bound"])
    except (json.JSONDecodeError, RecursionError, TypeError, ValueError) as exc:
        raise WeightsFileError(f"{where}: metadata field 'machine_bound' is not JSON: {exc}") \
            from None
    if not (isinstance(bound, dict) and set(bound) <= {"m", "overflow"} and "m" in bound):
        raise WeightsFileError(f"{where}: metadata field 'machine_bound' must be an object "
                               f"{{\"m\": depth[, \"overflow\": ...]}}, got {bound!r}")
    if not callable(getattr(machine, "bounded", None)):
        raise WeightsFileError(f"{where}: metadata field 'machine_bound' bounds {machine!r}, "
                               "which has no depth bound")
    try:
        return machine.bounded(**bound)
    except (PdanetError, TypeError) as exc:
        raise WeightsFileError(f"{where}: metadata field 'machine_bound' is bad: {exc}") from None


def save_network(net: Any, path: str | os.PathLike, task: str | None = None,
                 params: Mapping[str, Any] | None = None) -> Path:
    """Write the network's module weights and `metadata` to `path` (``.pt``: torch.save; else
    safetensors). Returns the path."""
    path = Path(path)
    meta = metadata(net, task, params)
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in net.module.state_dict().items()}
    if path.suffix.lower() == ".pt":
        torch.save({"state_dict": tensors, "metadata": meta}, path)
    else:
        from safetensors.torch import save_file

        save_file(tensors, str(path), metadata=meta)
    return path


def read_weights(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and metadata of a weight file (WeightsFileError when absent or malformed)."""
    path = Path(path)
    if not path.is_file():
        raise WeightsFileError(f"weight file {str(path)!r} does not exist")
    if path.suffix.lower() == ".pt":
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
        except (RuntimeError, EOFError, ValueError, OSError, pickle.UnpicklingError) as exc:
            raise WeightsFileError(f"{str(path)!r} is not a torch weight file: {exc}") from None
        if not (isinstance(blob, dict) and isinstance(blob.get("state_dict"), dict)
                and isinstance(blob.get("metadata"), dict)):
            raise WeightsFileError(
                f"{str(path)!r} holds no pdanet network: expected a dict with 'state_dict' and "
                "'metadata' (write it with pdanet.save_network)")
        tensors, meta = dict(blob["state_dict"]), dict(blob["metadata"])
    else:
        from safetensors import SafetensorError
        from safetensors.torch import load_file, safe_open

        try:
            tensors = load_file(str(path))
            with safe_open(str(path), framework="pt") as f:
                meta = dict(f.metadata() or {})
        except (SafetensorError, OSError, ValueError) as exc:
            raise WeightsFileError(f"{str(path)!r} is not a safetensors file: {exc}") from None
    if meta.get("format") != FORMAT:
        raise WeightsFileError(
            f"{str(path)!r}: metadata field 'format' is {meta.get('format')!r}, not {FORMAT!r}; "
            "the file was not written by pdanet.save_network")
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise WeightsFileError(f"{str(path)!r}: metadata lacks the fields {missing}")
    if meta["format_version"] != FORMAT_VERSION:
        raise WeightsFileError(
            f"{str(path)!r}: format_version {meta['format_version']!r} is not supported (this "
            f"pdanet reads version {FORMAT_VERSION})")
    return tensors, meta


def _field_text(meta: Mapping[str, str], name: str, where: str) -> str:
    """A metadata field's text (WeightsFileError naming the field when it is not a string)."""
    value = meta[name]
    if not isinstance(value, str):
        raise WeightsFileError(f"{where}: metadata field {name!r} must be text, got "
                               f"{type(value).__name__}")
    return value


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:40] + "…") + f" ({len(text):,} characters)"


def _dtype(meta: Mapping[str, str], where: str) -> torch.dtype:
    """The metadata ``dtype``: a floating dtype name (float32, float64, float16, bfloat16)."""
    from pdanet.constructions.base import DTYPES

    text = _field_text(meta, "dtype", where)
    if text not in DTYPES:
        raise WeightsFileError(f"{where}: metadata field 'dtype' is {_shown(text)}; a pdanet "
                               f"network has a floating dtype: one of {', '.join(DTYPES)}")
    return DTYPES[text]


def _scale(meta: Mapping[str, str], where: str) -> sp.Rational:
    """The metadata ``scale`` β: an exact rational, finite and > 0 (e.g. '77' or '153/2')."""
    text = _field_text(meta, "scale", where)
    if len(text) > 200:
        raise WeightsFileError(f"{where}: metadata field 'scale' is {_shown(text)}, too long for "
                               "a saturation scale")
    try:
        beta = sp.Rational(text)
    except (TypeError, ValueError, sp.SympifyError):
        raise WeightsFileError(f"{where}: metadata field 'scale' is {_shown(text)}, not an "
                               "exact rational such as '77' or '153/2'") from None
    if not (beta.is_finite and beta > 0):
        raise WeightsFileError(f"{where}: metadata field 'scale' is {_shown(text)}; the scale "
                               "must be finite and > 0")
    return beta


def _int_fields(meta: Mapping[str, str], name: str, where: str) -> dict[str, int] | None:
    """The metadata field `name` (``params``): a JSON object of integers, or None if absent."""
    if name not in meta:
        return None
    text = _field_text(meta, name, where)
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError):
        raise WeightsFileError(f"{where}: metadata field {name!r} is {_shown(text)}, not a JSON "
                               "object of integers") from None
    if not isinstance(value, dict) or any(isinstance(v, bool) or not isinstance(v, int)
                                          for v in value.values()):
        raise WeightsFileError(f"{where}: metadata field {name!r} is {_shown(text)}, not a JSON "
                               "object of integers")
    return value


def _check_claims(meta: Mapping[str, str], machine: Any, where: str) -> None:
    """Before compiling: the integer fields ``hidden_units`` and ``steps_per_symbol`` are
    integers, and every parameter in ``params`` that the machine has as an integer attribute
    (``k``, ``m`` of Dyck-(k, m)) agrees with it, so that a machine described bigger than the
    saved network is refused without being built."""
    for name in ("hidden_units", "steps_per_symbol"):
        if name in meta:
            text = _field_text(meta, name, where)
            if not (text.isascii() and text.isdigit() and len(text) <= 18):
                raise WeightsFileError(f"{where}: metadata field {name!r} is {_shown(text)}, not a "
                                       "non-negative integer")
    params = _int_fields(meta, "params", where) or {}
    for key, saved in params.items():
        have = getattr(machine, key, None)
        if isinstance(have, int) and not isinstance(have, bool) and have != saved:
            source = "'task_params'" if "task" in meta else "'machine_spec'"
            raise WeightsFileError(
                f"{where}: metadata field {source} describes a machine with {key} = {have}, but "
                f"field 'params' says the saved network has parameters {key} = {saved}")


def _machine(meta: Mapping[str, str], where: str) -> Any:
    from pdanet.automata import tasks
    from pdanet.automata.io import loads

    if "task" in meta:
        try:
            params = json.loads(meta.get("task_params", "{}"))
        except (json.JSONDecodeError, RecursionError, TypeError, ValueError) as exc:
            raise WeightsFileError(f"{where}: metadata field 'task_params' is not JSON: {exc}") \
                from None
        if not isinstance(params, dict):
            raise WeightsFileError(f"{where}: metadata field 'task_params' must be a JSON object "
                                   f"of parameters, got {type(params).__name__}")
        if meta["task"] not in tasks.names():
            raise WeightsFileError(f"{where}: metadata names the unknown task {meta['task']!r}")
        try:
            machine = tasks.get(meta["task"], **params)
        except TypeError as exc:
            raise WeightsFileError(f"{where}: bad task_params {params}: {exc}") from None
        except PdanetError as exc:
            raise WeightsFileError(f"{where}: metadata field 'task_params' is bad: {exc}") \
                from None
        if machine is None:
            raise WeightsFileError(f"{where}: task {meta['task']!r} has no machine for {params}")
        return _bounded(machine, meta, where)
    if "machine_spec" not in meta:
        raise WeightsFileError(f"{where}: metadata has neither 'machine_spec' nor 'task'")
    try:
        machine = loads(meta["machine_spec"], source=f"{where} (machine_spec)")
    except PdanetError as exc:
        raise WeightsFileError(f"{where}: metadata field 'machine_spec' is bad: {exc}") from None
    return _bounded(machine, meta, where)


def load_network(path: str | os.PathLike) -> Any:
    """The `CompiledNetwork` saved in `path` (see the module docstring): recompiled from its
    metadata at the saved β and dtype, with the module's weights replaced by the file's."""
    from pdanet.constructions.table import compile as compile_machine

    where = repr(str(path))
    tensors, meta = read_weights(path)
    dtype = _dtype(meta, where)
    beta = _scale(meta, where)
    target, method = _field_text(meta, "target", where), _field_text(meta, "method", where)
    machine = _machine(meta, where)
    _check_claims(meta, machine, where)
    net = compile_machine(machine, target=target, method=method, dtype=dtype)
    net = net.with_scale(beta, dtype)
    saved_params = meta.get("params")
    if saved_params is not None and saved_params != metadata_params(net):
        raise WeightsFileError(
            f"{where}: the file was saved from a network with parameters {saved_params}, but its "
            f"machine {machine!r} gives {metadata_params(net)}")
    if "hidden_units" in meta and str(net.hidden_units) != meta["hidden_units"]:
        raise WeightsFileError(
            f"{where}: the file was saved from a network of {meta['hidden_units']} hidden units, "
            f"but {net.construction} now builds {net.hidden_units} for {machine!r}")
    if "steps_per_symbol" in meta and str(net.steps_per_symbol) != meta["steps_per_symbol"]:
        raise WeightsFileError(
            f"{where}: metadata field 'steps_per_symbol' is {meta['steps_per_symbol']}, but "
            f"{net.construction} takes {net.steps_per_symbol} network steps per symbol")
    expected = net.module.state_dict()
    if set(tensors) != set(expected):
        raise WeightsFileError(
            f"{where}: tensors do not match {net.construction}: missing "
            f"{sorted(set(expected) - set(tensors))}, unexpected {sorted(set(tensors) - set(expected))}")
    for name, t in tensors.items():
        if tuple(t.shape) != tuple(expected[name].shape):
            raise WeightsFileError(f"{where}: tensor {name!r} has shape {tuple(t.shape)}, the "
                                   f"network needs {tuple(expected[name].shape)}")
    exact = {k: v.clone() for k, v in expected.items()}
    net.module.load_state_dict({k: t.to(expected[k].dtype) for k, t in tensors.items()},
                               strict=True)
    same = all(torch.equal(exact[k], v) for k, v in net.module.state_dict().items())
    info = {**dict(net.info), "weights_file": str(path), "weights_match_exact": same}
    return replace(net, info=info)


__all__ = ["WeightsFileError", "load_network", "metadata", "read_weights", "save_network"]

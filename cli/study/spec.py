"""Study specs: read a YAML design study, validate all of it, expand it into design points.

A study is validated completely before any work starts; every error is one
line that names the file and key (``study.yaml:architectures[1].grid.k``) and
says what is allowed.  Unknown keys, wrong types, empty lists and grids,
duplicate values, unknown architectures, parameters and metrics are rejected.

Spec format (every key but ``architectures`` and ``metrics`` is optional)::

    name: seeds                   # default: the file name
    description: free text
    out: results/seeds            # output folder, relative to the working directory (--out overrides)
    catalog: my-prices.yaml       # merged over the shipped catalog; relative to this file
    gpus: [1024, 4608]            # GPU count(s) for every architecture
    architectures:
      - name: nvl-72              # an architecture or alias (`fabric list`)
      - name: khop-ring
        label: InfiniteHBD        # row label (default: name), grid values are appended
        gpus: 4608                # overrides the top-level gpus
        params: {gpus_per_node: 4}          # fixed -p parameters
        grid: {k: [2, 3], closed: [false, true]}   # every combination (product)
        zip: {trx_per_gpu: [2, 4], trx: [ocs_transceiver_800g, ocs_transceiver_800g]}  # side by side
        workloads: [{name: llm, tp: 32}]    # overrides the top-level workloads
    workloads:                    # default: one workload "none" without a TP size
      - {name: llm, tp: [8, 32]}  # a list of TP sizes expands into one workload each
    faults:                       # default: no faults
      ratios: [0.0, 0.01, 0.03]   # i.i.d. fault ratio, sampled with each seed
      component: node             # what fails at that ratio (default node; see fabric.faults.COMPONENTS)
      traces: [stepfun, my-trace.json]   # replayed traces: shipped names or files (relative to this file)
    seeds: [0, 1, 2]              # default [0]
    metrics: [cost, build, {noop: {sleep_s: 0.0}}]   # names or {name: {options}} (see cli.study.registry.METRICS)
    batch_size: 200               # most points per task (default 200)

Points are expanded architecture by architecture, then parameter variant, GPU
count, workload, fault model and seed, so the points that share a Fabric are
neighbours (a batch builds each Fabric once).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import reprlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cli.study import metrics as _metrics  # noqa: F401  (registers the shipped metrics)
from cli.study.point import DesignPoint, FaultScenario, Workload, point_id
from cli.study.registry import METRICS, MetricRequest
from cli.study.store import SCHEMA_VERSION
from fabric.catalog import load_catalog, shipped_catalog_path
from fabric.checks import is_whole
from fabric.errors import FabricError
from fabric.faults import COMPONENTS
from fabric.trace import SHIPPED, load_trace, shipped_path
from topologies import resolve_architecture
from topologies.params import resolve

TOP_KEYS = ("name", "description", "out", "catalog", "gpus", "architectures", "workloads", "faults", "seeds",
            "metrics", "batch_size")
ARCH_KEYS = ("name", "label", "gpus", "params", "grid", "zip", "workloads")
WORKLOAD_KEYS = ("name", "tp", "params")
FAULT_KEYS = ("ratios", "component", "traces")
DEFAULT_FAULT_COMPONENT = "node"  # InfiniteHBD's "fault ratio" is the share of nodes down
DEFAULT_BATCH_SIZE = 200
BYTES_PER_POINT = 2048
"""Memory of one expanded design point (its inputs and id), with room to spare: 800,000 points measured 1.5 kB each
(1.17 GB peak, CPython 3.11).  A spec is refused before expansion when its points would pass the ``memory`` limit."""
_SCALAR = (str, int, float, bool)


@dataclass(frozen=True)
class Study:
    """A validated study: its points in expansion order and how to evaluate them."""

    name: str
    source: str
    text: str
    out: str | None
    catalog_path: str | None
    catalog: Any
    metrics: tuple[MetricRequest, ...]
    points: tuple[DesignPoint, ...]
    batch_size: int
    catalog_sha256: str = ""

    def fingerprint(self) -> str:
        """Hash of what decides every row's metrics besides the point: metrics, options, catalog, schema.

        ``--resume`` refuses to mix rows of two different fingerprints.
        """
        doc = {"schema": SCHEMA_VERSION, "metrics": [m.to_dict() for m in self.metrics],
               "catalog": self.catalog_sha256}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- checks
class _Where:
    """Builds field names like ``study.yaml:architectures[1].grid.k`` for errors."""

    def __init__(self, source: str):
        self.source = source

    def __call__(self, *parts: str | int) -> str:
        path = ""
        for p in parts:
            path += f"[{p}]" if isinstance(p, int) else (f".{p}" if path else p)
        return f"{self.source}:{path}" if path else self.source


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxstring, _SHOWN.maxother = 2, 4, 4, 60, 60


def _shown(value: Any) -> str:
    """``repr(value)`` cut short: a YAML alias bomb (9 lists of 9 aliases, 10 deep) must not be printed in full."""
    return _SHOWN.repr(value)


def _type_name(value: Any) -> str:
    return "null" if value is None else {"dict": "mapping", "list": "list", "str": "string"}.get(
        type(value).__name__, type(value).__name__)


def _mapping(value: Any, field: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
    if not isinstance(value, dict):
        raise FabricError(field, f"must be a mapping with keys {', '.join(allowed)}; got {_type_name(value)}")
    for key in value:
        if key not in allowed:
            raise FabricError(f"{field}.{key}" if ":" in field else f"{field}:{key}",
                              f"unknown key; allowed: {', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise FabricError(f"{field}.{key}", "missing; it is required")
    return value


def _int(value: Any, field: str, lo: int) -> int:
    # an int given as a float (`gpus: 4.608e3`, `tp: 8.0`) is the whole number it writes, as in model files and -p;
    # "must be a whole number; got float 72.0" contradicted itself
    if not is_whole(value):
        raise FabricError(field, f"must be a whole number >= {lo}; got {_type_name(value)} {_shown(value)}")
    value = int(value)
    if value < lo:
        raise FabricError(field, f"must be a whole number >= {lo}; got {value}")
    if value > _MAX_INT:  # seeds, GPU counts, sizes: beyond it numpy and Parquet cannot hold them
        raise FabricError(field, f"must be <= {_MAX_INT:,}; got {value}")
    return value


#: Largest whole number a spec may give: numpy's seeds are below 2**32, and no count of this tool comes near.
_MAX_INT = 2**32 - 1


def _str(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FabricError(field, f"must be a non-empty string; got {_type_name(value)} {_shown(value)}")
    return value.strip()


def _list(value: Any, field: str, what: str) -> list:
    if not isinstance(value, list):
        raise FabricError(field, f"must be a list of {what}; got {_type_name(value)} {_shown(value)}")
    if not value:
        raise FabricError(field, f"empty list; give at least one of {what}")
    return value


def _unique(values: list, field: str) -> None:
    """Refuse a value given twice (``==``, so 1, 1.0 and True are one value), in linear time for scalars."""
    seen: set = set()
    for i, v in enumerate(values):
        try:
            again = v in seen
            seen.add(v)
        except TypeError:  # a list or mapping where a scalar belongs: its own check names it
            again = any(v == w for w in values[:i])
        if again:
            raise FabricError(f"{field}[{i}]", f"repeats the value {_shown(v)}; give each value once")


def _int_list(value: Any, field: str, lo: int, what: str) -> list[int]:
    """An int or a non-empty list of distinct ints >= lo."""
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list):
        _list(value, field, what)
    out = [_int(v, f"{field}[{i}]" if isinstance(value, list) else field, lo) for i, v in enumerate(items)]
    _unique(out, field)
    return out


def _file(value: Any, field: str, base: Path) -> Path:
    from fabric.files import input_file

    path = Path(_str(value, field))
    # the input reader's check: a name too long for the file system raised OSError from is_file(), which was
    # written out whole (5,000 characters) with exit 1 and no field
    return input_file(path if path.is_absolute() else base / path, field)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------- sections
def _metrics(value: Any, where: _Where) -> tuple[MetricRequest, ...]:
    field = where("metrics")
    items = _list(value, field, "metric names (or {name: {options}})")
    out: list[MetricRequest] = []
    for i, item in enumerate(items):
        f = where("metrics", i)
        raw_options: Any = {}
        if isinstance(item, dict):
            if len(item) != 1:
                raise FabricError(f, "must be a metric name or {name: {options}} with one name")
            name, raw_options = next(iter(item.items()))
            raw_options = {} if raw_options is None else raw_options
        else:
            name = item
        name = _str(name, f)
        if name not in METRICS:
            available = ", ".join(sorted(METRICS))
            raise FabricError(f, f"unknown metric {name!r}; available: {available}")
        spec = METRICS[name]
        if any(r.name == name for r in out):
            raise FabricError(f, f"metric {name!r} is listed twice")
        allowed = tuple(spec.options) or ("(none)",)
        _mapping(raw_options, f"{f}.{name}", allowed)
        options = {}
        for key, raw in raw_options.items():
            opt = spec.options[key]
            if not isinstance(raw, _SCALAR):
                raise FabricError(f"{f}.{name}.{key}", f"must be one {opt.type.__name__}; got {_type_name(raw)}")
            try:
                options[key] = opt.parse(key, raw, f"metric {name}")
            except FabricError as exc:
                raise FabricError(f"{f}.{name}.{key}", exc.message) from None
            if key == "model":
                _check_model(options[key], f"{f}.{name}.{key}")
            if key == "samples" and isinstance(options[key], int):  # the resource guard, before any work
                from fabric import limits

                limits.check("samples", options[key], f"{f}.{name}.{key}")
        if spec.options_check is not None:
            spec.options_check(options, f"{f}.{name}")
        out.append(MetricRequest(name, tuple(sorted(options.items()))))
    return tuple(out)


def _workloads(value: Any, where: _Where, prefix: tuple = ()) -> list[tuple[Workload, str]]:
    """Workloads, each with the field its TP size comes from (a TP list expands into one workload per size)."""
    if value is None:
        return [(Workload(), where(*prefix, "workloads"))]
    items = _list(value, where(*prefix, "workloads"), "workloads ({name, tp, params})")
    out: list[tuple[Workload, str]] = []
    seen: set[Workload] = set()
    named: dict[tuple, str] = {}  # (tp, params) -> the workload's name: one workload under two names is run twice
    for i, item in enumerate(items):
        f = where(*prefix, "workloads", i)
        _mapping(item, f, WORKLOAD_KEYS, required=("name",))
        name = _str(item["name"], f"{f}.name")
        tps: list[Any] = [None]
        if item.get("tp") is not None:
            tps = _int_list(item["tp"], f"{f}.tp", 1, "TP sizes (whole numbers >= 1)")
        params = item["params"] if item.get("params") is not None else {}  # `params: false` is not "none"
        _check_scalars(params, f"{f}.params")
        for tp in tps:
            w = Workload(name, tp, tuple(sorted(params.items())))
            if w in seen:
                raise FabricError(f, f"repeats an earlier workload ({name}, tp={tp})")
            other = named.setdefault((tp, w.params), name)
            if other != name:  # the rows of both names were alike, computed twice (architectures refuse the same)
                raise FabricError(f, f"{name} (tp={tp}) repeats workload {other} (the same tp and params) under "
                                     "another name; give each workload once")
            seen.add(w)
            out.append((w, f"{f}.tp"))
    return out


def _check_model(value: Any, field: str) -> None:
    """A model preset name or a model file (read as the metric will read it), before any work starts."""
    from workloads.models import load_model

    try:
        load_model(str(value))
    except FabricError as exc:
        raise FabricError(field, exc.message) from None


def _check_workload_params(w: Workload, field: str, metrics: tuple[MetricRequest, ...]) -> None:
    """Each workload param is an option of a requested metric, with a value that option accepts."""
    for key, raw in w.params:
        f = f"{field}.params.{key}"
        specs = [METRICS[r.name] for r in metrics if key in METRICS[r.name].options]
        if not specs:
            allowed = sorted({k for r in metrics for k in METRICS[r.name].options}) or ["(none)"]
            raise FabricError(f, f"is not an option of the study's metrics ({', '.join(r.name for r in metrics)});"
                                 f" allowed: {', '.join(allowed)}")
        for spec in specs:
            try:
                value = spec.options[key].parse(key, raw, "workload")
            except FabricError as exc:
                raise FabricError(f, exc.message) from None
            if key == "samples":  # the resource guard of the metric's own option, before any work
                from fabric import limits

                limits.check("samples", value, f)
        if key == "model":
            _check_model(raw, f)
    for req in metrics:  # a combination the metric refuses may be split between its options and the workload's
        spec = METRICS[req.name]
        mine = {k: spec.options[k].parse(k, v, "workload") for k, v in w.params if k in spec.options}
        if mine and spec.options_check is not None:
            spec.options_check({**dict(req.options), **mine}, f"{field}.params")


def _check_scalars(params: Any, field: str) -> None:
    if not isinstance(params, dict):
        raise FabricError(field, f"must be a mapping of name: value; got {_type_name(params)}")
    for k, v in params.items():
        if not isinstance(k, str):  # sorting mixed names (1 and "model") would fail; no option has such a name
            raise FabricError(f"{field}.{k}", f"must be named by a string; got {_type_name(k)}")
        if not isinstance(v, _SCALAR):
            raise FabricError(f"{field}.{k}", f"must be a string, number or boolean; got {_type_name(v)}")


def _faults(value: Any, where: _Where, base: Path) -> list[FaultScenario]:
    if value is None:
        return [FaultScenario()]
    f = where("faults")
    _mapping(value, f, FAULT_KEYS)
    if not value:
        raise FabricError(f, "empty; give ratios: [...] and/or traces: [...], or leave faults out for none")
    out: list[FaultScenario] = []
    if "ratios" in value:
        ratios = _list(value["ratios"], f"{f}.ratios", "fault ratios in [0, 1]")
        for i, r in enumerate(ratios):
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r <= 1:
                raise FabricError(f"{f}.ratios[{i}]", f"must be a number in [0, 1]; got {_shown(r)}")
        _unique([float(r) for r in ratios], f"{f}.ratios")
        component = _fault_component(value.get("component", DEFAULT_FAULT_COMPONENT), f"{f}.component")
        # + 0.0: a ratio of -0.0 is 0 (it passed `0 <= r` and was written in the rows as -0.0)
        out += [FaultScenario("random", float(r) + 0.0, component) for r in ratios]
    elif "component" in value:
        raise FabricError(f"{f}.component", "applies to ratios:, which are missing")
    if "traces" in value:
        traces = _list(value["traces"], f"{f}.traces", "fault traces (a shipped name or a file)")
        _unique(traces, f"{f}.traces")
        out += [_trace(t, f"{f}.traces[{i}]", base) for i, t in enumerate(traces)]
    return out


def _trace(value: Any, field: str, base: Path) -> FaultScenario:
    """A replayed trace: a shipped name (``stepfun``) or a file, checked by loading it now."""
    name = _str(value, field)
    if name in SHIPPED:
        path, spec = shipped_path(name) / "fault_trace.json", name
    else:
        path = _file(name, field, base).resolve()
        spec = str(path)
    try:
        load_trace(spec)
    except FabricError as exc:
        raise FabricError(field, exc.message) from None
    return FaultScenario("trace", trace=name, path=spec, sha256=_sha256(path))


def _fault_component(value: Any, field: str) -> str:
    value = _str(value, field)
    if value not in COMPONENTS:
        raise FabricError(field, f"{value!r} is not a component; use one of {', '.join(COMPONENTS)}")
    return value


def _parse_param(spec, raw: Any, arch: str, field: str) -> Any:
    if isinstance(raw, (list, dict)):
        raise FabricError(field, f"must be one {spec.type.__name__}; got {_type_name(raw)} "
                                 f"(put lists of values under grid: or zip:)")
    try:
        return spec.parse(raw, arch)
    except FabricError as exc:
        raise FabricError(field, exc.message) from None


def _variants(entry: dict, arch, preset: dict, where: _Where, i: int) -> list[dict[str, Any]]:
    """Parameter sets of one architecture entry: fixed params x product(grid) x zip rows."""
    specs = {p.name: p for p in arch.params}
    allowed = ", ".join(sorted(specs)) or "none"
    seen: dict[str, str] = {}

    def param_spec(name: Any, section: str):
        f = where("architectures", i, section, str(name))
        if name not in specs:
            raise FabricError(f, f"unknown parameter for {arch.name}; allowed: {allowed}")
        if name in preset:
            raise FabricError(f, f"set to {preset[name]!r} by the alias {entry['name']!r}; use {arch.name!r} "
                                 f"to vary it")
        if name in seen:
            raise FabricError(f, f"also given under {seen[name]}; give each parameter once")
        seen[name] = section
        return specs[name], f

    fixed: dict[str, Any] = {}
    if entry.get("params") is not None:
        if not isinstance(entry["params"], dict):
            raise FabricError(where("architectures", i, "params"),
                              f"must be a mapping of parameter: value; got {_type_name(entry['params'])}")
        for name, raw in entry["params"].items():
            spec, f = param_spec(name, "params")
            fixed[name] = _parse_param(spec, raw, arch.name, f)

    axes: list[list[dict[str, Any]]] = []
    f_entry = where("architectures", i)
    for section in ("grid", "zip"):
        if section not in entry:
            continue
        g = entry[section]
        f = where("architectures", i, section)
        if not isinstance(g, dict):
            raise FabricError(f, f"must be a mapping of parameter: [values]; got {_type_name(g)}")
        if not g:
            raise FabricError(f, f"empty {section}; give parameter: [values, ...] (allowed: {allowed})")
        columns: dict[str, list] = {}
        for name, values in g.items():
            spec, fp = param_spec(name, section)
            values = _list(values, fp, f"values for {name}")
            parsed = [_parse_param(spec, v, arch.name, f"{fp}[{j}]") for j, v in enumerate(values)]
            _unique(parsed, fp)
            columns[name] = parsed
        if section == "grid":
            axes += [[{name: v} for v in vals] for name, vals in columns.items()]
        else:
            lengths = {name: len(vals) for name, vals in columns.items()}
            if len(set(lengths.values())) > 1:
                raise FabricError(f, f"zipped lists must have equal lengths; got {lengths}")
            n = next(iter(lengths.values()))
            axes.append([{name: vals[j] for name, vals in columns.items()} for j in range(n)])
    _check_points(math.prod(len(a) for a in axes), f_entry)  # before the product is built: a grid may be huge
    out = []
    for combo in itertools.product(*axes):
        params = dict(fixed)
        for part in combo:
            params.update(part)
        out.append(params)
    return out


def _architectures(value: Any, where: _Where, top_gpus: list[int] | None) -> list[dict[str, Any]]:
    """Expanded (architecture, label, gpus, given, resolved, entry index) records."""
    items = _list(value, where("architectures"), "architectures ({name, label, gpus, params, grid, zip})")
    out: list[dict[str, Any]] = []
    seen: dict[tuple, int] = {}
    labelled: dict[tuple[str, int], tuple] = {}  # (label, gpus) -> design: one comparison row is one design
    for i, entry in enumerate(items):
        f = where("architectures", i)
        _mapping(entry, f, ARCH_KEYS, required=("name",))
        name = _str(entry["name"], f"{f}.name")
        try:
            arch, preset = resolve_architecture(name)
        except FabricError as exc:
            raise FabricError(f"{f}.name", exc.message) from None
        label = _str(entry["label"], f"{f}.label") if "label" in entry else name
        workloads = _workloads(entry["workloads"], where, ("architectures", i)) if "workloads" in entry else None
        if "gpus" in entry:
            gpus = _int_list(entry["gpus"], f"{f}.gpus", 1, "GPU counts")
        elif top_gpus is not None:
            gpus = top_gpus
        else:
            raise FabricError(f"{f}.gpus", "missing; give gpus here or at the top level of the study")
        variants = _variants(entry, arch, preset, where, i)
        _check_points(len(out) + len(variants) * len(gpus), f)  # the designs so far: many entries add up
        varying = [k for section in ("grid", "zip") for k in entry.get(section, {})]
        for given in variants:
            try:
                resolved = resolve(arch.name, arch.params, {**preset, **given})
            except FabricError as exc:  # per-value checks passed, so this is a combination check
                raise FabricError(f, exc.message) from None
            vlabel = " ".join([label] + [f"{k}={given[k]}" for k in varying])
            built_from: dict[int, int] = {}  # GPUs built -> the GPU count asked for
            for n in gpus:
                gpus_field = f"{f}.gpus" if "gpus" in entry else where("gpus")
                _check_size(name, n, {**preset, **given}, gpus_field)
                built = _built_gpus(arch, resolved, n)
                if built in built_from:  # [63, 64] for dgx: two rows 'dgx 64' of one design, alike to the dollar
                    raise FabricError(gpus_field, f"{built_from[built]:,} and {n:,} GPUs both build {vlabel} at "
                                                  f"{built:,} GPUs (whole units): one design twice; give one of them")
                built_from[built] = n
                key = (arch.name, json.dumps(resolved, sort_keys=True), built)
                if key in seen:
                    at = f"{n:,} GPUs" + (f" (built: {built:,})" if built != n else "")
                    raise FabricError(f, f"{vlabel} at {at} repeats a design of architectures[{seen[key]}]")
                other = labelled.setdefault((vlabel, n), key)
                if other != key:  # the comparison and `results` group rows by label: two designs would be averaged
                    raise FabricError(f, f"label {vlabel!r} at {n} GPUs also names another design, of "
                                         f"architectures[{seen[other]}]; give each design its own label")
                seen[key] = i
                out.append({"architecture": name, "family": arch.name, "label": vlabel, "gpus": n,
                            "given": tuple(sorted(given.items())), "resolved": resolved, "workloads": workloads})
    return out


def _built_gpus(arch, resolved: dict[str, Any], gpus: int) -> int:
    """GPUs the family builds for ``gpus`` (rounded up to whole units), or ``gpus`` if its size is not known yet.

    A parameter problem of the closed-form size is left to the point's own build, which says why.
    """
    try:
        return int(arch.size(resolved, gpus, load_catalog()).gpus)
    except (FabricError, ValueError, ArithmeticError):
        return gpus


def _check_points(n: int, field: str) -> None:
    """Refuse ``n`` design points whose expansion alone would pass the ``memory`` limit, naming ``field``."""
    from fabric import limits

    limits.check("memory", n * BYTES_PER_POINT, field, f"{n:,} design points x {BYTES_PER_POINT:,} B")


def _check_size(name: str, gpus: int, given: dict, field: str) -> None:
    """The resource guard of the CLI, before any work starts (the estimate names the spec's field)."""
    from cli.common import check_fabric_estimate
    from fabric.catalog import load_catalog as _shipped

    check_fabric_estimate(name, gpus, given, _shipped(), field)


def _check_requirements(designs: list[dict[str, Any]], metrics: tuple[MetricRequest, ...]) -> None:
    """Every workload's params are options of the metrics, a metric that needs a TP size has one, and each
    metric's own check (:attr:`~cli.study.registry.MetricSpec.check`) passes on every design x workload."""
    for d in designs:
        for w, f in d["workloads"]:
            _check_workload_params(w, f.rsplit(".tp", 1)[0], metrics)
    for req in metrics:
        if "tp" in METRICS[req.name].requires:
            for d in designs:
                for w, f in d["workloads"]:
                    if w.tp is None:
                        raise FabricError(f, f"metric {req.name!r} needs a TP size; give workloads: "
                                             f"[{{name: ..., tp: 8}}]")
    for req in metrics:
        check = METRICS[req.name].check
        if check is not None:
            for d in designs:
                for w, f in d["workloads"]:
                    check(d, w, f)


def _catalog(value: Any, where: _Where, base: Path) -> tuple[str | None, Any, str]:
    """(path or None, the catalog, its content hash) of the spec's ``catalog:`` (the shipped one if absent)."""
    if value is None:
        return None, load_catalog(), "shipped:" + hashlib.sha256(shipped_catalog_path().read_bytes()).hexdigest()
    path = _file(value, where("catalog"), base)
    try:
        catalog = load_catalog(path, flag="")  # the spec's own field is named below, not --catalog
    except FabricError as exc:
        raise FabricError(where("catalog"), str(exc)) from None
    return str(path.resolve()), catalog, _sha256(path)


def _expand(study: str, designs: list[dict[str, Any]], faults: list[FaultScenario], seeds: list[int]
            ) -> list[DesignPoint]:
    """The design points in expansion order: design, workload, fault model, seed (a Fabric's points are neighbours)."""
    points: list[DesignPoint] = []
    for d in designs:
        for w, _ in d["workloads"]:
            for fm in faults:
                for seed in seeds:
                    pid = point_id(d["family"], d["resolved"], d["gpus"], w, fm, seed)
                    points.append(DesignPoint(pid, study, d["architecture"], d["family"], d["label"], d["gpus"],
                                              d["given"], tuple(d["resolved"].items()), w, fm, seed, len(points)))
    return points


# ---------------------------------------------------------------------------------------------- entry
def parse_study(doc: Any, source: str = "study.yaml", base_dir: Path | str = ".", text: str = "") -> Study:
    """Validate a parsed spec and expand it into design points.

    Parameters
    ----------
    doc : Any
        The YAML document (a mapping).
    source : str
        File name used in error messages (``source:key``).
    base_dir : Path
        Folder that relative ``catalog`` and ``traces`` paths start from.
    text : str
        The spec text (copied into the output folder).

    Returns
    -------
    Study

    Raises
    ------
    FabricError
        On the first problem, naming ``source:key`` and what is allowed.

    Examples
    --------
    >>> s = parse_study({"gpus": 256, "architectures": [{"name": "khop-ring", "grid": {"k": [2, 3]}}],
    ...                  "metrics": ["cost"], "seeds": [0, 1]})
    >>> [(p.label, p.seed) for p in s.points]
    [('khop-ring k=2', 0), ('khop-ring k=2', 1), ('khop-ring k=3', 0), ('khop-ring k=3', 1)]
    >>> parse_study({"gpus": 256, "architectures": [{"name": "dgx", "grid": {}}], "metrics": ["cost"]})
    Traceback (most recent call last):
    ...
    fabric.errors.FabricError: study.yaml:architectures[0].grid: empty grid; give parameter: [values, ...] ...
    """
    where = _Where(source)
    base = Path(base_dir)
    if not isinstance(doc, dict):
        raise FabricError(source, f"must be a YAML mapping with keys {', '.join(TOP_KEYS)}; got {_type_name(doc)}")
    _mapping(doc, source, TOP_KEYS)
    for key in ("architectures", "metrics"):
        if key not in doc:
            raise FabricError(where(key), "missing; it is required")
    name = _str(doc["name"], where("name")) if "name" in doc else Path(source).stem
    if "description" in doc:
        _str(doc["description"], where("description"))
    out = _str(doc["out"], where("out")) if doc.get("out") is not None else None
    metrics = _metrics(doc["metrics"], where)
    top_gpus = _int_list(doc["gpus"], where("gpus"), 1, "GPU counts") if "gpus" in doc else None
    designs = _architectures(doc["architectures"], where, top_gpus)
    workloads = _workloads(doc.get("workloads"), where)
    for d in designs:
        d["workloads"] = d["workloads"] or workloads
    faults = _faults(doc.get("faults"), where, base)
    for req in metrics:  # known now, not after every point has failed (exit 1) on its first fault draw
        other = next((s.component for s in faults if s.kind == "random" and s.component not in (None, "node")), None)
        if other is not None and "node_faults" in METRICS[req.name].requires:
            raise FabricError(where("faults", "component"), f"{other!r}: metric {req.name!r} places on node faults "
                                                            "only; use component: node, or a separate study")
    seeds_raw = doc.get("seeds", [0])
    if not isinstance(seeds_raw, list):  # "seeds: 3" could mean seed 3 or three seeds: ask for the list
        raise FabricError(where("seeds"), f"must be a list of seeds (whole numbers >= 0), e.g. [0, 1, 2]; "
                                          f"got {_type_name(seeds_raw)} {_shown(seeds_raw)}")
    seeds = _int_list(seeds_raw, where("seeds"), 0, "seeds (whole numbers >= 0)")
    batch_size = _int(doc.get("batch_size", DEFAULT_BATCH_SIZE), where("batch_size"), 1)
    _check_requirements(designs, metrics)
    catalog_path, catalog, catalog_sha = _catalog(doc.get("catalog"), where, base)
    _check_points(sum(len(d["workloads"]) for d in designs) * len(faults) * len(seeds), source)
    points = _expand(name, designs, faults, seeds)
    text = text or yaml.safe_dump(doc, sort_keys=False)  # a spec given as a dict is still copied to the output
    return Study(name, source, text, out, catalog_path, catalog, metrics, tuple(points), batch_size, catalog_sha)


def load_study(path: Path | str) -> Study:
    """Read and validate a study spec file (see the module docstring for the format).

    Raises
    ------
    FabricError
        Missing file, invalid YAML, or any spec error (``path:key``).
    """
    path = Path(path)
    source = str(path)
    if path.is_dir():
        raise FabricError("SPEC", f"{path} is a folder; give a study YAML file, e.g. studies/default.yaml")
    if not path.is_file():
        raise FabricError("SPEC", f"no such study file: {path}")
    from fabric.files import MAX_DEPTH, check_nesting, check_parse_memory, read_text, yaml_loader

    text = read_text(path, source)  # the one reader of input files: size limit, UTF-8, a name the OS refuses
    check_nesting(text, path.name, source)
    check_parse_memory(text, path.name, source, "YAML")  # a 15 MB list of seeds parsed for 90 s into ~2 GB
    try:
        doc = yaml.load(text, Loader=yaml_loader())  # noqa: S506 (a SafeLoader refusing a key given twice)
    except RecursionError:  # block-style nesting (indentation) that the bracket count does not see
        raise FabricError(source, f"{path.name} nests deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FabricError(source, f"not valid YAML{where}: {problem}") from None
    return parse_study(doc, source, path.parent, text)

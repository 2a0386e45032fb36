"""What an export holds: per conv2d shape, the fastest verified configuration and its plan."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autotune.families import Family, UnknownFamily, UnsupportedProblem, get_family
from autotune.families.plan import KernelPlan, TensorMap
from autotune.model.parsing import problem_from_dict
from autotune.model.precision import DEFAULT_DTYPE, DEFAULT_LAYOUT
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.store import Store

# Inputs beyond x and w that a plan may read and that zeros make neutral.
ZERO_INPUTS = frozenset({"bias"})


class ExportError(RuntimeError):
    """Nothing to export, or a choice the store cannot answer (which device)."""


@dataclass(frozen=True, slots=True)
class ExportedPlan:
    """One shape's stored winner: the family, its configuration and how it is launched."""

    problem: ConvProblem
    family: Family
    config: Config
    plan: KernelPlan
    time_ms: float
    gflops: float
    extra_inputs: tuple[tuple[str, tuple[int, ...]], ...]  # inputs beyond x and w, given zeros


@dataclass(frozen=True, slots=True)
class Excluded:
    key: str
    family: str
    reason: str


@dataclass(frozen=True, slots=True)
class Selection:
    device: dict[str, object]  # the devices row: name, compute_capability, sm_count, ...
    protocol: int
    plans: tuple[ExportedPlan, ...]
    excluded: tuple[Excluded, ...]

    @property
    def arch(self) -> str:
        major, _, minor = str(self.device["compute_capability"]).partition(".")
        return f"sm_{major}{minor or '0'}"


def choose_device(store: Store, device: str | None) -> dict[str, object]:
    """The devices row named `device`, or the only device of the store."""
    rows = store.devices()
    names = list(dict.fromkeys(str(n) for n in rows["name"]))
    if device is None:
        if len(names) != 1:
            found = ", ".join(names) if names else "none"
            raise ExportError(
                f"the store holds {len(names)} devices ({found}); name one with --device"
            )
        device = names[0]
    if device not in names:
        raise ExportError(f"no device {device!r} in the store (it holds: {', '.join(names)})")
    # One GPU model under several drivers is one device by name; its newest row describes it.
    row = rows[rows["name"] == device].iloc[-1]
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}


def select(
    store: Store,
    device: str | None = None,
    families: Iterable[str] = (),
    problems: Iterable[ConvProblem] = (),
    registry: Mapping[str, Family] | None = None,
) -> Selection:
    """Per conv2d shape stored for the device (or only `problems`), the fastest OK evaluation of
    any family (or of `families`) under the store's timing protocol, with its launch plan.

    A shape whose winner cannot be exported falls back to the next family's best and the
    reason is kept; a shape with nothing exportable is listed in `excluded` only."""
    row = choose_device(store, device)
    wanted_families = set(families)
    for name in wanted_families:
        get_family(name, registry)  # an unknown name is a usage error, not an empty export
    wanted_keys = {p.key for p in problems}
    best = store.best(device=str(row["name"]), kind="conv2d")
    if wanted_families:
        best = best[best["family"].isin(wanted_families)]
    if wanted_keys:
        best = best[best["problem_key"].isin(wanted_keys)]
    missing = wanted_keys - set(best["problem_key"])
    excluded: list[Excluded] = [
        Excluded(key, "", "no verified measurement of the chosen families")
        for key in sorted(missing)
    ]
    chosen: list[ExportedPlan] = []
    for key, group in best.groupby("problem_key", sort=False):
        found = None
        for r in group.sort_values(["time_ms", "family"]).itertuples(index=False):
            try:
                found = exported_plan(r, registry)
                break
            except NotExportable as why:
                excluded.append(Excluded(str(key), str(r.family), str(why)))
        if found is not None:
            chosen.append(found)
    if not chosen:
        raise ExportError(
            f"nothing to export for {row['name']} under timing protocol {store.protocol}"
            + (
                f" ({excluded[0].family or excluded[0].key}: {excluded[0].reason})"
                if excluded
                else ""
            )
        )
    chosen.sort(key=lambda e: _shape_order(e.problem))
    return Selection(row, store.protocol, tuple(chosen), tuple(excluded))


class NotExportable(Exception):
    """This family's plan cannot stand in the exported tree (the reason is its message)."""


def exported_plan(row: Any, registry: Mapping[str, Family] | None = None) -> ExportedPlan:
    """The launch plan of one `best` row."""
    name = str(row.family)
    try:
        family = get_family(name, registry)
    except UnknownFamily:
        raise NotExportable(
            f"family {name!r} is not known here (a kernel directory: --kernels)"
        ) from None
    problem = problem_from_dict(row.shape, "conv2d")
    assert isinstance(problem, ConvProblem)
    raw = row.config
    config = family.complete(Config.of(json.loads(raw) if isinstance(raw, str) else dict(raw)))
    if family.precision != "fp32":
        raise NotExportable(f"{name} computes in {family.precision}; the C++ API takes FP32 data")
    # The C++ table is keyed by sizes alone and its call takes float NCHW tensors: a plan
    # measured in another dtype or layout would answer FP32 calls of the same sizes.
    if problem.dtype != DEFAULT_DTYPE or problem.layout != DEFAULT_LAYOUT:
        raise NotExportable(
            f"measured in {problem.dtype} {problem.layout}; the C++ API takes FP32 NCHW data"
        )
    try:
        family.check(problem)
        plan = family.plan(problem, config)
    except (UnsupportedProblem, KeyError, ValueError) as err:
        raise NotExportable(f"its plan cannot be built here: {err}") from None
    if any(isinstance(a, TensorMap) for launch in plan.all_launches for a in launch.args):
        # A map holds its buffer's address: the C++ launcher would have to encode it per call.
        raise NotExportable(f"{name}'s plan passes TMA tensor maps, which the C++ tree cannot make")
    buffers = family.buffers(problem)
    inputs = dict(buffers.inputs)
    if inputs.get("x") != problem.input_shape or inputs.get("w") != problem.filter_shape:
        raise NotExportable(f"{name} does not read NCHW x and FCKK w")
    if dict(buffers.outputs) != {"y": problem.output_shape}:
        raise NotExportable(f"{name} does not write one NFHW output y")
    # An input the conv2d call has no argument for: a bias (smem_channels') is given zeros, which
    # makes the verified convolution-plus-bias the plain convolution; anything else is refused.
    extra = tuple((n, s) for n, s in buffers.inputs if n not in ("x", "w"))
    for extra_name, _ in extra:
        if extra_name not in ZERO_INPUTS:
            raise NotExportable(f"{name} reads an input {extra_name!r} the conv2d call has not")
    return ExportedPlan(
        problem=problem,
        family=family,
        config=config,
        plan=plan,
        time_ms=float(row.time_ms),
        gflops=float(row.gflops),
        extra_inputs=extra,
    )


def _shape_order(p: ConvProblem) -> tuple:
    return (p.N, p.K, p.C, p.F, p.B, p.stride, p.dtype, p.layout)

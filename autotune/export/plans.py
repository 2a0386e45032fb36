"""What an export holds: per conv2d shape, the plan the runtime's plan choice takes, launchable."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from autotune.families import FAMILIES, Family, get_family
from autotune.families.plan import KernelPlan, TensorMap, TensorMapError, check_tensor_map
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.runtime.choice import Choice
from autotune.runtime.lookup import Catalogue
from autotune.store import Store


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


def asked_families(families: Iterable[str], registry: Mapping[str, Family] | None) -> set[str]:
    """The families an export is limited to (none: every one); an unknown name is a usage error
    (UnknownFamily), not an empty export."""
    wanted = set(families)
    for name in wanted:
        get_family(name, registry)
    return wanted


def described(device: Mapping[str, object]) -> dict[str, object]:
    """A devices row as an export writes it into JSON: without its store-local id, each value a
    JSON scalar (anything else as its text)."""
    return {k: _plain(v) for k, v in device.items() if k != "id"}


def _plain(value: object) -> object:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def select(
    store: Store,
    device: str | None = None,
    families: Iterable[str] = (),
    problems: Iterable[ConvProblem] = (),
    registry: Mapping[str, Family] | None = None,
) -> Selection:
    """Per conv2d shape stored for the device (or only `problems`), the plan the runtime would
    run for it (the plan choice's rule 1, runtime/lookup.py) among every family (or
    `families`), under the store's timing protocol, with its launch plan.

    A shape whose first choice cannot be exported falls back to the next one and the reason is
    kept; a shape with nothing exportable is listed in `excluded` only."""
    row = choose_device(store, device)
    wanted = asked_families(families, registry)
    known = dict(FAMILIES if registry is None else registry)
    catalogue = Catalogue.from_store(
        store,
        str(row["name"]),
        store.protocol,
        {n: f for n, f in known.items() if n in wanted} if wanted else known,
    )
    wanted_keys = {p.key for p in problems}
    keys = [
        key
        for key, rows in catalogue.best.items()
        if (not wanted_keys or key in wanted_keys)
        and (not wanted or any(s.family in wanted for s in rows))
    ]
    excluded: list[Excluded] = [
        Excluded(key, "", "no verified measurement of the chosen families")
        for key in sorted(wanted_keys - set(keys))
    ]
    chosen: list[ExportedPlan] = []
    for key in keys:
        problem = catalogue.problems[key]
        for refused in catalogue.refusals(problem):
            why = refused.reason
            if wanted and refused.family not in wanted:
                continue  # a family not asked for is no exclusion
            if refused.family not in known:
                why = f"family {refused.family!r} is not known here (a kernel directory: --kernels)"
            excluded.append(Excluded(key, refused.family, why))
        for choice in catalogue.stored(problem):
            try:
                chosen.append(exported_plan(choice, known[choice.family]))
                break
            except NotExportable as why:
                excluded.append(Excluded(key, choice.family, str(why)))
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


def exported_plan(choice: Choice, family: Family) -> ExportedPlan:
    """The launch plan of a choice of the plan choice for its own (stored) shape, which the
    runtime can call: what the C++ tree needs beyond that is checked here. Every dtype and
    layout is exported: the C++ table is keyed by the sizes, the dtype and the layout, and a
    call names all three; TMA tensor maps are encoded by the C++ call from their description."""
    name, problem = family.name, choice.problem
    if problem.epilogue:
        raise NotExportable(
            f"fused epilogue {problem.epilogue}; the C++ API calls a plain convolution"
        )
    if problem.padding or problem.tail:
        raise NotExportable(
            f"padding={problem.padding}, tail={problem.tail} read in place; the C++ API pads a "
            "copy of the input and calls the pre-padded problem's plan"
        )
    plan = family.plan(problem, choice.config)
    for launch in plan.all_launches:
        for arg in launch.args:
            if isinstance(arg, TensorMap):
                try:
                    check_tensor_map(arg)  # the driver's rules but the address's
                except TensorMapError as err:
                    raise NotExportable(str(err)) from None
    buffers = family.buffers(problem)
    inputs = dict(buffers.inputs)
    layouts = "NHWC x and FKKC w" if problem.nhwc else "NCHW x and FCKK w"
    if inputs.get("x") != problem.input_shape or inputs.get("w") != problem.filter_shape:
        raise NotExportable(f"{name} does not read {layouts}")
    if dict(buffers.outputs) != {"y": problem.output_shape}:
        raise NotExportable(f"{name} does not write one output y")
    # The call has no argument for a bias (smem_channels'): it is given zeros, which makes the
    # verified convolution-plus-bias the plain convolution (callable_family refuses any other).
    extra = tuple((n, s) for n, s in buffers.inputs if n not in ("x", "w"))
    return ExportedPlan(
        problem=problem,
        family=family,
        config=choice.config,
        plan=plan,
        time_ms=choice.time_ms,
        gflops=choice.gflops,
        extra_inputs=extra,
    )


def _shape_order(p: ConvProblem) -> tuple:
    return (p.N, p.K, p.C, p.F, p.B, p.stride, p.dtype, p.layout)

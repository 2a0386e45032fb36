"""The exported plans as the tree describes them: modules, buffers, launch steps, the JSON table."""

from __future__ import annotations

import re
from dataclasses import dataclass

from autotune.export.plans import ExportedPlan, Selection, described
from autotune.families.plan import (
    COUNTER_BYTES,
    SCRATCH_BYTES,
    TMA_DATA_TYPES,
    TMA_SWIZZLES,
    Launch,
    TensorMap,
)
from autotune.model.space import Value

# 2: every dtype and layout (a plan's dtype, layout and tolerance; tensor-map arguments); 3: a
# launch's cluster size (a persistent grid's cap is whole clusters).
SCHEMA = "autotune-export/3"
# Exports an export may replace.
EARLIER_SCHEMAS = ("autotune-export/1", "autotune-export/2", SCHEMA)
# The tuner's NVRTC options (autotune.gpu.compiler.DEFAULT_OPTIONS) that shape the code; its
# -Xptxas=-v only prints the resource report.
NVCC_FLAGS = ("-std=c++17", "--fmad=true")
WORKSPACE_ALIGN = 256
INT32 = (-(2**31), 2**31 - 1)
ROLES = {"x": "kInputX", "w": "kInputW", "y": "kOutputY"}
LAYOUTS = (
    "per plan, its dtype and layout: NCHW x pre-padded (side (N-1)*stride+K), FCKK w, NFHW y; "
    "or NHWC x pre-padded, FKKC w, NHWF y; elements float (fp32, and tf32 multiplied as TF32), "
    "__nv_bfloat16 (bf16) or __half (fp16)"
)
# nvcc preprocesses with the host compiler, which leaves `#pragma unroll NAME` unexpanded (NVRTC
# expands it); through _Pragma the macro is expanded first. The same unroll count either way.
_UNROLL = re.compile(r"^([ \t]*)#pragma[ \t]+unroll[ \t]+([A-Za-z_(][^\n]*?)[ \t]*$", re.MULTILINE)
_PRAGMA_PRELUDE = (
    "#define AUTOTUNE_STRINGIFY(x) #x\n#define AUTOTUNE_PRAGMA(x) _Pragma(AUTOTUNE_STRINGIFY(x))\n"
)


@dataclass(frozen=True, slots=True)
class Module:
    """One compile unit: a kernel source with one set of defines, built into one fatbin."""

    index: int
    source: str  # file name under kernels/
    defines: tuple[tuple[str, Value], ...]
    kernels: tuple[str, ...]
    max_smem: dict[str, int]
    ptxas_options: tuple[str, ...] = ()  # the plan's, -Xptxas=<option> each in its build rule
    arch_specific: bool = False  # built for the architecture-specific target (sm_90a)

    @property
    def name(self) -> str:
        return f"m{self.index:03d}"


@dataclass(frozen=True, slots=True)
class Buffer:
    name: str
    role: str  # x, w, y, scratch, zeros (zeroed by every call: extra inputs, counters)
    bytes: int
    offset: int  # in the workspace (scratch and zeros only)


def nvcc_source(text: str, family: str) -> str:
    """A family's kernel source as nvcc can build it: a header line and the unroll rewrite."""
    body = _UNROLL.sub(lambda m: f"{m.group(1)}AUTOTUNE_PRAGMA(unroll {m.group(2)})", text)
    header = (
        f"// Kernel family {family}, exported by `autotune export`: the tuned source, with\n"
        "// `#pragma unroll NAME` written through _Pragma, so that nvcc expands NAME as NVRTC\n"
        "// does.\n"
    )
    return header + _PRAGMA_PRELUDE + body


def plan_buffers(exported: ExportedPlan) -> tuple[list[Buffer], int]:
    """x, w, y (in the problem's storage type), then the workspace's scratch (FP32), zeroed
    inputs and counters (uint32); and the workspace's bytes. The C++ call zeroes the "zeros"
    on every call: a counter needs zero only before the plan's first run (KernelPlan.counters),
    but a workspace is the caller's, shared with whatever else it holds."""
    p = exported.problem
    element = p.precision.bytes
    buffers = [
        Buffer("x", "x", element * _count(p.input_shape), 0),
        Buffer("w", "w", element * _count(p.filter_shape), 0),
        Buffer("y", "y", element * _count(p.output_shape), 0),
    ]
    offset = 0
    extra = [(n, s, "scratch", SCRATCH_BYTES) for n, s in exported.plan.scratch]
    extra += [(n, s, "zeros", element) for n, s in exported.extra_inputs]
    extra += [(n, (count,), "zeros", COUNTER_BYTES) for n, count in exported.plan.counters]
    for name, shape, role, size_of in extra:
        size = size_of * _count(shape)
        buffers.append(Buffer(name, role, size, offset))
        offset += -(-size // WORKSPACE_ALIGN) * WORKSPACE_ALIGN
    return buffers, offset


def plan_steps(exported: ExportedPlan) -> list[dict[str, object]]:
    """The plan's work in launch order: setup launches, constant copies, the timed launches,
    finish launches (the evaluator's order)."""
    plan = exported.plan
    steps: list[dict[str, object]] = [_launch("setup", launch) for launch in plan.setup]
    steps += [{"phase": "constant", "symbol": s, "buffer": b} for s, b in plan.constants]
    steps += [_launch("timed", launch) for launch in plan.launches]
    steps += [_launch("finish", launch) for launch in plan.finish]
    return steps


def _launch(phase: str, launch: Launch) -> dict[str, object]:
    args = []
    for arg in launch.args:
        if isinstance(arg, str):
            args.append({"buffer": arg})
        elif isinstance(arg, TensorMap):
            args.append({"tensor_map": tensor_map_entry(arg)})
        else:
            if not INT32[0] <= int(arg) <= INT32[1]:
                raise ValueError(f"{launch.kernel}: argument {arg} does not fit 32 bits")
            args.append({"int": int(arg)})
    return {
        "phase": phase,
        "kernel": launch.kernel,
        "grid": list(launch.grid),
        "block": list(launch.block),
        "smem_bytes": launch.smem_bytes,
        "blocks_per_sm": launch.blocks_per_sm,
        "cluster": launch.cluster,
        "args": args,
    }


def tensor_map_entry(spec: TensorMap) -> dict[str, object]:
    """A TMA tensor map as the C++ call encodes it at each call, with its buffer's address:
    the driver's encode arguments but the address, as gpu/tensor_map.py makes them (exported_plan
    checked its rules)."""
    entry: dict[str, object] = {
        "buffer": spec.buffer,
        "data_type": TMA_DATA_TYPES[spec.dtype],
        "dims": list(spec.dims),
        "strides": list(spec.strides),
        "box": list(spec.box),
        "element_strides": list(spec.element_strides),
        "swizzle": TMA_SWIZZLES[spec.swizzle_bytes],
    }
    if spec.im2col:
        lower, upper = spec.corners
        entry |= {"im2col": True, "lower": list(lower), "upper": list(upper)}
    return entry


def _count(shape: tuple[int, ...]) -> int:
    n = 1
    for extent in shape:
        n *= extent
    return n


def modules_of(selection: Selection) -> tuple[list[Module], list[int]]:
    """One module per distinct (source, defines, ptxas options), and each plan's module index."""
    modules: dict[tuple[str, tuple, tuple], Module] = {}
    of_plan = []
    for e in selection.plans:
        key = (e.plan.source.name, e.plan.defines, e.plan.ptxas_options)
        if key not in modules:
            smem: dict[str, int] = {}
            for launch in e.plan.all_launches:
                smem[launch.kernel] = max(smem.get(launch.kernel, 0), launch.smem_bytes)
            modules[key] = Module(
                len(modules), key[0], key[1], e.plan.entries, smem, key[2], e.plan.arch_specific
            )
        of_plan.append(modules[key].index)
    return list(modules.values()), of_plan


def table(selection: Selection, store_url: str) -> dict[str, object]:
    """The JSON table: per shape, the source, defines, entry points, launches in order (grid,
    block, dynamic shared memory, arguments) and the workspace's buffers."""
    modules, of_plan = modules_of(selection)
    plans = []
    for e, m in zip(selection.plans, of_plan, strict=True):
        buffers, workspace = plan_buffers(e)
        plans.append(
            {
                "shape": e.problem.as_dict(),
                "key": e.problem.key,
                "dtype": e.problem.dtype,
                "layout": e.problem.layout,
                "tolerance": e.family.tolerance_for(e.problem),
                "family": e.family.name,
                "config": e.config.as_dict(),
                "time_ms": e.time_ms,
                "gflops": e.gflops,
                "source": f"kernels/{modules[m].source}",
                "module": modules[m].name,
                "defines": dict(e.plan.defines),
                "entries": list(e.plan.entries),
                "steps": plan_steps(e),
                "workspace_bytes": workspace,
                "buffers": [
                    {"name": b.name, "role": b.role, "bytes": b.bytes}
                    | ({"workspace_offset": b.offset} if b.role in ("scratch", "zeros") else {})
                    for b in buffers
                ],
            }
            | ({"ptxas_options": list(e.plan.ptxas_options)} if e.plan.ptxas_options else {})
        )
    return {
        "schema": SCHEMA,
        "device": described(selection.device),
        "arch": selection.arch,
        "timing_protocol": selection.protocol,
        "store": store_url,
        "build": {"compiler": "nvcc", "flags": list(NVCC_FLAGS), "arch": selection.arch},
        "layout": LAYOUTS,
        "plans": plans,
        "excluded": [
            {"key": x.key, "family": x.family, "reason": x.reason} for x in selection.excluded
        ],
    }

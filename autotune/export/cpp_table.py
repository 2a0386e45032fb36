"""The generated files of the exported tree: the C++ plan table, the embedding, Makefile, README."""

from __future__ import annotations

import json
from collections.abc import Sequence

from autotune.export.cuda_tree import NVCC_FLAGS, ROLES, Module

ROLE_NAMES = {**ROLES, "scratch": "kScratch", "zeros": "kZeroInput"}
# autotune::DType and autotune::Layout of include/autotune_conv2d.h.
DTYPE_CODES = {"fp32": 0, "tf32": 1, "bf16": 2, "fp16": 3}
LAYOUT_CODES = {"NCHW": 0, "NHWC": 1}

_TYPES = """\
// kZeroInput: zeroed by every call (an input the call has no argument for, a plan's counters).
enum Role : int { kInputX, kInputW, kOutputY, kScratch, kZeroInput };
struct Kernel { const char* name; unsigned max_smem_bytes; };
struct Module {
    const unsigned char* image;
    const char* source;
    int first_kernel;
    int num_kernels;
};
struct Buffer {
    const char* name;
    int role;
    unsigned long long bytes;
    unsigned long long workspace_offset;
};
// buffer >= 0: that buffer's device pointer; map >= 0: kTensorMaps[map] encoded for its
// buffer's pointer, passed by value; else `value`, passed as a 32-bit int.
struct Arg { int buffer; int value; int map; };
// A TMA tensor map's encode arguments but the address (cuTensorMapEncodeTiled, or with
// `im2col` cuTensorMapEncodeIm2col, whose box is channels then pixels): extents and strides
// innermost first, strides in bytes; data_type and swizzle are the driver's enum values.
struct TensorMapSpec {
    int buffer;  // index among the plan's buffers
    int data_type;
    int rank;
    cuuint64_t dims[5];
    cuuint64_t strides[4];
    cuuint32_t box[5];
    cuuint32_t element_strides[5];
    int swizzle;
    int im2col;
    int lower[3];
    int upper[3];
};
// kernel >= 0: a launch of kModules[plan.module]'s kernel; kernel < 0: copy buffer
// source_buffer into the module's __constant__ `symbol`.
struct Step {
    int kernel;
    unsigned grid[3];
    unsigned block[3];
    unsigned smem_bytes;
    int first_arg;
    int num_args;
    const char* symbol;
    int source_buffer;
    unsigned blocks_per_sm;  // > 0: a persistent launch, grid[0] capped at this x the SMs
    unsigned cluster;        // blocks a cluster along x (the kernel's __cluster_dims__)
};
struct Plan {
    int B, C, N, K, F, stride;
    int dtype, layout;  // autotune::DType, autotune::Layout
    double tolerance;   // relative L2 error against float64 the tuner verified it within
    const char* family;
    const char* config;
    double time_ms;  // stored median under the timing protocol, launches of the timed phase
    int module;
    int first_step, num_steps;
    int first_buffer, num_buffers;
    unsigned long long workspace_bytes;
};
"""


def _c(text: str) -> str:
    return json.dumps(text)  # a C string literal: JSON's escapes are C's for these texts


def cpp_table(data: dict, modules: Sequence[Module]) -> str:
    """autotune_plans.h: the JSON table as constant C++ arrays the header reads."""
    kernels, module_rows = [], []
    for m in modules:
        first = len(kernels)
        kernels += [f"    {{{_c(k)}, {m.max_smem[k]}u}}," for k in m.kernels]
        module_rows.append(
            f"    {{autotune_fatbin_{m.name}, {_c('kernels/' + m.source)}, {first}, "
            f"{len(m.kernels)}}},"
        )
    buffers, args, steps, plans, maps = [], [], [], [], []
    max_args = 1
    for p in data["plans"]:
        module = modules[int(p["module"][1:])]
        names = [b["name"] for b in p["buffers"]]
        first_buffer, first_step = len(buffers), len(steps)
        for b in p["buffers"]:
            offset = b.get("workspace_offset", 0)
            buffers.append(
                f"    {{{_c(b['name'])}, {ROLE_NAMES[b['role']]}, {b['bytes']}ull, {offset}ull}},"
            )
        for s in p["steps"]:
            if s["phase"] == "constant":
                source = names.index(s["buffer"])
                steps.append(
                    f"    {{-1, {{0, 0, 0}}, {{0, 0, 0}}, 0u, 0, 0, {_c(s['symbol'])}, "
                    f"{source}, 0u, 1u}},"
                )
                continue
            first_arg = len(args)
            for a in s["args"]:
                if "buffer" in a:
                    args.append(f"    {{{names.index(a['buffer'])}, 0, -1}},")
                elif "tensor_map" in a:
                    args.append(f"    {{-1, 0, {len(maps)}}},")
                    maps.append(_tensor_map_row(a["tensor_map"], names))
                else:
                    args.append(f"    {{-1, {a['int']}, -1}},")
            max_args = max(max_args, len(s["args"]))
            grid = ", ".join(f"{v}u" for v in s["grid"])
            block = ", ".join(f"{v}u" for v in s["block"])
            steps.append(
                f"    {{{module.kernels.index(s['kernel'])}, {{{grid}}}, {{{block}}}, "
                f"{s['smem_bytes']}u, {first_arg}, {len(s['args'])}, nullptr, -1, "
                f"{s['blocks_per_sm']}u, {s['cluster']}u}},"
                f"  // {s['phase']}: {s['kernel']}"
            )
        shape = p["shape"]
        config = json.dumps(p["config"], separators=(",", ":"))
        plans.append(
            f"    {{{shape['B']}, {shape['C']}, {shape['N']}, {shape['K']}, {shape['F']}, "
            f"{shape['stride']}, {DTYPE_CODES[p['dtype']]}, {LAYOUT_CODES[p['layout']]}, "
            f"{p['tolerance']!r}, {_c(p['family'])}, {_c(config)}, {p['time_ms']!r}, "
            f"{module.index}, {first_step}, {len(steps) - first_step}, {first_buffer}, "
            f"{len(p['buffers'])}, {p['workspace_bytes']}ull}},"
        )
    device = data["device"]
    lines = [
        "// autotune_plans.h: the stored plans as C++ data, written by `autotune export` from",
        f"// {data['store']}; do not edit (export again). plans.json holds the same table.",
        "// Included by autotune_conv2d.h (after cuda.h, whose cuuint types it uses).",
        "#pragma once",
        "",
        'extern "C" {',
        *(f"extern const unsigned char autotune_fatbin_{m.name}[];" for m in modules),
        "}",
        "",
        "namespace autotune {",
        "namespace plans {",
        "",
        f"inline constexpr const char* kDevice = {_c(str(device.get('name', '')))};",
        f"inline constexpr const char* kArch = {_c(data['arch'])};",
        f"inline constexpr int kTimingProtocol = {data['timing_protocol']};",
        f"inline constexpr int kNumModules = {len(modules)};",
        f"inline constexpr int kNumPlans = {len(plans)};",
        f"inline constexpr int kMaxKernelsPerModule = {max(len(m.kernels) for m in modules)};",
        f"inline constexpr int kMaxBuffersPerPlan = "
        f"{max(len(p['buffers']) for p in data['plans'])};",
        f"inline constexpr int kMaxArgsPerLaunch = {max_args};",
        "",
        _TYPES,
        "inline constexpr Kernel kKernels[] = {",
        *kernels,
        "};",
        "inline constexpr Module kModules[] = {",
        *module_rows,
        "};",
        "inline constexpr Buffer kBuffers[] = {",
        *buffers,
        "};",
        "inline constexpr Arg kArgs[] = {",
        *args,
        "};",
        "inline constexpr Step kSteps[] = {",
        *steps,
        "};",
        f"inline constexpr int kNumTensorMaps = {len(maps)};",
        "inline constexpr TensorMapSpec kTensorMaps[] = {",
        *(maps or ["    {},  // none: no plan passes a tensor map"]),
        "};",
        "// B, C, N, K, F, stride, dtype, layout, tolerance, family, config, time_ms, module,",
        "// first_step, num_steps, first_buffer, num_buffers, workspace_bytes",
        "inline constexpr Plan kPlans[] = {",
        *plans,
        "};",
        "",
        "}  // namespace plans",
        "}  // namespace autotune",
        "",
    ]
    return "\n".join(lines)


def _tensor_map_row(m: dict, names: list[str]) -> str:
    def braces(values, size) -> str:
        return "{" + ", ".join(str(v) for v in [*values, *[0] * (size - len(values))]) + "}"

    lower, upper = m.get("lower", []), m.get("upper", [])
    return (
        f"    {{{names.index(m['buffer'])}, {m['data_type']}, {len(m['dims'])}, "
        f"{braces([f'{d}u' for d in m['dims']], 5)}, "
        f"{braces([f'{d}u' for d in m['strides']], 4)}, "
        f"{braces([f'{b}u' for b in m['box']], 5)}, "
        f"{braces([f'{e}u' for e in m['element_strides']], 5)}, {m['swizzle']}, "
        f"{int(bool(m.get('im2col')))}, {braces(lower, 3)}, {braces(upper, 3)}}},"
    )


def fatbins_asm(modules: Sequence[Module]) -> str:
    """src/fatbins.S: each module's fatbin (built by the Makefile) as a read-only symbol."""
    lines = [
        "# The kernels' fatbins, built by the Makefile under build/, embedded as read-only data",
        "# (assembled from the tree's root, where the .incbin paths start).",
        "    .section .rodata",
    ]
    for m in modules:
        lines += [
            "    .balign 64",
            f"    .globl autotune_fatbin_{m.name}",
            f"    .type autotune_fatbin_{m.name}, @object",
            f"autotune_fatbin_{m.name}:",
            f'    .incbin "build/{m.name}.fatbin"',
            "    .byte 0",
        ]
    lines += ['    .section .note.GNU-stack,"",@progbits', ""]
    return "\n".join(lines)


def makefile(modules: Sequence[Module], arch: str) -> str:
    number = arch.removeprefix("sm_")
    fatbins = " ".join(f"build/{m.name}.fatbin" for m in modules)
    lines = [
        "# Builds the exported plans: each kernel module ahead of time with nvcc, for the",
        f"# architecture the plans were measured on (sm_{number}; machine code, plus PTX that",
        "# newer GPUs compile at load), embedded in build/libautotune_conv2d.a; then the example.",
        "#   make            everything (make -j for parallel nvcc)",
        "#   build/example   run every plan, check it against a CPU reference, time it",
        "NVCC ?= nvcc",
        f"ARCH ?= {number}",
        "# -diag-suppress 177: maxdnn declares lambdas that some of its variants leave unused.",
        f"NVCCFLAGS ?= {' '.join(NVCC_FLAGS)} -diag-suppress 177",
        "GENCODE = -gencode arch=compute_$(ARCH),code=sm_$(ARCH) "
        "-gencode arch=compute_$(ARCH),code=compute_$(ARCH)",
        "# Kernels with Hopper-only instructions (wgmma, setmaxnreg): that architecture only.",
        "GENCODE_A = -gencode arch=compute_$(ARCH)a,code=sm_$(ARCH)a",
        f"FATBINS = {fatbins}",
        "",
        "all: build/libautotune_conv2d.a build/example",
        "",
        "build:",
        "\tmkdir -p build",
        "",
    ]
    for m in modules:
        defines = " ".join(f"-D{k}={int(v) if isinstance(v, bool) else v}" for k, v in m.defines)
        defines += "".join(f" -Xptxas={option}" for option in m.ptxas_options)
        lines += [
            f"build/{m.name}.fatbin: kernels/{m.source} | build",
            f"\t$(NVCC) --fatbin $(NVCCFLAGS) -Iinclude "
            f"$(GENCODE{'_A' if m.arch_specific else ''}) {defines} -o $@ $<",
            "",
        ]
    lines += [
        "build/fatbins.o: src/fatbins.S $(FATBINS) | build",
        "\t$(CC) -c -o $@ src/fatbins.S",
        "",
        "build/libautotune_conv2d.a: build/fatbins.o",
        "\t$(AR) rcs $@ $^",
        "",
        "build/example: example/example.cpp include/autotune_conv2d.h include/autotune_plans.h "
        "build/libautotune_conv2d.a",
        "\t$(NVCC) -std=c++17 -O2 -Iinclude -o $@ example/example.cpp build/libautotune_conv2d.a",
        "",
        "clean:",
        "\trm -rf build",
        "",
        ".PHONY: all clean",
        "",
    ]
    return "\n".join(lines)


def readme(data: dict) -> str:
    """The tree's README: what it holds, how to build and call it, and why nvcc ahead of time."""
    device = data["device"]
    rows = [
        f"| {i} | {p['key']} | {p['family']} | {p['time_ms']:.4g} | {p['gflops']:.1f} | "
        f"{p['workspace_bytes']} |"
        for i, p in enumerate(data["plans"])
    ]
    excluded = [f"- {x['key']} {x['family']}: {x['reason']}" for x in data["excluded"]]
    return "\n".join(
        [
            "# Tuned convolution kernels, exported by `autotune export`",
            "",
            f"The fastest verified kernel per shape on {device.get('name')} (compute capability "
            f"{device.get('compute_capability')}, {device.get('sm_count')} SMs), from "
            f"`{data['store']}`, timing protocol {data['timing_protocol']}, counting the layout "
            "conversions a plan makes on every call (the runtime's choice).",
            "",
            "- `kernels/`: the kernel sources used, once each",
            "- `plans.json`: per shape, the source, defines, entry points, each launch in order "
            "(grid, block, dynamic shared memory, arguments), constant-memory copies and the "
            "workspace's buffers (role `zeros`: zeroed by every call, an input the call has no "
            "argument for or a plan's counters)",
            "- `include/autotune_conv2d.h`: `autotune::conv2d(shape, x, w, y, workspace, "
            "workspace_bytes, stream)` runs a shape's plan on a stream; "
            "`include/autotune_plans.h` is the same table as C++ data",
            "- `example/example.cpp`: random input, every plan run, checked against a float64 "
            "CPU convolution, max error printed, timed with the L2 flushed",
            "- `Makefile`: `make -j` builds `build/libautotune_conv2d.a` and `build/example`",
            "",
            "## Build and use",
            "",
            "```",
            "make -j            # nvcc (CUDA 12.5 or newer) and a C compiler on PATH",
            "build/example      # exit status 0 when every plan matched the reference",
            "```",
            "",
            'In an application: `#include "autotune_conv2d.h"` (with `-Iinclude`), link '
            "`build/libautotune_conv2d.a` and the CUDA runtime. Layouts: "
            f"{data['layout']}. A shape not in the table returns `cudaErrorNotSupported` "
            "(`autotune::find_plan` tells beforehand). Workspace: "
            "`autotune::conv2d_workspace_bytes(shape)` bytes, or `nullptr` to have it taken "
            "from the stream-ordered allocator.",
            "",
            "## Why nvcc ahead of time, not NVRTC at first use",
            "",
            f"The plans were measured on one architecture ({data['arch']}), so the kernels are "
            "built once, at build time, for it (machine code plus PTX, which a newer GPU "
            "compiles at load). The application then needs no NVRTC library at run time and "
            "pays no compilation at its first calls (NVRTC took 0.1 to 1.3 s per kernel, median "
            "0.4 s, in the tuner's H100 records), and a kernel that does not compile fails the "
            "build, not a run. Each "
            "module is its own fatbin, loaded with the CUDA runtime's library API "
            "(`cudaLibraryLoadData`), because every module of one family has the same entry "
            "and `__constant__` names, with different defines.",
            "",
            "What differs from the tuner: it compiled with NVRTC, and nvcc's front end addresses "
            "shared memory with 32-bit pointers where NVRTC uses 64-bit ones, so the machine "
            "code is not byte-identical to the measured code (same source, defines and "
            "options). `build/example` times every plan again. Also, setup launches (layout "
            "conversions) and constant-memory copies, which the stored time leaves out, run on "
            "every call. A plan that copies the filters to constant memory (a `constant` step "
            "from buffer `w`) has one such copy per process: calls of that shape with different "
            "filters must not overlap on different streams.",
            "",
            "## Plans",
            "",
            "| # | shape | family | time_ms | GFlop/s | workspace bytes |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            *(["## Not exported", "", *excluded, ""] if excluded else []),
        ]
    )

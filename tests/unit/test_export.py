"""`autotune export` (CUDA tree): which plan per shape, the table, the generated files; no GPU."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.export import ExportError, select, write_tree
from autotune.export.cpp_table import cpp_table, makefile
from autotune.export.cuda_tree import (
    NVCC_FLAGS,
    WORKSPACE_ALIGN,
    Module,
    modules_of,
    nvcc_source,
    plan_buffers,
    table,
)
from autotune.families import FAMILIES, UnknownFamily
from autotune.families.base import INCLUDE_DIR, Buffers
from autotune.families.headers import quoted_headers
from autotune.families.plan import TensorMap
from autotune.families.smem_channels import SmemChannels
from autotune.gpu.compiler import DEFAULT_OPTIONS
from autotune.gpu.timing import FLUSH_MIN_BYTES, FLUSHES
from autotune.model.parsing import parse_shape
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import ARCH_LIMITS
from autotune.runtime.lookup import Catalogue
from autotune.runtime.pricing import untimed_ms
from autotune.store import Store
from tests.committed import committed_database

REPO = Path(__file__).resolve().parents[2]
H100 = "NVIDIA H100 80GB HBM3"
MAXDNN_SHAPE = "N=12,K=3,C=256,F=512,B=128"


def _shape(shape) -> dict:
    return json.loads(shape) if isinstance(shape, str) else dict(shape)


@pytest.fixture(scope="module")
def committed(tmp_path_factory) -> Path:
    """The committed results (every campaign file), as a fresh clone reads them."""
    return committed_database(tmp_path_factory.mktemp("committed"))


@pytest.fixture(scope="module")
def store(committed):
    s = Store(str(committed), create=False)
    yield s
    s.close()


@pytest.fixture(scope="module")
def everything(store):
    return select(store)


def test_each_shape_gets_the_runtimes_first_choice(store, everything) -> None:
    best = store.best(device=H100, kind="conv2d")
    # Every dtype and layout is exported (the C++ call names them); a fused epilogue is not.
    best = best[best["shape"].map(lambda s: "epilogue" not in _shape(s))]
    assert {"bf16", "tf32", "fp16"} <= {_shape(s).get("dtype") for s in best["shape"]}
    fastest = best.sort_values(["time_ms", "family"]).groupby("problem_key").first()
    assert {e.problem.key for e in everything.plans} == set(fastest.index)
    catalogue = Catalogue.from_store(store, H100)
    slower = {}
    for e in everything.plans:
        first = catalogue.stored(e.problem)[0]
        assert (e.family.name, e.config, e.time_ms) == (first.family, first.config, first.time_ms)
        if e.family.name != fastest.loc[e.problem.key, "family"]:
            slower[e.problem.key] = fastest.loc[e.problem.key, "family"]
    # The fastest timed run serves every shape but two, where maxdnn's run is faster by less
    # than the layout conversions it adds to every call.
    assert slower == {
        "N=55,K=11,C=3,F=64,B=128,stride=4": "maxdnn",
        "N=56,K=11,C=3,F=96,B=128,stride=4": "maxdnn",
    }
    assert everything.arch == "sm_90"
    assert everything.protocol == 2


def test_families_and_shapes_narrow_the_choice(store) -> None:
    only = select(store, families=["chen_general"])
    assert {e.family.name for e in only.plans} == {"chen_general"}
    shapes = [parse_shape(MAXDNN_SHAPE), parse_shape("N=33,K=3,C=64,F=64")]
    chosen = select(store, problems=shapes)
    assert [e.problem.key for e in chosen.plans] == [MAXDNN_SHAPE]
    assert [x.key for x in chosen.excluded] == ["N=33,K=3,C=64,F=64"]
    with pytest.raises(UnknownFamily):
        select(store, families=["no_such_family"])
    with pytest.raises(ExportError, match="nothing to export"):
        select(store, problems=[parse_shape("N=33,K=3,C=64,F=64")])


def test_a_layout_converting_plan_keeps_the_evaluators_order_and_its_scratch(store) -> None:
    chosen = select(store, families=["maxdnn"], problems=[parse_shape(MAXDNN_SHAPE)])
    data = table(chosen, "results/autotune.db")
    (plan,) = data["plans"]
    assert plan["family"] == "maxdnn"
    e = chosen.plans[0]
    timed_launches = e.plan.launches  # the kernel, after split-K's zero fill where SPLIT_K > 1
    phases = [s["phase"] for s in plan["steps"]]
    assert phases == [
        "setup",
        "setup",
        "setup",
        "constant",
        *["timed"] * len(timed_launches),
        "finish",
    ]
    assert [s.get("kernel") for s in plan["steps"] if s["phase"] == "setup"] == [
        "transpose_pad",
        "transpose_pad",
        "build_offsets",
    ]
    assert plan["steps"][3] == {"phase": "constant", "symbol": "c_offsets", "buffer": "offsets"}
    roles = {b["name"]: b["role"] for b in plan["buffers"]}
    assert roles == {
        "x": "x",
        "w": "w",
        "y": "y",
        "x_chwn": "scratch",
        "w_t": "scratch",
        "y_fhwn": "scratch",
        "offsets": "scratch",
    }
    scratch = [b for b in plan["buffers"] if b["role"] == "scratch"]
    end = 0
    for b in scratch:  # aligned, in order, not overlapping, inside the workspace
        assert b["workspace_offset"] % WORKSPACE_ALIGN == 0
        assert b["workspace_offset"] >= end
        end = b["workspace_offset"] + b["bytes"]
    assert end <= plan["workspace_bytes"]
    assert plan["defines"] == dict(e.plan.defines)
    kernels = [launch.kernel for launch in timed_launches]
    assert kernels[-1] == "maxdnn" and plan["entries"] == [
        "transpose_pad",
        "build_offsets",
        *kernels,
    ]
    for step, launch in zip(
        plan["steps"][4 : 4 + len(timed_launches)], timed_launches, strict=True
    ):
        assert step["kernel"] == launch.kernel and step["grid"] == list(launch.grid)
        assert step["smem_bytes"] == launch.smem_bytes
        assert step["blocks_per_sm"] == launch.blocks_per_sm == 0
        assert step["cluster"] == launch.cluster == 1
    assert timed_launches[-1].smem_bytes > 0


class Synthetic:
    """A store of one synthetic H100-like device, with a copy bandwidth, and what a test records."""

    def __init__(self, path: Path) -> None:
        self.store = Store(str(path))
        self.device = self.store.register_device(DeviceInfo("Synthetic GPU", "9.0", 132, "580"))
        self.run = self.store.start_run(self.device, "test", {})
        self.store.record_ceiling(self.device, "copy_bandwidth", 3000.0, "GB/s", "")

    def record(self, family: str, problem: ConvProblem, time_ms: float, config=None) -> None:
        if config is None:
            limits = ARCH_LIMITS["sm_90"]
            config = FAMILIES[family].load_space().bind(problem.fields(), limits).configs[0]
        m = Measurement(Status.OK, time_ms=time_ms, samples_ms=(time_ms,))
        self.store.record(self.run, self.device, family, problem, config, m, problem.flops)


LAYER = ConvProblem(N=13, K=3, C=256, F=256, B=128)
NEAR = ConvProblem(N=12, K=3, C=256, F=256, B=128)


def test_the_export_and_the_runtime_choose_the_same_plan(tmp_path) -> None:
    synthetic = Synthetic(tmp_path / "near.db")
    maxdnn = FAMILIES["maxdnn"]
    for problem in (LAYER, NEAR):
        config = FAMILIES["maxdnn"].load_space().bind(problem.fields(), ARCH_LIMITS["sm_90"])
        cost = untimed_ms(maxdnn, problem, maxdnn.plan(problem, config.configs[0]), 3000.0)
        # LAYER: maxdnn's run is the fastest, by less than its conversions (the export used to
        # take it, the runtime not); NEAR: faster by more than them.
        lead = cost / 2 if problem is LAYER else 2 * cost
        synthetic.record("maxdnn", problem, 0.5)
        synthetic.record("implicit_gemm", problem, 0.5 + lead)
    exported = {e.problem.key: e for e in select(synthetic.store).plans}
    catalogue = Catalogue.from_store(synthetic.store, "Synthetic GPU")
    for problem in (LAYER, NEAR):
        first = catalogue.stored(problem)[0]
        e = exported[problem.key]
        assert (e.family.name, e.config, e.time_ms) == (first.family, first.config, first.time_ms)
    assert exported[LAYER.key].family.name == "implicit_gemm"
    assert exported[NEAR.key].family.name == "maxdnn"
    # A shape nothing is stored for: the runtime borrows its nearest neighbour's choice, the
    # export (stored shapes only) leaves it out.
    between = ConvProblem(N=12, K=3, C=256, F=240, B=128)
    borrowed = next(catalogue.candidates(between, ARCH_LIMITS["sm_90"]))
    assert (borrowed.family, borrowed.measured_on) == ("maxdnn", NEAR.key)
    with pytest.raises(ExportError, match="nothing to export"):
        select(synthetic.store, problems=[between])


def test_families_the_tree_cannot_launch_are_excluded_with_their_reason(tmp_path) -> None:
    synthetic = Synthetic(tmp_path / "refused.db")
    problem = ConvProblem(N=32, K=3, C=64, F=64)
    config = FAMILIES["smem_channels"].load_space().bind(problem.fields(), ARCH_LIMITS["sm_90"])

    class Scaled(SmemChannels):
        name = "scaled"

        def buffers(self, problem: ConvProblem) -> Buffers:
            plain = super().buffers(problem)
            return Buffers(inputs=(*plain.inputs[:2], ("scale", (1,))), outputs=plain.outputs)

    class Mapped(SmemChannels):
        name = "mapped"

        def plan(self, problem, config):
            plain = super().plan(problem, config)
            # A box whose inner extent is not whole 16-byte chunks: the driver would refuse it.
            x_map = TensorMap("x", "float32", (4, 4), (16,), (3, 4), (1, 1))
            first = dataclasses.replace(plain.launches[0], args=(*plain.launches[0].args, x_map))
            return dataclasses.replace(plain, launches=(first, *plain.launches[1:]))

    # Fastest first: a family of a kernel directory not given, one reading an input the call
    # has not, one passing a tensor map the driver would refuse; then the plain smem_channels,
    # which is exported with its bias given zeros.
    for family, time_ms in (("gone", 0.1), ("scaled", 0.2), ("mapped", 0.3)):
        synthetic.record(family, problem, time_ms, config.configs[0])
    synthetic.record("smem_channels", problem, 0.4, config.configs[0])
    registry = {**FAMILIES, "scaled": Scaled(), "mapped": Mapped()}
    chosen = select(synthetic.store, registry=registry)
    (e,) = chosen.plans
    assert e.family.name == "smem_channels"
    reasons = {x.family: x.reason for x in chosen.excluded}
    assert list(reasons) == ["gone", "scaled", "mapped"]
    assert "not known here" in reasons["gone"]
    assert "scale" in reasons["scaled"]
    assert "16-byte chunks" in reasons["mapped"]
    buffers, workspace = plan_buffers(e)
    (bias,) = [b for b in buffers if b.name == "bias"]
    assert (bias.role, bias.bytes) == ("zeros", 4 * e.problem.F)
    assert workspace >= bias.bytes
    # Families not asked for are no exclusions.
    only = select(synthetic.store, families=["smem_channels"], registry=registry)
    assert only.excluded == ()


def test_a_plans_counters_are_workspace_buffers_every_call_zeroes(tmp_path) -> None:
    from autotune.families.maxdnn import MaxDnn

    class Counted(MaxDnn):
        """maxdnn (scratch of four buffers) with counters its last timed kernel takes."""

        name = "counted"

        def plan(self, problem, config):
            plain = super().plan(problem, config)
            last = plain.launches[-1]
            counting = dataclasses.replace(last, args=(*last.args, "sk_counters"))
            return dataclasses.replace(
                plain,
                launches=(*plain.launches[:-1], counting),
                counters=(("sk_counters", 132), ("flags", 3)),
            )

    synthetic = Synthetic(tmp_path / "counted.db")
    config = FAMILIES["maxdnn"].load_space().bind(LAYER.fields(), ARCH_LIMITS["sm_90"]).configs[0]
    synthetic.record("counted", LAYER, 0.1, config)
    chosen = select(synthetic.store, registry={**FAMILIES, "counted": Counted()})
    (e,) = chosen.plans
    buffers, workspace = plan_buffers(e)
    uncounted, plain_workspace = plan_buffers(
        dataclasses.replace(e, plan=dataclasses.replace(e.plan, counters=()))
    )
    # After the scratch, as zeroed buffers of 4 bytes a counter, each aligned.
    assert buffers[: len(uncounted)] == uncounted
    sk, flags = buffers[len(uncounted) :]
    assert (sk.name, sk.role, sk.bytes, sk.offset) == ("sk_counters", "zeros", 528, plain_workspace)
    assert (flags.name, flags.role, flags.bytes) == ("flags", "zeros", 12)
    assert flags.offset == plain_workspace + 3 * WORKSPACE_ALIGN  # 528 bytes rounded up
    assert workspace == flags.offset + WORKSPACE_ALIGN
    # The table and the C++ data say the same; the kernel's argument is that buffer.
    data = table(chosen, "counted.db")
    (plan,) = data["plans"]
    assert plan["workspace_bytes"] == workspace
    sk_row = {"name": "sk_counters", "role": "zeros", "bytes": 528, "workspace_offset": sk.offset}
    assert sk_row in plan["buffers"]
    assert plan["steps"][-2]["args"][-1] == {"buffer": "sk_counters"}  # before finish's
    header = cpp_table(data, modules_of(chosen)[0])
    rows = header.split("kBuffers[] = {", 1)[1].split("};", 1)[0].splitlines()[1:]
    index = [b.name for b in buffers].index("sk_counters")
    assert rows[index] == f'    {{"sk_counters", kZeroInput, 528ull, {sk.offset}ull}},'
    arg_rows = header.split("kArgs[] = {", 1)[1].split("};", 1)[0]
    assert f"    {{{index}, 0, -1}}," in arg_rows.splitlines()


def test_unroll_counts_named_by_a_macro_go_through_pragma_and_nothing_else_changes() -> None:
    text = (
        "#pragma unroll\nfor (;;) {}\n    #pragma unroll 4\n"
        "  #pragma unroll KY_UNROLL\nfor (;;) {}\n#pragma unroll (A * B)\n"
    )
    out = nvcc_source(text, "fam")
    body = out.split("_Pragma(AUTOTUNE_STRINGIFY(x))\n", 1)[1]
    assert body.splitlines() == [
        "#pragma unroll",
        "for (;;) {}",
        "    #pragma unroll 4",
        "  AUTOTUNE_PRAGMA(unroll KY_UNROLL)",
        "for (;;) {}",
        "AUTOTUNE_PRAGMA(unroll (A * B))",
    ]


def test_the_nvcc_flags_are_the_tuners_nvrtc_options_but_the_report() -> None:
    assert set(DEFAULT_OPTIONS) - set(NVCC_FLAGS) == {"-Xptxas=-v"}
    assert set(NVCC_FLAGS) <= set(DEFAULT_OPTIONS)


def test_the_examples_timer_flushes_as_the_tuners() -> None:
    # The example prints its time beside the stored one: it must flush as the tuner's timer
    # does (at least FLUSH_MIN_BYTES, FLUSHES in turn), or it sits in one of the two states.
    text = (REPO / "autotune" / "export" / "cpp" / "example.cpp").read_text()
    shift = re.search(r"kFlushMinBytes = size_t\{(\d+)\} << (\d+);", text)
    assert shift and int(shift[1]) << int(shift[2]) == FLUSH_MIN_BYTES
    flushes = re.search(r"kFlushes\[\] = \{([\d, ]+)\};", text)
    assert flushes and tuple(int(n) for n in flushes[1].split(",")) == FLUSHES
    assert "kFlushes[i % 2]" in text and len(FLUSHES) == 2


def test_a_modules_ptxas_options_reach_its_build_rule() -> None:
    plain = Module(0, "maxdnn.cu", (("BM", 128),), ("maxdnn",), {"maxdnn": 0})
    raised = Module(1, "maxdnn.cu", (("BM", 128),), ("maxdnn",), {}, ("--register-usage-level=10",))
    make = makefile([plain, raised], "sm_90")
    rules = re.findall(r"^\t\$\(NVCC\) --fatbin .*$", make, re.M)
    assert len(rules) == 2 and "-Xptxas" not in rules[0]
    assert rules[1].split()[-4] == "-Xptxas=--register-usage-level=10"


def test_the_cpp_table_and_makefile_follow_the_json(everything) -> None:
    data = table(everything, "results/autotune.db")
    modules, of_plan = modules_of(everything)
    header = cpp_table(data, modules)
    plans_block = header.split("kPlans[] = {", 1)[1].split("};", 1)[0]
    rows = [line for line in plans_block.splitlines() if line.strip().startswith("{")]
    assert len(rows) == len(data["plans"]) == len(of_plan)
    for row, plan in zip(rows, data["plans"], strict=True):
        s = plan["shape"]
        assert row.strip().startswith(f"{{{s['B']}, {s['C']}, {s['N']}, {s['K']}, {s['F']},")
        assert f'"{plan["family"]}"' in row
        assert row.strip().endswith(f"{plan['workspace_bytes']}ull}},")
    steps_block = header.split("kSteps[] = {", 1)[1].split("};", 1)[0]
    assert steps_block.count("\n    {") == sum(len(p["steps"]) for p in data["plans"])
    # A launch step's last fields: its blocks a multiprocessor (0: the grid as planned) and a
    # cluster.
    launch_rows = [line for line in steps_block.splitlines() if "nullptr, -1," in line]
    launch_steps = [s for p in data["plans"] for s in p["steps"] if "grid" in s]
    for row, step in zip(launch_rows, launch_steps, strict=True):
        assert f"nullptr, -1, {step['blocks_per_sm']}u, {step['cluster']}u}}," in row
    make = makefile(modules, data["arch"])
    assert "ARCH ?= 90" in make
    for m in modules:
        assert f"extern const unsigned char autotune_fatbin_{m.name}[];" in header
        rule = re.search(rf"^build/{m.name}\.fatbin: kernels/(\S+) \| build\n\t(.*)$", make, re.M)
        assert rule and rule.group(1) == m.source
        for name, value in m.defines:
            assert f"-D{name}={int(value)}" in rule.group(2).split()


def test_the_tree_holds_each_source_once_and_says_how_it_is_built(store, tmp_path) -> None:
    shapes = [parse_shape(MAXDNN_SHAPE), parse_shape("N=32,K=3,C=64,F=64")]
    chosen = select(store, problems=shapes)
    data = write_tree(chosen, tmp_path, "results/autotune.db")
    names = sorted(p.name for p in (tmp_path / "kernels").iterdir())
    assert names == sorted({e.plan.source.name for e in chosen.plans})
    for name in names:
        text = (tmp_path / "kernels" / name).read_text()
        assert "AUTOTUNE_PRAGMA" in text
    written = json.loads((tmp_path / "plans.json").read_text())
    assert written == json.loads(json.dumps(data))
    assert written["schema"] == "autotune-export/3"
    assert set(written["kernels"]) == {f"kernels/{n}" for n in names}
    # The kernels include shared headers (maxdnn's: the register-tiled loop, the vector and
    # cp.async helpers, its tile words): they lie under include/, which the kernels' build
    # rules search, each once.
    included = {
        name
        for e in chosen.plans
        for name, _ in quoted_headers(
            e.plan.source.read_text(), e.plan.source.parent, (INCLUDE_DIR,)
        )
    }
    assert {"register_tile.cuh", "vector.cuh", "cp_async.cuh", "tile_words.cuh"} <= included
    assert set(written["headers"]) == {f"include/{name}" for name in included}
    for name in included:
        assert (tmp_path / "include" / name).read_text() == (INCLUDE_DIR / name).read_text()
    assert "-Iinclude" in (tmp_path / "Makefile").read_text()
    for rel in (
        "include/autotune_conv2d.h",
        "include/autotune_plans.h",
        "example/example.cpp",
        "src/fatbins.S",
        "Makefile",
    ):
        assert (tmp_path / rel).is_file(), rel
    readme = (tmp_path / "README.md").read_text()
    assert "Why nvcc ahead of time" in readme and MAXDNN_SHAPE in readme
    asm = (tmp_path / "src" / "fatbins.S").read_text()
    assert asm.count('.incbin "') == len(modules_of(chosen)[0])


def test_cli_export_writes_the_tree_and_refuses_bad_input(committed, tmp_path) -> None:
    runner = CliRunner()
    out = tmp_path / "tree"
    done = runner.invoke(
        main,
        ["export", "--output", str(out), "--storage", str(committed), "--shape", MAXDNN_SHAPE],
    )
    assert done.exit_code == 0, done.output
    assert (out / "plans.json").is_file()
    gemm = runner.invoke(
        main,
        ["export", "--output", str(out), "--storage", str(committed), "--shape", "M=8,N=8,K=8"],
    )
    assert gemm.exit_code == 2 and "2D convolutions" in gemm.output
    assert "Traceback" not in gemm.output


def test_a_store_of_several_devices_needs_device(tmp_path) -> None:
    db = tmp_path / "two.db"
    s = Store(str(db))
    s.register_device(DeviceInfo(H100, "9.0", 132, "580"))
    s.register_device(DeviceInfo("NVIDIA A100-SXM4-40GB", "8.0", 108, "580"))
    s.close()
    done = CliRunner().invoke(
        main, ["export", "--output", str(tmp_path / "t"), "--storage", str(db)]
    )
    assert done.exit_code == 1
    assert "2 devices" in done.output and "--device" in done.output
    other = CliRunner().invoke(
        main,
        ["export", "--output", str(tmp_path / "t"), "--storage", str(db), "--device", "nope"],
    )
    assert other.exit_code == 1 and "no device 'nope'" in other.output


def test_an_export_replaces_an_earlier_one_and_nothing_else(store, tmp_path) -> None:
    tree = tmp_path / "tree"
    write_tree(select(store, families=["maxdnn"]), tree, "db")
    (tree / "build").mkdir()
    (tree / "build" / "m000.fatbin").write_bytes(b"old")
    write_tree(select(store, families=["chen_general"]), tree, "db")
    assert sorted(p.name for p in (tree / "kernels").iterdir()) == ["chen_general.cu"]
    assert not (tree / "build").exists()
    # An export of the FP32-only schema before this one is replaced too.
    written = json.loads((tree / "plans.json").read_text())
    (tree / "plans.json").write_text(json.dumps(written | {"schema": "autotune-export/1"}))
    write_tree(select(store, families=["maxdnn"]), tree, "db")
    assert json.loads((tree / "plans.json").read_text())["schema"] == "autotune-export/3"
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="neither empty nor an earlier export"):
        write_tree(select(store, families=["maxdnn"]), other, "db")
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def tensor_core_store(path: Path) -> tuple[Synthetic, dict[str, ConvProblem]]:
    """A store holding one plan per tensor-core dtype: tc_wgmma in bf16 with TMA tensor maps (an
    im2col map of x, a tiled one of w), tc_implicit_gemm in tf32 and in fp16, all NHWC."""
    synthetic = Synthetic(path)
    sizes = ConvProblem(N=14, K=3, C=64, F=128, B=2)
    problems = {
        "bf16": dataclasses.replace(sizes, dtype="bf16", layout="NHWC"),
        "tf32": dataclasses.replace(sizes, dtype="tf32", layout="NHWC"),
        "fp16": dataclasses.replace(sizes, dtype="fp16", layout="NHWC", stride=2),
    }
    limits = ARCH_LIMITS["sm_90"]
    space = FAMILIES["tc_wgmma"].load_space().bind(problems["bf16"].fields(), limits)
    tma = next(c for c in space.configs if c["TMA"] == 1)
    synthetic.record("tc_wgmma", problems["bf16"], 0.01, tma)
    synthetic.record("tc_implicit_gemm", problems["tf32"], 0.02)
    synthetic.record("tc_implicit_gemm", problems["fp16"], 0.01)
    return synthetic, problems


def test_tensor_core_plans_are_exported_with_their_dtype_layout_and_tensor_maps(tmp_path) -> None:
    synthetic, problems = tensor_core_store(tmp_path / "tc.db")
    chosen = select(synthetic.store)
    assert chosen.excluded == ()
    data = table(chosen, "test.db")
    by_dtype = {p["dtype"]: p for p in data["plans"]}
    assert set(by_dtype) == {"bf16", "tf32", "fp16"}
    bf16 = by_dtype["bf16"]
    assert (bf16["family"], bf16["layout"], bf16["tolerance"]) == ("tc_wgmma", "NHWC", 5e-3)
    x = problems["bf16"]
    sizes = {b["name"]: b["bytes"] for b in bf16["buffers"]}
    assert sizes["x"] == 2 * x.B * x.input_size**2 * x.C  # bf16 elements, NHWC, padded
    maps = [a["tensor_map"] for s in bf16["steps"] for a in s["args"] if "tensor_map" in a]
    assert {(m["buffer"], bool(m.get("im2col"))) for m in maps} == {("x", True), ("w", False)}
    im2col = next(m for m in maps if m.get("im2col"))
    # The driver's extents innermost first: channels, then the padded sides, then the batch.
    assert im2col["dims"] == [x.C, x.input_size, x.input_size, x.B]
    assert im2col["data_type"] == 9  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    assert by_dtype["tf32"]["tolerance"] == 2e-3 and by_dtype["fp16"]["shape"]["stride"] == 2
    modules, _ = modules_of(chosen)
    header = cpp_table(data, modules)
    assert "kNumTensorMaps = 2;" in header
    # tc_wgmma's module is built for sm_90a only; tc_implicit_gemm's for sm_90 with PTX.
    rules = [line for line in makefile(modules, chosen.arch).splitlines() if "--fatbin" in line]
    assert sum("$(GENCODE_A)" in r for r in rules) == 1 and len(rules) == 3

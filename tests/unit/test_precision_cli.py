"""--dtype and --layout on the commands that take shapes: multiplication, defaults, refusals."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.families import FAMILIES
from autotune.families.files import KERNEL_DIR, SPACE_DIR
from autotune.families.implicit_gemm import ImplicitGemm
from autotune.model.problem import ConvProblem, ProblemError
from autotune.model.shapes import ShapeSelection, collect_shapes, in_precisions, named_shapes
from autotune.tuning.campaign import RunRequest, family_precisions, pair_request


class TensorCoreStandIn(ImplicitGemm):
    """A family that, like the tensor-core ones coming, computes no fp32 and reads NHWC only."""

    name = "tc_stand_in"
    dtypes = ("tf32", "bf16", "fp16")
    layouts = ("NHWC",)

    # implicit_gemm's kernel and space, under another name.
    @property
    def source_path(self):
        return KERNEL_DIR / "implicit_gemm.cu"

    @property
    def space_path(self):
        return SPACE_DIR / "implicit_gemm.toml"


@pytest.fixture
def tc_family(monkeypatch):
    family = TensorCoreStandIn()
    monkeypatch.setitem(FAMILIES, family.name, family)
    return family


def test_dtype_and_layout_multiply_the_shapes() -> None:
    alexnet = named_shapes("alexnet")
    both = collect_shapes(("alexnet",), (), (), ("fp32", "bf16"), ("NCHW", "NHWC"))
    assert len(both) == 4 * len(alexnet)
    assert {(p.dtype, p.layout) for p in both} == {
        ("fp32", "NCHW"), ("fp32", "NHWC"), ("bf16", "NCHW"), ("bf16", "NHWC"),
    }  # fmt: skip
    assert len({p.key for p in both}) == len(both)  # every pair its own key
    assert collect_shapes(("alexnet",)) == alexnet  # nothing asked: as they are


def test_a_shape_that_names_its_dtype_keeps_it() -> None:
    found = collect_shapes(
        (), ("N=13,K=3,C=64,F=64,dtype=fp32", "N=7,K=3,C=8,F=8,layout=NHWC"), (), ("bf16",)
    )
    assert [(p.dtype, p.layout) for p in found] == [("fp32", "NCHW"), ("bf16", "NHWC")]


def test_other_kinds_are_fp32_only() -> None:
    assert len(collect_shapes(("alexnet_fc",), (), (), ("fp32",))) == len(
        named_shapes("alexnet_fc")
    )
    with pytest.raises(ProblemError, match="gemm shape, computed in fp32 only"):
        collect_shapes(("alexnet_fc",), (), (), ("bf16",))
    assert in_precisions(named_shapes("alexnet_fc"), ("bf16",), strict=False) == []


def test_a_set_may_name_a_dtype_for_its_layers(tmp_path) -> None:
    path = tmp_path / "tc.toml"
    path.write_text(
        'dtype = "bf16"\nlayout = "NHWC"\nshapes = [{N = 13, K = 3, C = 64, F = 64},\n'
        ' {N = 13, K = 3, C = 64, F = 64, dtype = "fp16"}]\n'
    )
    found = collect_shapes((), (), (str(path),))
    assert [(p.dtype, p.layout) for p in found] == [("bf16", "NHWC"), ("fp16", "NHWC")]
    # A set's own dtype is not multiplied by --dtype.
    assert len(collect_shapes((), (), (str(path),), ("fp32", "tf32"))) == 2


def test_family_without_fp32_takes_its_own_dtypes(tc_family) -> None:
    assert family_precisions(tc_family) == (("tf32", "bf16", "fp16"), ("NHWC",))
    assert family_precisions(FAMILIES["implicit_gemm"]) == (("fp32",), ("NCHW",))
    assert family_precisions(tc_family, ("bf16",), ("NHWC",)) == (("bf16",), ("NHWC",))
    pairing = pair_request(
        RunRequest(families=(tc_family.name,), selection=ShapeSelection(("alexnet",)))
    )
    assert pairing.refused == []
    assert len(pairing.pairs) == 3 * len(named_shapes("alexnet"))
    assert {p.layout for _, p in pairing.pairs} == {"NHWC"}


def test_mismatched_pairs_are_refused_once_per_family_and_value(tc_family) -> None:
    request = RunRequest(
        families=("implicit_gemm", tc_family.name),
        selection=ShapeSelection(("alexnet",), dtypes=("fp32", "bf16"), layouts=("NHWC",)),
    )
    pairing = pair_request(request)
    assert pairing.refused == [
        "implicit_gemm in bf16: it computes fp32",
        "implicit_gemm in NHWC: it reads NCHW",
        "tc_stand_in in fp32: it computes tf32/bf16/fp16",
    ]
    assert {(f.name, p.dtype, p.layout) for f, p in pairing.pairs} == {
        ("tc_stand_in", "bf16", "NHWC")
    }
    # Without --dtype every family takes its own: fp32 NCHW here, tf32/bf16/fp16 NHWC there.
    mixed = pair_request(
        RunRequest(
            families=("implicit_gemm", tc_family.name),
            selection=ShapeSelection(shapes=("N=13,K=3,C=64,F=64",)),
        )
    )
    assert mixed.refused == []
    assert sorted(p.key for _, p in mixed.pairs) == sorted(
        [
            "N=13,K=3,C=64,F=64",
            *(f"N=13,K=3,C=64,F=64,dtype={d},layout=NHWC" for d in ("tf32", "bf16", "fp16")),
        ]
    )


def one_line_error(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dtype", "fp8"], "autotune: unknown dtype 'fp8' (known: fp32, tf32, bf16, fp16)"),
        (["--layout", "CHWN"], "autotune: unknown layout 'CHWN' (known: NCHW, NHWC)"),
    ],
)
@pytest.mark.parametrize("command", ["run", "baseline", "remeasure", "export"])
def test_unknown_dtype_or_layout_is_one_line_exit_2(command, args, message, tmp_path) -> None:
    extra = ["--output", str(tmp_path / "out")] if command == "export" else []
    result = CliRunner().invoke(
        main, [command, "--shapes", "alexnet", *args, *extra, "--storage", str(tmp_path / "x.db")]
    )
    assert one_line_error(result) == message
    assert not (tmp_path / "x.db").exists()


def test_run_multiplies_shapes_through_the_command_line(monkeypatch, tc_family) -> None:
    import autotune.cli.run as run_module

    asked = []

    def capture(request, on_progress=None):  # noqa: ARG001
        asked.append(request)
        raise SystemExit(0)

    monkeypatch.setattr(run_module, "tune", capture)
    args = ["run", "--family", tc_family.name, "--shapes", "alexnet"]
    result = CliRunner().invoke(main, [*args, "--dtype", "BF16", "--layout", "nhwc"])
    assert result.exit_code == 0, result.output
    chosen = asked[0].selection
    assert chosen.dtypes == ("bf16",) and chosen.layouts == ("NHWC",)  # spelling forgiven
    keys = [p.key for _, p in pair_request(asked[0]).pairs]
    assert keys == [
        dataclasses.replace(p, dtype="bf16", layout="NHWC").key for p in named_shapes("alexnet")
    ]
    result = CliRunner().invoke(main, [*args, "--dtype", "bf16", "--dtype", "fp16"])
    assert result.exit_code == 0, result.output
    assert len(pair_request(asked[1]).pairs) == 2 * len(named_shapes("alexnet"))


def test_run_with_no_pair_left_is_refused_before_any_gpu(tmp_path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "run", "--family", "implicit_gemm", "--shapes", "alexnet", "--dtype", "bf16",
            "--storage", str(tmp_path / "x.db"),
        ],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "nothing to tune" in result.stderr
    assert "implicit_gemm in bf16: it computes fp32" in result.stderr
    assert not (tmp_path / "x.db").exists()


def test_run_help_says_what_the_defaults_are() -> None:
    text = CliRunner().invoke(main, ["run", "--help"], terminal_width=200).output
    assert "--dtype" in text and "--layout" in text
    assert "else every dtype it declares" in " ".join(text.split())


def test_replay_skips_a_mismatched_family_in_one_line(tmp_path, tc_family) -> None:
    """A replayed run: the fp32 family tunes, the stand-in refuses fp32 in one line, not one
    line per shape."""
    from autotune.model.records import Status
    from autotune.model.space import DeviceLimits
    from autotune.replay.recording import Outcome, RecordedStudy, save_recording

    shapes = [ConvProblem(N=n, K=3, C=16, F=16) for n in (8, 12)]
    family = FAMILIES["implicit_gemm"]
    studies = []
    for problem in shapes:
        study = RecordedStudy(family.name, problem, "NVIDIA H100")
        space = family.load_space().bind(problem.fields(), DeviceLimits())
        for i, config in enumerate(space.configs[:20]):
            study.outcomes[config] = Outcome(Status.OK, 0.01 + 0.001 * i)
        studies.append(study)
    recording = save_recording(studies, tmp_path / "r.jsonl.gz")
    args = ["run", "--replay", str(recording), "--family", "implicit_gemm", "--family"]
    args += [tc_family.name, "--shape", "N=8,K=3,C=16,F=16", "--shape", "N=12,K=3,C=16,F=16"]
    args += ["--dtype", "fp32", "--budget", "3", "--strategy", "brute_force"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "skipping" in line]
    assert lines == ["autotune: skipping tc_stand_in in fp32: it computes tf32/bf16/fp16"]
    assert "6 new evaluations" in result.stderr


def test_space_binds_the_familys_own_dtype_unless_told(tc_family) -> None:
    shape = "N=13,K=3,C=64,F=64"
    result = CliRunner().invoke(main, ["space", "implicit_gemm", "--shape", shape])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"implicit_gemm {shape} on sm_90:")
    result = CliRunner().invoke(
        main, ["space", "implicit_gemm", "--shape", shape, "--dtype", "bf16", "--samples", "0"]
    )
    assert one_line_error(result) == "autotune: implicit_gemm computes fp32, not bf16"
    args = ["space", tc_family.name, "--shape", shape, "--samples", "0"]
    result = CliRunner().invoke(main, args)
    assert result.output.startswith(f"tc_stand_in {shape},dtype=tf32,layout=NHWC on sm_90:")
    result = CliRunner().invoke(main, [*args, "--dtype", "fp16"])
    assert result.output.startswith(f"tc_stand_in {shape},dtype=fp16,layout=NHWC on sm_90:")
    result = CliRunner().invoke(main, [*args[:3], f"{shape},dtype=bf16", "--dtype", "fp16"])
    assert result.output.startswith(f"tc_stand_in {shape},dtype=bf16,layout=NHWC on sm_90:")


def test_families_lists_what_a_family_computes(tc_family) -> None:
    output = CliRunner().invoke(main, ["families"]).output
    assert "computes: tf32/bf16/fp16 in NHWC" in output
    # Only the families that do not compute fp32 NCHW say so (the stand-in and the built-in
    # tensor-core ones).
    other = [f for f in FAMILIES.values() if (f.dtypes, f.layouts) != (("fp32",), ("NCHW",))]
    assert len(other) >= 2 and output.count("computes:") == len(other)

"""The command line through click's runner: output, one-line errors and exit codes."""

from __future__ import annotations

import csv
import io

import pytest
from click.testing import CliRunner

import autotune.gpu.evaluator
from autotune.cli.app import main
from tests.conftest import SyntheticEvaluator


@pytest.fixture
def runner():
    return CliRunner()


def _one_line_error(result, code):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = [
        ln
        for ln in result.output.splitlines()
        if ln.startswith("autotune:") or ln.startswith("Error:")
    ]
    assert len(lines) >= 1
    return result.output


@pytest.fixture
def fake_gpu(monkeypatch):
    def cost(defines):
        return 1.0 + defines.get("BLOCK_X", 1) / 64 + defines.get("BLOCK_Y", 1) / 8

    made = []

    def factory(index=0):
        ev = SyntheticEvaluator(cost)
        made.append(ev)
        return ev

    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", factory)
    return made


def test_help_explains_every_command(runner):
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("run", "best", "plot", "families", "space", "shapes"):
        assert command in result.output
    run_help = runner.invoke(main, ["run", "--help"]).output
    assert "--budget" in run_help and "resume" in run_help


def test_families_lists_each_family_with_tunables(runner):
    result = runner.invoke(main, ["families"])
    assert result.exit_code == 0
    assert "direct_naive" in result.output and "BLOCK_X" in result.output


def test_shapes_lists_sets_and_a_set(runner):
    assert "special: 18 shapes" in runner.invoke(main, ["shapes"]).output
    out = runner.invoke(main, ["shapes", "alexnet"]).output
    assert "N=55,K=11,C=3,F=64,B=128,stride=4" in out


def test_space_reports_size_and_samples(runner):
    result = runner.invoke(
        main,
        ["space", "direct_naive", "--shape", "N=29,K=5,C=7,F=9", "--samples", "2", "--compile"],
    )
    assert result.exit_code == 0, result.output
    assert "valid of 72 configurations" in result.output
    assert result.output.count("registers") == 2
    assert "the layer its kernels compute" not in result.output


def test_space_names_the_layer_a_rewrite_computes(runner):
    # tc_wgmma computes ResNet-50's 7x7/2 first layer as its space-to-depth rewrite: a stride-1
    # layer of 4 taps and 16 channels, whose configurations (channel blocks, TMA) it offers.
    shape = "N=112,K=7,C=3,F=64,B=32,stride=2,dtype=bf16,layout=NHWC"
    result = runner.invoke(
        main, ["space", "tc_wgmma", "--shape", shape, "--samples", "1", "--compile"]
    )
    assert result.exit_code == 0, result.output
    assert "configurations of the layer its kernels compute for it: K=4, C=16, stride=1, S=115" in (
        result.output
    )
    assert "0 B spilled" in result.output


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["space", "nope", "--shape", "N=8,K=3,C=1,F=1"], 2, "unknown family 'nope'"),
        (["space", "direct_naive", "--shape", "N=0,K=3,C=1,F=1"], 2, "N must be at least 1"),
        (["space", "direct_naive", "--shape", "N=8,K=3"], 2, "lacks C, F"),
        (["run", "--family", "nope"], 2, "unknown family"),
        (["run", "--shapes", "nope"], 2, "unknown shape set"),
        (["run", "--shape", "N=8,K=3,C=1,F=-1"], 2, "F must be at least 1"),
        (["run", "--shape-file", "/no/such.csv"], 2, "does not exist"),
        (["run", "--budget", "0"], 2, "budget"),
        (["best", "--storage", "/no/such/dir/x.db"], 1, "no results database"),
        (["plot", "--storage", "/no/such/dir/x.db"], 1, "no results database"),
        (["space", "sgemm", "--shape", "M=4,N=4"], 2, "lacks K"),
        (["space", "sgemm", "--shape", "M=4,N=4,K=0"], 2, "K must be at least 1"),
        (["space", "sgemm", "--shape", "M=4,N=4,K=4,C=2"], 2, "unknown shape field 'C'"),
        (["space", "sgemm", "--shape", "N=8,K=3,C=1,F=1"], 2, "GemmProblem, not ConvProblem"),
        (["run", "--shape", "M=x,N=1,K=1"], 2, "not an integer"),
        (["baseline", "--shape", "D=4,R=4,Cc=4,Kd=5,Kr=1,Kc=1"], 2, "larger than the input"),
        (["run", "--shape", "D=4,R=4,Cc=4,Kd=3,Kr=3"], 2, "lacks Kc"),
        (["best", "--problem-kind", "conv4d"], 2, "conv4d"),
    ],
)
def test_bad_input_gets_a_one_line_error(runner, args, code, message):
    result = runner.invoke(main, args)
    assert message in _one_line_error(result, code)


def test_run_without_a_gpu_exits_1_with_one_line(runner, tmp_path):
    result = runner.invoke(
        main, ["run", "--shape", "N=16,K=3,C=1,F=1", "--storage", str(tmp_path / "r.db")]
    )
    if result.exit_code == 0:
        pytest.skip("this machine has a GPU")
    assert "no usable CUDA GPU" in _one_line_error(result, 1)


def test_run_refuses_a_corrupt_database_and_leaves_it_alone(runner, tmp_path, fake_gpu):
    db = tmp_path / "bad.db"
    db.write_bytes(b"not a database at all" * 100)
    before = db.read_bytes()
    result = runner.invoke(main, ["run", "--shape", "N=16,K=3,C=1,F=1", "--storage", str(db)])
    assert "results database" in _one_line_error(result, 1)
    assert db.read_bytes() == before


@pytest.mark.slow
def test_run_best_plot_end_to_end_on_a_synthetic_gpu(runner, tmp_path, fake_gpu):
    db = str(tmp_path / "r.db")
    args = [
        "run",
        "--family",
        "direct_naive",
        "--shape",
        "N=29,K=5,C=7,F=9",
        "--shape",
        "N=16,K=3,C=2,F=4",
        "--budget",
        "5",
        "--storage",
        db,
        "--cache-dir",
        str(tmp_path / "cubins"),
    ]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "10 new evaluations" in result.output
    assert "| direct_naive" in result.output
    again = runner.invoke(main, args)
    assert "0 new evaluations" in again.output

    csv = runner.invoke(main, ["best", "--format", "csv", "--storage", db])
    assert csv.exit_code == 0
    header, *rows = csv.output.strip().splitlines()
    assert header.startswith("device,family,B,N,K,C,F,stride,config,time_ms,gflops")
    assert len(rows) == 2 and all("Synthetic GPU,direct_naive" in r for r in rows)

    md = runner.invoke(main, ["best", "--storage", db, "--output", str(tmp_path / "best.md")])
    assert md.exit_code == 0 and (tmp_path / "best.md").read_text().startswith("|")
    other = runner.invoke(main, ["best", "--device", "A100", "--storage", db])
    assert other.exit_code == 1  # the filter is named, not "nothing stored"
    assert "no successful evaluations of timing protocol 2 stored for device 'A100'" in other.output

    plot = runner.invoke(main, ["plot", "--storage", db, "--output", str(tmp_path / "g")])
    assert plot.exit_code == 0, plot.output
    assert (tmp_path / "g.png").stat().st_size > 1000 and (tmp_path / "g.svg").is_file()


def test_run_skips_shapes_a_family_cannot_compute(runner, tmp_path, fake_gpu):
    from autotune.families import FAMILIES

    if "chen_special" not in FAMILIES:
        pytest.skip("chen_special not registered")
    result = runner.invoke(
        main,
        [
            "run",
            "--family",
            "chen_special",
            "--shape",
            "N=16,K=3,C=2,F=1",
            "--storage",
            str(tmp_path / "r.db"),
        ],
    )
    assert "skipping chen_special" in _one_line_error(result, 2)
    assert "nothing to tune" in result.output


def test_device_measures_ceilings_once_and_prints_them(runner, tmp_path, fake_gpu):
    db = str(tmp_path / "r.db")
    first = runner.invoke(main, ["device", "--storage", db])
    assert first.exit_code == 0, first.output
    assert "fma_peak" in first.output and "64,700.0" in first.output
    assert "copy_bandwidth" in first.output and "sgemm" in first.output
    again = runner.invoke(main, ["device", "--storage", db])
    assert again.exit_code == 0
    assert not fake_gpu[-1].tasks, "stored ceilings must not be measured again"
    runner.invoke(main, ["device", "--storage", db, "--remeasure"])
    assert len(fake_gpu[-1].tasks) == 1


def test_baseline_measures_each_shape_once(runner, tmp_path, fake_gpu):
    db = str(tmp_path / "r.db")
    args = [
        "baseline",
        "--shape",
        "N=16,K=3,C=2,F=4",
        "--shape",
        "N=8,K=1,C=1,F=1",
        "--storage",
        db,
    ]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "2 cuDNN baselines measured" in result.output
    again = runner.invoke(main, args)
    assert "0 cuDNN baselines measured" in again.output
    assert again.output.count("stored already") == 2
    from autotune.store import Store

    frame = Store(db).baselines()
    assert set(frame["problem_key"]) == {"N=16,K=3,C=2,F=4", "N=8,K=1,C=1,F=1"}
    assert set(frame["algorithm"]) == {"synthetic_algo"}


def test_baseline_observe_stores_cudnns_energy_and_best_shows_it_beside_ours(
    runner, tmp_path, fake_gpu, monkeypatch
):
    from tests.fake_nvml import install

    install(monkeypatch)
    db = str(tmp_path / "r.db")
    shape = ["--shape", "N=16,K=3,C=2,F=4"]
    args = ["baseline", *shape, "--observe", "power,energy,clocks", "--storage", db]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "(300 W, 0.6 J a run, 1980 MHz)" in result.output  # 300 W for 2 ms, made up
    (timing,) = {task.check.timing.observe for task in fake_gpu[-1].tasks[1:]}
    assert timing.power and timing.energy and timing.clocks
    run = ["run", "--family", "direct_naive", *shape, "--budget", "2", "--storage", db]
    assert runner.invoke(main, [*run, "--observe", "energy"]).exit_code == 0
    best = runner.invoke(main, ["best", "--format", "csv", "--storage", db])
    assert best.exit_code == 0, best.output
    rows = list(csv.DictReader(io.StringIO(best.output)))
    assert [r["baseline_energy_j"] for r in rows] == ["0.6"]
    assert float(rows[0]["energy_j"]) > 0  # ours, observed by run --observe energy
    # The people's table (markdown) shows both where either was observed, not otherwise.
    header = runner.invoke(main, ["best", "--storage", db]).output.splitlines()[0]
    assert header.split("|")[-3:-1] == [" energy_j ", " baseline_energy_j "]
    unobserved = str(tmp_path / "u.db")
    runner.invoke(main, ["baseline", *shape, "--storage", unobserved])
    runner.invoke(main, [*run[:-1], unobserved])
    assert "energy" not in runner.invoke(main, ["best", "--storage", unobserved]).output


def test_baseline_needs_shapes(runner, tmp_path):
    result = runner.invoke(main, ["baseline", "--storage", str(tmp_path / "r.db")])
    assert "name the shapes" in _one_line_error(result, 2)


def test_run_without_pytorch_says_so_once_and_goes_on(runner, tmp_path, monkeypatch):
    def factory(index=0):
        ev = SyntheticEvaluator(lambda d: 1.0)
        ev.cudnn_ms = None
        return ev

    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", factory)
    result = runner.invoke(
        main,
        [
            "run",
            "--family",
            "direct_naive",
            "--shape",
            "N=16,K=3,C=2,F=4",
            "--shape",
            "N=8,K=1,C=1,F=1",
            "--budget",
            "2",
            "--storage",
            str(tmp_path / "r.db"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("no cuDNN baseline") == 1
    assert "4 new evaluations" in result.output


def test_run_no_baseline_measures_nothing_extra(runner, tmp_path, fake_gpu):
    result = runner.invoke(
        main,
        [
            "run",
            "--family",
            "direct_naive",
            "--shape",
            "N=16,K=3,C=2,F=4",
            "--budget",
            "2",
            "--no-baseline",
            "--storage",
            str(tmp_path / "r.db"),
        ],
    )
    assert result.exit_code == 0, result.output
    # No ceiling, no library: only the two evaluations and their best measured twice more.
    assert fake_gpu[-1].tasks == [] and len(fake_gpu[-1].jobs) == 2 + 2


@pytest.mark.slow
def test_report_and_every_plot_kind_from_a_tuned_database(runner, tmp_path, fake_gpu):
    db = str(tmp_path / "r.db")
    tuned = runner.invoke(
        main,
        [
            "run",
            "--family",
            "direct_naive",
            "--shape",
            "N=16,K=3,C=2,F=4",
            "--budget",
            "3",
            "--storage",
            db,
        ],
    )
    assert tuned.exit_code == 0, tuned.output
    assert "speedup" in tuned.output  # the run's summary sets ours beside cuDNN
    for kind in ("gflops", "roofline", "speedup"):
        result = runner.invoke(
            main, ["plot", "--kind", kind, "--storage", db, "--output", str(tmp_path / kind)]
        )
        assert result.exit_code == 0, result.output
        assert (tmp_path / f"{kind}.png").stat().st_size > 1000
    report = runner.invoke(main, ["report", "--storage", db, "--output-dir", str(tmp_path)])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "REPORT.md").read_text()
    assert "Synthetic GPU" in text and "registered, no results stored" in text
    csv = runner.invoke(main, ["best", "--format", "csv", "--storage", db]).output
    header = csv.splitlines()[0].split(",")
    assert {"baseline_gflops", "speedup", "efficiency"} <= set(header)
    row = csv.splitlines()[1]
    assert "synthetic_algo" in row


def test_shapes_lists_the_gemm_and_conv3d_sets(runner):
    listing = runner.invoke(main, ["shapes"]).output
    assert "alexnet_fc: 8 shapes (gemm)" in listing and "conv3d: 3 shapes (conv3d)" in listing
    fc = runner.invoke(main, ["shapes", "alexnet_fc"]).output
    assert "M=1,N=4096,K=9216" in fc and "M=8192,N=8192,K=8192" in fc
    assert "D=256,R=128,Cc=128,Kd=5,Kr=5,Kc=5" in runner.invoke(main, ["shapes", "conv3d"]).output


def test_space_binds_a_gemm_shape(runner):
    result = runner.invoke(main, ["space", "sgemm", "--shape", "M=37,N=61,K=29", "--samples", "1"])
    assert result.exit_code == 0, result.output
    assert "sgemm M=37,N=61,K=29 on sm_90:" in result.output


@pytest.mark.slow
def test_run_and_best_for_gemm_beside_cublas(runner, tmp_path, fake_gpu):
    db = str(tmp_path / "r.db")
    args = ["run", "--family", "sgemm", "--family", "direct_naive", "--shape", "M=37,N=61,K=29"]
    args += ["--shape", "N=16,K=3,C=2,F=4", "--budget", "2", "--storage", db]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    # Each family meets the other kind's shape only to be skipped, with the reason.
    assert "skipping sgemm N=16,K=3,C=2,F=4: sgemm computes gemm problems, not conv2d" in (
        result.output
    )
    assert "skipping direct_naive M=37,N=61,K=29" in result.output
    assert "cuBLAS M=37,N=61,K=29" in result.output and "cuDNN N=16,K=3,C=2,F=4" in result.output
    assert "4 new evaluations" in result.output
    csv = runner.invoke(
        main, ["best", "--format", "csv", "--problem-kind", "gemm", "--storage", db]
    ).output
    header, row = csv.strip().splitlines()
    assert header.startswith("device,family,M,N,K,config,")
    assert row.startswith("Synthetic GPU,sgemm,37,61,29,")
    assert "cublas" in row and "synthetic_gemm" in row
    both = runner.invoke(main, ["best", "--format", "csv", "--storage", db]).output
    assert both.splitlines()[0].startswith("device,family,B,N,K,C,F,stride,M,config,")
    for kind in ("gflops", "speedup", "roofline"):
        plot = runner.invoke(
            main,
            ["plot", "--kind", kind, "--storage", db, "--output", str(tmp_path / kind)],
        )
        assert plot.exit_code == 0, plot.output
    svg = (tmp_path / "speedup.svg").read_text()
    assert "sgemm against cuBLAS" in svg and "M=37 N=61 K=29" in svg


def test_baseline_measures_cublas_for_gemm_and_names_kinds_without_one(runner, tmp_path, fake_gpu):
    db = str(tmp_path / "r.db")
    args = ["baseline", "--shape", "M=8,N=8,K=8", "--shape", "N=16,K=3,C=2,F=4"]
    args += ["--shape", "D=8,R=8,Cc=8,Kd=3,Kr=3,Kc=3", "--storage", db]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "1 cuBLAS and 1 cuDNN baselines measured" in result.output
    assert "conv3d shapes have no library baseline" in result.output
    from autotune.store import Store

    frame = Store(db).baselines()
    assert dict(zip(frame["library"], frame["kind"], strict=True)) == {
        "cublas": "gemm",
        "cudnn": "conv2d",
    }


def test_run_with_a_cache_dir_it_cannot_write_tunes_and_says_so(runner, tmp_path, fake_gpu):
    (tmp_path / "file").write_text("a file, not a directory")
    args = ["run", "--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2", "--budget", "2"]
    args += ["--no-baseline", "--storage", str(tmp_path / "r.db")]
    result = runner.invoke(main, [*args, "--cache-dir", str(tmp_path / "file" / "cubins")])
    assert result.exit_code == 0, result.output
    assert "autotune: cubins not cached (" in result.output
    assert "2 new evaluations" in result.output


def test_a_missing_driver_is_not_called_an_old_one() -> None:
    from autotune.gpu.evaluator import no_gpu_reason

    text = "CUDARuntimeError: cudaErrorInsufficientDriver: CUDA driver version is insufficient"
    assert no_gpu_reason(text, lambda: False).startswith("no NVIDIA driver found")
    assert no_gpu_reason(text, lambda: True) == text  # a driver is there: it is too old
    assert no_gpu_reason("no CUDA device found", lambda: False) == "no CUDA device found"


def test_best_shows_readable_columns_and_any_on_request(runner, tmp_path, fake_gpu):
    db = str(tmp_path / "r.db")
    args = ["run", "--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2", "--budget", "2"]
    assert runner.invoke(main, [*args, "--no-baseline", "--storage", db]).exit_code == 0

    md = runner.invoke(main, ["best", "--storage", db]).output.splitlines()
    assert [c.strip() for c in md[0].strip("|").split("|")] == [
        *("family", "shape", "config", "time_ms", "measurements", "gflops", "speedup"),
        "efficiency",
    ]
    assert max(len(line) for line in md) < 160  # all 26 columns: 359 here
    picked = runner.invoke(main, ["best", "--storage", db, "--columns", "shape,gflops"]).output
    assert picked.splitlines()[0].replace(" ", "") == "|shape|gflops|"
    every = runner.invoke(main, ["best", "--storage", db, "--columns", "all"]).output
    assert "registers" in every.splitlines()[0] and "baseline_gflops" in every.splitlines()[0]
    csv = runner.invoke(main, ["best", "--storage", db, "--format", "csv"]).output
    assert csv.splitlines()[0].startswith("device,family,B,N,K,C,F,stride,config,time_ms,gflops")
    csv = runner.invoke(main, ["best", "--storage", db, "--format", "csv", "--columns", "gflops"])
    assert csv.output.splitlines()[0] == "gflops"
    bad = runner.invoke(main, ["best", "--storage", db, "--columns", "shape,speed"])
    assert bad.exit_code == 2 and "unknown column(s) speed; the columns are device," in bad.output


def test_help_loads_neither_pandas_nor_sqlalchemy() -> None:
    # They took 0.8 s of the 1.2 s every `autotune --help` waited; commands import them when run.
    import subprocess
    import sys

    code = (
        "import sys; from click.testing import CliRunner; from autotune.cli.app import main; "
        "assert CliRunner().invoke(main, ['--help']).exit_code == 0; "
        "assert CliRunner().invoke(main, ['run', '--help']).exit_code == 0; "
        "print(sorted(m for m in ('pandas', 'sqlalchemy', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_run_says_when_studies_were_searched_before_a_tunable_existed(
    runner, tmp_path, fake_gpu, monkeypatch
):
    from types import MappingProxyType

    from autotune.families import FAMILIES
    from autotune.gpu.compiler import Compiler
    from autotune.model.problem import ConvProblem
    from autotune.model.records import Measurement
    from autotune.model.space import Config
    from autotune.store import Store

    family = FAMILIES["direct_naive"]  # as if FILTER_IN_CONST had come after this was stored
    monkeypatch.setattr(type(family), "later_tunables", MappingProxyType({"FILTER_IN_CONST": 0}))
    db = str(tmp_path / "r.db")
    store = Store(db)
    device_id = store.register_device(SyntheticEvaluator(None).device)
    run_id = store.start_run(device_id, "before FILTER_IN_CONST", {})
    problem = ConvProblem(N=29, K=5, C=7, F=9)
    old = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4})
    digest = Compiler().kernel_digest(family)
    m = Measurement.from_samples([1.0])
    store.record(run_id, device_id, "direct_naive", problem, old, m, problem.flops, digest)
    store.close()
    shape = ["--family", "direct_naive", "--shape", "N=29,K=5,C=7,F=9", "--no-baseline"]
    spent = runner.invoke(main, ["run", *shape, "--budget", "1", "--storage", db])
    assert spent.exit_code == 0, spent.output
    assert "1 studies were searched before FILTER_IN_CONST became tunable" in spent.output
    assert "raise --budget to search it" in spent.output
    # A budget past what is stored searches on, the tunable with it: nothing to say.
    more = runner.invoke(main, ["run", *shape, "--budget", "3", "--storage", db])
    assert more.exit_code == 0, more.output
    assert "became tunable" not in more.output

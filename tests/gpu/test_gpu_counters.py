"""On a CUDA device: a plan's counters (KernelPlan.counters) through the evaluator and the
runtime, with the hand-written kernels of tests/data/counters.cu. The evaluator zeroes them
before the checked run and refuses a plan whose runs leave them non-zero; the runtime keeps a
stream's counters apart from its workspace, which another plan's scratch overwrites."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from autotune.families import conv2d
from autotune.families.plan import KernelPlan, Launch, cdiv
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import Check, Job, TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.records import Status

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=3, min_time_s=0.0, max_repeats=5, max_time_s=0.5)
COUNTERS = Path(__file__).parents[1] / "data" / "counters.cu"
# 17,424 outputs: 137 blocks of 128 threads arrive at the counter.
PROBLEM = ConvProblem(N=33, K=3, C=4, F=8, B=2)
BLOCK = 128


def _counted_job(evaluator, kernel: str) -> Job:
    compiler = Compiler(arch=evaluator.device.arch)
    ref_plan = conv2d.reference_plan(PROBLEM)
    outputs = PROBLEM.B * PROBLEM.F * PROBLEM.N * PROBLEM.N
    launch = Launch(kernel, (cdiv(outputs, BLOCK), 1, 1), (BLOCK, 1, 1), ("x", "w", "y", "sk"))
    plan = KernelPlan(COUNTERS, ref_plan.defines, (launch,), counters=(("sk", 1),))
    ref = compiler.compile(ref_plan)
    check = Check(conv2d.buffers(PROBLEM), ref_plan, ref.cubin, ref.key, 1e-5, QUICK, seed=5)
    return Job(kernel, plan, compiler.compile(plan).cubin, check)


def test_a_plan_that_resets_its_counters_is_checked_and_timed(evaluator):
    # Its last output is written only where the counter started at zero: passing the check
    # says the evaluator zeroed it, and passing the counters' checks that the runs left it so.
    m = evaluator.evaluate(_counted_job(evaluator, "counted_and_reset"), timeout_s=60)
    assert m.status is Status.OK, m.error
    assert m.rel_error <= 1e-5 and m.time_ms > 0


def test_a_plan_that_never_resets_them_is_a_wrong_result(evaluator):
    m = evaluator.evaluate(_counted_job(evaluator, "counted_never_reset"), timeout_s=60)
    assert m.status is Status.WRONG_RESULT
    assert m.rel_error <= 1e-5  # its output is right: only its counters are wrong
    assert m.error == (
        "left its counters non-zero after the checked run (sk): a run must reset what it counts"
    )


def test_a_plan_that_resets_them_in_its_first_run_only_is_caught_after_the_timed_runs(evaluator):
    m = evaluator.evaluate(_counted_job(evaluator, "counted_reset_on_first_run"), timeout_s=60)
    assert m.status is Status.WRONG_RESULT
    assert "left its counters non-zero after the timed runs (sk)" in m.error, m.error


GRID = 97  # blocks of count_arrivals


def _entries(directory: Path, launcher: str) -> dict:
    """Hand-made runtime entries (runtime/plans.py's Entry) of counters.cu's kernels: one that
    scribbles all ones over 16 KiB of scratch, and two that count their blocks' arrivals on a
    counter, writing GRID into y[0] only where it started at zero; "counting" resets it,
    "keeping" never does. Their problem is a 1 x 1 output, for the tensor path's output."""
    import cupy as cp

    from autotune.gpu.launch import LAUNCHERS, device_arch, load_module
    from autotune.runtime.plans import Entry

    launch_op, _ = LAUNCHERS[launcher]
    device = cp.cuda.runtime.getDevice()
    words = 4096  # more than any counters region here holds
    scribble = Launch("scribble", (8, 1, 1), (256, 1, 1), ("junk", words))
    count = Launch("count_arrivals", (GRID, 1, 1), (64, 1, 1), ("y", "sk", 1))
    keep = Launch("count_arrivals", (GRID, 1, 1), (64, 1, 1), ("y", "sk", 0))
    plan = KernelPlan(COUNTERS, conv2d.reference_plan(PROBLEM).defines, (scribble, count))
    compiled = Compiler(arch=device_arch(device)).compile(plan)
    _, functions = load_module(compiled.cubin, plan.entries, str(directory), keep=False)
    choice = SimpleNamespace(problem=ConvProblem(N=1, K=3, C=1, F=1))

    def entry(launch: Launch, **fields) -> Entry:
        defaults = dict(scratch=(), workspace_bytes=0, counters=(), counter_bytes=0)
        return Entry(
            choice=choice,
            device=device,
            epilogue="",
            out_shape=(1, 1, 1, 1),
            ops=(launch_op(functions[launch.kernel], launch),),
            pad=None,
            fixed={},
            **(defaults | fields),
        )

    return {
        "scribbling": entry(scribble, scratch=(("junk", 0),), workspace_bytes=4 * words),
        "counting": entry(count, counters=(("sk", 0),), counter_bytes=4),
        "keeping": entry(keep, counters=(("sk", 0),), counter_bytes=4),
    }


def _runtime(directory: Path, launcher: str):
    from autotune.runtime.dispatch import Runtime

    return Runtime(str(directory / "none.db"), families=["implicit_gemm"], launcher=launcher)


@pytest.mark.parametrize("launcher", ["cupy", "driver"])
def test_the_runtime_keeps_a_streams_counters_apart_from_its_workspace(launcher, tmp_path):
    """Two plans called in turn on one stream, one scribbling over its scratch, the other
    counting: were the counters in the workspace, the count would start from all ones and
    never see its last block arrive."""
    import cupy as cp

    entries = _entries(tmp_path, launcher)
    rt = _runtime(tmp_path, launcher)
    stream = cp.cuda.Stream(non_blocking=True)
    y = cp.empty(1, dtype=cp.float32)
    with stream:
        for _ in range(3):
            rt.launch(entries["scribbling"], 0, 0, 0, stream.ptr)
            y.fill(-1.0)
            rt.launch(entries["counting"], 0, 0, y.data.ptr, stream.ptr)
            stream.synchronize()
            assert float(y[0]) == GRID  # its counter started at zero, and is left so
        # Counters of the caller's (a CUDA-graph capture's): used, the stream's left alone.
        own = cp.zeros(1, dtype=cp.uint32)
        y.fill(-1.0)
        rt.launch(entries["keeping"], 0, 0, y.data.ptr, stream.ptr, counters=own.data.ptr)
        stream.synchronize()
        assert (float(y[0]), int(own[0])) == (GRID, GRID)
        y.fill(-1.0)
        rt.launch(entries["counting"], 0, 0, y.data.ptr, stream.ptr)
        stream.synchronize()
        assert float(y[0]) == GRID


def test_a_captured_tensor_call_zeroes_its_counters_in_the_graph(tmp_path):
    """A plan that never resets its counter, captured: every replay still finds it zero (the
    graph holds its memset), where the stream's region would hold what the last replay left."""
    torch = pytest.importorskip("torch")
    from autotune.runtime.torch_tensors import call_key

    rt = _runtime(tmp_path, "driver")
    x = torch.rand(1, 1, 3, 3, device="cuda")
    w = torch.rand(1, 1, 3, 3, device="cuda")
    rt.entries[call_key(x, w, 1, 0, "")] = _entries(tmp_path, "driver")["keeping"]
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        y = rt.conv2d(x, w)
    assert tuple(y.shape) == (1, 1, 1, 1)
    for _ in range(3):
        y.fill_(-1.0)
        graph.replay()
        torch.cuda.synchronize()
        assert y.item() == GRID

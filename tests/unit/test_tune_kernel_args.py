"""tune_kernel's arguments: each of Kernel Tuner's that is supported maps onto ours with its
meaning, and each that is not is refused by name (no GPU, no compiler)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.gpu.given import argument_arrays, read_arguments, takes_atol, write_arguments
from autotune.kt.api import tune_kernel
from autotune.kt.arguments import UNSUPPORTED, TuneKernelError, check_request
from autotune.kt.kernel import GivenKernel, GivenKernelError
from autotune.kt.space import bind_space, evaluate_metric, fixed_sizes, signature
from autotune.kt.strategies import budget
from autotune.model.problem import KernelProblem
from autotune.model.space import Config, DeviceLimits

SOURCE = "__global__ void k(float *y, const float *x, int n) { }\n"


def args(**extra):
    x = np.arange(100, dtype=np.float32)
    base = {
        "kernel_name": "k",
        "kernel_source": SOURCE,
        "problem_size": 100,
        "arguments": [np.zeros_like(x), x, np.int32(100)],
        "tune_params": {"block_size_x": [32, 64, 128]},
    }
    return {**base, **extra}


def family(request, space=None) -> GivenKernel:
    space = space or bind_space(request, DeviceLimits())
    return GivenKernel(
        request.kernel_name,
        __import__("pathlib").Path("/tmp/k.cu"),
        space.space,
        problem_size=request.problem_size,
        grid_div=request.grid_div,
        block_size_names=request.block_size_names,
        defines=request.defines,
        smem_size=request.smem_size,
        cmem_symbols=tuple(request.cmem_args),
        arguments=len(request.arguments),
    )


def plan(request, **config):
    return family(request).plan(KernelProblem(1), Config.of(config))


# -- supported arguments ------------------------------------------------------------------------


def test_default_launch_is_kernel_tuners():
    request = check_request(args(problem_size=(1000, 3)))
    p = plan(request, block_size_x=128)
    launch = p.launches[0]
    assert launch.kernel == "k"
    assert launch.block == (128, 1, 1)
    assert launch.grid == (8, 3, 1)  # ceil(1000 / 128); y divided by block_size_y (1)
    assert launch.args == ("arg0", "arg1", "arg2")
    defines = dict(p.defines)
    assert defines["block_size_x"] == 128 and defines["block_size_y"] == 1
    assert defines["grid_size_x"] == 8 and defines["kernel_tuner"] == 1


def test_untuned_block_dimension_is_256():
    request = check_request(args(tune_params={"tile": [1, 2]}))
    assert plan(request, tile=2).launches[0].block == (256, 1, 1)


def test_problem_size_may_name_tunables():
    request = check_request(args(problem_size=("n_blocks * 64",), tune_params={"n_blocks": [2, 4]}))
    p = plan(request, n_blocks=4)
    # Kernel Tuner divides by block_size_x only when it is tuned; here it is not: 256 / 1.
    assert p.launches[0].grid == (256, 1, 1)
    assert fixed_sizes(request) == (0, 1, 1)
    assert "problem_size=('n_blocks*64',)" in signature(request)


def test_grid_divisors_int_text_list_and_function():
    tp = {"block_size_x": [32], "block_size_y": [4], "tile": [2]}
    request = check_request(
        args(
            problem_size=(1024, 1024, 64),
            tune_params=tp,
            grid_div_x=["block_size_x", "tile"],
            grid_div_y="block_size_y * 2",
            grid_div_z=lambda p: 8,
        )
    )
    assert plan(request, block_size_x=32, block_size_y=4, tile=2).launches[0].grid == (16, 128, 8)
    request = check_request(args(problem_size=(1024, 1024), tune_params=tp, grid_div_y=16))
    assert plan(request, block_size_x=32, block_size_y=4, tile=2).launches[0].grid == (32, 64, 1)


def test_block_size_names():
    tp = {"bx": [64], "by": [2]}
    request = check_request(args(tune_params=tp, block_size_names=["bx", "by"]))
    p = plan(request, bx=64, by=2)
    assert p.launches[0].block == (64, 2, 1)
    assert dict(p.defines)["block_size_z"] == 1  # the names not given keep the default ones
    upper = check_request(args(tune_params={"BLOCK_SIZE_X": [64]}))
    assert upper.block_size_names == ("BLOCK_SIZE_X",)
    assert plan(upper, BLOCK_SIZE_X=64).launches[0].block[0] == 64


def test_restrictions_text_and_functions():
    tp = {"block_size_x": [32, 64, 128], "tile": [1, 2, 4]}
    limits = DeviceLimits()
    text = bind_space(
        check_request(args(tune_params=tp, restrictions=["block_size_x * tile <= 128"])), limits
    )
    assert len(text) == 6
    whole = bind_space(
        check_request(args(tune_params=tp, restrictions=lambda p: p["tile"] != 2)), limits
    )
    assert len(whole) == 6 and all(c["tile"] != 2 for c in whole)
    listed = bind_space(
        check_request(args(tune_params=tp, restrictions=[lambda bx, tile: bx > 32, "tile > 1"])),
        limits,
    )
    assert {(c["block_size_x"], c["tile"]) for c in listed} == {
        (64, 2),
        (64, 4),
        (128, 2),
        (128, 4),
    }
    named = bind_space(
        check_request(args(tune_params=tp, restrictions=[(lambda t: t == 4, ["tile"])])), limits
    )
    assert len(named) == 3
    with pytest.raises(TuneKernelError, match="restrictions"):
        bind_space(check_request(args(tune_params=tp, restrictions=["nope > 1"])), limits)


def test_threads_per_block_are_limited_like_kernel_tuners():
    tp = {"block_size_x": [512, 1024], "block_size_y": [1, 2]}
    assert len(bind_space(check_request(args(tune_params=tp)), DeviceLimits())) == 3


def test_arguments_answer_and_signature(tmp_path):
    request = check_request(args(answer=[np.ones(100, np.float32), None, None]))
    text = signature(request)
    assert text.startswith("source=") and text.endswith(",float32[100],float32[100],int32=100")
    # Another kernel text, or other compiler options, is another study.
    assert signature(check_request(args(kernel_source=SOURCE + "\n"))) != text
    assert signature(check_request(args(compiler_options=["-use_fast_math"]))) != text
    path, name = write_arguments(tmp_path, argument_arrays(request.arguments, request.answer, {}))
    saved = read_arguments(path)
    assert set(saved) == {"arg0", "arg1", "arg2", "answer0"}
    assert saved["arg2"][()] == 100 and saved["arg2"].dtype == np.int32
    assert isinstance(saved["arg0"], np.memmap)  # mapped, not read
    # Each call its own directory (the call removes it at its end), named apart.
    again, other = write_arguments(tmp_path, argument_arrays(request.arguments, request.answer, {}))
    assert again != path and other != name and path.name == f"arguments-{name}"


def test_cmem_and_smem_args():
    request = check_request(
        args(cmem_args={"d_filter": np.ones(9, np.float32)}, smem_args={"size": "block_size_x * 4"})
    )
    p = plan(request, block_size_x=64)
    assert p.launches[0].smem_bytes == 256
    assert p.constants == (("d_filter", "cmem:d_filter"),)
    assert "cmem d_filter=float32[9]" in signature(request) and "smem=" in signature(request)
    fixed = check_request(args(smem_args={"size": 1024}))
    assert plan(fixed, block_size_x=32).launches[0].smem_bytes == 1024


def test_defines_replace_the_default_ones():
    request = check_request(
        args(defines={"BLOCK": "block_size_x", "TWICE": lambda p: 2 * p["block_size_x"], "N": 7})
    )
    assert dict(plan(request, block_size_x=64).defines) == {"BLOCK": "64", "TWICE": 128, "N": 7}


@pytest.mark.parametrize("lang", [None, "CUDA", "cuda", "cupy", "CuPy", "nvcuda", "NVCUDA"])
def test_every_cuda_spelling(lang):
    assert check_request(args(lang=lang)).kernel_name == "k"


def test_strategies_and_their_options():
    assert check_request(args()).strategy == "brute_force"
    assert check_request(args(strategy="random_sample")).strategy == "random"
    assert check_request(args(strategy="greedy_mls")).strategy == "local"
    assert check_request(args(strategy="tpe")).strategy == "tpe"
    r = check_request(args(strategy="random_sample", strategy_options={"max_fevals": 5}))
    assert budget(r, 100) == 5
    assert budget(check_request(args(strategy="random_sample")), 100) == 10  # fraction 0.1
    f = check_request(args(strategy="random_sample", strategy_options={"fraction": 0.25}))
    assert budget(f, 100) == 25
    t = check_request(args(strategy_options={"time_limit": 30}))
    assert t.time_limit_s == 30.0 and budget(t, 100) is None


def test_a_cache_file_that_cannot_be_written_is_refused_before_the_gpu(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "taken.json").mkdir()
    with pytest.raises(TuneKernelError, match="notes.txt is not a directory"):
        check_request(args(cache=str(tmp_path / "notes.txt" / "deeper" / "k_cache")))
    with pytest.raises(TuneKernelError, match="taken.json is not a regular file"):
        check_request(args(cache=str(tmp_path / "taken")))
    # Missing directories are fine (made when the file is), and checking makes nothing.
    assert check_request(args(cache=str(tmp_path / "new" / "k"))).cache.name == "k.json"
    assert not (tmp_path / "new").exists()


def test_iterations_compiler_options_cache_objective_metrics_seed():
    r = check_request(
        args(
            iterations=20,
            compiler_options=["-use_fast_math"],
            cache="out/k_cache",
            objective="time",
            metrics={"GB/s": "1200 / time"},
            seed=3,
            device=0,
            verbose=True,
            quiet=True,
        )
    )
    assert r.iterations == 20 and r.compiler_options == ("-use_fast_math",)
    assert str(r.cache) == "out/k_cache.json"
    assert evaluate_metric(r.metrics["GB/s"], {"time": 2.0}) == 600.0
    assert r.seed == 3


def test_kernel_source_as_a_file(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(SOURCE)
    for given in (str(path), path):
        request = check_request(args(kernel_source=given))
        assert request.source_text == SOURCE and request.include_dir == tmp_path


def verify_outputs(answer, result_host, atol=None):
    return True


def test_any_verify_function_is_taken_it_runs_in_the_callers_process():
    assert check_request(args(verify=verify_outputs)).verify is verify_outputs
    assert takes_atol(verify_outputs) and not takes_atol(lambda a, b: True)
    nested = lambda a, b: True  # noqa: E731 - a lambda cannot be pickled, and needs not be
    assert check_request(args(verify=nested)).verify is nested
    with pytest.raises(TuneKernelError, match="verify must be a function"):
        check_request(args(verify=5))


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_each_unsupported_argument_is_refused_by_name(name):
    with pytest.raises(TuneKernelError, match=f"tune_kernel: {name} is not supported"):
        tune_kernel(**args(**{name: "x"}), evaluator=object())


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"lang": "OpenCL"}, "lang='OpenCL' is not supported"),
        ({"lang": "HIP"}, "lang='HIP'"),
        ({"platform": 1}, "platform"),
        ({"objective": "GFLOP/s"}, "objective='GFLOP/s'"),
        ({"objective_higher_is_better": True}, "objective_higher_is_better"),
        ({"strategy": "genetic_algorithm"}, "strategy 'genetic_algorithm' is not supported"),
        ({"strategy_options": {"popsize": 4}}, "'popsize' not supported"),
        ({"strategy_options": {"max_fevals": 0}}, "max_fevals"),
        ({"kernel_name": "k<float"}, "template's instance"),
        ({"kernel_name": "k<float>; int x"}, "template's instance"),
        ({"kernel_source": ["a.cu", "b.cu"]}, "list of files"),
        ({"arguments": [np.zeros(3), 5]}, r"arguments\[1\] is a int"),
        ({"answer": [None]}, "as long as arguments"),
        ({"answer": [np.zeros(7, np.float32), None, None]}, "7 elements"),
        ({"answer": [np.zeros(100, np.int32), None, None]}, "cannot be cast"),
        ({"tune_params": {}}, "tune_params"),
        ({"tune_params": {"block_size_x": [1, 1]}}, "repeats"),
        ({"problem_size": (1, 2, 3, 4)}, "problem_size"),
        ({"problem_size": ("a ** 2",)}, r"\*\*"),
        ({"smem_args": {"bytes": 4}}, "smem_args"),
        ({"cmem_args": {"c": [1.0]}}, "cmem_args"),
        ({"iterations": 0}, "iterations"),
        ({"block_size_names": ["a", "b", "c", "d"]}, "block_size_names"),
        ({"device": -1}, "device"),
    ],
)
def test_bad_or_unsupported_values_are_refused(extra, match):
    with pytest.raises(TuneKernelError, match=match):
        tune_kernel(**args(**extra), evaluator=object())


def test_launch_values_that_cannot_be_computed():
    request = check_request(args(grid_div_x="block_size_x - 32"))
    with pytest.raises(GivenKernelError, match="grid_div_x is 0"):
        plan(request, block_size_x=32)


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        tune_kernel(**args(), texture=1)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"kernel_source": "kernels/x.cu"}, "file not found"),  # a mistyped path, not CUDA text
        ({"kernel_source": "my_kernel.cpp"}, "file not found"),
        ({"seed": "abc"}, "seed"),
        ({"seed": -1}, "seed"),
        ({"seed": 2**64}, "seed"),
        ({"strategy_options": {"time_limit": float("nan")}}, "time_limit"),
        ({"strategy_options": {"time_limit": float("inf")}}, "time_limit"),
        ({"restrictions": 5}, "restrictions"),
        ({"restrictions": ["x > 1", 5]}, "restrictions"),
        ({"atol": "small"}, "atol"),
        ({"atol": float("nan")}, "atol"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_argument_before_any_gpu_work(bad, named):
    with pytest.raises(TuneKernelError) as err:
        check_request(args(**bad))
    assert named in str(err.value) and "\n" not in str(err.value)


# -- forms Kernel Tuner's examples use (issue 33) ------------------------------------------------


def test_a_code_generator_renders_each_configuration_s_source(tmp_path) -> None:
    def generate(params):
        return SOURCE.replace("{ }", f"{{ int b = {params['block_size_x']}; }}")

    request = check_request(args(kernel_source=generate))
    assert request.render is generate
    assert "int b = 32;" in request.source_text  # the first value of every tunable keys the study
    given = GivenKernel(
        "k",
        tmp_path / "k.cu",
        bind_space(request, DeviceLimits()).space,
        problem_size=100,
        render=request.render,
    )
    path = given.plan(None, Config.of({"block_size_x": 64})).source
    text = path.read_text()
    assert "int b = 64;" in text and text.startswith('extern "C"')
    assert path.parent == tmp_path


def test_a_generator_that_fails_is_one_line() -> None:
    with pytest.raises(TuneKernelError, match="generator raised KeyError"):
        check_request(args(kernel_source=lambda p: p["missing"]))


def test_loop_unroll_factors_are_constants_or_drop_their_pragma(tmp_path) -> None:
    source = tmp_path / "u.cu"
    source.write_text(
        "__global__ void k() {\n  #pragma unroll loop_unroll_factor_0\n  for(;;);\n}\n"
    )
    request = check_request(
        args(
            kernel_source=str(source),
            tune_params={"block_size_x": [32], "loop_unroll_factor_0": [0, 4]},
        )
    )
    space = bind_space(request, DeviceLimits())
    given = GivenKernel("k", source, space.space, problem_size=100)
    four = given.plan(None, Config.of({"block_size_x": 32, "loop_unroll_factor_0": 4}))
    assert "constexpr int loop_unroll_factor_0 = 4;" in four.source.read_text()
    assert "loop_unroll_factor_0" not in dict(four.defines)  # a constant, not a macro
    zero = given.plan(None, Config.of({"block_size_x": 32, "loop_unroll_factor_0": 0}))
    assert "#pragma unroll" not in zero.source.read_text()


class FakeCupyArray:
    """What CuPy's arrays offer that the mapping reads: the CUDA array interface and get()."""

    __cuda_array_interface__ = {}

    def __init__(self, host):
        self.host = host

    def get(self):
        return self.host


def test_cupy_arrays_come_to_the_host_as_numpy_arrays() -> None:
    x = np.arange(100, dtype=np.float32)
    request = check_request(
        args(
            arguments=[FakeCupyArray(np.zeros_like(x)), FakeCupyArray(x), np.int32(100)],
            answer=[FakeCupyArray(2 * x), None, None],
        )
    )
    assert all(isinstance(a, np.ndarray) for a in request.arguments[:2])
    np.testing.assert_array_equal(request.answer[0], 2 * x)


def test_a_kernel_tuner_strategy_module_is_taken_by_its_name() -> None:
    import types

    minimize = types.ModuleType("kernel_tuner.strategies.minimize")
    assert check_request(args(strategy=minimize)).strategy == "local"
    random_sample = types.ModuleType("kernel_tuner.strategies.random_sample")
    request = check_request(args(strategy=random_sample, strategy_options={"max_fevals": 2}))
    assert request.strategy == "random" and request.budget == 2


def test_a_verify_of_the_user_s_reads_any_answer_shape() -> None:
    x = np.arange(100, dtype=np.float32)
    answer = [np.float32(x.sum()), None, None]  # a total, checked against partial sums
    with pytest.raises(TuneKernelError, match="answer\\[0\\] has 1 elements"):
        check_request(args(answer=answer))
    request = check_request(args(answer=answer, verify=lambda a, b, atol=None: True))
    assert request.answer[0] == x.sum()


# -- timing ---------------------------------------------------------------------------------------


def test_iterations_is_the_number_of_samples_as_in_kernel_tuner():
    from autotune.kt.study import timing_policy

    policy = timing_policy(check_request(args(iterations=20)))
    assert policy.first_batch(None) == 20
    # Protocol 2 would take more samples for a spread this wide and a wall time this short.
    spread_out = [1.0, 2.0, 3.0, 4.0] * 5
    assert policy.next_batch(spread_out, spent_s=0.001, best_ms=None) == 0
    assert policy.next_batch(spread_out[:19], spent_s=0.001, best_ms=None) == 1
    # The early stop still ends a slow candidate; another objective times every one in full.
    assert policy.early_stop is not None
    metric = args(
        metrics={"GB/s": lambda p: 1.0}, objective="GB/s", objective_higher_is_better=True
    )
    by_metric = timing_policy(check_request(metric))
    assert by_metric.early_stop is None and by_metric.first_batch(1.0) == 7


def test_with_observers_the_samples_last_long_enough_to_be_observed():
    from autotune.kt.study import timing_policy
    from autotune.model.observe import Observe

    request = check_request(args(iterations=5))
    request.observe = Observe(clocks=True)
    policy = timing_policy(request)
    assert policy.min_time_s > 0 and policy.observe == request.observe
    assert policy.next_batch([1.0] * 5, spent_s=0.001, best_ms=None) > 0

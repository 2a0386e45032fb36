"""A kernel given through tune_kernel: Kernel Tuner's launch conventions as a family.

Kernel Tuner derives the launch of a configuration from the tunables: the block from the block
size names (256, 1, 1 for those not tuned), the grid from the problem size divided by the grid
divisors (by default the block size of that dimension), and the source gets every tunable, the
block and grid sizes and `kernel_tuner` as preprocessor defines (or the user's `defines` only).
Values that Kernel Tuner evaluates as Python text (problem size, grid divisors, shared memory
size, defines) are read here by the whitelisted expression evaluator, never `eval`.

Two of Kernel Tuner's forms change the source text per configuration, so such a configuration
compiles a file of its own (named by the digest of its text): a code generator given as the
kernel source (a function of the tunables' dict, such as a Jinja template's render), and
tunables named loop_unroll_factor*, which become `constexpr int` (a `#pragma unroll` needs a
constant, not a macro), or, at 0, remove their `#pragma unroll` line (no unroll hint at all).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from autotune.families.base import Family
from autotune.families.plan import Buffers, KernelPlan, Launch
from autotune.gpu.compiler import is_name_expression
from autotune.gpu.given import argument_names, cmem_buffer, option_buffer
from autotune.model.expression import Expression, SpaceError
from autotune.model.problem import KernelProblem
from autotune.model.space import Config, SearchSpace, Value

DEFAULT_BLOCK_SIZE_NAMES = ("block_size_x", "block_size_y", "block_size_z")
DEFAULT_BLOCK = (256, 1, 1)  # Kernel Tuner's block size for a dimension that is not tuned
GRID_NAMES = ("grid_size_x", "grid_size_y", "grid_size_z")
UNROLL = "loop_unroll_factor"  # Kernel Tuner's tunables for `#pragma unroll <name>` in CUDA

# What Kernel Tuner accepts where it evaluates text: an int, a string expression of the
# tunables, a function of the tunables' dict, or (grid divisors) a list whose product is taken.
Spec = int | str | Callable[[dict], Any] | Sequence[Any] | None


class GivenKernelError(ValueError):
    """A launch value of a given kernel that cannot be computed (one line, naming the argument)."""


class GivenKernel(Family):
    """One kernel of a user's, tuned under Kernel Tuner's conventions (see the module's note).
    Checking is the given answer's (gpu/given.py), not a float64 reference of ours."""

    problem_type = KernelProblem
    layout = "the kernel's own arguments"
    paper = "tune_kernel (Kernel Tuner's interface)"
    reference_sources = ()  # checked against the caller's answer, not a kernel of ours

    def __init__(
        self,
        name: str,
        source: Path,
        space: SearchSpace,
        *,
        problem_size: Spec | Sequence[Spec],
        grid_div: tuple[Spec, Spec, Spec] = (None, None, None),
        block_size_names: Sequence[str] = DEFAULT_BLOCK_SIZE_NAMES,
        defines: Mapping[str, Any] | None = None,
        smem_size: Spec = None,
        cmem_symbols: Sequence[str] = (),
        arguments: int = 0,
        tolerance: float = 1e-6,
        render: Callable[[dict], str] | None = None,
        options: Mapping[int, Callable[[Mapping[str, Value]], int]] | None = None,
    ) -> None:
        self.name = name
        self.description = f"{name}, given through tune_kernel"
        self.directory = source.parent
        self._source = source
        self.space = space
        self.problem_size = problem_size
        self.grid_div = grid_div
        self.block_size_names = (
            tuple(block_size_names) + DEFAULT_BLOCK_SIZE_NAMES[len(block_size_names) :]
        )
        self.defines = defines
        self.smem_size = smem_size
        self.cmem_symbols = tuple(cmem_symbols)
        self.arguments = argument_names(arguments)
        self.tolerance = tolerance  # atol, as Kernel Tuner reads it
        self.render = render  # a code generator of the user's, called in this process
        # Tunable arguments (Kernel Tuner's): by position, the option a configuration selects.
        self.options = dict(options or {})

    @property
    def source_path(self) -> Path:
        return self._source

    def load_space(self) -> SearchSpace:
        return self.space

    # -- Kernel Tuner's launch geometry --------------------------------------------------------

    def block(self, params: Mapping[str, Value]) -> tuple[int, int, int]:
        return tuple(  # type: ignore[return-value]
            _whole(params.get(name, default), f"block size {name}")
            for name, default in zip(self.block_size_names, DEFAULT_BLOCK, strict=True)
        )

    def sizes(self, params: Mapping[str, Value]) -> tuple[int, int, int]:
        """The problem size at these tunables (Kernel Tuner's current problem size)."""
        given = self.problem_size
        if callable(given):
            given = given(dict(params))
        if isinstance(given, int | str):
            given = (given,)
        if len(given) > 3:
            raise GivenKernelError(f"problem_size has {len(given)} dimensions; at most 3")
        sizes = [1, 1, 1]
        for i, value in enumerate(given):
            sizes[i] = evaluate(value, params, f"problem_size[{i}]")
        return sizes[0], sizes[1], sizes[2]

    def grid(self, params: Mapping[str, Value]) -> tuple[int, int, int]:
        sizes = self.sizes(params)
        grid = []
        for i, divisor in enumerate(self.grid_div):
            name = ("grid_div_x", "grid_div_y", "grid_div_z")[i]
            if divisor is None:
                by = _whole(params.get(self.block_size_names[i], 1), name)
            else:
                by = _divisor(divisor, params, name)
            if by < 1:
                raise GivenKernelError(f"{name} is {by} at {_params_text(params)}; it must be >= 1")
            grid.append(max(1, -(-sizes[i] // by)))
        return grid[0], grid[1], grid[2]

    def source_defines(
        self, params: Mapping[str, Value], grid: tuple[int, ...], block: tuple[int, ...]
    ) -> tuple[tuple[str, Value], ...]:
        if self.defines is None:
            values: dict[str, Value] = dict(zip(GRID_NAMES, grid, strict=True))
            values.update(zip(self.block_size_names, block, strict=True))
            values.update((k, v) for k, v in params.items() if UNROLL not in k)
            values["kernel_tuner"] = 1
            return tuple(values.items())
        out = []
        for name, value in self.defines.items():
            if callable(value):
                value = value(dict(params))
            elif isinstance(value, str):
                value = substitute(value, params)
            out.append((name, value if isinstance(value, int | float | str) else str(value)))
        return tuple(out)

    def plan(self, problem: KernelProblem, config: Config) -> KernelPlan:
        params = config.as_dict()
        block, grid = self.block(params), self.grid(params)
        smem = 0 if self.smem_size is None else evaluate(self.smem_size, params, "smem_args size")
        launch = Launch(self.name, grid, block, self.launch_arguments(params), smem_bytes=smem)
        constants = tuple((s, cmem_buffer(s)) for s in self.cmem_symbols)
        defines = self.source_defines(params, grid, block)
        return KernelPlan(self.config_source(params), defines, (launch,), constants=constants)

    def launch_arguments(self, params: Mapping[str, Value]) -> tuple[str, ...]:
        """The buffers launched with: each argument's, a Tunable's option at these tunables."""
        names = list(self.arguments)
        for i, select in self.options.items():
            try:
                names[i] = option_buffer(i, select(params))
            except (KeyError, SpaceError) as err:
                raise GivenKernelError(
                    f"arguments[{i}] at {_params_text(params)}: {str(err).strip(chr(34))}"
                ) from None
        return tuple(names)

    def config_source(self, params: Mapping[str, Value]) -> Path:
        """The file this configuration compiles: the given one, or, with a code generator or
        loop_unroll_factor tunables, one of its own (see the module's note)."""
        unroll = {k: v for k, v in params.items() if UNROLL in k}
        if self.render is None and not unroll:
            return self._source
        text = self._source.read_text() if self.render is None else self.render(dict(params))
        if not isinstance(text, str):
            raise GivenKernelError("the kernel source generator did not return a string")
        prefix = ""
        for name, value in unroll.items():
            if str(value) == "0":
                text = re.sub(rf"\n\s*#pragma\s+unroll\s+{re.escape(name)}\b", "\n", text)
            else:
                prefix += f"constexpr int {name} = {value};\n"
        return write_source(self.directory, self.name, prefix + with_c_linkage(text, self.name))

    def buffers(self, problem: KernelProblem) -> Buffers:
        raise NotImplementedError(f"{self.name}: its buffers are the arguments given")

    def reference_plan(self, problem: KernelProblem) -> KernelPlan:
        raise NotImplementedError(f"{self.name}: it is checked against the answer given")


def with_c_linkage(text: str, kernel_name: str) -> str:
    """The kernel's text with C linkage (as Kernel Tuner's CUDA backends compile it, so that the
    entry keeps its name), unless it declares its own or the kernel is a template's instance
    ("vector_add<float_type>"): a template cannot have C linkage, and NVRTC names its instance
    (compiler.py's name expressions)."""
    if 'extern "C"' in text or is_name_expression(kernel_name):
        return text
    return 'extern "C" {\n' + text + "\n}\n"


def write_source(directory: Path, name: str, text: str) -> Path:
    """`text` saved under its digest (for NVRTC and the cubin cache); written once. A templated
    kernel's name is kept to its word characters in the file's name."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = directory / f"{re.sub(r'[^A-Za-z0-9_]+', '_', name).strip('_')}-{digest}.cu"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{id(text)}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def substitute(text: str, params: Mapping[str, Value]) -> str:
    """Kernel Tuner's textual replacement of tunable names by their values in a define."""
    for name, value in params.items():
        text = re.sub(rf"\b{re.escape(name)}\b", str(value), text)
    return text


def evaluate(value: Any, params: Mapping[str, Value], what: str) -> int:
    """An int, a string expression of the tunables, or a function of their dict, as an int."""
    if callable(value):
        value = value(dict(params))
    if isinstance(value, str):
        try:
            value = Expression(value)(dict(params))
        except SpaceError as err:
            raise GivenKernelError(f"{what}: {err}".replace("constraint ", "")) from None
    return _whole(value, what)


def _divisor(divisor: Any, params: Mapping[str, Value], what: str) -> int:
    if isinstance(divisor, list | tuple):
        product = 1
        for part in divisor:
            product *= _divisor(part, params, what)
        return product
    return evaluate(divisor, params, what)


def _whole(value: Any, what: str) -> int:
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GivenKernelError(f"{what} is {value!r}, not a number")
    return int(value)  # Kernel Tuner's int(eval(...)): a fraction is cut


def _params_text(params: Mapping[str, Value]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


__all__ = [
    "DEFAULT_BLOCK_SIZE_NAMES",
    "GivenKernel",
    "GivenKernelError",
    "evaluate",
    "substitute",
    "with_c_linkage",
    "write_source",
]

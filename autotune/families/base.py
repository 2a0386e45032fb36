"""The kernel family contract: what is tuned, how it is launched and how it is checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune import KERNELS_DIR, SPACES_DIR
from autotune.problem import ConvProblem
from autotune.space import Config, SearchSpace, Value

Arg = str | int  # a buffer name, or an int passed by value as a 32-bit integer


@dataclass(frozen=True, slots=True)
class Launch:
    kernel: str  # extern "C" entry name
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Arg, ...]
    smem_bytes: int = 0  # dynamic shared memory

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True, slots=True)
class KernelPlan:
    """One compile unit and the launches that make up one timed run of it.

    `constants` copy a buffer into a __constant__ symbol before timing (filters that are
    static weights). Buffers named in args are the problem's inputs and outputs.
    """

    source: Path
    defines: tuple[tuple[str, Value], ...]
    launches: tuple[Launch, ...]
    constants: tuple[tuple[str, str], ...] = ()

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(launch.kernel for launch in self.launches))


@dataclass(frozen=True, slots=True)
class Buffers:
    """FP32 device buffers of a problem: inputs get fresh random values, outputs are checked."""

    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    outputs: tuple[tuple[str, tuple[int, ...]], ...]


class UnsupportedProblem(ValueError):
    """A problem this family cannot compute (e.g. C != 1 for a C = 1 family)."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Family:
    """Base of every kernel family. A family is three files sharing its name:
    kernels/<name>.cu, search_spaces/<name>.toml and autotune/families/<name>.py."""

    name: str = ""
    description: str = ""
    paper: str = ""
    problem_type: type = ConvProblem
    layout: str = "NCHW input, FCKK filters, NFHW output"
    precision: str = "fp32"
    tolerance: float = 1e-5
    default_shape_set: str = "general"

    @property
    def source_path(self) -> Path:
        return KERNELS_DIR / f"{self.name}.cu"

    @property
    def space_path(self) -> Path:
        return SPACES_DIR / f"{self.name}.toml"

    def load_space(self) -> SearchSpace:
        return SearchSpace.from_toml(self.space_path)

    def check(self, problem: ConvProblem) -> None:
        """Raise UnsupportedProblem when this family cannot compute `problem`."""
        if not isinstance(problem, self.problem_type):
            raise UnsupportedProblem(
                f"{self.name} computes {self.problem_type.__name__}, not {type(problem).__name__}"
            )

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        raise NotImplementedError

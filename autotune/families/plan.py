"""Launch plans: what a family hands the compiler and the evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autotune.space import Value

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


def cdiv(a: int, b: int) -> int:
    return -(-a // b)

"""The kernel family contract: what is tuned, how it is launched and how it is checked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from autotune.families import conv2d
from autotune.families.digest import BUILD_OPTIONS, kernel_digest
from autotune.families.files import INCLUDE_DIR, KERNEL_DIR, SPACE_DIR
from autotune.families.plan import Arg, Buffers, KernelPlan, Launch, cdiv
from autotune.model.problem import ConvProblem
from autotune.model.space import Config, SearchSpace, Value

__all__ = [
    "INCLUDE_DIR",
    "Arg",
    "Buffers",
    "Family",
    "KernelPlan",
    "Launch",
    "UnsupportedProblem",
    "cdiv",
]


class UnsupportedProblem(ValueError):
    """A problem this family cannot compute (e.g. C != 1 for a C = 1 family)."""


INT32_MAX = 2**31 - 1  # the largest element offset a kernel's 32-bit integers reach


class Family:
    """Base of every kernel family. A family is files sharing its name: for the built-in ones
    kernels/<name>.cu, search_spaces/<name>.toml and the module autotune/families/<name>.py; for
    a user's, <name>.cu and <name>.toml in one kernel directory."""

    name: str = ""
    description: str = ""
    paper: str = ""
    problem_type: type = ConvProblem
    layout: str = "NCHW input, FCKK filters, NFHW output"
    precision: str = "fp32"
    # The problem dtypes and layouts the kernels compute (model/precision.py); others are refused.
    dtypes: tuple[str, ...] = ("fp32",)
    layouts: tuple[str, ...] = ("NCHW",)
    # The epilogues (model/epilogue.py) the kernel applies in its output store; a problem with
    # another is refused (none: only problems without one).
    epilogues: tuple[str, ...] = ()
    # Whether the kernels read the input through its own extents: a padded problem's zeros
    # themselves (ConvProblem.padding > 0) and rows past the last window (ConvProblem.tail > 0),
    # the others compute pre-padded inputs that end with the last window only.
    reads_padding: bool = False
    # The kernels index input, filters and output with 32-bit integers: check() refuses a
    # problem whose tensors hold more elements than that reaches.
    int32_offsets: bool = False
    tolerance: float = 1e-5  # in FP32; the other dtypes check against their own (tolerance_for)
    default_shape_set: str = "general"
    # Tunables added after results were stored, each with the value that reproduces the kernel
    # those results measured: a stored config without one is read as the config with it.
    later_tunables: Mapping[str, Value] = MappingProxyType({})
    # Tunables that shape only the launch (a persistent grid, say): the kernel's code never sees
    # them, so they are neither compiled in nor part of the kernel digest.
    launch_tunables: tuple[str, ...] = ()
    # Configurations measured strong on large shapes, which a search asks first (each made valid
    # for the shape as the nearest valid config) after any it transfers from other shapes: a
    # large space searched cold can spend its whole budget far from them.
    starting_configs: tuple[Mapping[str, Value], ...] = ()
    # The directory holding both <name>.cu and <name>.toml: None for the built-in families
    # (kernels/ and search_spaces/); a family from a user's kernel directory sets its own.
    directory: Path | None = None
    # The float64 reference kernels reference_plan() compiles (part of the kernel digest; the
    # family contract checks that reference_plan's source is among them).
    reference_sources: tuple[Path, ...] = (conv2d.REFERENCE_SOURCE,)

    @property
    def source_path(self) -> Path:
        return (self.directory or KERNEL_DIR) / f"{self.name}.cu"

    @property
    def space_path(self) -> Path:
        return (self.directory or SPACE_DIR) / f"{self.name}.toml"

    def load_space(self) -> SearchSpace:
        return SearchSpace.from_toml(self.space_path)

    def space_fields(self, problem: ConvProblem) -> dict[str, int]:
        """The problem's fields that the space's constraints read: its own, unless the family's
        kernels compute another layer for it (tc_wgmma's space-to-depth rewrite of a first
        layer), whose configurations are then the ones that can launch."""
        return problem.fields()

    def kernel_sources(self) -> tuple[Path, ...]:
        """The files whose text makes this family's code: its kernel and its references."""
        return (self.source_path, *self.reference_sources)

    def kernel_digest(
        self,
        options: tuple[str, ...] = BUILD_OPTIONS,
        include_dirs: tuple[Path, ...] = (INCLUDE_DIR,),
    ) -> str:
        """The digest of the code this family's measurements come from (families/digest.py),
        built with these compile options: stored with every evaluation, so that no query
        presents a measurement of other code as current."""
        return kernel_digest(self.kernel_sources(), options, include_dirs)

    def complete(self, config: Config) -> Config:
        """`config` with the later tunables it predates (stored before they existed) filled in."""
        stored = config.as_dict()
        missing = {k: v for k, v in self.later_tunables.items() if k not in stored}
        return Config.of({**stored, **missing}) if missing else config

    def predated(self, stored: Iterable[Config]) -> tuple[str, ...]:
        """The later tunables that none of these stored configs names: every one was measured
        before they existed, at their old value, so the study has not searched them."""
        configs = [c.as_dict() for c in stored]
        if not configs:
            return ()
        return tuple(k for k in self.later_tunables if not any(k in c for c in configs))

    def check(self, problem: ConvProblem) -> None:
        """Raise UnsupportedProblem when this family cannot compute `problem`: its kind, dtype,
        layout, epilogue, padding or tail is not one the family declares, or check_limits
        refuses it. A family overrides check_limits, not this, so that no family can skip the
        declared checks."""
        if not isinstance(problem, self.problem_type):
            raise UnsupportedProblem(
                f"{self.name} computes {self.problem_type.__name__}, not {type(problem).__name__}"
            )
        dtype = getattr(problem, "dtype", "fp32")
        if dtype not in self.dtypes:
            raise UnsupportedProblem(f"{self.name} computes {'/'.join(self.dtypes)}, not {dtype}")
        layout = getattr(problem, "layout", "NCHW")
        if layout not in self.layouts:
            raise UnsupportedProblem(
                f"{self.name} reads {'/'.join(self.layouts)} tensors, not {layout}"
            )
        epilogue = getattr(problem, "epilogue", "")
        if epilogue and epilogue not in self.epilogues:
            raise UnsupportedProblem(f"{self.name} applies no fused epilogue: not {epilogue}")
        padding = getattr(problem, "padding", 0)
        if padding and not self.reads_padding:
            raise UnsupportedProblem(
                f"{self.name} reads a pre-padded input (padding 0), not padding={padding}"
            )
        tail = getattr(problem, "tail", 0)
        if tail and not self.reads_padding:
            raise UnsupportedProblem(
                f"{self.name} reads an input that ends with its last window (tail 0), "
                f"not tail={tail}"
            )
        if self.int32_offsets:
            self.check_int32_offsets(problem)
        self.check_limits(problem)

    def check_limits(self, problem: ConvProblem) -> None:
        """Raise UnsupportedProblem for a problem of a declared kind, dtype, layout and epilogue
        that the kernels still cannot compute (a size past a grid, register or memory limit)."""

    def check_int32_offsets(self, problem: ConvProblem) -> None:
        """Refuse a problem whose input, filters or output hold more elements than a kernel's
        32-bit offsets reach."""
        p = problem
        sizes = {
            "input": p.B * p.C * p.input_size**2,
            "filters": p.F * p.C * p.K * p.K,
            "output": p.B * p.F * p.N * p.N,
        }
        for what, count in sizes.items():
            if count > INT32_MAX:
                raise UnsupportedProblem(
                    f"{self.name} indexes with 32-bit integers; the {what} has {count} elements"
                )

    def tolerance_for(self, problem: ConvProblem) -> float:
        """The relative L2 error a run of `problem` must stay within: the family's own in FP32,
        the dtype's otherwise (DESIGN section 2)."""
        precision = getattr(problem, "precision", None)
        if precision is None or precision.name == "fp32":
            return self.tolerance
        return precision.tolerance

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        raise NotImplementedError

    def arithmetic_flops(self, problem: ConvProblem, config: Config) -> int:
        """FLOPs the configuration actually does: the problem's direct count, except for fast
        algorithms (winograd), whose effective GFlop/s still divide the direct count."""
        return problem.flops

    def buffers(self, problem: ConvProblem) -> Buffers:
        """The problem's inputs (filled with fresh random values) and outputs (checked)."""
        return conv2d.buffers(problem)

    def reference_plan(self, problem: ConvProblem) -> KernelPlan:
        """A float64 kernel writing '<output>_ref' for every output, to check against."""
        return conv2d.reference_plan(problem)

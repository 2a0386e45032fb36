"""CUDA source + defines -> cubin through NVRTC, with the ptxas resource report; no GPU needed."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from pathlib import Path

from autotune.families.base import INCLUDE_DIR, Family, KernelPlan
from autotune.families.digest import BUILD_OPTIONS
from autotune.families.headers import Headers, option_dirs, quoted_headers
from autotune.gpu.cccl import cccl_flags, cccl_version
from autotune.gpu.child import ChildEnded, ChildPool
from autotune.gpu.cuda_headers import cuda_headers_digest, cuda_include_flags
from autotune.gpu.nvrtc_library import CompileError, compile_program, nvrtc_version
from autotune.gpu.ptxas import parse_resources
from autotune.model.files import read_no_symlink, write_atomically
from autotune.model.records import Resources
from autotune.model.space import Value

DEFAULT_OPTIONS = BUILD_OPTIONS
ELF_MAGIC = b"\x7fELF"  # every cubin is an ELF file
# Where the commands and the runtime keep compiled cubins between processes.
DEFAULT_CACHE = Path.home() / ".cache" / "autotune" / "cubins"


@dataclass(frozen=True, slots=True)
class CompiledKernel:
    cubin: bytes
    arch: str
    resources: dict[str, Resources]  # per entry name
    log: str
    compile_s: float
    key: str
    cached: bool = False
    # NVRTC's lowered (mangled) names of the plan's entries that are name expressions, such as
    # a templated kernel's "vector_add<float_type>": what the module is asked for at load.
    lowered: tuple[tuple[str, str], ...] = ()

    def entry(self, name: str) -> str:
        """The name an entry has in the cubin: its lowered name, or itself (extern "C")."""
        return dict(self.lowered).get(name, name)

    @property
    def max_registers(self) -> int:
        return max((r.registers for r in self.resources.values()), default=0)

    @property
    def max_smem_bytes(self) -> int:
        return max((r.smem_bytes for r in self.resources.values()), default=0)

    @property
    def spills(self) -> int:
        return sum(r.spill_stores + r.spill_loads for r in self.resources.values())


def is_name_expression(entry: str) -> bool:
    """An entry named by a C++ expression (a template instance, "k<float_type, 4>"), not by
    an extern "C" identifier: NVRTC instantiates it and gives its lowered name."""
    return not entry.isidentifier()


def lowered_plan(plan: KernelPlan, compiled: CompiledKernel) -> KernelPlan:
    """The plan with each entry named as in its cubin (what the GPU worker loads and the ptxas
    report names): a name expression's lowered name; the plan itself where there is none."""
    if not compiled.lowered:
        return plan

    def named(launches):
        return tuple(dataclasses.replace(lc, kernel=compiled.entry(lc.kernel)) for lc in launches)

    return dataclasses.replace(
        plan, launches=named(plan.launches), setup=named(plan.setup), finish=named(plan.finish)
    )


# ---------------------------------------------------------------------------------------------
# The compiler

# NVRTC installs SIGINT and SIGTERM handlers of its own for the length of each compile (strace:
# rt_sigaction on both around nvrtcCompileProgram), and they end the whole process with exit
# code 4: a stop signal that came during a compile skipped every clean-up (CI: a SIGTERM while
# `autotune run` compiled its reference kernels). A process whose stop matters (the command
# line, a tuning worker: compile_in_children(); a user's script, notebook or PyTorch process,
# where the runtime, tune_kernel and tuned_kernel compile: Compiler(in_children=True)) compiles
# in child processes only.
_nvrtc_here = True
_ONE_POOL_LOCK = threading.Lock()
# What a pool's children run: NVRTC's module alone, so a child starts without the families.
NVRTC_IN_A_CHILD = "autotune.gpu.nvrtc_library:compile_program"


def compile_in_children() -> None:
    """From now on this process never runs NVRTC itself: each Compiler made from here on
    compiles in the worker processes of its pool, one process where none was started (child
    processes block SIGINT; only this process's own handlers decide how it stops)."""
    global _nvrtc_here
    _nvrtc_here = False


def _define_flag(name: str, value: Value) -> str:
    if isinstance(value, bool):
        value = int(value)
    return f"-D{name}={value}"


@dataclass
class Compiler:
    """Compiles kernel plans for one arch; caches cubins on disk under everything that can change
    the binary (source text, the text of the headers it includes, defines, arch, options, NVRTC
    version). Quoted #includes are looked up as nvcc would: beside the including file, in the
    options' -I directories, then in include_dirs (the shared headers of the built-in families)."""

    arch: str = "sm_90"
    cache_dir: Path | None = None
    options: tuple[str, ...] = DEFAULT_OPTIONS
    include_dirs: tuple[Path, ...] = (INCLUDE_DIR,)
    # Never NVRTC in this process: every compile in a child, one started on the first compile
    # where no pool was. By default as compile_in_children() set this process.
    in_children: bool = field(default_factory=lambda: not _nvrtc_here)
    _version: str = field(default="", init=False)
    _pool: ChildPool | None = field(default=None, init=False, repr=False)
    cache_error: str | None = field(default=None, init=False)  # why the cache was not written

    # NVRTC serialises compilations within a process (measured on 2 cores, 8 compiles of a
    # 17 x 17 tiled2d kernel: 9.9 s on one thread, 8.7 s on two; 8.4 s in one worker process,
    # 5.3 s in two), so the parallel work goes to worker processes. Only the NVRTC call crosses
    # over (source, name, flags in; cubin bytes and log out); the cache stays in this process.
    def start_pool(self, processes: int) -> None:
        """Compile in `processes` worker processes from now on, until stop_pool()."""
        self.stop_pool()
        if processes > 1 or self.in_children:
            # Children of our own (gpu/child.py), not multiprocessing's: those re-run the
            # caller's main script, which a script without a main guard or a notebook cannot take.
            self._pool = ChildPool(NVRTC_IN_A_CHILD, processes)

    def _pool_or_one(self) -> ChildPool:
        with _ONE_POOL_LOCK:  # compile() runs on the tuner's threads
            if self._pool is None:
                self._pool = ChildPool(NVRTC_IN_A_CHILD, 1)
            return self._pool

    def stop_pool(self) -> None:
        """End the worker processes at once. A compile in flight is abandoned (its cubin would
        only have gone to the cache; a stop on Ctrl-C must not wait for it)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()

    @property
    def version(self) -> str:
        if not self._version:
            self._version = nvrtc_version()
        return self._version

    def target(self, arch_specific: bool = False) -> str:
        """The -arch value: the compiler's arch, or its architecture-specific variant (sm_90a)
        where a plan asks for one and the arch has one (sm_90 and later)."""
        number = self.arch.removeprefix("sm_")
        if arch_specific and number.isdigit() and int(number) >= 90:
            return f"{self.arch}a"
        return self.arch

    def headers(self, source: Path, text: str) -> Headers:
        """The headers `text` (the file `source`) includes with quotes, by name."""
        search = (*option_dirs(self.options), *self.include_dirs)
        return quoted_headers(text, Path(source).parent, search)

    def kernel_digest(self, family: Family) -> str:
        """The digest of the family's code as this compiler builds it (its options and include
        directories): what every evaluation of the family is stored with."""
        return family.kernel_digest(self.options, self.include_dirs)

    def _flags(
        self,
        defines: tuple[tuple[str, Value], ...],
        arch_specific: bool = False,
        ptxas_options: tuple[str, ...] = (),
    ) -> list[str]:
        arch = f"-arch={self.target(arch_specific)}"
        ptxas = (f"-Xptxas={option}" for option in ptxas_options)
        return [arch, *self.options, *(_define_flag(k, v) for k, v in defines), *ptxas]

    def cache_key(
        self,
        source_text: str,
        defines: tuple[tuple[str, Value], ...],
        headers: Headers = (),
        arch_specific: bool = False,
        ptxas_options: tuple[str, ...] = (),
        cccl: bool = False,
        expressions: tuple[str, ...] = (),
        toolkit: str = "",
    ) -> str:
        material: dict[str, object] = {
            "source": hashlib.sha256(source_text.encode()).hexdigest(),
            "flags": self._flags(tuple(sorted(defines)), arch_specific, ptxas_options),
            "nvrtc": self.version,
        }
        if cccl:  # absent otherwise, as headers below: other keys stay as they were
            material["cccl"] = cccl_version()
        if toolkit:  # the CUDA toolkit's headers it includes (gpu/cuda_headers.py)
            material["toolkit"] = toolkit
        if expressions:  # they instantiate code, and the entry's name comes with the cubin
            material["expressions"] = list(expressions)
        if headers:  # absent otherwise: the keys of sources without includes stay as they were
            digests = [[n, hashlib.sha256(t.encode()).hexdigest()] for n, t in sorted(headers)]
            material["headers"] = digests
        text = json.dumps(material, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def compile(self, plan: KernelPlan) -> CompiledKernel:
        expressions = tuple(e for e in plan.entries if is_name_expression(e))
        return self.compile_source(
            plan.source, plan.defines, plan.arch_specific, plan.ptxas_options, expressions
        )

    def compile_source(
        self,
        source: Path,
        defines: tuple[tuple[str, Value], ...],
        arch_specific: bool = False,
        ptxas_options: tuple[str, ...] = (),
        expressions: tuple[str, ...] = (),
    ) -> CompiledKernel:
        text = Path(source).read_text()
        headers = self.headers(source, text)
        system = cccl_flags(text)
        toolkit = cuda_include_flags(text)
        key = self.cache_key(
            text,
            defines,
            headers,
            arch_specific,
            ptxas_options,
            bool(system),
            expressions,
            cuda_headers_digest(text) if toolkit else "",
        )
        system += toolkit
        cached = self._read_cache(key)
        if cached is not None:
            return cached
        start = time.perf_counter()
        flags = [*self._flags(defines, arch_specific, ptxas_options), *system]
        args = (text, Path(source).name, flags, None, headers, expressions)
        pool = self._pool_or_one() if self.in_children else self._pool
        if pool is None:
            cubin, log, lowered = compile_program(*args)
        else:
            try:
                cubin, log, lowered = pool.submit(*args).result()
            except (ChildEnded, CancelledError):
                # A worker died inside NVRTC (it is replaced for the next compile), or
                # stop_pool ended the workers: this candidate fails either way.
                raise CompileError(
                    "the NVRTC worker process ended before this compile finished (it died, or the "
                    "compile pool was stopped)"
                ) from None
        compiled = CompiledKernel(
            cubin=cubin,
            arch=self.arch,
            resources=parse_resources(log),
            log=log,
            compile_s=time.perf_counter() - start,
            key=key,
            lowered=lowered,
        )
        self._write_cache(compiled)
        return compiled

    def _read_cache(self, key: str) -> CompiledKernel | None:
        """The cached kernel, or None (a miss, recompiled and overwritten) for anything that is
        not an entry this version wrote for this key: missing, corrupt, of another arch or
        format, a cubin that is not the one the entry describes, or a symbolic link."""
        if self.cache_dir is None:
            return None
        try:
            meta = json.loads(read_no_symlink(self.cache_dir / f"{key}.json"))
            cubin = read_no_symlink(self.cache_dir / f"{key}.cubin")
            if (
                meta["key"] != key
                or meta["arch"] != self.arch
                or meta["cubin_sha256"] != hashlib.sha256(cubin).hexdigest()
                or not cubin.startswith(ELF_MAGIC)
            ):
                return None
            resources = {str(k): Resources(**v) for k, v in meta["resources"].items()}
            if not all(
                isinstance(getattr(r, f), int) for r in resources.values() for f in r.__slots__
            ):
                return None
            return CompiledKernel(
                cubin=cubin,
                arch=self.arch,
                resources=resources,
                log=str(meta["log"]),
                compile_s=float(meta["compile_s"]),
                key=key,
                cached=True,
                lowered=tuple((str(e), str(n)) for e, n in meta.get("lowered", ())),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _write_cache(self, compiled: CompiledKernel) -> None:
        """Best effort: a cache that cannot be written (read-only, full) costs recompiling, not
        the run; the first failure is kept in cache_error for the command to report."""
        if self.cache_dir is None:
            return
        meta = {
            "key": compiled.key,
            "arch": compiled.arch,
            "cubin_sha256": hashlib.sha256(compiled.cubin).hexdigest(),
            "log": compiled.log,
            "compile_s": compiled.compile_s,
            "resources": {
                k: {f: getattr(r, f) for f in r.__slots__} for k, r in compiled.resources.items()
            },
        }
        if compiled.lowered:
            meta["lowered"] = [list(pair) for pair in compiled.lowered]
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            # The cubin first, its description last: a reader finds a complete pair or a miss.
            for suffix, data in ((".cubin", compiled.cubin), (".json", json.dumps(meta).encode())):
                write_atomically(self.cache_dir / f"{compiled.key}{suffix}", data)
        except OSError as err:
            if self.cache_error is None:
                self.cache_error = f"{self.cache_dir}: {err.strerror or err}"

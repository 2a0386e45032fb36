"""Which NVRTC this process compiles with, loaded through ctypes: from PyPI's NVRTC wheels
(nvidia-cuda-nvrtc for CUDA 13, nvidia-cuda-nvrtc-cu12 for CUDA 12; both may be installed side by
side), else wherever cuda.pathfinder or the system's loader finds one; and one compile through it
(compile_program), which the compile pool's child processes import alone."""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.metadata
import importlib.util
import threading
from pathlib import Path


class CompilerUnavailable(RuntimeError):
    """No NVRTC library could be loaded."""


class CompileError(RuntimeError):
    """NVRTC refused the source; the message holds its log."""


# Where each NVRTC wheel puts its library under site-packages/nvidia/, by CUDA major version.
WHEEL_LIBRARIES = {13: "cu13/lib/libnvrtc.so.13", 12: "cuda_nvrtc/lib/libnvrtc.so.12"}

_libs: dict[int | None, ctypes.CDLL] = {}
_lib_lock = threading.Lock()


def cupy_cuda_major() -> int | None:
    """The CUDA major version of the installed CuPy wheel (cupy-cuda12x or cupy-cuda13x), from its
    metadata, without importing CuPy; None without one."""
    for major in sorted(WHEEL_LIBRARIES, reverse=True):
        try:
            importlib.metadata.version(f"cupy-cuda{major}x")
        except importlib.metadata.PackageNotFoundError:
            continue
        return major
    return None


def wheel_nvrtc_libraries() -> dict[int, Path]:
    """The libraries of the installed NVRTC wheels, by CUDA major version."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    found: dict[int, Path] = {}
    for major, relative in WHEEL_LIBRARIES.items():
        for root in roots:
            if (Path(root) / relative).is_file():
                found[major] = Path(root) / relative
                break
    return found


def _open_wheel_library(path: Path) -> ctypes.CDLL:
    # NVRTC loads its builtins library by name at the first compile, and the 13.0 wheel's library
    # has no RUNPATH to find it beside itself: load it first, globally (as cuda.pathfinder does).
    for builtins in sorted(path.parent.glob("libnvrtc-builtins.so.*")):
        ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(str(path))


def load_nvrtc(major: int | None = None) -> ctypes.CDLL:
    """NVRTC of CUDA `major`. With None, the one this process compiles with: a wheel's of the
    installed CuPy's major (its cubins must load on the driver CuPy runs on), else the newest."""
    with _lib_lock:
        if major not in _libs:
            _libs[major] = _find_nvrtc(major)
        return _libs[major]


def _find_nvrtc(major: int | None) -> ctypes.CDLL:
    errors = []
    wheels = wheel_nvrtc_libraries()
    preferred = major if major is not None else cupy_cuda_major()
    for m in sorted(wheels, key=lambda m: (m != preferred, -m)):
        if major is None or m == major:
            try:
                return _open_wheel_library(wheels[m])
            except OSError as err:
                errors.append(str(err))
    if major is None:
        try:
            from cuda.pathfinder import load_nvidia_dynamic_lib

            return ctypes.CDLL(load_nvidia_dynamic_lib("nvrtc").abs_path)
        except Exception as err:  # pathfinder missing, or no nvrtc where it looks
            errors.append(str(err))
    majors = [major] if major is not None else sorted(WHEEL_LIBRARIES, reverse=True)
    names = [f"libnvrtc.so.{m}" for m in majors]
    if major is None:
        names = [ctypes.util.find_library("nvrtc"), *names, "libnvrtc.so"]
    for name in names:
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError as err:
            errors.append(str(err))
    which = f"NVRTC {major}" if major is not None else "NVRTC"
    raise CompilerUnavailable(f"cannot load {which}: " + "; ".join(errors))


def nvrtc_version(major: int | None = None) -> str:
    lib = load_nvrtc(major)
    major_out, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major_out), ctypes.byref(minor))
    return f"{major_out.value}.{minor.value}"


def _check(lib: ctypes.CDLL, code: int, what: str) -> None:
    if code != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise CompileError(f"{what}: {lib.nvrtcGetErrorString(code).decode()}")


def compile_program(
    source: str,
    name: str,
    options: list[str],
    major: int | None = None,
    headers: tuple[tuple[str, str], ...] = (),
    expressions: tuple[str, ...] = (),
) -> tuple[bytes, str, tuple[tuple[str, str], ...]]:
    """The cubin, NVRTC's log and the lowered name of each name expression. An expression is
    read after the source and its -D defines, so the macros in it expand (Kernel Tuner's
    "vector_add<float_type>" with float_type defined per configuration), as Kernel Tuner's
    nvcuda and cupy backends pass it."""
    lib = load_nvrtc(major)
    prog = ctypes.c_void_p()
    texts = (ctypes.c_char_p * len(headers))(*(t.encode() for _, t in headers))
    names = (ctypes.c_char_p * len(headers))(*(n.encode() for n, _ in headers))
    _check(
        lib,
        lib.nvrtcCreateProgram(
            ctypes.byref(prog), source.encode(), name.encode(), len(headers), texts, names
        ),
        "nvrtcCreateProgram",
    )
    try:
        for expression in expressions:
            _check(lib, lib.nvrtcAddNameExpression(prog, expression.encode()), expression)
        opts = [o.encode() for o in options]
        status = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        if status != 0:
            raise CompileError(log.strip() or f"NVRTC status {status}")
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        lowered = []
        for expression in expressions:
            out = ctypes.c_char_p()
            _check(
                lib,
                lib.nvrtcGetLoweredName(prog, expression.encode(), ctypes.byref(out)),
                f"nvrtcGetLoweredName {expression}",
            )
            lowered.append((expression, out.value.decode()))
        return cubin.raw, log, tuple(lowered)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))

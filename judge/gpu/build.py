"""Build CUDA source for Hopper: one way, on any machine.

    from judge.gpu import build
    b = build.compile("chapters/ch01_cp_async/sgemm_cp_async.cu", defines={"STAGES": 4})
    print(b.resources)          # registers, shared memory, spills (from ptxas -v)
    print(b.sass_of("sgemm"))   # the SASS of one kernel
    b.uses("cp.async")          # True: LDGSTS is in the SASS
    k = b.kernel("sgemm")       # a cupy.RawKernel, on a machine with a GPU

Source -> NVRTC -> cubin, always: for `target=` when given, else for the file's own
`// judge: target=...` line (sm_90a when it has none, or when the source is text); the same
cubin is disassembled (nvdisasm) and, on a GPU, loaded through cupy.RawModule.
No CUDA toolkit is needed: NVRTC, the CUDA headers and nvdisasm come from pip wheels.

Headers included with quotes (#include "x.cuh") are inlined, with #line markers so
that errors and SASS line info still name the learner's file and line. The compile
cache is keyed by the inlined source, the options and the NVRTC version.
"""
from __future__ import annotations

import copy
import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from judge import config
from judge.hw import sass as _sass
from judge.gpu.toolkit import include_dirs, missing_headers, nvrtc_version, tool  # noqa: F401 - re-exported

#: every source file a build read in this process (used by the Hopper record's hashes)
SOURCES_READ: set[Path] = set()

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


#: NVRTC compiles device code only and ships no C or C++ library headers, so `#include <cstdio>` fails with
#: "cannot open source file". What a kernel uses instead (libcu++'s <cuda/std/...> comes with the course).
_NO_HOST_HEADER = {
    **dict.fromkeys(("cstdio", "stdio.h"), "printf needs no #include in a kernel: remove the line"),
    **dict.fromkeys(("cassert", "assert.h"), "assert needs no #include in a kernel: remove the line"),
    **dict.fromkeys(("cstdint", "stdint.h"), "#include <cuda/std/cstdint> instead (uint32_t and the others, "
                                             "also as cuda::std::uint32_t)"),
    **dict.fromkeys(("climits", "limits.h"), "#include <cuda/std/climits> instead (INT_MAX and the others)"),
    **dict.fromkeys(("cmath", "math.h"), "sqrtf, expf, fmaxf and the other math functions need no #include; for "
                                         "std::sqrt and the like, #include <cuda/std/cmath> and write cuda::std::sqrt"),
    **dict.fromkeys(("cstring", "string.h"), "memcpy and memset need no #include in a kernel: remove the line"),
    "algorithm": "#include <cuda/std/algorithm> and write cuda::std::min (or the built-in min / max)",
    "type_traits": "#include <cuda/std/type_traits> and write cuda::std::is_same_v and the like",
    "limits": "#include <cuda/std/limits> and write cuda::std::numeric_limits",
    "utility": "#include <cuda/std/utility> and write cuda::std::pair, cuda::std::swap",
    "array": "#include <cuda/std/array> and write cuda::std::array",
    "iostream": "a kernel has no streams: print with printf, which needs no #include",
}
_FIXED_WIDTH = re.compile(r'identifier "u?int(8|16|32|64|ptr)_t" is undefined')


class CompileError(Exception):
    """The compiler rejected the source. str() is NVRTC's log, naming file and line."""

    def __init__(self, log: str, name: str):
        self.log = log.replace("\0", "").strip()
        self.name = name
        super().__init__(f"{name} did not compile:\n{self.log}")

    def hint(self) -> str:
        """What to change, for the errors a host C++ habit gives under NVRTC (no C or C++ library headers);
        "" for the others."""
        m = re.search(r'cannot open source file "([^"]+)"', self.log)
        if m and m.group(1) in _NO_HOST_HEADER:
            return (f"NVRTC compiles device code only and has no <{m.group(1)}>: "
                    f"{_NO_HOST_HEADER[m.group(1)]}")
        if _FIXED_WIDTH.search(self.log):
            return "fixed-width integer types need #include <cuda/std/cstdint> (NVRTC has no <cstdint>)"
        m = re.search(r'namespace "std" has no member "(\w+)"', self.log)
        if m:
            return (f"NVRTC has no C++ standard library: use cuda::std::{m.group(1)} from the matching "
                    f"<cuda/std/...> header (libcu++), or the CUDA built-in")
        return ""

    def first_error(self) -> str:
        """The first line of the log that reports an error, with what to change where hint() knows."""
        line = next((ln.strip() for ln in self.log.splitlines() if "error" in ln),
                    self.log.splitlines()[0] if self.log else "unknown compile error")
        h = self.hint()
        return f"{line} ({h})" if h else line


class NoGPU(RuntimeError):
    """Raised when code asks to run a kernel on a machine with no usable GPU."""


# ---------------------------------------------------------------------------- the course's kernels
_JUDGE_LINE = re.compile(r"^//\s*judge:(.*)$", re.M)


def course_kernels() -> list[Path]:
    """Every kernel file of the chapters and every exercise's solution (fixtures are graded, not listed)."""
    return sorted(config.CHAPTERS_DIR.rglob("*.cu")) + sorted(config.EXERCISES_DIR.glob("*/solution.cu"))


def judge_line(path) -> dict:
    """The `// judge: target=... features=a,b defines=X=1,Y` line of a kernel file, parsed:
    {"target", "features", "defines"}. ValueError when the line is missing or has an unknown key."""
    path = Path(path)
    m = _JUDGE_LINE.search(path.read_text())
    if not m:
        raise ValueError(f"{path}: no '// judge:' line (see CONTRIBUTING.md)")
    spec = {"target": config.DEFAULT_TARGET, "features": [], "defines": {}}
    for item in m.group(1).split():
        key, _, val = item.partition("=")
        if key == "features":
            spec["features"] = [f for f in val.split(",") if f]
        elif key == "defines":
            for d in filter(None, val.split(",")):
                k, _, v = d.partition("=")
                spec["defines"][k] = v or None
        elif key == "target":
            spec["target"] = val
        else:
            raise ValueError(f"{path}: unknown key {key!r} in the judge line")
    return spec


def declared_target(text: str, path: Path | None = None) -> str:
    """The target a source declares in its `// judge: target=...` line; config.DEFAULT_TARGET without one."""
    m = _JUDGE_LINE.search(text)
    if not m:
        return config.DEFAULT_TARGET
    for item in m.group(1).split():
        key, _, val = item.partition("=")
        if key == "target" and val:
            return val
    return config.DEFAULT_TARGET


# ---------------------------------------------------------------------------- source
def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(config.ROOT))
    except ValueError:
        return str(path)


def inline_headers(text: str, path: Path | None, seen: set[Path] | None = None) -> str:
    """Inline #include "..." (relative to the file, then judge/include) with #line markers."""
    seen = set() if seen is None else seen
    here = path.parent if path is not None else Path.cwd()
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _INCLUDE_RE.match(line)
        if not m:
            out.append(line)
            continue
        name = m.group(1)
        for cand in (here / name, config.INCLUDE_DIR / name):
            if cand.exists():
                cand = cand.resolve()
                break
        else:
            where = f"{_display(path)}({lineno})" if path else f"<source>({lineno})"
            raise CompileError(f'{where}: error: cannot open header "{name}" '
                               f"(looked beside the file and in judge/include)", where)
        if cand not in seen:           # headers are included once (#pragma once semantics)
            seen.add(cand)
            SOURCES_READ.add(cand)
            out.append(f'#line 1 "{_display(cand)}"')
            out.append(inline_headers(cand.read_text(), cand, seen))
        out.append(f'#line {lineno + 1} "{_display(path) if path else "source.cu"}"')
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- build
def disassemble(cubin_path) -> str:
    """The SASS of a cubin, as nvdisasm prints it (with line info where the cubin has it); reading it is
    judge.hw.sass's job."""
    res = subprocess.run([tool("nvdisasm"), "-c", "-g", str(cubin_path)], capture_output=True, text=True)
    if res.returncode != 0:  # -g needs line info; retry plain
        res = subprocess.run([tool("nvdisasm"), "-c", str(cubin_path)], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"nvdisasm failed on {cubin_path}: {res.stderr.strip()}")
    return res.stdout


def _beside_cubin(cubin_path: Path, kind: str, tool_name: str, make) -> str:
    """What `make()` prints about a cached cubin (its SASS, its resource usage), kept in a file beside it
    whose name carries the tool's identity (path, size, time): a compile found in the cache then runs no
    nvdisasm or cuobjdump again, and another version of the tool reads the cubin afresh."""
    t = Path(tool(tool_name))
    st = t.stat()
    tag = hashlib.sha256(f"{t}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:10]
    kept = cubin_path.with_name(f"{cubin_path.stem}.{kind}.{tag}.txt")
    if kept.exists():
        return kept.read_text()
    out = make()
    _write_into_cache(kept, out.encode())
    return out


def _write_into_cache(dest: Path, data: bytes) -> None:
    """Write, then rename into place: a reader never sees half a file (two processes may compile alike)."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, dest)


@dataclass
class Build:
    """A compiled module: cubin bytes, the compiler log, and what can be read from them."""
    name: str                # the file it came from (or "source.cu")
    target: str
    cubin: bytes
    log: str
    source: str              # the inlined source that was compiled
    options: tuple[str, ...]
    key: str
    cubin_path: Path = field(repr=False, default=None)
    ptx: str = field(repr=False, default="")   # the PTX of this very compile (what judge.model runs)
    #: keywords judge.model.run gets when judge.gpu.launch runs this build on the CPU model (see for_model)
    model_options: dict = field(repr=False, compare=False, default_factory=dict)

    def for_model(self, **options) -> "Build":
        """The same build, whose launches on the CPU model pass `options` to judge.model.run
        (`sms=132`, `max_blocks=64`, `budget=6000`): how a run's model settings travel with its launches."""
        twin = copy.copy(self)                   # shares the cubin and what was already read from it
        twin.model_options = {**self.model_options, **options}
        return twin

    # -- reading the binary (any machine)
    @cached_property
    def sass(self) -> str:
        """The whole module's SASS, as nvdisasm prints it (kept beside the cached cubin)."""
        return _beside_cubin(self.cubin_path, "sass", "nvdisasm", lambda: disassemble(self.cubin_path))

    def sass_of(self, kernel: str) -> str:
        return _sass.kernel_section(self.sass, kernel)

    def uses(self, feature: str, kernel: str | None = None) -> bool:
        """Does the SASS prove the feature was used? Features: judge.hw.sass.FEATURES."""
        return _sass.uses(self.sass_of(kernel) if kernel else self.sass, feature)

    def features(self, kernel: str | None = None) -> dict[str, int]:
        return _sass.feature_counts(self.sass_of(kernel) if kernel else self.sass)

    @cached_property
    def resources(self) -> dict[str, dict[str, int]]:
        """Per kernel: registers, shared (static bytes), stack, local, spill_stores, spill_loads.

        Read from the cubin (cuobjdump -res-usage), which every NVRTC version produces alike;
        the spill counts come from ptxas's -v report where NVRTC passes it on, and otherwise
        count all local memory (spills and locally indexed arrays) as spilled.
        """
        log = _sass.parse_ptxas_log(self.log)
        out = {}
        usage = _beside_cubin(self.cubin_path, "res", "cuobjdump", lambda: resource_usage(self.cubin_path))
        for k, u in _sass.parse_res_usage(usage).items():
            # cuobjdump's SHARED includes the 1 KB the system reserves per block on sm_80 and
            # later; "shared" here is the kernel's own static shared memory, as ptxas reports it.
            r = {"registers": u.get("REG", 0), "shared": max(0, u.get("SHARED", 0) - 1024),
                 "stack": u.get("STACK", 0), "local": u.get("LOCAL", 0)}
            p = log.get(k)
            if p:
                r["shared"] = p["shared"]
            r["spill_stores"] = p["spill_stores"] if p else r["local"]
            r["spill_loads"] = p["spill_loads"] if p else r["local"]
            out[k] = r
        return out

    @property
    def kernels(self) -> list[str]:
        return list(self.resources)

    def warnings(self) -> list[str]:
        return [l.strip() for l in self.log.splitlines() if "warning" in l.lower()]

    # -- running (GPU only)
    def module(self):
        from judge import gpu
        if not gpu.available():
            raise NoGPU(gpu.no_gpu_reason())
        return _load_module(str(self.cubin_path))

    def kernel(self, name: str):
        """A cupy.RawKernel for an extern "C" kernel of this module."""
        return self.module().get_function(name)


@lru_cache(None)
def _load_module(cubin_path: str):
    import cupy
    return cupy.RawModule(path=cubin_path)


def _is_path(source) -> bool:
    if isinstance(source, Path):
        return True
    return isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".cuh"))


def compile(source, *, target: str | None = None, defines: dict | None = None,
            options: tuple[str, ...] = (), name: str | None = None) -> Build:
    """Compile a .cu file (path) or CUDA source text (str) to a cubin for `target`.

    target: None builds for what the file declares (`// judge: target=sm_100a`: tcgen05 exists only
    on sm_100a, wgmma only on sm_90a, so a file built for the wrong one does not compile), or for
    config.DEFAULT_TARGET when it declares nothing.

    defines: {"STAGES": 4} becomes -DSTAGES=4. Raises CompileError with NVRTC's log,
    which names the file and line. Results are cached on disk (judge.config.cache_dir()).
    """
    path = None
    if _is_path(source):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"no CUDA file at {path}")
        path = path.resolve()
        SOURCES_READ.add(path)
        text = path.read_text()
        name = name or _display(path)
    else:
        text = source
        name = name or "source.cu"
    if target is None:
        target = declared_target(text, path)
    full = inline_headers(text, path)
    opts = [f"-arch={target}", "-std=c++17", "-lineinfo", "-Xptxas=-v"]
    for k, v in sorted((defines or {}).items()):
        opts.append(f"-D{k}={v}" if v is not None else f"-D{k}")
    opts += list(options)
    opts += [f"-I{d}" for d in include_dirs()]
    version = nvrtc_version()
    key = hashlib.sha256("\0".join([full, name, version, *opts]).encode()).hexdigest()[:24]

    cdir = config.cache_dir() / "cubin"
    cubin_path = cdir / f"{key}.cubin"
    log_path = cdir / f"{key}.log"
    ptx_path = cdir / f"{key}.ptx"
    if cubin_path.exists() and log_path.exists() and ptx_path.exists():
        return Build(name, target, cubin_path.read_bytes(), log_path.read_text(), full,
                     tuple(opts), key, cubin_path, ptx_path.read_text())

    from cupy.cuda import nvrtc
    prog = nvrtc.createProgram(full, name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError:
            raise CompileError(nvrtc.getProgramLog(prog), name) from None
        log = nvrtc.getProgramLog(prog).replace("\0", "")
        cubin = nvrtc.getCUBIN(prog)
        ptx = nvrtc.getPTX(prog).rstrip(b"\0").decode()
    finally:
        nvrtc.destroyProgram(prog)
    cubin += b"\0"                   # NVRTC hands the ELF back one byte short
    cdir.mkdir(parents=True, exist_ok=True)
    for dest, data in ((cubin_path, cubin), (log_path, log.encode()), (ptx_path, ptx.encode())):
        _write_into_cache(dest, data)
    return Build(name, target, cubin, log, full, tuple(opts), key, cubin_path, ptx)


def resource_usage(cubin_path: Path) -> str:
    """cuobjdump's resource report (registers, shared, local, constant) for a cubin."""
    return subprocess.run([tool("cuobjdump"), "-res-usage", str(cubin_path)],
                          capture_output=True, text=True, check=True).stdout

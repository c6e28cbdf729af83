"""Where the NVIDIA compiler pieces are: NVRTC's version, the CUDA/CCCL headers, nvdisasm and cuobjdump.

    from judge.gpu import toolkit
    toolkit.include_dirs()      # the folders NVRTC searches, found wherever they are
    toolkit.missing_headers()   # [] when every header kernels rely on is there
    toolkit.tool("nvdisasm")    # the pip wheel's, else one on PATH

The pip wheels (nvidia-cuda-nvrtc, -runtime, -cccl, -nvdisasm, -cuobjdump) carry everything; a machine
whose wheels lack a piece (the H200 image has no CCCL wheel) falls back to a toolkit's copy.
"""
from __future__ import annotations

import os
import re
import shutil
import sys
from functools import lru_cache
from pathlib import Path


def _nvidia_root() -> Path | None:
    try:
        import nvidia  # namespace package of the NVIDIA pip wheels
    except ImportError:
        return None
    for p in nvidia.__path__:
        for sub in ("cu13", "cu12"):
            if (Path(p) / sub).is_dir():
                return Path(p) / sub
    return None


#: headers that tell whether a folder holds what a kernel may include
_NEEDS = {"runtime": "cuda_runtime.h", "cccl": "cuda/ptx", "nv": "nv/target", "crt": "crt/mma.h"}   # crt: <mma.h> (wmma)


def _toolkit_roots() -> list[Path]:
    return [Path(b) for b in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda")
            if b and Path(b).is_dir()]


@lru_cache(None)
def include_dirs() -> tuple[str, ...]:
    """System include folders for NVRTC, found wherever they are.

    First the pip wheels' headers (nvidia/cu13/include and its cccl/ folder); then, for whatever is still
    missing (CCCL's <cuda/ptx> and <nv/target>, which <cooperative_groups.h> needs), a toolkit's
    include/cccl and include folders. A learner's pip install has everything from the wheels
    (nvidia-cuda-cccl, and nvidia-cuda-crt for <mma.h>'s crt/ headers); the H200 image's wheels lack CCCL,
    which its toolkit has in include/cccl.
    """
    cands = []
    root = _nvidia_root()
    if root is not None:
        cands += [root / "include", root / "include" / "cccl"]
    for base in _toolkit_roots():
        cands += [base / "include", base / "include" / "cccl"]
    dirs, found = [], set()
    for d in cands:
        if not d.is_dir():
            continue
        gives = {k for k, rel in _NEEDS.items() if (d / rel).exists()}
        if gives - found or (not dirs and gives):
            dirs.append(str(d))
            found |= gives
    return tuple(dirs)


def missing_headers() -> list[str]:
    """Which of the headers kernels rely on no include folder provides (empty when all is well)."""
    have = {k for k, rel in _NEEDS.items() for d in include_dirs() if (Path(d) / rel).exists()}
    return [rel for k, rel in _NEEDS.items() if k not in have]


@lru_cache(None)
def tool(name: str) -> str:
    """Path of nvdisasm / cuobjdump: the pip wheel's first, then PATH."""
    root = _nvidia_root()
    if root is not None and (root / "bin" / name).exists():
        return str(root / "bin" / name)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        f"{name} not found: install the wheel 'nvidia-cuda-{name}' (pip install -e . does)")


@lru_cache(None)
def nvrtc_version() -> str:
    """NVRTC's version ("13.0"), part of every compile's cache key. Read from the name of the pip wheel's
    libnvrtc-builtins.so.MAJOR.MINOR, which lies beside the libnvrtc CuPy compiles with (nothing is loaded:
    loading libnvrtc here, before CuPy does, leaves CuPy's NVRTC unable to find its builtins), so a compile
    found in the cache imports no CuPy (over a second); through CuPy where the wheel has no such file or
    CuPy is imported already (on a GPU machine, whose CuPy may compile with another NVRTC than a wheel's)."""
    root = _nvidia_root()
    for lib in sorted(root.glob("lib/libnvrtc-builtins.so.*")) if root and "cupy" not in sys.modules else []:
        m = re.fullmatch(r"libnvrtc-builtins\.so\.(\d+)\.(\d+)", lib.name)
        if m and (lib.parent / f"libnvrtc.so.{m.group(1)}").exists():
            return f"{m.group(1)}.{m.group(2)}"
    from cupy.cuda import nvrtc
    major, minor = nvrtc.getVersion()
    return f"{major}.{minor}"

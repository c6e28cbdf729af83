"""The one launch layer: grid, block, dynamic shared memory, and a cluster size chosen at launch.

    from judge.gpu import build, launch
    b = build.compile("chapters/ch03_clusters/cluster_sum.cu")
    launch.launch(b, "cluster_sum", grid=(64,), block=(256,), args=(x, out, np.int32(n)),
                  cluster=(4,), shared_bytes=64 << 10)
    launch.max_active_clusters(b, "cluster_sum", block=(256,), cluster=(4,), shared_bytes=64 << 10)

`grid` counts blocks, as `<<<grid, block>>>` does in CUDA C++ (cuda.core's LaunchConfig counts
clusters when a cluster is given; the conversion happens here). The rules the hardware enforces are
checked before the launch, each with a message that says what to fix:
  - the grid must be a whole number of clusters in every dimension;
  - a cluster of more than 8 blocks needs the non-portable cluster-size attribute (set here; Hopper
    allows up to 16), and a cluster's blocks must fit on one GPC at once (max_active_clusters says
    whether any cluster of that shape fits);
  - a block may use more than 48 KiB of dynamic shared memory only after opting in with
    cudaFuncAttributeMaxDynamicSharedMemorySize (set here, up to the device's limit).
Arguments: CuPy arrays and torch tensors (passed as device pointers), numpy scalars (np.int32(n),
np.float32(x): the kernel's parameter type must match), and by-value structs such as the 128-byte
tensor maps of judge.hw.tma (anything exposing `as_kernel_arg()`, or a numpy structured scalar).
Launches go on CuPy's current stream, so judge.gpu.timing.bench's events bracket them.

When every array argument is a numpy array, the launch runs on the CPU model of the machine
(judge.model) instead of a GPU: the same check.py grades on both. launch() then returns the model's
report (what ran, its counters, what the kernel printed), and the model is run with the build's own
settings (`build.for_model(sms=..., max_blocks=...)`); on a GPU it returns None.
"""
from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

PORTABLE_CLUSTER = 8          # the largest cluster every Hopper part must support
MAX_CLUSTER = 16              # Hopper's limit with the non-portable attribute
DEFAULT_SMEM_LIMIT = 48 << 10  # dynamic shared memory a block gets without opting in


class LaunchError(ValueError):
    """A launch the hardware would refuse, with what to change."""


def _dim3(v, what: str) -> tuple[int, int, int]:
    if v is None:
        return (1, 1, 1)
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
        raise LaunchError(f"{what} must be 1 to 3 positive integers, got {v!r}")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))


def check_shape(grid, block, cluster=None) -> tuple[tuple, tuple, tuple | None]:
    """Validate a launch shape; returns (grid, block, cluster) as 3-tuples (cluster None if not given)."""
    g, b = _dim3(grid, "grid"), _dim3(block, "block")
    if b[0] * b[1] * b[2] > 1024:
        raise LaunchError(f"a block has at most 1024 threads; block {b} has {b[0] * b[1] * b[2]}")
    if cluster is None:
        return g, b, None
    c = _dim3(cluster, "cluster")
    size = c[0] * c[1] * c[2]
    if size > MAX_CLUSTER:
        raise LaunchError(f"a cluster has at most {MAX_CLUSTER} blocks on Hopper; cluster {c} has {size}")
    bad = [i for i in range(3) if g[i] % c[i]]
    if bad:
        axis = "xyz"[bad[0]]
        raise LaunchError(
            f"the grid {g} is not a whole number of clusters {c}: along {axis}, {g[bad[0]]} blocks is not "
            f"a multiple of {c[bad[0]]}. Round the grid up to a multiple of the cluster (and let the extra "
            f"blocks return early) or pick a cluster size that divides it")
    return g, b, c


def _is_model_launch(args) -> bool:
    """True when the arguments live on the host: NumPy arrays, or tensor maps made over NumPy arrays."""
    host = [a for a in args if (isinstance(a, np.ndarray) and a.dtype.fields is None)
            or (hasattr(a, "spec") and getattr(a, "opaque", 0) is None)]
    devices = [a for a in args if hasattr(a, "data_ptr") or (hasattr(a, "data") and hasattr(a.data, "ptr"))]
    return bool(host) and not devices


def launch(build, kernel: str, *, grid, block, args=(), shared_bytes: int = 0, cluster=None,
           stream=None):
    """Launch `kernel` of `build` (a judge.gpu.build.Build). See the module docstring for the rules.

    Returns the CPU model's report when the launch ran there (NumPy arguments), else None."""
    g, b, c = check_shape(grid, block, cluster)
    if _is_model_launch(args):
        from judge import model
        return model.run(build, kernel, grid=g, block=b, args=tuple(args), shared_bytes=shared_bytes,
                         cluster=c or (1, 1, 1), **getattr(build, "model_options", {}))
    from cuda.core import LaunchConfig, launch as _cc_launch
    k = _prepare(build, kernel, shared_bytes, c)
    cfg = LaunchConfig(grid=tuple(g[i] // (c[i] if c else 1) for i in range(3)), block=b,
                       cluster=c, shmem_size=int(shared_bytes))
    kargs = [_arg(a) for a in args]
    if any(isinstance(a, bytes) for a in kargs):      # a struct by value: cuda.core takes none
        _launch_driver(k, g, b, c, int(shared_bytes), _stream(stream), kargs)
        return None
    _cc_launch(_stream(stream), cfg, k, *kargs)
    return None


def _launch_driver(k, g, b, c, shared_bytes, stream, kargs) -> None:
    """cuLaunchKernelEx with every parameter packed by hand (by-value structs such as tensor maps)."""
    from cuda.bindings import driver
    keep, ptrs = [], []
    for a in kargs:
        if isinstance(a, bytes):
            buf = ctypes.create_string_buffer(a, len(a))
        elif isinstance(a, int):
            buf = ctypes.c_uint64(a)
        else:
            arr = np.asarray(a)
            buf = ctypes.create_string_buffer(arr.tobytes(), arr.nbytes)
        keep.append(buf)
        ptrs.append(ctypes.cast(ctypes.pointer(buf), ctypes.c_void_p).value)
    params = (ctypes.c_void_p * len(ptrs))(*ptrs)
    cfg = driver.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = g
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = b
    cfg.sharedMemBytes = shared_bytes
    cfg.hStream = driver.CUstream(int(stream.handle))
    attrs = []
    if c is not None:
        at = driver.CUlaunchAttribute()
        at.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        at.value.clusterDim.x, at.value.clusterDim.y, at.value.clusterDim.z = c
        attrs.append(at)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    h = k.handle
    f = driver.CUfunction(int(h)) if not isinstance(h, driver.CUfunction) else h
    _driver_call(driver.cuLaunchKernelEx, cfg, f, ctypes.addressof(params), 0)


def max_active_clusters(build, kernel: str, *, block, cluster, shared_bytes: int = 0) -> int:
    """How many clusters of this shape can be resident on the GPU at once (0: none fits)."""
    _, b, c = check_shape(cluster, block, cluster)
    from cuda.core import LaunchConfig
    k = _prepare(build, kernel, shared_bytes, c)
    cfg = LaunchConfig(grid=(1, 1, 1), block=b, cluster=c, shmem_size=int(shared_bytes))
    return int(k.occupancy.max_active_clusters(cfg, stream=_stream(None)))


def max_active_blocks_per_sm(build, kernel: str, *, block, shared_bytes: int = 0) -> int:
    """How many blocks of this kernel fit on one SM (registers, shared memory, threads)."""
    _, b, _ = check_shape(1, block)
    k = _prepare(build, kernel, shared_bytes, None)
    return int(k.occupancy.max_active_blocks_per_multiprocessor(b[0] * b[1] * b[2], int(shared_bytes)))


# ------------------------------------------------------------------ cuda.core plumbing (GPU only)
@lru_cache(None)
def _device():
    from cuda.core import Device
    from judge import gpu
    if not gpu.available():
        from judge.gpu.build import NoGPU
        raise NoGPU(gpu.no_gpu_reason())
    d = Device(0)
    d.set_current()
    return d


@lru_cache(None)
def _kernel(cubin_path: str, kernel: str):
    from cuda.core import ObjectCode
    _device()
    return ObjectCode.from_cubin(cubin_path).get_kernel(kernel)


_ATTRS_SET: dict = {}


def _driver_call(fn, *a):
    out = fn(*a)
    err = out[0] if isinstance(out, tuple) else out
    if int(err) != 0:
        from cuda.bindings import driver
        _, name = driver.cuGetErrorName(err)
        raise RuntimeError(f"{fn.__name__} failed: {name.decode() if name else err}")
    return out


def _set_attribute(k, attr, value: int) -> None:
    """Set a function attribute on a cuda.core Kernel (a CUkernel or a CUfunction handle)."""
    from cuda.bindings import driver
    h = k.handle
    if isinstance(h, driver.CUkernel):
        _driver_call(driver.cuKernelSetAttribute, attr, int(value), h, _device().device_id)
    else:
        _driver_call(driver.cuFuncSetAttribute, h, attr, int(value))


def _prepare(build, kernel: str, shared_bytes: int, cluster) -> object:
    from cuda.bindings import driver
    from judge import gpu
    try:
        k = _kernel(str(build.cubin_path), kernel)
    except Exception as e:  # noqa: BLE001 - name the kernels that exist
        raise LaunchError(f"no kernel {kernel!r} in {build.name} ({', '.join(build.kernels)}); declare it "
                          f"extern \"C\" so its name is not mangled") from e
    key = (str(build.cubin_path), kernel)
    done = _ATTRS_SET.setdefault(key, {"smem": DEFAULT_SMEM_LIMIT, "nonportable": False})
    if shared_bytes > done["smem"]:
        limit = gpu.info().smem_per_block_optin
        static = build.resources.get(kernel, {}).get("shared", 0)
        if shared_bytes + static > limit:
            raise LaunchError(f"{kernel} asks for {shared_bytes} B of dynamic shared memory (+{static} B static); "
                              f"a block may have at most {limit} B on {gpu.info().name}")
        _set_attribute(k, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                       shared_bytes)
        done["smem"] = shared_bytes
    if cluster is not None and cluster[0] * cluster[1] * cluster[2] > PORTABLE_CLUSTER and not done["nonportable"]:
        _set_attribute(k, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
        done["nonportable"] = True
    return k


class _CupyStream:
    """Hands CuPy's stream to cuda.core through the __cuda_stream__ protocol."""

    def __init__(self, ptr: int):
        self.ptr = ptr

    def __cuda_stream__(self):
        return (0, self.ptr)


def _stream(stream):
    import cupy
    s = stream if stream is not None else cupy.cuda.get_current_stream()
    return _device().create_stream(_CupyStream(int(s.ptr)))


def _arg(a):
    """A kernel argument as cuda.core takes it."""
    if hasattr(a, "as_kernel_arg"):
        a = a.as_kernel_arg()
    if isinstance(a, np.ndarray) and a.dtype.fields is None:
        raise LaunchError("a numpy array cannot be a GPU kernel argument: copy it to the device "
                          "(cupy.asarray) first")
    if hasattr(a, "data_ptr"):                       # torch
        return int(a.data_ptr())
    if hasattr(a, "data") and hasattr(a.data, "ptr"):  # cupy ndarray
        return int(a.data.ptr)
    if isinstance(a, (np.void, np.ndarray)) and a.dtype.fields is not None:  # a struct by value (tensor map)
        return bytes(np.ascontiguousarray(a).tobytes())
    if isinstance(a, bool):
        return np.bool_(a)
    if isinstance(a, (int, float)):
        raise LaunchError(f"pass {a!r} as a numpy scalar of the kernel's parameter type "
                          f"(np.int32({a!r}), np.float32({a!r}), ...): a bare Python number has no C type")
    return a

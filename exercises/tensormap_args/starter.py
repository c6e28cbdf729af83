"""tensormap.py - the arguments of cuTensorMapEncodeTiled for a tensor and a tile.

Your task: fill in encode_args() below. Check it with
    python practice/judge.py check tensormap_args

A TMA descriptor lists everything innermost-first (the opposite of a NumPy shape), gives the
byte strides of dims 1.. only (dim 0 must be contiguous, so its stride is implied), and the
driver refuses (CUDA_ERROR_INVALID_VALUE) any tensor or box that breaks the rules below.
Rules from the CUDA driver API, cuTensorMapEncodeTiled:
https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html
"""

SWIZZLE_SPAN = {"none": None, "32B": 32, "64B": 64, "128B": 128}


def encode_args(shape, dtype_bytes, strides_bytes, box, swizzle="none"):
    """shape, strides_bytes and box are outermost-first, as NumPy gives them
    (strides_bytes=None means row-major). Returns innermost-first lists:
        dict(dims=..., global_strides=..., box=..., elem_strides=...)
    or raises ValueError whose message contains the name of the broken rule:
        "tensorRank"        rank 0 or more than 5
        "innermost stride"  the innermost dim is not contiguous (stride != dtype_bytes)
        "globalStrides"     a byte stride of dims 1.. is not a multiple of 16
        "boxDim"            a box dim below 1 or above 256
        "inner box bytes"   box[innermost] * dtype_bytes is not a multiple of 16
        "swizzle"           inner box bytes exceed the swizzle span (32/64/128 B)
    A box larger than the tensor is fine: TMA fills the out-of-bounds part (zeros).
    """
    raise NotImplementedError("encode_args: list dims, strides and box innermost-first, "
                              "and raise ValueError naming the rule a bad tensor or box breaks")

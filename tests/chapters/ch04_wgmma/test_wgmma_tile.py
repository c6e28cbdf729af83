"""Chapter 4's first wgmma (chapters/ch04_wgmma/wgmma_tile.cu) on the CPU model: fences, the proxy fence and the
fragment stores obeyed, C = A B^T against float64 for two swizzles.

Run: python -m pytest tests/chapters/ch04_wgmma/test_wgmma_tile.py -q      (no GPU)
"""

import numpy as np
import pytest

from judge.gpu import build


TILE_CU = "chapters/ch04_wgmma/wgmma_tile.cu"


@pytest.mark.parametrize("swizzle", [128, 32])
def test_tile_kernel_runs_right_on_the_cpu_model(swizzle):
    """wgmma_tile's own PTX on judge.model: fences, proxy fence and fragment stores obeyed, C = A B^T."""
    import ml_dtypes

    from judge.grading import compare
    from judge import model
    rng = np.random.default_rng()
    a = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    c = np.full((64, 64), np.nan, np.float32)
    model.run(build.compile(TILE_CU, defines={"SWIZZLE": swizzle}), "wgmma_tile", grid=(1, 1, 1),
              block=(128, 1, 1), args=(a.view(np.uint16).copy(), b.view(np.uint16).copy(), c, np.zeros(1, np.uint32)))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    atol = 4 * 64 * 2.0 ** -24 * float((np.abs(a64) @ np.abs(b64).T).max())
    cmp = compare.compare(c, a64 @ b64.T, rtol=0, atol=atol, case=f"SWIZZLE={swizzle}")
    assert cmp.ok, cmp.message

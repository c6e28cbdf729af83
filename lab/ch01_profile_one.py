"""lab/ch01_profile_one.py - one checked launch of a chapter-1 SGEMM at n^3, for a profiler to attach to.

    ncu -k regex:sgemm_tuned2 -s 1 -c 1 --section WarpStateStats python -m lab.ch01_profile_one \
        sgemm_tuned2.cu '{"NQ": 4, "MIN_BLOCKS": 1}' 4096

Launch 1 is a warm-up on fresh random inputs (C poisoned, checked against float64 on a 512-row
slice); launch 2 is the one to profile (ncu -s 1 -c 1 skips the first).
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

import cupy  # noqa: E402

from chapters.ch01_cp_async import sgemm  # noqa: E402
from judge.grading import compare  # noqa: E402

kernel = sys.argv[1] if len(sys.argv) > 1 else "sgemm_tuned2.cu"
defines = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
n = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
launch = sgemm.Launcher(kernel, defines)
A, B = sgemm.random_inputs(n, n, n, seed=7)
C = compare.poison(cupy.empty((n, n), dtype=cupy.float32))
launch(A, B, C)
cupy.cuda.get_current_stream().synchronize()
ref = cupy.matmul(A[:512].astype(cupy.float64), B.astype(cupy.float64))
c = compare.compare(C[:512], ref, case=f"{kernel} {n}^3 rows 0..511", **sgemm.tolerances(n))
print(c.message or f"{c.case}: ok")
launch(A, B, C)
cupy.cuda.get_current_stream().synchronize()

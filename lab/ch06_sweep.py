"""lab/ch06_sweep.py - chapter 6's warp-specialized rungs with other ring depths, timed against SDPA's backends in
the same process, to decide whether a rung's defaults should change (an H100/H200; not a course figure: the record
measures the chapter's own defaults and attention.VARIANTS).

    PYTHONPATH=$PWD OUT=/tmp/out python -m lab.ch06_sweep            # writes $OUT/ch06_sweep.json

Each build is a rung of chapters/ch06_attention/attention.py, as it is or with defines that replace its own
(STAGES here), registered in attention.VARIANTS for this process; attention.measure() checks every kernel against
float64 on fresh random inputs with O and LSE poisoned and times it in interleaved rounds with every SDPA backend
(the 2-slot builds of rungs 4 and 5 are attention.VARIANTS of the chapter's own, timed beside their rungs).
"""
from __future__ import annotations

import json
import os
import sys

from chapters.ch06_attention import attention as A

#: (rung, defines that replace its own) for each build timed besides the rungs and attention.VARIANTS. Measured
#: on an H100 on 2026-12-06 (S 8192, d 128, of cuDNN, non-causal / causal), when rungs 4 and 5 still took 2
#: slots: intra-warpgroup overlap 0.754 / 0.779 with 2 slots, 0.898 / 0.933 with 3; ping-pong 0.845 / 0.861 and
#: 0.866 / 0.926; rung 3 0.858 / 0.935 and 0.857 / 0.932. Rungs 4 and 5 take 3 slots since (attention.py).
TRIED = [("warp specialized", {"STAGES": 3})]
PROBLEMS = [{"batch": 2, "heads": 16, "seq_len": 8192, "head_dim": 128, "causal": c} for c in (False, True)]


def builds() -> list[str]:
    """The warp-specialized rungs' names and, for each build of TRIED, a name registered in attention.VARIANTS
    (in this process only), so attention.launcher builds and launches it with its defines on both sides."""
    names = [r["name"] for r in A.RUNGS if r["threads"] > 128]
    for rung, extra in TRIED:
        name = rung + "".join(f", {k}={v}" for k, v in extra.items())
        if all(v["name"] != name for v in A.VARIANTS):
            A.VARIANTS.append({"name": name, "of": rung, "defines": extra, "head_dims": (128,)})
    return names


def main() -> int:
    import torch
    rows = A.measure(PROBLEMS, rungs=builds())
    print(A.table(rows), flush=True)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "ch06_sweep.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

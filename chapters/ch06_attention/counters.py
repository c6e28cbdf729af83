"""chapters/ch06_attention/counters.py - what the record's counters pass profiles in chapter 6: every rung of
the attention ladder (attention.RUNGS), the builds that show why rungs 4 and 5 take a 3-stage ring
(attention.VARIANTS), and torch SDPA's flash and cuDNN backends beside them, at d = 128 and
S = 4096 (B = 4, H = 16: 16k tokens), non-causal; each in a child process under Nsight Compute. The pass
(judge/record/counters.py) reads this list and starts the children; figures.toml names this module.

    python -m chapters.ch06_attention.counters --list                      # the kernels, one JSON object a line
    python -m chapters.ch06_attention.counters --run ch06.one_warpgroup    # one checked launch (ncu profiles it)
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from chapters.ch06_attention import attention
from judge.record.counters import chapter_main, say

HERE = Path(__file__).resolve().parent
B, H, S, D = 4, 16, 4096, 128
#: ncu's kernel filter for SDPA's backends: torch and cuDNN choose their kernels' names, so ncu takes the first
#: launch whose name matches; the child makes no other attention call before the profiled one
BACKEND_KERNELS = {"SDPA flash": "flash", "SDPA cuDNN": "cudnn|sm90|fmha"}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def kernels() -> list[dict]:
    """One row per kernel: id, chapter, label, kernel (its name, for ncu's -k), size, sources."""
    size = f"B={B} H={H} S={S} d={D}"
    out = [{"id": f"ch06.{_slug(r['name'])}", "chapter": "ch06", "label": r["name"], "kernel": r["kernel"],
            "variant": False, "size": size, "sources": [str(HERE / r["file"]), str(HERE / "attention.py"), __file__]}
           for r in attention.RUNGS]
    out += [{"id": f"ch06.{_slug(v['name'])}", "chapter": "ch06", "label": v["name"], "kernel": attention.rung(v["name"])["kernel"],
             "variant": True, "size": size, "sources": [str(HERE / attention.rung(v["name"])["file"]),
                                                       str(HERE / "attention.py"), __file__]}
            for v in attention.VARIANTS if D in v["head_dims"]]
    out += [{"id": f"ch06.{_slug(b)}", "chapter": "ch06", "label": b, "kernel": k, "regex": True, "backend": b,
             "variant": True, "size": size, "sources": [str(HERE / "attention.py"), __file__]}
            for b, k in BACKEND_KERNELS.items()]
    return out


def run(k: dict) -> None:
    """One launch on fresh random inputs, the outputs poisoned, then a sample of heads and rows against float64."""
    import torch
    seed = int.from_bytes(os.urandom(4), "little")
    q, kk, v = attention.gpu_inputs(B, H, S, D, seed)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
    if k.get("backend"):
        attention.sdpa_launcher(k["backend"], False, keep=True)(q, kk, v, o, lse)   # the launch ncu profiles
        lse = None                                                                   # SDPA gives no LSE
    else:
        attention.launcher(k["label"], B, H, S, D, False)(q, kk, v, o, lse)         # the launch ncu profiles
    torch.cuda.synchronize()
    co, cl = attention.check_gpu(o, lse, q, kk, v, False, f"{k['label']} {k['size']} seed {seed}", seed)
    bad = co if not co.ok else cl if cl is not None and not cl.ok else None
    say(bad is None, bad.message if bad else co.case)


if __name__ == "__main__":
    raise SystemExit(chapter_main(kernels, run))

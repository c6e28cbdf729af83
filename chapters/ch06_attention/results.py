"""Chapter 6's H200 results read back from the record: each rung's share of the fastest SDPA backend, and the
counters each "why" of the notebook's section 4 rests on.

    from chapters.ch06_attention import results
    from judge import record
    results.summary(record.figures("ch06.attention")["rows"])      # one line per head dimension and rung
    results.counter_rows(record.figures("ch06.counters"))          # the short counters table
    results.variant_rows(record.figures("ch06.attention")["rows"])  # rungs 4 and 5 beside their 2-slot builds

Any machine: it reads the record only (the figures come from attention.measure() and the counters pass).
"""
from __future__ import annotations

from chapters.ch06_attention.attention import RUNGS


def summary(rows) -> list[dict]:
    """measure()'s rows, one line per head dimension and rung: its share of the fastest SDPA backend, lowest and
    highest over the problems, and on how many problems it was the fastest rung of the course."""
    rows = [r for r in rows if "rung" in r and "variant of" not in r]      # the ladder's rungs (VARIANTS apart)
    probs = {(r["seq_len"], r["head_dim"], r["causal"]) for r in rows}
    best = {p: max((r for r in rows if (r["seq_len"], r["head_dim"], r["causal"]) == p), key=lambda r: r["TFLOPS"])["rung"]
            for p in probs}
    out = []
    for d in sorted({r["head_dim"] for r in rows}, reverse=True):
        for name in [g["name"] for g in RUNGS]:
            mine = [r for r in rows if r["head_dim"] == d and r["rung"] == name]
            if mine:
                share = [r["of fastest backend"] for r in mine]
                out.append({"d": d, "rung": name, "of fastest backend, lowest": min(share),
                            "highest": max(share), "TFLOPS, highest": max(r["TFLOPS"] for r in mine),
                            "fastest rung on": f"{sum(best[p] == name for p in probs if p[1] == d)} of "
                                               f"{sum(p[1] == d for p in probs)} problems",
                            "matched float64": all(r["matched float64"] for r in mine)})
    return out


#: the counters each "why" of section 4 rests on (judge.record.counters' summary names)
WHY_COUNTERS = ("tensor pipe %", "issue slots busy %", "ALU pipe %", "registers per thread", "achieved occupancy %")


def counter_rows(ctr) -> list[dict]:
    """The record's ch06.counters as a short table: the counters of WHY_COUNTERS and the top two stall reasons
    (warps stalled per issue)."""
    out = []
    for r in ctr["rows"]:
        s = r.get("summary") or {}
        out.append({"kernel": r["label"], **{k: s.get(k) for k in WHY_COUNTERS},
                    "top stalls (warps per issue)": ", ".join(f"{t['reason']} {t['warps per issue']:.2f}"
                                                              for t in s.get("top stalls", [])[:2])})
    return out


def variant_rows(rows) -> list[dict]:
    """Each VARIANTS build beside the rung it varies, problem by problem: both TFLOPS and the rung's speedup."""
    out = []
    for v in (r for r in rows if "variant of" in r):
        same = [r for r in rows if r.get("rung") == v["variant of"] and all(
            r[k] == v[k] for k in ("batch", "heads", "seq_len", "head_dim", "causal"))]
        if same:
            out.append({"rung": v["variant of"], "variant": v["rung"], "S": v["seq_len"], "d": v["head_dim"],
                        "causal": v["causal"], "rung TFLOPS": same[0]["TFLOPS"], "variant TFLOPS": v["TFLOPS"],
                        "rung / variant": same[0]["TFLOPS"] / v["TFLOPS"]})
    return out

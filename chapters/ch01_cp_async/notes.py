"""notes.py - chapter 1's "why", written from the H200's Nsight Compute counters: the sentences of
chapters/ch01_cp_async.ipynb that explain a figure, computed from the record (markdown), never typed.

Every cause is a (claim, counter predicate) pair in CLAIMS, checked against record section
"ch01.counters" (judge.record.counters: ncu on the H200, 4096^3, one profiled launch per kernel, a
separate pass from the timings: counters, not times). A claim whose predicate the counters contradict
is not printed (the notebook says so instead), and tests/chapters/test_claims.py fails for it. Any machine:

    from chapters.ch01_cp_async import notes
    from judge import record
    ctr = record.figures(notes.SECTION)
    notes.sync_why(ctr, record.figures("ch01.timeline"))    # section 1: where the synchronous kernel waits
    notes.cp_async_why(record.figures("ch01.sgemm"), ctr)  # section 1: what the cp.async step changed
    notes.pipeline_why(ctr)                                # section 5: why a deeper pipeline cannot help
    notes.why_markdown(record.figures("ch01.baselines"), ctr)   # section 6: every kernel's step and its why
    notes.fp32_ceiling(record.figures("ch01.baselines"), ctr, record.figures("device.ceilings"))
                                                           # section 6: the FP32 peak, what is left, bf16
    notes.draw_counters(ctr)                               # FMA-pipe utilisation and stalls per kernel
"""
from __future__ import annotations

import numpy as np

SECTION = "ch01.counters"        # record section of the ncu rows (declared in figures.toml)
#: the kernels in the order of the chapter's table (sgemm.BASELINES), by file stem = row id "ch01.<stem>"
ORDER = ("sgemm_sync", "sgemm_regbuf", "sgemm_cp_async", "handbook_gemm_cp_async", "sgemm_tuned", "sgemm_tuned2")
MARGIN = 0.03                    # a step within 3 % of the kernel before is "level" (run-to-run spread ~1 %)
NOT_SUPPORTED = "(the counters do not support the cause this chapter would give: see the figure)"
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
# H100/H200 SM: 128 FP32 lanes (4 sub-partitions x 32), one FFMA = 2 flops (NVIDIA H100 whitepaper, SM table)
FP32_LANES_PER_SM = 128


def counters(section: dict | None) -> dict:
    """{file stem: the row's summary plus what the claims read from its raw metrics} of ch01.counters."""
    out = {}
    for r in (section or {}).get("rows", []):
        m = {k: v.get("value") for k, v in r.get("metrics", {}).items()}
        s = dict(r["summary"])
        s["stalls"] = {k[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")]: v
                       for k, v in m.items() if k.startswith("smsp__average_warps_issue_stalled_")
                       and k.endswith("_per_issue_active.ratio") and isinstance(v, (int, float))}
        s.update({"FFMA thread instructions": m.get("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"),
                  "blocks per SM (registers limit)": m.get("launch__occupancy_limit_registers"),
                  "smem store wavefronts": m.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
                  "smem load wavefronts": m.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                  "smem load bank conflicts": m.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
                  "SMs": m.get("device__attribute_multiprocessor_count"),
                  "max clock Hz": (m.get("device__attribute_max_gpu_frequency_khz") or 0) * 1e3 or None,
                  "n": int(str(r["size"]).split("^")[0]), "ok": r.get("ok")})     # size "4096^3": the GEMM's n
        out[r["id"].split(".", 1)[1]] = s
    return out


def stall(s: dict, reason: str) -> float:
    """Warps stalled on `reason` per issued instruction (every reason ncu gave, not only the top four)."""
    if reason in s.get("stalls", {}):
        return s["stalls"][reason]
    return next((t["warps per issue"] for t in s["top stalls"] if t["reason"] == reason), 0.0)


def _top(s: dict) -> str:
    t = s["top stalls"][0]
    return f"{t['reason']} ({stall(s, t['reason']):.2f} warps per issue, {100 * t['share']:.0f} % of the stalls)"


def _occ(s: dict) -> str:
    return (f"{s['registers per thread']:.0f} registers per thread, {s['blocks per SM (theoretical)']:.0f} block of "
            f"256 threads per SM (limited by {s['occupancy limited by']})")


def _one_block(s: dict) -> bool:
    return s["blocks per SM (theoretical)"] == 1 and s["blocks per SM (registers limit)"] == 1


def _same_fmas(c: dict, p: dict) -> bool:
    return c["FFMA thread instructions"] == p["FFMA thread instructions"] == float(c["n"]) ** 3


#: (kernel, the kernel it is compared with or None, claim template, predicate). Templates are formatted with
#: c (this kernel's counters), p (the compared one's), stall values ls/bar/ss (_c, _p) and ratios r_*;
#: a predicate returns True when the counters support the claim.
CLAIMS: list[tuple] = [
    ("sgemm_sync", None,
     "{occ_c}: no other block is resident to fill its gaps. Its warps stall most on long_scoreboard "
     "({ls_c:.2f} warps per issued instruction, {share_c:.0f} % of the stalls), a wait for a global load's "
     "result: in this loop the first instruction that needs the `LDG`'s register is the `STS`. The block's "
     "barriers add {bar_c:.2f}; the FMA pipe is busy {c[FMA pipe %]:.0f} % of the active cycles",
     lambda c, p: (c["top stalls"][0]["reason"] == "long_scoreboard" and _one_block(c)
                   and stall(c, "barrier") > 0.3)),
    ("sgemm_regbuf", "sgemm_sync",
     "the loads of tile k+1 are issued before tile k's FMAs and stored after them, so the FMAs cover their "
     "latency: long_scoreboard {ls_p:.2f} -> {ls_c:.2f} warps per issue, barrier {bar_p:.2f} -> {bar_c:.2f}, "
     "FMA pipe {p[FMA pipe %]:.0f} % -> {c[FMA pipe %]:.0f} %, with the same {ffma:.3g} FMAs (n³) and "
     "{occ_c}. The copy still goes through registers and `STS` ({c[smem store wavefronts]:.3g} shared-store "
     "wavefronts)",
     lambda c, p: (stall(c, "long_scoreboard") < stall(p, "long_scoreboard")
                   and stall(c, "barrier") < stall(p, "barrier") and c["FMA pipe %"] > p["FMA pipe %"]
                   and _same_fmas(c, p) and _one_block(c) and c["smem store wavefronts"] > 0)),
    ("sgemm_cp_async", "sgemm_regbuf",
     "`LDGSTS` writes shared memory without a register or an `STS`: shared-store wavefronts "
     "{p[smem store wavefronts]:.3g} -> {c[smem store wavefronts]:.0f}, long_scoreboard {ls_p:.2f} -> {ls_c:.2f} "
     "and barrier {bar_p:.2f} -> {bar_c:.2f} warps per issue, FMA pipe {p[FMA pipe %]:.0f} % -> "
     "{c[FMA pipe %]:.0f} %, the same FMAs. Not occupancy: {c[registers per thread]:.0f} registers against "
     "{p[registers per thread]:.0f}, one block per SM for both (limited by registers). What its warps wait on "
     "now is short_scoreboard ({ss_c:.2f}), the shared-memory reads that feed the FMAs: "
     "{c[smem load bank conflicts]:.3g} bank conflicts in {c[smem load wavefronts]:.3g} load wavefronts",
     lambda c, p: (c["smem store wavefronts"] == 0 < p["smem store wavefronts"]
                   and stall(c, "long_scoreboard") < stall(p, "long_scoreboard")
                   and c["FMA pipe %"] > p["FMA pipe %"] and _same_fmas(c, p) and _one_block(c) and _one_block(p)
                   and c["top stalls"][0]["reason"] == "short_scoreboard")),
    ("handbook_gemm_cp_async", "sgemm_cp_async",
     "the same tiles, stages and inner loop with an alpha/beta epilogue: FMA pipe {p[FMA pipe %]:.0f} % and "
     "{c[FMA pipe %]:.0f} %, the same shared-memory bank conflicts ({p[smem bank conflicts]:.4g} and "
     "{c[smem bank conflicts]:.4g}) and the same top stall, {top_c}",
     lambda c, p: (abs(c["FMA pipe %"] - p["FMA pipe %"]) < 2
                   and abs(c["smem bank conflicts"] / p["smem bank conflicts"] - 1) < 0.01
                   and c["top stalls"][0]["reason"] == p["top stalls"][0]["reason"])),
    ("sgemm_tuned", "sgemm_cp_async",
     "warp tiling and padded rows of A: shared-memory bank conflicts {p[smem bank conflicts]:.3g} -> "
     "{c[smem bank conflicts]:.0f}, load wavefronts {p[smem load wavefronts]:.3g} -> "
     "{c[smem load wavefronts]:.3g} ({r_wf:.2f}x), short_scoreboard {ss_p:.2f} -> {ss_c:.2f} warps per issue, "
     "FMA pipe {p[FMA pipe %]:.0f} % -> {c[FMA pipe %]:.0f} %, with {occ_c}. Its top stall is now {top_c}: "
     "a warp was ready and the scheduler issued another",
     lambda c, p: (c["smem bank conflicts"] < 1e-3 * p["smem bank conflicts"]
                   and stall(c, "short_scoreboard") < stall(p, "short_scoreboard")
                   and c["FMA pipe %"] > p["FMA pipe %"] and _one_block(c))),
    ("sgemm_tuned2", "sgemm_tuned",
     "8x16 outputs per thread on 128x256 tiles: more FMAs per byte read, so shared-memory load wavefronts "
     "{r_wf:.2f}x and L2 bytes {p[L2 bytes]:.3g} -> {c[L2 bytes]:.3g} ({r_l2:.2f}x) for the same FMAs; FMA pipe "
     "{p[FMA pipe %]:.0f} % -> {c[FMA pipe %]:.0f} %, issue slots busy {p[issue slots busy %]:.0f} % -> "
     "{c[issue slots busy %]:.0f} %. It has {c[smem bank conflicts]:.3g} shared-memory bank conflicts again, "
     "but not in its loads ({c[smem load bank conflicts]:.0f}) nor its stores: in the copies' writes, where A "
     "travels as 4-byte `LDGSTS` to be stored K-major (the kernel's header); the step was faster with them",
     lambda c, p: (c["smem load wavefronts"] < p["smem load wavefronts"] and c["L2 bytes"] < 0.8 * p["L2 bytes"]
                   and c["FMA pipe %"] > p["FMA pipe %"] and _same_fmas(c, p)
                   and c["smem load bank conflicts"] < 1e-3 * c["smem bank conflicts"]
                   and c["smem store wavefronts"] == 0)),
]


def claim_holds(kernel: str, ctr: dict | None) -> bool | None:
    """Whether the record's counters support `kernel`'s claim (None: not measured)."""
    by = counters(ctr)
    name, before, _, pred = next((x for x in CLAIMS if x[0] == kernel), (None,) * 4)
    if name is None:
        raise KeyError(kernel)
    if name not in by or (before and before not in by):
        return None
    return bool(pred(by[name], by[before] if before else None))


def claim_text(kernel: str, ctr: dict | None) -> str | None:
    """The claim for `kernel`, formatted from the counters, or None when they contradict it (or are missing)."""
    if not claim_holds(kernel, ctr):
        return None
    by = counters(ctr)
    name, before, template, _ = next(x for x in CLAIMS if x[0] == kernel)
    c, p = by[name], by[before] if before else None
    f = {"c": c, "p": p, "occ_c": _occ(c), "top_c": _top(c), "share_c": 100 * c["top stalls"][0]["share"],
         "ffma": c["FFMA thread instructions"]}
    for key, reason in (("ls", "long_scoreboard"), ("bar", "barrier"), ("ss", "short_scoreboard")):
        f[f"{key}_c"] = stall(c, reason)
        f[f"{key}_p"] = stall(p, reason) if p else None
    if p:
        f.update(r_wf=c["smem load wavefronts"] / p["smem load wavefronts"], r_l2=c["L2 bytes"] / p["L2 bytes"])
    text = template.format(**f).replace("shared_mem", "shared memory")
    return text[0].upper() + text[1:]


def verdict(ratio: float, margin: float = MARGIN) -> str:
    return "faster" if ratio > 1 + margin else "slower" if ratio < 1 - margin else "level"


def step_verdicts(baselines: dict | None) -> list[tuple]:
    """(kernel stem, n, TFLOPS ratio to the kernel it is compared with in CLAIMS, verdict) from ch01.baselines."""
    out = []
    rows = (baselines or {}).get("rows", [])
    for n in sorted({r["n"] for r in rows}):
        by = {r["file"].removesuffix(".cu"): r for r in rows if r["n"] == n and r.get("file")}
        for name, before, _, _ in CLAIMS:
            if before and name in by and before in by:
                x = by[name]["TFLOPS"] / by[before]["TFLOPS"]
                out.append((name, n, x, verdict(x)))
    return out


def why_markdown(baselines: dict | None, ctr: dict | None) -> str:
    """Every kernel of the chapter's table: its step against the kernel it is compared with (from the timings)
    and its why (from the counters), as a markdown list."""
    if not baselines:
        return "*(not recorded yet on an H200)*"
    steps = step_verdicts(baselines)
    lines = []
    for i, (name, before, _, _) in enumerate(CLAIMS):
        step = "; ".join(f"{x:.2f}x at {n}³ ({v})" for k, n, x, v in steps if k == name)
        head = f"{i + 1}. **{name}**" + (f" against {before}: {step}." if before else ": the first kernel.")
        held = claim_holds(name, ctr)
        why = ("(counters not recorded)" if held is None else NOT_SUPPORTED if not held
               else claim_text(name, ctr) + ".")
        lines.append(f"{head} {why}")
    return ("Nsight Compute on the H200, 4096³ (record section ch01.counters: one profiled launch per kernel, a "
            "separate pass from the timings; stalls are warps stalled per issued instruction):\n\n" + "\n".join(lines))


def sync_why(ctr: dict | None, timeline: dict | None) -> str:
    """Section 1: where the synchronous kernel's warps wait, and the first copy's latency (section 5's figure)."""
    lat = (f" A first copy took {timeline['L_ns']:.0f} ns on the H200 (section 5 measures it)."
           if timeline and "L_ns" in timeline else "")
    text = claim_text("sgemm_sync", ctr)
    if text is None:
        return ("*The H200's counters (ch01.counters) " + ("are not recorded yet" if claim_holds("sgemm_sync", ctr)
                is None else "do not show the synchronous kernel waiting on its loads") + ".*" + lat)
    return f"On the H200, Nsight Compute at 4096³: `sgemm_sync` has {text[0].lower() + text[1:]}.{lat}"


def cp_async_why(sgemm_figs: dict | None, ctr: dict | None) -> str:
    """Section 1: the cp.async kernel's step over the synchronous one (timings) and what changed (counters)."""
    by = counters(ctr)
    out = []
    if sgemm_figs:
        rows = sgemm_figs["rows"]
        steps = []
        for n in sorted({r["n"] for r in rows}):
            s = next(r for r in rows if r["n"] == n and r["kernel"] == "sync loads")
            a = next(r for r in rows if r["n"] == n and r["kernel"] == "cp.async, 3 stages")
            steps.append(f"{a['TFLOPS'] / s['TFLOPS']:.2f}x at {n}³ ({a['of cuBLAS']:.2f} of cuBLAS against "
                         f"{s['of cuBLAS']:.2f})")
        out.append("- The cp.async kernel ran " + "; ".join(steps) + " of the synchronous one.")
    s, c = by.get("sgemm_sync"), by.get("sgemm_cp_async")
    if not (s and c):
        out.append("- *(Nsight Compute counters not recorded yet on an H200.)*")
        return "\n".join(out)
    same = _same_fmas(c, s)
    ok = (same and stall(c, "long_scoreboard") < stall(s, "long_scoreboard")
          and stall(c, "barrier") < stall(s, "barrier") and c["FMA pipe %"] > s["FMA pipe %"])
    if not ok:
        out.append(f"- {NOT_SUPPORTED}")
        return "\n".join(out)
    out.append(f"- The same FMAs: Nsight Compute counts {c['FFMA thread instructions']:.4g} FP32 FMA thread "
               f"instructions in each, n³ at n = {c['n']}. The gain comes from the copy: long_scoreboard stalls "
               f"{stall(s, 'long_scoreboard'):.2f} -> {stall(c, 'long_scoreboard'):.2f} warps per issued instruction, "
               f"barrier {stall(s, 'barrier'):.2f} -> {stall(c, 'barrier'):.2f}, shared-store wavefronts "
               f"{s['smem store wavefronts']:.3g} -> {c['smem store wavefronts']:.0f}; the FMA pipe is busy "
               f"{s['FMA pipe %']:.0f} % -> {c['FMA pipe %']:.0f} % of the active cycles.")
    if _one_block(s) and _one_block(c):
        out.append(f"- Not occupancy: {s['registers per thread']:.0f} and {c['registers per thread']:.0f} registers "
                   f"per thread, one block per SM for both (limited by registers, ncu's occupancy limits).")
    else:
        out.append(f"- Occupancy differs: {_occ(s)} against {_occ(c)}; part of the step may come from it.")
    if c["top stalls"][0]["reason"] == "short_scoreboard":
        out.append(f"- What the cp.async kernel waits on now is short_scoreboard ({stall(c, 'short_scoreboard'):.2f}), "
                   f"the shared-memory reads that feed the FMAs, with {c['smem load bank conflicts']:.3g} bank conflicts "
                   f"in {c['smem load wavefronts']:.3g} load wavefronts: section 6 removes them.")
    return "\n".join(out)


def pipeline_why(ctr: dict | None) -> str:
    """Section 5: the copies are hidden and what the warps wait on instead (why more stages cannot help)."""
    by = counters(ctr)
    s, c = by.get("sgemm_sync"), by.get("sgemm_cp_async")
    if not (s and c):
        return "*(Nsight Compute counters not recorded yet on an H200.)*"
    if not (stall(c, "long_scoreboard") < 0.25 * stall(s, "long_scoreboard")
            and c["top stalls"][0]["reason"] != "long_scoreboard" and c["FMA pipe %"] < 90):
        return f"*{NOT_SUPPORTED}*"
    return (f"The counters say the same from the whole GPU (Nsight Compute, 4096³): the 3-stage kernel's warps wait "
            f"on global loads (long_scoreboard) {stall(c, 'long_scoreboard'):.2f} warps per issued instruction, against "
            f"{stall(s, 'long_scoreboard'):.2f} for the synchronous kernel, so the copies are hidden. The kernel is not "
            f"limited by the FMAs either (FMA pipe busy {c['FMA pipe %']:.0f} %): its top stall is {_top(c)}, the "
            f"shared-memory reads. More stages add copies in flight, and nothing waits on copies: section 4's flat "
            f"curve.")


def fp32_ceiling(baselines: dict | None, ctr: dict | None, ceilings: dict | None = None) -> str:
    """Section 6: the FP32 peak from the SM count and clock ncu read, the fractions of it reached (timings),
    what the best kernels' counters say about the rest, and (from device.ceilings) cuBLAS's bf16 GEMM on the
    tensor cores against its FP32 one."""
    by = counters(ctr)
    t, t2 = by.get("sgemm_tuned"), by.get("sgemm_tuned2")
    if not (baselines and t and t["SMs"] and t["max clock Hz"]):
        return "*(not recorded yet on an H200)*"
    peak = t["SMs"] * FP32_LANES_PER_SM * 2 * t["max clock Hz"] / 1e12
    rows = [r for r in baselines["rows"] if r["n"] == 4096]
    cub = next(r for r in rows if r["kernel"] == "cuBLAS FP32")
    best = {r["file"].removesuffix(".cu"): r for r in rows if r.get("file")}
    out = [f"The H200's FP32 peak is {t['SMs']:.0f} SMs × {FP32_LANES_PER_SM} FMA lanes × 2 flops × the clock: "
           f"{peak:.1f} TFLOPS at {t['max clock Hz'] / 1e9:.2f} GHz (SM count and clock as ncu read them). At 4096³ "
           f"cuBLAS reached {cub['TFLOPS'] / peak:.2f} of it, `sgemm_tuned` {best['sgemm_tuned']['TFLOPS'] / peak:.2f}, "
           f"`sgemm_tuned2` {best['sgemm_tuned2']['TFLOPS'] / peak:.2f}."]
    if t2:
        out.append(f"What the counters show of the rest: the FMA pipe is busy {t['FMA pipe %']:.0f} % "
                   f"(`sgemm_tuned`) and {t2['FMA pipe %']:.0f} % (`sgemm_tuned2`) of the active cycles, issue slots "
                   f"{t['issue slots busy %']:.0f} % and {t2['issue slots busy %']:.0f} %; their top stalls are "
                   f"{_top(t)} and {_top(t2)}, then {t['top stalls'][1]['reason']} and "
                   f"{t2['top stalls'][1]['reason']}. No counter recorded here "
                   f"separates the causes below that (register-bank conflicts, the order of the loads among the "
                   f"FMAs), so this chapter names no cause for the last step to cuBLAS.")
    if ceilings and ceilings.get("bf164096_tflops") and ceilings.get("sgemm4096_tflops"):
        bf16, fp32 = ceilings["bf164096_tflops"], ceilings["sgemm4096_tflops"]
        out.append(f"And FP32 on CUDA cores is the slow lane of this GPU: cuBLAS's bf16 GEMM on the tensor cores ran "
                   f"{bf16:.0f} TFLOPS at 4096³, {bf16 / fp32:.0f}x its FP32 GEMM (record section device.ceilings).")
    return " ".join(out)


def draw_counters(ctr: dict | None):
    """Per kernel: FMA-pipe utilisation (left) and the warp-stall breakdown, warps stalled per issued
    instruction for the reasons that are in any kernel's top four (right). A matplotlib Figure, or None."""
    from matplotlib.figure import Figure
    by = counters(ctr)
    names = [k for k in ORDER if k in by]
    if not names:
        return None
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    y = np.arange(len(names))[::-1]
    ax1.barh(y, [by[k]["FMA pipe %"] for k in names], color="#4c72b0")
    for yy, k in zip(y, names):
        ax1.text(by[k]["FMA pipe %"] + 1, yy, f"{by[k]['FMA pipe %']:.0f} %  ({by[k]['registers per thread']:.0f} regs, "
                 f"{by[k]['blocks per SM (theoretical)']:.0f} block/SM)", va="center", fontsize=7)
    ax1.set_yticks(y, names, fontsize=8)
    ax1.set_xlim(0, 130)
    ax1.set_xlabel("FMA pipe busy, % of peak (sm__pipe_fma_cycles_active)")
    reasons = list(dict.fromkeys(t["reason"] for k in names for t in by[k]["top stalls"] if t["reason"] != "selected"))
    left = np.zeros(len(names))
    for i, reason in enumerate(reasons):
        w = np.array([stall(by[k], reason) for k in names])
        ax2.barh(y, w, left=left, color=f"C{i}", label=reason)
        left += w
    ax2.set_yticks(y, [""] * len(names))
    ax2.set_xlabel("warps stalled per issued instruction, by reason")
    ax2.legend(fontsize=7, loc="lower right")
    fig.suptitle("Nsight Compute on the H200, 4096³, one profiled launch per kernel (counters, not times)", fontsize=10)
    return fig

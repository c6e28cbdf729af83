"""notes.py - the sentences of chapter 5 that quote figures, computed from the figures (markdown).

The notebook chapters/ch05_blackwell.ipynb displays them with IPython.display.Markdown; no figure is typed
by hand. Any machine (pure Python):

    from chapters.ch05_blackwell import notes
    notes.formats_findings(tables, ceil)        # section 3: what the error tables showed
    notes.fp8_against_bf16(figs, pred)          # section 4: cuBLAS FP8 vs bf16, against the input-rounding prediction
    notes.wgmma_fp8_note(rows)                  # section 4: the course's FP8 kernel, and what it was timed against
    notes.like_for_like_note(res)               # section 4: fp8.compare_run()'s result, like for like
    notes.like_for_like_rows(res)               # its tables, columns in a fixed order
    notes.fp8_counters(c), notes.fp8_why(c)     # section 4: the FP8 kernels' profiler counters (ch05.counters)
    notes.ledger_rows(c), notes.ledger_why(c)   # section 4: warp samples per instruction (the counters' ledgers)
"""
from __future__ import annotations

#: Columns of the recorded tables, in the order they were measured (the record stores JSON with sorted
#: keys, so a table built from a recorded row must name its columns).
WGMMA_FP8_COLUMNS = ("n", "kernel", "TFLOPS", "of _scaled_mm", "rel_err", "ok")
SPEED_COLUMNS = ("n", "path", "what", "TFLOPS", "ms", "p10_ms", "p90_ms", "rel_err", "ok")
ACCURACY_COLUMNS = ("inputs", "K", "path", "rel_err", "floor (bf16 rounding)")


def ordered(rows, columns) -> list[dict]:
    """rows with only `columns`, in that order (missing ones left out)."""
    return [{k: r[k] for k in columns if k in r} for r in rows]


def formats_findings(tables: dict, ceil: dict) -> str:
    """Section 3: what the error tables of judge.hw.formats.error_table showed, one line per finding."""
    def err(name, fmt, block, rule="floor"):
        rows = (tables if rule == "floor" else ceil)[name]
        return next(x["rel_err"] for x in rows if x["format"] == fmt and x["block"] == block)
    wide = ("MX e4m3", "MX e5m2", "MX e3m2", "MX e2m3", "MX e2m1")
    out = ["- Normal tensor, blocks of 32, floor rule: "
           + ", ".join(f"{f} {100 * err('normal', f, 32):.1f} %" for f in wide) + "."]
    e5, e3 = err("normal", "MX e5m2", 32), err("normal", "MX e3m2", 32)
    out.append(f"- E5M2 and E3M2 (both 2 mantissa bits): {100 * e5:.2f} % and {100 * e3:.2f} %: "
               + ("the same to within 5 % (their curves lie on top of each other)." if abs(e5 - e3) < 0.05 * max(e5, e3)
                  else "they differ."))
    fl = [err("normal", "MX e4m3", b) for b in (16, 128)]
    ce = [err("normal", "MX e4m3", b, "ceil") for b in (16, 128)]
    out.append(f"- MX e4m3, block 16 → 128: floor rule {100 * fl[0]:.2f} % → {100 * fl[1]:.2f} % "
               f"({'grows as the block shrinks' if fl[0] > fl[1] else 'does not grow as the block shrinks'}); "
               f"ceil rule {100 * ce[0]:.2f} % → {100 * ce[1]:.2f} %.")
    for name in tables:
        parts = []
        for f in ("MX e2m3", "MX e2m1"):
            a, b = err(name, f, 16), err(name, f, 128)
            parts.append(f"{f} {100 * a:.1f} % at block 16, {100 * b:.1f} % at 128 "
                         f"({'grows' if b > a else 'does not grow'} with the block)")
        nv = next(x["rel_err"] for x in tables[name] if x["format"] == "NVFP4")
        mx = err(name, "MX e2m1", 32)
        bf = next(x["rel_err"] for x in tables[name] if x["format"] == "bf16")
        lo = min(x["rel_err"] for x in tables[name] if x["format"] != "bf16")
        out.append(f"- {name}: " + "; ".join(parts) + f"; NVFP4 {100 * nv:.1f} % against MXFP4 (32) {100 * mx:.1f} % "
                   f"({'NVFP4 better' if nv < mx else 'NVFP4 not better'}); the best scaled format has "
                   f"{lo / bf:.0f}× bf16's error ({100 * bf:.2f} %).")
    return "\n".join(out)


def fp8_against_bf16(figs: dict | None, pred: dict) -> str:
    """Section 4: cuBLAS FP8 (unit scales) against bf16, and the measured error against what rounding
    the inputs to E4M3 predicts. Input rounding is far larger than accumulation error here, so this
    comparison cannot see accumulation at all: the exact-E4M3 run of like_for_like_note can."""
    if not figs:
        return "*(not recorded yet on an H200)*"
    out = []
    for n, r in figs["sizes"].items():
        p = pred[int(n)]
        ratio = r["fp8_rel_err"] / p["fp8_rel_err"]
        where = ("the size input rounding alone predicts" if 0.5 <= ratio <= 2 else
                 "well above the input-rounding prediction" if ratio > 2 else
                 "BELOW the prediction: suspect the measurement")
        speed = "faster" if r["speedup"] > 1.05 else "NOT faster" if r["speedup"] < 0.95 else "the same"
        out.append(f"- n = {n}: FP8 ran {r['fp8_tflops']:.0f} TFLOPS against bf16's {r['bf16_tflops']:.0f} "
                   f"({r['speedup']:.2f}×, {speed}); its relative error {r['fp8_rel_err']:.1e} is "
                   f"{r['fp8_rel_err'] / r['bf16_rel_err']:.0f}× bf16's and {ratio:.2f}× the prediction from "
                   f"rounding the inputs ({p['fp8_rel_err']:.1e}): {where}.")
    out.append("- Input rounding (E4M3 keeps 3 mantissa bits) is so much larger than any accumulation error that "
               "this test cannot tell how the tensor cores accumulate; the run on inputs that are exact E4M3 "
               "values, below, can.")
    return "\n".join(out)


def wgmma_fp8_note(rows: list | None) -> str:
    """Section 4: the course's FP8 kernel as timed by fp8.wgmma_fp8(), saying what each ratio compares."""
    if not rows:
        return "*(not recorded yet on an H200)*"
    out = []
    for r in rows:
        if not r["kernel"].startswith("gemm_fp8"):
            continue
        promoted = "PROMOTE=" in r["kernel"]
        against = ("the default `torch._scaled_mm`, which also promotes: like for like" if promoted else
                   "the default `torch._scaled_mm`, which promotes its partial sums and this kernel does not: "
                   "not like for like (see the next cell)")
        out.append(f"- n = {r['n']}: {r['kernel']}: {r['TFLOPS']:.0f} TFLOPS, {r['of _scaled_mm']:.2f} of {against}; "
                   f"relative error {r['rel_err']:.2e}, {'within' if r['ok'] else 'OUTSIDE'} the 2⁻⁷ bound.")
    return "\n".join(out)


def fp8_counters(counters: dict | None) -> dict:
    """{(PROMOTE level, n): the row's summary plus "elapsed cycles"} from record.figures("ch05.counters")
    (judge.record.counters: gemm_fp8.cu under Nsight Compute, one checked launch each)."""
    out = {}
    for r in (counters or {}).get("rows", []):
        if "summary" not in r or not r["label"].startswith("gemm_fp8.cu PROMOTE="):
            continue
        key = (int(r["label"].rsplit("=", 1)[1]), int(r["size"].split("^")[0]))
        out[key] = {**r["summary"], "elapsed cycles": r["metrics"].get("sm__cycles_elapsed.avg", {}).get("value")}
    return out


#: The claims of section 4 on the FP8 kernels, each with the test the counters must pass for it to be
#: shown (otherwise the note says that the record does not support it): (levels compared, predicate).
FP8_CLAIMS = {
    "tiles": ((1, 2), lambda a, b: b["TMA load bytes"] < 0.8 * a["TMA load bytes"]
              and b["tensor pipe %"] > a["tensor pipe %"] and b["elapsed cycles"] < a["elapsed cycles"]),
    "cost": ((0, 2), lambda a, b: a["tensor pipe %"] > b["tensor pipe %"] and b["FMA pipe %"] > 3 * a["FMA pipe %"]
             and b["issue slots busy %"] > a["issue slots busy %"]),
}


def fp8_why(counters: dict | None) -> str:
    """Section 4: why PROMOTE=2 beats PROMOTE=1 and what promoting still costs, in sentences computed from
    ch05.counters; a claim the counters contradict is not shown as true, it is named as unsupported."""
    by = fp8_counters(counters)
    if not by:
        return "*(the FP8 kernels' counters are not recorded yet on an H200)*"
    out = []
    for n in sorted({n for _, n in by}):
        a, b = by.get((1, n)), by.get((2, n))
        if not (a and b):
            continue
        if not FP8_CLAIMS["tiles"][1](a, b):
            out.append(f"- {n}³: the record's counters do NOT support the explanation below (PROMOTE=2's wider "
                       f"tiles feeding the tensor pipe better): see ch05.counters.")
            continue
        out.append(f"- {n}³, PROMOTE=1 → PROMOTE=2: TMA brings {b['TMA load bytes'] / 1e9:.2f} GB instead of "
                   f"{a['TMA load bytes'] / 1e9:.2f} ({b['TMA load bytes'] / a['TMA load bytes']:.2f}×: a 128 × 256 tile "
                   f"loads (128 + 256) / (128 · 256) bytes of operand per output, 0.75× a 128 × 128 tile's); L2 "
                   f"serves {b['L2 bytes'] / 1e9:.2f} GB instead of {a['L2 bytes'] / 1e9:.2f}; the tensor pipe is busy "
                   f"{b['tensor pipe %']:.0f} % of the SMs' active cycles instead of {a['tensor pipe %']:.0f} %, and "
                   f"the kernel takes {b['elapsed cycles'] / a['elapsed cycles']:.2f}× the cycles.")
    a, b = by.get((0, 4096)), by.get((2, 4096))
    if a and b:
        if FP8_CLAIMS["cost"][1](a, b):
            out.append(f"- What promoting still costs (4096³): the plain kernel keeps the tensor pipe "
                       f"{a['tensor pipe %']:.0f} % busy, PROMOTE=2 {b['tensor pipe %']:.0f} %. PROMOTE=2's FADDs "
                       f"keep the FMA pipe {b['FMA pipe %']:.0f} % busy (plain: {a['FMA pipe %']:.0f} %) and its "
                       f"issue slots {b['issue slots busy %']:.0f} % (plain: {a['issue slots busy %']:.0f} %): "
                       f"which fits what the kernel does: a warpgroup adding a partial issues no wgmma meanwhile, so "
                       f"the other warpgroup's wgmma alone feed the tensor pipe. (The plain kernel also runs in clusters of 2 that share B: "
                       f"L2 serves it {a['L2 bytes'] / 1e9:.2f} GB against PROMOTE=2's {b['L2 bytes'] / 1e9:.2f}.)")
        else:
            out.append("- 4096³: the record's counters do NOT support the explanation of what promoting costs "
                       "(tensor pipe, FMA pipe, issue slots): see ch05.counters.")
    return "\n".join(out)


#: The counters pass's ledgers (counters.LEDGERED, this chapter's) that section 4 reads, and what it calls them
LEDGERS = {"ch05.fp8_promote2": "PROMOTE=2 (descriptors stepped)",
           "ch05.fp8_promote2_anew": "PROMOTE=2, descriptors built anew",
           "ch05.cublas_fp8_default": "cuBLAS FP8, default (promoting)"}
LEDGER_FAMILIES = ("wgmma", "wgmma fence/wait", "uniform datapath", "FP32 add/mul/fma", "barrier or mbarrier",
                   "shared/global memory", "other")


def ledgers(counters: dict | None) -> dict:
    """{counters id: ledger} for the LEDGERS whose ledger was recorded and read."""
    return {r["id"]: r["ledger"] for r in (counters or {}).get("rows", [])
            if r.get("id") in LEDGERS and isinstance(r.get("ledger"), dict) and "by family" in r["ledger"]}


def ledger_rows(counters: dict | None) -> list[dict]:
    """One row per ledger: the kernel and its warp samples' shares by kind of instruction, in %."""
    return [{"kernel": LEDGERS[k], "samples": int(v["samples"]),
             **{f: round(100 * v["by family"].get(f, 0.0), 1) for f in LEDGER_FAMILIES}}
            for k, v in ledgers(counters).items()]


def _uniform(ledger: dict) -> float:
    return ledger["by family"].get("uniform datapath", 0.0)


#: The claim of section 4 on stepped descriptors: built anew, the uniform datapath holds a larger share of the
#: consumers' warp samples than stepped (by 1.5x and at least a point), and stepped, no more than cuBLAS's by 1.5x.
LEDGER_CLAIM = (lambda anew, stepped, lib: _uniform(anew) >= max(1.5 * _uniform(stepped), _uniform(stepped) + 0.01)
                and _uniform(stepped) <= 1.5 * _uniform(lib) + 0.01)


def ledger_why(counters: dict | None) -> str:
    """Section 4: where PROMOTE=2's warp samples sit with descriptors built anew and stepped, beside cuBLAS's
    promoting kernel, from the ledgers of ch05.counters; the claim stated only if the ledgers support it."""
    got = ledgers(counters)
    if not all(k in got for k in LEDGERS):
        return "*(the per-instruction ledgers are not recorded yet on an H200)*"
    anew, stepped, lib = got["ch05.fp8_promote2_anew"], got["ch05.fp8_promote2"], got["ch05.cublas_fp8_default"]
    top = next((x for x in anew["top"] if x["family"] == "uniform datapath"), None)
    what = (f"uniform-datapath instructions (U…, R2UR: where a descriptor is built) hold {100 * _uniform(anew):.1f} % of "
            f"the warp samples of PROMOTE=2 with descriptors built anew, {100 * _uniform(stepped):.1f} % with them "
            f"stepped, and {100 * _uniform(lib):.1f} % of cuBLAS's promoting kernel's")
    if not LEDGER_CLAIM(anew, stepped, lib):
        return (f"- 4096³: {what}. The record's ledgers do NOT support the explanation above (descriptors rebuilt on "
                f"the uniform datapath before every QGMMA): see ch05.counters.")
    return (f"- 4096³ (Nsight Compute's SourceCounters, one checked launch each): {what}"
            + (f"; the most sampled of them, built anew: `{top['sass']}` ({100 * top['share']:.1f} %)." if top else ".")
            + f" The wgmma themselves (QGMMA) hold {100 * anew['by family'].get('wgmma', 0):.0f} % and "
              f"{100 * stepped['by family'].get('wgmma', 0):.0f} %, the FADDs of the promotion "
              f"{100 * anew['by family'].get('FP32 add/mul/fma', 0):.0f} % and "
              f"{100 * stepped['by family'].get('FP32 add/mul/fma', 0):.0f} %.")


def like_for_like_rows(res: dict) -> tuple[list, list]:
    """(speed rows, accuracy rows) of fp8.compare_run()'s result, columns in a fixed order."""
    speed = [r for s in res.get("speed", {}).get("sizes", {}).values() for r in s["rows"]]
    return ordered(speed, SPEED_COLUMNS), ordered(res.get("accuracy", []), ACCURACY_COLUMNS)


def _clock(s: dict) -> str:
    c = s.get("clock_during") or {}
    reasons = c.get("reasons_seen") or []
    if "sm_mhz_min" not in c:
        return "clock not sampled"
    mhz = (f"{c['sm_mhz_min']} MHz" if c["sm_mhz_min"] == c["sm_mhz_max"]
           else f"{c['sm_mhz_min']}-{c['sm_mhz_max']} MHz")
    return f"SM clock {mhz} during the timed rounds, " + (
        "throttle reasons: " + ", ".join(map(str, reasons)) if reasons else "no throttle reason seen")


def like_for_like_note(res: dict | None) -> str:
    """fp8.compare_run()'s result in sentences: each kernel against the cuBLAS path that accumulates as it
    does, with the clock beside it, and the accumulation error on exact-E4M3 inputs as K grows."""
    if not res:
        return "*(not recorded yet on an H200)*"
    out = []
    for key, e in res.get("errors", {}).items():
        out.append(f"- {key}: FAILED in the record run: {e}")
    for n, s in res.get("speed", {}).get("sizes", {}).items():
        pairs = "; ".join(f"{p['kernel']} is {p['speed ratio (medians)']:.3f}× {p['against']} "
                          f"(per round {p['per-round ratio p10']:.3f} to {p['per-round ratio p90']:.3f})"
                          for p in s["pairs"])
        out.append(f"- n = {n} ({s['scales']}, interleaved launch by launch): {pairs}. {_clock(s)}.")
    acc = res.get("accuracy", [])
    for inputs in dict.fromkeys(a["inputs"] for a in acc):
        rows = [a for a in acc if a["inputs"] == inputs]
        ks = sorted({a["K"] for a in rows})

        def errs(path):
            return [next((a["rel_err"] for a in rows if a["K"] == k and a["path"] == path), float("nan")) for k in ks]
        floor = [next(a["floor (bf16 rounding)"] for a in rows if a["K"] == k and a["path"] == "kernel") for k in ks]
        kern, prom, fast, dflt = errs("kernel"), errs("promote"), errs("fast"), errs("default")
        grows = all(b > a for a, b in zip(kern, kern[1:]))
        out.append(f"- Exact E4M3 inputs ({inputs}), K = {' / '.join(map(str, ks))}: the unpromoted kernel errs by "
                   f"{' / '.join(f'{x:.2g}' for x in kern)} ({'growing with K' if grows else 'not growing with K'}; "
                   f"`use_fast_accum=True`: {' / '.join(f'{x:.2g}' for x in fast)}), the promoted paths by "
                   f"{' / '.join(f'{x:.3g}' for x in prom)} (kernel) and {' / '.join(f'{x:.3g}' for x in dflt)} "
                   f"(cuBLAS default), against {' / '.join(f'{x:.3g}' for x in floor)} from rounding the exact "
                   f"product to bf16 alone.")
    return "\n".join(out)

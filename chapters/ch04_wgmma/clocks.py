"""Chapter 4 at the power cap: is a GEMM short of cuBLAS because it needs more cycles, or because it is
given a lower clock?

    from chapters.ch04_wgmma import clocks
    figs = clocks.measure()                 # an H100/H200: each kernel run back to back, clock and energy read
    clocks.rows(figs)                       # any machine: per size and kernel, its speed, cycles and clock
    clocks.claims(figs, counters)           # any machine: what the record supports, in words (or why not)
    clocks.draw(figs)                       # any machine: speed = cycles x clock, kernel by kernel
    clocks.clock_fit(); clocks.draw_fit()   # any machine: the record's profiled clock against L2 traffic
    python -m chapters.ch04_wgmma.clocks      # an H100/H200: the table

The time of a kernel is the cycles it needs divided by the clock it is given. On an H200 the SM clock is
not fixed: when a GEMM keeps every tensor core busy the board reaches its power limit (700 W on the SXM
part) and the driver lowers the SM clock until the power fits (NVML reports "SW power cap" as the reason).
Then two kernels that need the same cycles can differ in time: the one that spends more energy per cycle
is given the lower clock. judge.gpu.power.sustained reads both halves: each kernel runs back to back for
SECONDS while a thread samples the SM clock, and the board's energy counter is read before and after.

Each kernel is run twice, the list in one order and then reversed, on two fresh random input sets; C is
poisoned before and compared with float64 after (ladder.compare_output). No L2 flush between runs: this is
a training loop's steady state, not the timing protocol of the ladder's table (judge.gpu.timing).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from chapters.ch04_wgmma import ladder  # noqa: E402  chapters/ch04_wgmma/ladder.py: the rungs' launchers, inputs and checks

CUBLAS = "cuBLAS bf16 (torch)"
KERNELS = [CUBLAS, ladder.BEST, "ping-pong", ladder.BEST_WITHOUT_CLUSTER]
SIZES = (4096, 8192)
SECONDS = 1.5
BOOST_MHZ = 1980          # an H200 SXM's maximum SM clock (nvidia-smi -q -d CLOCK: Max Clocks, SM)


def _back_to_back(n: int, names: list, launches: dict, ins: list, check, seconds: float, rd) -> list[dict]:
    """judge.gpu.power.sustained of every launch (called as launch(*ins[i % len(ins)])) in the order given, then
    reversed; check(name, index of the input set the last run used) -> (ok, rel_err) after each."""
    from judge.gpu import power
    out = []
    for order in (names, names[::-1]):
        for name in order:
            r = power.sustained(launches[name], ins, seconds=seconds, work=float(n) ** 3, rd=rd)
            ok, err = check(name, (r["runs"] - 1) % len(ins))
            out.append({"n": n, "kernel": name, "ok": bool(ok), "rel_err": err, **r})
    return out


def _bf16_at(n: int, names: list, seconds: float, rd) -> list[dict]:
    seeds = [int.from_bytes(os.urandom(4), "little") for _ in range(2)]
    sets = [ladder._inputs(n, n, n, s) for s in seeds]
    c = ladder._poisoned(n, n)
    launches = {k: ladder.cublas_launcher() if k == CUBLAS else ladder.launcher(k, n, n, n) for k in names}

    def poisoned(f):
        def go(a, b, c_):
            c_.fill_(float("nan"))
            f(a, b, c_)
        return go

    def check(name, i):
        ladder._sync()
        cmp = ladder.compare_output(c, *sets[i], case=f"{name} n={n}, run back to back", seed=seeds[0])
        return cmp.ok, cmp.rel_err
    return _back_to_back(n, names, {k: poisoned(f) for k, f in launches.items()}, [(a, b, c) for a, b in sets],
                         check, seconds, rd)


def measure(sizes=SIZES, kernels=None, seconds: float = SECONDS) -> dict:
    """Every bf16 kernel at n^3 for each n: {"runs": [one row per run], "rows": rows() of them, "boost MHz",
    "seconds"}; each run row has the figures of judge.gpu.power.sustained plus n, kernel, ok, rel_err."""
    from judge.gpu import power
    rd = power.reader()
    runs = []
    for n in sizes:
        runs += _bf16_at(n, list(kernels or KERNELS), seconds, rd)
    figs = {"runs": runs, "boost MHz": BOOST_MHZ, "seconds": seconds}
    return {**figs, "rows": rows(figs)}


#: FP8 (chapter 5): gemm_fp8.cu against the torch._scaled_mm path it is judged by (fp8.PAIRS)
FP8_BASE = {"gemm_fp8.cu": "_scaled_mm, use_fast_accum=True", "gemm_fp8.cu, PROMOTE=2": "_scaled_mm, default"}


def _fp8_at(fp8, n: int, seconds: float, rd) -> list[dict]:
    import torch
    sets = [fp8._fp8_set(n, n, n, int.from_bytes(os.urandom(4), "little")) for _ in range(2)]
    cs = [torch.empty(n, n, device="cuda", dtype=torch.bfloat16) for _ in sets]
    ins = [(s["qa"], s["qb"], c, s["sa"], s["sb"], *fp8.row_scales(s)) for s, c in zip(sets, cs)]
    paths = fp8._scaled_mm_paths(rowwise=True)
    kernels = {"gemm_fp8.cu": fp8.fp8_launcher(n, n, n, promote=0),
               "gemm_fp8.cu, PROMOTE=2": fp8.fp8_launcher(n, n, n, promote=fp8.PROMOTED)}
    outs: dict = {}                              # _scaled_mm returns its C rather than writing ours

    def run(name):
        def go(qa, qb, c, sa, sb, ra, rb):
            c.fill_(float("nan"))
            if name in kernels:
                kernels[name](qa, qb, c, sa, sb)
            else:
                outs[name] = paths["fast" if "fast" in name else "default"](qa, qb, c, sa, sb, ra, rb)
        return go

    def check(name, i):
        torch.cuda.synchronize()
        err, bad = fp8._rel_err64(outs[name] if name in outs else cs[i], sets[i]["ref"])
        return bad == 0 and err <= fp8.REL_TOL, err
    names = [x for pair in FP8_BASE.items() for x in pair]
    return _back_to_back(n, names, {k: run(k) for k in names}, ins, check, seconds, rd)


def measure_fp8(sizes=SIZES, seconds: float = SECONDS) -> dict:
    """gemm_fp8.cu, plain and PROMOTE=2, and torch._scaled_mm's two paths (row/column scales, bf16 out), each
    run back to back at n^3 on two fresh block-scaled input sets; C poisoned before every run, checked
    against float64 (fp8.REL_TOL) after. The same figures as measure()."""
    import torch

    from judge.gpu import power
    from chapters.ch05_blackwell import fp8                                   # chapters/ch05_blackwell/fp8.py: the launchers, inputs, paths
    rd = power.reader()
    runs = []
    for n in sizes:
        runs += _fp8_at(fp8, n, seconds, rd)
        torch.cuda.empty_cache()
    figs = {"runs": runs, "boost MHz": BOOST_MHZ, "seconds": seconds, "base": FP8_BASE}
    return {**figs, "rows": rows(figs)}


def rows(figs: dict | None) -> list[dict]:
    """Per size and kernel, the mean of its runs, and against its baseline at that size (cuBLAS, or figs["base"]
    {kernel: baseline}): "speed" (the baseline's time / its time), "cycles" (the baseline's cycles / its cycles:
    above 1, it needs fewer) and "clock" (its SM clock / the baseline's). speed = cycles x clock, up to the
    clock's sampling."""
    if not figs:
        return []
    out = []
    by: dict = {}
    for r in figs["runs"]:
        by.setdefault((r["n"], r["kernel"]), []).append(r)
    for (n, k), rs in by.items():
        out.append({"n": n, "kernel": k, "ms": float(np.mean([r["ms per run"] for r in rs])),
                    "SM MHz": float(np.mean([r["SM MHz"] for r in rs])),
                    "W": float(np.mean([r["W"] for r in rs])),
                    "pJ per MAC": float(np.mean([r["pJ per unit"] for r in rs])),
                    "Mcycles": float(np.mean([r["cycles per run"] for r in rs])) / 1e6,
                    "power cap": all("SW power cap" in r["reasons"] for r in rs),
                    "ok": all(r["ok"] for r in rs), "runs": len(rs)})
    by = {(r["n"], r["kernel"]): r for r in out}
    bases = figs.get("base") or {}
    for r in out:
        b = by.get((r["n"], bases.get(r["kernel"], CUBLAS)))
        if r["kernel"] == CUBLAS or r["kernel"] in bases.values():
            r.update(speed=1.0, cycles=1.0, clock=1.0)
        elif b and (r["kernel"] in bases or "base" not in figs):
            r["speed"] = b["ms"] / r["ms"]
            r["cycles"] = b["Mcycles"] / r["Mcycles"]
            r["clock"] = r["SM MHz"] / b["SM MHz"]
    return out


def _l2(counters: dict | None, kid: str) -> float | None:
    for r in (counters or {}).get("rows", []):
        if r.get("id") == kid:
            return (r.get("summary") or {}).get("L2 bytes")
    return None


def _vs(by: dict, n: int, k: str, ref: str) -> tuple[float, float] | None:
    """(k's cycles / ref's, k's clock / ref's) at n, or None."""
    a, b = by.get((n, k)), by.get((n, ref))
    if not a or not b:
        return None
    return a["Mcycles"] / b["Mcycles"], a["SM MHz"] / b["SM MHz"]


def _pct(x: float) -> float:
    return 100 * abs(x - 1)


# Each claim: (name, function(by {(n, kernel): row}, counters, boost MHz) -> the sentence, or None where the
# record does not support it). A sentence states only what its own test on the record checked.
def _cap(by, counters, boost):
    rs = list(by.values())
    if not rs or not all(r["power cap"] for r in rs) or max(r["SM MHz"] for r in rs) >= 0.9 * boost:
        return None
    lo, hi = min(r["SM MHz"] for r in rs), max(r["SM MHz"] for r in rs)
    return (f"Every kernel ran at the power cap: NVML gave \"SW power cap\" as the clock's reason in every run, "
            f"and the SM clock stayed between {lo:.0f} and {hi:.0f} MHz, {100 * hi / boost:.0f} % of the {boost} MHz "
            f"boost clock or less.")


def _cycles_not_clock(by, counters, boost):
    r, c = by.get((8192, ladder.BEST)), by.get((8192, CUBLAS))
    if not r or not c or not (r["cycles"] > 1.0 and r["clock"] < 1.0):
        return None
    return (f"At 8192³ rung 8 needs {100 * (1 - 1 / r['cycles']):.1f} % fewer cycles than cuBLAS ({r['Mcycles']:.3f} "
            f"million against {c['Mcycles']:.3f}), but it is given a {_pct(r['clock']):.1f} % lower clock "
            f"({r['SM MHz']:.0f} against {c['SM MHz']:.0f} MHz), so in time it is {r['speed']:.3f}x cuBLAS. Cycles "
            f"saved at the power cap are given back in clock unless they also save energy.")


def _l2_costs_clock(by, counters, boost):
    v = [_vs(by, n, ladder.BEST_WITHOUT_CLUSTER, ladder.BEST) for n in SIZES]
    l2a, l2b = _l2(counters, "ch04.tma_store_l2_order_no_cluster"), _l2(counters, "ch04.tma_store_l2_order")
    if None in v or not l2a or not l2b or l2a < 1.2 * l2b:
        return None
    if not all(abs(cyc - 1) < 0.015 and clk < 0.98 for cyc, clk in v):
        return None
    return (f"Without its cluster, rung 8 reads {l2a / l2b:.2f}x the L2 bytes (Nsight Compute, 4096³) and needs "
            f"about the same cycles ({v[0][0]:.3f}x and {v[1][0]:.3f}x rung 8's at 4096³ and 8192³), but its clock is "
            f"{_pct(v[0][1]):.1f} % and {_pct(v[1][1]):.1f} % lower: moving bytes through L2 costs energy, and at the "
            f"cap energy is time.")


def _pingpong(by, counters, boost):
    r = by.get((8192, "ping-pong"))
    if not r or "cycles" not in r or not (r["cycles"] < 1.0 and r["clock"] < 1.0):
        return None
    said = (f"Rung 9 (ping-pong) loses both ways at 8192³: it needs {100 * (1 / r['cycles'] - 1):.1f} % more cycles "
            f"than cuBLAS and is given a {_pct(r['clock']):.1f} % lower clock.")
    l2p, l28 = _l2(counters, "ch04.ping_pong"), _l2(counters, "ch04.tma_store_l2_order")
    if l2p and l28 and l2p > 1.2 * l28:
        # RULE (the register file): one consumer holds a 128 x 128 tile, half of rung 8's shared 128 x 256, so
        # each loaded byte feeds half the math.
        said += (f" It also reads {l2p / l28:.2f}x rung 8's L2 bytes (Nsight Compute, 4096³): each consumer's "
                 f"128 × 128 tile is half of rung 8's shared 128 × 256, so every byte loaded feeds half the math.")
    return said


def _fp8_cycles(by, counters, boost):
    """FP8: at 8192^3 both of gemm_fp8.cu's builds need more cycles than their _scaled_mm path and get more clock."""
    rs = [by.get((8192, k)) for k in FP8_BASE]
    if not all(r and "cycles" in r for r in rs) or not all(r["cycles"] < 1.0 and r["clock"] > 1.0 for r in rs):
        return None
    return "; ".join(f"{k} needs {100 * (1 / r['cycles'] - 1):.1f} % more cycles than {FP8_BASE[k]} at 8192³ and is "
                     f"given a {_pct(r['clock']):.1f} % higher clock ({r['speed']:.3f}x its speed)"
                     for k, r in zip(FP8_BASE, rs)) + (
        ". In FP8 the course's kernels spend less energy per cycle than cuBLAS's: what they lack is cycles.")


CLAIMS = [("power cap", _cap), ("cycles, not clock", _cycles_not_clock), ("L2 bytes cost clock", _l2_costs_clock),
          ("ping-pong pays twice", _pingpong)]
FP8_CLAIMS = [("power cap", _cap), ("FP8: cycles, not clock", _fp8_cycles)]


def claims(figs: dict | None, counters: dict | None = None, which=None) -> list[tuple[str, str | None]]:
    """[(name, the sentence from the record, or None where the record does not support it)] for the claims
    `which` (CLAIMS, or FP8_CLAIMS when figs has FP8 baselines)."""
    by = {(r["n"], r["kernel"]): r for r in rows(figs)}
    boost = (figs or {}).get("boost MHz", BOOST_MHZ)
    which = which or (FP8_CLAIMS if (figs or {}).get("base") else CLAIMS)
    return [(name, f(by, counters, boost) if by else None) for name, f in which]


def claims_markdown(figs: dict | None, counters: dict | None = None) -> str:
    if not figs:
        return "*(not recorded yet on an H200)*"
    return "\n".join(f"- **{name}.** " + (text if text else "*(the record does not support this: see the table)*")
                     for name, text in claims(figs, counters))


def draw(figs: dict | None):
    """Per size, per kernel: speed, cycles and clock against cuBLAS (1 = cuBLAS), as grouped bars."""
    import matplotlib.pyplot as plt
    bases = set((figs or {}).get("base", {}).values()) | {CUBLAS}
    rs = [r for r in rows(figs) if r["kernel"] not in bases and "speed" in r]
    sizes = sorted({r["n"] for r in rs})
    fig, axes = plt.subplots(1, max(1, len(sizes)), figsize=(6 * max(1, len(sizes)), 3.6), squeeze=False)
    parts = [("speed", "time (cuBLAS / kernel)", "#4c72b0"), ("cycles", "cycles (cuBLAS / kernel)", "#55a868"),
             ("clock", "SM clock (kernel / cuBLAS)", "#c44e52")]
    for ax, n in zip(axes[0], sizes):
        ks = [r for r in rs if r["n"] == n]
        x = np.arange(len(ks))
        for i, (key, label, color) in enumerate(parts):
            ax.bar(x + (i - 1) * 0.27, [r[key] for r in ks], 0.25, label=label, color=color)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(x, [r["kernel"].replace("TMA store + L2 order", "rung 8") for r in ks], fontsize=8)
        lo = min(min(r[k] for k, _, _ in parts) for r in ks)
        ax.set_ylim(min(0.85, lo - 0.02), 1.06)
        ax.set_title(f"{n}³, each run back to back at the power cap (1 = the library)", fontsize=9)
    fig.legend(*axes[0][0].get_legend_handles_labels(), fontsize=8, loc="lower center", ncol=3)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


#: The fit's terms: what each profiled GEMM did per second of its profiled duration.
FIT_TERMS = ("L2 TB/s", "tensor % of elapsed", "DRAM TB/s")


def clock_fit(counters: list[dict] | None = None) -> dict | None:
    """A least-squares fit, over every GEMM a counters pass profiled (default: the record's ch04.counters and
    ch05.counters), of the SM clock it ran at under Nsight Compute (one launch, --clock-control none, so at
    whatever clock the power cap gave) against its L2 traffic, its tensor-pipe share of the elapsed time
    and its DRAM traffic. {"coef": {"MHz at zero", term: MHz per unit}, "r2", "kernels", "rows"}, or None
    with fewer than 8 profiled GEMMs. A fit over different kernels says what goes with a lower clock, not
    what causes it: rung 8 with and without its cluster (the claim above) is the controlled experiment."""
    if counters is None:
        from judge import record
        counters = [record.figures(s) for s in ("ch04.counters", "ch05.counters")]
    rows_ = []
    for sec in counters:
        for r in (sec or {}).get("rows", []):
            s = r.get("summary") or {}
            dur = s.get("duration ns (profiled, not a timing)")
            if not dur or not isinstance(s.get("SM clock Hz (while profiled)"), float):
                continue
            rows_.append({"id": r["id"], "MHz": s["SM clock Hz (while profiled)"] / 1e6,
                          "L2 TB/s": s["L2 bytes"] / dur / 1e3, "tensor % of elapsed": s["tensor pipe % of elapsed"],
                          "DRAM TB/s": s["DRAM bytes"] / dur / 1e3})
    if len(rows_) < 8:
        return None
    X = np.array([[1.0] + [r[t] for t in FIT_TERMS] for r in rows_])
    y = np.array([r["MHz"] for r in rows_])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    r2 = 1 - float(((X @ coef - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    return {"coef": {"MHz at zero": float(coef[0]), **{t: float(c) for t, c in zip(FIT_TERMS, coef[1:])}},
            "r2": r2, "kernels": len(rows_), "rows": rows_}


def fit_claim(fit: dict | None) -> str | None:
    """The fit in words, only where it says more L2 traffic goes with a lower clock and explains most of the
    clock's spread (R² ≥ 0.6)."""
    if not fit or fit["coef"]["L2 TB/s"] >= 0 or fit["r2"] < 0.6:
        return None
    c = fit["coef"]
    return (f"Over the {fit['kernels']} GEMMs of chapters 4 and 5 that Nsight Compute profiled, each at whatever "
            f"clock the cap gave it, every TB/s of L2 traffic goes with {-c['L2 TB/s']:.0f} MHz less clock, and every "
            f"point of tensor-pipe share with {abs(c['tensor % of elapsed']):.1f} MHz "
            f"{'less' if c['tensor % of elapsed'] < 0 else 'more'} (R² = {fit['r2']:.2f}). "
            f"A fit over different kernels shows what goes together, not what causes what: rung 8 with and "
            f"without its cluster, the same kernel but for its L2 bytes, is the controlled case.")


def draw_fit(fit: dict | None = None):
    """The fit's GEMMs: SM clock while profiled against L2 TB/s, coloured by tensor-pipe share; the line is the
    fit at the mean tensor share and DRAM traffic."""
    import matplotlib.pyplot as plt
    fit = fit or clock_fit()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    if not fit:
        ax.text(0.5, 0.5, "no counters recorded yet", ha="center", transform=ax.transAxes)
        return fig
    rs = fit["rows"]
    sc = ax.scatter([r["L2 TB/s"] for r in rs], [r["MHz"] for r in rs], c=[r["tensor % of elapsed"] for r in rs],
                    cmap="viridis", s=28)
    fig.colorbar(sc, ax=ax, label="tensor pipe, % of elapsed")
    x = np.linspace(min(r["L2 TB/s"] for r in rs), max(r["L2 TB/s"] for r in rs), 20)
    c = fit["coef"]
    rest = c["MHz at zero"] + sum(c[t] * np.mean([r[t] for r in rs]) for t in FIT_TERMS[1:])
    ax.plot(x, rest + c["L2 TB/s"] * x, "k--", lw=1, label=f"fit: {c['L2 TB/s']:.0f} MHz per TB/s (R² {fit['r2']:.2f})")
    named = {"ch04.tma_store_l2_order": "rung 8", "ch04.tma_store_l2_order_no_cluster": "rung 8, no cluster",
             "ch04.ping_pong": "ping-pong", "ch04.cublas_bf16": "cuBLAS"}     # all at 4096^3
    for r in rs:
        if r["id"] in named:
            ax.annotate(named[r["id"]], (r["L2 TB/s"], r["MHz"]), fontsize=7, xytext=(4, -9 if r["id"] ==
                        "ch04.cublas_bf16" else 4), textcoords="offset points")
    ax.set_xlabel("L2 traffic while profiled (TB/s)")
    ax.set_ylabel("SM clock while profiled (MHz)")
    ax.set_title("GEMMs of chapters 4 and 5 under Nsight Compute, each at the clock the cap gave it", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def table(figs: dict | None) -> str:
    out = [f"{'n':>5s} {'kernel':36s} {'ms':>7s} {'MHz':>6s} {'W':>5s} {'pJ/MAC':>6s} {'Mcyc':>7s} "
           f"{'speed':>6s} {'cycles':>6s} {'clock':>6s} ok"]
    for r in rows(figs):
        out.append(f"{r['n']:5d} {r['kernel'][:36]:36s} {r['ms']:7.4f} {r['SM MHz']:6.0f} {r['W']:5.0f} "
                   f"{r['pJ per MAC']:6.3f} {r['Mcycles']:7.3f} {r.get('speed', 0):6.3f} {r.get('cycles', 0):6.3f} "
                   f"{r.get('clock', 0):6.3f} {'yes' if r['ok'] else 'NO'}")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(measure()))

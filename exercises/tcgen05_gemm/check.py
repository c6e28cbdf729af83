"""Grader of tcgen05_gemm: python practice/judge.py check tcgen05_gemm

No Blackwell GPU is needed, and none is used: the kernel is
1. compiled for sm_100a (NVRTC)                                   -> COMPILE ERROR
2. read in SASS: UTCHMMA (tcgen05.mma), the TMEM allocation, LDTM  -> MISSING FEATURE
3. read in PTX (the same build): every tcgen05.alloc / relinquish / mma / commit, mbarrier wait,
   tcgen05.ld and tcgen05.dealloc in order, with the column counts and each warp's lane traced
   from the operands, and that protocol replayed by judge/hw/tmem.py   -> WRONG naming the rule
A PASS says so: compiled and simulated, not run.
"""
from judge.gpu import build as _build
from judge.hw import sass, tmem
from judge.grading.result import Result, Verdict


def check(sub) -> Result:
    ex = sub.exercise
    kernel = ex.meta["kernel"]
    threads = int(ex.meta.get("cases", {}).get("threads", 128))
    sub.progress(f"compiling for {ex.target}")
    try:
        b = sub.build(target=ex.target)
    except _build.CompileError as e:
        return Result(Verdict.COMPILE_ERROR, e.first_error(), details=e.log.splitlines()[:12])
    checked = [f"compiled for {b.target}"]
    try:
        k_sass = b.sass_of(kernel)
    except KeyError as e:
        return Result(Verdict.WRONG, str(e.args[0]), checked=checked)
    missing = [f for f in ex.features if not sass.uses(k_sass, f)]
    if missing:
        descr = "; ".join(sass.FEATURES[f].describe for f in missing)
        return Result(Verdict.MISSING_FEATURE, f"the SASS of {kernel} shows no {descr}",
                      details=["fill in the TODOs: the starter issues no MMA and allocates no tensor memory"],
                      checked=checked)
    checked.append("SASS shows " + ", ".join(f"{f} ({sass.FEATURES[f].count(k_sass)})" for f in ex.features))

    sub.progress("replaying the tcgen05 protocol in the tensor-memory simulator")
    notes: list[str] = []
    try:
        steps = tmem.protocol_from_ptx(b.ptx, kernel, threads=threads, notes=notes)
    except tmem.Untraceable as e:
        return Result(Verdict.WRONG, f"the TMEM address or column count could not be followed in the PTX: {e}",
                      details=["compute TMEM addresses from threadIdx.x and constants, as the TODOs suggest"],
                      checked=checked)
    try:
        sim = tmem.replay(steps)
    except tmem.TmemError as e:
        shown = [f"{i:3d}  {s}" for i, s in enumerate(steps[max(0, e.step - 6):e.step + 1],
                                                        start=max(0, e.step - 6))]
        return Result(Verdict.WRONG, f"simulated protocol: {e}",
                      details=["the protocol read from your PTX, up to the failing step:"] + shown,
                      checked=checked)
    counts = {k: sum(1 for s in steps if s[0] == k) for k in ("alloc", "mma", "commit", "ld", "dealloc")}
    checked.append(f"protocol from the PTX simulated: {counts['alloc']} alloc, {counts['mma']} MMA, "
                   f"{counts['commit']} commit, {counts['ld']} tcgen05.ld (all warps), "
                   f"{counts['dealloc']} dealloc; no rule broken")
    checked += notes
    what = ("the allocation, one-thread MMAs, commit and dealloc follow the rules (lane quarters not traced: "
            "see below)" if notes else
            "the allocation, one-thread MMAs, commit, lane quarters and dealloc follow the rules")
    return Result(Verdict.PASS, f"compiled for {b.target} and simulated: {what}. Not run on a GPU: "
                                f"no Blackwell GPU checked the numbers",
                  details=notes, checked=checked,
                  measurements={"simulated_cycles": max(sim.clock.values(), default=0.0)})

"""The CUDA grading flow: one case loop for every GPU exercise, driven by its exercise.toml.

    # exercises/<id>/check.py
    def inputs(case, xp, rng): ...            # fresh random inputs (xp: cupy on a GPU, numpy on the CPU model)
    def outputs(case, ins, xp): ...           # allocated here, poisoned by the engine before every launch
    def reference(case, ins): ...             # numpy inputs -> float64 (or exact) expected outputs
    def launch(build, case, ins, outs): ...   # one launch of the learner's kernel (judge.gpu.launch)
    def work(case): ...                       # {"flops": .., "bytes": ..} one launch must at least do
    def check(sub):
        return cuda_flow.grade(sub, __import__(__name__))

Optional: tolerance(case) -> {"rtol", "atol", "norm_tol"} (else exercise.toml [tolerance]),
baseline(case, ins, outs) (ceiling = "baseline"), simulate(build, sub) -> list[str] of what it
checked (targets no GPU here can run, e.g. sm_100a), model_cases (cases small enough for the CPU model,
same form as exercise.toml's [cases] model), owned(case, name, ctaids) -> bool mask of the output
`name` that the blocks `ctaids` write (lets the model run a sample of a large grid, [model] max_blocks).

Cases are families, drawn per run: in exercise.toml [cases], a value may be a number (fixed), a list
(one of them, drawn), or a table {min, max, step} (a value of range(min, max + 1, step), drawn). So
`model = [{M = 128, N = 128, K = 8}, {M = [128, 256], N = 128, K = {min = 24, max = 200, step = 16}}]`
always runs a single K tile and a K with a tail, with sizes no kernel can special-case in advance.
The CPU model runs the launch check.py makes: the real grid of the case, %nsmid and the other special
registers as on an H200. With [model] max_blocks and check.owned, a grid larger than that runs a random
sample of its clusters (the rest skipped, said in the result; their outputs are not compared).

The order, stopping at the first failure:
 1. compile for the exercise's target                         -> COMPILE ERROR (file and line)
 2. the compile log: warnings the exercise forbids ([log])     -> its verdict, the message naming the cause
    found in the PTX (C7515: accumulators zeroed by plain moves in a wait<1> pipeline, or no wait in the
    loop; C7508: no register count at entry, with the __launch_bounds__ to add)
 3. the kernel exists; its SASS shows every required feature  -> MISSING FEATURE
 4. the CPU model of the machine (judge.model) runs the small cases, where it knows every instruction:
    a protocol race is WRONG here whatever a GPU happened to do; a kernel that can never finish is HANG;
    a trap (a device-side assert) is CRASH; a feature present in the SASS but not on the path that does
    the work ([uses]), or an output that does not carry the values the feature delivered ([carries]), is
    MISSING FEATURE
 5. rules the SASS proves broken (proxy fence before a TMA store; an unconditional exit reachable from a
    TMA store with no wait for its read) -> WRONG, naming the rule. After the model, so that a kernel that
    hangs or races is told so; the model checks both rules exactly, thread by thread, where it runs.
 6. no GPU can run the target here: sm_90a -> the model's verdict (or SKIP, saying what was and was not
    checked); sm_100a (no Blackwell GPU here) -> the model's verdict on its cases (model_cases), or
    compiled, SASS and simulate(): a PASS that names what ran and says plainly no GPU ran it
 7. every case on the GPU, fresh random inputs, poisoned outputs -> WRONG (a launch the hardware would
    refuse is WRONG with judge.gpu.launch's message)
 8. timing at [timing].case: outputs poisoned before the timed launches and compared after them (work
    skipped on later launches is WRONG); a rate above what a Hopper GPU can do is WRONG; the ceiling is
    measured in the same process; tiers as fractions of it; a fraction above [timing].max_fraction (what a
    kernel of this kind can reach against that ceiling) is WRONG. A figure within the measured spread of a
    tier's line gets the lower tier and says so.
"""
from __future__ import annotations

import os
import re

import numpy as np

from judge.grading import compare
from judge import config
from judge.hw import sass
from judge.grading.result import TIERS, Result, Verdict

LOG_CODES = {
    "C7508": "setmaxnreg was ignored (ptxas C7508): the kernel needs a register count at entry, "
             "__launch_bounds__(threads, 1)",
    "C7515": "wgmma was serialized (ptxas C7515): an instruction other than wgmma defined an accumulator "
             "register while a wgmma using it could be pending",
}


H200_SMS = 132          # what %nsmid reads on the H200 the course runs on (judge.model gives kernels the same)


#: printf lines of a wrong kernel that a result shows (judge.model keeps up to its own limit)
PRINTED_SHOWN = 20


def _seed() -> int:
    return int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF


def _case_name(case: dict, seed: int | None = None) -> str:
    s = " ".join(f"{k}={v}" for k, v in case.items())
    return s + (f" seed={seed}" if seed is not None else "")


def _tolerance(mod, ex, case) -> dict:
    if hasattr(mod, "tolerance"):
        return dict(mod.tolerance(case))
    t = dict(ex.meta.get("tolerance", {}))
    if t.pop("exact", False):
        return {"rtol": 0.0, "atol": 0.0}
    return {k: float(v) for k, v in t.items() if k in ("rtol", "atol", "norm_tol")}


def _host(d: dict) -> dict:
    return {k: compare.to_numpy(v) if not np.isscalar(v) else v for k, v in d.items()}


def run_case(b, mod, ex, case, xp, *, seed=None, ins=None) -> list[compare.Comparison]:
    """One case: inputs (fresh unless given), poisoned outputs, one launch, every output compared."""
    seed = _seed() if seed is None else seed
    if ins is None:
        ins = mod.inputs(case, xp, xp.random.default_rng(seed))
    outs = mod.outputs(case, ins, xp)
    for v in outs.values():
        compare.poison(v)
    mod.launch(b, case, ins, outs)
    if xp is not np:
        xp.cuda.get_current_stream().synchronize()       # a hang waits here; the watchdog ends it
    ref = mod.reference(case, _host(ins))
    tol = _tolerance(mod, ex, case)
    return [compare.compare(outs[k], ref[k], case=f"{k}, {_case_name(case, seed)}", **tol) for k in ref]


def _first_failure(comps):
    return next((c for c in comps if not c.ok), None)


def draw_case(spec: dict, rng) -> dict:
    """One concrete case from a case family: a number stays, a list gives one of its values, a table
    {min, max, step} one of range(min, max + 1, step); drawn with `rng` (fresh per run)."""
    from collections.abc import Mapping
    out = {}
    for k, v in spec.items():
        if isinstance(v, (list, tuple)):       # exercise.toml read-only gives tuples for lists
            v = v[int(rng.integers(len(v)))]
        elif isinstance(v, Mapping):
            lo, hi, step = int(v["min"]), int(v["max"]), int(v.get("step", 1))
            v = lo + step * int(rng.integers((hi - lo) // step + 1))
        out[k] = v
    return out


def _model_cases(mod, ex, rng) -> list[dict]:
    if hasattr(mod, "model_cases"):
        specs = list(mod.model_cases)
    else:
        cases = ex.meta.get("cases", {})
        specs = list(cases.get("model", cases.get("list", [])[:1]))
    return [draw_case(c, rng) for c in specs]


def _model_options(mod, ex, case) -> dict:
    """What judge.model.run is told beyond the launch: the target GPU, and how many blocks of a large grid
    it may run (a random sample of whole clusters; only with check.owned, which says what they write)."""
    from judge import model
    import inspect
    params = inspect.signature(model.run).parameters
    opts = {}
    if "sms" in params:
        opts["sms"] = int(ex.meta.get("model", {}).get("sms", H200_SMS))
    most = ex.meta.get("model", {}).get("max_blocks")
    if most and hasattr(mod, "owned") and "max_blocks" in params:
        opts["max_blocks"] = int(most)
    return opts


def _run_model_case(b, mod, ex, case) -> tuple[list[compare.Comparison], str]:
    """One model case through check.py's own launch, the real grid; outputs of skipped blocks (a sampled
    grid) are not compared. Returns the comparisons and a note on what ran."""
    from judge.gpu import launch as _launch
    seed = _seed()
    ins = mod.inputs(case, np, np.random.default_rng(seed))
    outs = mod.outputs(case, ins, np)
    for v in outs.values():
        compare.poison(v)
    _launch.model_options = _model_options(mod, ex, case)
    _launch.last_model_report = None
    try:
        mod.launch(b, case, ins, outs)
    finally:
        _launch.model_options = {}
    rep = _launch.last_model_report
    ref = mod.reference(case, _host(ins))
    note = ""
    ran = getattr(rep, "ctaids", None)
    total = getattr(rep, "blocks_total", None)
    if ran is not None and total and len(ran) < total:
        note = f"{len(ran)} of the grid's {total} blocks, a random sample of whole clusters"
        for k in ref:                                   # skipped blocks' outputs: not compared
            keep = np.asarray(mod.owned(case, k, ran), bool)
            got = np.array(compare.to_numpy(outs[k]), copy=True)
            got[~keep] = np.asarray(ref[k])[~keep]
            outs[k] = got
    elif total:
        note = f"the whole grid, {total} block{'s' if total > 1 else ''}"
    tol = _tolerance(mod, ex, case)
    return ([compare.compare(outs[k], ref[k], case=f"{k}, {_case_name(case, seed)}", **tol) for k in ref], note)


def _run_model(b, mod, ex, sub, checked) -> Result | None:
    """Step 4: the CPU model. Returns a final Result (WRONG/HANG/CRASH/MISSING FEATURE), or None to go on."""
    try:
        from judge import model
    except ImportError:
        return None
    if not model.available():
        return None                                      # no model in this installation
    from judge.gpu import launch as _launch
    cases = _model_cases(mod, ex, np.random.default_rng(_seed()))
    notes = []
    for i, case in enumerate(cases):
        sub.progress(f"CPU model of the async machine: case {i + 1}/{len(cases)} ({_case_name(case)})")
        try:
            with sub.busy():                             # the model's step budget bounds a kernel's endless loop
                comps, note = _run_model_case(b, mod, ex, case)
        except model.Unsupported as e:
            checked.append(f"the CPU model cannot run this kernel ({e}); not checked by it")
            return None
        except model.Violation as e:
            if e.rule == "trap":                          # __trap(), a failed device-side assert
                return Result(Verdict.CRASH, f"{e.message} (at {e.where}; case {_case_name(case)})",
                              checked=checked,
                              details=["on a GPU the launch fails (CUDA_ERROR_LAUNCH_FAILED / device-side assert "
                                       "triggered) and the process's context is lost: fix the condition the "
                                       "assert checks, for this case"])
            return Result(Verdict.WRONG, str(e), checked=checked,
                          details=[f"case {_case_name(case)}; found by the CPU model of the machine, which "
                                   "delivers every asynchronous copy at the last moment the rules allow and "
                                   "orders memory only as the PTX ISA does: the race is real even if a GPU "
                                   "usually gives the right numbers"])
        except model.Hang as e:
            lines = str(e).splitlines()
            return Result(Verdict.HANG, lines[0], details=[f"case {_case_name(case)}"] + lines[1:], checked=checked)
        except _launch.LaunchError as e:           # a shape the hardware refuses is refused everywhere
            return Result(Verdict.WRONG, str(e), checked=checked)
        except Exception as e:  # noqa: BLE001 - a gap in the model is never the learner's fault
            checked.append(f"the CPU model could not run this kernel ({type(e).__name__}: {e}); not checked by it")
            return None
        bad = _first_failure(comps)
        if bad is not None:
            return Result(Verdict.WRONG, bad.message, checked=checked,
                          details=["on the CPU model of the machine (asynchronous copies land as late as the "
                                   "rules allow, shared memory a stage releases is poisoned)"]
                          + _printed(getattr(_launch.last_model_report, "printed", None)))
        counts = getattr(_launch.last_model_report, "counts", {}) or {}
        unused = (_unused_features(ex, counts, case, mod.work(case) if hasattr(mod, "work") else None)
                  or _bypassed(ex, counts))
        if unused:
            return Result(Verdict.MISSING_FEATURE, unused, checked=checked,
                          details=[f"case {_case_name(case)}; the instruction is in the SASS, but the work does "
                                   "not go through it: counted by the CPU model while it ran your kernel"])
        notes.append(_case_name(case) + (f" ({note})" if note else ""))
    if cases:
        checked.append(f"correct under the CPU model of the async machine on {len(cases)} case(s) drawn for "
                       f"this run: " + "; ".join(notes))
    return None


def _printed(lines, keep: int = PRINTED_SHOWN) -> list[str]:
    """What the kernel's printf calls printed on the CPU model, for the result's details: the first `keep`
    lines, and how many there were."""
    lines = list(lines or ())
    if not lines:
        return []
    head = [f"your kernel printed (on the CPU model, {len(lines)} line{'s' if len(lines) > 1 else ''}"
            + (f", the first {keep} shown" if len(lines) > keep else "") + "):"]
    return head + ["  " + ln.rstrip("\n") for ln in lines[:keep]]


def _unused_features(ex, counts: dict, case: dict | None = None, work: dict | None = None) -> str:
    """exercise.toml [uses], the feature carrying the data, counted by the model as the kernel ran.

    `"cp.async" = 0.9`: at least 90 % of the bytes written into shared memory went through that path
    (smem_fill.<path>.bytes in the model's counts; paths: cp.async, tma, st.shared). A feature kept in a
    branch that never runs shows in the SASS; here it counts for nothing.
    `"dsmem.peer" = {per = "n", share = 0.25, what = "..."}`: the model's counter `dsmem.peer` reached at
    least share x case[per] (x check.work(case)[...] for per = "work.flops" / "work.bytes", x counts[per]
    when per names a counter); `what` says what was bypassed.
    """
    fills = {k[len("smem_fill."):-len(".bytes")]: v for k, v in counts.items()
             if k.startswith("smem_fill.") and k.endswith(".bytes")}
    total = sum(fills.values())
    for path, share in ex.meta.get("uses", {}).items():
        if isinstance(share, dict):
            per = share.get("per")
            if per and per.startswith("work."):
                base = float((work or {}).get(per[len("work."):], 0))
            else:
                base = float((case or {}).get(per, counts.get(per, 0))) if per else 1.0
            need = float(share.get("share", 1.0)) * base
            got = float(counts.get(path, 0))
            if got < need:
                what = share.get("what", path)
                return (f"{what}: the kernel's run counted {got:g} ({path}), at least {need:g} "
                        f"({float(share.get('share', 1.0)):g} x {per or '1'}) must: the work bypassed it")
            continue
        got = fills.get(path, 0) / total if total else 0.0
        if got < float(share):
            others = ", ".join(f"{k} {v / total:.0%}" for k, v in fills.items() if k != path) if total else "none"
            return (f"only {got:.0%} of the bytes written into shared memory went through {path} when the kernel "
                    f"ran (at least {float(share):.0%} must; the rest: {others})")
    return ""


def _bypassed(ex, counts: dict) -> str:
    """exercise.toml [carries]: `"tcgen05.ld" = 0.99` (or `"wgmma"`) asks that at least 99 % of the bytes the
    kernel stored to global memory carry values that came out of that instruction (the model marks its
    destination registers and follows the mark through every instruction that reads them:
    gstore.from.<feature>.bytes of gstore.bytes). A kernel that runs the feature and then computes its
    output another way gets MISSING FEATURE."""
    total = counts.get("gstore.bytes", 0)
    for feature, share in ex.meta.get("carries", {}).items():
        got = counts.get(f"gstore.from.{feature}.bytes", 0) / total if total else 0.0
        if got < float(share):
            return (f"only {got:.0%} of the bytes the kernel stored to global memory carry values that came out "
                    f"of {feature} (at least {float(share):.0%} must): the output was computed another way, "
                    f"bypassing what {feature} delivers")
    return ""


def _entry_ptx(ptx: str, kernel: str) -> tuple[str, str]:
    """(directives between the parameter list and the body, body) of one .entry in a PTX module."""
    m = re.search(rf"\.entry\s+{re.escape(kernel)}\s*\((.*?)\)(.*?)\{{", ptx, re.S)
    if not m:
        return "", ptx
    depth, i = 1, m.end()
    while depth and i < len(ptx):
        depth += {"{": 1, "}": -1}.get(ptx[i], 0)
        i += 1
    return m.group(2), ptx[m.end():i]


def _ptx_lines(body: str) -> list[str]:
    return [l.split("//")[0].strip() for l in body.splitlines()]


def diagnose_c7515(ptx: str, kernel: str) -> str:
    """Why ptxas serialized the wgmma (C7515), read from the kernel's PTX; '' when no cause is recognised.

    ptxas keeps wgmma.mma_async in flight across a pipeline stage (wgmma.fence .. wgmma.wait_group) only
    when nothing but wgmma defines their accumulator registers in that stage (PTX ISA 9.7.15.5.1: the
    accumulators may not be accessed while a wgmma.mma_async that uses them is pending)."""
    lines = _ptx_lines(_entry_ptx(ptx, kernel)[1])
    labels = {l[:-1]: i for i, l in enumerate(lines) if re.match(r"^\$?\w+:$", l)}
    loops = []                                            # (first, last) line of each backward branch
    for j, l in enumerate(lines):
        m = re.search(r"\bbra(?:\.uni)?\s+(\S+?);", l)
        if m and labels.get(m.group(1), j + 1) <= j:
            loops.append((labels[m.group(1)], j))
    mmas = [i for i, l in enumerate(lines) if l.startswith("wgmma.mma_async")]
    if not mmas:
        return ""
    acc = set()
    for i in mmas:
        m = re.search(r"\{([^}]*)\}", lines[i])
        if m:
            acc |= {r.strip() for r in m.group(1).split(",")}
    inner = [lp for lp in loops if lp[0] <= mmas[0] <= lp[1]]
    if not inner:
        return ""
    lo, hi = min(inner, key=lambda lp: lp[1] - lp[0])
    waits = [int(m.group(1)) for l in lines[lo:hi + 1] if (m := re.search(r"wgmma\.wait_group\S*\s+(\d+)", l))]
    if not waits:
        return ("the loop that issues the wgmma has no wgmma.wait_group in it: the "
                "accumulators stay in flight across slices, so ptxas serializes every wgmma. Wait for each "
                "slice's group inside the loop (wg::wait<0>(), or wait<1> with the previous slice's slot "
                "released after it)")
    zeroed = [l for i, l in enumerate(lines) if not l.startswith("wgmma")
              and (m := re.match(r"(?:@!?%\w+\s+)?[a-z][\w.]*\s+(%\w+)\s*,", l)) and m.group(1) in acc]
    if min(waits) >= 1 and zeroed:
        first = " ".join(zeroed[0].rstrip(";").split())
        return (f"the accumulators are zeroed with plain instructions ({first} and "
                f"{len(zeroed) - 1} more) in a pipeline that keeps a wgmma group in flight across slices "
                f"(wgmma.wait_group {min(waits)} in the loop): a non-wgmma instruction defines an accumulator "
                "of a wgmma still pending, so ptxas serializes them all. Do not zero them: give the first "
                "wgmma of the tile scale-d 0 (D = A*B, the old value ignored), e.g. "
                "wg::mma_k16(acc, a, b, kt > 0 || k > 0)")
    return ""


def diagnose_c7508(ptx: str, kernel: str, threads: int | None) -> str:
    """Why ptxas ignored setmaxnreg (C7508), read from the kernel's PTX directives; '' if not recognised.

    setmaxnreg needs the register count at entry, which ptxas knows only from a thread bound (.maxntid,
    __launch_bounds__(threads[, 1])) or a register limit (.maxnreg, -maxrregcount). With NVRTC 13,
    __launch_bounds__(384) alone was enough (no C7508); the course writes (threads, 1)."""
    head, _ = _entry_ptx(ptx, kernel)
    if re.search(r"\.(?:maxntid|maxnreg)\b", head):
        return ""
    n = f"{threads}" if threads else "THREADS"
    return (f"the kernel has no __launch_bounds__ (its PTX has no .maxntid): ptxas cannot know the register "
            f"count at entry, so it ignored setmaxnreg. Declare it __launch_bounds__({n}, 1) (the block size, "
            f"one block per SM)")


def _log_cause(code: str, b, kernel: str, mod) -> str:
    try:
        if code == "C7515":
            return diagnose_c7515(b.ptx, kernel)
        if code == "C7508":
            return diagnose_c7508(b.ptx, kernel, getattr(mod, "THREADS", None))
    except Exception:  # noqa: BLE001 - a diagnosis is a better message, never a verdict
        return ""
    return ""


def _log_rules(meta) -> dict:
    """exercise.toml [log]: `forbid = ["C7508"]` (WRONG, with the message above), or
    `C7508 = { verdict = "MISSING FEATURE", why = "..." }` for a verdict and message of its own."""
    log = meta.get("log", {})
    rules = {c: {"verdict": "WRONG", "why": LOG_CODES.get(c, f"the compiler reported {c}")}
             for c in log.get("forbid", [])}
    rules.update({k: v for k, v in log.items() if k != "forbid"})
    return rules


def _tier(value: float, tiers: dict, spread: float) -> tuple[str | None, str]:
    """The best tier whose line `value` clears; a value within `spread` of a line gets the lower tier."""
    best, note = None, ""
    for t in TIERS:
        if t not in tiers:
            continue
        line = float(tiers[t])
        if value >= line * (1 + spread):
            best = t
        elif value >= line * (1 - spread):
            note = (f"{value:.2f} is within the measured spread ({spread:.1%}) of the {t} line {line:g}: "
                    f"counted as {best or 'below bronze'}, not {t}")
            break
        else:
            break
    return best, note


def _fraction(t, ceil) -> float:
    """Yours as a fraction of the ceiling, by rate: FLOP/s against FLOP/s, bytes/s against bytes/s (a copy
    of 2 GiB and a kernel over 256 MiB compare by bandwidth, not by time); by time only for a baseline
    that does the same work on the same case."""
    if t.flops and ceil.flops:
        return t.tflops / ceil.tflops
    if t.bytes and ceil.bytes:
        return t.gbps / ceil.gbps
    return ceil.median_ms / t.median_ms


def _plausible(ex, case, t, work) -> str:
    """'' when the measured rate is one a Hopper GPU can reach; else why not."""
    peak_key = ex.meta.get("timing", {}).get("peak", "")
    msgs = []
    if work.get("bytes") and t.median_ms > 0:
        rate = work["bytes"] / (t.median_ms * 1e-3)
        if rate > config.HOPPER_PEAK["hbm_bytes_per_s"]:
            msgs.append(f"{rate / 1e9:.0f} GB/s moved through device memory, above the "
                        f"{config.HOPPER_PEAK['hbm_bytes_per_s'] / 1e9:.0f} GB/s the memory can deliver")
    if work.get("flops") and peak_key and t.median_ms > 0:
        rate = work["flops"] / (t.median_ms * 1e-3)
        peak = config.HOPPER_PEAK[peak_key]
        if rate > peak:
            msgs.append(f"{rate / 1e12:.0f} TFLOPS, above the {peak / 1e12:.0f} TFLOPS peak ({peak_key})")
    return "; ".join(msgs)


def _measure(b, mod, ex, sub, checked) -> Result:
    """Step 8: time the learner's kernel and the ceiling at the timing case; check the timed output."""
    import cupy
    from judge.gpu import timing
    tcfg = ex.meta.get("timing", {})
    case = dict(tcfg["case"])
    reps = int(tcfg.get("reps", 20))
    seeds = [_seed(), _seed()]
    sets = [mod.inputs(case, cupy, cupy.random.default_rng(s)) for s in seeds]
    outs = mod.outputs(case, sets[0], cupy)
    sub.progress(f"timing yours at {_case_name(case)} (median of {reps}, L2 flushed, inputs rotated)")
    for i in range(3):                                   # warm-up: the module loads, clocks ramp
        mod.launch(b, case, sets[i % 2], outs)
    cupy.cuda.get_current_stream().synchronize()
    for v in outs.values():                              # whatever the timed launches leave must be right
        compare.poison(v)
    t = timing.bench(lambda ins: mod.launch(b, case, ins, outs), [(s,) for s in sets], warmup=0, reps=reps,
                     **{k: float(v) for k, v in mod.work(case).items()})
    cupy.cuda.get_current_stream().synchronize()
    last = (reps - 1) % len(sets)
    sub.progress("checking the output of the timed launches")
    ref = mod.reference(case, _host(sets[last]))
    tol = _tolerance(mod, ex, case)
    for k in ref:
        c = compare.compare(outs[k], ref[k], case=f"{k}, the timed launches at {_case_name(case, seeds[last])}", **tol)
        if not c.ok:
            return Result(Verdict.WRONG, c.message, checked=checked,
                          details=["the output left by the timed launches is wrong, though the correctness "
                                   "cases passed: the kernel must do all of its work on every launch"])
    checked.append(f"the output of the {reps} timed launches is correct")
    why = _plausible(ex, case, t, mod.work(case))
    if why:
        return Result(Verdict.WRONG, f"the timed figure is beyond the hardware: {why}", checked=checked,
                      details=["a kernel cannot beat the machine: it skipped work or the timing did not see it"])
    name = tcfg.get("ceiling", "")
    sub.progress(f"timing the ceiling ({name}) in the same process")
    if name == "baseline":
        bouts = mod.outputs(case, sets[0], cupy)
        ceil = timing.bench(lambda ins: mod.baseline(case, ins, bouts), [(s,) for s in sets], reps=reps)
    else:
        ceil = timing.ceiling(name, case.get("n"))
    value = _fraction(t, ceil)
    most = tcfg.get("max_fraction")
    if most is not None and value > float(most):
        return Result(Verdict.WRONG, f"the timed figure is beyond the hardware: {value:.2f} of the ceiling ({name}), "
                                     f"and a kernel of this kind cannot exceed {float(most):g} of it",
                      checked=checked, measurements={"fraction": value, "median_ms": t.median_ms},
                      details=["a kernel cannot beat the machine: it skipped work or the timing did not see it"])
    spread = max(t.spread, ceil.spread, config.TIER_SPREAD_FLOOR)
    meas = {"case": case, "median_ms": t.median_ms, "spread": t.spread, "tflops": t.tflops, "gbps": t.gbps,
            "ceiling": name, "ceiling_ms": ceil.median_ms, "ceiling_spread": ceil.spread,
            "ceiling_tflops": ceil.tflops, "ceiling_gbps": ceil.gbps, "fraction": value}
    tiers = ex.tiers
    tier, note = _tier(value, tiers, spread)
    lines = ", ".join(f"{k} {tiers[k]}" for k in TIERS if k in tiers)
    rate = f"{t.tflops:.1f} TFLOPS" if t.flops else f"{t.gbps:.0f} GB/s" if t.bytes else f"{t.median_ms:.3f} ms"
    details = [f"yours {rate} ({t.median_ms:.3f} ms, spread {t.spread:.1%}) against {name} "
               f"{ceil.median_ms:.3f} ms measured in the same run; tiers: {lines}"] + ([note] if note else [])
    if tier is None:
        return Result(Verdict.TOO_SLOW, f"{value:.2f} of the ceiling; bronze needs {tiers.get('bronze')}",
                      checked=checked, measurements=meas, details=details)
    return Result(Verdict.PASS, f"correct; {value:.2f} of the ceiling ({name})", tier=tier, checked=checked,
                  measurements=meas, details=details)


def grade(sub, mod) -> Result:
    """Grade the learner's CUDA file for a GPU exercise (see the module docstring for the order)."""
    from judge.gpu import build as _build, launch as _launch
    from judge import gpu
    ex = sub.exercise
    meta = ex.meta
    kernel = meta["kernel"]
    target = ex.target
    checked: list[str] = []
    sub.progress(f"compiling for {target}")
    try:
        b = sub.build(target=target)
    except _build.CompileError as e:
        return Result(Verdict.COMPILE_ERROR, e.first_error(), details=e.log.splitlines()[:12])
    checked.append(f"compiled for {target} (NVRTC {_build.nvrtc_version()})")
    for code, rule in _log_rules(meta).items():
        if re.search(rf"\b{code}\b", b.log):
            line = next(l for l in b.log.splitlines() if code in l)
            cause = _log_cause(code, b, kernel, mod)
            why = f"ptxas {code}: {cause}" if cause else rule["why"]
            return Result(Verdict(rule["verdict"]), why, details=[line.strip()], checked=checked)
    try:
        k_sass = b.sass_of(kernel)
    except KeyError as e:
        return Result(Verdict.WRONG, str(e.args[0]), checked=checked)
    res = b.resources.get(kernel, {})
    if res:
        checked.append(f"{res['registers']} registers, {res['shared']} B static shared, "
                       f"{res['spill_stores']} B spilled")
    missing = [f for f in ex.features if not sass.uses(k_sass, f)]
    if missing:
        descr = "; ".join(sass.FEATURES[f].describe for f in missing)
        return Result(Verdict.MISSING_FEATURE, f"the SASS of {kernel} shows no {descr}", checked=checked,
                      details=["the compiler emits these instructions only for the PTX or intrinsics the "
                               "exercise asks for: python practice/judge.py sass " + ex.id + " shows yours"])
    checked.append("SASS shows " + ", ".join(f"{f} ({sass.FEATURES[f].count(k_sass)})" for f in ex.features))

    runs_here = gpu.meets(target)
    if not runs_here and not target.startswith("sm_90"):          # Blackwell work: no such GPU here
        has_cases = bool(_model_cases(mod, ex, np.random.default_rng(0)))
        if has_cases:
            early = _run_model(b, mod, ex, sub, checked)
            if early is not None:
                return early
        broken = sass.rule_violations(k_sass)      # after the model: a hang or a race is named first
        if broken:
            return Result(Verdict.WRONG, broken[0], checked=checked, details=broken[1:])
        ran = next((c for c in checked if "CPU model" in c and "correct" in c), "")
        if has_cases and not ran:                  # the model could not run it: no verdict either way
            return Result(Verdict.SKIP, f"compiled for {target}, SASS checked; the CPU model could not run the "
                                        f"kernel and there is no {target} GPU here", checked=checked,
                          details=["not checked: correctness (see above what the model lacks)"])
        extra = list(mod.simulate(b, sub)) if hasattr(mod, "simulate") else []
        what = (f"ran on the CPU model of the machine and matched float64 ({ran.split(': ', 1)[-1]})" if ran
                else "SASS checked" + (", protocol simulated" if extra else ""))
        return Result(Verdict.PASS, f"compiled for {target}; {what}; not run on a GPU: no {target} GPU here",
                      checked=checked + extra)
    early = _run_model(b, mod, ex, sub, checked)
    if early is not None:
        return early
    broken = sass.rule_violations(k_sass)          # after the model: a hang or a race is named first
    if broken:
        return Result(Verdict.WRONG, broken[0], checked=checked, details=broken[1:])
    checked.append("no rule the SASS can show broken (proxy fence before a TMA store, exit before its read)")
    if not runs_here:
        modelled = any("CPU model" in c and "correct" in c for c in checked)
        what = ("correct under the async model; speed not measured here" if modelled
                else gpu.why_not(target))
        return Result(Verdict.PASS if modelled else Verdict.SKIP, what, checked=checked,
                      details=[f"not checked here: {'timing and ' if modelled else 'correctness, timing and '}"
                               f"the real hardware's behaviour ({gpu.why_not(target)})"])
    import cupy
    if hasattr(mod, "gpu_checks"):                 # checks of the exercise's own on the GPU (e.g. a trace)
        early = mod.gpu_checks(b, sub)
        if early is not None:
            early.checked = checked + early.checked
            return early
    rng = np.random.default_rng(_seed())                 # a family in [cases] list is drawn per run too
    cases = [draw_case(c, rng) for c in meta.get("cases", {}).get("list", [])]
    for i, case in enumerate(cases):
        sub.progress(f"case {i + 1}/{len(cases)}: {_case_name(case)} on {gpu.info().name}")
        try:
            comps = run_case(b, mod, ex, case, cupy)
        except _launch.LaunchError as e:
            return Result(Verdict.WRONG, str(e), checked=checked)
        bad = _first_failure(comps)
        if bad is not None:
            return Result(Verdict.WRONG, bad.message, checked=checked,
                          details=[f"passed {i} case(s) before this one"])
    checked.append(f"{len(cases)} cases correct on {gpu.info().name}")
    if "timing" not in meta:
        return Result(Verdict.PASS, f"{len(cases)} cases correct", checked=checked)
    return _measure(b, mod, ex, sub, checked)

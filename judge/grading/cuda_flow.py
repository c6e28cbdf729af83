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
checked (targets no GPU here can run, e.g. sm_100a), model_cases (cases small enough for the CPU model).

The order, stopping at the first failure:
 1. compile for the exercise's target                         -> COMPILE ERROR (file and line)
 2. the compile log: warnings the exercise forbids ([log])     -> its verdict (e.g. C7508 setmaxnreg ignored)
 3. the kernel exists; its SASS shows every required feature  -> MISSING FEATURE
 4. rules the SASS proves broken (proxy fence before a TMA store, exit before the store read)
                                                               -> WRONG, naming the rule
 5. the CPU model of the machine (judge.model) runs the small cases, where it knows every instruction:
    a protocol race is WRONG here whatever a GPU happened to do; a kernel that can never finish is HANG;
    a feature present in the SASS but not on the path that does the work ([uses]), or an output that does
    not carry the values the feature delivered ([carries]), is MISSING FEATURE
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
    "C7508": "setmaxnreg was ignored (ptxas C7508): the kernel needs a register cap at entry, "
             "__launch_bounds__(threads, 1), and each warpgroup's role in one branch of an if/else",
    "C7515": "wgmma was serialized (ptxas C7515): an accumulator was touched between wgmma.fence and "
             "wgmma.wait_group, or the wgmmas were not issued back to back",
}


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


def _model_cases(mod, ex) -> list[dict]:
    if hasattr(mod, "model_cases"):
        return list(mod.model_cases)
    cases = ex.meta.get("cases", {})
    return list(cases.get("model", cases.get("list", [])[:1]))


def _run_model(b, mod, ex, sub, checked) -> Result | None:
    """Step 5: the CPU model. Returns a final Result (WRONG/HANG), or None to go on."""
    try:
        from judge import model
    except ImportError:
        return None
    if not all(hasattr(model, n) for n in ("run", "Violation", "Hang", "Unsupported")):
        return None                                      # no model in this installation
    from judge.gpu import launch as _launch
    cases = _model_cases(mod, ex)
    for i, case in enumerate(cases):
        sub.progress(f"CPU model of the async machine: case {i + 1}/{len(cases)} ({_case_name(case)})")
        try:
            comps = run_case(b, mod, ex, case, np)
        except model.Unsupported as e:
            checked.append(f"the CPU model cannot run this kernel ({e}); not checked by it")
            return None
        except model.Violation as e:
            return Result(Verdict.WRONG, str(e), checked=checked,
                          details=["found by the CPU model of the machine, which delivers every asynchronous "
                                   "copy at the last moment the rules allow: the race is real even if a GPU "
                                   "usually gives the right numbers"])
        except model.Hang as e:
            return Result(Verdict.HANG, str(e).splitlines()[0], details=str(e).splitlines()[1:], checked=checked)
        except _launch.LaunchError as e:           # a shape the hardware refuses is refused everywhere
            return Result(Verdict.WRONG, str(e), checked=checked)
        except Exception as e:  # noqa: BLE001 - a gap in the model is never the learner's fault
            checked.append(f"the CPU model could not run this kernel ({type(e).__name__}: {e}); not checked by it")
            return None
        bad = _first_failure(comps)
        if bad is not None:
            return Result(Verdict.WRONG, bad.message, checked=checked,
                          details=["on the CPU model of the machine (asynchronous copies land as late as the "
                                   "rules allow, shared memory a stage releases is poisoned)"])
        counts = getattr(_launch.last_model_report, "counts", {}) or {}
        unused = _unused_features(ex, counts) or _bypassed(ex, counts)
        if unused:
            return Result(Verdict.MISSING_FEATURE, unused, checked=checked,
                          details=["the instruction is in the SASS, but the work does not go through it: "
                                   "counted by the CPU model while it ran your kernel"])
    if cases:
        checked.append(f"correct under the CPU model of the async machine on {len(cases)} small case(s)")
    return None


def _unused_features(ex, counts: dict) -> str:
    """exercise.toml [uses]: `"cp.async" = 0.9` asks that at least 90 % of the bytes written into shared
    memory, as the kernel ran, went through that path (smem_fill.<path>.bytes in the model's counts).
    A feature kept in a branch that never runs shows in the SASS; here it counts for nothing."""
    fills = {k[len("smem_fill."):-len(".bytes")]: v for k, v in counts.items()
             if k.startswith("smem_fill.") and k.endswith(".bytes")}
    total = sum(fills.values())
    for path, share in ex.meta.get("uses", {}).items():
        got = fills.get(path, 0) / total if total else 0.0
        if got < float(share):
            others = ", ".join(f"{k} {v / total:.0%}" for k, v in fills.items() if k != path) if total else "none"
            return (f"only {got:.0%} of the bytes written into shared memory went through {path} when the kernel "
                    f"ran (at least {float(share):.0%} must; the rest: {others})")
    return ""


def _bypassed(ex, counts: dict) -> str:
    """exercise.toml [carries]: `"tcgen05.ld" = 0.99` asks that at least 99 % of the bytes the kernel
    stored to global memory carry values that came out of that instruction (the model marks its
    destination registers and follows the mark through every instruction that reads them:
    gstore.from.<feature>.bytes of gstore.bytes). A kernel that runs the feature and then computes its
    output another way gets MISSING FEATURE."""
    total = counts.get("gstore.bytes", 0)
    for feature, share in ex.meta.get("carries", {}).items():
        got = counts.get(f"gstore.from.{feature}.bytes", 0) / total if total else 0.0
        if got < float(share):
            return (f"only {got:.0%} of the bytes the kernel stored to global memory carry values read with "
                    f"{feature} (at least {float(share):.0%} must): the output was computed another way, "
                    f"bypassing what {feature} delivers")
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
            return Result(Verdict(rule["verdict"]), rule["why"], details=[line.strip()], checked=checked)
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
    broken = sass.rule_violations(k_sass)
    if broken:
        return Result(Verdict.WRONG, broken[0], checked=checked, details=broken[1:])
    checked.append("no rule the SASS can show broken (proxy fence before a TMA store, exit before its read)")

    runs_here = gpu.meets(target)
    if not runs_here and not target.startswith("sm_90"):          # Blackwell work: no such GPU here
        if _model_cases(mod, ex):
            early = _run_model(b, mod, ex, sub, checked)
            if early is not None:
                return early
        modelled = any("CPU model" in c and "correct" in c for c in checked)
        if _model_cases(mod, ex) and not modelled:    # the model could not run it: no verdict either way
            return Result(Verdict.SKIP, f"compiled for {target}, SASS checked; the CPU model could not run the "
                                        f"kernel and there is no {target} GPU here", checked=checked,
                          details=["not checked: correctness (see above what the model lacks)"])
        extra = list(mod.simulate(b, sub)) if hasattr(mod, "simulate") else []
        what = (f"ran {'; '.join(_case_name(c) for c in _model_cases(mod, ex))} on the CPU model of the "
                f"machine and matched float64" if modelled else "SASS checked"
                + (", protocol simulated" if extra else ""))
        return Result(Verdict.PASS, f"compiled for {target}; {what}; not run on a GPU: no {target} GPU here",
                      checked=checked + extra)
    early = _run_model(b, mod, ex, sub, checked)
    if early is not None:
        return early
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
    cases = list(meta.get("cases", {}).get("list", []))
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

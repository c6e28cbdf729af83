"""The CUDA grading flow: one pipeline of steps for every GPU exercise, driven by its exercise.toml.

    # exercises/<id>/check.py
    def inputs(case, xp, rng): ...            # fresh random inputs (xp: cupy on a GPU, numpy on the CPU model)
    def outputs(case, ins, xp): ...           # allocated here, poisoned by the engine before every launch
    def reference(case, ins): ...             # numpy inputs -> float64 (or exact) expected outputs
    def launch(build, case, ins, outs):       # one launch of the learner's kernel; return what
        return judge.gpu.launch.launch(...)   # judge.gpu.launch.launch returns (the CPU model's report)
    def work(case): ...                       # {"flops": .., "bytes": ..} one launch must at least do
    def check(sub):
        return cuda_flow.grade(sub, __import__(__name__))

Optional: tolerance(case) -> {"rtol", "atol", "norm_tol"} (else exercise.toml [tolerance]),
baseline(case, ins, outs) (ceiling = "baseline"), simulate(build, sub) -> list[str] of what it
checked (targets no GPU here can run, e.g. sm_100a), model_cases (cases small enough for the CPU model,
same form as exercise.toml's [cases] model), owned(case, name, ctaids) -> bool mask of the output
`name` that the blocks `ctaids` write (lets the model run a sample of a large grid, [model] max_blocks),
gpu_checks(build, sub) -> Result or None (checks of the exercise's own on the GPU).

Cases are families, drawn per run: in exercise.toml [cases], a value may be a number (fixed), a list
(one of them, drawn), or a table {min, max, step} (a value of range(min, max + 1, step), drawn). So
`model = [{M = 128, N = 128, K = 8}, {M = [128, 256], N = 128, K = {min = 24, max = 200, step = 16}}]`
always runs a single K tile and a K with a tail, with sizes no kernel can special-case in advance.
The CPU model runs the launch check.py makes: the real grid of the case, %nsmid and the other special
registers as on an H200. With [model] max_blocks and check.owned, a grid larger than that runs a random
sample of its clusters (the rest skipped, said in the result; their outputs are not compared).

The flow is STEPS, below: each step is a function that reads and writes one `Grading` (the exercise,
check.py, the build, what was checked, the CPU model's outcome, ...) and nothing else; a step that
reaches a verdict sets `grading.result` and the flow stops there. What a later step decides from an
earlier one it reads from typed fields (`grading.model.verdict == "correct"`), never from messages.
In order:
 1. compile_kernel: compile for the exercise's target                  -> COMPILE ERROR (file and line)
 2. log_rules: warnings the exercise forbids in the compile log ([log]) -> its verdict, the message
    naming the cause found in the PTX (C7515: accumulators zeroed by plain moves in a wait<1> pipeline,
    or no wait in the loop; C7508: no register count at entry, with the __launch_bounds__ to add)
 3. sass_features: the kernel exists; its SASS shows every required feature  -> MISSING FEATURE
 4. model_cases: the cases the CPU model runs, drawn once for this run
 5. cpu_model: the CPU model of the machine (judge.model) runs them, where it knows every instruction:
    a protocol race is WRONG here whatever a GPU happened to do; a kernel that can never finish is HANG;
    a trap (a device-side assert) is CRASH; a feature present in the SASS but not on the path that does
    the work ([uses]), or an output that does not carry the values the feature delivered ([carries]), is
    MISSING FEATURE
 6. sass_rules: rules the SASS proves broken (proxy fence before a TMA store; an unconditional exit
    reachable from a TMA store with no wait for its read) -> WRONG, naming the rule. After the model, so
    that a kernel that hangs or races is told so; the model checks both rules exactly, thread by thread.
 7. without_gpu: no GPU can run the target here: sm_90a -> the model's verdict (or SKIP, saying what was
    and was not checked); sm_100a (no Blackwell GPU here) -> the model's verdict on its cases, or
    compiled, SASS and simulate(): a PASS that names what ran and says plainly no GPU ran it
 8. exercise_gpu_checks: check.gpu_checks, the exercise's own checks on the GPU (e.g. a trace)
 9. gpu_cases: every case on the GPU, fresh random inputs, poisoned outputs -> WRONG (a launch the
    hardware would refuse is WRONG with judge.gpu.launch's message)
10. timing at [timing].case: outputs poisoned before the timed launches and compared after them (work
    skipped on later launches is WRONG); a rate above what a Hopper GPU can do is WRONG; the ceiling is
    measured in the same process; tiers as fractions of it; a fraction above [timing].max_fraction (what a
    kernel of this kind can reach against that ceiling) is WRONG. A figure within the measured spread of a
    tier's line gets the lower tier and says so.
"""
from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType

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


#: printf lines of a wrong kernel that a result shows (judge.model keeps up to its own limit)
PRINTED_SHOWN = 20


class CheckDefect(Exception):
    """check.py breaks the flow's contract (a defect of the exercise, never the learner's)."""


# ------------------------------------------------------------------------------------ what a run holds
@dataclass
class ModelCase:
    """One case the CPU model ran: every output compared, what of the grid ran, the model's report."""
    case: dict
    comparisons: list
    note: str = ""                   # "the whole grid, 4 blocks" or the sample of a large grid
    report: object = None            # judge.model's Report (counts, printed, ctaids, ...)


@dataclass
class ModelOutcome:
    """What the CPU model found, when it found no fault (a fault is the run's Result)."""
    verdict: str = "not run"         # "correct": every case matched; "not run": see why
    why: str = ""                    # why it did not run: no cases, no model here, an instruction it lacks
    cases: list = field(default_factory=list)   # ModelCase, one per case run

    def ran(self) -> str:
        """The cases that ran and what of their grids, for the messages."""
        return "; ".join(_case_name(c.case) + (f" ({c.note})" if c.note else "") for c in self.cases)


@dataclass
class Grading:
    """One grading of one learner file: what every step reads and writes."""
    sub: object                      # judge.grading.submission.Submission: progress, busy, build
    check: ModuleType                # the exercise's check.py
    ex: object                       # judge.grading.exercise.Exercise: the typed exercise.toml
    runs_here: bool = False          # a GPU here runs the exercise's target
    build: object = None             # judge.gpu.build.Build: the learner's file, compiled
    kernel_sass: str = ""            # the graded kernel's SASS
    checked: list = field(default_factory=list)        # what was checked, said in the Result
    model_cases: list | None = None  # the cases the CPU model runs this run (drawn once)
    model: ModelOutcome | None = None
    gpu_cases: list = field(default_factory=list)      # the cases run on the GPU this run
    result: Result | None = None     # set by the step that reaches the verdict

    @property
    def blackwell_here(self) -> bool:
        """A target past Hopper that no GPU here runs: graded by the model, SASS and simulate() alone."""
        return not self.runs_here and not self.ex.target.startswith("sm_90")

    def stop(self, verdict: Verdict, message: str, **kw) -> None:
        self.result = Result(verdict, message, checked=self.checked, **kw)


def _seed() -> int:
    return int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF


def _case_name(case: dict, seed: int | None = None) -> str:
    s = " ".join(f"{k}={v}" for k, v in case.items() if k != "seed" or seed is None)
    return s + (f" seed={seed}" if seed is not None else "")


def tolerance(check, ex, case) -> dict:
    """How close outputs must be: check.tolerance(case), else exercise.toml [tolerance]."""
    if hasattr(check, "tolerance"):
        return dict(check.tolerance(case))
    t = ex.tolerance
    if t.exact:
        return {"rtol": 0.0, "atol": 0.0}
    return {k: float(getattr(t, k)) for k in ("rtol", "atol", "norm_tol") if getattr(t, k) is not None}


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
    tol = tolerance(mod, ex, case)
    return [compare.compare(outs[k], ref[k], case=f"{k}, {_case_name(case, seed)}", **tol) for k in ref]


def _first_failure(comps):
    return next((c for c in comps if not c.ok), None)


def draw_case(spec: dict, rng) -> dict:
    """One concrete case from a case family: a number stays, a list gives one of its values, a table
    {min, max, step} one of range(min, max + 1, step); drawn with `rng` (fresh per run)."""
    out = {}
    for k, v in spec.items():
        if isinstance(v, (list, tuple)):
            v = v[int(rng.integers(len(v)))]
        elif isinstance(v, Mapping):
            lo, hi, step = int(v["min"]), int(v["max"]), int(v.get("step", 1))
            v = lo + step * int(rng.integers((hi - lo) // step + 1))
        out[k] = v
    return out


# ------------------------------------------------------------------------------------------ the steps
def compile_kernel(g: Grading) -> None:
    """Step 1: compile the learner's file for the exercise's target."""
    from judge.gpu import build as _build
    target = g.ex.target
    g.sub.progress(f"compiling for {target}")
    try:
        g.build = g.sub.build(target=target)
    except _build.CompileError as e:
        g.result = Result(Verdict.COMPILE_ERROR, e.first_error(), details=e.log.splitlines()[:12])
        return
    g.checked.append(f"compiled for {target} (NVRTC {_build.nvrtc_version()})")


def log_rules(g: Grading) -> None:
    """Step 2: compiler messages that decide a verdict ([log])."""
    for code, (verdict, why) in log_rule_table(g.ex.log).items():
        if re.search(rf"\b{code}\b", g.build.log):
            line = next(l for l in g.build.log.splitlines() if code in l)
            cause = _log_cause(code, g.build, g.ex.kernel, g.check)
            g.stop(Verdict(verdict), f"ptxas {code}: {cause}" if cause else why, details=[line.strip()])
            return


def sass_features(g: Grading) -> None:
    """Step 3: the kernel exists and its SASS shows every feature the exercise teaches."""
    kernel, ex = g.ex.kernel, g.ex
    try:
        g.kernel_sass = g.build.sass_of(kernel)
    except KeyError as e:
        g.stop(Verdict.WRONG, str(e.args[0]))
        return
    res = g.build.resources.get(kernel, {})
    if res:
        g.checked.append(f"{res['registers']} registers, {res['shared']} B static shared, "
                         f"{res['spill_stores']} B spilled")
    missing = [f for f in ex.features if not sass.uses(g.kernel_sass, f)]
    if missing:
        descr = "; ".join(sass.FEATURES[f].describe for f in missing)
        g.stop(Verdict.MISSING_FEATURE, f"the SASS of {kernel} shows no {descr}",
               details=["the compiler emits these instructions only for the PTX or intrinsics the "
                        "exercise asks for: python practice/judge.py sass " + ex.id + " shows yours"])
        return
    g.checked.append("SASS shows " + ", ".join(f"{f} ({sass.FEATURES[f].count(g.kernel_sass)})"
                                                for f in ex.features))


def draw_model_cases(check, ex, seed: int | None = None) -> list[dict]:
    """The CPU model's cases for one run: drawn from exercise.toml [domain] by judge.grading.domain with
    `seed` (each case carries it as JUDGE_MODEL_SEED, which replays its inputs, its landing order and its
    sample); else from check.model_cases, else [cases] model, else the first of [cases] list."""
    from judge.grading import domain
    if ex.domain.classes:
        seed = domain.seed_for_run() if seed is None else seed
        return [{**c, domain.SEED_VAR: seed} for c in domain.draw(ex.domain, seed, ex.model.max_blocks)]
    if check is not None and hasattr(check, "model_cases"):
        specs = list(check.model_cases)
    else:
        specs = list(ex.cases.model or ex.cases.list[:1])
    rng = np.random.default_rng(_seed() if seed is None else seed)
    return [draw_case(c, rng) for c in specs]


def model_cases(g: Grading) -> None:
    """Step 4: the cases the CPU model runs, drawn once per run (draw_model_cases)."""
    g.model_cases = draw_model_cases(g.check, g.ex)


def cpu_model(g: Grading) -> None:
    """Step 5: every model case on the CPU model: a fault is the verdict; else g.model says what ran.

    The cases run in lockstep (the runnable threads at the lowest PC together); then the quickest of them runs
    once more with warps running ahead of each other ([model] ahead, judge.model.scheduler.Ahead, drawn from
    the case's seed): orders lockstep never produces (one warp's arrivals before another's copies, a consumer
    far ahead of its producer), which the PTX memory model allows and the hardware may take."""
    if not g.model_cases:
        g.model = ModelOutcome(why="no case for the CPU model")
        return
    try:
        from judge import model
    except ImportError:
        g.model = ModelOutcome(why="no CPU model in this installation")
        return
    if not model.available():
        g.model = ModelOutcome(why="no CPU model in this installation")
        return
    b = g.build.for_model(**model_options(g.check, g.ex))
    done, took = [], []
    for i, case in enumerate(g.model_cases):
        g.sub.progress(f"CPU model of the async machine: case {i + 1}/{len(g.model_cases)} ({_case_name(case)})")
        t0 = time.perf_counter()
        ran = _model_run(g, b, case, "")
        if ran is None:
            return
        took.append(time.perf_counter() - t0)
        done.append(ran)
    again = ""
    if g.ex.model.ahead:
        case = g.model_cases[int(np.argmin(took))]
        g.sub.progress(f"CPU model of the async machine: {_case_name(case)} again, warps running ahead of each other")
        ran = _model_run(g, b.for_model(schedule="ahead"), case, " (warps running ahead of each other)")
        if ran is None:
            return
        ran.note = (ran.note + "; " if ran.note else "") + "again, warps running ahead of each other"
        done.append(ran)
        again = ", the quickest once more with warps running ahead of each other"
    g.model = ModelOutcome(verdict="correct", cases=done)
    g.checked.append(f"correct under the CPU model of the async machine on {len(took)} case(s) drawn for "
                     f"this run{again}: {g.model.ran()}")


def _model_run(g: Grading, b, case, how: str):
    """One model case (model_case); a fault, a wrong output or a bypassed feature stops the grading with its
    verdict (None returned, g.result or g.model set), else the case's ModelCase. `how` names the schedule."""
    from judge import model
    from judge.gpu import launch as _launch
    name = _case_name(case) + how
    try:
        with g.sub.busy(work="model"):               # the model's step budget bounds a kernel's endless loop
            ran = model_case(b, g.check, g.ex, case)
    except CheckDefect:
        raise
    except model.Unsupported as e:
        g.checked.append(f"the CPU model cannot run this kernel ({e}); not checked by it")
        g.model = ModelOutcome(why=f"it cannot run this kernel ({e})")
        return None
    except model.Violation as e:
        if e.rule == "trap":                          # __trap(), a failed device-side assert
            g.stop(Verdict.CRASH, f"{e.message} (at {e.where}; case {name})",
                   details=["on a GPU the launch fails (CUDA_ERROR_LAUNCH_FAILED / device-side assert "
                            "triggered) and the process's context is lost: fix the condition the "
                            "assert checks, for this case"])
            return None
        g.stop(Verdict.WRONG, str(e),
               details=[f"case {name}; found by the CPU model of the machine, which "
                        "delivers every asynchronous copy at the last moment the rules allow and "
                        "orders memory only as the PTX ISA does: the race is real even if a GPU "
                        "usually gives the right numbers"])
        return None
    except model.Hang as e:
        lines = str(e).splitlines()
        g.result = Result(Verdict.HANG, lines[0], details=[f"case {name}"] + lines[1:], checked=g.checked)
        return None
    except _launch.LaunchError as e:           # a shape the hardware refuses is refused everywhere
        g.stop(Verdict.WRONG, str(e))
        return None
    except Exception as e:  # noqa: BLE001 - a gap in the model is never the learner's fault
        g.checked.append(f"the CPU model could not run this kernel ({type(e).__name__}: {e}); "
                         "not checked by it")
        g.model = ModelOutcome(why=f"it could not run this kernel ({type(e).__name__}: {e})")
        return None
    bad = _first_failure(ran.comparisons)
    if bad is not None:
        g.stop(Verdict.WRONG, bad.message,
               details=[f"case {name}, on the CPU model of the machine (asynchronous copies land as late as the "
                        "rules allow, shared memory a stage releases is poisoned)"]
               + _printed(getattr(ran.report, "printed", None)))
        return None
    counts = getattr(ran.report, "counts", {}) or {}
    unused = (_unused_features(g.ex, counts, case, g.check.work(case) if hasattr(g.check, "work") else None)
              or _bypassed(g.ex, counts))
    if unused:
        g.stop(Verdict.MISSING_FEATURE, unused,
               details=[f"case {name}; the instruction is in the SASS, but the work does "
                        "not go through it: counted by the CPU model while it ran your kernel"])
        return None
    return ran


def sass_rules(g: Grading) -> None:
    """Step 6: rules the SASS proves broken, after the model (a hang or a race is named first)."""
    broken = sass.rule_violations(g.kernel_sass)
    if broken:
        g.stop(Verdict.WRONG, broken[0], details=broken[1:])
        return
    if not g.blackwell_here:
        g.checked.append("no rule the SASS can show broken (proxy fence before a TMA store, exit before its read)")


def without_gpu(g: Grading) -> None:
    """Step 7: the verdict where no GPU here runs the target, from the model's outcome."""
    from judge import gpu
    if g.runs_here:
        return
    target, correct = g.ex.target, g.model.verdict == "correct"
    if g.blackwell_here:
        if g.model_cases and not correct:         # the model could not run it: no verdict either way
            g.stop(Verdict.SKIP, f"compiled for {target}, SASS checked; the CPU model could not run the "
                                 f"kernel and there is no {target} GPU here",
                   unchecked=["not checked: correctness (see above what the model lacks)"])
            return
        extra = list(g.check.simulate(g.build, g.sub)) if hasattr(g.check, "simulate") else []
        what = (f"ran on the CPU model of the machine and matched float64 ({g.model.ran()})" if correct
                else "SASS checked" + (", protocol simulated" if extra else ""))
        g.result = Result(Verdict.PASS, f"compiled for {target}; {what}; not run on a GPU: no {target} GPU here",
                          checked=g.checked + extra)
        return
    what = "correct under the async model; speed not measured here" if correct else gpu.why_not(target)
    g.stop(Verdict.PASS if correct else Verdict.SKIP, what,
           unchecked=[f"not checked here: {'timing and ' if correct else 'correctness, timing and '}"
                    f"the real hardware's behaviour ({gpu.why_not(target)})"])


def exercise_gpu_checks(g: Grading) -> None:
    """Step 8: check.gpu_checks(build, sub), the exercise's own checks on the GPU (e.g. a trace)."""
    if hasattr(g.check, "gpu_checks"):
        early = g.check.gpu_checks(g.build, g.sub)
        if early is not None:
            early.checked = g.checked + early.checked
            g.result = early


def gpu_cases(g: Grading) -> None:
    """Step 9: every case of [cases] list on the GPU (families drawn per run), fresh inputs each."""
    import cupy
    from judge import gpu
    from judge.gpu import launch as _launch
    rng = np.random.default_rng(_seed())
    g.gpu_cases = [draw_case(c, rng) for c in g.ex.cases.list]
    for i, case in enumerate(g.gpu_cases):
        g.sub.progress(f"case {i + 1}/{len(g.gpu_cases)}: {_case_name(case)} on {gpu.info().name}")
        try:
            comps = run_case(g.build, g.check, g.ex, case, cupy)
        except _launch.LaunchError as e:
            g.stop(Verdict.WRONG, str(e))
            return
        bad = _first_failure(comps)
        if bad is not None:
            g.stop(Verdict.WRONG, bad.message, details=[f"passed {i} case(s) before this one"])
            return
    g.checked.append(f"{len(g.gpu_cases)} cases correct on {gpu.info().name}")
    if g.ex.timing is None:
        g.stop(Verdict.PASS, f"{len(g.gpu_cases)} cases correct")


def timing(g: Grading) -> None:
    """Step 10: time the learner's kernel and the ceiling at [timing].case; check the timed output."""
    g.result = _measure(g.build, g.check, g.ex, g.sub, g.checked)


#: the flow, in order: each step reads and writes the Grading; the first to set a result ends it
STEPS = (compile_kernel, log_rules, sass_features, model_cases, cpu_model, sass_rules, without_gpu,
         exercise_gpu_checks, gpu_cases, timing)


def grade(sub, mod) -> Result:
    """Grade the learner's CUDA file for a GPU exercise: STEPS in order (see the module docstring)."""
    from judge import gpu
    g = Grading(sub=sub, check=mod, ex=sub.exercise, runs_here=gpu.meets(sub.exercise.target))
    for step in STEPS:
        step(g)
        if g.result is not None:
            return g.result
    raise CheckDefect(f"{sub.exercise.id}: the grading flow ended without a verdict")


# ------------------------------------------------------------------------------------------ the CPU model
def model_options(check, ex) -> dict:
    """What judge.model.run is told beyond the launch ([model]): the target GPU's SM count, and how many
    blocks of a large grid it may run (a random sample of whole clusters; only with check.owned, which
    says what they write)."""
    opts = {"sms": int(ex.model.sms)}
    if ex.model.max_blocks and hasattr(check, "owned"):
        opts["max_blocks"] = int(ex.model.max_blocks)
    return opts


def model_case(b, check, ex, case) -> ModelCase:
    """One model case through check.py's own launch, the real grid (b: the build with its model options,
    `build.for_model(**model_options(check, ex))`); outputs of skipped blocks (a sampled grid) are not
    compared; a sampled block's writes are followed wherever they lie (domain.follow_sample)."""
    from judge.grading import domain
    seed = case.get("seed", _seed())                  # a drawn domain case carries its own (replayable)
    if "seed" in case:
        b = b.for_model(seed=seed)                    # the model's landing order and sample, replayed too
    ins = check.inputs(case, np, np.random.default_rng(seed))
    outs = check.outputs(case, ins, np)
    for v in outs.values():
        compare.poison(v)
    rep = check.launch(b, case, ins, outs)
    if rep is None:
        raise CheckDefect(f"{ex.id}/check.py: launch() must return what judge.gpu.launch.launch returns "
                          "(the CPU model's report)")
    ref = check.reference(case, _host(ins))
    note = ""
    ran = getattr(rep, "ctaids", None)
    total = getattr(rep, "blocks_total", None)
    failed = []
    if ran is not None and total and len(ran) < total:
        note = f"{len(ran)} of the grid's {total} blocks, a random sample of whole clusters"
        outs, failed = domain.follow_sample(check, ex, case, ref, outs, ran)   # what they wrote, wherever
    elif total:
        note = f"the whole grid, {total} block{'s' if total > 1 else ''}"
    tol = tolerance(check, ex, case)
    comps = failed + [compare.compare(outs[k], ref[k], case=f"{k}, {_case_name(case, seed)}", **tol) for k in ref]
    return ModelCase(case, comps, note, rep)


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
    for path, share in ex.uses.items():
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
    for feature, share in ex.carries.items():
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


def log_rule_table(log) -> dict[str, tuple[str, str]]:
    """exercise.toml [log] (its typed Log) as code -> (verdict, why): `forbid = ["C7508"]` (WRONG, with the
    message above), or `C7508 = { verdict = "MISSING FEATURE", why = "..." }` for a verdict and message of
    its own."""
    rules = {c: ("WRONG", LOG_CODES.get(c, f"the compiler reported {c}")) for c in log.forbid}
    rules.update({c: (r.verdict, r.why) for c, r in log.rules.items()})
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
    peak_key = ex.timing.peak
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
    tcfg = ex.timing
    case = dict(tcfg.case)
    reps = int(tcfg.reps)
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
    with sub.busy(work="reference"):    # float64 on the CPU, after the launches: at the timing size it takes seconds
        ref = mod.reference(case, _host(sets[last]))
    tol = tolerance(mod, ex, case)
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
    name = tcfg.ceiling
    sub.progress(f"timing the ceiling ({name}) in the same process")
    if name == "baseline":
        bouts = mod.outputs(case, sets[0], cupy)
        ceil = timing.bench(lambda ins: mod.baseline(case, ins, bouts), [(s,) for s in sets], reps=reps)
    else:
        ceil = timing.ceiling(name, case.get("n"))
    value = _fraction(t, ceil)
    most = tcfg.max_fraction                             # 0: no bound
    if most and value > float(most):
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

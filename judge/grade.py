"""Grading: verdicts, results, and the one function that checks a learner's file.

    from judge import grade
    r = grade.check("pipeline_timeline")                 # the learner's workspace file
    r = grade.check("pipeline_timeline", "my_try.py")    # or any file
    r.verdict, r.tier, r.message

Every check runs in a child process (judge.isolate): a learner's loop that never ends
is a HANG, a kernel that faults is a CRASH, and the caller (CLI or notebook) carries on.

Verdicts: PASS (with a tier for timed exercises), WRONG, TOO SLOW, MISSING FEATURE,
HANG, CRASH, COMPILE ERROR, SKIP (needs a GPU; says what was still checked here).
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import exercise as _ex
from .result import TIERS, Result, Stop, Verdict, tier_for  # noqa: F401 - re-exported
from .submission import Submission, learner_error  # noqa: F401 - re-exported


# ------------------------------------------------------------------ the CUDA exercise flow
def cuda_flow(sub: Submission, *, kernel: str, features: list[str], run_cases, measure=None,
              tiers: dict | None = None, build_kw: dict | None = None) -> Result:
    """The usual grading of a CUDA exercise, in order, stopping at the first failure:

    1. compile for sm_90a                -> COMPILE ERROR (NVRTC's log names file and line)
    2. SASS shows each required feature  -> MISSING FEATURE
    3. no Hopper GPU here                -> SKIP, saying what was checked (1 and 2)
    4. run_cases(build, sub) -> list[Comparison] on fresh random inputs, poisoned outputs -> WRONG
    5. measure(build, sub) -> (value, measurements) where value is a fraction of a ceiling
       measured in the same run -> TOO SLOW below tiers["bronze"], else PASS with its tier
    """
    from . import build as _build
    from . import gpu, sass
    checked = []
    sub.progress("compiling for sm_90a")
    try:
        b = sub.build(**(build_kw or {}))
    except _build.CompileError as e:
        return Result(Verdict.COMPILE_ERROR, e.first_error(), details=e.log.splitlines()[:12])
    checked.append(f"compiled for {b.target}")
    try:
        k_sass = b.sass_of(kernel)
    except KeyError as e:
        return Result(Verdict.WRONG, str(e.args[0]), checked=checked)
    missing = [f for f in features if not sass.uses(k_sass, f)]
    res = b.resources.get(kernel, {})
    if res:
        checked.append(f"{res['registers']} registers, {res['shared']} B static shared, "
                       f"{res['spill_stores']} B spilled")
    if missing:
        descr = "; ".join(sass.FEATURES[f].describe for f in missing)
        return Result(Verdict.MISSING_FEATURE, f"the SASS of {kernel} shows no {descr}",
                      details=["the compiler only emits these instructions for the PTX/intrinsics "
                               "the exercise asks for; look at the SASS with build.compile(...).sass_of()"],
                      checked=checked)
    checked.append("SASS shows " + ", ".join(f"{f} ({sass.FEATURES[f].count(k_sass)})" for f in features))
    if not gpu.meets("sm_90"):
        return Result(Verdict.SKIP, gpu.why_not("sm_90"), checked=checked)
    sub.progress("running on " + gpu.info().name)
    comps = run_cases(b, sub)
    for c in comps:
        if not c.ok:
            return Result(Verdict.WRONG, c.message, checked=checked,
                          details=[f"passed {sum(x.ok for x in comps[:comps.index(c)])} case(s) before this one"])
    checked.append(f"{len(comps)} cases correct (worst relative error "
                   f"{max(c.rel_err for c in comps):.2g})")
    if measure is None:
        return Result(Verdict.PASS, f"{len(comps)} cases correct", checked=checked)
    value, meas = measure(b, sub)
    tiers = tiers or {}
    tier = tier_for(value, tiers)
    meas = dict(meas, fraction=value)
    if tier is None:
        return Result(Verdict.TOO_SLOW, f"{value:.2f} of the ceiling; bronze needs {tiers.get('bronze')}",
                      checked=checked, measurements=meas)
    return Result(Verdict.PASS, f"correct on {len(comps)} cases; {value:.2f} of the ceiling",
                  tier=tier, checked=checked, measurements=meas)


# ------------------------------------------------------------------ the entry point
def check(ex_id: str, file: str | Path | None = None, *, progress=None, timeout: float | None = None,
          quiet: bool = False) -> Result:
    """Grade a file for an exercise (default: the learner's workspace copy), in a child process."""
    from . import isolate, workspace
    ex = _ex.get(ex_id)
    path = Path(file) if file is not None else workspace.learner_path(ex)
    if not path.exists():
        hint = (f"run `python practice/judge.py start {ex.id}` first" if file is None
                else "check the path")
        raise FileNotFoundError(f"no file {path}: {hint}")
    if progress is None and not quiet:
        progress = lambda s: print(f"  .. {s}", file=sys.stderr, flush=True)
    result = isolate.run_check(ex, path.resolve(), progress=progress, timeout=timeout)
    result.exercise, result.file = ex.id, str(path)
    if result.verdict not in (Verdict.PASS, Verdict.SKIP) and path.read_text() == ex.starter_path.read_text():
        result.details.insert(0, f"this is still the untouched starter: write the parts it marks "
                                 f"(the statement is {ex.statement_path.relative_to(ex.folder.parent.parent)})")
    return result

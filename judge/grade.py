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

import html
import json
import sys
import traceback
from dataclasses import dataclass, field, asdict
from enum import Enum
from pathlib import Path

from . import exercise as _ex


class Verdict(str, Enum):
    PASS = "PASS"
    WRONG = "WRONG"
    TOO_SLOW = "TOO SLOW"
    MISSING_FEATURE = "MISSING FEATURE"
    HANG = "HANG"
    CRASH = "CRASH"
    COMPILE_ERROR = "COMPILE ERROR"
    SKIP = "SKIP"

    def __str__(self):
        return self.value


TIERS = ("bronze", "silver", "gold")


@dataclass
class Result:
    verdict: Verdict
    message: str = ""
    tier: str | None = None                              # bronze / silver / gold on a timed PASS
    details: list[str] = field(default_factory=list)     # further lines worth reading
    checked: list[str] = field(default_factory=list)     # what was checked (shown on SKIP too)
    measurements: dict = field(default_factory=dict)     # figures (times, fractions of ceilings)
    figures: list[str] = field(default_factory=list)     # PNG paths
    exercise: str = ""
    file: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == Verdict.PASS

    def headline(self) -> str:
        tier = f" ({self.tier})" if self.tier else ""
        return f"{self.verdict}{tier}: {self.message}" if self.message else f"{self.verdict}{tier}"

    def __str__(self):
        lines = [f"[{self.exercise}] {self.headline()}"]
        lines += [f"  {d}" for d in self.details]
        if self.checked:
            lines.append("  checked: " + "; ".join(self.checked))
        lines += [f"  figure: {f}" for f in self.figures]
        return "\n".join(lines)

    def _repr_html_(self):
        color = {"PASS": "#1a7f37", "SKIP": "#6e7781"}.get(self.verdict.value, "#cf222e")
        tier = f" &middot; {self.tier}" if self.tier else ""
        rows = "".join(f"<li>{html.escape(d)}</li>" for d in self.details)
        chk = ("<div style='color:#57606a'>checked: " + html.escape("; ".join(self.checked))
               + "</div>") if self.checked else ""
        imgs = ""
        for f in self.figures:
            import base64
            try:
                data = base64.b64encode(Path(f).read_bytes()).decode()
                imgs += f"<img src='data:image/png;base64,{data}' style='max-width:100%'/>"
            except OSError:
                pass
        return (f"<div style='border-left:4px solid {color};padding:4px 10px'>"
                f"<b style='color:{color}'>{self.verdict.value}{tier}</b> "
                f"<code>{html.escape(self.exercise)}</code>: {html.escape(self.message)}"
                f"<ul>{rows}</ul>{chk}{imgs}</div>")

    def to_json(self) -> str:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return json.dumps(d, default=float)

    @classmethod
    def from_json(cls, text: str) -> "Result":
        d = json.loads(text)
        d["verdict"] = Verdict(d["verdict"])
        return cls(**d)


def tier_for(value: float, tiers: dict) -> str | None:
    """The best tier whose threshold `value` reaches (tiers: {"bronze": 0.4, ...}), else None."""
    best = None
    for t in TIERS:
        if t in tiers and value >= float(tiers[t]):
            best = t
    return best


# ------------------------------------------------------------------ what a check.py receives
class Stop(Exception):
    """Raised inside a check to end it with this Result (the worker turns it into the verdict)."""

    def __init__(self, result: "Result"):
        super().__init__(result.message)
        self.result = result


class Submission:
    """A learner's file as the exercise's check.py sees it (inside the child process)."""

    def __init__(self, ex: _ex.Exercise, path: Path, figure_dir: Path):
        self.exercise, self.path, self.figure_dir = ex, Path(path), Path(figure_dir)

    def progress(self, text: str) -> None:
        """Report progress (also resets the HANG watchdog): shown to the learner as it happens."""
        print(f"@@progress {text}", flush=True)

    def load_module(self):
        """Import the learner's Python file as a fresh module."""
        return _ex.import_file(self.path, f"learner_{self.exercise.id}")

    def learner_module(self, *names: str):
        """Import the learner's file and check that it defines these functions; return the module.

        Stops the check with WRONG (saying what to fix) when the file does not import or lacks one.
        """
        try:
            mod = self.load_module()
        except Exception as e:  # noqa: BLE001 - any learner error is reported, not raised
            raise Stop(Result(Verdict.WRONG, learner_error(e, f"importing your {self.exercise.learner_file}")))
        missing = [n for n in names if not callable(getattr(mod, n, None))]
        if missing:
            raise Stop(Result(Verdict.WRONG, f"{self.exercise.learner_file} defines no function "
                                             + " and no ".join(missing)))
        return mod

    def build(self, **kw):
        from . import build
        return build.compile(self.path, **kw)

    def figure(self, name: str) -> Path:
        self.figure_dir.mkdir(parents=True, exist_ok=True)
        return self.figure_dir / name


def learner_error(e: BaseException, what: str) -> str:
    """'what raised X: msg (file line N)' pointing at the learner's own frame."""
    tb = traceback.extract_tb(e.__traceback__)
    where = ""
    for fr in reversed(tb):
        if "judge" not in Path(fr.filename).parts and "exercises" not in Path(fr.filename).parts[-3:-1]:
            where = f" ({Path(fr.filename).name} line {fr.lineno})"
            break
    return f"{what} raised {type(e).__name__}: {e}{where}"


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
    from . import build as _build, gpu, sass
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
        progress = lambda s: print(f"  .. {s}", file=sys.stderr, flush=True)  # noqa: E731
    result = isolate.run_check(ex, path.resolve(), progress=progress, timeout=timeout)
    result.exercise, result.file = ex.id, str(path)
    if result.verdict not in (Verdict.PASS, Verdict.SKIP) and path.read_text() == ex.starter_path.read_text():
        result.details.insert(0, f"this is still the untouched starter: write the parts it marks "
                                 f"(the statement is {ex.statement_path.relative_to(ex.folder.parent.parent)})")
    return result

"""Exercises: one folder each under exercises/, described by its exercise.toml.

    exercises/<id>/
        exercise.toml    id, title, chapter, difficulty, needs_gpu, learner_file, hints,
                         [fixtures] (file -> verdict it must get), [tiers], features
        README.md        the statement a learner reads
        solution.<ext>   the reference solution: the single source of truth
        starter.<ext>    generated from the solution (a test checks they agree)
        check.py         the grader: check(sub) -> judge.grading.grade.Result, run in a child process
        fixtures/        wrong (and correct) solutions the judge must grade as declared

The starter is the solution with each region between BEGIN SOLUTION and END SOLUTION
comment lines replaced by that region's "starter lines": comment lines written
`#> text` (Python) or `//> text` (CUDA) become `text` in the starter.
"""
from __future__ import annotations

import difflib
import importlib.util
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from judge import config

_BEGIN = re.compile(r"^(\s*)(#|//)\s*BEGIN SOLUTION\b")
_END = re.compile(r"^\s*(#|//)\s*END SOLUTION\b")


class UnknownExercise(KeyError):
    def __init__(self, ex_id: str, suggestion: str | None):
        self.ex_id, self.suggestion = ex_id, suggestion
        hint = f"; did you mean '{suggestion}'?" if suggestion else ""
        super().__init__(f"no exercise '{ex_id}'{hint} (`python practice/judge.py list` shows them all)")

    def __str__(self):
        return self.args[0]


@dataclass
class Exercise:
    id: str
    title: str
    chapter: int
    difficulty: str
    needs_gpu: bool
    learner_file: str
    folder: Path
    hints: list[str] = field(default_factory=list)
    fixtures: dict[str, str] = field(default_factory=dict)      # file -> expected verdict
    fixture_notes: dict[str, str] = field(default_factory=dict)  # file -> why it must get that verdict
    tiers: dict = field(default_factory=dict)
    features: list[str] = field(default_factory=list)
    order: int = 0
    target: str = config.DEFAULT_TARGET      # what the learner's CUDA is built for (sm_90a, or sm_100a: compile-only here)
    meta: dict = field(default_factory=dict, repr=False)   # the whole exercise.toml (cases, timing, tolerance, ...)

    @property
    def ext(self) -> str:
        return Path(self.learner_file).suffix

    @property
    def solution_path(self) -> Path:
        return self.folder / f"solution{self.ext}"

    @property
    def starter_path(self) -> Path:
        return self.folder / f"starter{self.ext}"

    @property
    def statement_path(self) -> Path:
        return self.folder / "README.md"

    def fixture_path(self, name: str) -> Path:
        return self.folder / "fixtures" / name

    def statement(self) -> str:
        return self.statement_path.read_text()

    def starter_text(self) -> str:
        """The starter generated from the solution (see module docstring)."""
        return make_starter(self.solution_path.read_text())

    def reference(self):
        """The reference solution, imported as a module (Python exercises)."""
        return import_file(self.solution_path, f"{self.id}_reference")

    def sources(self) -> list[Path]:
        """Every file of the exercise (for the Hopper record's hashes)."""
        return sorted(p for p in self.folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def import_file(path, name: str | None = None):
    """Import a Python file as a fresh module (learners' files, checks, references)."""
    path = Path(path)
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod          # so the module can find itself (sys.modules[__name__], dataclasses)
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def grader(ex: "Exercise"):
    """The exercise's check(sub): its check.py's own, or, for a GPU exercise whose check.py defines only
    inputs/outputs/reference/launch/work, the shared CUDA flow (judge.grading.cuda_flow.grade) over that module."""
    mod = import_file(ex.folder / "check.py", f"check_{ex.id}")
    if callable(getattr(mod, "check", None)):
        return mod.check
    from judge.grading import cuda_flow
    return lambda sub: cuda_flow.grade(sub, mod)


def make_starter(solution: str) -> str:
    out, inside = [], False
    for line in solution.splitlines():
        if not inside and (m := _BEGIN.match(line)):
            inside, indent, mark = True, m.group(1), m.group(2)
            continue
        if inside and _END.match(line):
            inside = False
            continue
        if inside:
            s = line.strip()
            if s.startswith(mark + ">"):
                text = s[len(mark) + 1:]
                out.append(indent + text[1:] if text.startswith(" ") else indent + text)
            continue
        out.append(line)
    if inside:
        raise ValueError("BEGIN SOLUTION without END SOLUTION")
    return "\n".join(out) + "\n"


def _load(folder: Path) -> Exercise:
    meta = tomllib.loads((folder / "exercise.toml").read_text())
    fixtures, notes = {}, {}
    for name, v in meta.get("fixtures", {}).items():
        if isinstance(v, dict):
            fixtures[name], notes[name] = v["verdict"], v.get("why", "")
        else:
            fixtures[name] = v
    return Exercise(
        id=meta["id"], title=meta["title"], chapter=int(meta["chapter"]),
        difficulty=meta.get("difficulty", "medium"), needs_gpu=bool(meta.get("needs_gpu", False)),
        learner_file=meta["learner_file"], folder=folder, hints=list(meta.get("hints", [])),
        fixtures=fixtures, fixture_notes=notes, tiers=dict(meta.get("tiers", {})),
        features=list(meta.get("features", [])), order=int(meta.get("order", 0)),
        target=meta.get("target", config.DEFAULT_TARGET), meta=meta)


def all_exercises() -> list[Exercise]:
    exs = [_load(p.parent) for p in sorted(config.EXERCISES_DIR.glob("*/exercise.toml"))]
    return sorted(exs, key=lambda e: (e.chapter, e.order, e.id))


def get(ex_id: str) -> Exercise:
    exs = {e.id: e for e in all_exercises()}
    if ex_id in exs:
        return exs[ex_id]
    close = difflib.get_close_matches(ex_id, list(exs), n=1, cutoff=0.4)
    raise UnknownExercise(ex_id, close[0] if close else None)

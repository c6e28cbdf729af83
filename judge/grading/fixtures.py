"""Fixtures as the mistake itself: the solution plus one visible change, stored as a unified diff.

    exercises/<id>/fixtures/wrong_buffer.cu.patch    a diff against solution.cu (what a reader reviews)
    exercises/<id>/fixtures/correct_rolling.cu        a correct alternative written another way: a whole file
    exercises/<id>/fixtures/correct_phase_bit.cu.patch   a correct alternative that is the solution plus one change

exercise.toml keeps the fixture's name ("wrong_buffer.cu"), so verdict tables and the record keep their
keys. ex.fixture_path(name) gives a file to grade either way: a stored file, or the solution with the
patch applied in memory and written into the judge's cache (keyed by both texts), under the fixture's
own name. A patch applies as `patch` would, without fuzz: every context and removed line must match
the current solution exactly (an offset is allowed), so a solution change that touches a fixture's
mistake says so instead of grading a different program.

    python -m judge.grading.fixtures --to-patches cp_async_sgemm   # whole copies -> patches, where small
    python -m judge.grading.fixtures --to-patches ws_gemm --correct   # correct alternatives too, where small
    python -m judge.grading.fixtures --to-patches tma_plan --correct --only correct_numpy_scalars.py
    python -m judge.grading.fixtures --check                       # every patch applies to its solution

--to-patches converts a non-PASS fixture only when its diff is small against the solution (at most
MAX_CHANGED of its lines); the solution's own commentary that a copy dropped or reworded (comments,
docstrings, BEGIN/END SOLUTION markers) is kept rather than carried as a change (as_mistake), so the
diff shows the mistake and the fixture's opening line, which says what the mistake is.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import sys
from pathlib import Path

from judge.grading import exercise
from judge.grading.patches import (  # noqa: F401 - re-exported: the one place tests and tools look
    PATCH_SUFFIX, PatchError, apply_patch, changed_lines, is_patch, make_patch, materialize, on_disk, patch_path,
    stored_path, text)

MAX_CHANGED = 0.3            # a diff changing more than this share of the solution's lines stays a file


def resolve(path):
    """A fixture named by its path (exercises/<id>/fixtures/NAME): the file itself, or, when only NAME.patch
    is stored, the file that patch makes (for code that names fixtures by path, e.g. the model's tests)."""
    if not isinstance(path, Path) and (not isinstance(path, str) or "\n" in path):
        return path                                   # source text (build.compile takes both): as it is
    p = Path(path)
    try:
        if p.exists() or not (p.parent / (p.name + PATCH_SUFFIX)).exists():
            return path
    except OSError:                                   # not a path at all (a one-line source, say)
        return path
    return materialize(exercise.load(p.parent.parent), p.name)


# ------------------------------------------------------------------------------------------ converting copies
_COMMENT = {".cu": "//", ".cuh": "//", ".py": "#"}


def _commentary(text: str, ext: str) -> set[int]:
    """Indices of the lines that only explain: blank lines, comment lines, and (Python) docstrings."""
    lines = text.splitlines()
    mark = _COMMENT.get(ext, "#")
    out = {i for i, l in enumerate(lines) if not l.strip() or l.strip().startswith(mark)}
    if ext == ".py":
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return out
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                    and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                out |= set(range(body[0].lineno - 1, body[0].end_lineno))
    return out


def _header(fixture_lines: list[str], ext: str) -> list[str]:
    """A Python fixture's opening docstring as comment lines (the solution keeps its own docstring)."""
    if ext != ".py":
        return fixture_lines
    text = "".join(fixture_lines).strip().strip('"').strip("'").strip()
    return [f"# {l.strip()}\n" if l.strip() else "#\n" for l in text.splitlines()]


def as_mistake(solution: str, fixture: str, ext: str) -> str:
    """The fixture as the solution plus its mistake: where a copy only dropped or reworded the solution's
    commentary (comments, blank lines, docstrings), the solution's is kept; at the edges of a change of
    code the solution's commentary stays too. The fixture's opening line (CUDA) or docstring (Python,
    as comment lines after the solution's) says what the mistake is. A result that is no longer valid
    Python falls back to the fixture as it is."""
    a, b = solution.splitlines(keepends=True), fixture.splitlines(keepends=True)
    ca, cb = _commentary(solution, ext), _commentary(fixture, ext)
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        sol_all = all(i in ca for i in range(i1, i2))
        fix_all = all(j in cb for j in range(j1, j2))
        if op == "equal" or op == "insert":
            out.extend(b[j1:j2])
        elif op == "delete":
            out.extend(a[i1:i2] if sol_all else [])
        elif sol_all and fix_all:                        # commentary reworded
            out.extend(a[i1:i2] + _header(b[j1:j2], ext) if i1 == 0 and ext == ".py"
                       else b[j1:j2] if i1 == 0 else a[i1:i2])
        elif sol_all:
            out.extend(a[i1:i2] + b[j1:j2])
        else:                                            # code changed: keep the solution's commentary at its edges
            lead = next(k for k in range(i2 - i1) if i1 + k not in ca)
            trail = next(k for k in range(i2 - i1) if i2 - 1 - k not in ca)
            out.extend(a[i1:i1 + lead] + b[j1:j2] + a[i2 - trail:i2])
    fixed = "".join(out)
    if ext == ".py":
        try:
            ast.parse(fixed)
        except SyntaxError:
            return fixture
    return fixed


def to_patches(ex, max_changed: float = MAX_CHANGED, dry_run: bool = False, correct: bool = False,
               only=None) -> list[str]:
    """Replace each whole-copy non-PASS fixture by a patch when its diff is small; returns what it did.
    correct: PASS fixtures too (a correct alternative that is the solution plus one change). only: these
    fixture names alone."""
    solution = ex.solution_path.read_text()
    limit = max(4, int(max_changed * len(solution.splitlines())))
    report = []
    for name, spec in ex.fixture_specs.items():
        if only and name not in only:
            continue
        whole = stored_path(ex, name)
        if not whole.exists():
            report.append(f"{name}: already a patch")
            continue
        if spec.verdict == "PASS" and not correct:
            report.append(f"{name}: a correct alternative, kept whole (--correct converts it when small)")
            continue
        fixed = as_mistake(solution, whole.read_text(), ex.ext)
        patch = make_patch(solution, fixed, name, ex.solution_path.name)
        n = changed_lines(patch)
        if n > limit:
            report.append(f"{name}: {n} changed lines (more than {limit}): kept whole; say why in exercise.toml "
                          f"(whole = \"...\")")
            continue
        assert apply_patch(solution, patch, name) == fixed
        if not dry_run:
            patch_path(ex, name).write_text(patch)
            whole.unlink()
        report.append(f"{name}: -> {name}{PATCH_SUFFIX} ({n} changed lines)")
    return report


def check(ex) -> list[str]:
    """Problems with an exercise's fixtures: patches that do not apply, whole copies of the solution."""
    problems = []
    for name, spec in ex.fixture_specs.items():
        try:
            text(ex, name)
        except (PatchError, FileNotFoundError) as e:
            problems.append(str(e))
            continue
        if spec.verdict != "PASS" and not is_patch(ex, name) and not spec.whole:
            problems.append(f"{ex.id}: {name} is a whole copy of a solution with a mistake: store it as "
                            f"fixtures/{name}{PATCH_SUFFIX} (python -m judge.grading.fixtures --to-patches {ex.id}), "
                            f"or say in exercise.toml why it is written another way (whole = \"...\")")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m judge.grading.fixtures", description=__doc__.splitlines()[0])
    ap.add_argument("--to-patches", metavar="EXERCISE", nargs="+", help="convert whole-copy fixtures to patches")
    ap.add_argument("--correct", action="store_true",
                    help="with --to-patches: convert PASS fixtures too (the solution plus one change, when small)")
    ap.add_argument("--only", metavar="FIXTURE", nargs="+", help="with --to-patches: these fixture names alone")
    ap.add_argument("--dry-run", action="store_true", help="say what --to-patches would do, change nothing")
    ap.add_argument("--check", action="store_true", help="every patch applies; no wrong fixture is a whole copy")
    args = ap.parse_args(argv)
    if args.to_patches:
        for ex_id in args.to_patches:
            ex = exercise.get(ex_id)
            for line in to_patches(ex, dry_run=args.dry_run, correct=args.correct, only=args.only):
                print(f"{ex.id}: {line}")
        return 0
    problems = [p for ex in exercise.all_exercises() for p in check(ex)]
    print("\n".join(problems) if problems else "every fixture is a patch that applies, or a file with a reason")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""The course's exercises, from the command line: `course COMMAND` (or `python3 practice/judge.py COMMAND`).

    course list                 every exercise, with your status
    course start ID             copy its starter into workspace/ID/ (never overwrites)
    course check ID [FILE]      grade your file (default: workspace/ID/<file>)
    course hint ID [N]          the next hint (or hint number N)
    course solution ID          the reference solution
    course sass ID [FILE]       the SASS of your kernel, the instructions the exercise asks for marked
    course progress             what you have passed so far, and where each verdict came from
    course grade-class CLASS --out REPORT [--scheduler ADDRESS] [--workers N]
                                grade every learner's files on Dask (judge.grading.classroom)
    course release DIR          a copy of the course for learners, without solutions and fixtures

Exit status: 0 when a check passes (or is skipped for want of a GPU), 1 when it fails,
2 for a bad command, an unknown exercise or a file that cannot be graded, 130 after Ctrl-C.
The same checks run from a notebook: judge.check("ID").
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from judge.grading import exercise, workspace
from judge.grading.result import Verdict

PROG = "course"


class Usage(Exception):
    pass


def _get(ex_id: str) -> exercise.Exercise:
    try:
        return exercise.get(ex_id)
    except exercise.UnknownExercise as e:
        raise Usage(str(e).replace("python practice/judge.py", PROG)) from None


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def _file(ex: exercise.Exercise, given: str | None) -> Path:
    """The file to grade: given, or the workspace copy; refused (Usage) unless it can be graded."""
    path = Path(given) if given else workspace.learner_path(ex)
    if not given and not path.exists():
        raise Usage(f"no file {path}: run `{PROG} start {ex.id}` first")
    try:
        workspace.validate_file(ex, path)
    except workspace.BadFile as e:
        raise Usage(str(e)) from None
    return path


def cmd_list(args) -> int:
    from judge import gpu
    prog = workspace.load_progress(warn=_warn)
    rows = [("id", "title", "ch", "level", "GPU", "status")]
    for e in exercise.all_exercises():
        p = prog.get(e.id, {})
        status = p.get("status", "-")
        if p.get("tier"):
            status += f" ({p['tier']})"
        rows.append((e.id, e.title, str(e.chapter), e.difficulty, _where(e), status))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    if not gpu.meets("sm_90"):
        print("\nNo Hopper GPU here: GPU exercises compile, show their SASS and run on the CPU model of the "
              "machine (correctness; speed is measured on a Hopper GPU only).")
    return 0


def _where(e) -> str:
    """Where an exercise's verdict comes from: any machine, a Hopper GPU, or compile-and-simulate."""
    if not e.needs_gpu:
        return "any"
    if e.target.startswith("sm_90"):
        return "needs sm_90 to time"
    return f"{e.target}: compiled + simulated"


def cmd_start(args) -> int:
    ex = _get(args.id)
    path, created = workspace.start(ex)
    if created:
        print(f"Started {ex.id}: your file is {path}")
    else:
        print(f"{ex.id} is already started: your file {path} was left as it is "
              f"(delete it yourself to start over).")
    print(f"Statement: {ex.statement_path}\nCheck it with: {PROG} check {ex.id}")
    return 0


def cmd_check(args) -> int:
    ex = _get(args.id)
    path = _file(ex, args.file)
    from judge.grading import grade
    print(f"checking {path} for {ex.id} ...", file=sys.stderr, flush=True)
    from judge.grading.classroom import verdict_source
    r = grade.check(ex.id, path)
    r.source = r.source or verdict_source(ex, r)      # a check may say it itself (a release's examples)
    print(r, flush=True)
    if args.file is None:
        status = {Verdict.PASS: "passed", Verdict.SKIP: "skipped"}.get(r.verdict, "failed")
        workspace.record_progress(ex.id, status=status, verdict=r.verdict.value, tier=r.tier, source=r.source)
    if r.verdict == Verdict.SKIP:
        print("(SKIP is not a failure: this exercise runs on a Hopper GPU.)")
        return 0
    return 0 if r.passed else 1


def cmd_hint(args) -> int:
    ex = _get(args.id)
    if not ex.hints:
        print(f"{ex.id} has no hints; read {ex.statement_path}")
        return 0
    prog = workspace.load_progress(warn=_warn)
    seen = prog.get(ex.id, {}).get("hints_seen", 0)
    total = len(ex.hints)
    if args.n is None and seen >= total:
        print(f"No more hints for {ex.id}: you have read all {total}. `{PROG} hint {ex.id} N` shows "
              f"hint N again; the statement is {ex.statement_path}")
        return 0
    n = args.n if args.n is not None else seen + 1
    if not 1 <= n <= total:
        raise Usage(f"{ex.id} has hints 1 to {total}")
    print(f"Hint {n} of {total} for {ex.id}:\n  {ex.hints[n - 1]}")
    print(f"(next: {PROG} hint {ex.id})" if n < total else "(that was the last hint)")
    workspace.note_hint(ex.id, max(seen, n))
    return 0


_MARKER = re.compile(r"^\s*(#|//)\s*(BEGIN SOLUTION|END SOLUTION)\b|^\s*(#>|//>)")


def clean_solution(text: str) -> str:
    """The solution as code: without the BEGIN/END SOLUTION lines and the starter's #> / //> lines."""
    return "\n".join(l for l in text.splitlines() if not _MARKER.match(l)) + "\n"


def cmd_solution(args) -> int:
    ex = _get(args.id)
    if not ex.solution_path.exists():
        print(f"This copy of the course has no solution for {ex.id} (a released copy: see RELEASE.md).")
        return 0
    print(f"# The reference solution of {ex.id} ({ex.solution_path}):\n")
    print(clean_solution(ex.solution_path.read_text()))
    return 0


def cmd_sass(args) -> int:
    ex = _get(args.id)
    if ex.ext != ".cu":
        raise Usage(f"{ex.id} is a Python exercise: it has no kernel, so no SASS")
    path = _file(ex, args.file)
    from judge.gpu import build
    from judge.hw import sass
    kernel = ex.kernel
    print(f"compiling {path} for {ex.target} ...", file=sys.stderr, flush=True)
    try:
        b = build.compile(path, target=ex.target)
    except build.CompileError as e:
        print(f"COMPILE ERROR: {e.first_error()}")
        for line in e.log.splitlines()[:12]:
            print(f"  {line}")
        return 1
    if kernel:
        try:
            text = b.sass_of(kernel)
        except KeyError as e:
            print(f"{path.name} has no kernel {kernel}: {e.args[0]}")
            return 1
    else:
        text = b.sass
    color = sys.stdout.isatty() and os.environ.get("NO_COLOR") is None
    pats = {f: re.compile(sass.FEATURES[f].pattern) for f in ex.features if f in sass.FEATURES}
    print(f"SASS of {kernel or 'every kernel'} in {path.name} ({ex.target}); "
          + (f"lines marked >> show what {ex.id} asks for: {', '.join(pats)}" if pats else
             "the exercise asks for no particular instruction"))
    for line in text.splitlines():
        hit = [f for f, p in pats.items() if p.search(line)]
        if hit:
            mark = f">> {line.rstrip()}    [{', '.join(hit)}]"
            print(f"\033[1;32m{mark}\033[0m" if color else mark)
        else:
            print(f"   {line.rstrip()}")
    missing = []
    for f in pats:
        found = sass.lines_with(text, f, limit=1)
        if found:
            print(f"{f}: {sass.FEATURES[f].count(text)} instruction(s), e.g. {found[0]}")
        else:
            missing.append(f)
            print(f"{f}: NONE - {sass.FEATURES[f].describe} is what the exercise needs to see")
    return 1 if missing else 0


def cmd_progress(args) -> int:
    prog = workspace.load_progress(warn=_warn)
    exs = exercise.all_exercises()
    done = [e for e in exs if prog.get(e.id, {}).get("status") == "passed"]
    print(f"{len(done)} of {len(exs)} exercises passed")
    for e in exs:
        p = prog.get(e.id)
        if p and p.get("status"):
            tier = f" ({p['tier']})" if p.get("tier") else ""
            src = f"  [{p['source']}]" if p.get("source") else ""
            print(f"  {e.id:<22} {p.get('status', '-')}{tier}  last: {p.get('last', '-')}{src}  {p.get('when', '')}")
    return 0


def cmd_grade_class(args) -> int:
    from judge.grading import classroom
    if not Path(args.cls).is_dir():
        raise Usage(f"no class folder {args.cls}: it holds one folder per learner, each with files named "
                    f"as the exercises' learner_file (`{PROG} list` shows the exercises)")
    if args.workers is not None and args.workers < 1:
        raise Usage("--workers must be at least 1")
    try:
        import distributed  # noqa: F401 - only to say what is missing before anything starts
    except ImportError:
        raise Usage("grade-class runs on Dask, which is not installed here: "
                    "python3 -m pip install dask distributed (both are in pyproject.toml)") from None
    try:
        s = classroom.grade_class(args.cls, args.out, scheduler=args.scheduler, workers=args.workers,
                                  progress=not args.quiet)
    except classroom.Interrupted as e:
        print(("\n" if sys.stderr.isatty() else "") + f"interrupted: {e.graded} file(s) graded by this run are kept in {args.out}; the same command "
              f"goes on from there", file=sys.stderr)
        return 130
    out = Path(args.out)
    rate = f", {s['files_per_s']:.2f} files/s" if s["graded"] else ""
    print(f"{s['submissions']} files ({s['distinct']} distinct): {s['graded']} graded in {s['seconds']:.1f} s"
          f"{rate}, {s['already']} already graded; judge {s['version']}")
    for line in s["ignored"][:10]:
        print(f"  not graded: {line}")
    if len(s["ignored"]) > 10:
        print(f"  ... and {len(s['ignored']) - 10} more (logs/run.log)")
    print(f"report: {out / 'grades.csv'}, {out / 'index.html'}; logs in {out / 'logs'}")
    if s["errors"]:
        print(f"{s['errors']} file(s) could not be graded (see {out / 'logs' / 'run.log'}); run the same "
              f"command again once the cause is fixed: only those are graded")
        return 1
    return 0


def cmd_release(args) -> int:
    from judge.grading import release
    try:
        s = release.release(args.dir)
    except (FileExistsError, ValueError) as e:
        raise Usage(str(e)) from None
    print(f"released the course into {s['dest']}: {s['fixtures_removed']} fixtures and "
          f"{len(s['solutions_removed'])} solutions left out; {len(s['checks_removed'])} Python exercises are "
          f"graded there on their statements' worked examples (their checks hold the answers)")
    return 0


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog,
                                 description="Exercises of the Hopper asynchronous-data-movement course.")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.add_parser("list", help="every exercise, with your status").set_defaults(fn=cmd_list)
    p = sub.add_parser("start", help="copy an exercise's starter into your workspace")
    p.add_argument("id")
    p.set_defaults(fn=cmd_start)
    p = sub.add_parser("check", help="grade your file")
    p.add_argument("id")
    p.add_argument("file", nargs="?")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("hint", help="the next hint")
    p.add_argument("id")
    p.add_argument("n", nargs="?", type=int)
    p.set_defaults(fn=cmd_hint)
    p = sub.add_parser("solution", help="show the reference solution")
    p.add_argument("id")
    p.set_defaults(fn=cmd_solution)
    p = sub.add_parser("sass", help="the SASS of your kernel, with what the exercise asks for marked")
    p.add_argument("id")
    p.add_argument("file", nargs="?")
    p.set_defaults(fn=cmd_sass)
    sub.add_parser("progress", help="what you have passed").set_defaults(fn=cmd_progress)
    p = sub.add_parser("grade-class", help="grade a whole class on Dask into a report")
    p.add_argument("cls", metavar="CLASS", help="one folder per learner, holding the learner files")
    p.add_argument("--out", required=True, metavar="REPORT", help="the report folder (made; reused to resume)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler (default: a LocalCluster)")
    p.add_argument("--workers", type=int, metavar="N", help="CPU workers of the LocalCluster (default: the cores)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(fn=cmd_grade_class)
    p = sub.add_parser("release", help="a copy of the course for learners, without solutions and fixtures")
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(fn=cmd_release)
    return ap


def main(argv=None, prog: str = PROG) -> int:
    global PROG
    PROG = prog
    ap = parser(prog)
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:          # argparse exits 2 on bad usage already; keep its code
        return int(e.code or 0)
    if not getattr(args, "fn", None):
        ap.print_help()
        return 2
    try:
        return args.fn(args)
    except Usage as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:          # `course list | head`: the reader left; nothing more to say
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 0
    except OSError as e:             # a workspace that cannot be written, a file that vanished
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the check and every process it started were stopped", file=sys.stderr)
        return 130


def run() -> None:
    """The `course` console script."""
    sys.exit(main())


if __name__ == "__main__":
    run()

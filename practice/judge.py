#!/usr/bin/env python3
"""The course's exercises, from the command line.

    python practice/judge.py list                 every exercise, with your status
    python practice/judge.py start ID             copy its starter into workspace/ID/ (never overwrites)
    python practice/judge.py check ID [FILE]      grade your file (default: workspace/ID/<file>)
    python practice/judge.py hint ID              the next hint (hint ID N: hint number N)
    python practice/judge.py solution ID          the reference solution
    python practice/judge.py progress             what you have passed so far

Exit status: 0 when a check passes (or is skipped for want of a GPU), 1 when it fails,
2 for a bad command, an unknown exercise or a missing file.
The same checks run from a notebook: judge.check("ID").
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from judge import exercise, gpu, workspace  # noqa: E402
from judge.grade import Verdict  # noqa: E402


class Usage(Exception):
    pass


def _get(ex_id: str) -> exercise.Exercise:
    try:
        return exercise.get(ex_id)
    except exercise.UnknownExercise as e:
        raise Usage(str(e)) from None


def cmd_list(args) -> int:
    prog = workspace.load_progress(warn=lambda m: print(m, file=sys.stderr))
    rows = [("id", "title", "ch", "level", "GPU", "status")]
    for e in exercise.all_exercises():
        p = prog.get(e.id, {})
        status = p.get("status", "-")
        if p.get("tier"):
            status += f" ({p['tier']})"
        rows.append((e.id, e.title, str(e.chapter), e.difficulty,
                     "needs sm_90" if e.needs_gpu else "any", status))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
    if not gpu.meets("sm_90"):
        print("\nNo Hopper GPU here: GPU exercises compile and show their SASS, then SKIP.")
    return 0


def cmd_start(args) -> int:
    ex = _get(args.id)
    path, created = workspace.start(ex)
    if created:
        print(f"Started {ex.id}: your file is {path}")
    else:
        print(f"{ex.id} is already started: your file {path} was left as it is "
              f"(delete it yourself to start over).")
    print(f"Statement: {ex.statement_path}\nCheck it with: python practice/judge.py check {ex.id}")
    return 0


def cmd_check(args) -> int:
    ex = _get(args.id)
    path = Path(args.file) if args.file else workspace.learner_path(ex)
    if not path.exists():
        if args.file:
            raise Usage(f"no file {path}")
        raise Usage(f"no file {path}: run `python practice/judge.py start {ex.id}` first")
    from judge import grade
    print(f"checking {path} for {ex.id} ...", file=sys.stderr)
    r = grade.check(ex.id, path)
    print(r)
    if args.file is None:
        status = {Verdict.PASS: "passed", Verdict.SKIP: "skipped"}.get(r.verdict, "failed")
        workspace.record_progress(ex.id, status=status, verdict=r.verdict.value, tier=r.tier)
    if r.verdict == Verdict.SKIP:
        print("(SKIP is not a failure: this exercise runs on a Hopper GPU.)")
        return 0
    return 0 if r.passed else 1


def cmd_hint(args) -> int:
    ex = _get(args.id)
    if not ex.hints:
        print(f"{ex.id} has no hints; read {ex.statement_path}")
        return 0
    prog = workspace.load_progress(warn=lambda m: print(m, file=sys.stderr))
    seen = int(prog.get(ex.id, {}).get("hints_seen", 0))
    n = args.n if args.n is not None else min(seen + 1, len(ex.hints))
    if not 1 <= n <= len(ex.hints):
        raise Usage(f"{ex.id} has hints 1 to {len(ex.hints)}")
    print(f"Hint {n} of {len(ex.hints)} for {ex.id}:\n  {ex.hints[n - 1]}")
    if n < len(ex.hints):
        print(f"(next: python practice/judge.py hint {ex.id})")
    workspace.note_hint(ex.id, max(seen, n))
    return 0


def cmd_solution(args) -> int:
    ex = _get(args.id)
    print(f"# The reference solution of {ex.id} ({ex.solution_path}):\n")
    print(ex.solution_path.read_text())
    return 0


def cmd_progress(args) -> int:
    prog = workspace.load_progress(warn=lambda m: print(m, file=sys.stderr))
    exs = exercise.all_exercises()
    done = [e for e in exs if prog.get(e.id, {}).get("status") == "passed"]
    print(f"{len(done)} of {len(exs)} exercises passed")
    for e in exs:
        p = prog.get(e.id)
        if p:
            tier = f" ({p['tier']})" if p.get("tier") else ""
            print(f"  {e.id:<22} {p.get('status', '-')}{tier}  last: {p.get('last', '-')}  {p.get('when', '')}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python practice/judge.py",
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
    sub.add_parser("progress", help="what you have passed").set_defaults(fn=cmd_progress)
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


if __name__ == "__main__":
    sys.exit(main())

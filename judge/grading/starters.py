"""Starters from solutions: the solution is the one source, the starter is made from it.

    python -m judge.grading.starters                 # rewrite every exercise's starter from its solution
    python -m judge.grading.starters ws_gemm         # one exercise
    python -m judge.grading.starters --check         # exit 1 and name each starter that is out of date

A solution marks what the learner writes between `BEGIN SOLUTION` and `END SOLUTION` comment lines;
the region's `#> text` (Python) or `//> text` (CUDA) lines become the starter's text there
(judge.grading.exercise.make_starter). tests/grading/test_exercises.py checks every committed starter is current.
"""
from __future__ import annotations

import argparse
import sys

from judge.grading import exercise


def out_of_date(ex) -> bool:
    return not ex.starter_path.exists() or ex.starter_path.read_text() != ex.starter_text()


def write(ex) -> bool:
    """Rewrite ex's starter from its solution; True when it changed."""
    text = ex.starter_text()
    if text == ex.solution_path.read_text():
        raise ValueError(f"{ex.id}: {ex.solution_path.name} has no BEGIN SOLUTION / END SOLUTION region: "
                         f"the starter would be the answer")
    if ex.starter_path.exists() and ex.starter_path.read_text() == text:
        return False
    ex.starter_path.write_text(text)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m judge.grading.starters", description=__doc__.splitlines()[0])
    ap.add_argument("exercise", nargs="*", help="exercise ids (default: every exercise)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a starter is out of date")
    args = ap.parse_args(argv)
    exs = [exercise.get(i) for i in args.exercise] if args.exercise else exercise.all_exercises()
    if args.check:
        stale = [ex for ex in exs if out_of_date(ex)]
        for ex in stale:
            print(f"{ex.id}: {ex.starter_path.name} is out of date: python -m judge.grading.starters {ex.id}")
        if not stale:
            print(f"{len(exs)} starters are current")
        return 1 if stale else 0
    for ex in exs:
        print(f"{ex.id}: {'rewritten' if write(ex) else 'current'} ({ex.starter_path.relative_to(ex.folder.parent)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

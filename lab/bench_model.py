"""lab/bench_model.py - how long the CPU model takes to grade each GPU exercise's solution, and where the time goes.

Run: PYTHONPATH=$PWD python -m lab.bench_model [--reps 2] [--seed 1] [--schedule ahead] [--profile ws_gemm] [EX ...]
     (no GPU; not a test)

For each of the six kernel exercises, the solution is graded in this process the way the check's child does
(judge.grading.exercise.grader on a Submission), --reps times after one warm-up that fills the compile cache,
its cases drawn from a fixed seed (--seed) so that two versions of the model grade the same cases;
the figure is the best wall time of a check, with the part spent inside judge.model.run and the number of
model runs. --schedule ahead runs every model run of the checks with warps running ahead of each other
(judge.model.run(schedule="ahead")), to measure what that schedule costs. --profile EX prints the functions that take the time of one check of EX (cProfile, cumulative).
A check must stay at most 5 s on the course's 2-core machine.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np

from judge import model
from judge.grading import exercise, submission

EXERCISES = ("cp_async_sgemm", "tma_tiles", "dsmem_histogram", "ws_gemm", "tcgen05_gemm", "tcgen05_ring")


def _timed_model(schedule=None):
    """Wrap judge.model.run to add up its seconds and calls; returns (totals, undo)."""
    tot = {"seconds": 0.0, "runs": 0, "steps": 0}
    real = model.run

    def run(*a, **k):
        if schedule:
            k["schedule"] = schedule
        t0 = time.perf_counter()
        try:
            rep = real(*a, **k)
        finally:
            tot["seconds"] += time.perf_counter() - t0
            tot["runs"] += 1
        tot["steps"] += rep.steps
        return rep
    model.run = run
    return tot, lambda: setattr(model, "run", real)


def check_once(ex_id, seed=1):
    """One check of the solution, its cases drawn from `seed` (the same cases every time, so that two versions
    of the model grade the same work)."""
    import os
    from judge.grading import cuda_flow, domain
    draws = iter(np.random.default_rng(seed).integers(0, 2**31, 64).tolist())
    cuda_flow._seed = lambda: next(draws)
    os.environ[domain.SEED_VAR] = str(seed)      # an exercise with [domain] draws its cases from this seed
    ex = exercise.get(ex_id)
    with tempfile.TemporaryDirectory() as d:
        sub = submission.Submission(ex, ex.solution_path, Path(d))
        t0 = time.perf_counter()
        res = exercise.grader(ex)(sub)
        return time.perf_counter() - t0, res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--profile", default=None)
    ap.add_argument("--schedule", default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("exercises", nargs="*", default=list(EXERCISES))
    a = ap.parse_args()
    if a.profile:
        _timed_model(a.schedule)
        check_once(a.profile, a.seed)
        pr = cProfile.Profile()
        pr.enable()
        check_once(a.profile, a.seed)
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(30)
        return
    print(f"{'exercise':16} {'verdict':8} {'check s':>8} {'model s':>8} {'runs':>5} {'steps':>8}")
    for ex_id in a.exercises:
        check_once(ex_id, a.seed)                           # warm: compile cache, imports
        best = None
        for _ in range(a.reps):
            tot, undo = _timed_model(a.schedule)
            try:
                wall, res = check_once(ex_id, a.seed)
            finally:
                undo()
            if best is None or wall < best[0]:
                best = (wall, res, dict(tot))
        wall, res, tot = best
        print(f"{ex_id:16} {res.verdict.name:8} {wall:8.2f} {tot['seconds']:8.2f} {tot['runs']:5d} {tot['steps']:8d}",
              flush=True)


if __name__ == "__main__":
    main()

"""Benchmark: what one check of each GPU exercise's solution costs on the CPU model, case by case.

    PYTHONPATH=$PWD python -m lab.bench_checks [EXERCISE ...] [--seed S] [--profile]
    PYTHONPATH=$PWD python -m lab.bench_checks --checks [EXERCISE ...]    # whole checks of the solutions

For each exercise: the build (from the compile cache when warm), then the model cases one check draws
(judge.grading.cuda_flow.draw_model_cases; with [domain], the seed S), each run through the flow's own
model_case. Prints wall and CPU seconds per case and in all; CPU seconds are what to compare on a
machine shared with other work (wall time there measures the others too). --profile prints the model's
20 most expensive functions over every case. --checks grades each solution as a learner's check does, in
a fresh interpreter, and prints its wall and CPU seconds (imports and the child processes included). Not a test: nothing is asserted; run it before and after a
change, from the same tree layout, and compare.
"""
from __future__ import annotations

import sys
import time



def bench(eid: str, seed: int, profile: bool = False) -> tuple[float, float]:
    from judge.gpu import build
    from judge.grading import cuda_flow, exercise
    ex = exercise.get(eid)
    mod = exercise.import_file(ex.folder / "check.py", f"_bench_{eid}")
    t0, c0 = time.perf_counter(), time.process_time()
    b = build.compile(ex.solution_path, target=ex.target)
    print(f"{eid}: build {time.perf_counter() - t0:.2f} s wall, {time.process_time() - c0:.2f} s CPU")
    cases = cuda_flow.draw_model_cases(mod, ex, seed=seed)
    b = b.for_model(**cuda_flow.model_options(mod, ex))
    wall = cpu = 0.0
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()
    for case in cases:
        t0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        ran = cuda_flow.model_case(b, mod, ex, dict(case))
        comps, note = ran.comparisons, ran.note
        if prof:
            prof.disable()
        w, c = time.perf_counter() - t0, time.process_time() - c0
        wall, cpu = wall + w, cpu + c
        shown = " ".join(f"{k}={v}" for k, v in case.items() if k not in ("seed", "JUDGE_MODEL_SEED"))
        print(f"  {shown:40s} {w:6.2f} s wall {c:6.2f} s CPU  {'ok' if all(comps) else 'WRONG'}  {note}")
    print(f"  all {len(cases)} cases: {wall:.2f} s wall, {cpu:.2f} s CPU")
    if prof:
        import pstats
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return wall, cpu


def whole_check(eid: str) -> tuple[float, float]:
    """One whole check of the solution as a learner runs it, in a fresh interpreter (JUDGE_CHECK_SERVER=0):
    wall seconds, and the CPU seconds of its processes (interpreter start and imports included)."""
    import os
    import resource
    from judge.grading import exercise, grade
    os.environ["JUDGE_CHECK_SERVER"] = "0"
    ex = exercise.get(eid)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = grade.check(eid, ex.solution_path, quiet=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"{eid}: {r.verdict.value}, {wall:.2f} s wall, {cpu:.2f} s CPU in its processes")
    return wall, cpu


def main(argv: list[str]) -> int:
    seed, profile = 1, "--profile" in argv
    argv = [a for a in argv if a != "--profile"]
    if "--checks" in argv:
        ids = [a for a in argv if a != "--checks"] or ["cp_async_sgemm", "tma_tiles", "dsmem_histogram", "ws_gemm",
                                                      "tcgen05_gemm", "tcgen05_ring"]
        for eid in ids:
            whole_check(eid)
        return 0
    if "--seed" in argv:
        i = argv.index("--seed")
        seed = int(argv[i + 1])
        del argv[i:i + 2]
    ids = argv or ["cp_async_sgemm", "tma_tiles", "dsmem_histogram", "ws_gemm", "tcgen05_gemm", "tcgen05_ring"]
    total = [0.0, 0.0]
    for eid in ids:
        w, c = bench(eid, seed, profile)
        total[0] += w
        total[1] += c
    print(f"every exercise: {total[0]:.2f} s wall, {total[1]:.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

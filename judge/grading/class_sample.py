"""A sample class built from the exercises' solutions and fixtures, and its expected verdicts.

    python -m judge.grading.class_sample make CLASS [--learners 50] [--cpu 2] [--gpu 1] [--no-hangs]
    python practice/judge.py grade-class CLASS --out REPORT
    python -m judge.grading.class_sample compare CLASS REPORT      # exit 1 on any verdict that differs

Each learner gets `--cpu` Python exercises and `--gpu` GPU exercises, taken round-robin over every
exercise's solution and fixtures, so the whole pool is used before any file repeats. Every file gets
a last comment line naming its learner, so no two files are the same and each is a grading of its own.
CLASS/expected.csv holds, per learner and exercise, the file's origin and the verdict a single check
gives it on this machine (exercise.toml's verdict; its `cpu =` verdict where a GPU exercise is graded by
the CPU model here). The tests (tests/grading/test_classroom.py) and the H200 class run use this same class.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from judge.grading import exercise as _ex

SOLUTION = "<solution>"


def expected(ex: _ex.Exercise, name: str) -> str:
    """The verdict one `course check` gives this file on this machine."""
    from judge import gpu
    declared = "PASS" if name == SOLUTION else ex.fixtures[name]
    if ex.needs_gpu and not gpu.meets(ex.target) and ex.target.startswith("sm_90"):
        if name == SOLUTION:
            return ex.solution_cpu
        spec = ex.fixture_specs.get(name)
        if spec is not None and spec.cpu:
            return spec.cpu
    return declared


def source_path(ex: _ex.Exercise, name: str) -> Path:
    return ex.solution_path if name == SOLUTION else ex.fixture_path(name)


def pool(needs_gpu: bool, hangs: bool = True) -> list[tuple[str, str]]:
    """(exercise, file) pairs, one exercise after another in turn: solution first, then each fixture."""
    queues = {e.id: [n for n in [SOLUTION, *e.fixtures] if hangs or (n == SOLUTION or e.fixtures[n] != "HANG")]
              for e in _ex.all_exercises() if e.needs_gpu == needs_gpu}
    out = []
    while any(queues.values()):
        for ex_id in sorted(queues):
            if queues[ex_id]:
                out.append((ex_id, queues[ex_id].pop(0)))
    return out


def make_class(dest, learners: int = 50, cpu: int = 2, gpu: int = 0, hangs: bool = True,
               extra: dict[int, list[tuple[str, str]]] | None = None) -> dict:
    """Write the class into `dest`; return {(learner, exercise): (path, expected verdict, origin)}.
    `extra` gives learner number n these (exercise, file) pairs on top of its share of the pools."""
    dest = Path(dest)
    by_id = {e.id: e for e in _ex.all_exercises()}
    pools = {False: pool(False, hangs), True: pool(True, hangs)}
    nxt = {False: 0, True: 0}
    cls = {}
    for n in range(learners):
        who = f"l{n:03d}"
        mine = list((extra or {}).get(n, []))
        for kind, count in ((False, cpu), (True, gpu)):
            got = 0
            while got < count and pools[kind]:
                ex_id, name = pools[kind][nxt[kind] % len(pools[kind])]
                nxt[kind] += 1
                if ex_id not in {m[0] for m in mine}:
                    mine.append((ex_id, name))
                    got += 1
        for ex_id, name in mine:
            ex = by_id[ex_id]
            # half the learners hand in flat files, half a workspace layout; plan.py (two exercises) the latter
            folder = dest / who / ex.id if (n % 2 or ex.learner_file == "plan.py") else dest / who
            folder.mkdir(parents=True, exist_ok=True)
            mark = "#" if ex.ext == ".py" else "//"
            text = source_path(ex, name).read_text() + f"\n{mark} handed in by {who} ({name})\n"
            (folder / ex.learner_file).write_text(text)
            cls[(who, ex_id)] = (folder / ex.learner_file, expected(ex, name), name)
    with (dest / "expected.csv").open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["learner", "exercise", "origin", "expected"])
        for (who, ex_id), (_, want, name) in sorted(cls.items()):
            w.writerow([who, ex_id, name, want])
    return cls


def compare(class_dir, report) -> list[str]:
    """Every learner and exercise whose verdict in REPORT/grades.csv differs from CLASS/expected.csv."""
    want = {(r["learner"], r["exercise"]): r for r in csv.DictReader((Path(class_dir) / "expected.csv").open())}
    got = {(r["learner"], r["exercise"]): r for r in csv.DictReader((Path(report) / "grades.csv").open())}
    out = []
    for k in sorted(set(want) | set(got)):
        w, g = want.get(k), got.get(k)
        if w is None or g is None:
            out.append(f"{k[0]}/{k[1]}: {'not in the class' if w is None else 'not in the report'}")
        elif w["expected"] != g["verdict"]:
            out.append(f"{k[0]}/{k[1]} ({w['origin']}): expected {w['expected']}, got {g['verdict']} "
                       f"[{g['source']}]")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m judge.grading.class_sample", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make", help="write a sample class")
    p.add_argument("dir")
    p.add_argument("--learners", type=int, default=50)
    p.add_argument("--cpu", type=int, default=2, help="Python exercises per learner")
    p.add_argument("--gpu", type=int, default=1, help="GPU exercises per learner")
    p.add_argument("--no-hangs", action="store_true", help="leave out the fixtures whose verdict is HANG")
    p = sub.add_parser("compare", help="compare a report with the class's expected verdicts")
    p.add_argument("dir")
    p.add_argument("report")
    a = ap.parse_args(argv)
    if a.cmd == "make":
        if Path(a.dir).exists():
            print(f"error: {a.dir} exists: give a new folder", file=sys.stderr)
            return 2
        cls = make_class(a.dir, a.learners, a.cpu, a.gpu, hangs=not a.no_hangs)
        print(f"{len(cls)} files for {a.learners} learners in {a.dir}; expected verdicts in {a.dir}/expected.csv")
        return 0
    bad = compare(a.dir, a.report)
    for line in bad:
        print(line)
    n = sum(1 for _ in csv.DictReader((Path(a.dir) / "expected.csv").open()))
    print(f"{n - len(bad)} of {n} verdicts as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

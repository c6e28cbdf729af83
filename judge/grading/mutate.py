"""Mutation testing of a GPU exercise's cases: small mistakes applied to its solution, each graded.

    python -m judge.grading.mutate [EXERCISE ...] [--seed S] [--only OPERATOR] [--list] [--out FILE]
    python -m judge.grading.mutate --cases [EXERCISE ...] [--seed S]   # the model's cases a check draws

Each operator is a textual edit at one site of exercises/<id>/solution.cu (a line and the text matched
there): an index dimension swapped, a block index replaced by 0, a parity right only for the first uses,
a stride from another dimension, a loop bound that drops the remainder of an unroll or runs past it (only
where the bound depends on the case: a bound fixed at compile time is no class of cases). Each
mutant is graded as a learner's file is (judge.grading.grade.check, the CPU model's cases drawn with
JUDGE_MODEL_SEED=S, default 1, so a run is replayable); it must get WRONG, HANG or CRASH (killed),
or MISSING FEATURE (killed: the model saw the feature bypassed). COMPILE ERROR is counted apart (the
mistake never reaches the cases). A mutant that gets PASS survives: the report names the class of the
domain its operator needs ([domain] in exercise.toml) and, where a survivor was studied, why it survives
(docs/mutations.toml: equivalent to the solution, or outside what the statement allows). The score is
killed / (mutants - compile errors). --list prints the mutants without grading them. The committed
report is docs/mutations.txt (--out docs/mutations.txt rewrites it).
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from judge import config

#: where each studied survivor is explained: "exercise:operator:the line's code:the text replaced" = "why"
EXPLAINED = config.ROOT / "docs" / "mutations.toml"

KILLED = ("WRONG", "HANG", "CRASH", "MISSING FEATURE")

#: the exercises a run covers by default: every GPU exercise with a [domain]
GPU_EXERCISES = ["cp_async_sgemm", "tma_tiles", "dsmem_histogram", "ws_gemm", "tcgen05_gemm", "tcgen05_ring",
                 "attention_softmax"]

_DIMS = ("M", "N", "K", "m", "n", "k", "rows", "cols")


@dataclass(frozen=True)
class Mutant:
    exercise: str
    operator: str
    line: int            # 1-based line of the solution
    before: str          # the text matched
    after: str           # what replaced it
    needs: str           # the class of cases that tells it from the solution
    source: str          # the whole mutated file
    site: str = ""       # the solution's line as written (its code, stripped)

    @property
    def key(self) -> str:
        """How docs/mutations.toml names it: the exercise, the operator, the solution's line and the text
        replaced (the line's text, not its number, so that an edit elsewhere in the file keeps the key)."""
        return f"{self.exercise}:{self.operator}:{self.site}:{self.before.strip()}"


def _code_part(line: str) -> tuple[str, str]:
    """(code, comment) of a CUDA line: the comment from the first // outside a string."""
    i = line.find("//")
    return (line, "") if i < 0 else (line[:i], line[i:])


def _skip(line: str) -> bool:
    s = line.strip()
    return (not s or s.startswith("//") or s.startswith("#") or s.startswith("*") or s.startswith("/*")
            or "asm" in s or '"' in s)


# --------------------------------------------------------------------------------------------- operators
# Each: (name, the class a case must hold to kill it, function(code_line, source) -> [(before, after, start)])
def _swap_xy(code, src):
    out = []
    for m in re.finditer(r"\b(blockIdx|gridDim)\.([xy])\b", code):
        other = "y" if m.group(2) == "x" else "x"
        out.append((m.group(0), f"{m.group(1)}.{other}", m.start()))
    return out


def _block_zero(code, src):
    return [(m.group(0), "0", m.start()) for m in re.finditer(r"\bblockIdx\.[xyz]\b", code)]


def _parity_first_uses(code, src):
    """`E & 1` -> `(E != 0)`: the parity of uses 0 and 1, wrong from the third use on (0 -> 0, 1 -> 1, 2 -> 1)."""
    out = []
    for m in re.finditer(r"(\(\s*[\w.]+(?:\s*/\s*\w+)?\s*\)|\b[A-Za-z_]\w*)\s*&\s*1\b", code):
        out.append((m.group(0), f"({m.group(1)} != 0)", m.start()))
    return out


def _parity_first_round(code, src):
    """`(E & 1) ^ 1` -> `(E == 0)`: the parity trick right for the first round only... and `^ 1` dropped
    (the first round waits for the phase that never completes)."""
    out = []
    for m in re.finditer(r"\(\s*(\(?[\w.]+(?:\s*/\s*\w+)?\)?)\s*&\s*1\s*\)\s*\^\s*1", code):
        out.append((m.group(0), f"({m.group(1)} == 0)", m.start()))
        out.append((m.group(0), f"({m.group(1)} & 1)", m.start()))
    return out


def _parity_toggle(code, src):
    """`phase ^= 1` -> `phase = 1`: a parity toggled once and then held (right for the first two waits)."""
    return [(m.group(0), f"{m.group(1)} = 1", m.start()) for m in re.finditer(r"\b(\w+)\s*\^=\s*1\b", code)]


_COORDS = ("col0", "row0", "m0", "n0", "x0", "y0")


def _coord_swap(code, src):
    """Two coordinates of a call in the wrong order: `f(col0, row0)` -> `f(row0, col0)`."""
    pat = r"\b(" + "|".join(_COORDS) + r")\s*,\s*(" + "|".join(_COORDS) + r")\b"
    return [(m.group(0), f"{m.group(2)}, {m.group(1)}", m.start()) for m in re.finditer(pat, code)
            if m.group(1) != m.group(2)]


def _stride_dim(code, src):
    """A stride or extent from another dimension: `* K` -> `* N`, ... (only names the file declares)."""
    present = [d for d in _DIMS if re.search(rf"\bint\s+{d}\b", src)]
    out = []
    for m in re.finditer(r"(\*\s*)(" + "|".join(present or ["@@"]) + r")\b", code):
        for other in present:
            if other != m.group(2) and other.islower() == m.group(2).islower():
                out.append((m.group(0), f"{m.group(1)}{other}", m.start()))
    return out


_FOR = re.compile(r"for\s*\(([^;]*);\s*([A-Za-z_]\w*)\s*<\s*([^;]+?)\s*;")
_CONSTANT = re.compile(r"^[A-Z0-9_\s*/+\-()]+$")     # a bound fixed at compile time (BK / 16, STAGES, 8)


def _loops(code):
    """The for loops of a line whose bound depends on the case (a bound fixed at compile time is no class
    of cases: its mutants are equivalent to the solution or wrong on every case alike)."""
    return [m for m in _FOR.finditer(code) if not _CONSTANT.match(m.group(3))]


def _drop_remainder(code, src):
    """A loop bound that drops the remainder: an unroll by 2 or 4 without its tail; a ceiling division
    taken as a floor."""
    out = []
    for m in _loops(code):
        b = m.group(3)
        for u in (2, 4):
            out.append((f"{m.group(2)} < {b}", f"{m.group(2)} < ({b}) / {u} * {u}", m.start(2)))
    for m in re.finditer(r"\(\s*([\w.]+)\s*\+\s*([\w.]+)\s*-\s*1\s*\)\s*/\s*\2\b", code):
        out.append((m.group(0), f"{m.group(1)} / {m.group(2)}", m.start()))
    return out


def _unroll_overrun(code, src):
    """An unroll by 2 or 4 with no bound check on its last round: the loop runs to the next multiple."""
    out = []
    for m in _loops(code):
        b = m.group(3)
        for u in (2, 4):
            out.append((f"{m.group(2)} < {b}", f"{m.group(2)} < (({b}) + {u - 1}) / {u} * {u}", m.start(2)))
    return out


OPERATORS = {
    "swap-xy": ("several blocks along x and along y, a different number of each", _swap_xy),
    "block-zero": ("several blocks with a nonzero index in every dimension the grid has", _block_zero),
    "parity-first-uses": ("every ring slot / mbarrier used three times or more (both parities recur)",
                          _parity_first_uses),
    "parity-first-round": ("a fresh mbarrier's first wait, and a third round", _parity_first_round),
    "parity-toggle-once": ("an mbarrier waited three times or more", _parity_toggle),
    "coord-swap": ("a different number of tiles along x and along y (M != N)", _coord_swap),
    "stride-dim": ("M, N and K all different", _stride_dim),
    "drop-remainder": ("counts in every residue of the unroll (and tails where the statement allows them)",
                       _drop_remainder),
    "unroll-overrun": ("counts in every residue of the unroll, the last round past the end", _unroll_overrun),
}


def mutants(ex, only: str | None = None) -> list[Mutant]:
    """Every mutant of the exercise's solution: one per operator, site and replacement."""
    src = ex.solution_path.read_text()
    lines = src.splitlines(keepends=True)
    out, seen = [], set()
    met: dict[str, int] = {}
    for i, line in enumerate(lines):
        if _skip(line):
            continue
        code, comment = _code_part(line)
        met[code.strip()] = met.get(code.strip(), 0) + 1
        site = code.strip() + (f" (its {met[code.strip()]}th occurrence)" if met[code.strip()] > 1 else "")
        for name, (needs, fn) in OPERATORS.items():
            if only and name != only:
                continue
            for before, after, start in fn(code, src):
                at = code.find(before, start)
                if at < 0:
                    continue
                new_code = code[:at] + after + code[at + len(before):]
                new = "".join(lines[:i]) + new_code + comment + "".join(lines[i + 1:])
                if new == src or (name, new) in seen:
                    continue
                seen.add((name, new))
                out.append(Mutant(ex.id, name, i + 1, before, after, needs, new, site))
    return out


def explained() -> dict:
    if EXPLAINED.exists():
        return tomllib.loads(EXPLAINED.read_text())
    return {}


def grade_mutant(mu: Mutant, ex, seed: int, folder: Path):
    """The verdict of one mutant, graded as a learner's file (the model's cases drawn with `seed`)."""
    from judge.grading import grade
    path = folder / f"{mu.exercise}_{mu.operator}_{mu.line}_{abs(hash(mu.source)) % 10**8}" / ex.learner_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(mu.source)
    old = os.environ.get("JUDGE_MODEL_SEED")
    os.environ["JUDGE_MODEL_SEED"] = str(seed)
    try:
        return grade.check(mu.exercise, path, quiet=True)
    finally:
        if old is None:
            os.environ.pop("JUDGE_MODEL_SEED", None)
        else:
            os.environ["JUDGE_MODEL_SEED"] = old


def run(ids, seed: int = 1, only: str | None = None, out=sys.stdout, listing: bool = False) -> dict:
    """Grade every mutant of each exercise; print the report; return {exercise: (killed, graded, compile)}."""
    from judge.grading import exercise
    why = explained()
    scores = {}
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        for eid in ids:
            ex = exercise.get(eid)
            ms = mutants(ex, only)
            print(f"## {eid}: {len(ms)} mutants of {ex.solution_path.relative_to(config.ROOT)}"
                  f" (model cases drawn with JUDGE_MODEL_SEED={seed})", file=out, flush=True)
            if listing:
                for mu in ms:
                    print(f"  {mu.operator:20s} line {mu.line:4d}: {mu.before!r} -> {mu.after!r}", file=out)
                continue
            killed = graded = compile_err = 0
            survivors = []
            t0 = time.perf_counter()
            for mu in ms:
                r = grade_mutant(mu, ex, seed, Path(tmp))
                v = r.verdict.value if hasattr(r.verdict, "value") else str(r.verdict)
                if v == "COMPILE ERROR":
                    compile_err += 1
                else:
                    graded += 1
                    killed += v in KILLED
                if v not in KILLED and v != "COMPILE ERROR":
                    survivors.append((mu, v))
                print(f"  {v:15s} {mu.operator:20s} line {mu.line:4d}: {mu.before.strip()!r} -> "
                      f"{mu.after.strip()!r}" + (f"   [{r.message[:90]}]" if v in KILLED else ""),
                      file=out, flush=True)
            score = killed / graded if graded else 1.0
            scores[eid] = (killed, graded, compile_err)
            print(f"  score {killed}/{graded} = {score:.0%} killed ({compile_err} compile errors apart), "
                  f"{time.perf_counter() - t0:.0f} s", file=out, flush=True)
            for mu, v in survivors:
                reason = why.get(mu.key, "")
                print(f"  SURVIVOR ({v}) {mu.operator} line {mu.line}: {mu.before.strip()!r} -> "
                      f"{mu.after.strip()!r}\n      the cases must hold: {mu.needs}\n      "
                      + (f"why it survives: {reason}" if reason else "NOT EXPLAINED YET"), file=out, flush=True)
    return scores


def show_cases(ids, seed: int | None) -> None:
    """The model's cases a check of each exercise draws with `seed` (judge.grading.domain), with their
    cost and the classes each holds."""
    from judge.grading import domain, exercise
    for eid in ids:
        ex = exercise.get(eid)
        s = seed if seed is not None else domain.seed_for_run()
        print(f"{eid} (JUDGE_MODEL_SEED={s}):")
        for case in domain.draw(ex.domain, s, ex.model.max_blocks):
            shown = {k: v for k, v in case.items() if k != "seed"}
            print(f"  {shown}  cost {domain.cost(ex.domain, case, ex.model.max_blocks):g}")
            for name in domain.classes_of(ex.domain, case, ex.model.max_blocks):
                print(f"      - {name}")


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--cases" in args:
        args.remove("--cases")
        seed = None
        if "--seed" in args:
            i = args.index("--seed")
            seed = int(args[i + 1])
            del args[i:i + 2]
        show_cases(args or GPU_EXERCISES, seed)
        return 0
    seed, only, dest = 1, None, None
    for flag in ("--seed", "--only", "--out"):
        if flag in args:
            i = args.index(flag)
            val = args[i + 1]
            del args[i:i + 2]
            if flag == "--seed":
                seed = int(val)
            elif flag == "--only":
                only = val
            else:
                dest = val
    listing = "--list" in args
    args = [a for a in args if a != "--list"]
    ids = args or GPU_EXERCISES
    if dest:
        with open(dest, "w") as f:
            print(__doc__.split("\n\n")[0].strip() + "\n", file=f)
            run(ids, seed, only, f, listing)
    else:
        run(ids, seed, only, sys.stdout, listing)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""tests/chapters/test_no_answer_printed.py - no chapter prints an exercise's answer.

An exercise's answer lines are what its solution adds to its starter: the code lines inside the solution's
BEGIN/END SOLUTION regions that the starter does not have, comments and blank lines dropped, whitespace
collapsed, and lines under 16 characters dropped (a brace, `break;`). A chapter's printed source is what a
learner reads in it: every .cu, .cuh and .py file under chapters/ (the notebooks show them) and every cell of
every chapter notebook. The test fails when one printed text holds every answer line of an exercise: the
chapter would then show the whole answer (as chapter 5's gemm_ws.cu did for tcgen05_ring, line for line).
A chapter shows parts of answers, by design: the overlap is printed with -s for a reader to judge.

Run: PYTHONPATH=$PWD python -m pytest tests/chapters/test_no_answer_printed.py -q -s
"""
import json
import re

from judge import config
from judge.grading import exercise

_BEGIN = re.compile(r"^\s*(#|//)\s*BEGIN SOLUTION")
_END = re.compile(r"^\s*(#|//)\s*END SOLUTION")


def _norm(line: str, comment: str) -> str:
    return " ".join(line.split(comment, 1)[0].split()) if comment else " ".join(line.split())


def answer_lines(ex) -> list[str]:
    comment = "//" if ex.ext in (".cu", ".cuh") else "#"
    out, inside = [], False
    for line in ex.solution_path.read_text().splitlines():
        if _BEGIN.match(line):
            inside = True
        elif _END.match(line):
            inside = False
        elif inside and not line.strip().startswith(comment):
            n = _norm(line, comment)
            if len(n) >= 16:
                out.append(n)
    starter = {_norm(line, comment) for line in ex.starter_path.read_text().splitlines()}
    return [line for line in dict.fromkeys(out) if line not in starter]


def printed_texts() -> dict[str, set]:
    texts = {}
    for p in sorted((config.ROOT / "chapters").rglob("*")):
        if p.is_file() and p.suffix in (".cu", ".cuh", ".py"):
            comment = "#" if p.suffix == ".py" else "//"
            texts[str(p.relative_to(config.ROOT))] = {_norm(line, comment) for line in p.read_text().splitlines()}
    for nb in sorted((config.ROOT / "chapters").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        lines = [line for c in cells for line in "".join(c["source"]).splitlines()]
        texts[str(nb.relative_to(config.ROOT))] = {_norm(line, "//") for line in lines} | {_norm(line, "") for line in lines}
    return texts


def test_answer_lines_are_what_the_solution_adds():
    ex = exercise.get("tcgen05_ring")
    lines = answer_lines(ex)
    assert "tma::wait(&acc_empty[buf], ((local / ACC_BUFS) & 1) ^ 1);" in lines and "tc::commit(&empty[s]);" in lines
    assert not any(line.startswith("//") for line in lines)


def test_no_chapter_prints_every_answer_line_of_an_exercise():
    texts = printed_texts()
    whole, most = [], []
    for ex in exercise.all_exercises():
        lines = answer_lines(ex)
        assert lines, ex.id
        for name, text in texts.items():
            shared = sum(line in text for line in lines)
            if shared == len(lines):
                whole.append(f"{ex.id}: all {len(lines)} answer lines in {name}")
            elif shared >= 0.6 * len(lines):
                most.append(f"{ex.id}: {shared} of {len(lines)} answer lines in {name}")
    print("\n".join(["parts of answers a chapter shows (60 % or more of the lines):"] + most))
    assert not whole, whole

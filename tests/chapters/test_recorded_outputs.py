"""Every notebook's stored outputs (what the H200 record run left in chapters/*.ipynb) hold no path of the
machine that made them, no picture twice in one cell and no stray Python warning: a learner reads them as
the course's own text.

Run: PYTHONPATH=$PWD python -m pytest tests/chapters/test_recorded_outputs.py -q        (reads the files only)

An output whose cause is fixed in the code but that only the next record run can replace is listed in
UNTIL_RECORD, by its notebook and a digest of its text: it passes until that run rewrites it, and a new
offender fails at once. An entry that matches nothing any more is said in a warning, to be taken out.
"""
from __future__ import annotations

import hashlib
import json
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))

#: a path of the machine a notebook ran on: temporary folders, home folders, installed packages
MACHINE_PATH = re.compile(r"(?<![\w.])(/tmp/|/root/|/home/|/opt/|/usr/local/|/var/folders/)|site-packages")
#: Python's warnings as printed ("...: UserWarning: text")
WARNING = re.compile(r"\b[A-Z]\w*Warning: ")
#: embedded pictures are data, not text to search for paths
DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=\s]+")

#: (notebook, kind, sha256 of the output's text): fixed in the code, replaced by the next record run
UNTIL_RECORD = {
    # judge.grading.result.Result's plain-text repr showed the figure's temporary path (now its file name)
    ("ch01_cp_async.ipynb", "machine path", "405f81e3fe4caf4b"),
    # chapters/ch04_wgmma/issue_rate.draw_fed made a pyplot figure, shown by display() and again at the cell's end
    ("ch04_wgmma.ipynb", "the same picture twice", "b35034be709aa5b9"),
    # torch.profiler's warning about clearing events each cycle (chapters/ch05_blackwell/fp8._kernel_names)
    ("ch05_blackwell.ipynb", "machine path", "b0f3420f1d0fbb40"),
    ("ch05_blackwell.ipynb", "warning", "b0f3420f1d0fbb40"),
}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _texts(output: dict) -> list[str]:
    """An output's text: a stream, an error's traceback, every text/* representation (pictures left out)."""
    out = []
    if output.get("output_type") == "stream":
        out.append("".join(output.get("text", "")))
    if output.get("output_type") == "error":
        out.append("\n".join(output.get("traceback", [])) + f"\n{output.get('ename')}: {output.get('evalue')}")
    for mime, v in (output.get("data") or {}).items():
        if mime.startswith("text/"):
            out.append(DATA_URI.sub("", "".join(v) if isinstance(v, list) else str(v)))
    return out


def _pictures(output: dict) -> list[str]:
    pics = []
    for mime, v in (output.get("data") or {}).items():
        body = "".join(v) if isinstance(v, list) else str(v)
        if mime.startswith("image/"):
            pics.append(_digest(body.replace("\n", "")))
        elif mime == "text/html":
            pics += [_digest(m.group(0).split(",", 1)[1].replace("\n", "")) for m in DATA_URI.finditer(body)]
    return pics


def offenders(path: Path) -> list[tuple[str, str, str, str]]:
    """(kind, digest, cell, what) of every stored output of one notebook that breaks a rule above."""
    found = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell.get("cell_type") != "code":
            continue
        pictures = []
        for output in cell.get("outputs", []):
            pictures += _pictures(output)
            for text in _texts(output):
                for kind, rx in (("machine path", MACHINE_PATH), ("warning", WARNING)):
                    m = rx.search(text)
                    if m:
                        found.append((kind, _digest(text), f"cell {i}", text[max(0, m.start() - 60):m.end() + 80]))
        twice = sorted({p for p in pictures if pictures.count(p) > 1})
        if twice:
            found.append(("the same picture twice", twice[0], f"cell {i}", f"{len(pictures)} pictures, "
                          f"{len(set(pictures))} different"))
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_hold_no_machine_path_no_picture_twice_and_no_warning(path):
    found = offenders(path)
    new = [f for f in found if (path.name, f[0], f[1]) not in UNTIL_RECORD]
    assert not new, "\n".join(f"{path.name} {cell}: {kind}: {what!r}" for kind, _, cell, what in new)
    gone = {e for e in UNTIL_RECORD if e[0] == path.name} - {(path.name, k, d) for k, d, _, _ in found}
    if gone:
        warnings.warn(f"UNTIL_RECORD entries that match no output of {path.name} any more (take them out): "
                      f"{sorted(gone)}", stacklevel=1)


def test_the_checks_find_what_they_are_for():
    cell = {"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stderr",
         "text": ["/opt/venv/lib/python3.12/site-packages/torch/profiler.py:224: UserWarning: cleared\n"]},
        {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=\n"}},
        {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=\n",
                                                 "text/plain": ["<Figure size 1000x340 with 2 Axes>"]}},
        {"output_type": "execute_result", "data": {"text/html": ["<img src='data:image/png;base64,AB/tmp/CD=='>"],
                                                   "text/plain": ["Result(figures=['/tmp/judge-x/t.png'])"]}}]}
    nb = {"cells": [cell, {"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["4096^3: 943 TFLOPS, 0.811 of _scaled_mm\n"]}]}]}
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "x.ipynb"
        p.write_text(json.dumps(nb))
        kinds = sorted(k for k, _, _, _ in offenders(p))
    # the stderr line (a path and a warning), the repr's path, the picture twice; base64 and plain text pass
    assert kinds == ["machine path", "machine path", "the same picture twice", "warning"], kinds

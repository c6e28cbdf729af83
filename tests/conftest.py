"""tests/conftest.py - set-up and fixtures every test file shares.

Run the suite from the checkout: python -m pytest tests -q -n 2   (GPU tests skip with a reason)

Every test gets a workspace of its own (the learner's real workspace/ is never touched); the compile
cache is shared, being keyed by source, options and compiler. `tiny_course` is a course of four files
in a temporary folder, with judge.config and the record pointed at it, for tests of provenance.
"""
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(autouse=True)
def _own_workspace(tmp_path, monkeypatch):
    """No test touches the learner's real workspace/ folder."""
    monkeypatch.setenv("JUDGE_WORKSPACE", str(tmp_path / "workspace"))


@pytest.fixture
def tiny_course(tmp_path, monkeypatch):
    """(root, files): one kernel, one notebook, one module of the CPU model and one of the grading wing,
    with config.ROOT and the record (judge.record.reading.RECORD) pointed at the copy."""
    from judge import config
    from judge.record import reading
    root = tmp_path / "course"
    for d in ("chapters", "judge/model", "judge/grading", "record"):
        (root / d).mkdir(parents=True)
    files = {"cu": root / "chapters" / "k.cu", "nb": root / "chapters" / "c.ipynb",
             "model": root / "judge" / "model" / "state.py", "flow": root / "judge" / "grading" / "cuda_flow.py"}
    files["cu"].write_text("// k.cu - a kernel\n")
    files["nb"].write_text(json.dumps({"cells": [{"cell_type": "code", "source": "x = 1", "outputs": []}]}))
    files["model"].write_text('"""the state of the model"""\n')
    files["flow"].write_text('"""the CUDA flow"""\n')
    monkeypatch.setattr(config, "ROOT", root)
    monkeypatch.setattr(reading, "RECORD", root / "record" / "hopper.json")
    return root, files

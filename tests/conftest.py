"""tests/conftest.py - set-up and fixtures every test file shares.

Run the suite from the checkout: python -m pytest tests -q -n 2   (GPU tests skip with a reason)

Every test gets a workspace of its own (the learner's real workspace/ is never touched); the compile
cache is shared, being keyed by source, options and compiler. `tiny_course` is a course of four files
in a temporary folder, with judge.config and the record pointed at it, for tests of provenance.
`shared_gradings` grades a file once for every module that reads it under the same settings (tests/gradings.py).

Every test module runs with two of judge.config's variables set to make a grading cheaper, leaving its verdict
and message as they are (the chapters' notebooks, collected outside tests/, run with the defaults):
  JUDGE_DRAW_BUDGET_S=0.5  a Python check draws its inputs for 0.5 s, not 2 s (on a busy machine that may be
                           none at all). Every wrong fixture is caught by the statement's listed cases, before
                           any drawn input; what drawn inputs alone find is tested in the test's own process
                           with a budget of 60 s (tests/checking.py), and the flow's budget itself at its
                           default (tests/grading/test_cpu_flow.py sets it back for its module).
  JUDGE_FIGURES=0          pipeline_timeline's check draws no timeline; the tests of the figure set
                           JUDGE_FIGURES=1 (tests/exercises/test_pipeline_timeline.py, tests/grading/test_sandbox.py).
The variables are set per test module, before its module-scoped fixtures, so that the child processes of
every grading inherit them.
"""
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent      # importable: pyproject's pytest pythonpath names it
os.environ.setdefault("MPLBACKEND", "Agg")


#: set for every test module (see above); a test that needs the default sets its own with monkeypatch
TEST_SETTINGS = {"JUDGE_DRAW_BUDGET_S": "0.5", "JUDGE_FIGURES": "0"}


@pytest.fixture(autouse=True, scope="module")
def _cheaper_gradings():
    """TEST_SETTINGS in the environment for this module's tests and fixtures, the old values back after it."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in TEST_SETTINGS.items():
            mp.setenv(k, v)
        yield


@pytest.fixture(autouse=True)
def _own_workspace(tmp_path, monkeypatch):
    """No test touches the learner's real workspace/ folder."""
    monkeypatch.setenv("JUDGE_WORKSPACE", str(tmp_path / "workspace"))


@pytest.fixture(scope="session")
def shared_gradings(tmp_path_factory):
    """Gradings shared by the test modules that read the same file under the same settings (tests/gradings.py),
    across pytest-xdist's workers: kept beside the workers' own folders of this run."""
    from tests.gradings import SharedGradings
    base = tmp_path_factory.getbasetemp()
    return SharedGradings((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-gradings")


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

"""Shared test set-up: every test gets its own workspace and compile cache is shared (it is keyed safely)."""
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

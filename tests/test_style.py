"""The course's Python passes ruff (rules in pyproject.toml [tool.ruff]): what CI runs, as a test."""
import shutil
import subprocess
import sys

import pytest

from judge import config


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or str(config.ROOT / ".venv" / "bin" / "ruff")
    try:
        r = subprocess.run([ruff, "check", ".", "--output-format", "concise"], cwd=config.ROOT,
                           capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        r = subprocess.run([sys.executable, "-m", "ruff", "check", ".", "--output-format", "concise"],
                           cwd=config.ROOT, capture_output=True, text=True, timeout=120)
    if "No module named ruff" in r.stderr:
        pytest.fail("ruff is not installed: pip install -e '.[dev]'")
    assert r.returncode == 0, r.stdout[-3000:]

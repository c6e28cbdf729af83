"""tests/grading/test_checks.py - the public helpers of exercise checks (judge.grading.checks).

Run: PYTHONPATH=$PWD python -m pytest tests/grading/test_checks.py -q
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from judge import config
from judge.grading import checks


@pytest.mark.parametrize("v", [3, -7, 2.5, np.int8(3), np.uint64(2 ** 63), np.float16(0.5), float("nan")])
def test_any_python_or_numpy_scalar_is_a_number(v):
    assert checks.is_number(v)


@pytest.mark.parametrize("v", [True, np.bool_(False), "3", None, [3], np.array([3])])
def test_a_bool_a_text_or_a_container_is_no_number(v):
    assert not checks.is_number(v)


def test_as_integer_takes_integral_values_of_any_type_and_nothing_else():
    assert [checks.as_integer(v) for v in (12, 12.0, np.uint8(12), np.float32(12))] == [12] * 4
    assert checks.as_integer(np.uint64(2 ** 64 - 1)) == 2 ** 64 - 1           # exact, not through a float
    assert [checks.as_integer(v) for v in (12.5, True, "12", float("inf"), float("nan"))] == [None] * 5


def test_show_is_short_and_says_numpy_types():
    assert checks.show(np.int32(5)) == "int32(5)"
    assert checks.show(np.arange(3, dtype=np.int32)) == "array([0, 1, 2], dtype=int32)"
    assert "shape=(100,)" in checks.show(np.zeros(100))
    long = checks.show("x" * 500, limit=40)
    assert len(long) == 40 and long.endswith("...")
    assert checks.show({"a": [1,  2]}) == "{'a': [1, 2]}"


def test_no_check_reaches_into_a_flow_s_private_names():
    """A check.py uses the public helpers (judge.grading.checks) and the flows' public names only."""
    for path in sorted(config.EXERCISES_DIR.glob("*/check.py")):
        bad = re.findall(r"\b(?:flow|cpu_flow|cuda_flow)\._\w+", path.read_text())
        assert not bad, f"{path}: {sorted(set(bad))}: use judge.grading.checks (CONTRIBUTING.md, 'An exercise')"

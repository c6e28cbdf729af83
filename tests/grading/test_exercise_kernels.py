"""tests/grading/test_exercise_kernels.py - every kernel (GPU) exercise's solution and fixtures get their verdicts.

Run: python -m pytest tests/grading/test_exercise_kernels.py -q -n 2     (no GPU needed: the CPU model grades them)

The same check as tests/grading/test_exercises.py's for the Python exercises (check_case there says what a
machine without a Hopper GPU must give each file), in a module of its own so that the kernel exercises
(each file compiled, then run on the CPU model) and the Python ones are graded on two workers at once. A new
exercise needs no edit here.
"""
import pytest

from test_exercises import cases, check_case


@pytest.mark.parametrize("ex,name", cases(kernels=True), ids=lambda x: x if isinstance(x, str) else x.id)
def test_solution_and_fixtures_get_their_verdicts(ex, name, shared_gradings):
    check_case(ex, name, shared_gradings)

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


def test_a_wrong_kernel_s_printf_lines_come_with_its_verdict(tmp_path):
    # the tma_tiles solution, off by one in its arithmetic and printing what it computed: the CPU model's
    # WRONG verdict shows the printed lines, as a GPU run would have shown them on the console
    from judge import gpu
    from judge.grading import exercise, grade
    if gpu.available():
        pytest.skip("on a GPU the kernel itself runs (and prints to the console)")
    src = exercise.get("tma_tiles").solution_path.read_text()
    line = "    tile[i] = 2.0f * tile[i] + 1.0f;"
    assert line in src
    f = tmp_path / "tma_tiles.cu"
    f.write_text(src.replace(line, line.replace("1.0f", "2.0f") + '\n  if (threadIdx.x == 0 && blockIdx.x == 0 && '
                             'blockIdx.y == 0) printf("block 0 tile[0] = %f\\n", tile[0]);'))
    r = grade.check("tma_tiles", f, quiet=True)
    assert r.verdict.value == "WRONG", r
    shown = [d for d in r.details if d.startswith("  block 0 tile[0] = ")]
    assert shown and any(d.startswith("your kernel printed (on the CPU model") for d in r.details), r.details

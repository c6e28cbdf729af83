"""`course release` (judge/grading/release.py) on a small course of its own: what the learners' copy leaves
out. The whole course released and graded as a class is tests/grading/test_classroom.py.

Run: python -m pytest tests/grading/test_release.py -q
"""
from judge.grading import release


def test_release_leaves_the_lab_out_and_keeps_the_chapters(tmp_path):
    root = tmp_path / "course"
    for rel in ("README.md", "chapters/ch01_x/k.cu", "chapters/ch01_x.ipynb", "lab/explore.py",
                "lab/patches/explore_x.patch", "tests/test_x.py", "practice/judge.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"{rel}\n")
    dest = tmp_path / "learners"
    release.release(dest, root=root)
    assert not (dest / "lab").exists() and not (dest / "tests").exists()
    for rel in ("README.md", "chapters/ch01_x/k.cu", "chapters/ch01_x.ipynb", "practice/judge.py"):
        assert (dest / rel).read_text() == f"{rel}\n", rel

"""tests/chapters/test_exercise_links.py - every exercise is linked from the chapter that teaches it.

The chapter is exercise.toml's `chapter`; its notebook is the chapters/ notebook numbered so (ch01_cp_async.ipynb). A link is Markdown, `[...](../exercises/<id>/README.md)`, in a markdown cell; every
such link in any chapter names a statement that exists.

Run: PYTHONPATH=$PWD python -m pytest tests/chapters/test_exercise_links.py -q
"""
import json
import re

from judge import config
from judge.grading import exercise

LINK = re.compile(r"\]\(\.\./exercises/([A-Za-z0-9_]+)/README\.md\)")


def _notebook(chapter: int):
    found = [p for p in (config.ROOT / "chapters").glob("*.ipynb")
             if re.fullmatch(rf"(ch)?{chapter:02d}_\w+\.ipynb", p.name)]
    assert len(found) == 1, (chapter, found)
    return found[0]


def _links(nb) -> list[str]:
    cells = json.loads(nb.read_text())["cells"]
    return [m for c in cells if c["cell_type"] == "markdown" for m in LINK.findall("".join(c["source"]))]


def test_every_exercise_is_linked_from_its_chapter():
    missing = [(ex.id, _notebook(ex.chapter).name) for ex in exercise.all_exercises()
               if ex.id not in _links(_notebook(ex.chapter))]
    assert not missing, f"exercises not linked from their chapter's notebook: {missing}"


def test_every_link_to_an_exercise_names_a_statement_that_exists():
    for nb in (config.ROOT / "chapters").glob("*.ipynb"):
        for ex_id in _links(nb):
            assert (config.ROOT / "exercises" / ex_id / "README.md").is_file(), (nb.name, ex_id)

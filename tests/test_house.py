"""tests/test_house.py - the shape of judge/: few modules at the top, wings in layers, no import cycle.

Run: python -m pytest tests/test_house.py -q       (reads the sources; imports nothing of judge but the analysis)

Imports are read from each module's AST, every import statement anywhere (inside functions too), by
judge.draw.house, which also draws docs/house.png. The layers, floor first (house.LAYERS):
    config < hw < draw < model < gpu < grading < record < top (judge, __main__, cli)
a module imports its own wing and those below it. What breaks that today is listed below with where
it is and what would mend it; those lists only shrink (a test fails when an entry is no longer true).

The engine never imports the course's chapters or exercises (house.reaches): no import of chapters/ or
exercises/ anywhere in judge/, and code loaded by a name or a path chosen at run time, or a change to sys.path,
only at the places PLUGINS names, the grading wing's plugin loader first (an exercise's check.py, a learner's
file, a reference solution). What the record needs from a chapter it starts as the chapter's own program.
"""
import ast
import json
import re
import textwrap

from judge import config
from judge.draw import house

EDGES = house.imports()

#: imports against the layers, each with its mend; the owner of the module mends it and removes the line
KNOWN_UPWARD = {
}
#: import cycles (function-level imports counted), each with its mend
KNOWN_CYCLES = {
}


#: where judge/ may load code by a name or a path chosen at run time, or change sys.path: (module, function) -> why
PLUGINS = {
    ("judge.grading.exercise", "import_file"): "the plugin loader: an exercise's check.py, a learner's file, a reference",
    ("judge.grading.exercise", "grader"): "an exercise's check.py, through import_file",
    ("judge.grading.exercise", "reference"): "an exercise's reference solution, through import_file",
    ("judge.grading.exercise", "reference_module"): "an exercise's reference.py (its check's rules), through import_file",
    ("judge.grading.check_child", "main"): "the learner's file a check calls in isolation, through import_file",
    ("judge.grading.learner_process", "_child_main"): "the learner's file, inside the sandbox",
    ("judge.grading.learner_process", "_fence"): "the sandbox takes the course's own files off sys.path",
    ("judge.grading.check_server", "serve"): "PRELOAD: the judge's own modules and libraries, before forking",
    ("judge.model.ops", "<module>"): "the model's own op modules, judge.model.ops.<family>",
}


def _where(r: dict) -> str:
    return f"{r['module']} ({r['function']}, line {r['line']}): {r['text']}"


def _reaching_out(found: list[dict], plugins: dict) -> list[str]:
    """What in `found` (house.reaches) breaks the rule: any import of chapters/ or exercises/; a load or a
    sys.path change outside `plugins`; any load whose arguments name the chapters."""
    bad = [f"imports the course: {_where(r)}" for r in found if r["kind"] == "import"]
    bad += [f"loads code or changes sys.path outside the plugin places: {_where(r)}" for r in found
            if r["kind"] != "import" and (r["module"], r["function"]) not in plugins]
    bad += [f"loads a chapter's code: {_where(r)}" for r in found
            if r["kind"] == "load" and re.search(r"CHAPTERS_DIR|chapters", r["text"])]
    return bad


def test_the_engine_never_imports_or_loads_the_chapters_or_the_exercises():
    found = house.reaches()
    bad = _reaching_out(found, PLUGINS)
    assert not bad, "judge/ reaches into the course (run a chapter's code as its own program instead):\n" + \
        "\n".join(bad)
    gone = set(PLUGINS) - {(r["module"], r["function"]) for r in found}
    assert not gone, f"no longer loading code there, drop from PLUGINS: {sorted(gone)}"
    from judge.grading import check_server
    assert not [m for m in check_server.PRELOAD if m.split(".")[0] in house.OUTSIDE]


def test_the_reach_analysis_finds_each_way_in(tmp_path):
    pkg = tmp_path / "judge"
    (pkg / "record").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""top"""\n')
    (pkg / "record" / "__init__.py").write_text('"""record"""\n')
    (pkg / "record" / "a.py").write_text(textwrap.dedent('''\
        """planted: every way in"""
        import sys
        import exercises.tma_plan.check
        from judge import config

        def profile():
            from chapters.ch04_wgmma import ladder
            return ladder

        def by_path():
            import importlib.util, runpy
            importlib.util.spec_from_file_location("ladder", config.CHAPTERS_DIR / "ch04_wgmma" / "ladder.py")
            runpy.run_path("chapters/ch01_cp_async/sgemm.py")
            sys.path.insert(0, str(config.CHAPTERS_DIR))
            sys.path[:0] = ["chapters"]
        '''))
    found = house.reaches(pkg)
    assert [(r["function"], r["kind"]) for r in found] == [
        ("<module>", "import"), ("profile", "import"), ("by_path", "load"), ("by_path", "load"),
        ("by_path", "sys.path"), ("by_path", "sys.path")]
    bad = _reaching_out(found, PLUGINS)
    assert len(bad) == 8 and sum(b.startswith("loads a chapter's code") for b in bad) == 2
    # the plugin places may load by path, never a chapter's file
    allowed = {("judge.record.a", "by_path"): "planted"}
    assert [b.split(":")[0] for b in _reaching_out(found, allowed)] == ["imports the course"] * 2 + \
        ["loads a chapter's code"] * 2


def test_at_most_ten_modules_at_the_top_of_judge():
    top = sorted(p.name for p in house.PACKAGE.glob("*.py"))
    assert len(top) <= 10, f"judge/ has {len(top)} modules at the top: {top}; give them a wing"


def test_every_module_opens_with_a_docstring():
    for name, path in house.modules().items():
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc and doc.strip(), f"{path.relative_to(config.ROOT)}: open with a docstring saying what it is"


def test_every_folder_of_judge_is_a_wing_in_the_layers():
    folders = {p.name for p in house.PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= set(house.LAYERS), f"wings not in house.LAYERS: {folders - set(house.LAYERS)}"
    assert set(house.data()["wings"]) == set(house.LAYERS)


def test_no_import_goes_up_the_layers_but_the_known_ones():
    found = set(house.upward(EDGES))
    new = found - set(KNOWN_UPWARD)
    assert not new, "imports against the layers " + " < ".join(house.LAYERS) + ": " + \
        "; ".join(f"{a} imports {b} ({house.wing_of(a)} is below {house.wing_of(b)})" for a, b in sorted(new))
    mended = set(KNOWN_UPWARD) - found
    assert not mended, f"no longer imported, drop from KNOWN_UPWARD: {sorted(mended)}"


def test_no_import_cycle_but_the_known_ones():
    found = {tuple(c) for c in house.cycles(EDGES)}
    new = found - set(KNOWN_CYCLES)
    assert not new, "import cycles (function-level imports count): " + "; ".join(" <-> ".join(c) for c in sorted(new))
    mended = set(KNOWN_CYCLES) - found
    assert not mended, f"cycles gone, drop them from KNOWN_CYCLES: {sorted(mended)}"


def test_the_picture_shows_the_house_as_the_code_has_it():
    stored = json.loads((config.ROOT / "docs" / "house.json").read_text())
    assert stored == json.loads(json.dumps(house.data())), "the wings or their imports changed: python -m judge.draw.house"
    assert (config.ROOT / "docs" / "house.png").stat().st_size > 10_000
    assert "docs/house.png" in (config.ROOT / "CONTRIBUTING.md").read_text()


def test_the_analysis_counts_function_level_and_relative_imports_and_finds_cycles(tmp_path, monkeypatch):
    pkg = tmp_path / "judge"
    files = {
        "__init__.py": '"""top"""\n',
        "config.py": '"""config"""\n',
        "hw/__init__.py": '"""hw"""\n',
        "hw/a.py": '"""a"""\nfrom judge import config\n\ndef f():\n    from judge.gpu import b\n    return b\n',
        "gpu/__init__.py": '"""gpu"""\n',
        "gpu/b.py": '"""b"""\nfrom . import c\n',
        "gpu/c.py": '"""c"""\nimport judge.hw.a\nfrom ..hw import a as _a\n',
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(textwrap.dedent(text))
    monkeypatch.setattr(house, "PACKAGE", pkg)
    edges = house.imports(pkg)
    assert edges["judge.hw.a"] == {"judge.config", "judge.gpu.b"}          # the one inside a function too
    assert edges["judge.gpu.b"] == {"judge.gpu.c"}                          # from . import c
    assert edges["judge.gpu.c"] == {"judge.hw.a"}                           # absolute and relative alike
    assert house.cycles(edges) == [["judge.gpu.b", "judge.gpu.c", "judge.hw.a"]]
    assert house.upward(edges) == [("judge.hw.a", "judge.gpu.b")]
    assert house.wing_graph(edges) == {("hw", "config"): 1, ("hw", "gpu"): 1, ("gpu", "hw"): 1}


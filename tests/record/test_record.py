"""tests/record/test_record.py - the Hopper record is current: every kernel and notebook ran on the H200 as it is now.

Run: python -m pytest tests/record/test_record.py -q      (no GPU: it reads record/hopper.json)

When test_no_recorded_source_changed_since_it_ran fails, something a figure was measured with (a kernel,
a header, a chapter's host module, a notebook, timing or launch) changed after its last recorded run: run
`python -m judge.record.hopper_run` on an H200 and commit record/hopper.json. A change to what graded
a figure (the CPU model, the grading wing) only warns, naming the sections to re-record (judge.record).
"""
import hashlib
import json
import warnings

import pytest

from judge import config, record
from judge.record import reading

# a starter is generated from its solution (tests/grading/test_exercises.py holds them in step) and never runs
KERNELS = sorted(config.CHAPTERS_DIR.rglob("*.cu")) + sorted(p for p in config.EXERCISES_DIR.glob("*/**/*.cu")
                                                          if p.stem != "starter")
NOTEBOOKS = sorted(config.CHAPTERS_DIR.glob("*.ipynb"))


def test_the_record_exists_and_says_where_it_ran():
    data = record.read()
    assert data["sections"], "record/hopper.json is empty: run python -m judge.record.hopper_run on an H200"
    for name, sec in data["sections"].items():
        if sec["device"].startswith("compile-only"):     # e.g. sm_100a kernels: compiled, never run
            assert sec["cc"] == sec["device"].split("(")[1].rstrip(")"), name
            continue
        assert sec["cc"] == "sm_90", f"{name} ran on {sec['device']} ({sec['cc']}), not a Hopper GPU"
        assert sec["sources"] or name in ("device.ceilings", "tests"), name
        assert sec["date"] and sec["driver"]


def test_no_recorded_source_changed_since_it_ran():
    assert record.stale() == []


def test_what_graded_the_record_changed_only_warns():
    """Passes whatever changed in judge/model or judge/grading; the warning names the sections to re-record."""
    note = record.regrade_note()
    if note:
        warnings.warn(note, stacklevel=1)


def test_every_kernel_and_notebook_has_been_recorded():
    assert record.unrecorded(KERNELS + NOTEBOOKS) == []


def test_every_notebook_passed_under_nbval_on_the_h200():
    for nb in NOTEBOOKS:
        sec = record.load(f"notebook.{nb.stem}")
        assert sec and sec["figures"]["nbval"] == "passed", nb.name


def test_gpu_exercises_got_their_declared_verdicts_on_the_h200():
    from judge.grading import exercise
    for ex in exercise.all_exercises():
        if ex.needs_gpu:
            sec = record.load(f"exercise.{ex.id}")
            assert sec, f"{ex.id} was never run on the H200"
            v = sec["figures"]["verdicts"]
            assert v["solution"]["verdict"] == "PASS", v["solution"]
            if not sec["device"].startswith("compile-only"):
                assert v["solution"]["tier"], v["solution"]
            for name, want in ex.fixtures.items():
                assert name in v, f"{ex.id}: {name} never ran on the H200 (python -m judge.record.hopper_run)"
                assert v[name]["verdict"] == want, (name, v[name])


def test_stale_detection_notices_an_edited_kernel_or_notebook(tiny_course):
    root, f = tiny_course
    cu, nb = f["cu"], f["nb"]
    reading.RECORD.write_text(json.dumps({"sections": {"ch": {
        "device": "NVIDIA H200", "date": "today", "sources": {
            "chapters/k.cu": record.source_hash(cu), "chapters/c.ipynb": record.source_hash(nb)}}}}))
    assert record.stale() == [] and record.unrecorded([cu, nb]) == []
    # outputs of a notebook do not count; its sources do
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "x = 1", "outputs": ["2"]}]}))
    assert record.stale() == []
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "x = 2", "outputs": []}]}))
    assert [s for s in record.stale() if "c.ipynb" in s]
    cu.write_text("// k.cu - a kernel, edited\n")
    assert [s for s in record.stale() if "k.cu" in s]
    (root / "chapters" / "new.cu").write_text("// new.cu - never ran\n")
    assert record.unrecorded([root / "chapters" / "new.cu"]) == ["chapters/new.cu"]


def test_an_erratum_in_a_notebook_s_prose_waits_for_no_gpu_but_its_code_does(tiny_course):
    """The code cells measured the figures; a markdown fix cannot move one, so it leaves the record current."""
    root, f = tiny_course
    nb = f["nb"]
    cells = [{"cell_type": "markdown", "source": "The coalescer merges almost three times as many."},
             {"cell_type": "code", "source": "x = 1", "outputs": []}]
    nb.write_text(json.dumps({"cells": cells}))
    reading.RECORD.write_text(json.dumps({"sections": {"ch": {
        "device": "NVIDIA H200", "date": "today", "sources": {"chapters/c.ipynb": record.source_hash(nb)}}}}))
    cells[0]["source"] = "The coalescer merges 2.5 times as many."
    nb.write_text(json.dumps({"cells": cells}))
    assert record.stale() == []
    cells[1]["source"] = "x = 2"
    nb.write_text(json.dumps({"cells": cells}))
    assert [s for s in record.stale() if "c.ipynb" in s]


def test_a_record_that_hashed_every_cell_stays_current_until_the_notebook_changes(tiny_course):
    root, f = tiny_course
    nb = f["nb"]
    cells = [{"cell_type": "markdown", "source": "prose"}, {"cell_type": "code", "source": "x = 1"}]
    nb.write_text(json.dumps({"cells": cells}))
    every_cell = hashlib.sha256("prose\n\0x = 1".encode()).hexdigest()     # how such a record hashed it
    assert every_cell != record.source_hash(nb)
    reading.RECORD.write_text(json.dumps({"sections": {"ch": {
        "device": "NVIDIA H200", "date": "today", "sources": {"chapters/c.ipynb": every_cell}}}}))
    assert record.stale() == []
    cells[0]["source"] = "prose, corrected"
    nb.write_text(json.dumps({"cells": cells}))
    assert [s for s in record.stale() if "c.ipynb" in s], "the old hash cannot tell prose from code"


@pytest.mark.parametrize("layout", ["today's record (one 'sources' table)", "two kinds ('sources', 'graded_by')"])
def test_a_comment_in_the_cpu_model_only_warns_and_an_edited_kernel_still_fails(tiny_course, layout):
    root, f = tiny_course
    hashes = {str(p.relative_to(root)): record.source_hash(p) for p in f.values()}
    sec = {"device": "NVIDIA H200", "date": "today", "sources": hashes}
    if layout.startswith("two"):
        sec = {**sec, "sources": {k: v for k, v in hashes.items() if not k.startswith("judge/")},
               "graded_by": {k: v for k, v in hashes.items() if k.startswith("judge/")}}
    reading.RECORD.write_text(json.dumps({"sections": {"exercise.x": sec, "ch01.y": {
        "device": "NVIDIA H200", "date": "today", "sources": {"chapters/k.cu": hashes["chapters/k.cu"]}}}}))
    assert record.stale() == [] and record.regrade() == {} and record.regrade_note() == ""
    f["model"].write_text(f["model"].read_text() + "# a comment\n")
    f["flow"].write_text(f["flow"].read_text() + "# another\n")
    assert record.stale() == [], "a change to what graded a figure must not fail CI"
    assert {k: sorted(v) for k, v in record.regrade().items()} == {
        "exercise.x": ["judge/grading/cuda_flow.py", "judge/model/state.py"]}
    assert "exercise.x" in record.regrade_note() and "ch01.y" not in record.regrade_note()
    f["cu"].write_text("// k.cu - a kernel, edited\n")
    assert sorted(s.split(":")[0] for s in record.stale()) == ["ch01.y", "exercise.x"]


def test_save_stores_the_two_kinds_apart(tiny_course, monkeypatch):
    root, f = tiny_course
    monkeypatch.setenv("JUDGE_RECORD", "1")
    assert record.save("compile.x", {"n": 1}, sources=list(f.values()), compile_only="sm_100a")
    sec = record.load("compile.x")
    assert set(sec["sources"]) == {"chapters/k.cu", "chapters/c.ipynb"}
    assert set(sec["graded_by"]) == {"judge/model/state.py", "judge/grading/cuda_flow.py"}
    assert record.kind_of("judge/gpu/timing.py") == record.kind_of("judge/gpu/launch.py") == "measured"
    assert record.kind_of("exercises/ws_gemm/check.py") == "measured"     # its launch() and work() make the figure


def test_python_m_judge_names_the_sections_to_re_record(tiny_course, capsys):
    root, f = tiny_course
    reading.RECORD.write_text(json.dumps({"sections": {"exercise.x": {
        "device": "NVIDIA H200", "date": "today", "figures": {"n": 1},
        "sources": {"judge/model/state.py": "0" * 64}}}}))
    assert record.main() == 0
    out = capsys.readouterr().out
    assert "Warning:" in out and "re-record exercise.x" in out


def test_the_readme_figures_are_the_recorded_ones():
    readme = (config.ROOT / "README.md").read_text()
    block = readme[readme.index(record.README_BEGIN) + len(record.README_BEGIN):readme.index(record.README_END)]
    assert block.strip() == record.figures_table(), "run python -m judge --readme after a record run"


def test_each_reference_solution_clears_its_tier_by_more_than_the_measured_spread():
    """A tier must not be a coin toss: the reference's figure sits above its tier's line by more than
    the spread of the timings that made it (judge.grading.cuda_flow counts a figure within the spread as below)."""
    from judge import config
    from judge.grading import exercise
    for ex in exercise.all_exercises():
        sec = record.load(f"exercise.{ex.id}")
        if not ex.needs_gpu or not sec or sec["device"].startswith("compile-only"):
            continue
        m = sec["figures"]["verdicts"]["solution"]["measurements"]
        tier = sec["figures"]["verdicts"]["solution"]["tier"]
        spread = max(m["spread"], m["ceiling_spread"], config.TIER_SPREAD_FLOOR)
        assert m["fraction"] >= float(ex.tiers[tier]) * (1 + spread), (ex.id, tier, m["fraction"], spread)



def test_each_chapter_declares_the_sections_it_records_and_saves_them():
    """chapters/chNN_name/figures.toml lists the sections its notebook and host modules save; the record has no
    chapter section its chapter does not declare."""
    declared = {}
    for path, decl in record.write.declarations():
        for name in decl.get("sections", []):
            declared[name] = path
    for folder in sorted(p for p in config.CHAPTERS_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"):
        fig = folder / "figures.toml"
        assert fig.exists(), f"{folder.name}: no figures.toml (CONTRIBUTING.md, 'A chapter')"
        nb = json.loads((config.CHAPTERS_DIR / f"{folder.name}.ipynb").read_text())
        text = "".join("".join(c["source"]) for c in nb["cells"]) + "".join(p.read_text() for p in folder.glob("*.py"))
        for name, where in declared.items():
            if where == fig:
                assert f'"{name}"' in text, f"{fig}: declares {name}, which neither its notebook nor a module saves"
    for name in record.read().get("sections", {}):
        if name.startswith("ch"):
            assert name in declared, f"section {name} is recorded but no chapter's figures.toml declares it"


def test_the_readme_table_is_built_from_the_declarations(tmp_path, monkeypatch):
    """Rows come from each figures.toml, in order, through the formatter its kind names."""
    root = tmp_path / "course"
    for d in ("chapters/01_x", "record", "exercises"):
        (root / d).mkdir(parents=True)
    monkeypatch.setattr(config, "CHAPTERS_DIR", root / "chapters")
    monkeypatch.setattr(config, "RECORD_DIR", root / "record")
    monkeypatch.setattr(config, "EXERCISES_DIR", root / "exercises")
    monkeypatch.setattr(reading, "RECORD", root / "record" / "hopper.json")
    reading.RECORD.write_text(json.dumps({"sections": {
        "ch01.speed": {"figures": {"rows": [{"k": "a", "n": 1, "v": 2.25}, {"k": "b", "n": 1, "v": 7.5},
                                            {"k": "b", "n": 2, "v": 9.0}], "sizes": {"64": {"x": 3}}}},
        "exercise.e": {"figures": {"verdicts": {
            "solution": {"verdict": "PASS", "tier": "gold", "measurements": {"fraction": 0.5, "ceiling": "copy"}},
            "wrong.cu": {"verdict": "WRONG", "expected": "WRONG"}}}}}}))
    (root / "chapters" / "01_x" / "figures.toml").write_text('''order = 1
sections = ["ch01.speed"]
[[readme]]
what = "fastest ({m[k]})"
figure = "{m[v]:.1f} then {o[v]:.0f}; size 64 gives {f[ch01.speed][sizes][64][x]}"
pick.m = { section = "ch01.speed", best = "v" }
pick.o = { section = "ch01.speed", where = { k = "{m[k]}", n = 2 } }
[[readme]]
kind = "list"
what = "all at n = 1"
figure = "{items}"
item = "{r[k]}={r[v]}"
rows = { section = "ch01.speed", where = { n = 1 } }
''')
    (root / "exercises" / "figures.toml").write_text('order = 100\n[[readme]]\nkind = "exercises"\n')
    assert record.figures_table().splitlines()[2:] == [
        "| fastest (b) | 9.0 then 9; size 64 gives 3 |",
        "| all at n = 1 | a=2.25, b=7.5 |",
        "| exercise e: reference / 1 fixtures | PASS (gold), 0.50 of copy / every verdict as declared |"]
    (root / "record" / "figures.toml").write_text('[[readme]]\nkind = "chart"\n')
    with pytest.raises(ValueError, match="kind 'chart'"):
        record.figures_table()

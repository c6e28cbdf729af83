"""The Hopper record is current: every kernel and notebook ran on the H200 as it is now.

When this fails, a kernel or notebook changed after its last recorded run: run
`python -m judge.record.hopper_run` on an H200 and commit record/hopper.json.
"""
import json

from judge import config, record

KERNELS = sorted(config.CHAPTERS_DIR.rglob("*.cu")) + sorted(config.EXERCISES_DIR.glob("*/**/*.cu"))
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
                assert v[name]["verdict"] == want, (name, v[name])


def test_stale_detection_notices_an_edited_kernel_or_notebook(tmp_path, monkeypatch):
    root = tmp_path / "course"
    (root / "chapters").mkdir(parents=True)
    cu, nb = root / "chapters" / "k.cu", root / "chapters" / "c.ipynb"
    cu.write_text("// k.cu - a kernel\n")
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "source": "x = 1", "outputs": []}]}))
    monkeypatch.setattr(config, "ROOT", root)
    monkeypatch.setattr(record, "RECORD", root / "record" / "hopper.json")
    (root / "record").mkdir()
    record.RECORD.write_text(json.dumps({"sections": {"ch": {
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


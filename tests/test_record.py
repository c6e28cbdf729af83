"""The Hopper record is current: every kernel and notebook ran on the H200 as it is now.

When this fails, a kernel or notebook changed after its last recorded run: run
`python -m judge.hopper_record` on an H200 and commit record/hopper.json.
"""
import json
import shutil

from judge import config, record

KERNELS = sorted(config.CHAPTERS_DIR.rglob("*.cu")) + sorted(config.EXERCISES_DIR.glob("*/**/*.cu"))
NOTEBOOKS = sorted(config.CHAPTERS_DIR.glob("*.ipynb"))


def test_the_record_exists_and_says_where_it_ran():
    data = record.read()
    assert data["sections"], "record/hopper.json is empty: run python -m judge.hopper_record on an H200"
    for name, sec in data["sections"].items():
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
    from judge import exercise
    for ex in exercise.all_exercises():
        if ex.needs_gpu:
            sec = record.load(f"exercise.{ex.id}")
            assert sec, f"{ex.id} was never run on the H200"
            v = sec["figures"]["verdicts"]
            assert v["solution"]["verdict"] == "PASS" and v["solution"]["tier"], v["solution"]
            for name, want in ex.fixtures.items():
                assert v[name]["verdict"] == want, (name, v[name])


def test_stale_detection_notices_an_edit(tmp_path, monkeypatch):
    # a copy of the course with one recorded kernel edited must be reported stale
    data = record.read()
    rel = next(iter(next(iter(data["sections"].values()))["sources"]), None)
    if rel is None:
        return
    root = tmp_path / "course"
    (root / "record").mkdir(parents=True)
    for sec in data["sections"].values():
        for r in sec["sources"]:
            (root / r).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(config.ROOT / r, root / r)
    (root / "record" / "hopper.json").write_text(json.dumps(data))
    monkeypatch.setattr(config, "ROOT", root)
    monkeypatch.setattr(record, "RECORD", root / "record" / "hopper.json")
    assert record.stale() == []
    with open(root / rel, "a") as f:
        f.write("\n// edited\n" if not rel.endswith(".ipynb") else "")
    if rel.endswith(".ipynb"):
        nb = json.loads((root / rel).read_text())
        nb["cells"][0]["source"] = "# edited\n" + "".join(nb["cells"][0]["source"])
        (root / rel).write_text(json.dumps(nb))
    assert any(rel in s for s in record.stale())

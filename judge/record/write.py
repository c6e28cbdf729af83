"""Writing the Hopper record: what ran on the H200, with the hashes of what it ran, in two kinds.

record/hopper.json holds, per section (a notebook's figures, an exercise's verdicts):
    {"device": ..., "driver": ..., "date": ..., "figures": {...},
     "sources": {path: sha256},        what the figures were measured with (a change fails CI)
     "graded_by": {path: sha256}}      what graded them (a change warns; judge.record explains both)

    record.save("ch01.sgemm", {"tflops": ...}, notebook="chapters/ch01_cp_async.ipynb")
        writes only in the record run (JUDGE_RECORD=1, `python -m judge.record.hopper_run`);
        anywhere else it is a no-op, so a learner's own GPU cannot overwrite the course's figures.
    record.load("ch01.sgemm") -> the section, or None
    record.stale() -> what a figure was measured with and changed since (a CPU test fails on any)
    record.regrade() -> what graded a figure and changed since (a warning naming the sections)
    python -m judge  -> prints what is here, the whole record, and both kinds of change

A source's hash: the file's bytes; for a notebook, its code cells' sources only (prose and outputs do not count).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from judge import config
from judge.record import reading
from judge.record.reading import (  # noqa: F401 - re-exported
    _provenance, _rel, device_line, figures, kind_of, load, read, regrade, regrade_note, source_hash, stale)


#: the judge modules a figure is measured with, when the process that saves it imported them
MEASURED_WITH = {"judge.gpu.timing": "judge/gpu/timing.py", "judge.gpu.launch": "judge/gpu/launch.py",
                 "judge.gpu.power": "judge/gpu/power.py"}


def _graded_by_imported() -> set[Path]:
    """The modules of the CPU model and the grading wing this process imported (what graded its figures)."""
    out = set()
    for name, m in list(sys.modules.items()):
        f = getattr(m, "__file__", None)
        if f and name.startswith(("judge.model", "judge.grading")) and config.ROOT in Path(f).resolve().parents:
            out.add(Path(f).resolve())
    return out

_mark: set[Path] = set()          # sources already attributed to an earlier section of this process


def _sources_since_last_save() -> set[Path]:
    """Kernels and headers built since the previous save, and every module of the course imported
    from chapters/ or exercises/ (a chapter's run.py, an exercise's check.py)."""
    from judge.gpu import build
    new = {p for p in build.SOURCES_READ if config.ROOT in p.parents} - _mark
    mods = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        where = Path(f).resolve().parents if f else ()
        if config.ROOT in where and (config.CHAPTERS_DIR in where or config.EXERCISES_DIR in where):
            mods.add(Path(f).resolve())
    return new | mods


def save(section: str, figures: dict, *, sources: list | None = None,  # noqa: F811 - figures: what to save
         notebook: str | None = None, compile_only: str | None = None) -> bool:
    """Record figures measured here. Only in the record run (JUDGE_RECORD=1).

    The section lists exactly what it ran, in two kinds (judge.record): what the figures were measured
    with (the sources given, the kernels and headers built since the previous save in this process, the
    course modules imported from chapters/ and exercises/, the notebook, and MEASURED_WITH when imported)
    and what graded them (the judge.model and judge.grading modules imported, and any given source that
    kind_of() calls graded). It stores the NVRTC version that compiled them.
    compile_only="sm_100a": figures that need no GPU of that target (compile results, SASS features),
    recorded under that target rather than the GPU of this machine.
    """
    if not config.recording():
        return False
    from judge.gpu import build
    from judge import gpu
    i = gpu.info()
    if i is None and compile_only is None:
        raise RuntimeError("record.save needs a GPU: figures are only recorded where they were measured")
    paths = set(Path(p).resolve() for p in (sources or []))
    paths |= _sources_since_last_save()
    paths |= {(config.ROOT / f).resolve() for m, f in MEASURED_WITH.items()
              if m in sys.modules and (config.ROOT / f).exists()}
    paths |= _graded_by_imported()
    if notebook:
        paths.add((config.ROOT / notebook).resolve())
    _mark.update(p for p in build.SOURCES_READ)
    if compile_only:
        where = {"device": f"compile-only ({compile_only})", "cc": compile_only, "sms": 0,
                 "driver": i.driver if i else "none"}
    else:
        where = {"device": i.name, "cc": i.sm, "sms": i.sms, "driver": i.driver}
    data = read()
    data.setdefault("sections", {})[section] = {
        **where, "nvrtc": build.nvrtc_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "sources": {_rel(p): source_hash(p) for p in sorted(paths) if kind_of(_rel(p)) == "measured"},
        "graded_by": {_rel(p): source_hash(p) for p in sorted(paths) if kind_of(_rel(p)) == "graded"},
        "figures": figures,
    }
    path = reading.RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True, default=float)
    os.replace(tmp, path)
    return True


def unrecorded(paths) -> list[str]:
    """Which of these sources no recorded section ran."""
    seen = set()
    for sec in read().get("sections", {}).values():
        seen |= {rel for rel, _ in _provenance(sec)}
    return [_rel(p) for p in paths if _rel(p) not in seen]


def main() -> int:
    """python -m judge: what the H200 measured, section by section, and whether it is current."""
    data = read().get("sections", {})
    if not data:
        print("Nothing recorded yet: run python -m judge.record.hopper_run on an H100/H200.")
        return 0
    print(f"Recorded on {device_line()}\n")
    for name in sorted(data):
        figs = data[name]["figures"]
        flat = {k: v for k, v in figs.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in list(flat.items())[:6])
        print(f"  {name:<34} {data[name]['date']}  {shown}")
    st = stale()
    print("\nWhat the figures were measured with is current." if not st else
          "\nMeasured with, changed since recorded (CI fails until re-recorded):\n  " + "\n  ".join(st))
    note = regrade_note()
    print(f"\nWarning: {note}" if note else "What graded them is current.")
    return 0



# ------------------------------------------------------------------------------------------ the README table
# Each chapter declares its recorded sections and its README rows in chapters/chNN_name/figures.toml;
# record/figures.toml declares the record run's own (device ceilings, exercises). A row is a table
#     [[readme]]
#     kind = "format"                    # one of ROW_KINDS below
#     what = "SGEMM, 3-stage cp.async"   # left column (a template too)
#     figure = "{a[TFLOPS]:.1f} / ..."   # right column: a str.format template
#     [readme.pick]                      # names for rows picked out of a section's list (see _pick)
#     a = { section = "ch01.baselines", where = { kernel = "...", n = 4096 } }
# Templates see `f` (every section's figures: {f[device.ceilings][copy_gbps]:.0f}) and the picks.

class _Look(dict):
    """A mapping for templates: {x[4096]} finds the key "4096" too (str.format passes digits as int)."""

    def __getitem__(self, key):
        if not dict.__contains__(self, key) and dict.__contains__(self, str(key)):
            key = str(key)
        return _look(dict.__getitem__(self, key))


def _look(v):
    return _Look(v) if isinstance(v, dict) and not isinstance(v, _Look) else v


def _fill(template, names: dict):
    return template.format(**names) if isinstance(template, str) else template


def _matches(row: dict, spec: dict, names: dict) -> bool:
    where = {k: _fill(v, names) for k, v in spec.get("where", {}).items()}
    return (all(row.get(k) == v for k, v in where.items())
            and all(str(row.get(k, "")).startswith(_fill(v, names)) for k, v in spec.get("prefix", {}).items())
            and not any(str(row.get(k, "")).startswith(_fill(v, names)) for k, v in spec.get("not_prefix", {}).items())
            and not any(row.get(k) == _fill(v, names) for k, v in spec.get("not", {}).items()))


def _rows(f, spec: dict, names: dict) -> list[dict]:
    """The rows of f[section][list] (default "rows") that match where / prefix / not_prefix / not."""
    return [r for r in f[spec["section"]][spec.get("list", "rows")] if _matches(r, spec, names)]


def _pick(f, spec: dict, names: dict) -> dict:
    """One row: the match with the largest `best` field, the smallest `worst` one, or the `nth` match
    (default the first)."""
    rows = _rows(f, spec, names)
    if not rows:
        raise KeyError(f"no row of {spec['section']} matches {spec}")
    if "best" in spec:
        return max(rows, key=lambda r: r[spec["best"]])
    if "worst" in spec:
        return min(rows, key=lambda r: r[spec["worst"]])
    return rows[spec.get("nth", 0)]


def _names(f, row: dict) -> dict:
    names = {"f": _look(f)}
    for name, spec in row.get("pick", {}).items():      # in order: a later pick may name an earlier one
        names[name] = _look(_pick(f, spec, names))
    return names


def _row_format(f, row):
    """kind = "format": one line, `what` and `figure` filled from the sections and the picks."""
    names = _names(f, row)
    return [(_fill(row["what"], names), _fill(row["figure"], names))]


def _row_list(f, row):
    """kind = "list": `figure` is every row of `rows` (a pick spec) through `item`, joined by `sep`."""
    names = _names(f, row)
    items = [row["item"].format(r=_look(r), **names) for r in _rows(f, row["rows"], names)]
    return [(_fill(row["what"], names), _fill(row["figure"], {**names, "items": row.get("sep", ", ").join(items)}))]


def _row_exercises(f, row):
    """kind = "exercises": one line per recorded exercise section: the reference's verdict, tier and
    fraction of its ceiling, and whether every fixture got its declared verdict."""
    out = []
    for name in sorted(n for n in f if n.startswith("exercise.")):
        e, vs = name.split(".", 1)[1], f[name]["verdicts"]
        v = vs["solution"]
        n = sum(1 for k in vs if k != "solution")
        ok = all(x["verdict"] == x.get("expected", "PASS") for x in vs.values())
        m = v.get("measurements") or {}
        fig = f", {m['fraction']:.2f} of {m['ceiling']}" if m.get("fraction") else ""
        out.append((f"exercise {e}: reference / {n} fixtures",
                    f"{v['verdict']}" + (f" ({v['tier']})" if v.get("tier") else "") + fig
                    + f" / {'every verdict as declared' if ok else 'NOT as declared'}"))
    return out


#: the kinds of README row a figures.toml may declare: kind -> formatter(figures, row) -> [(what, figure)]
ROW_KINDS = {"format": _row_format, "list": _row_list, "exercises": _row_exercises}
FIGURES_FILE = "figures.toml"
#: what a figures.toml may hold: its place in README's table, the sections it records, its README rows, and
#: (a chapter's) the module that lists and launches its kernels for the counters pass (judge/record/counters.py)
DECLARED_KEYS = ("order", "sections", "readme", "counters")


def declarations() -> list[tuple[Path, dict]]:
    """(file, its table) for every figures.toml: each chapter's in order, then the record run's own."""
    import tomllib
    files = ([config.RECORD_DIR / FIGURES_FILE] + sorted(config.CHAPTERS_DIR.glob(f"*/{FIGURES_FILE}"))
             + [config.EXERCISES_DIR / FIGURES_FILE])
    out = []
    for path in files:
        if path.exists():
            decl = tomllib.loads(path.read_text())
            unknown = set(decl) - set(DECLARED_KEYS)
            if unknown:
                raise ValueError(f"{path}: unknown key(s) {sorted(unknown)}; allowed: {', '.join(DECLARED_KEYS)}")
            out.append((path, decl))
    return sorted(out, key=lambda d: d[1].get("order", 0))


def figures_table() -> str:
    """The README's table of headline figures, built from the record and what each figures.toml declares
    (python -m judge --readme writes it)."""
    f = {name: s["figures"] for name, s in read()["sections"].items()}
    lines = ["| what | figure |", "| --- | --- |"]
    for path, decl in declarations():
        for row in decl.get("readme", []):
            kind = row.get("kind", "format")
            if kind not in ROW_KINDS:
                raise ValueError(f"{path}: README row kind {kind!r}; one of {', '.join(ROW_KINDS)}")
            lines += [f"| {what} | {fig} |" for what, fig in ROW_KINDS[kind](f, row)]
    return "\n".join(lines)


README_BEGIN, README_END = "<!-- figures: begin (python -m judge --readme) -->", "<!-- figures: end -->"


def update_readme() -> bool:
    """Rewrite the README's figures table from the record. Returns True if it changed."""
    path = config.ROOT / "README.md"
    text = path.read_text()
    a, b = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    new = text[:a] + "\n" + figures_table() + "\n" + text[b:]
    path.write_text(new)
    return new != text

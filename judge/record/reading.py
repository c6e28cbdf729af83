"""Reading the Hopper record (record/hopper.json): what ran on the H200, on any machine.

    from judge import record           # these names, re-exported by the package
    record.figures("ch01.sgemm")     # the figures of one section, or None if it never ran
    record.device_line()             # "NVIDIA H200 (driver CUDA 13.0) on 2026-11-30 ..."
    record.stale()                   # what a figure was measured with changed: CI fails until re-recorded
    record.regrade()                 # what graded a figure changed: a warning naming the sections to re-record

Provenance in two kinds, per section:
  "sources"    what the figures were MEASURED WITH: kernels (.cu), headers (.cuh), the chapter's host
               modules and notebooks, the exercise's own files (solution, fixtures, exercise.toml, and
               check.py, whose launch() and work() make the timed figure), the timing protocol
               (judge/gpu/timing.py) and the launch layer (judge/gpu/launch.py). A change means the figure
               may no longer be what this code measures: tests/record/test_record.py fails until the record run.
  "graded_by"  what GRADED them: the CPU model (judge/model/**) and the grading wing (judge/grading/**:
               the flows, compare, the processes). A change cannot move a measured figure, only a verdict,
               and the CPU tests grade every fixture again on every run: it warns, naming the sections
               whose verdicts the next record run must confirm.
A record written before the two kinds existed keeps everything under "sources": each path is sorted by
kind_of() when read, so a change to the model warns there too.
Writing it is judge.record.write's job, in the record run only.
A source's hash: the file's bytes; for a notebook, its code cells' sources only: the code is what
measured a figure, so an erratum in a notebook's prose (or its outputs) does not wait for a GPU.
A record written before that stored a notebook's hash over all its cells; that hash still counts as
current until the notebook changes, and the next record run stores the code-only one.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from judge import config

RECORD = config.RECORD_DIR / "hopper.json"


def _cells_hash(path: Path, kinds: tuple[str, ...] | None) -> str:
    """sha256 over the sources of a notebook's cells of these kinds (None: every cell)."""
    nb = json.loads(Path(path).read_text())
    text = "\n\0".join("".join(c.get("source", "")) for c in nb.get("cells", [])
                        if kinds is None or c.get("cell_type") in kinds)
    return hashlib.sha256(text.encode()).hexdigest()


def source_hash(path: Path) -> str:
    """What the record stores for a source: its bytes' sha256; a notebook's code cells' (see above)."""
    path = Path(path)
    if path.suffix == ".ipynb":
        return _cells_hash(path, ("code",))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _current(path: Path, stored: str) -> bool:
    """Does `stored` still describe the file? A notebook may carry the older all-cells hash."""
    if source_hash(path) == stored:
        return True
    return Path(path).suffix == ".ipynb" and _cells_hash(path, None) == stored


def _rel(path: Path) -> str:
    return str(Path(path).resolve().relative_to(config.ROOT))


#: folders whose files grade a figure rather than measure it (see the module docstring)
GRADED_BY = ("judge/model/", "judge/grading/")


def kind_of(rel: str) -> str:
    """'graded' for the CPU model and the grading wing, 'measured' for everything else a section ran."""
    return "graded" if str(rel).replace("\\", "/").startswith(GRADED_BY) else "measured"


def _provenance(sec: dict):
    """(path, hash) pairs of a section, both kinds, whichever key a record of any age stored them under."""
    yield from sec.get("sources", {}).items()
    yield from sec.get("graded_by", {}).items()


def _changed(kind: str) -> list[tuple[str, str, str]]:
    """(section, path, what happened) for each recorded file of this kind that changed or vanished."""
    out = []
    for name, sec in read().get("sections", {}).items():
        for rel, h in _provenance(sec):
            if kind_of(rel) != kind:
                continue
            p = config.ROOT / rel
            if not p.exists():
                out.append((name, rel, "no longer exists"))
            elif not _current(p, h):
                out.append((name, rel, f"changed since it ran on {sec.get('device')} ({sec.get('date')})"))
    return out


def stale() -> list[str]:
    """What a figure was measured with and has changed (or vanished) since: CI fails on any."""
    return [f"{name}: {rel} {what}" for name, rel, what in _changed("measured")]


def regrade() -> dict[str, list[str]]:
    """What graded a recorded verdict and has changed since: section -> the changed files. A warning,
    not a failure: the CPU tests grade every fixture again meanwhile; the next record run confirms them."""
    out: dict[str, list[str]] = {}
    for name, rel, _ in _changed("graded"):
        out.setdefault(name, []).append(rel)
    return out


def regrade_note() -> str:
    """One paragraph naming the sections to re-record because what graded them changed ('' if none)."""
    r = regrade()
    if not r:
        return ""
    files = sorted({f for fs in r.values() for f in fs})
    return (f"What graded {len(r)} recorded section(s) changed since the H200 ran them ({', '.join(files[:6])}"
            f"{', ...' if len(files) > 6 else ''}): re-record {', '.join(sorted(r))} "
            f"(python -m judge.record.hopper_run); the CPU tests guard their verdicts meanwhile.")


def read() -> dict:
    if not RECORD.exists():
        return {"sections": {}}
    return json.loads(RECORD.read_text())


def load(section: str) -> dict | None:
    return read().get("sections", {}).get(section)


def figures(section: str) -> dict | None:
    s = load(section)
    return s["figures"] if s else None


def device_line() -> str:
    """'NVIDIA H200, 2026-11-29' for the most recent recorded section, or ''."""
    secs = read().get("sections", {}).values()
    if not secs:
        return ""
    last = max(secs, key=lambda s: s.get("date", ""))
    return f"{last.get('device', '?')} (driver CUDA {last.get('driver', '?')}) on {last.get('date', '?')}"



"""Reading the Hopper record (record/hopper.json): what ran on the H200, on any machine.

    from judge import record
    record.figures("ch01.sgemm")     # the figures of one section, or None if it never ran
    record.device_line()             # "NVIDIA H200 (driver CUDA 13.0) on 2026-11-30 ..."

Writing it is judge.record.write's job, in the record run only.
A source's hash: the file's bytes; for a notebook, its cells' sources only (outputs do not count).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from judge import config

RECORD = config.RECORD_DIR / "hopper.json"


def source_hash(path: Path) -> str:
    path = Path(path)
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text())
        text = "\n\0".join("".join(c.get("source", "")) for c in nb.get("cells", []))
        return hashlib.sha256(text.encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rel(path: Path) -> str:
    return str(Path(path).resolve().relative_to(config.ROOT))


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


# Writing (the record run only) and staleness live in judge.record.write; `record.save(...)` reads as one API.
from judge.record.write import (  # noqa: E402,F401 - re-exported
    MEASURING, README_BEGIN, README_END, figures_table, main, save, stale, unrecorded, update_readme)

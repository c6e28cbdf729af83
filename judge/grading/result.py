"""Verdicts and results: what every check returns, on any machine.

    from judge.grading.result import Verdict, Result
    r = Result(Verdict.WRONG, "tile 3 read before its copy landed", details=[...])
    r.verdict, r.tier, r.message, r.passed

Verdicts: PASS (with a tier for timed exercises), WRONG, TOO SLOW, MISSING FEATURE,
HANG, CRASH, COMPILE ERROR, SKIP (needs a GPU; says what was still checked here).
This module imports nothing else of the judge, so every other module may import it.
"""
from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path


class Verdict(str, Enum):
    PASS = "PASS"
    WRONG = "WRONG"
    TOO_SLOW = "TOO SLOW"
    MISSING_FEATURE = "MISSING FEATURE"
    HANG = "HANG"
    CRASH = "CRASH"
    COMPILE_ERROR = "COMPILE ERROR"
    SKIP = "SKIP"

    def __str__(self):
        return self.value


TIERS = ("bronze", "silver", "gold")


@dataclass
class Result:
    verdict: Verdict
    message: str = ""
    tier: str | None = None                              # bronze / silver / gold on a timed PASS
    details: list[str] = field(default_factory=list)     # further lines worth reading
    unchecked: list[str] = field(default_factory=list)   # what this verdict leaves unchecked (no GPU here), shown after details
    checked: list[str] = field(default_factory=list)     # what was checked (shown on SKIP too)
    measurements: dict = field(default_factory=dict)     # figures (times, fractions of ceilings)
    figures: list[str] = field(default_factory=list)     # PNG paths
    source: str = ""        # where the verdict came from: "H200 timed", "CPU model only", "simulated for sm_100a"
    exercise: str = ""
    file: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == Verdict.PASS

    def headline(self) -> str:
        tier = f" ({self.tier})" if self.tier else ""
        src = f" [{self.source}]" if self.source else ""
        return f"{self.verdict}{tier}{src}: {self.message}" if self.message else f"{self.verdict}{tier}{src}"

    def __str__(self):
        lines = [f"[{self.exercise}] {self.headline()}"]
        lines += [f"  {d}" for d in self.details + self.unchecked]
        if self.checked:
            lines.append("  checked: " + "; ".join(self.checked))
        lines += [f"  figure: {f}" for f in self.figures]
        return "\n".join(lines)

    def __repr__(self):
        """What a notebook stores as the Result's plain text: the verdict and its lines, each figure by its file
        name (its path is a temporary folder of the machine that graded it)."""
        figs = ", ".join(os.path.basename(f) for f in self.figures)
        return (f"Result([{self.exercise}] {self.headline()}" + "".join(f"; {d}" for d in self.details + self.unchecked)
                + (f"; figures: {figs}" if figs else "") + ")")

    def _repr_html_(self):
        color = {"PASS": "#1a7f37", "SKIP": "#6e7781"}.get(self.verdict.value, "#cf222e")
        tier = f" &middot; {self.tier}" if self.tier else ""
        tier += f" &middot; {html.escape(self.source)}" if self.source else ""
        rows = "".join(f"<li>{html.escape(d)}</li>" for d in self.details + self.unchecked)
        chk = ("<div style='color:#57606a'>checked: " + html.escape("; ".join(self.checked))
               + "</div>") if self.checked else ""
        imgs = ""
        for f in self.figures:
            try:
                data = base64.b64encode(Path(f).read_bytes()).decode()
                imgs += f"<img src='data:image/png;base64,{data}' style='max-width:100%'/>"
            except OSError:
                pass
        return (f"<div style='border-left:4px solid {color};padding:4px 10px'>"
                f"<b style='color:{color}'>{self.verdict.value}{tier}</b> "
                f"<code>{html.escape(self.exercise)}</code>: {html.escape(self.message)}"
                f"<ul>{rows}</ul>{chk}{imgs}</div>")

    def to_json(self) -> str:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return json.dumps(d, default=float)

    @classmethod
    def from_json(cls, text: str) -> Result:
        d = json.loads(text)
        d["verdict"] = Verdict(d["verdict"])
        d = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}   # a record from another version
        return cls(**d)


def tier_for(value: float, tiers: dict) -> str | None:
    """The best tier whose threshold `value` reaches (tiers: {"bronze": 0.4, ...}), else None."""
    best = None
    for t in TIERS:
        if t in tiers and value >= float(tiers[t]):
            best = t
    return best


class Stop(Exception):
    """Raised inside a check to end it with this Result (the worker turns it into the verdict)."""

    def __init__(self, result: Result):
        super().__init__(result.message)
        self.result = result



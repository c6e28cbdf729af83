"""The class report: REPORT/grades.csv and a one-page REPORT/index.html gradebook.

    from judge.grading import gradebook
    gradebook.write_report(out, files, records, version)    # called by judge.grading.classroom.grade_class

grades.csv: one row per learner and exercise: learner, exercise, verdict, tier, figure, seconds, where
(host/worker that graded it), source (where the verdict came from: Python check, CPU model only, H200
timed, simulated for sm_100a), judge_version, file, key (the result's name in REPORT/results/).

index.html: learners x exercises, each cell coloured by verdict; a click on a cell opens the full
message (headline, details, what was checked, where it ran); one summary row per exercise. One file,
no network: its style, script and data are inside it. Both files are written whole, then renamed.
"""
from __future__ import annotations

import csv
import html
import io
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from judge.grading.result import Verdict

COLUMNS = ["learner", "exercise", "verdict", "tier", "figure", "seconds", "where", "source", "judge_version",
           "file", "key"]
COLOURS = {"PASS": "#2da44e", "WRONG": "#cf222e", "TOO SLOW": "#bf8700", "MISSING FEATURE": "#8250df",
           "HANG": "#9a6700", "CRASH": "#82071e", "COMPILE ERROR": "#0969da", "SKIP": "#6e7781",
           "MISSING": "#d0d7de"}
ORDER = [v.value for v in Verdict] + ["MISSING"]


def rows(files, records: dict) -> list[dict]:
    """One row per file of the class, in learner then exercise order; MISSING where no result exists."""
    out = []
    for s in sorted(files, key=lambda s: (s.learner, s.exercise)):
        rec = records.get(s.key) or {}
        out.append({"learner": s.learner, "exercise": s.exercise, "verdict": rec.get("verdict", "MISSING"),
                    "tier": rec.get("tier") or "", "figure": rec.get("figure", ""),
                    "seconds": rec.get("seconds", ""), "where": rec.get("where", ""),
                    "source": rec.get("source", ""), "judge_version": rec.get("judge_version", ""),
                    "file": s.path.name, "key": s.key, "_result": rec.get("result") or {}})
    return out


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file or nothing: a temp file in the same folder, flushed, then renamed over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_report(out, files, records: dict, version: str) -> None:
    out = Path(out)
    table = rows(files, records)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(table)
    write_atomic(out / "grades.csv", buf.getvalue())
    write_atomic(out / "index.html", page(table, version))


def message_of(row: dict) -> str:
    """The full message of one cell, as `course check` prints it, plus where it ran."""
    r = row["_result"]
    if not r:
        return "not graded yet: run grade-class again to grade what is missing"
    tier = f" ({r['tier']})" if r.get("tier") else ""
    lines = [f"[{row['exercise']}] {r.get('verdict')}{tier}: {r.get('message', '')}"]
    lines += [f"  {d}" for d in r.get("details", [])]
    if r.get("checked"):
        lines.append("  checked: " + "; ".join(r["checked"]))
    lines.append(f"verdict from: {row['source']}; graded on {row['where']} in {row['seconds']} s; "
                 f"judge {row['judge_version']}; file {row['file']} (key {row['key']})")
    return "\n".join(lines)


def page(table: list[dict], version: str) -> str:
    learners = sorted({r["learner"] for r in table})
    exercises = sorted({r["exercise"] for r in table})
    cell = {(r["learner"], r["exercise"]): r for r in table}
    messages = {f"{r['learner']}\t{r['exercise']}": message_of(r) for r in table}
    e = html.escape
    head = "".join(f"<th class='ex' scope='col'>{e(x)}</th>" for x in exercises)
    body = []
    for who in learners:
        tds = []
        for x in exercises:
            r = cell.get((who, x))
            if r is None:
                tds.append("<td class='none' title='no file'></td>")
                continue
            v = r["verdict"]
            label = v + (f" · {r['tier']}" if r["tier"] else "")
            tds.append(f"<td class='cell' tabindex='0' style='background:{COLOURS.get(v, '#999')}' "
                       f"data-learner='{e(who)}' data-exercise='{e(x)}' data-verdict='{e(v)}' "
                       f"title='{e(who)} / {e(x)}: {e(label)}'>{e(label)}</td>")
        body.append(f"<tr><th class='learner' scope='row'>{e(who)}</th>{''.join(tds)}</tr>")
    summary = []
    for x in exercises:
        c = Counter(r["verdict"] for r in table if r["exercise"] == x)
        parts = " ".join(f"<span class='chip' style='background:{COLOURS.get(v, '#999')}'>{e(v)} {c[v]}</span>"
                         for v in ORDER if c[v])
        summary.append(f"<td class='summary' data-exercise='{e(x)}'>{parts}</td>")
    totals = Counter(r["verdict"] for r in table)
    legend = " ".join(f"<span class='chip' style='background:{COLOURS[v]}'>{e(v)} {totals[v]}</span>"
                      for v in ORDER if totals[v])
    data = json.dumps(messages).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Gradebook: {len(learners)} learners x {len(exercises)} exercises</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 16px; color: #1f2328; }}
table {{ border-collapse: collapse; }}
th, td {{ border: 1px solid #d0d7de; padding: 3px 6px; white-space: nowrap; }}
th.ex {{ writing-mode: vertical-rl; transform: rotate(180deg); font-weight: 600; }}
td.cell {{ color: #fff; cursor: pointer; font-size: 12px; text-align: center; }}
td.cell:focus, td.cell:hover {{ outline: 3px solid #1f2328; }}
td.summary {{ vertical-align: top; white-space: normal; min-width: 90px; }}
.chip {{ display: inline-block; color: #fff; border-radius: 8px; padding: 0 6px; margin: 1px; font-size: 11px; }}
#message {{ position: fixed; right: 16px; top: 16px; width: min(640px, 45vw); max-height: 85vh; overflow: auto;
  background: #fff; border: 2px solid #1f2328; padding: 10px; display: none; box-shadow: 0 4px 16px #0004; }}
#message pre {{ white-space: pre-wrap; font-size: 12px; }}
</style></head><body>
<h1>Gradebook</h1>
<p>{len(learners)} learners, {len(exercises)} exercises, {len(table)} files; judge {e(version)}.
Click a cell for its full message. {legend}</p>
<table id="grades">
<thead><tr><th>learner</th>{head}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody>
<tfoot><tr><th scope="row">summary</th>{''.join(summary)}</tr></tfoot>
</table>
<div id="message" role="dialog" aria-live="polite"><button id="close" type="button">close</button>
<h2 id="message-title"></h2><pre id="message-text"></pre></div>
<script type="application/json" id="messages">{data}</script>
<script>
const messages = JSON.parse(document.getElementById("messages").textContent);
const box = document.getElementById("message");
function openCell(td) {{
  const k = td.dataset.learner + "\\t" + td.dataset.exercise;
  document.getElementById("message-title").textContent = td.dataset.learner + " / " + td.dataset.exercise;
  document.getElementById("message-text").textContent = messages[k] || "";
  box.style.display = "block";
}}
for (const td of document.querySelectorAll("td.cell")) {{
  td.addEventListener("click", () => openCell(td));
  td.addEventListener("keydown", ev => {{ if (ev.key === "Enter") openCell(td); }});
}}
document.getElementById("close").addEventListener("click", () => {{ box.style.display = "none"; }});
</script>
</body></html>
"""

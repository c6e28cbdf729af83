"""Profiler counters behind the chapters' "why": Nsight Compute (ncu) on the kernels each chapter names for
it (chapter 1's SGEMMs, chapter 3's histograms, DSMEM probe and multicast, chapter 4's ladder rungs and
variants, chapter 5's FP8 GEMM, cuBLAS beside them). Needs an H100/H200 with `ncu` on the PATH; the record run
calls it as its part "counters".

    python -m judge.record.hopper_run --part counters --out $OUT     # the whole pass (about 5 minutes)
    python -m judge.record.counters --list                           # the kernels it profiles (any machine)
    python -m judge.record.counters --only ch04 --out DIR            # a subset, no record written
    python -m chapters.ch04_wgmma.counters --run ch04.tma_ring       # a child: one checked launch
    python -m judge.record.hopper_run --part counters --only ch04 --out $OUT   # in parts: counters.json
    python -m judge.record.hopper_run --part counters --only ch01,ch03 --out $OUT  # keeps both parts' rows

What runs is the chapters' own code, never imported here. A chapter declares in its figures.toml

    [counters]
    module = "chapters.ch04_wgmma.counters"
    what = "every rung and variant of the ladder at 4096³, ..."     # said in --list and in the section

and that module (its command line is chapter_main below) lists the chapter's kernels (`--list`: id, chapter,
label, kernel name for ncu's -k, size, sources, and "ledger" where a ledger is wanted) and makes the one
checked launch of each (`--run ID`), printing its verdict through say().

How. A separate profiling pass: profiling replays each kernel once per metric pass and perturbs timing,
so no figure here is a time to compare with the timing runs. Each kernel runs in its own child process
under ncu (one failure or hang costs one row):

    ncu --target-processes all -k regex:^NAME$ -c 1 --clock-control none --csv --page raw
        --print-units base --log-file LOG --section WarpStateStats --section Occupancy
        --section LaunchStats --metrics M1,M2,... python -m chapters.chNN_name.counters --run ID

The child makes fresh random inputs at the chapter's size, poisons the output, launches the kernel ONCE (that
launch is the one ncu profiles), then checks the output against a float64 (or exact integer) reference; the
row says whether that check passed. Metrics that this ncu does not know (checked against `ncu --query-metrics`
first) or cannot read on this GPU are "n/a" in the row; they never cost the row. If ncu refuses a metric
anyway, the kernel is profiled again without the metrics its message names (or, if it names none, with only
what was seen working on the H200: VERIFIED, VERIFIED_SECTIONS), and the kernels after it use what worked.

Each row: id, chapter, label, kernel, ok/check (the output check), seconds, summary (the figures the
chapters quote: pipe utilisation, achieved occupancy, blocks per SM, the top warp-stall reasons, L2 and
DRAM bytes, shared-memory wavefronts and bank conflicts, DSMEM traffic) and metrics (every metric ncu
returned, {"value", "unit"}). The kernels listed with "ledger" also carry a "ledger": their child run once
more with ncu's SourceCounters section, and the report's source page read per SASS instruction: warp-state
samples, their share by kind of instruction ("by family") and the LEDGER_TOP instructions with the most
(ledger_one). The rows go into the record as sections "<chapter>.counters" (ch01.counters, ...), and into
OUT/counters.json; the raw ncu logs into OUT/ncu_logs/ID.csv.
"""
from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from judge import config

#: the key of a chapter's figures.toml that names its module for this pass ([counters] module = "chapters....")
DECLARED_BY = "counters"
LEDGER_TOP = 40                  # instructions kept per ledger, by samples
CHILD_TIMEOUT = 120              # seconds per kernel, ncu included
SECTIONS = ("WarpStateStats", "Occupancy", "LaunchStats")
VERIFIED_SECTIONS = ("WarpStateStats", "Occupancy")     # seen working on the H200 (FACTS.md)

#: Seen readable with ncu 2025.3.1 on the H200 (FACTS.md, 2026-12-01): the fallback metric list.
VERIFIED = (
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "lts__t_bytes.sum",
    "dram__bytes.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum",
)
#: Hopper's warp-stall reasons (gmma: waiting on wgmma; the rest as on earlier GPUs)
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss", "lg_throttle",
                 "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction",
                 "not_selected", "selected", "short_scoreboard", "sleeping", "tex_throttle", "wait")
#: Asked for in addition (names from the Nsight Compute metrics reference and its shipped sections);
#: each one this ncu does not list is dropped before the run and reads "n/a".
WANTED = VERIFIED + (
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__warps_active.avg.per_cycle_active",
    "sm__cycles_elapsed.avg.per_second",
    "sm__cycles_active.avg",
    "sm__cycles_elapsed.avg",
    "gpu__time_duration.sum",
    "lts__t_sector_hit_rate.pct",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    # distributed shared memory (chapter 3): requests and sectors through the LSU, instructions
    "l1tex__t_requests_pipe_lsu_mem_dshared_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_dshared_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_dshared_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_dshared_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_dshared_op_red.sum",
    "l1tex__t_sectors_pipe_lsu_mem_dshared_op_red.sum",
    "l1tex__t_requests_pipe_lsu_mem_dshared_op_atom.sum",
    "smsp__sass_inst_executed_op_dshared.sum",
    "l1tex__t_sectors_pipe_lsu_mem_dshared_op_atom.sum",
    "l1tex__t_bytes_pipe_lsu_mem_dshared.sum",
    "l1tex__t_bytes_pipe_lsu_mem_dshared_op_ld.sum",
    "l1tex__t_bytes_pipe_lsu_mem_dshared_op_st.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    # warp stalls, asked by name too in case the WarpStateStats section of this ncu names them otherwise
    *(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS),
)
#: The summary's keys: (key, unit, metric). Pipe utilisation is % of peak over the SMs' active cycles.
SUMMARY = (
    ("tensor pipe %", "%", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    ("gmma instructions", "inst", "sm__inst_executed_pipe_tensor_op_gmma.sum"),
    ("FMA pipe %", "%", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
    ("ALU pipe %", "%", "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"),
    ("achieved occupancy %", "%", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("theoretical occupancy %", "%", "sm__maximum_warps_per_active_cycle_pct"),
    ("registers per thread", "register", "launch__registers_per_thread"),
    ("L2 bytes", "byte", "lts__t_bytes.sum"),
    ("L2 hit %", "%", "lts__t_sector_hit_rate.pct"),
    ("DRAM bytes", "byte", "dram__bytes.sum"),
    ("TMA load bytes", "byte", "l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum"),
    ("smem wavefronts", "wavefront", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"),
    ("smem bank conflicts", "conflict", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"),
    ("smem bank conflicts (wgmma reads)", "conflict", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum"),
    ("DSMEM load sectors", "sector", "l1tex__t_sectors_pipe_lsu_mem_dshared_op_ld.sum"),
    ("DSMEM store sectors", "sector", "l1tex__t_sectors_pipe_lsu_mem_dshared_op_st.sum"),
    ("DSMEM red sectors", "sector", "l1tex__t_sectors_pipe_lsu_mem_dshared_op_red.sum"),
    ("DSMEM atom sectors", "sector", "l1tex__t_sectors_pipe_lsu_mem_dshared_op_atom.sum"),
    ("DSMEM bytes", "byte", "l1tex__t_bytes_pipe_lsu_mem_dshared.sum"),
    ("DSMEM instructions", "inst", "smsp__sass_inst_executed_op_dshared.sum"),
    ("issue slots busy %", "%", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("SM clock Hz (while profiled)", "Hz", "sm__cycles_elapsed.avg.per_second"),
    ("duration ns (profiled, not a timing)", "ns", "gpu__time_duration.sum"),
)
OCCUPANCY_LIMITS = ("launch__occupancy_limit_blocks", "launch__occupancy_limit_registers",
                    "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps")
#: Metric families that give warp stalls by reason, best first; the summary uses the first one present.
STALL_FAMILIES = (r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$",
                  r"^smsp__average_warp_latency_issue_stalled_(\w+?)(?:\.ratio)?$",
                  r"^smsp__warp_issue_stalled_(\w+?)_per_warp_active\.pct$",
                  r"^smsp__pcsamp_warps_issue_stalled_(\w+)$")
NA = "n/a"


# ----------------------------------------------------------------------------- the kernels
def chapter_modules() -> dict[str, str]:
    """module -> what it profiles, for each chapter that declares this pass in its figures.toml
    ([counters] module = ..., what = ...), in the chapters' order. The engine never imports the modules: it
    starts them (python -m MODULE --list / --run ID)."""
    from judge.record import write
    out = {}
    for path, decl in write.declarations():
        if DECLARED_BY not in decl:
            continue
        module, what = decl[DECLARED_BY].get("module"), decl[DECLARED_BY].get("what")
        if not (isinstance(module, str) and re.fullmatch(r"chapters\.ch\d\d_\w+\.\w+", module)):
            raise ValueError(f"{path}: [{DECLARED_BY}] module = {module!r} is not a chapter's module (chapters.chNN_name.x)")
        if not what:
            raise ValueError(f"{path}: [{DECLARED_BY}] needs what = \"...\": what the pass profiles in this chapter")
        out[module] = what
    return out


@functools.cache
def _listed(module: str) -> tuple[dict, ...]:
    """The kernels a chapter's module lists: `python -m MODULE --list` in a child, one JSON object a line."""
    p = subprocess.run([sys.executable, "-m", module, "--list"], capture_output=True, text=True, cwd=config.ROOT,
                       env=_child_env(), timeout=CHILD_TIMEOUT)
    if p.returncode:
        raise RuntimeError(f"python -m {module} --list failed ({p.returncode}): {p.stderr[-2000:]}")
    return tuple(json.loads(line) for line in p.stdout.splitlines() if line.strip())


def kernels() -> list[dict]:
    """Every kernel the pass profiles, chapter by chapter: the rows each chapter's module lists (id, chapter,
    label, kernel (its name, or with "regex" a pattern, for ncu's -k), size, sources; "variant", "ledger" where
    they hold), each with "module", the chapter's module that makes its one checked launch."""
    return [{**k, "module": module} for module in chapter_modules() for k in _listed(module)]


def select(only: str = "") -> list[dict]:
    """The kernels whose id contains any of the comma-separated words of `only` (all if empty)."""
    words = [w for w in only.split(",") if w]
    return [k for k in kernels() if not words or any(w in k["id"] for w in words)]


# ----------------------------------------------------------------------------- a chapter's module
def say(ok: bool, message: str) -> None:
    """The child's verdict on its launch, in the one line the pass reads from its output."""
    print(f"COUNTERS-CHECK: {'ok' if ok else 'WRONG'} {message}", flush=True)


def chapter_main(kernels_of_chapter, run, argv=None) -> int:
    """The command line of a chapter's module for this pass: --list prints its kernels (one JSON object a
    line), --run ID makes the one checked launch of kernel ID that ncu profiles (run(row) calls say())."""
    ap = argparse.ArgumentParser(description="a chapter's kernels for the counters pass (judge/record/counters.py)")
    ap.add_argument("--list", action="store_true", help="the kernels, one JSON object a line")
    ap.add_argument("--run", metavar="ID", help="one checked launch of kernel ID (what ncu profiles)")
    args = ap.parse_args(argv)
    rows = kernels_of_chapter()
    if args.list:
        for k in rows:
            print(json.dumps(k), flush=True)
        return 0
    k = next((k for k in rows if k["id"] == args.run), None)
    if k is None:
        print(f"no kernel {args.run!r}; --list shows them", file=sys.stderr)
        return 2
    run(k)
    return 0


# ----------------------------------------------------------------------------- ncu: command and output
def known_metrics(query_output: str) -> set[str]:
    """Base metric names (before the first '.') listed by `ncu --query-metrics`."""
    return set(re.findall(r"\b([a-z0-9]+__[a-z0-9_]+)\b", query_output))


def usable(wanted, known: set[str]) -> list[str]:
    """The metrics of `wanted` whose base name this ncu lists; VERIFIED ones are kept regardless."""
    if not known:
        return list(VERIFIED)
    return [m for m in wanted if m in VERIFIED or m.split(".")[0] in known]


def ncu_command(kid: str, kernel: str, metrics, log: Path, ncu: str = "ncu", sections=SECTIONS,
                regex: bool = False, module: str = "MODULE") -> list[str]:
    """The command that profiles the one launch of kernel `kernel` made by the child `kid`, which the chapter's
    `module` runs (regex: `kernel` is a pattern that the name contains, for a library's kernels, whose names
    the library chooses)."""
    cmd = [ncu, "--target-processes", "all", "-k", f"regex:{kernel}" if regex else f"regex:^{re.escape(kernel)}$", "-c", "1",
           "--clock-control", "none", "--csv", "--page", "raw", "--print-units", "base",
           "--log-file", str(log)]
    for s in sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + [sys.executable, "-m", module, "--run", kid]


def _number(text: str):
    """A CSV cell as a float when it is a number (ncu may group digits with commas), else the text."""
    t = text.strip()
    try:
        return float(t.replace(",", ""))
    except ValueError:
        return t if t else NA


def parse_raw_csv(text: str) -> list[dict]:
    """ncu --csv output (possibly with ==PROF== lines around it) -> one dict per profiled kernel launch:
    {"launch": {column: text}, "metrics": {metric: {"value", "unit"}}}.

    Two layouts are read. The raw page (--page raw): the first CSV line names the columns ("ID", ...,
    then metric names), a line whose ID cell is empty holds the units, then one line per launch. The
    details page: columns "Metric Name", "Metric Unit", "Metric Value", one line per metric."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = rows[0], [r for r in rows[1:] if r and r[0] != "ID"]
    if "Metric Name" in header and "Metric Value" in header:          # the details layout
        col = {c: header.index(c) for c in ("ID", "Metric Name", "Metric Unit", "Metric Value")}
        info = [c for c in ("Kernel Name", "Block Size", "Grid Size") if c in header]
        launches: dict = {}
        for r in body:
            if len(r) != len(header) or not r[col["Metric Name"]]:
                continue
            d = launches.setdefault(r[col["ID"]], {"launch": {c: r[header.index(c)] for c in info}, "metrics": {}})
            d["metrics"][r[col["Metric Name"]]] = {"value": _number(r[col["Metric Value"]]),
                                                   "unit": r[col["Metric Unit"]]}
        return list(launches.values())
    units = [""] * len(header)
    if body and body[0][0] == "":
        units, body = body[0], body[1:]
    out = []
    for r in body:
        if len(r) != len(header):
            continue
        launch, metrics = {}, {}
        for name, unit, cell in zip(header, units, r):
            if "__" in name:
                metrics[name] = {"value": _number(cell), "unit": unit}
            else:
                launch[name] = cell
        out.append({"launch": launch, "metrics": metrics})
    return out


def _value(metrics: dict, name: str):
    v = metrics.get(name, {}).get("value", NA)
    return v if isinstance(v, float) else NA


def summarize(metrics: dict, top: int = 4) -> dict:
    """The figures the chapters quote, from one kernel's metrics; "n/a" where a metric is missing."""
    s = {key: _value(metrics, m) for key, _, m in SUMMARY}
    limits = {m.split("_limit_")[1]: _value(metrics, m) for m in OCCUPANCY_LIMITS}
    known = {k: v for k, v in limits.items() if v != NA}
    s["blocks per SM (theoretical)"] = min(known.values()) if known else NA
    s["occupancy limited by"] = min(known, key=known.get) if known else NA
    warps = _value(metrics, "sm__warps_active.avg.per_cycle_active")
    block = _value(metrics, "launch__block_size")
    s["blocks per SM (achieved, from warps)"] = warps / (block / 32) if NA not in (warps, block) and block else NA
    # SMs busy: the share of the kernel's elapsed cycles in which the average SM had work (a last round of
    # tiles that leaves SMs idle shows here; the pipe figures above count active cycles only).
    active, elapsed = _value(metrics, "sm__cycles_active.avg"), _value(metrics, "sm__cycles_elapsed.avg")
    s["SMs busy % of elapsed"] = 100.0 * active / elapsed if NA not in (active, elapsed) and elapsed else NA
    tensor = _value(metrics, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")
    s["tensor pipe % of elapsed"] = (tensor * s["SMs busy % of elapsed"] / 100.0
                                     if NA not in (tensor, s["SMs busy % of elapsed"]) else NA)
    stalls, family = {}, NA
    for pattern in STALL_FAMILIES:
        for name in metrics:
            m = re.match(pattern, name)
            v = _value(metrics, name)
            if m and v != NA and not m.group(1).endswith("not_issued") and m.group(1) != "selected":
                stalls[m.group(1)] = v
        if stalls:
            family = pattern
            break
    total = sum(stalls.values())
    s["stall metrics"] = family
    s["top stalls"] = [{"reason": r, "warps per issue": v, "share": v / total if total else NA}
                       for r, v in sorted(stalls.items(), key=lambda kv: -kv[1])[:top]]
    return s


# ----------------------------------------------------------------------------- the parent: the pass
def _ncu() -> str | None:
    return shutil.which("ncu") or next((str(p) for p in (Path("/usr/local/cuda/bin/ncu"),) if p.exists()), None)


def ncu_version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
        return out.strip().splitlines()[-1] if out.strip() else "?"
    except (OSError, subprocess.SubprocessError) as e:
        return f"? ({type(e).__name__})"


def query_known(ncu: str) -> set[str]:
    """What this ncu can measure on this GPU (base names); empty if the query fails."""
    for extra in ([], ["--chip", "gh100"]):
        try:
            p = subprocess.run([ncu, "--query-metrics", *extra], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            continue
        names = known_metrics(p.stdout)
        if p.returncode == 0 and len(names) > 50:
            return names
    return set()


def _run(cmd, timeout: float, env) -> tuple[object, str]:
    """Run cmd in its own session; (returncode or 'HANG', stdout + stderr). A hang kills the group."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=config.ROOT,
                         env=env, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return "HANG", out or ""


def _child_env() -> dict:
    """The environment of a profiled child: the course on its path, and never the record run's flag (the child
    does not write the record)."""
    env = {**os.environ, "PYTHONPATH": str(config.ROOT)}
    env.pop("JUDGE_RECORD", None)
    return env


def profile_one(k: dict, metrics, log_dir: Path, ncu: str, timeout: float = CHILD_TIMEOUT,
                sections=SECTIONS) -> dict:
    """Profile one kernel in a child process under ncu; the row (an "error" in it when it failed).

    When ncu gives no counters although the child ran to its end, or ncu complains of a metric or a
    section: the metrics its message names are dropped and the kernel is profiled again; if it names
    none, again with only what was seen working on the H200 (VERIFIED, VERIFIED_SECTIONS). The row
    then says so ("refused_metrics", "fallback") and carries what worked ("metrics_used",
    "sections_used") for the kernels after it. At most three runs per kernel."""
    env = _child_env()
    t = time.time()
    log = log_dir / f"{k['id']}.csv"
    row = {"id": k["id"], "chapter": k["chapter"], "label": k["label"], "kernel": k["kernel"],
           "variant": k.get("variant", False),
           "size": k["size"]}
    mets, secs = list(metrics), tuple(sections)
    parsed = []
    for attempt in range(3):
        if log.exists():
            log.unlink()
        rc, out = _run(ncu_command(k["id"], k["kernel"], mets, log, ncu, secs, k.get("regex", False), k["module"]),
                       timeout, env)
        text = log.read_text(errors="replace") if log.exists() else ""
        parsed = parse_raw_csv(text) or parse_raw_csv(out)      # the CSV goes to the log; stdout if not
        check = [ln for ln in out.splitlines() if ln.startswith("COUNTERS-CHECK:")]
        row["ok"] = bool(check) and check[-1].split()[1] == "ok"
        row["check"] = check[-1].split(None, 2)[-1] if check else f"the child printed no check (rc {rc})"
        if parsed:
            break
        said = text + "\n" + out
        row["error"] = f"rc {rc}; " + " | ".join(said.strip().splitlines()[-6:])[-600:]
        if rc == "HANG" or not (check or re.search(r"metric|section", said, re.I)):
            break                                   # the child itself failed: another run would too
        named = [m for m in mets if m in said or re.search(rf"\b{re.escape(m.split('.')[0])}\b", said)]
        if named and len(named) < len(mets):
            mets = [m for m in mets if m not in named]
            row.setdefault("refused_metrics", []).extend(named)
            print(f"   {k['id']}: ncu refused {', '.join(named)}; again without", flush=True)
        elif (mets, secs) != (list(VERIFIED), VERIFIED_SECTIONS):
            mets, secs = list(VERIFIED), VERIFIED_SECTIONS
            row["fallback"] = True
            print(f"   {k['id']}: no counters from ncu; again with the verified metrics and sections only", flush=True)
        else:
            break
    row["metrics_used"], row["sections_used"] = mets, list(secs)
    row["seconds"] = round(time.time() - t, 1)
    if parsed:
        row.pop("error", None)
        got = parsed[0]["metrics"]
        dims = re.findall(r"\d+", parsed[0]["launch"].get("Block Size", ""))
        if "launch__block_size" not in got and dims:      # without LaunchStats: from the launch columns
            got["launch__block_size"] = {"value": float(math.prod(int(d) for d in dims)), "unit": "thread"}
        row["metrics"] = {m: {"value": NA, "unit": ""} for m in (*WANTED, *metrics)} | got   # asked, not read: n/a
        row["launch"] = {c: parsed[0]["launch"].get(c) for c in ("Kernel Name", "Block Size", "Grid Size")
                         if c in parsed[0]["launch"]}
        row["summary"] = summarize(row["metrics"])
        if len(parsed) > 1:
            row["note"] = f"ncu profiled {len(parsed)} launches; the first is kept"
    return row


# ----------------------------------------------------------------------------- the ledger: samples per instruction
def ledger_commands(kid: str, kernel: str, rep: Path, ncu: str = "ncu", regex: bool = False,
                    module: str = "MODULE") -> tuple[list, list]:
    """(profile, print): ncu's SourceCounters section on the child's one launch into report `rep`, then that
    report's source page as CSV, one row per SASS instruction with its warp-state samples."""
    sel = f"regex:{kernel}" if regex else f"regex:^{re.escape(kernel)}$"
    run = [ncu, "--target-processes", "all", "-k", sel, "-c", "1", "--clock-control", "none",
           "--section", "SourceCounters", "--section", "WarpStateStats", "--import-source", "no",
           "-f", "-o", str(rep), sys.executable, "-m", module, "--run", kid]
    page = [ncu, "-i", f"{rep}.ncu-rep", "--page", "source", "--csv", "--print-source", "sass"]
    return run, page


def opcode(sass: str) -> str:
    """The opcode of one SASS line, without its predicate or modifiers: '@!UP1 UTMASTG.2D [UR16]' -> 'UTMASTG'."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0].rstrip(";") if words else ""


#: What an instruction does, by opcode, for the ledger's shares
FAMILIES = (("wgmma", lambda op: op in ("QGMMA", "HGMMA", "IGMMA", "BGMMA")),
            ("wgmma fence/wait", lambda op: op == "WARPGROUP"),
            ("uniform datapath", lambda op: op.startswith("U") or op in ("R2UR", "S2UR")),
            ("FP32 add/mul/fma", lambda op: op in ("FADD", "FMUL", "FFMA", "FMNMX")),
            ("barrier or mbarrier", lambda op: op in ("SYNCS", "BAR", "BSYNC", "WARPSYNC", "NANOSLEEP")),
            ("shared/global memory", lambda op: op in ("STS", "LDS", "STSM", "LDSM", "LDG", "STG", "LDC", "LDGSTS")))


def family(op: str) -> str:
    return next((name for name, test in FAMILIES if test(op)), "other")


def parse_source_page(text: str, top: int = LEDGER_TOP) -> dict:
    """ncu's source page (--page source --csv --print-source sass) -> {"columns", "instructions", "samples",
    "by family": {family: share of all samples}, "top": the `top` instructions by samples, each {"address",
    "sass", "opcode", "family", "samples", "share"}}. {"error": ...} when the page has no sample column."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = [r for r in csv.reader(io.StringIO("\n".join(lines))) if r and r[0] != "Kernel Name"]
    if not rows:
        return {"error": "no source page in ncu's output: " + text.strip()[-300:]}
    head, body = rows[0], rows[1:]
    col = next((i for i, h in enumerate(head) if "Sampling" in h and "All" in h), None)
    if col is None:
        col = next((i for i, h in enumerate(head) if "Sampling" in h and "Not" not in h), None)
    src = next((i for i, h in enumerate(head) if h.strip() == "Source"), None)
    if col is None or src is None:
        return {"error": "no sample or source column", "columns": head}

    def num(x: str) -> float:
        try:
            return float(x.replace(",", ""))
        except ValueError:
            return 0.0
    body = [r for r in body if len(r) > max(col, src) and r[src].strip()]
    total = sum(num(r[col]) for r in body)
    if total <= 0:
        return {"error": "no warp samples", "columns": head, "instructions": len(body)}
    shares: dict = {}
    for r in body:
        f = family(opcode(r[src]))
        shares[f] = shares.get(f, 0.0) + num(r[col]) / total
    ranked = sorted(body, key=lambda r: -num(r[col]))[:top]
    return {"columns": head, "sample column": head[col], "instructions": len(body), "samples": total,
            "by family": {k: round(v, 4) for k, v in sorted(shares.items(), key=lambda kv: -kv[1])},
            "top": [{"address": r[0], "sass": r[src].strip()[:100], "opcode": opcode(r[src]),
                     "family": family(opcode(r[src])), "samples": num(r[col]), "share": round(num(r[col]) / total, 4)}
                    for r in ranked]}


def ledger_one(k: dict, log_dir: Path, ncu: str, timeout: float = CHILD_TIMEOUT) -> dict:
    """The ledger of kernel k: its child once more under ncu with SourceCounters, the source page parsed
    (parse_source_page) and its check; the report itself is deleted (the CSV stays in log_dir)."""
    env = _child_env()
    rep = log_dir / f"{k['id']}_ledger"
    run, page = ledger_commands(k["id"], k["kernel"], rep, ncu, k.get("regex", False), k["module"])
    rc, out = _run(run, timeout, env)
    check = [ln for ln in out.splitlines() if ln.startswith("COUNTERS-CHECK:")]
    try:
        p = subprocess.run(page, capture_output=True, text=True, timeout=timeout)
        text = p.stdout + p.stderr
    except (OSError, subprocess.SubprocessError) as e:
        text = f"{type(e).__name__}: {e}"
    (log_dir / f"{k['id']}_sass.csv").write_text(text)
    Path(f"{rep}.ncu-rep").unlink(missing_ok=True)
    return {"ok": bool(check) and check[-1].split()[1] == "ok",
            "check": check[-1].split(None, 2)[-1] if check else f"the child printed no check (rc {rc})",
            **parse_source_page(text)}


def _fmt(v, scale=1.0, spec=".0f") -> str:
    return format(v / scale, spec) if isinstance(v, float) else NA


def table(rows: list[dict]) -> str:
    head = (f"{'kernel':44s} {'ok':>3s} {'s':>5s} {'tensor%':>7s} {'fma%':>5s} {'occ%':>5s} {'blk/SM':>6s} "
            f"{'L2 MB':>8s} {'DRAM MB':>8s} {'smem wf M':>9s} {'conf M':>7s}  top stalls")
    out = [head]
    for r in rows:
        s = r.get("summary")
        if not s:
            out.append(f"{r['id']:44s} {'yes' if r.get('ok') else 'NO':>3s} {r['seconds']:5.1f}  FAILED: "
                       f"{r.get('error', '')[:100]}")
            continue
        stalls = ", ".join(f"{x['reason']} {x['warps per issue']:.2f}" for x in s["top stalls"][:3])
        out.append(f"{r['id']:44s} {'yes' if r.get('ok') else 'NO':>3s} {r['seconds']:5.1f} "
                   f"{_fmt(s['tensor pipe %'], spec='.1f'):>7s} {_fmt(s['FMA pipe %'], spec='.1f'):>5s} "
                   f"{_fmt(s['achieved occupancy %'], spec='.1f'):>5s} "
                   f"{_fmt(s['blocks per SM (theoretical)']):>6s} {_fmt(s['L2 bytes'], 1e6):>8s} "
                   f"{_fmt(s['DRAM bytes'], 1e6):>8s} {_fmt(s['smem wavefronts'], 1e6, '.2f'):>9s} "
                   f"{_fmt(s['smem bank conflicts'], 1e6, '.2f'):>7s}  {stalls}")
    return "\n".join(out)


def profile_all(out_dir: Path, only: str = "", save: bool = True, timeout: float = CHILD_TIMEOUT) -> list[dict]:
    """The pass: every selected kernel under ncu in its own child; rows into OUT/counters.json and,
    when save (the record run), into the record as "<chapter>.counters"."""
    from judge import record
    out_dir = Path(out_dir)
    log_dir = out_dir / "ncu_logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    ncu = _ncu()
    if ncu is None:
        raise RuntimeError("ncu (Nsight Compute) is not on the PATH: the counters pass needs it")
    t0 = time.time()
    version = ncu_version(ncu)
    known = query_known(ncu)
    metrics = usable(WANTED, known)
    dropped = [m for m in WANTED if m not in metrics]
    print(f"ncu: {version}; {len(metrics)} metrics asked, {len(dropped)} unknown to it (n/a): "
          f"{', '.join(dropped) or 'none'} ({time.time() - t0:.0f} s)", flush=True)
    todo = select(only)
    sections = SECTIONS
    meta = {"ncu": version, "command": " ".join(ncu_command("ID", "NAME", ["..."], Path("LOG"), "ncu")),
            "sections": list(sections), "dropped_metrics": dropped,
            "note": "a separate profiling pass (kernel replay, --clock-control none): counters, not times"}
    json_path = out_dir / "counters.json"
    # rows of an earlier call with another --only stay in counters.json (a pass may be run in parts)
    kept = [r for r in (json.loads(json_path.read_text()).get("rows", []) if json_path.exists() else [])
            if r.get("id") not in {k["id"] for k in todo}]
    rows = []
    for i, k in enumerate(todo, 1):
        r = profile_one(k, metrics, log_dir, ncu, timeout, sections)
        if k.get("ledger"):
            r["ledger"] = ledger_one(k, log_dir, ncu, timeout)
            print(f"   ledger: {r['ledger'].get('samples', 0):.0f} samples, "
                  f"{r['ledger'].get('by family') or r['ledger'].get('error')}", flush=True)
        rows.append(r)
        print(f"[{i}/{len(todo)}] {k['id']}: {r['seconds']:.1f} s, "
              + ("check ok" if r.get("ok") else f"check {r.get('check', '')[:120]}")
              + ("" if "summary" in r else f", FAILED: {r.get('error', '')[:200]}"), flush=True)
        if "summary" in r and (r["metrics_used"], tuple(r["sections_used"])) != (list(metrics), tuple(sections)):
            metrics, sections = r["metrics_used"], tuple(r["sections_used"])    # what worked, for the rest
            print(f"   from here on: {len(metrics)} metrics, sections {', '.join(sections)}", flush=True)
            meta.update(changed_at=k["id"], sections=list(sections))
            meta["dropped_metrics"] = [m for m in WANTED if m not in metrics]
        json_path.write_text(json.dumps({**meta, "metrics": metrics, "rows": kept + rows}, indent=1, default=str))
        last_of_chapter = i == len(todo) or todo[i]["chapter"] != k["chapter"]
        if save and last_of_chapter:        # saved chapter by chapter: a pass cut short keeps what it did
            ch = k["chapter"]
            srcs = sorted({s for x in todo if x["chapter"] == ch for s in x["sources"]} | {__file__})
            record.save(f"{ch}.counters", {**meta, "what": chapter_modules().get(k["module"], ""),
                                           "rows": [x for x in rows if x["chapter"] == ch]}, sources=srcs)
    print(table(rows), flush=True)
    print(f"counters: {sum('summary' in r for r in rows)}/{len(rows)} kernels profiled, "
          f"{sum(bool(r.get('ok')) for r in rows)} checked ok, {time.time() - t0:.0f} s", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m judge.record.counters", description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="list the kernels and exit")
    ap.add_argument("--only", default="", help="only ids containing one of these comma-separated words")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="where counters.json and ncu_logs/ go")
    ap.add_argument("--timeout", type=float, default=CHILD_TIMEOUT, help="seconds per kernel")
    args = ap.parse_args(argv)
    if args.list:
        whats, module = chapter_modules(), None
        for k in select(args.only):
            if k["module"] != module:
                module = k["module"]
                print(f"# {module}: {whats[module]}")
            print(f"{k['id']:44s} {k['kernel']:28s} {k['label']}")
        return 0
    from judge import gpu
    if not gpu.meets("sm_90"):
        print(f"The counters pass needs an H100/H200: {gpu.why_not('sm_90')}", file=sys.stderr)
        return 2
    rows = profile_all(Path(args.out), args.only, save=config.recording(), timeout=args.timeout)
    return 0 if rows and all("summary" in r and r.get("ok") and r.get("ledger", {}).get("ok", True)
                             and "error" not in r.get("ledger", {}) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

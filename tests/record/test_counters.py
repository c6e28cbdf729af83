"""Tests of the Nsight Compute counters pass (judge/record/counters.py) that need no GPU: the kernels it
covers, the ncu command lines it builds, the CSV it reads, the summary it draws, and the whole pass
driven through a stand-in `ncu` (a small script that writes a CSV in ncu's layout), with record.save
replaced so nothing is written to the record. One GPU test runs the real thing on an H200.

    PYTHONPATH=$PWD python -m pytest tests/record/test_counters.py -q

The CSV texts below are FORMAT SAMPLES written by hand in the layout `ncu --csv --page raw` (and the
details page) prints. Their numbers are made up to exercise the parser; they are not measurements.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from judge import config
from judge.gpu import power
from judge.record import counters
from chapters.ch04_wgmma import counters as ch04_counters
from chapters.ch05_blackwell import counters as ch05_counters

# ---- FORMAT SAMPLE (not a measurement): ncu --csv --page raw --print-units base, one kernel, with
# ncu's own ==PROF== lines and the application's output around it, digits grouped with commas.
RAW_SAMPLE = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
COUNTERS-CHECK: ok sample
==PROF== Profiling "gemm_tma_ring" - 0: 0%....50%....100% - 19 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes.sum","launch__block_size","launch__occupancy_limit_blocks","launch__occupancy_limit_registers","launch__occupancy_limit_shared_mem","launch__occupancy_limit_warps","lts__t_bytes.sum","sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active","sm__warps_active.avg.pct_of_peak_sustained_active","sm__warps_active.avg.per_cycle_active","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_selected_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum"
"","","","","","","","","","","","byte","","block","block","block","block","byte","%","%","warp","inst","inst","inst","inst","inst",""
"0","4242","python3.12","127.0.0.1","gemm_tma_ring","1","7","(128, 1, 1)","(32, 32, 1)","0","9.0","1,234,567,890","128","32","3","1","16","9,876,543,210","71.25","6.17","3.95","0.50","2.75","n/a","1.00","0.25","n/a"
==PROF== Disconnected from process 4242
'''

# ---- FORMAT SAMPLE (not a measurement): the details layout, one line per metric.
DETAILS_SAMPLE = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3.12","h","hist_global","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Command line profiler metrics","lts__t_bytes.sum","byte","2,048.00"
"0","1","python3.12","h","hist_global","1","7","(256, 1, 1)","(1056, 1, 1)","0","9.0","Occupancy","sm__warps_active.avg.pct_of_peak_sustained_active","%","88.5"
'''


def test_the_pass_covers_every_rung_variant_and_named_kernel():
    from chapters.ch04_wgmma import ladder
    from chapters.ch01_cp_async import sgemm
    ks = counters.kernels()
    ids = [k["id"] for k in ks]
    assert len(ids) == len(set(ids)), "two kernels share an id"
    labels = {k["label"] for k in ks}
    assert {r["name"] for r in ladder.RUNGS + ladder.VARIANTS} <= labels
    assert {b[0] for b in sgemm.BASELINES} <= labels
    for want in ("ch03.hist_global", "ch03.hist_sliced", "ch03.hist_cluster2", "ch03.dsmem_bandwidth_peer",
                 "ch03.multicast_1", "ch03.multicast_2"):
        assert want in ids
    for k in ks:           # the name given to ncu's -k is a kernel defined in one of the row's sources
        if k.get("regex"):   # cuBLAS's: the library names them (below)
            continue
        text = "".join(Path(s).read_text() for s in k["sources"] if s.endswith(".cu"))
        probe = re.match(r"dsmem_bandwidth_(\w+)$", k["kernel"])    # made by PROBES(name, mode) there
        defined = re.search(rf"\b{k['kernel']}\s*\(", text) or (
            probe and "dsmem_bandwidth_##name" in text and re.search(rf"^PROBES\({probe.group(1)},", text, re.M))
        assert defined, f"{k['id']}: kernel {k['kernel']} is in none of {k['sources']}"
        assert all(Path(s).exists() for s in k["sources"])
    assert [k["id"] for k in counters.select("ch01")] == [i for i in ids if i.startswith("ch01.")]
    assert {k["id"] for k in counters.select("hist_global,multicast_4")} == {"ch03.hist_global", "ch03.multicast_4"}


def test_cublas_kernels_are_profiled_by_a_pattern_in_their_chapters_sections():
    # the library chooses its kernels' names, so ncu filters by a pattern and the child makes one call
    lib = [k for k in counters.kernels() if k.get("cublas")]
    assert {(k["id"], k["n"]) for k in lib} == {("ch04.cublas_bf16", 4096), ("ch04.cublas_bf16_8192", 8192),
                                                ("ch05.cublas_fp8_fast", 4096), ("ch05.cublas_fp8_fast_8192", 8192),
                                                ("ch05.cublas_fp8_default", 4096),
                                                ("ch05.cublas_fp8_default_8192", 8192)}
    assert {k["chapter"] for k in lib if k["cublas"] == "bf16"} == {"ch04"}
    assert {k["chapter"] for k in lib if k["cublas"] != "bf16"} == {"ch05"}
    for k in lib:
        assert k["regex"] and k["kernel"] == ch04_counters.CUBLAS_KERNELS and all(Path(s).exists() for s in k["sources"])
    cmd = counters.ncu_command("ch04.cublas_bf16", ch04_counters.CUBLAS_KERNELS, [], Path("x.csv"), "ncu", regex=True)
    assert cmd[cmd.index("-k") + 1] == "regex:nvjet|xmma|cutlass|gemm" and cmd[cmd.index("-c") + 1] == "1"
    # every row of a chapter comes before the next chapter's, so each chapter's section is saved once, whole
    chapters = [k["chapter"] for k in counters.kernels()]
    assert chapters == sorted(chapters, key=lambda c: list(dict.fromkeys(chapters)).index(c))


def test_a_chapter_declares_the_module_that_runs_its_kernels_and_what_it_profiles(tmp_path, monkeypatch):
    mods = counters.chapter_modules()
    assert list(mods) == [f"chapters.{c}.counters" for c in ("ch01_cp_async", "ch03_clusters", "ch04_wgmma",
                                                              "ch05_blackwell", "ch06_attention")]
    assert all(what for what in mods.values())
    from judge.record import write
    real = write.declarations()
    for bad, says in (({"module": "judge.record.counters", "what": "x"}, "not a chapter's module"),
                      ({"module": "chapters.ch09_x.counters"}, "needs what")):
        monkeypatch.setattr(write, "declarations", lambda bad=bad: real + [(tmp_path / "figures.toml", {"counters": bad})])
        with pytest.raises(ValueError, match=says):
            counters.chapter_modules()


def test_ncu_command_profiles_one_launch_of_the_named_kernel_in_a_child(tmp_path):
    cmd = counters.ncu_command("ch04.tma_ring", "gemm_tma_ring", ["lts__t_bytes.sum", "dram__bytes.sum"],
                               tmp_path / "x.csv", "/opt/ncu", module="chapters.ch04_wgmma.counters")
    s = " ".join(cmd)
    assert cmd[0] == "/opt/ncu"
    for part in ("--target-processes all", "-k regex:^gemm_tma_ring$", "-c 1", "--clock-control none",
                 "--csv", "--page raw", "--print-units base", f"--log-file {tmp_path / 'x.csv'}",
                 "--section WarpStateStats", "--section Occupancy", "--metrics lts__t_bytes.sum,dram__bytes.sum"):
        assert part in s, part
    assert cmd[-5:] == [sys.executable, "-m", "chapters.ch04_wgmma.counters", "--run", "ch04.tma_ring"]
    # the metric list is one argument, so a comma in it never splits the command
    assert cmd[cmd.index("--metrics") + 1] == "lts__t_bytes.sum,dram__bytes.sum"


def test_unknown_metrics_are_dropped_before_the_run_and_verified_ones_kept():
    known = counters.known_metrics("Metric Name  Type  Unit\nlts__t_bytes  Counter  byte\n"
                                   "sm__pipe_fma_cycles_active  Counter  cycle\n")
    assert known == {"lts__t_bytes", "sm__pipe_fma_cycles_active"}
    got = counters.usable(["lts__t_bytes.sum", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                           "l1tex__no_such_counter.sum", counters.VERIFIED[0]], known)
    assert got == ["lts__t_bytes.sum", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                   counters.VERIFIED[0]]
    assert counters.usable(counters.WANTED, set()) == list(counters.VERIFIED)   # the query failed
    assert set(counters.VERIFIED) <= set(counters.WANTED)


def test_raw_csv_sample_parses_with_units_grouped_digits_and_na():
    rows = counters.parse_raw_csv(RAW_SAMPLE)
    assert len(rows) == 1
    m = rows[0]["metrics"]
    assert rows[0]["launch"]["Kernel Name"] == "gemm_tma_ring"
    assert rows[0]["launch"]["Grid Size"] == "(32, 32, 1)"
    assert m["dram__bytes.sum"] == {"value": 1234567890.0, "unit": "byte"}
    assert m["lts__t_bytes.sum"]["value"] == 9876543210.0
    assert m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] == {"value": 71.25, "unit": "%"}
    assert m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_gmma.sum"]["value"] == "n/a"
    assert "Kernel Name" not in m and "ID" not in rows[0]["metrics"]


def test_details_layout_and_garbage_parse():
    rows = counters.parse_raw_csv(DETAILS_SAMPLE)
    assert len(rows) == 1 and rows[0]["launch"]["Kernel Name"] == "hist_global"
    assert rows[0]["metrics"]["lts__t_bytes.sum"] == {"value": 2048.0, "unit": "byte"}
    assert rows[0]["metrics"]["sm__warps_active.avg.pct_of_peak_sustained_active"]["value"] == 88.5
    assert counters.parse_raw_csv("==ERROR== Failed to find metric l1tex__bogus.sum\n") == []
    assert counters.parse_raw_csv("") == []


def test_summary_ranks_stalls_and_derives_blocks_per_sm():
    m = counters.parse_raw_csv(RAW_SAMPLE)[0]["metrics"]
    s = counters.summarize(m)
    assert s["tensor pipe %"] == 71.25
    assert s["achieved occupancy %"] == 6.17
    assert s["L2 bytes"] == 9876543210.0 and s["DRAM bytes"] == 1234567890.0
    # limits: blocks 32, registers 3, shared memory 1, warps 16 -> one block per SM, by shared memory
    assert s["blocks per SM (theoretical)"] == 1.0
    assert s["occupancy limited by"] == "shared_mem"
    # 3.95 warps active per cycle, 4 warps per block
    assert s["blocks per SM (achieved, from warps)"] == pytest.approx(3.95 / 4)
    # "selected" is issuing, not a stall; n/a readings are left out
    assert [x["reason"] for x in s["top stalls"]] == ["gmma", "barrier", "wait"]
    assert s["top stalls"][0]["share"] == pytest.approx(2.75 / 3.5)
    assert s["smem bank conflicts (wgmma reads)"] == "n/a"
    assert s["FMA pipe %"] == "n/a"                       # never asked in the sample
    assert counters.summarize({})["blocks per SM (theoretical)"] == "n/a"
    assert counters.summarize({})["top stalls"] == []
    # an ncu that names stalls another way: the next family is read, never two families mixed
    other = {"smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct": {"value": 40.0, "unit": "%"},
             "smsp__warp_issue_stalled_wait_per_warp_active.pct": {"value": 10.0, "unit": "%"},
             "smsp__pcsamp_warps_issue_stalled_barrier": {"value": 999.0, "unit": ""}}
    t = counters.summarize(other)
    assert [x["reason"] for x in t["top stalls"]] == ["long_scoreboard", "wait"]
    assert t["stall metrics"] == counters.STALL_FAMILIES[2]


FAKE_NCU = r'''#!{python}
"""A stand-in for ncu in tests: answers --version and --query-metrics, and, for a profiling command,
writes a CSV FORMAT SAMPLE (made-up numbers) for the kernel named by -k, as ncu would."""
import sys, time
a = sys.argv[1:]
if a == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 0000.0.0 (stand-in)"); sys.exit(0)
if a[:1] == ["--query-metrics"]:
    print("\n".join({known})); sys.exit(0)
if "-i" in a:                              # the ledger's second step: a report's source page, as CSV
    print('"Kernel Name","gemm_x"')
    print('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"')
    for pc, sass, n in (("0010", "ULOP3.LUT UR4, UR4, 0x3fff0, URZ, 0xc0, !PT", "30"),
                        ("0020", "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR20], RZ, !UPT", "50"),
                        ("0030", "@!P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R3", "15"), ("0040", "FADD R1, R1, R2", "5")):
        print(f'"{pc}","{sass}","{n}","0"')
    sys.exit(0)
if "-o" in a:                              # the ledger's first step: a report with SourceCounters
    open(a[a.index("-o") + 1] + ".ncu-rep", "w").write("report")
    print("COUNTERS-CHECK: ok ledger run"); sys.exit(0)
log = a[a.index("--log-file") + 1]
kernel = a[a.index("-k") + 1][len("regex:^"):-1]
kid = a[-1]
mets = a[a.index("--metrics") + 1].split(",") if "--metrics" in a else []
if "hang" in kid:
    time.sleep(60)
import os
refuse = os.environ.get("FAKE_NCU_REFUSE")
if refuse and refuse in mets:
    open(log, "w").write("==ERROR== Failed to profile: metric " + refuse + " is not available\n"); sys.exit(1)
if os.environ.get("FAKE_NCU_NO_LAUNCHSTATS") and "LaunchStats" in a:
    open(log, "w").write("==ERROR== Could not find section LaunchStats\n"); sys.exit(1)
bad = [m for m in mets if m.split(".")[0] not in {known}]
if bad:
    open(log, "w").write("==ERROR== Failed to find metric " + bad[0] + "\n"); sys.exit(1)
print("COUNTERS-CHECK: " + ("WRONG max error 3.0" if "wrong" in kid else "ok fine"))
stats = "LaunchStats" in a                 # launch__block_size comes with that section
cols = (["launch__block_size"] if stats else []) + mets
vals = (["384"] if stats else []) + ["1,000" if m == "lts__t_bytes.sum" else str(10 + i) for i, m in enumerate(mets)]
with open(log, "w") as f:
    f.write('==PROF== Connected\n"ID","Kernel Name","Block Size",' + ",".join('"%s"' % c for c in cols) + "\n")
    f.write('"","","",' + ",".join('"byte"' for c in cols) + "\n")
    f.write('"0","%s","(128, 2, 1)",' % kernel + ",".join('"%s"' % v for v in vals) + "\n")
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    known = sorted({m.split(".")[0] for m in counters.WANTED} - {"l1tex__t_requests_pipe_lsu_mem_dshared_op_atom"}
                   | {"lts__t_bytes", "launch__block_size"} | {f"x{i}__pad" for i in range(60)})
    (tmp_path / "bin").mkdir()
    path = tmp_path / "bin" / "ncu"
    path.write_text(FAKE_NCU.replace("{python}", sys.executable).replace("{known}", repr(known)))
    path.chmod(0o755)
    monkeypatch.setattr(counters, "_ncu", lambda: str(path))
    saved = []
    from judge import record
    monkeypatch.setattr(record, "save", lambda section, figures, **kw: saved.append((section, figures, kw)) or True)
    return saved


def test_pass_through_a_stand_in_ncu_writes_rows_json_and_record_sections(tmp_path, fake_ncu, capsys):
    rows = counters.profile_all(tmp_path / "out", only="hist_global,sgemm_sync,tma_ring", save=True)
    assert [r["id"] for r in rows] == ["ch01.sgemm_sync", "ch03.hist_global", "ch04.tma_ring"]   # chapter order
    for r in rows:
        assert r["ok"] and "summary" in r and "error" not in r, r
        assert r["metrics"]["lts__t_bytes.sum"] == {"value": 1000.0, "unit": "byte"}
        # the one metric the stand-in does not list was dropped before the run and reads n/a
        assert r["metrics"]["l1tex__t_requests_pipe_lsu_mem_dshared_op_atom.sum"]["value"] == "n/a"
        assert r["seconds"] >= 0
        assert (tmp_path / "out" / "ncu_logs" / f"{r['id']}.csv").exists()
    assert rows[2]["launch"]["Kernel Name"] == "gemm_tma_ring"
    data = json.loads((tmp_path / "out" / "counters.json").read_text())
    assert [r["id"] for r in data["rows"]] == [r["id"] for r in rows]
    assert data["dropped_metrics"] == ["l1tex__t_requests_pipe_lsu_mem_dshared_op_atom.sum"]
    assert sorted(s for s, _, _ in fake_ncu) == ["ch01.counters", "ch03.counters", "ch04.counters"]
    ch04 = next(f for s, f, _ in fake_ncu if s == "ch04.counters")
    assert [r["id"] for r in ch04["rows"]] == ["ch04.tma_ring"] and "--clock-control none" in ch04["command"]
    assert ch04["what"].startswith("every rung and variant of the ladder")        # as figures.toml declares it
    srcs = next(kw["sources"] for s, _, kw in fake_ncu if s == "ch03.counters")
    assert any(s.endswith("histogram.cu") for s in srcs)
    # what measured them: the chapter's module that launched them and the pass itself
    assert {str(config.CHAPTERS_DIR / "ch03_clusters" / "counters.py"), counters.__file__} <= set(srcs)
    out = capsys.readouterr().out
    assert "[3/3] ch04.tma_ring" in out and "3/3 kernels profiled" in out


SOURCE_PAGE = """==PROF== Connected
"Kernel Name","gemm_fp8"
"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","Instructions Executed"
"00000a10","ULOP3.LUT UR5, UR5, 0x3fff0, URZ, 0xc0, !PT","1,200","1,100","512"
"00000a20","@!UP1 USHF.R.U32.HI UR5, URZ, 0x4, UR5","300","280","512"
"00000a30","QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR20], RZ, !UPT","2,000","10","2048"
"00000a40","WARPGROUP.DEPBAR.LE gsb0, 0x0","500","500","512"
"00000a50","FADD R24, R24, R88","1,000","900","65536"
"00000a60","NOP","0","0","9"
"""


def test_the_source_page_becomes_a_ledger_of_samples_by_instruction_and_kind():
    # a FORMAT sample of ncu's --page source --csv (made-up numbers; grouped digits as ncu prints them)
    led = counters.parse_source_page(SOURCE_PAGE, top=3)
    assert led["instructions"] == 6 and led["samples"] == 5000.0
    assert led["sample column"] == "Warp Stall Sampling (All Samples)"
    assert [x["opcode"] for x in led["top"]] == ["QGMMA", "ULOP3", "FADD"]
    assert led["top"][1]["share"] == pytest.approx(0.24) and led["top"][1]["family"] == "uniform datapath"
    assert led["by family"] == pytest.approx({"wgmma": 0.4, "uniform datapath": 0.3, "FP32 add/mul/fma": 0.2,
                                              "wgmma fence/wait": 0.1, "other": 0.0})
    assert counters.opcode("@!UP1 UTMASTG.2D [UR16], [UR34] ;") == "UTMASTG"
    assert counters.family("SYNCS") == "barrier or mbarrier" and counters.family("IMAD") == "other"
    assert "error" in counters.parse_source_page("==ERROR== no report")
    assert "error" in counters.parse_source_page('"Address","Source","Instructions Executed"\n"0","NOP","1"\n')


def test_the_ledgered_kernels_get_a_ledger_in_their_row(tmp_path, fake_ncu):
    assert set(ch05_counters.LEDGERED) == {k["id"] for k in counters.kernels() if k.get("ledger")}
    anew = next(k for k in counters.kernels() if k["id"] == "ch05.fp8_promote2_anew")
    assert anew["defines"] == {"PROMOTE": 2, "DESC_STEP": 0} and anew["variant"]
    rows = counters.profile_all(tmp_path, only="fp8_promote2_anew,fp8_promote1", save=True)
    by = {r["id"]: r for r in rows}
    assert "ledger" not in by["ch05.fp8_promote1"]
    led = by["ch05.fp8_promote2_anew"]["ledger"]
    assert led["ok"] and led["by family"]["uniform datapath"] == pytest.approx(0.3)
    assert (tmp_path / "ncu_logs" / "ch05.fp8_promote2_anew_sass.csv").exists()
    assert not list((tmp_path / "ncu_logs").glob("*.ncu-rep"))          # the report is not kept
    assert [s for s, _, _ in fake_ncu] == ["ch05.counters"]


def test_a_hang_a_wrong_check_and_a_rejected_metric_each_cost_one_row(tmp_path, fake_ncu):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    k = {"id": "ch03.hang_probe", "chapter": "ch03", "label": "hang", "kernel": "hang_probe", "sources": [],
         "size": "4096^3", "module": "chapters.ch04_wgmma.counters"}
    r = counters.profile_one(k, ["lts__t_bytes.sum"], log_dir, counters._ncu(), timeout=3)
    assert "summary" not in r and r["error"].startswith("rc HANG") and not r["ok"]
    assert r["seconds"] < 30
    k = {"id": "ch04.wrong_probe", "chapter": "ch04", "label": "wrong", "kernel": "gemm_wrong", "sources": [],
         "size": "4096^3", "module": "chapters.ch04_wgmma.counters"}
    r = counters.profile_one(k, ["lts__t_bytes.sum"], log_dir, counters._ncu())
    assert "summary" in r and r["ok"] is False and "max error 3.0" in r["check"]
    # a metric ncu rejects at run time by name: the row is profiled again without that one
    k = {"id": "ch04.retry_probe", "chapter": "ch04", "label": "retry", "kernel": "gemm_retry", "sources": [],
         "size": "4096^3", "module": "chapters.ch04_wgmma.counters"}
    r = counters.profile_one(k, ["lts__t_bytes.sum", "zz__not_a_metric.sum"], log_dir, counters._ncu())
    assert "summary" in r and r["ok"] and r["metrics"]["zz__not_a_metric.sum"]["value"] == "n/a"
    assert r["refused_metrics"] == ["zz__not_a_metric.sum"] and "fallback" not in r
    assert r["metrics_used"] == ["lts__t_bytes.sum"] and r["metrics"]["lts__t_bytes.sum"]["value"] == 1000.0


def test_a_metric_refused_at_run_time_is_left_out_for_the_rest_of_the_pass(tmp_path, fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_REFUSE", "dram__bytes_read.sum")
    rows = counters.profile_all(tmp_path, only="sgemm_sync,sgemm_regbuf", save=False)
    assert rows[0]["refused_metrics"] == ["dram__bytes_read.sum"] and "refused_metrics" not in rows[1]
    assert all("summary" in r and "dram__bytes_read.sum" not in r["metrics_used"] for r in rows)
    assert rows[1]["metrics"]["dram__bytes_read.sum"]["value"] == "n/a"
    assert rows[1]["metrics"]["dram__bytes.sum"]["value"] != "n/a"
    data = json.loads((tmp_path / "counters.json").read_text())
    assert data["changed_at"] == "ch01.sgemm_sync" and "dram__bytes_read.sum" in data["dropped_metrics"]


def test_a_section_ncu_refuses_switches_the_rest_of_the_pass_to_the_verified_set(tmp_path, fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_NO_LAUNCHSTATS", "1")
    rows = counters.profile_all(tmp_path, only="sgemm_sync,sgemm_regbuf", save=False)
    assert [r.get("fallback", False) for r in rows] == [True, False]
    assert all("summary" in r for r in rows)
    data = json.loads((tmp_path / "counters.json").read_text())
    assert data["changed_at"] == "ch01.sgemm_sync" and data["sections"] == list(counters.VERIFIED_SECTIONS)
    assert data["metrics"] == list(counters.VERIFIED)
    # without LaunchStats the block size comes from ncu's "Block Size" column: (128, 2, 1) -> 256
    assert rows[1]["metrics"]["launch__block_size"]["value"] == 256.0


def test_a_pass_run_in_parts_keeps_the_rows_of_each_part(tmp_path, fake_ncu):
    counters.profile_all(tmp_path, only="ch04.tma_ring", save=False)
    counters.profile_all(tmp_path, only="sgemm_sync", save=True)
    data = json.loads((tmp_path / "counters.json").read_text())
    assert [r["id"] for r in data["rows"]] == ["ch04.tma_ring", "ch01.sgemm_sync"]
    assert [s for s, _, _ in fake_ncu] == ["ch01.counters"]       # each call saves only its own chapters
    counters.profile_all(tmp_path, only="ch04.tma_ring", save=False)      # again: replaced, not doubled
    assert [r["id"] for r in json.loads((tmp_path / "counters.json").read_text())["rows"]] == \
        ["ch01.sgemm_sync", "ch04.tma_ring"]


def test_record_run_part_counters_hook(tmp_path, fake_ncu, monkeypatch):
    """`python -m judge.record.hopper_run --part counters --out DIR` reaches the pass (GPU faked)."""
    from judge import gpu
    from judge.record import hopper_run

    class Fake:
        def line(self):
            return "a stand-in H200"
    monkeypatch.setattr(gpu, "meets", lambda sm="sm_90": True)
    monkeypatch.setattr(gpu, "info", lambda: Fake())
    monkeypatch.setenv("JUDGE_RECORD", "0")
    real = counters.profile_all
    monkeypatch.setattr(counters, "profile_all", lambda d, only="": real(d, only="sgemm_tuned2"))
    if not hopper_run.record.RECORD.exists():
        pytest.skip("no record/hopper.json to copy beside the results")
    assert hopper_run.main(["--part", "counters", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "counters.json").read_text())["rows"][0]["id"] == "ch01.sgemm_tuned2"
    assert [s for s, _, _ in fake_ncu] == ["ch01.counters"]
    assert any(w.startswith("ncu counters") for w, _, _ in hopper_run.ROWS)


def test_cli_list_and_unknown_child(capsys):
    assert counters.main(["--list", "--only", "ch04"]) == 0
    out = capsys.readouterr().out
    assert "gemm_tma_store" in out and "ch01" not in out
    assert "# chapters.ch04_wgmma.counters: every rung and variant" in out
    assert counters.chapter_main(ch05_counters.kernels, ch05_counters.run, ["--run", "ch09.nothing"]) == 2
    assert counters.chapter_main(ch05_counters.kernels, ch05_counters.run, ["--list"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [k["id"] for k in listed] == [k["id"] for k in counters.kernels() if k["chapter"] == "ch05"]


def test_on_the_h200_one_kernel_profiles_for_real(tmp_path):
    from judge import gpu
    gpu.need("sm_90")
    if shutil.which("ncu") is None:
        pytest.skip("needs Nsight Compute (ncu) on the PATH")
    rows = counters.profile_all(tmp_path, only="ch04.tma_ring", save=False)
    r = rows[0]
    assert r["ok"], r.get("check")
    s = r["summary"]
    assert isinstance(s["tensor pipe %"], float) and 0 < s["tensor pipe %"] <= 100
    assert isinstance(s["L2 bytes"], float) and s["L2 bytes"] > 2 * 4096 * 4096 * 2   # A and B at least once
    assert s["top stalls"], "WarpStateStats gave no stall reasons"


# ----------------------------------------------------------------------------- FP8 like for like
# chapters/ch05_blackwell/fp8.py --out DIR: the parts that need no GPU.
from chapters.ch05_blackwell import fp8  # noqa: E402

# ---- FORMAT SAMPLE (not a measurement): nvidia-smi --query-gpu=clocks.sm,clocks_throttle_reasons.active
# --format=csv, as it prints, values made up.
SMI_SAMPLE = """clocks.current.sm [MHz], clocks_throttle_reasons.active
1980 MHz, 0x0000000000000000
1485 MHz, 0x0000000000000004
[N/A], 0x0000000000000001
"""


def test_round_bf16_rounds_once_where_a_float32_step_rounds_twice():
    import ml_dtypes
    import numpy as np
    x = 1 + 2.0 ** -8 + 2.0 ** -30                 # above the midpoint between 1 and 1 + 2^-7
    assert fp8.round_bf16(x) == 1 + 2.0 ** -7
    twice = float(np.float32(x).astype(ml_dtypes.bfloat16))   # float32 lands on the midpoint, then ties to even
    assert twice == 1.0
    rng = np.random.default_rng()
    v = rng.standard_normal(10000) * 10.0 ** rng.uniform(-3, 3, 10000)
    r = fp8.round_bf16(v)
    # on the 8-bit grid, and the nearest point of it: within half a unit in the last place
    m, e = np.frexp(r)
    assert np.all(m * 256 == np.rint(m * 256))
    assert np.all(np.abs(r - v) <= np.ldexp(1.0, np.frexp(v)[1] - 9) * (1 + 1e-12))
    v32 = v.astype(np.float32).astype(np.float64)   # exact in float32: one rounding either way
    assert np.array_equal(fp8.round_bf16(v32), v32.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64))


def test_nvidia_smi_sample_parses_and_names_throttle_reasons():
    got = fp8.parse_smi(SMI_SAMPLE)
    assert [x["sm_mhz"] for x in got] == [1980, 1485]
    assert got[0]["reasons"] == [] and got[1]["reasons"] == ["SW power cap"]
    assert power.reason_names(0x44) == ["SW power cap", "HW thermal slowdown"]
    assert power.reason_names("0x1000") == ["unknown bits 0x1000"]
    s = fp8.smi_summary(got)
    assert (s["sm_mhz_min"], s["sm_mhz_max"], s["reasons_seen"]) == (1485, 1980, ["SW power cap"])
    assert fp8.smi_summary([]) == {"samples": 0}


def test_clock_sampler_collects_what_a_stand_in_nvidia_smi_prints(tmp_path, monkeypatch):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nimport sys, time\nprint('clocks.current.sm [MHz], x', flush=True)\n"
                   "for i in range(1000 if '-lms' in sys.argv else 1):\n"
                   "    print(f'{1900 + i} MHz, 0x4', flush=True); time.sleep(0.01)\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:" + __import__("os").environ["PATH"])
    import time
    with fp8.ClockSampler(ms=10) as cs:
        time.sleep(0.5)
    s = cs.summary()
    assert s["samples"] >= 3 and s["sm_mhz_min"] == 1900 and s["reasons_seen"] == ["SW power cap"]
    assert "clocks_throttle_reasons.active" in s["command"] and "error" not in s
    now = fp8.smi_now()
    assert now["samples"] == 1 and now["sm_mhz_max"] == 1900 and now["query"] == fp8.SMI_QUERY
    assert now["csv"].startswith("clocks.current.sm")      # the raw answer is kept beside the figures
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with fp8.ClockSampler() as cs:                   # no nvidia-smi at all: the figures still come
        pass
    assert cs.samples == [] and cs.error


def test_rounds_alternate_their_order_and_pairs_match_accumulation():
    names = ["kernel", "promote", "fast", "default"]
    assert fp8.round_order(names, 0) == names and fp8.round_order(names, 1) == names[::-1]
    # each kernel is judged against the _scaled_mm path that accumulates as it does
    assert fp8.PAIRS == (("kernel", "fast"), ("promote", "default"))
    assert "use_fast_accum=True" in fp8.PATHS["fast"] and "not promoted" in fp8.PATHS["kernel"]
    assert "promoted" in fp8.PATHS["default"] and "PROMOTE=2" in fp8.PATHS["promote"]


def test_fp8_cli_parses_without_a_gpu():
    import subprocess
    p = subprocess.run([sys.executable, "-m", "chapters.ch05_blackwell.fp8", "--help"], cwd=config.ROOT,
                       capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(config.ROOT)},
                       timeout=120)
    assert p.returncode == 0 and "--out" in p.stdout and "compare" in p.stdout


def test_fp8_like_for_like_on_the_h200(tmp_path):
    from judge import gpu
    gpu.need("sm_90")
    res = fp8.accumulation_error(ks=(4096,), m=256)
    paths = {r["path"] for r in res}
    assert {"kernel", "promote", "fast", "default"} <= paths
    err = {(r["inputs"], r["path"]): r["rel_err"] for r in res}
    for r in res:
        assert r["not_finite"] == 0, r
        if r["inputs"] == "normal" or r["path"] in ("promote", "default"):   # promoted, or sums that cancel
            assert r["rel_err"] < 2.0 ** -7, r
    # inputs exact in E4M3, all positive: the partial sums only grow, and the tensor core's own
    # accumulation (never promoted) loses what promotion keeps (measured 0.07 against 0.0019 at K = 4096)
    assert err[("positive", "kernel")] > 4 * err[("positive", "promote")], err
    assert err[("positive", "fast")] > 4 * err[("positive", "default")], err
    sp = fp8.like_for_like(sizes=(4096,), rounds=6)["sizes"]["4096"]
    assert all(r["ok"] for r in sp["rows"]), sp["rows"]
    assert len(sp["pairs"]) == 2 and all(p["speed ratio (medians)"] > 0 for p in sp["pairs"])


def test_fp8_tables_print_from_a_result_of_the_documented_shape(capsys):
    """print_compare reads every key like_for_like and accumulation_error write (made-up values)."""
    row = {"n": 4096, "path": "kernel", "what": fp8.PATHS["kernel"], "TFLOPS": 1.0, "ms": 1.0, "p10_ms": 0.9,
           "p90_ms": 1.1, "rel_err": 1e-3, "not_finite": 0, "ok": True, "library_kernels": ["gemm_fp8"]}
    rows = [dict(row, path=p, library_kernels=[f"k_{p}"]) for p in fp8.PATHS]
    pair = {"n": 4096, "kernel": "a", "against": "b", "speed ratio (medians)": 1.0, "per-round ratio median": 1.0,
            "per-round ratio p10": 0.9, "per-round ratio p90": 1.1}
    acc = {"inputs": "normal", "K": 8192, "M = N": 1024, "path": "kernel", "seed": 1, "what": "x", "rel_err": 2e-3,
           "floor (bf16 rounding)": 1e-3, "vs_rounded": 1e-3, "share != correctly rounded": 0.1, "not_finite": 0}
    res = {"device": "made up", "checks": {"plain": True},
           "speed": {"sizes": {"4096": {"rows": rows, "pairs": [pair, pair], "scales": "row/column scales",
                                        "clock_during": {"samples": 0}}}},
           "accuracy": [acc]}
    fp8.print_compare(res)
    out = capsys.readouterr().out
    assert "k_fast" in out and "k_default" in out and "accumulation error" in out

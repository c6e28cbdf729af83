"""What chapters 1 to 5 teach, held to its source: each test is one statement the course makes,
checked against the compiler, the headers, the simulator or the H200's recorded counters.

Run: python -m pytest tests/chapters/test_errata.py -q      (no GPU needed: what ran on the H200 is read from
chapters/ch01_cp_async/wavefronts_h200.json, chapters/ch02_tma/topics_h200.json and record/hopper.json)
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judge import record
from judge.gpu import build
from judge.hw import pipesim

ROOT = Path(__file__).resolve().parents[2]
CH1 = ROOT / "chapters" / "ch01_cp_async"
CH2 = ROOT / "chapters" / "ch02_tma"
CH3 = ROOT / "chapters" / "ch03_clusters"
CH4 = ROOT / "chapters" / "ch04_wgmma"
CH5 = ROOT / "chapters" / "ch05_blackwell"


def depbar(b, kernel):
    return [int(v, 16) for v in re.findall(r"DEPBAR\.LE\s+SB0,\s*(0x[0-9a-f]+)", b.sass_of(kernel))]


# ------------------------------------------------------------------ chapter 1
@pytest.mark.parametrize("n", [7, 8, 12, 16])
def test_the_8_group_clamp_is_the_headers_not_the_hardwares(n):
    b = build.compile(CH1 / "wait_spellings.cu", defines={"WAIT_N": n})
    assert depbar(b, "wait_prior_header") == [min(n, 8)], "__pipeline_wait_prior(n > 8) waits with 8"
    assert depbar(b, "wait_group_raw") == [n], "a raw cp.async.wait_group keeps its N in DEPBAR.LE"


def test_the_header_switch_sends_every_larger_count_to_8():
    header = next(Path(d) / "cuda_pipeline_primitives.h" for d in build.include_dirs()
                  if (Path(d) / "cuda_pipeline_primitives.h").exists())
    text = header.read_text()
    body = text[text.index("__pipeline_wait_prior(size_t prior)"):]
    body = body[:body.index("}\n")]
    assert re.search(r"default\s*:\s*\S*pipeline_wait_prior<8>", body), "the default case waits with 8"
    assert [int(c) for c in re.findall(r"case\s+(\d+)\s*:", body)] == list(range(8))


@pytest.mark.parametrize("S,K", [(2, 5), (3, 8), (4, 8), (6, 12)])
def test_the_standard_loop_commits_S_minus_1_empty_groups(S, K):
    ops, opened, empty = pipesim.seed_loop(S, K), 0, 0
    for o in ops:
        if isinstance(o, pipesim.Load):
            opened += 1
        elif isinstance(o, pipesim.Commit):
            empty += opened == 0
            opened = 0
    assert empty == S - 1
    assert pipesim.check(ops, S).ok
    readme = (ROOT / "exercises" / "cp_async_sgemm" / "README.md").read_text()
    assert "the last S-1 rounds commit empty groups" in readme


def test_group_completion_is_stated_as_the_ptx_states_it():
    for path in (ROOT / "exercises" / "group_accounting" / "README.md", ROOT / "judge" / "hw" / "pipesim.py"):
        text = " ".join(path.read_text().split())
        assert "in any order" not in text, f"{path.name}: PTX says groups complete in commit order"
        assert "in the order" in text and "visible" in text, f"{path.name} states order and visibility"


def test_sgemm_sync_stages_16_bytes_per_ldg():
    b = build.compile(CH1 / "sgemm_sync.cu")
    assert "LDG.E.128" in b.sass_of("sgemm_sync")
    assert "per 16 bytes" in (CH1 / "sgemm_sync.cu").read_text()


def test_padded_sgemm_reads_are_2_wavefronts_not_1():
    rec = json.loads((CH1 / "wavefronts_h200.json").read_text())["counts"]
    assert rec["16 B, sgemm_tuned A, rows padded to 80 B"]["wavefronts_per_request"] == 2
    assert rec["16 B, sgemm_tuned A, rows of 64 B (unpadded)"]["wavefronts_per_request"] == 4
    assert "one\n//    wavefront" not in (CH1 / "sgemm_tuned.cu").read_text()


# ------------------------------------------------------------------ chapter 2
def test_the_expect_tx_may_follow_the_load():
    # tx_late.cu issues the TMA load first and announces the bytes 4 us later; the H200 ran it right.
    b = build.compile(CH2 / "tx_late.cu")
    sass = b.sass_of("tx_late")
    assert sass.index("UTMALDG") < sass.index("SYNCS.ARRIVE.TRANS64")
    rec = json.loads((CH2 / "topics_h200.json").read_text())["tx_late"]
    assert rec["wrong"] == 0 and rec["elements"] > 0
    assert "BEFORE (or as)" not in (CH2 / "add_one_tma.cu").read_text()


def test_the_pipelined_tma_copy_refuses_one_stage():
    with pytest.raises(build.CompileError, match="deadlock"):
        build.compile(CH2 / "tma_copy_pipelined.cu", defines={"STAGES": 1})


def test_stores_may_not_start_at_negative_coordinates():
    rec = json.loads((CH2 / "topics_h200.json").read_text())
    assert rec["store_negative"]["returncode"] != 0                       # measured: the kernel faulted
    edge = rec["store_positive_edge"]                                     # past the far edge: clipped
    assert edge["inside_box_written_right"] == edge["inside_box"] and edge["guard_written"] == 0
    readme = (ROOT / "exercises" / "tensormap_args" / "README.md").read_text()
    assert "a store drops it" not in readme and "16-byte chunks" in readme


def test_barrier_phases_statement_requires_a_wait_per_phase():
    text = " ".join((ROOT / "exercises" / "barrier_phases" / "README.md").read_text().split())
    assert "before anyone arrives for the next phase" in text


# ------------------------------------------------------------------ chapters 3 to 5 (issue 19)
def notebook_text(name: str, kind: str = "markdown") -> str:
    nb = json.loads((ROOT / "chapters" / name).read_text())
    return " ".join(" ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == kind).split())


def _module(path: Path, name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_wgmma_fence_orders_registers_only():
    # PTX ISA, wgmma.fence: register accesses; shared memory needs fence.proxy.async.
    header = (ROOT / "judge" / "include" / "wgmma.cuh").read_text()
    rule = header[header.index("RULE (PTX ISA, wgmma.fence)"):header.index("__device__ __forceinline__ void fence()")]
    assert "registers only" in rule and "fence.proxy.async" in rule
    text = notebook_text("ch04_wgmma.ipynb")
    assert "It orders registers only, not shared memory (PTX ISA, *wgmma.fence*)" in text
    assert "register writes (zeroing or reading the accumulators) and shared-memory accesses" not in text


def test_bf16_rounding_is_2_to_the_minus_8():
    # p = 8 significand bits: unit roundoff 2^-8, so rounding C to bf16 may cost 2^-8 |c|.
    import ml_dtypes
    import numpy as np
    x = np.float64(1 + 2.0 ** -8 - 2.0 ** -20)       # just under the midpoint between 1 and 1 + 2^-7
    assert abs(float(np.float32(x).astype(ml_dtypes.bfloat16)) - x) / x > 2.0 ** -9
    doc = (CH4 / "ladder.py").read_text().split('"""')[1]
    assert "2^-9" not in doc and "unit roundoff u = 2^-8" in doc
    assert "2⁻⁹" not in notebook_text("ch04_wgmma.ipynb")


def test_k_major_is_a_choice_for_16_bit_types():
    for text in (notebook_text("ch04_wgmma.ipynb"), (CH4 / "wgmma_tile.cu").read_text(), (CH4 / "ladder.py").read_text()):
        assert "imm-trans" in text and "Layout_MN_SW" in text
    assert "as wgmma wants" not in (CH4 / "wgmma_tile.cu").read_text()


def test_mapa_keeps_the_low_24_bits_and_replaces_the_rank_byte():
    ch03 = _module(CH3 / "run.py", "ch03_run")
    s = ch03.build("cluster_where").sass_of("mapa_probe")
    assert re.search(r"LEA R\d+, R\d+, R\d+, 0x18", s), "the own rank goes into bits 24-31 of shared addresses"
    assert "0x654" in s and "SR_CgaCtaId" in s
    where = record.figures("ch03.where")
    if where is None:
        pytest.skip("ch03.where not recorded")
    assert all(r["mapa"] == (r["rank"] << 24) | (r["own address"] & 0xFFFFFF) for r in where["mapa"])
    own_rank1 = (1 << 24) | 0x400                    # rank 1's own address of offset 0x400
    assert (0 << 24) | own_rank1 != 0x400 and ((0 << 24) | (own_rank1 & 0xFFFFFF)) == 0x400
    text = notebook_text("ch03_clusters.ipynb")
    assert "(rank << 24) | (address & 0xFFFFFF)" in text and "cooperative grid array" not in text


def test_the_occupancy_count_is_one_number():
    # The notebook counts distinct (cluster size, blocks/SM) cases; the exercise checks the same cases.
    notes = _module(CH3 / "notes.py", "ch03_notes")
    ch03 = _module(CH3 / "run.py", "ch03_run2")
    occ = record.figures("ch03.occupancy")
    if occ is None:
        pytest.skip("ch03.occupancy not recorded")
    layout = json.loads((ROOT / "exercises" / "cluster_geometry" / "h200_layout.json").read_text())
    n = len(layout["max_active_clusters"])
    assert f"{n} distinct cases" in notes.occupancy_findings(occ, ch03.predicted_clusters)
    assert f"reproduced {n} of {n}" in notes.occupancy_findings(occ, ch03.predicted_clusters)


def test_the_histograms_remote_adds_grow_as_c_minus_1_over_c():
    c = {r["id"]: r["summary"] for r in (record.figures("ch03.counters") or {}).get("rows", [])}
    if "ch03.hist_cluster2" not in c:
        pytest.skip("ch03.counters not recorded")
    ratio = c["ch03.hist_cluster4"]["DSMEM atom sectors"] / c["ch03.hist_cluster2"]["DSMEM atom sectors"]
    assert ratio == pytest.approx((3 / 4) / (1 / 2), rel=0.02)
    assert "streaming rate" not in notebook_text("ch03_clusters.ipynb").split("Where DSMEM can lose")[1][:600]


def test_multicast_waits_on_the_cluster_barriers_membar():
    ch03 = _module(CH3 / "run.py", "ch03_run3")
    plain = ch03.build("multicast_reuse", MULTICAST=0, CLUSTER=1).sass_of("multicast_reuse")
    mc = ch03.build("multicast_reuse", MULTICAST=1, CLUSTER=2).sass_of("multicast_reuse")
    assert "MEMBAR.ALL.GPU" in mc and "UCGABAR_ARV" in mc and "MEMBAR.ALL.GPU" not in plain
    c = {r["id"]: r["summary"] for r in (record.figures("ch03.counters") or {}).get("rows", [])}
    if "ch03.multicast_2" in c:
        assert c["ch03.multicast_2"]["top stalls"][0]["reason"] == "membar"
        assert c["ch03.multicast_4"]["top stalls"][0]["reason"] == "membar"
    assert "bound by latency and by the cluster barrier" not in notebook_text("ch03_clusters.ipynb")


@pytest.mark.parametrize("section,list_key,kind", [("ch03.where", "runtime", "where"), ("ch03.occupancy", "rows", "occupancy"),
                                                   ("ch03.occupancy", "residency", "residency"), ("ch03.cluster_sum", "sums", "sums"),
                                                   ("ch03.dsmem", "latency", "latency"), ("ch03.dsmem", "bandwidth", "bandwidth"),
                                                   ("ch03.histogram", "rows", "histogram"), ("ch03.multicast", "rows", "multicast")])
def test_recorded_tables_keep_the_measured_column_order(section, list_key, kind):
    notes = _module(CH3 / "notes.py", "ch03_notes2")
    figs = record.figures(section)
    if figs is None:
        pytest.skip(f"{section} not recorded")
    rows = figs[list_key]
    assert list(rows[0]) == sorted(rows[0]), "the record stores sorted keys: the order must come from notes.COLUMNS"
    shown = notes.table(rows, kind)
    cols = [k for k in notes.COLUMNS[kind] if k in rows[0]]
    assert list(shown[0])[:len(cols)] == cols
    assert set(rows[0]) - {"message"} <= set(notes.COLUMNS[kind]), "a recorded column with no place in the order"


def test_tcgen05_mma_is_issued_by_one_thread_because_of_the_guard_not_elect():
    b = build.compile(CH5 / "tcgen05_tile.cu", target="sm_100a")
    s = b.sass_of("tcgen05_tile")
    i = s.index("UTCHMMA")
    window = s[s.rindex("ELECT", 0, i) - 40:s.index("BRA.U.ANY", i) + 10]
    assert "ELECT" in window and "BRA.U.ANY" in window, "each UTCHMMA sits in an ELECT ... BRA.U.ANY loop"
    assert "threadIdx.x == 0" in (CH5 / "tcgen05_tile.cu").read_text()
    assert "picks\nthe one thread" not in notebook_text("ch05_blackwell.ipynb")


@pytest.mark.parametrize("phrase", ["Carried over from Hopper unchanged", "no package installed here ships trained weights",
                                    "keeps the sum in full fp32 whatever precision", "the accumulation adds little",
                                    "grades learners' kernels exactly this way"])
def test_chapter_5_drops_the_wrong_sentences(phrase):
    assert phrase not in notebook_text("ch05_blackwell.ipynb") + notebook_text("ch05_blackwell.ipynb", "code")


def test_fp8_is_compared_like_with_like():
    import tomllib
    notes = _module(CH5 / "notes.py", "ch05_notes")
    fp8 = _module(CH5 / "fp8.py", "ch05_fp8")
    assert fp8.PAIRS == (("kernel", "fast"), ("promote", "default"))
    assert "use_fast_accum=True" in fp8.PATHS["fast"] and "promoted" in fp8.PATHS["default"]
    decl = tomllib.loads((CH5 / "figures.toml").read_text())
    assert "ch05.fp8_like_for_like" in decl["sections"]
    row = next(r for r in decl["readme"] if "course's FP8" in r["what"])
    assert "[pairs][0]" in row["figure"] and "use_fast_accum=True" in row["figure"] and "of _scaled_mm" not in row["figure"]
    # the sentences come from the result: a made-up one, with a throttled 8192^3
    res = {"speed": {"sizes": {str(n): {"scales": "row/column scales", "clock_during": {"sm_mhz_min": m, "sm_mhz_max": 1980,
                     "reasons_seen": r}, "rows": [], "pairs": [
                         {"kernel": fp8.PATHS[a], "against": fp8.PATHS[b], "speed ratio (medians)": x,
                          "per-round ratio p10": x - 0.01, "per-round ratio p90": x + 0.01} for (a, b), x in zip(fp8.PAIRS, xs)]}
                     for n, m, r, xs in ((4096, 1980, [], (0.97, 0.91)), (8192, 1485, ["SW power cap"], (0.95, 0.87)))}},
           "accuracy": [{"inputs": "normal", "K": k, "path": p, "rel_err": e, "floor (bf16 rounding)": 1.6e-3}
                        for k, base in ((4096, 2e-3), (8192, 3e-3)) for p, e in (("kernel", base), ("fast", base),
                                                                               ("promote", 1.6e-3), ("default", 1.6e-3))]}
    text = notes.like_for_like_note(res)
    assert "0.970× torch._scaled_mm, use_fast_accum=True" in text and "0.870× torch._scaled_mm, default (promoted)" in text
    assert "SW power cap" in text and "1485-1980 MHz" in text and "growing with K" in text


# ------------------------------------------------------------------ chapters 4 and 5: what the messages work corrected
def test_the_last_wave_s_fill_and_the_run_s_wave_efficiency_are_told_apart():
    # 'last wave full' was waves / ceil(waves): 0.97 for 8B MLP down, whose last wave holds 100 of 132 tiles
    from chapters.ch04_wgmma import ladder
    rows = record.figures("ch04.shapes")["rows"]
    down = next(r for r in rows if r["layer"] == "8B MLP down" and r["rung"] == ladder.BEST)
    w = ladder.wave_fill(down["tiles"])
    assert down["tiles"] == 1024 and w == {"last wave fill": round(100 / 132, 3), "wave efficiency": 0.97}
    assert ladder.wave_fill(264) == {"last wave fill": 1.0, "wave efficiency": 1.0}


@pytest.mark.parametrize("swizzle", ["128B", "64B", "32B", "none"])
def test_a_hopper_descriptor_s_swizzle_sets_the_same_bits_as_tcgen05_s(swizzle):
    # chapter 5 cell 14 once said the 64B and 32B codes 'mean something else' to tcgen05
    from judge.hw import umma, wgmma
    d5, d4 = umma.encode(0x400, 16, 1024, swizzle), wgmma.encode(0x400, 16, 1024, swizzle)
    assert d5 ^ d4 == 1 << 46                       # only the fixed 0b001 of bits 46-48
    assert umma.decode(d4 | 1 << 46).swizzle == swizzle


def test_fine_grained_fp8_figures_come_from_the_record():
    nb = json.loads((ROOT / "chapters" / "ch05_blackwell.ipynb").read_text())
    text = "".join("".join(c["source"]) for c in nb["cells"])
    assert "0.86 to 0.88" not in text and "torch 2.11 on the H200 takes them" not in text
    speed = record.figures("ch05.fp8_fine")["speed"]
    share = {r["n"]: round(r["of _scaled_mm block-wise"], 3) for r in speed if r["path"] == "gemm_fp8.cu FINE=1"}
    assert set(share) == {4096, 8192} and all(0.5 < v < 1.0 for v in share.values())   # FINE=1 trails, as the text says
    assert 'r["of _scaled_mm block-wise"] for r in fine["speed"]' in text       # printed from the record

"""What chapters 1 and 2 teach, held to its source: each test is one statement the course makes,
checked against the compiler, the headers, the simulator or the H200's recorded counters.

Run: python -m pytest tests/test_errata.py -q      (no GPU needed: what ran on the H200 is read from
chapters/01_cp_async/wavefronts_h200.json and chapters/02_tma/topics_h200.json)
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from judge.gpu import build
from judge.hw import pipesim

ROOT = Path(__file__).resolve().parent.parent
CH1 = ROOT / "chapters" / "01_cp_async"
CH2 = ROOT / "chapters" / "02_tma"


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

"""judge.hw.tma_plan: a TMA descriptor planned as a compiler does (swizzle atoms, merges, promotion,
copies, refusals), checked against judge.hw.tma's rules and a CPU model of the copies; the chapter-2
kernels that run the planned map and the fast TMA copy build and show their instructions.

    python -m pytest tests/hw/test_tma_plan.py -q        # GPU tests skip with the reason elsewhere
"""

import numpy as np
import pytest

from judge import config, gpu
from judge.grading import exercise
from judge.hw import tma, tma_plan

CH2 = config.CHAPTERS_DIR / "ch02_tma"
CASES = exercise.import_file(config.EXERCISES_DIR / "tma_plan" / "check.py", "tma_plan_check_cases").CASES


def test_the_pages_tile_becomes_one_rank3_copy():
    # TIRx's copy_async -> tma page: 8x256 float16 under the 128-byte swizzle encodes
    # dims (64, 8, 4), strides (512, 128), box (64, 8, 4), issued once.
    p = tma_plan.plan((8, 256), "float16", (8, 256), swizzle="128B")
    assert (p.rank, p.dims, p.strides, p.box, p.swizzle) == (3, (64, 8, 4), (512, 128), (64, 8, 4), "128B")
    assert p.n_copies == 1 and p.box_bytes == 8 * 256 * 2 and p.dtype == "float16"
    assert p.spec().validate() is not None           # judge.hw.tma's own rules accept it
    assert p.coords() == [(0, 0, 0)]


def test_without_the_split_judge_tma_refuses_the_same_tile():
    with pytest.raises(tma.TensorMapError) as e:
        tma.TensorMapSpec("float16", 0, (256, 8), (512,), (256, 8), (1, 1), "128B").validate()
    assert e.value.rule == "swizzle_span"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_plan_moves_exactly_the_tile_in_the_promised_order(case):
    _, tile, dtype, shape, strides, swz = case
    p = tma_plan.plan(tile, dtype, shape, strides, swz)
    if not p:
        assert p.rule in tma.RULES, p
        return
    p.spec().validate()
    assert all(1 <= b <= 256 for b in p.box) and p.rank <= 5
    got, want = tma_plan.simulate(p), tma_plan.tile_bytes(tile, dtype, shape, strides, swz)
    assert got.size == want.size and (got == want).all()


@pytest.mark.parametrize("args,rule", [
    (((64, 64), "float32", (64, 64), (128, 2)), "contiguous"),
    (((2, 2, 2, 2, 2, 4), "float32", (4, 4, 4, 4, 4, 8)), "rank"),
    (((8, 96), "float16", (8, 96), None, "128B"), "swizzle_span"),
    (((8, 8), "float32", (10, 10)), "strides"),
    (((8, 5), "float32", (64, 64)), "box_inner"),
    (((8, 8), "int8", (8, 8)), "dtype"),
])
def test_refusals_name_the_rule(args, rule):
    r = tma_plan.plan(*args)
    assert not r and r.rule == rule and rule in tma.RULES
    assert rule in str(r)


def test_a_rule_only_judge_tma_knows_is_reported_through_judge_tma(monkeypatch):
    # the planner does not repeat judge.hw.tma's checks: whatever validate() refuses, the plan refuses
    def refuse(self):
        raise tma.TensorMapError("elem_strides", "refused by judge.hw.tma")
    monkeypatch.setattr(tma.TensorMapSpec, "validate", refuse)
    r = tma_plan.plan((8, 256), "float16", (8, 256), swizzle="128B")
    assert not r and r.rule == "elem_strides" and "refused by judge.hw.tma" in r.message


def test_merges_need_a_full_box_and_a_contiguous_neighbour():
    assert tma_plan.plan((4, 64), "float32", (100, 64)).dims == (6400,)               # rows back to back
    assert tma_plan.plan((16, 64), "float32", (64, 64), (80, 1)).rank == 2            # padded rows
    assert tma_plan.plan((4, 32), "float32", (100, 64)).rank == 2                     # half rows
    assert tma_plan.plan((64, 64), "float32", (1024, 64)).rank == 2                   # 4096 > 256 even as uint64


def test_long_rows_are_promoted_then_split():
    p = tma_plan.plan((2, 8, 32), "float16", (10, 8, 32))
    assert (p.dtype, p.dims, p.box, p.n_copies) == ("uint32", (1280,), (256,), 1)
    q = tma_plan.plan((512, 8), "float32", (4096, 100))
    assert q.copies == (1, 2) and q.box == (8, 256) and q.coords() == [(0, 0), (0, 256)]
    assert (tma_plan.simulate(q) == tma_plan.tile_bytes((512, 8), "float32", (4096, 100))).all()


def test_expected_shared_memory_is_the_128b_swizzle_of_each_atom():
    # element (row r, column c) of the page's tile: atom j = c // 64 at j * 1024, row r at + r * 128,
    # its 16-byte chunk (c % 64) // 8 moved to chunk ((c % 64) // 8) ^ r: the 128B rule per atom
    p = tma_plan.plan((8, 256), "float16", (8, 256), swizzle="128B")
    tile = np.arange(8 * 256, dtype=np.uint16).reshape(8, 256)
    smem = tma_plan.expected_smem(p, tile).view(np.uint16)
    for r in range(8):
        for c in range(0, 256, 8):
            j, chunk = c // 64, (c % 64) // 8
            at = (j * 1024 + r * 128 + ((chunk ^ r) * 16)) // 2
            assert (smem[at:at + 8] == tile[r, c:c + 8]).all(), (r, c)


# ----------------------------------------------------------------------------- chapter 2 kernels
def _ch02():
    from chapters.ch02_tma import run
    return run


def test_plan_probe_kernel_issues_one_rank3_tma_load():
    b = _ch02().build("tma_plan_probe", ROWS=8, ATOMS=4)
    k = b.sass_of("tma_plan_probe")
    assert "UTMALDG.3D" in k and k.count("UTMALDG") == 1
    assert b.uses("mbarrier.expect_tx") and b.uses("mbarrier.wait")


@pytest.mark.parametrize("cfg", _ch02().FAST_CONFIGS, ids=lambda c: c[0])
def test_fast_copy_configurations_build_and_fit(cfg):
    name, defines, view_cols, per_sm, *_ = cfg
    b = _ch02().build("tma_copy_fast", **defines)
    assert b.uses("tma.load") and b.uses("tma.store") and b.resources["tma_copy_fast"]["spill_stores"] == 0
    smem = defines["STAGES"] * defines["BOX_W"] * defines["BOX_H"] * 4 + b.resources["tma_copy_fast"]["shared"]
    assert per_sm * (smem + 1024) <= 228 * 1024, f"{name}: {per_sm} blocks of {smem} B do not fit an SM"
    assert defines.get("STORE_LAG", 1) < defines["STAGES"]


def test_plan_probe_on_the_gpu_matches_the_model_byte_for_byte():
    gpu.need("sm_90")
    r = _ch02().plan_probe()
    assert r["ok"] and r["copies"] == 1, r


def test_fast_copy_is_exact_on_the_gpu():
    gpu.need("sm_90")
    ch02 = _ch02()
    rows = ch02.copy_fast(ch02.FAST_CONFIGS[:2], nbytes=64 << 20, reps=3)
    assert all(r["wrong elements"] == 0 for r in rows), rows


# ----------------------------------------------------------------------------- on the CPU model
def _aligned(shape, dtype, align=1024):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buf = np.zeros(n + align, dtype=np.uint8)
    off = (-buf.ctypes.data) % align
    return buf[off:off + n].view(dtype).reshape(shape)


def test_planned_map_on_the_cpu_model_lands_where_the_plan_says():
    from judge.gpu import build
    from judge import model
    p = tma_plan.plan((8, 256), "float16", (8, 256), swizzle="128B")
    host = _aligned((8, 256), np.float16)
    host[:] = np.random.default_rng(3).standard_normal((8, 256))
    spec = tma.tensor_map_spec(host, box=p.box, swizzle=p.swizzle, dims=p.dims, strides=p.strides)
    raw = np.full(p.smem_bytes // 4, np.nan, dtype=np.float32)
    tile = np.full((8, 256), np.nan, dtype=np.float16)
    rep = model.run(build.compile(CH2 / "tma_plan_probe.cu", defines={"ROWS": 8, "ATOMS": 4}), "tma_plan_probe",
                    grid=(1, 1, 1), block=(128, 1, 1), args=(spec, raw, tile))
    assert rep.counts["tma.load"] == 1
    assert (raw.view(np.uint8) == tma_plan.expected_smem(p, host)).all()
    assert (tile.view(np.uint16) == host.view(np.uint16)).all()


@pytest.mark.parametrize("defines", [{"BOX_W": 64, "BOX_H": 8, "STAGES": 3, "STORE_LAG": 2},
                                     {"BOX_W": 64, "BOX_H": 8, "STAGES": 2, "ORDER": 1}])
def test_fast_copy_ring_on_the_cpu_model(defines):
    # three blocks share 64 tiles: every slot is reused, and a store still reading a slot the
    # producer refills would be reported as a race by the model
    from judge.gpu import build
    from judge import model
    rows, cols = 64, 512
    src = np.random.default_rng(0).random((rows, cols), dtype=np.float32)
    dst = np.full_like(src, np.nan)
    bw, bh = defines["BOX_W"], defines["BOX_H"]
    maps = (tma.tensor_map_spec(src, box=(bw, bh)), tma.tensor_map_spec(dst, box=(bw, bh)))
    model.run(build.compile(CH2 / "tma_copy_fast.cu", defines=defines), "tma_copy_fast", grid=(3, 1, 1),
              block=(64, 1, 1), args=(*maps, np.int32(cols // bw), np.int32((cols // bw) * (rows // bh))),
              shared_bytes=defines["STAGES"] * bw * bh * 4)
    assert (dst.view(np.uint32) == src.view(np.uint32)).all()

"""tests/chapters/test_ch04_cpu.py - chapter 4 without a GPU: judge.hw.wgmma's models against the PTX ISA's statements
and the SASS, and the three CPU exercises (wgmma_descriptor, wgmma_fragment, ws_ring_phases).

Run: python -m pytest tests/chapters/test_ch04_cpu.py -q      (no GPU; each grade runs in a child process)
"""
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from judge.gpu import build
from judge.grading import cpu_flow as flow
from judge.grading import exercise
from judge.hw import tma, wgmma
from judge.grading.grade import Verdict

from tests.checking import graded_here

TILE_CU = "chapters/04_wgmma/wgmma_tile.cu"


# ----------------------------------------------------------------------------- the descriptor
def test_descriptor_fields_sit_where_the_isa_puts_them():
    # one field at a time: start at bit 0, LBO at 16, SBO at 32 (all bytes >> 4), base offset at 49, layout at 62
    assert wgmma.encode(16, 0, 0, "none") == 1
    assert wgmma.encode(0, 16, 0, "none") == 1 << 16
    assert wgmma.encode(0, 0, 16, "none") == 1 << 32
    assert wgmma.encode(0, 0, 0, "none", base_offset=1) == 1 << 49
    assert [wgmma.encode(0, 0, 0, s) >> 62 for s in ("none", "128B", "64B", "32B")] == [0, 1, 2, 3]
    # the descriptor of a 128B-swizzled K-major tile at 0x400: the one CUTLASS and the course's header build
    assert wgmma.encode(0x400, 16, 1024, "128B") == 0x4000004000010040
    assert wgmma.FIELD_BITS == {"start": (0, 13), "lbo": (16, 29), "sbo": (32, 45), "base_offset": (49, 51),
                                "swizzle": (62, 63)}


def test_encode_decode_round_trip():
    rng = random.Random(4)
    for _ in range(500):
        d = wgmma.Descriptor(16 * rng.randrange(1 << 14), 16 * rng.randrange(1 << 14), 16 * rng.randrange(1 << 14),
                             rng.randrange(8), rng.choice(list(wgmma.SWIZZLE_MODE)))
        assert wgmma.decode(int(d)) == d
        assert int(wgmma.decode(int(d))) == int(d)


@pytest.mark.parametrize("kwargs,field", [
    ({"start": 0x408}, "start"),            # not a multiple of 16
    ({"sbo": 1 << 18}, "sbo"),              # 14 bits of bytes >> 4 hold at most 2^18 - 16
    ({"lbo": -16}, "lbo"),
    ({"base_offset": 8}, "base_offset"),
    ({"swizzle": "16B"}, "swizzle"),
])
def test_encode_names_the_field_it_cannot_hold(kwargs, field):
    args = {"start": 0x400, "lbo": 16, "sbo": 1024, "swizzle": "128B", "base_offset": 0} | kwargs
    with pytest.raises(wgmma.DescriptorError) as e:
        wgmma.encode(**args)
    assert e.value.field == field and field in str(e.value)


def test_decode_refuses_bits_outside_the_fields():
    with pytest.raises(ValueError, match="outside its fields"):
        wgmma.decode(wgmma.encode(0x400, 16, 1024, "128B") | 1 << 61)


# ----------------------------------------------------------------------------- operand layouts
@pytest.mark.parametrize("swizzle", ["128B", "64B", "32B"])
def test_swizzled_kmajor_layout_is_the_tma_swizzle_of_span_wide_rows(swizzle):
    span = wgmma.SPAN[swizzle]
    for row in range(64):
        for k in range(span // 2):
            plain = row * span + 2 * k
            assert wgmma.kmajor_offset(row, k, swizzle) == tma.swizzle_offset(plain, swizzle)
    # every row keeps its bytes (the swizzle permutes 16-byte chunks within the row) ...
    offs = np.array([[wgmma.kmajor_offset(r, k, swizzle) for k in range(span // 2)] for r in range(64)])
    assert all(sorted(offs[r]) == list(range(r * span, (r + 1) * span, 2)) for r in range(64))
    # ... and the pattern repeats every 8 rows: the 8-row group is the unit the stride byte offset steps
    assert (offs[8:] - offs[:-8] == 8 * span).all()


@pytest.mark.parametrize("swizzle", ["128B", "64B", "32B", "none"])
def test_descriptor_reads_each_element_where_the_layout_put_it(swizzle):
    """Following the descriptor as the hardware does lands on the canonical layout, for every k16 slice."""
    start = 0x2000
    for ks in range(4):
        if swizzle == "none":
            desc = wgmma.encode(start + 256 * ks, *wgmma.kmajor_strides("none", k_bytes=128), "none")
        else:
            span = wgmma.SPAN[swizzle]
            off = (32 * ks // span) * 64 * span + (32 * ks) % span
            desc = wgmma.kmajor_descriptor(start + off, swizzle)
        for row in range(64):
            for k in range(16):
                assert wgmma.operand_address(desc, row, k) == \
                    start + wgmma.kmajor_offset(row, 16 * ks + k, swizzle, k_elems=64), (ks, row, k)


def test_no_swizzle_core_matrices_are_8_rows_of_16_contiguous_bytes():
    for row in range(8):
        for k in range(8):
            assert wgmma.kmajor_offset(row, k, "none") == 16 * row + 2 * k     # one 128-byte core matrix
    assert wgmma.kmajor_offset(0, 8, "none") == 128                            # the next along K
    assert wgmma.kmajor_offset(8, 0, "none") == 256                            # the next along M (k16: 2 per group)


# ----------------------------------------------------------------------------- the accumulator fragment
@pytest.mark.parametrize("n", wgmma.SHAPES_N)
def test_fragment_is_a_bijection_and_owner_inverts_coord(n):
    seen = set()
    for t in range(128):
        for i in range(n // 2):
            rc = wgmma.fragment_coord(t, i, n)
            seen.add(rc)
            assert wgmma.fragment_owner(*rc, n) == (t, i)
    assert len(seen) == 64 * n


def test_fragment_matches_the_isa_statement_and_the_cute_layout():
    # ISA: warp w owns rows 16w..16w+15; lane l holds rows 16w + l/4 and + 8, columns 8j + 2(l%4) + {0, 1}
    for t in range(128):
        w, l = divmod(t, 32)
        cells = {wgmma.fragment_coord(t, i, 64) for i in range(32)}
        assert cells == {(16 * w + l // 4 + 8 * h, 8 * j + 2 * (l % 4) + b)
                         for h in (0, 1) for j in range(8) for b in (0, 1)}
    # CuTe's CLayout_64xN: thread (4, 8, 4) : (128, 1, 16), value (2, 2, N/8) : (64, 8, 512), index = row + 64 col
    for t in range(128):
        for i in range(64):
            idx = (t % 4) * 128 + (t // 4 % 8) * 1 + (t // 32) * 16 + (i % 2) * 64 + (i // 2 % 2) * 8 + (i // 4) * 512
            assert wgmma.fragment_coord(t, i, 128) == (idx % 64, idx // 64)


def test_fragment_rejects_what_no_warpgroup_has():
    for bad in [(128, 0, 64), (0, 32, 64), (0, 0, 12)]:
        with pytest.raises(ValueError):
            wgmma.fragment_coord(*bad)


def test_fragment_drawing_renders():
    fig = wgmma.draw_fragment(16)
    assert fig.axes and fig.axes[0].get_title()


# ----------------------------------------------------------------------------- the SASS
@pytest.mark.parametrize("swizzle", [128, 64, 32])
def test_sass_carries_the_descriptor_bits_encode_gives(swizzle):
    """wgmma_tile.cu builds its descriptors by hand; ptxas folds their high words into immediates,
    and those are exactly encode()'s bits 32-63: SBO = 8 rows x span, layout 1/2/3."""
    b = build.compile(TILE_CU, defines={"SWIZZLE": swizzle})
    words = wgmma.sass_descriptor_words(b.sass_of("wgmma_tile"))
    want = wgmma.kmajor_descriptor(0x400, f"{swizzle}B") >> 32
    assert len(words) == 4                                       # K = 64: four k16 slices
    assert all(a == want and bb == want for a, bb in words), (words, hex(want))
    assert b.uses("wgmma") and b.uses("proxy.fence")
    assert "WARPGROUP.ARRIVE" in b.sass and "WARPGROUP.DEPBAR" in b.sass
    assert b.resources["wgmma_tile"]["spill_stores"] == 0


# ----------------------------------------------------------------------------- the ring model
def test_ring_model_one_slot_is_serial_and_many_slots_hide_the_shorter_side():
    one = wgmma.ring_schedule(tiles=6, S=1, load=3, mma=2, consumers=2)
    assert one["consumers"][0][-1][1] == 6 * (3 + 2)                    # load, compute, load, compute...
    deep = wgmma.ring_schedule(tiles=6, S=4, load=3, mma=2, consumers=2)
    assert deep["consumers"][1][-1][1] == 6 * 3 + 2                     # load-bound: loads back to back
    mma_bound = wgmma.ring_schedule(tiles=6, S=4, load=1, mma=3)
    assert mma_bound["consumers"][0][-1][1] == 1 + 6 * 3                # MMA-bound: computes back to back
    for ring in (one, deep, mma_bound):                                 # no slot refilled before release
        S = 1 if ring is one else 4
        for i in range(S, 6):
            assert ring["producer"][i][0] >= max(c[i - S][1] for c in ring["consumers"])
    sched = wgmma.schedules(deep)
    assert list(sched) == ["consumer 0", "consumer 1"] and len(sched["consumer 0"][0]) == 4


# ----------------------------------------------------------------------------- the exercises
IDS = ["wgmma_descriptor", "wgmma_fragment", "ws_ring_phases"]
EXS = {i: exercise.get(i) for i in IDS}
STARTER_SAYS = {"wgmma_descriptor": ["encode", "NotImplementedError"],
                "wgmma_fragment": ["coord", "NotImplementedError"],
                "ws_ring_phases": ["start", "NotImplementedError"]}


# the files whose messages the tests below read (every verdict is tests/grading/test_exercises.py's)
STORIES = [("wgmma_descriptor", "wrong_layout_codes_reversed.py"), ("wgmma_descriptor", "wrong_sbo_one_row.py"),
           ("ws_ring_phases", "wrong_empty_count_one.py"), ("ws_ring_phases", "wrong_producer_starts_phase_0.py"),
           ("ws_ring_phases", "wrong_consumer_starts_phase_1.py"), ("ws_ring_phases", "wrong_advance_counts_calls.py"),
           ("wgmma_descriptor", "wrong_start_16_bits.py"), ("wgmma_fragment", "wrong_n_power_of_two_only.py")]


@pytest.fixture(scope="module")
def graded(shared_gradings):
    """Each file graded as a learner's is (grade.check), once for every module that reads it (tests/gradings.py)."""
    jobs = [(i, ex.starter_path) for i, ex in EXS.items()] + [(i, EXS[i].fixture_path(n)) for i, n in STORIES]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = pool.map(lambda job: shared_gradings.check(job[0], job[1]), jobs)
        return {(i, p.name): r for (i, p), r in zip(jobs, results)}


@pytest.mark.parametrize("ex_id", IDS)
def test_untouched_starter_is_wrong_and_says_what_to_do(graded, ex_id):
    r = graded[(ex_id, "starter.py")]
    assert r.verdict == Verdict.WRONG, str(r)
    for words in STARTER_SAYS[ex_id]:
        assert words in r.message, r.message


def test_descriptor_failures_name_the_field_and_the_misread_element(graded):
    r = graded[("wgmma_descriptor", "wrong_layout_codes_reversed.py")]
    assert "bits 62-63" in r.message and "you have 3, expected 1" in r.message
    r = graded[("wgmma_descriptor", "wrong_sbo_one_row.py")]
    assert "stride byte offset" in r.message and any("wgmma would read A[8][0]" in d for d in r.details)


def test_ring_failures_name_lap_slot_and_parity(graded):
    r = graded[("ws_ring_phases", "wrong_empty_count_one.py")]
    assert "overwrite at lap 1, slot 0" in r.message and "consumer 1 had not released" in r.message
    r = graded[("ws_ring_phases", "wrong_producer_starts_phase_0.py")]
    assert "deadlock" in r.message and "waits on empty[0] with parity 0" in r.message
    r = graded[("ws_ring_phases", "wrong_consumer_starts_phase_1.py")]
    assert "early read" in r.message and "full[0] (parity 1)" in r.message


def test_mistakes_the_old_checks_never_tried_are_named(graded):
    r = graded[("ws_ring_phases", "wrong_advance_counts_calls.py")]
    assert r.message.startswith("advance(state=(3, 1), S=5)") and "not only on those that follow" in r.details[0]
    r = graded[("wgmma_descriptor", "wrong_start_16_bits.py")]
    assert "start=221184" in r.message and any("above 64 KiB" in d for d in r.details), str(r)
    r = graded[("wgmma_fragment", "wrong_n_power_of_two_only.py")]
    assert "n=24" in r.message and any("N = 24" in d for d in r.details), str(r)
    for key in STORIES:                                   # every failure can be replayed
        assert any(flow.SEED_ENV in d for d in graded[key].details) or "S=" in graded[key].message, str(graded[key])


#: wrong fixtures whose mistake the inputs drawn per run must find without the statement's listed cases;
#: the ring's other mistakes are found by its simulation, which runs first and is not drawn
FOUND_BY_DRAWING = {
    "wgmma_descriptor": [n for n in EXS["wgmma_descriptor"].fixtures if n.startswith("wrong_")],
    "wgmma_fragment": [n for n in EXS["wgmma_fragment"].fixtures if n.startswith("wrong_")],
    "ws_ring_phases": ["wrong_advance_counts_calls.py"],
}


@pytest.mark.parametrize("job", [(i, n) for i in IDS for n in FOUND_BY_DRAWING[i]], ids=lambda j: f"{j[0]}/{j[1]}")
def test_drawn_inputs_alone_find_each_mistake(job):
    ex_id, name = job
    r = graded_here(ex_id, EXS[ex_id].fixture_path(name), drawn_only=True, seed=20261201)
    assert r.verdict == Verdict.WRONG, str(r)
    assert "drawn at random and shrunk" in " ".join(r.details) and "seed 20261201" in " ".join(r.details), str(r)


@pytest.mark.parametrize("ex_id", IDS)
def test_the_solution_passes_on_drawn_inputs_and_the_checks_need_no_solution_file(ex_id):
    r = graded_here(ex_id, EXS[ex_id].solution_path, drawn_only=True, seed=7)
    assert r.verdict == Verdict.PASS and "seed 7" in r.message, str(r)
    assert "reference()" not in (EXS[ex_id].folder / "check.py").read_text()


@pytest.mark.parametrize("ex_id", IDS)
def test_numpy_scalars_are_numbers(ex_id):
    """A right answer returning NumPy integers (int64, a uint64 descriptor) passes, called in this very process too."""
    assert EXS[ex_id].fixtures["correct_numpy_scalars.py"] == "PASS"
    r = graded_here(ex_id, EXS[ex_id].fixture_path("correct_numpy_scalars.py"), seed=3)
    assert r.verdict == Verdict.PASS, str(r)


def test_exercise_references_agree_with_judge_wgmma():
    desc = EXS["wgmma_descriptor"].reference()
    for sw in ("none", "32B", "64B", "128B"):
        for start in (0x400, 0x8400):
            assert desc.encode(start, 16, 1024, sw, 3) == wgmma.encode(start, 16, 1024, sw, 3)
            for k in range(4):
                d = desc.tile_descriptor(start, sw, k)
                for row in range(0, 64, 5):
                    for kk in range(16):
                        assert wgmma.operand_address(d, row, kk) == \
                            start + wgmma.kmajor_offset(row, 16 * k + kk, sw, k_elems=64)
    frag = EXS["wgmma_fragment"].reference()
    for n in (8, 96, 256):
        for t in range(0, 128, 7):
            for i in range(n // 2):
                assert frag.coord(t, i, n) == wgmma.fragment_coord(t, i, n)


@pytest.mark.parametrize("swizzle", [128, 32])
def test_tile_kernel_runs_right_on_the_cpu_model(swizzle):
    """wgmma_tile's own PTX on judge.model: fences, proxy fence and fragment stores obeyed, C = A B^T."""
    import ml_dtypes

    from judge.grading import compare
    from judge import model
    rng = np.random.default_rng()
    a = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16)
    c = np.full((64, 64), np.nan, np.float32)
    model.run(build.compile(TILE_CU, defines={"SWIZZLE": swizzle}), "wgmma_tile", grid=(1, 1, 1),
              block=(128, 1, 1), args=(a.view(np.uint16).copy(), b.view(np.uint16).copy(), c, np.zeros(1, np.uint32)))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    atol = 4 * 64 * 2.0 ** -24 * float((np.abs(a64) @ np.abs(b64).T).max())
    cmp = compare.compare(c, a64 @ b64.T, rtol=0, atol=atol, case=f"SWIZZLE={swizzle}")
    assert cmp.ok, cmp.message


def test_base_offset_is_zero_on_the_pattern_boundary_and_the_isa_formula_elsewhere():
    assert [wgmma.base_offset_for(a, "128B") for a in (0, 1024, 0x8400)] == [0, 0, 0]
    assert wgmma.base_offset_for(1024 + 3 * 128, "128B") == 3
    assert wgmma.base_offset_for(512, "64B") == 0 and wgmma.base_offset_for(256, "32B") == 0
    assert wgmma.base_offset_for(128, "64B") == 1

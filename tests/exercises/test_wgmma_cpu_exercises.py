"""The CPU exercises of chapter 4 (wgmma_descriptor, wgmma_fragment, ws_ring_phases): what their messages tell a
learner, what drawn inputs alone find, and their references against judge.hw.wgmma (every verdict itself is
tests/grading/test_exercises.py's).

Run: python -m pytest tests/exercises/test_wgmma_cpu_exercises.py -q      (no GPU; each grade runs in a child process)
"""
from concurrent.futures import ThreadPoolExecutor

import pytest

from judge.grading import cpu_flow as flow
from judge.grading import exercise
from judge.hw import wgmma
from judge.grading.grade import Verdict

from tests.checking import graded_here

TILE_CU = "chapters/ch04_wgmma/wgmma_tile.cu"


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

"""umma_descriptor: what its verdicts say (the verdicts themselves are tests/grading/test_exercises.py's).

Run: python -m pytest tests/exercises/test_umma_descriptor.py -q
Each classic mistake is named in the learner's terms: the field and its bits, the element the MMA would
read from the wrong byte, and the rule (LBO/SBO roles in MN-major, which transpose bit is whose, when a
base offset is needed). The starter says what to do; the correct alternative passes.
"""
import pytest

from judge.grading import exercise
from judge.grading.result import Verdict

from tests.checking import graded_here

EX = exercise.get("umma_descriptor")

SAYS = {
    "wrong_lbo_sbo_not_swapped.py": ["leading byte offset", "would read element", "LBO and SBO are exchanged"],
    "wrong_transpose_bits_swapped.py": ["transpose A", "bit 15 is A's major, bit 16 is B's"],
    "wrong_base_offset_zero.py": ["base offset, bits 49-51", "would read element", "(start >> 7) & 7"],
    "wrong_wgmma_swizzle_codes.py": ["bits 61-63", "you have 1, expected 2"],
    "wrong_no_fixed_bits.py": ["fixed value 0b001, bits 46-48"],
    "wrong_mn_slice_one_group.py": ["start address", "would read element"],
}


@pytest.mark.parametrize("name", sorted(SAYS))
def test_each_mistake_is_named_with_its_field_and_its_consequence(name):
    r = graded_here("umma_descriptor", EX.fixture_path(name))
    assert r.verdict == Verdict.WRONG, str(r)
    for phrase in SAYS[name]:
        assert phrase in str(r), (phrase, str(r))


def test_the_starter_says_what_to_fill_in_and_the_alternative_passes():
    r = graded_here("umma_descriptor", EX.starter_path)
    assert r.verdict == Verdict.WRONG and "NotImplementedError" in str(r) and "smem_descriptor" in str(r), str(r)
    r = graded_here("umma_descriptor", EX.fixture_path("correct_from_layouts.py"))
    assert r.verdict == Verdict.PASS, str(r)

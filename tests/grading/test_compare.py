"""Checking against references: poisoned outputs cannot pass, failures name where and what."""
import numpy as np

from judge.grading import compare


def test_unwritten_elements_fail_and_are_counted():
    ref = np.random.default_rng(1).standard_normal((4, 5))
    got = compare.poison(np.empty((4, 5), dtype=np.float32))
    got[:2] = ref[:2]
    c = compare.compare(got, ref, rtol=1e-5, atol=1e-6, case="half written")
    assert not c.ok
    assert c.n_unwritten == 10
    assert "never written" in c.message and "half written" in c.message
    assert c.first[0][0] == (2, 0)


def test_a_wrong_value_is_reported_with_coordinates_got_and_expected():
    ref = np.arange(12, dtype=np.float64).reshape(3, 4)
    got = ref.astype(np.float32)
    got[1, 2] = 99
    c = compare.compare(got, ref, rtol=1e-6, atol=0)
    assert not c.ok and c.n_bad == 1
    assert "(1, 2)" in c.message and "99" in c.message and "expected 6" in c.message


def test_float32_rounding_passes_and_the_norm_limit_is_enforced():
    rng = np.random.default_rng(2)
    ref = rng.standard_normal(1000)
    got = ref.astype(np.float32)
    assert compare.compare(got, ref, rtol=1e-6, atol=1e-7, norm_tol=1e-6).ok
    got2 = got * np.float32(1.001)
    c = compare.compare(got2, ref, rtol=1e-2, atol=0, norm_tol=1e-4)
    assert not c.ok and c.rel_err > 1e-4


def test_integers_are_compared_exactly_and_poisoned_with_a_sentinel():
    ref = np.arange(10, dtype=np.int32)
    got = compare.poison(np.empty(10, dtype=np.int32))
    assert (got == compare.INT_POISON).all()
    got[:] = ref
    assert compare.compare(got, ref).ok
    got[3] += 1
    assert not compare.compare(got, ref).ok


def test_shape_mismatch_is_a_failure():
    assert not compare.compare(np.zeros(3), np.zeros(4)).ok


def test_a_norm_only_comparison_accepts_an_exact_zero():
    # rtol = atol = inf leaves only the norm; inf * 0 must not turn a right 0 into NaN and so into "wrong"
    ref = np.array([0.0, 1.0, -2.0])
    assert compare.compare(np.array([0.0, 1.0, -2.0], np.float32), ref, rtol=np.inf, atol=np.inf, norm_tol=1e-3).ok
    assert not compare.compare(np.array([np.nan, 1.0, -2.0]), ref, rtol=np.inf, atol=np.inf, norm_tol=1e-3).ok
    assert not compare.compare(np.array([0.5, 1.0, -2.0]), ref, rtol=np.inf, atol=np.inf, norm_tol=1e-3).ok
    # a finite atol still holds at a zero reference when rtol is inf
    assert not compare.compare(np.array([0.5, 1.0, -2.0]), ref, rtol=np.inf, atol=0.1).ok


def _bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> the nearest bf16 value (as float32), ties to even, through float32 (exact enough here)."""
    u = x.astype(np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return u.view(np.float32)


def _ws_gemm_tolerance(k):
    from judge.grading import exercise
    return exercise.import_file(exercise.get("ws_gemm").folder / "check.py", "check_ws_gemm_tol").tolerance({"k": k})


def test_only_the_wrong_rows_count_when_the_norm_fails():
    # ws_gemm's C (bf16, 256 x 128) with rows 64-127 taken from another tile and the rest correctly
    # rounded: the message once counted every element that differed at all ("32765 of 32768 elements
    # wrong ... First: at (0, 0) got 5.0625 expected 5.07401", a right bf16 value)
    rng = np.random.default_rng(3)
    K = 64
    ref = rng.standard_normal((256, K)) @ rng.standard_normal((K, 128))
    got = _bf16(ref)
    got[64:128] = _bf16(rng.standard_normal((64, K)) @ rng.standard_normal((K, 128)))
    c = compare.compare(got, ref, case="c", **_ws_gemm_tolerance(K))
    assert not c.ok and c.n_unwritten == 0
    assert 64 * 128 * 0.95 <= c.n_bad <= 64 * 128       # the wrong rows (a random value may land close)
    assert c.first_wrong[0][0][0] == 64                  # the first wrong element is in row 64
    assert f"{c.n_bad} of 32768 written elements wrong" in c.message and "at (64, " in c.message
    assert "at (0, 0)" not in c.message


def test_unwritten_and_wrong_are_counted_apart_each_with_its_first():
    # "65535 of 65536 wrong" where 16,384 elements were unwritten and the rest right within bf16 rounding
    rng = np.random.default_rng(4)
    K = 64
    ref = rng.standard_normal((256, K)) @ rng.standard_normal((K, 256))
    got = _bf16(ref)
    got[192:] = np.nan                                   # a quarter never written
    c = compare.compare(got, ref, case="c", **_ws_gemm_tolerance(K))
    assert not c.ok and c.n_unwritten == 64 * 256 and c.n_bad == 0
    assert "16384 of 65536 elements were never written (still poisoned), first at (192, 0)" in c.message
    assert "every written element is within the tolerance" in c.message and "wrong" not in c.message
    got[5, 7] += 1.0                                     # and one written element wrong
    c = compare.compare(got, ref, case="c", **_ws_gemm_tolerance(K))
    assert c.n_bad == 1 and c.first_wrong[0][0] == (5, 7) and c.first_unwritten[0][0] == (192, 0)
    assert "1 of 65536 written elements wrong (outside the tolerance), first: at (5, 7)" in c.message


def test_a_norm_only_comparison_counts_an_element_wrong_beyond_its_share_of_the_norm():
    # rtol = atol = inf: each element's limit is norm_tol * rms(ref), so a failed norm names at least one
    rng = np.random.default_rng(5)
    ref = rng.standard_normal(1000)
    got = ref * (1 + 1e-4)                               # every element off a little: the norm holds
    assert compare.compare(got, ref, rtol=np.inf, atol=np.inf, norm_tol=1e-3).ok
    got[17] += 1.0                                       # one element far off: the norm fails
    c = compare.compare(got, ref, rtol=np.inf, atol=np.inf, norm_tol=1e-3)
    assert not c.ok and c.n_bad == 1 and c.first_wrong[0][0] == (17,)


def test_a_norm_failure_within_every_elements_limit_shows_the_largest_differences():
    ref = np.linspace(1.0, 2.0, 100)
    got = ref * (1 + 5e-3)                               # within rtol 1e-2 each, the norm over 1e-3
    c = compare.compare(got, ref, rtol=1e-2, atol=0, norm_tol=1e-3)
    assert not c.ok and c.n_bad == 0
    assert "within its own tolerance, but together they are not" in c.message and "at (99,)" in c.message


def test_integer_poison_is_unwritten_not_wrong():
    ref = np.arange(8, dtype=np.int32)
    got = ref.copy()
    got[2] = compare.INT_POISON
    got[5] = 0
    c = compare.compare(got, ref)
    assert (c.n_unwritten, c.n_bad) == (1, 1) and c.first_unwritten[0][0] == (2,) and c.first_wrong[0][0] == (5,)


def test_a_norm_only_comparison_that_holds_counts_no_element_wrong():
    ref = np.ones(100)
    got = ref.copy()
    got[0] += 5e-3                                       # beyond norm_tol * rms alone, the norm still within
    assert compare.compare(got, ref, rtol=np.inf, atol=np.inf, norm_tol=1e-3).ok

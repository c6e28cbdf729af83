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

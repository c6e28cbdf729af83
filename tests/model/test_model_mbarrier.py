"""tests/model/test_model_mbarrier.py - the one mbarrier phase model (judge.hw.mbarrier) against the PTX ISA's rules.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_mbarrier.py -q
"""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from judge.hw.mbarrier import Mbarrier


def test_a_fresh_barrier_is_in_phase_0_so_parity_1_is_already_complete():
    b = Mbarrier(2)
    assert (b.phase, b.parity, b.pending, b.tx) == (0, 0, 2, 0)
    assert b.test_wait_parity(1) and not b.test_wait_parity(0)


def test_the_phase_completes_with_the_last_arrival_and_the_counts_reset():
    b = Mbarrier(3)
    assert not b.arrive() and not b.arrive()
    assert not b.test_wait_parity(0)
    assert b.arrive()
    assert (b.phase, b.pending, b.parity) == (1, 3, 1)
    assert b.test_wait_parity(0) and not b.test_wait_parity(1)


def test_arrivals_alone_do_not_complete_a_phase_that_waits_for_bytes():
    b = Mbarrier(1)
    assert not b.arrive(expect_tx=4096)
    assert (b.pending, b.tx) == (0, 4096)
    assert not b.complete_tx(4000)
    assert b.complete_tx(96)
    assert (b.phase, b.tx, b.tx_expected, b.tx_done) == (1, 0, 0, 0)


def test_bytes_may_arrive_before_they_are_expected():
    b = Mbarrier(1)
    assert not b.complete_tx(512)          # the tx-count goes negative, the phase stays open
    assert b.tx == -512 and b.phase == 0
    assert b.arrive(expect_tx=512)


def test_the_state_form_waits_for_the_phase_the_arrive_saw():
    b = Mbarrier(2)
    s = b.state()
    b.arrive()
    assert not b.test_wait_state(s)
    b.arrive()
    assert b.test_wait_state(s) and not b.test_wait_state(b.state())


def test_arrive_drop_lowers_the_count_of_every_later_phase():
    b = Mbarrier(3)
    b.arrive()
    b.arrive()
    assert b.arrive_drop()                 # 3 arrivals made phase 0 complete; 2 expected from now on
    assert b.count == 2 and b.pending == 2
    b.arrive()
    assert b.arrive() and b.phase == 2


def test_more_arrivals_than_the_count_are_flagged_and_never_complete():
    b = Mbarrier(1)
    b.expect_tx(16)
    b.arrive()
    b.arrive()
    assert b.over_arrived
    assert not b.complete_tx(16) and b.phase == 0


def test_cp_async_arrive_without_noinc_raises_the_pending_count_first():
    b = Mbarrier(1)
    b.add_pending(1)
    assert not b.arrive()                  # the thread's own arrival
    assert b.arrive() and b.phase == 1     # the copies' arrival completes it


@settings(max_examples=60, deadline=None)
@given(count=st.integers(1, 8), chunks=st.lists(st.integers(1, 4096), min_size=0, max_size=4),
       rounds=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_each_phase_completes_exactly_once_whatever_the_order_of_arrivals_and_bytes(count, chunks, rounds, seed):
    rng = random.Random(seed)
    b = Mbarrier(count)
    for r in range(rounds):
        total = sum(chunks)
        events = [("arrive", total if i == 0 else 0) for i in range(count)] + [("bytes", c) for c in chunks]
        rng.shuffle(events)
        completions = 0
        for k, (kind, n) in enumerate(events):
            done = b.arrive(expect_tx=n) if kind == "arrive" else b.complete_tx(n)
            completions += done
            assert done == (k == len(events) - 1), (r, k, events)
        assert completions == 1 and b.phase == r + 1 and b.parity == (r + 1) % 2
        assert b.test_wait_parity(r % 2) and not b.test_wait_parity((r + 1) % 2)

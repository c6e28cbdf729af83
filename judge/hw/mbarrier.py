"""judge.hw.mbarrier - the mbarrier phase rules of the PTX ISA, in pure Python (no NumPy, no GPU).

    from judge.hw.mbarrier import Mbarrier
    b = Mbarrier(count=1)              # mbarrier.init: phase 0, pending arrivals = count, tx-count 0
    b.arrive(expect_tx=4096)           # mbarrier.arrive.expect_tx: tx-count += 4096, then one arrival
    b.complete_tx(4096)                # the TMA's complete-tx: tx-count -= 4096 -> phase 0 completes
    b.test_wait_parity(0)              # True: the phase of parity 0 has completed
    b.phase, b.parity                  # 1, 1: the current (incomplete) phase and its parity

Run its tests: .venv/bin/python -m pytest tests/model/test_model_mbarrier.py -q

What the PTX ISA states (section "Parallel Synchronization and Communication Instructions: mbarrier",
its subsections "Phase Completion of the mbarrier object", "Tracking asynchronous operations by the
mbarrier object" and "mbarrier.test_wait / mbarrier.try_wait"), and how this class models it:

- mbarrier.init sets the current phase to 0, the pending arrival count and the expected arrival
  count to `count` (1 .. 2^20 - 1), and the tx-count to 0.
- An arrive-on operation (mbarrier.arrive, arrive_drop, cp.async.mbarrier.arrive's arrival, the
  tcgen05.commit arrival) decrements the pending count by its count (default 1). arrive_drop also
  decrements the expected count, for this and every later phase.
- expect-tx(n) increments the tx-count by n; complete-tx(n) decrements it by n (an async copy's
  bytes, counted when they have been written). The tx-count may go below zero between the two.
- The current phase completes when the pending count and the tx-count are both zero. Then the
  phase number advances (its parity flips), the pending count is reset to the expected count and
  the tx-count stays 0. Every method that changes a count returns True when it completed a phase.
- Waiting: test_wait/try_wait with `.parity p` succeed once the phase of parity p has completed,
  i.e. when the current phase's parity differs from p (a freshly initialised barrier is in phase
  0: waiting on parity 1 succeeds at once, waiting on parity 0 waits for the first completion).
  The state form waits on the opaque state an arrive returned: it succeeds once the phase that
  arrive saw has completed (test_wait_state).

Arrivals past zero are not defined by the PTX ISA; `over_arrived` says that the pending count went
negative (the model reports it as rule "mbarrier-arrivals"), and such a phase never completes.

Fields: count (expected arrivals per phase), pending, tx, phase (number of completed phases),
tx_expected / tx_done (bytes expected and delivered in the current phase, for messages).
"""
from __future__ import annotations

MAX_COUNT = (1 << 20) - 1          # PTX: the arrival count of mbarrier.init is 1 .. 2^20 - 1


class Mbarrier:
    """One mbarrier object: its phase, pending arrivals and tx-count (see the module docstring)."""

    def __init__(self, count: int):
        self.count = int(count)
        self.pending = int(count)
        self.tx = 0
        self.phase = 0
        self.tx_expected = 0
        self.tx_done = 0

    @property
    def parity(self) -> int:
        """The parity of the current (not yet completed) phase."""
        return self.phase & 1

    @property
    def over_arrived(self) -> bool:
        """More arrivals than the expected count reached this phase."""
        return self.pending < 0

    def _maybe_complete(self) -> bool:
        if self.pending != 0 or self.tx != 0:
            return False
        self.phase += 1
        self.pending = self.count
        self.tx_expected = self.tx_done = 0
        return True

    def add_pending(self, n: int = 1) -> None:
        """Raise the pending count (cp.async.mbarrier.arrive without .noinc does, before its arrival)."""
        self.pending += int(n)

    def arrive(self, count: int = 1, expect_tx: int = 0) -> bool:
        """mbarrier.arrive[.expect_tx]: expect-tx(expect_tx), then `count` arrivals. True if the phase completed."""
        if expect_tx:
            self.expect_tx(expect_tx)
        self.pending -= int(count)
        return self._maybe_complete()

    def arrive_drop(self, count: int = 1) -> bool:
        """mbarrier.arrive_drop: one fewer expected arrival from now on, and `count` arrivals now."""
        self.count -= 1
        return self.arrive(count)

    def expect_tx(self, nbytes: int) -> bool:
        """expect-tx: the tx-count grows by nbytes (bytes that a later complete-tx will deliver)."""
        self.tx += int(nbytes)
        self.tx_expected += int(nbytes)
        return self._maybe_complete()

    def complete_tx(self, nbytes: int) -> bool:
        """complete-tx: nbytes were delivered; the tx-count shrinks by nbytes."""
        self.tx -= int(nbytes)
        self.tx_done += int(nbytes)
        return self._maybe_complete()

    def state(self) -> int:
        """The opaque state an arrive returns: here the number of the phase it arrived in."""
        return self.phase

    def test_wait_parity(self, parity: int) -> bool:
        """test_wait/try_wait.parity: has the phase of this parity completed?"""
        return (self.phase & 1) != (int(parity) & 1)

    def test_wait_state(self, state: int) -> bool:
        """test_wait/try_wait with a state from arrive: has that phase completed?"""
        return self.phase > int(state)

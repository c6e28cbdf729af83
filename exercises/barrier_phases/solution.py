"""phases.py - which slot and which phase parity each side of an S-slot mbarrier ring waits on.

Your task: fill in consumer_wait() and producer_wait(). Check with
    python practice/judge.py check barrier_phases

The ring: slot s has a buffer and two mbarriers, full[s] and empty[s], each initialized with
an arrival count of 1. Iteration i uses slot i % S.
  producer: wait(empty[s]); arrive.expect_tx(full[s], bytes); issue the TMA load into slot s
  (the TMA completes those bytes on full[s], which ends full[s]'s phase)
  consumer: wait(full[s]); use slot s; arrive(empty[s])

The rule (PTX ISA, mbarrier.test_wait / mbarrier.try_wait): an mbarrier starts in phase 0;
try_wait.parity(p) may only name the current phase or the one just before it, and returns
true when the phase of parity p has completed, i.e. when p differs from the current phase's
parity. Right after init the current phase is 0, so waiting with parity 1 asks about the
phase before phase 0 and returns at once.
"""


def consumer_wait(i, S):
    """(slot, parity) the consumer waits on full[slot] with, at iteration i of an S-slot ring."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("consumer_wait: which slot, and which phase of full[slot] ends iteration i's load?")
    lap = i // S                  # how many times slot i % S was filled before this one
    return i % S, lap % 2         # lap k of a slot ends phase k of full[slot]
    # END SOLUTION


def producer_wait(i, S):
    """(slot, parity) the producer waits on empty[slot] with, at iteration i of an S-slot ring."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("producer_wait: which slot, and which phase of empty[slot] frees it?")
    lap = i // S
    # Lap k needs the consumer's release of lap k - 1, which ends phase k - 1 of empty[slot].
    # On lap 0 that is "phase -1" (parity 1): the phase before the first, counted as complete.
    return i % S, (lap + 1) % 2
    # END SOLUTION

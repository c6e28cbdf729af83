"""online_softmax.py - the online softmax of attention, block by block (chapter 6).

An attention kernel never holds a whole row of scores: it sees the keys one block at a time and keeps,
per row, the running maximum m, the running sum l of exp(score - m), and the output accumulator. When a
block raises m, what was summed so far was summed against the old maximum: l and the accumulator are
multiplied by exp(m_old - m_new) before the block's own terms are added. README.md states every rule.
Check it: python practice/judge.py check online_softmax
"""
import numpy as np


def online_softmax(scores, values, block):
    """(out, lse) of softmax(scores) @ values, reading the columns of scores (rows of values) in blocks.

    scores: (R, N) float64, finite or -inf; values: (N, d) float64; block: keys per step, >= 1 (the last
    block may be shorter). out: (R, d) float64; lse: (R,) float64, log(sum_j exp(scores[:, j])).
    A row whose scores are all -inf: out row 0, lse -inf.
    """
    scores = np.asarray(scores, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    R, N = scores.shape
    m = np.full(R, -np.inf)                  # running maximum per row
    l = np.zeros(R)                          # running sum of exp(score - m)
    acc = np.zeros((R, values.shape[1]))     # running sum of exp(score - m) * value
    # BEGIN SOLUTION
    #> for start in range(0, N, block):
    #>     s = scores[:, start:start + block]
    #>     v = values[start:start + block]
    #>     raise NotImplementedError("the new maximum, the rescale of l and acc, then this block's terms")
    for start in range(0, N, block):                   # the last block may be shorter
        s = scores[:, start:start + block]
        v = values[start:start + block]
        m_new = np.maximum(m, s.max(axis=1))
        # A row with every score so far -inf keeps m = -inf: subtract 0 instead, so that
        # exp(-inf - 0) = 0 and never exp(-inf - (-inf)) = exp(nan).
        m_use = np.where(np.isneginf(m_new), 0.0, m_new)
        alpha = np.exp(m - m_use)                      # 0 on the first block (m = -inf)
        p = np.exp(s - m_use[:, None])                 # every term <= 1: no overflow, however large s is
        l = l * alpha + p.sum(axis=1)
        acc = acc * alpha[:, None] + p @ v
        m = m_new
    # END SOLUTION
    # BEGIN SOLUTION
    #> raise NotImplementedError("out = acc / l and lse = m + log(l), and what a fully masked row gives")
    masked = l == 0
    out = acc / np.where(masked, 1.0, l)[:, None]
    lse = np.where(masked, -np.inf, m + np.log(np.where(masked, 1.0, l)))
    return out, lse
    # END SOLUTION

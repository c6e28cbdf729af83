"""The CPU model's run of a pipeline, as the course's timeline (judge.model.replay).

Run: python -m pytest tests/model/test_model_replay.py -q      (no GPU)
A 3-stage cp.async SGEMM over 8 k-tiles: each tile's copy lands when a wait covers it (the model's
last legal moment), no more than 3 tiles ever hold a buffer, and compute k never starts before its
copy landed nor before compute k-1 ended.
"""
import numpy as np

from judge.gpu import build
from judge.grading import compare, exercise, fixtures
from judge import model
from judge.draw import timeline


def _run(path, K=64):
    mod = exercise.import_file("exercises/cp_async_sgemm/check.py", "cp_async_sgemm_check_replay")
    case = {"M": 128, "N": 128, "K": K}
    ins = mod.inputs(case, np, np.random.default_rng())
    outs = mod.outputs(case, ins, np)
    compare.poison(outs["C"])
    rep = model.run(build.compile(fixtures.resolve(path)), "sgemm_pipelined", grid=(1, 1, 1), block=(256, 1, 1),
                    args=(np.int32(128), np.int32(128), np.int32(K), ins["A"], ins["B"], outs["C"]),
                    shared_bytes=3 * 8192)
    return rep, outs["C"], mod.reference(case, ins)["C"]


def test_the_model_replays_a_three_stage_pipeline_as_the_course_draws_it():
    rep, C, ref = _run("exercises/cp_async_sgemm/solution.cu")
    assert compare.compare(C, ref, rtol=1e-5, atol=1e-4).ok
    sched = model.replay.schedule(rep)
    assert len(sched) == 8                                        # one stage per k-tile
    for k, (cs, ce, ks, ke) in enumerate(sched):
        assert cs <= ce <= ks <= ke, (k, sched[k])                # issued, landed, then computed
        if k:
            assert ks >= sched[k - 1][3], "compute k starts after compute k-1 ended"
    assert max(n for _, n in timeline.occupancy(sched)) == 3      # S buffers, never more
    fig = model.replay.draw(rep, S=3)
    assert fig.axes and "CPU model" in fig.axes[0].get_title(loc="left")


def test_a_race_is_marked_where_the_model_found_it():
    try:
        _run("exercises/cp_async_sgemm/fixtures/wrong_wait_loose.cu")
    except model.Violation as v:
        assert "cp.async-wait" in str(v)
    else:
        raise AssertionError("a wait one group too loose must be a Violation")

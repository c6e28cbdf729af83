"""judge/draw/timeline.py, the drawing wing's timeline: buffer occupancy as steps, bars that overlap in time put
side by side, and one figure of two panels per schedule, drawn without pyplot. (The pipeline_timeline
exercise draws with it too: tests/exercises/test_pipeline_timeline.py.)

Run: python -m pytest tests/draw/test_timeline.py -q      (no GPU, no display)
"""
import pytest

from judge.draw import timeline

# two buffers, copies of 2 and computes of 3: tile 2's copy waits for tile 0's compute to free its buffer
TWO_BUFFERS = [(0, 2, 2, 5), (2, 4, 5, 8), (5, 7, 8, 11)]


def test_occupancy_counts_the_tiles_holding_a_buffer_from_copy_start_to_compute_end():
    assert timeline.occupancy(TWO_BUFFERS) == [(0, 1), (2, 2), (8, 1), (11, 0)]
    # tile 0 frees its buffer at 5 as tile 2 takes one: the count stays 2 and no step is drawn there
    assert (5, 2) not in timeline.occupancy(TWO_BUFFERS)


def test_bars_that_overlap_get_lanes_of_their_own_and_a_serial_schedule_one():
    lane_of, n = timeline._lanes([(0, 0, 2), (1, 2, 2), (2, 4, 2)])           # back to back
    assert n == 1 and set(lane_of.values()) == {0}
    lane_of, n = timeline._lanes([(0, 0, 4), (1, 1, 4), (2, 2, 1), (3, 6, 1)])  # three at once at t = 2
    assert n == 3 and len({lane_of[0], lane_of[1], lane_of[2]}) == 3 and lane_of[3] == 0


def test_draw_gives_two_axes_per_schedule_on_one_time_axis_and_says_when_each_ends(tmp_path):
    fig = timeline.draw({"S = 2": TWO_BUFFERS, "serial": [(0, 2, 2, 5), (5, 7, 7, 10)]}, S=2, title="t", unit="ns")
    assert len(fig.axes) == 4
    assert fig.axes[0].get_title(loc="left") == "S = 2: last compute ends at 11 ns"
    assert fig.axes[2].get_title(loc="left") == "serial: last compute ends at 10 ns"
    assert fig.axes[-1].get_xlabel() == "time (ns)"
    assert fig.axes[0].get_xlim() == fig.axes[2].get_xlim()                   # shared time axis
    out = tmp_path / "t.png"
    fig.savefig(out, dpi=50)
    assert out.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError):
        timeline.draw({})

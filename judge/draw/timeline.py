"""Timeline drawings: copies, computes and buffer occupancy of a multi-stage pipeline.

    from judge.draw import timeline
    fig = timeline.draw({"yours": mine, "reference": ref}, S=3, title="K=8, L=4, C=10, S=3")
    fig.savefig("timeline.png")                  # works without a display (no pyplot involved)
    timeline.occupancy(ref)                      # [(t, tiles holding a buffer from t on), ...]

A schedule is one (copy_start, copy_end, compute_start, compute_end) tuple per tile, in
tile order: what the pipeline_timeline exercise computes, and what a chapter measures on
the GPU (globaltimer or clock64 stamps per tile). Used by exercises/pipeline_timeline/check.py
and by the chapter notebooks. Try it: python -m judge.draw.timeline  (writes timeline_demo.png).
"""
from __future__ import annotations

from typing import Mapping, Sequence

Schedule = Sequence[Sequence[float]]

_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]


def occupancy(schedule: Schedule) -> list[tuple[float, int]]:
    """How many tiles hold a shared-memory buffer, as steps: [(t, n), ...] means n from t on.

    A tile holds its buffer from its copy's start until its compute's end: only then may the
    next copy overwrite it. Changes at the same instant are applied together (a compute that
    frees a buffer and the copy that reuses it at once leave the count unchanged), and a step
    that changes nothing is left out. The last step is back to 0. Empty schedule: [].
    """
    delta: dict[float, int] = {}
    for copy_start, _, _, compute_end in schedule:
        delta[copy_start] = delta.get(copy_start, 0) + 1
        delta[compute_end] = delta.get(compute_end, 0) - 1
    steps, n = [], 0
    for t in sorted(delta):
        n += delta[t]
        if not steps or steps[-1][1] != n:
            steps.append((t, n))
    return steps


def _lanes(spans):
    """Lane per bar so that bars that overlap in time sit side by side (a correct schedule: 1 lane)."""
    lane_end: list[float] = []
    lane_of = {}
    for k, start, width in sorted(spans, key=lambda s: (s[1], s[0])):
        for i, end in enumerate(lane_end):
            if end <= start:
                lane_of[k], lane_end[i] = i, start + width
                break
        else:
            lane_of[k] = len(lane_end)
            lane_end.append(start + width)
    return lane_of, max(1, len(lane_end))


def draw(schedules: Mapping[str, Schedule], *, S: int | None = None, title: str | None = None,
         unit: str = "cycles", rows: tuple[str, str] = ("copy engine", "compute"),
         occupancy_label: str = "buffers\nin use"):
    """One panel per named schedule, all on one time axis; returns a matplotlib Figure.

    Each panel: a "copy engine" row and a "compute" row (a bar per tile, labelled with its
    index, coloured by the buffer it uses when S is given), and beneath them the buffer
    occupancy as a step plot, with a dashed line at S when S is given. `rows` and
    `occupancy_label` rename the rows (chapter 5 draws tensor-core MMAs and their epilogue).
    """
    from matplotlib.figure import Figure          # no pyplot: nothing global, safe under Agg
    from matplotlib.ticker import MaxNLocator

    names = list(schedules)
    if not names:
        raise ValueError("draw() needs at least one schedule")
    fig = Figure(figsize=(10, 1.2 + 2.3 * len(names)), layout="constrained")
    axes = fig.subplots(2 * len(names), 1, sharex=True,
                        gridspec_kw={"height_ratios": [1.3, 1.0] * len(names)})
    ends = [t for s in schedules.values() for tile in s for t in tile]
    span = (max(ends) - min(ends)) if ends else 1.0
    span = span or 1.0
    for i, name in enumerate(names):
        sched = [tuple(float(t) for t in tile) for tile in schedules[name]]
        bars, occ = axes[2 * i], axes[2 * i + 1]
        for row, (a, b) in enumerate([(0, 1), (2, 3)]):      # row 0: copy engine, row 1: compute
            spans = [(k, tile[a], tile[b] - tile[a]) for k, tile in enumerate(sched)]
            lane_of, n_lanes = _lanes(spans)                  # overlapping bars get their own lane
            h = 0.7 / n_lanes
            for k, start, width in spans:
                y0 = (1 - row) - 0.35 + (n_lanes - 1 - lane_of[k]) * h
                color = _COLORS[(k % S if S else k) % len(_COLORS)]
                bars.broken_barh([(start, width)], (y0, h), facecolors=color,
                                 edgecolors="black", linewidth=0.6)
                if width >= 0.025 * span:                   # label only bars wide enough to read
                    bars.text(start + width / 2, y0 + h / 2, str(k), ha="center", va="center",
                              fontsize=8 if n_lanes == 1 else 6, color="white", fontweight="bold")
        bars.set_yticks([1, 0], list(rows))
        bars.set_ylim(-0.6, 1.6)
        end = max((t[3] for t in sched), default=0.0)
        bars.set_title(f"{name}: last compute ends at {end:g} {unit}", fontsize=10, loc="left")
        steps = occupancy(sched)
        if steps:
            xs = [t for t, _ in steps]
            ys = [n for _, n in steps]
            occ.step(xs, ys, where="post", color="black", linewidth=1.2)
            occ.fill_between(xs, ys, step="post", alpha=0.25, color="#4c72b0")
        if S is not None:
            occ.axhline(S, linestyle="--", color="#c44e52", linewidth=1)
            occ.text(1.0, S, f" S = {S}", transform=occ.get_yaxis_transform(), color="#c44e52",
                     fontsize=8, va="center", ha="left")
        top = max([n for _, n in steps] + [S or 0, 1])
        occ.set_ylim(0, top + 0.8)
        occ.set_ylabel(occupancy_label, fontsize=8)
        occ.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1].set_xlabel(f"time ({unit})")
    if ends:
        axes[-1].set_xlim(min(0.0, min(ends)) - 0.01 * span, max(ends) + 0.02 * span)
    if title:
        fig.suptitle(title)
    return fig


if __name__ == "__main__":
    # 8 tiles, copies of 4, computes of 10, 3 buffers: compute-bound after the first copy.
    demo = [(0, 4, 4, 14), (4, 8, 14, 24), (8, 12, 24, 34), (14, 18, 34, 44),
            (24, 28, 44, 54), (34, 38, 54, 64), (44, 48, 64, 74), (54, 58, 74, 84)]
    draw({"K=8, L=4, C=10, S=3": demo}, S=3).savefig("timeline_demo.png", dpi=100)
    print("wrote timeline_demo.png; occupancy:", occupancy(demo))

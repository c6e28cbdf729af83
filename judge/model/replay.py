"""A kernel's run on the CPU model, as a pipeline timeline drawn with the course's renderer.

    from judge import model
    rep = model.run(b, "sgemm_pipelined", grid=..., block=..., args=..., shared_bytes=...)
    sched = model.replay.schedule(rep)        # one (copy_start, copy_end, compute_start, compute_end) per stage
    fig = model.replay.draw(rep, S=3)         # judge.draw.timeline.draw, in model steps

What a tile's four times mean here (model steps, `t` of the report's events):
  copy_start    the first asynchronous copy of the tile is issued (cp.async of a commit group, or a TMA load)
  copy_end      its bytes land: for cp.async, when a wait that covers the group runs (the model delivers
                them at the last legal moment); for TMA, when the mbarrier phase completes
  compute_start the first barrier after the landing (every thread may now read the tile)
  compute_end   the next wait, or the end of the kernel: when the threads turn to the next tile
A violation the model found is returned with the schedule and marked on the drawing.
"""
from __future__ import annotations


def _events(rep, kind):
    return [e for e in rep.timeline if e.get("kind") == kind]


def schedule(rep) -> list[tuple[float, float, float, float]]:
    """The stages of a pipeline as the model ran them (see the module docstring)."""
    tl = sorted(rep.timeline, key=lambda e: e["t"])
    end = max((e["t"] for e in tl), default=0)
    copies = []                            # (issue t, land t) per group / TMA load, in issue order
    group_start = None
    for e in tl:
        k = e.get("kind")
        if k == "cp.async" and group_start is None:
            group_start = e["t"]
        elif k == "commit":
            copies.append([group_start, None]) if group_start is not None else None
            group_start = None
        elif k == "tma.load":
            copies.append([e["t"], None])
    lands = [e["t"] for e in tl if e.get("kind") == "land" and e.get("what", "cp.async") == "cp.async"]
    phases = [e["t"] for e in tl if e.get("kind") == "phase"]
    # groups land in commit order; a group of two copies lands twice at the same step
    land_steps = sorted(set(lands)) if lands else phases
    li = 0
    for c in copies:
        while li < len(land_steps) and land_steps[li] < c[0]:
            li += 1
        if li < len(land_steps):
            c[1] = land_steps[li]
            li += 1
    waits = sorted(e["t"] for e in tl if e.get("kind") in ("wait", "mbarrier.wait"))
    barriers = sorted(e["t"] for e in tl if e.get("kind") == "barrier")
    out = []
    for start, land in copies:
        if land is None:
            continue
        cs = next((b for b in barriers if b >= land), land)
        ce = next((w for w in waits if w > cs), end)
        out.append((float(start), float(land), float(cs), float(max(ce, cs))))
    return out


def draw(rep, *, S: int | None = None, title: str | None = None):
    """The model's run of one kernel as judge.draw.timeline.draw's picture (returns a matplotlib Figure)."""
    from judge.draw import timeline
    sched = schedule(rep)
    bad = _events(rep, "violation")
    name = f"{rep.kernel} on the CPU model" + (f": {bad[0]['rule']} at step {bad[0]['t']}" if bad else "")
    fig = timeline.draw({name: sched}, S=S, title=title, unit="model steps")
    if bad:
        for ax in fig.axes[:1]:
            ax.axvline(bad[0]["t"], color="#c44e52", linewidth=2)
    return fig

"""Grader of cluster_geometry: python practice/judge.py check cluster_geometry

The four functions of the statement, each called directly (judge.grading.cpu_flow) and compared with
the statement's rules (written out below, the reference): first on the cases that teach (2-D and 3-D
clusters, grids that are not whole clusters along y or z, 16-block clusters with and without the
non-portable attribute, the GPC layout measured on the H200, h200_layout.json beside this file, with
every max_active_clusters the driver reported there), then on blocks, launches and GPC layouts drawn
at random each run.
"""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow

LAYOUT = json.loads((Path(__file__).with_name("h200_layout.json")).read_text())
H200 = LAYOUT["gpc_sizes"]
PORTABLE, NON_PORTABLE = 8, 16


# ------------------------------------------------------------------ the reference (the statement's rules)
def block_place(block, cluster):
    (bx, by, bz), (cx, cy, cz) = block, cluster
    return bx % cx + (by % cy) * cx + (bz % cz) * cx * cy, (bx // cx, by // cy, bz // cz)


def launch_error(grid, cluster, non_portable=False):
    if any(g % c for g, c in zip(grid, cluster)):
        return "not a whole number of clusters"
    size = cluster[0] * cluster[1] * cluster[2]
    return f"{size} blocks > {NON_PORTABLE if non_portable else PORTABLE}" if size > (
        NON_PORTABLE if non_portable else PORTABLE) else None


def clusters_that_fit(gpc_sizes, cluster_size, blocks_per_sm):
    return sum((n * blocks_per_sm) // cluster_size for n in gpc_sizes if n >= cluster_size)


def idle_sms(gpc_sizes, cluster_size, blocks_per_sm):
    used = clusters_that_fit(gpc_sizes, cluster_size, blocks_per_sm) * cluster_size
    return (sum(gpc_sizes) * blocks_per_sm - used) / blocks_per_sm


# ------------------------------------------------------------------ comparing and explaining
def legal_or_reason(got, want):
    """launch_error: None for a legal launch, any non-empty string for an illegal one."""
    if want is None:
        return None if got is None else f"got {checks.show(got)}, but the launch is legal: return None"
    if isinstance(got, str) and got.strip():
        return None
    return f"got {checks.show(got)}, but the launch is illegal ({want}): return a non-empty string saying why"


def explain_place(call, got, want):
    return ("the rank runs x fastest inside the cluster, then y, then z: rank = x + y * cx + z * cx * cy of the "
            "block's position (bx % cx, by % cy, bz % cz) in its cluster; cluster_id = (bx // cx, by // cy, bz // cz)")


def explain_launch(call, got, want):
    grid, cluster = call.args[0], call.args[1]
    np_ = call.args[2] if len(call.args) > 2 else call.kwargs.get("non_portable", False)
    bad = [("xyz"[i], g, c) for i, (g, c) in enumerate(zip(grid, cluster)) if g % c]
    if bad:
        a, g, c = bad[0]
        return f"grid {a} = {g} is not a multiple of the cluster's {a} = {c}: each axis must hold whole clusters"
    size = cluster[0] * cluster[1] * cluster[2]
    return (f"a cluster of {size} blocks: at most {PORTABLE} blocks, {NON_PORTABLE} with the non-portable "
            f"attribute (here non_portable={np_})")


def explain_fit(call, got, want, fits=None):
    """Why a count is wrong; `fits` is the learner's clusters_that_fit answer when that is what is graded."""
    sizes, c, b = call.args
    lines = ["a cluster's blocks run at once on ONE GPC: each GPC of n SMs holds floor(n * blocks_per_sm / size) "
             "whole clusters; add over the GPCs"]
    small = sorted({n for n in sizes if n < c})
    if fits is not None and checks.is_number(fits):
        if small and fits == sum((n * b) // c for n in sizes):
            lines.insert(0, f"a GPC with fewer SMs than the cluster has blocks holds none: here the GPCs of {small} "
                            f"SMs hold no cluster of {c}, although at {b} blocks per SM they have "
                            f"{max(small) * b} slots (the H200 agrees: every max_active_clusters in h200_layout.json)")
        if fits == sum(sizes) * b // c and fits != want:
            lines.insert(0, "you divided every block slot of the GPU by the cluster size, as if a cluster could "
                            "span GPCs: it cannot, so the slots left over in each GPC stay empty")
    if list(sizes) == H200:
        m = next((m for m in LAYOUT["max_active_clusters"] if (m["cluster"], m["blocks_per_sm"]) == (c, b)), None)
        if m:
            lines.append(f"the H200 reported max_active_clusters = {m['clusters']} for this case "
                         f"({m['shared_kib']} KiB of shared memory per block)")
    return lines


def explain_idle(call, got, want):
    return explain_fit(call, got, want, None) + ["idle = (every block slot of the GPU - the slots the clusters take) "
                                           "/ blocks_per_sm, a float"]


# ------------------------------------------------------------------ inputs
dims = st.tuples(st.sampled_from([1, 2, 3, 4]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]))


@st.composite
def places(draw):
    c = draw(dims)
    return ((draw(st.integers(0, 255)), draw(st.integers(0, 63)), draw(st.integers(0, 7))), c)


@st.composite
def launches(draw):
    c = (draw(st.sampled_from([1, 2, 3, 4, 8, 16])), draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2])))
    g = tuple(c[i] * draw(st.integers(1, 8)) + draw(st.sampled_from([0, 0, 0, 1])) for i in range(3))
    return (g, c, draw(st.booleans()))


layouts = st.tuples(st.lists(st.integers(1, 20), min_size=1, max_size=12), st.integers(1, 16), st.integers(1, 8))

PLACES = [((5, 0, 0), (4, 1, 1)), ((3, 1, 0), (2, 2, 1)), ((7, 3, 1), (2, 2, 2)), ((9, 2, 0), (1, 4, 1)),
          ((0, 0, 0), (1, 1, 1)), ((17, 5, 3), (3, 2, 2))]
LAUNCHES = [((132, 1, 1), (4, 1, 1), False), ((130, 1, 1), (4, 1, 1), False), ((64, 3, 1), (2, 2, 1), False),
            ((32, 1, 1), (16, 1, 1), False), ((32, 1, 1), (16, 1, 1), True), ((16, 16, 1), (4, 4, 1), True),
            ((8, 8, 2), (2, 2, 2), False), ((8, 8, 3), (2, 2, 2), False), ((64, 1, 1), (32, 1, 1), True),
            ((16, 8, 1), (8, 2, 1), True), ((16, 8, 1), (8, 2, 1), False)]
FITS = ([flow.Edge(([2, 2, 18], 4, 3), "GPCs of 2 SMs with 6 block slots each hold no cluster of 4")]
        + [flow.Edge((H200, m["cluster"], m["blocks_per_sm"]),
                   f"the H200 reported max_active_clusters = {m['clusters']}") for m in LAYOUT["max_active_clusters"]]
        + [flow.Edge((H200, c, b), "the H200's measured layout") for c in (3, 6, 8, 16) for b in (1, 2, 3, 8)]
        + [flow.Edge(([2, 2, 18], 4, 4), "GPCs of 2 SMs with 8 block slots each hold no cluster of 4")])


def check(sub):
    measured = f"GPC layout measured on {LAYOUT['device']} ({LAYOUT['date']}): {H200}"
    functions = [
        flow.Function("block_place", reference=block_place, args=places(),
                      edges=[flow.Edge(p, "") for p in PLACES], explain=explain_place),
        flow.Function("launch_error", reference=launch_error, args=launches(),
                      edges=[flow.Edge(x, "") for x in LAUNCHES], compare=legal_or_reason, explain=explain_launch),
        flow.Function("clusters_that_fit", reference=clusters_that_fit, args=layouts, edges=FITS,
                      explain=lambda call, got, want: explain_fit(call, got, want, got)),
        flow.Function("idle_sms", reference=idle_sms, args=layouts, edges=FITS,
                      compare=flow.close(rel=1e-6), explain=explain_idle),   # float32 answers too
    ]
    return flow.run(sub, functions, note=measured, checked=[measured])

"""Grader of cluster_geometry: python practice/judge.py check cluster_geometry

Each function is compared with the reference on fixed cases (the ones that teach) and on random
ones: block places for 1-, 2- and 3-D clusters, legal and illegal launches, and cluster counts for
the GPC layout measured on the H200 (h200_layout.json, beside this file) and for random layouts.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from judge.grading.grade import Result, Verdict, learner_error

LAYOUT = json.loads((Path(__file__).with_name("h200_layout.json")).read_text())


def _cases(rng):
    places = [((5, 0, 0), (4, 1, 1)), ((3, 1, 0), (2, 2, 1)), ((7, 3, 1), (2, 2, 2)), ((9, 2, 0), (1, 4, 1))]
    for _ in range(200):
        c = (rng.choice([1, 2, 3, 4]), rng.choice([1, 2, 4]), rng.choice([1, 2]))
        places.append(((rng.randrange(64), rng.randrange(16), rng.randrange(4)), c))
    launches = [((132, 1, 1), (4, 1, 1), False), ((130, 1, 1), (4, 1, 1), False), ((64, 3, 1), (2, 2, 1), False),
                ((32, 1, 1), (16, 1, 1), False), ((32, 1, 1), (16, 1, 1), True), ((16, 16, 1), (4, 4, 1), True),
                ((8, 8, 2), (2, 2, 2), False), ((8, 8, 3), (2, 2, 2), False), ((64, 1, 1), (32, 1, 1), True)]
    for _ in range(200):
        c = (rng.choice([1, 2, 3, 4, 8]), rng.choice([1, 2, 4]), rng.choice([1, 2]))
        g = tuple(c[i] * rng.randrange(1, 9) + (rng.random() < 0.2) for i in range(3))
        launches.append((g, c, rng.random() < 0.5))
    sizes = LAYOUT["gpc_sizes"]
    fits = [(sizes, c, b) for c in (1, 2, 3, 4, 6, 8, 16) for b in (1, 2, 3, 8)]
    for _ in range(100):
        layout = [rng.randrange(10, 19) for _ in range(rng.randrange(4, 9))]
        fits.append((layout, rng.choice([2, 4, 8, 16]), rng.choice([1, 2, 3])))
    return places, launches, fits


def check(sub) -> Result:
    sub.progress("importing geometry.py")
    mod = sub.learner_module()
    ref = sub.exercise.reference()
    places, launches, fits = _cases(random.Random(2026))
    measured = f"GPC layout measured on {LAYOUT['device']} ({LAYOUT['date']}): {LAYOUT['gpc_sizes']}"
    checked = []

    def call(fn, *a):
        try:
            return getattr(mod, fn)(*a), None
        except Exception as e:  # noqa: BLE001 - the learner's error, reported with its line
            return None, Result(Verdict.WRONG, learner_error(e, f"{fn}{a}"), checked=checked)

    sub.progress("block_place")
    for block, cl in places:
        got, err = call("block_place", block, cl)
        if err:
            return err
        want = ref.block_place(block, cl)
        if tuple(got[0:1]) + (tuple(got[1]),) != (want[0], want[1]):
            return Result(Verdict.WRONG, f"block_place({block}, {cl}): got {got}, expected {want}",
                          details=["the rank runs x fastest inside the cluster, then y, then z: "
                                   "rank = x + y * cx + z * cx * cy of the block's position in its cluster"],
                          checked=checked)
    checked.append(f"block_place on {len(places)} blocks")
    sub.progress("launch_error")
    for grid, cl, np_ in launches:
        got, err = call("launch_error", grid, cl, np_)
        if err:
            return err
        want = ref.launch_error(grid, cl, np_)
        if (got is None) != (want is None):
            what = "legal" if want is None else f"illegal ({want})"
            return Result(Verdict.WRONG, f"launch_error(grid={grid}, cluster={cl}, non_portable={np_}) "
                          f"returned {got!r}; the launch is {what}", checked=checked)
    checked.append(f"launch_error on {len(launches)} launches")
    sub.progress("clusters_that_fit and idle_sms")
    for layout, c, b in fits:
        for fn in ("clusters_that_fit", "idle_sms"):
            got, err = call(fn, layout, c, b)
            if err:
                return err
            want = getattr(ref, fn)(layout, c, b)
            if got is None or abs(float(got) - want) > 1e-9:
                hint = ("a cluster never spans two GPCs: count whole clusters per GPC, then add"
                        if fn == "clusters_that_fit" else "empty block slots divided by blocks per SM")
                where = " (the H200's measured layout)" if layout is LAYOUT["gpc_sizes"] else ""
                return Result(Verdict.WRONG, f"{fn}({layout}{where}, cluster_size={c}, blocks_per_sm={b}): "
                              f"got {got}, expected {want}", details=[hint], checked=checked + [measured])
    checked.append(f"cluster counts on {len(fits)} layouts x shapes")
    for m in LAYOUT["max_active_clusters"]:
        got, err = call("clusters_that_fit", LAYOUT["gpc_sizes"], m["cluster"], m["blocks_per_sm"])
        if err:
            return err
        if got != m["clusters"]:
            return Result(Verdict.WRONG, f"clusters_that_fit(H200 layout, cluster_size={m['cluster']}, "
                          f"blocks_per_sm={m['blocks_per_sm']}) = {got}, but the H200 reported "
                          f"max_active_clusters = {m['clusters']} ({m['shared_kib']} KiB of shared memory per block)",
                          checked=checked + [measured])
    checked.append(f"clusters_that_fit equals all {len(LAYOUT['max_active_clusters'])} max_active_clusters "
                   f"measured on the H200")
    return Result(Verdict.PASS, "every place, launch and count right", checked=checked + [measured])

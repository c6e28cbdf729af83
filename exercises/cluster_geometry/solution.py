"""geometry.py - where each block of a clustered launch sits, whether the launch is legal, and how
many clusters a Hopper GPU holds at once.

Your task: fill in the four functions. Check with
    python practice/judge.py check cluster_geometry

Shapes are (x, y, z) tuples of blocks, as in CUDA C++: `grid` counts blocks, `cluster` is the
cluster's shape in blocks. A GPU is described by the number of SMs in each GPC (gpc_sizes): the
blocks of one cluster always run at the same time on SMs of ONE GPC. h200_layout.json holds the
layout measured on an H200 (chapter 3 measured it from %smid).
"""

PORTABLE = 8        # the largest cluster every Hopper part must accept
NON_PORTABLE = 16   # the largest with cudaFuncAttributeNonPortableClusterSizeAllowed


def block_place(block, cluster):
    """(rank, cluster_id) of the block at index `block` = (bx, by, bz) in a grid of clusters of
    shape `cluster` = (cx, cy, cz). rank is %cluster_ctarank (x fastest, then y, then z, within
    the cluster); cluster_id is the (x, y, z) index of its cluster in the grid of clusters."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("block_place: position inside the cluster -> rank; cluster index")
    (bx, by, bz), (cx, cy, cz) = block, cluster
    rank = bx % cx + (by % cy) * cx + (bz % cz) * cx * cy
    return rank, (bx // cx, by // cy, bz // cz)
    # END SOLUTION


def launch_error(grid, cluster, non_portable=False):
    """None if the launch is legal, else a short reason (any non-empty string).
    Legal: every grid dimension is a multiple of the cluster's, and the cluster has at most
    PORTABLE blocks (NON_PORTABLE when non_portable is True)."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("launch_error: divisibility per axis, then the size limit")
    for axis, (g, c) in enumerate(zip(grid, cluster)):
        if g % c:
            return f"grid {grid} is not a whole number of clusters {cluster} along {'xyz'[axis]}"
    size = cluster[0] * cluster[1] * cluster[2]
    limit = NON_PORTABLE if non_portable else PORTABLE
    if size > limit:
        return f"a cluster of {size} blocks is above the limit of {limit}"
    return None
    # END SOLUTION


def clusters_that_fit(gpc_sizes, cluster_size, blocks_per_sm):
    """How many clusters of `cluster_size` blocks can run at once when each SM holds
    `blocks_per_sm` blocks of the kernel: a cluster never spans two GPCs, so each GPC holds
    whole clusters only; and a GPC with fewer SMs than the cluster has blocks holds none, even
    when its SMs have room for several blocks each (what every max_active_clusters the H200
    reported agrees with: h200_layout.json lists them)."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("clusters_that_fit: per GPC, whole clusters of block slots")
    return sum((n * blocks_per_sm) // cluster_size for n in gpc_sizes if n >= cluster_size)
    # END SOLUTION


def idle_sms(gpc_sizes, cluster_size, blocks_per_sm):
    """SMs' worth of block slots left empty when the GPU is filled with such clusters
    (empty slots / blocks_per_sm; a float)."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("idle_sms: all slots minus the slots the clusters use")
    slots = sum(gpc_sizes) * blocks_per_sm
    used = clusters_that_fit(gpc_sizes, cluster_size, blocks_per_sm) * cluster_size
    return (slots - used) / blocks_per_sm
    # END SOLUTION

"""Chapter 3, thread-block clusters, distributed shared memory and TMA multicast (notebook:
chapters/ch03_clusters.ipynb).

Kernels: cluster placement, the cluster sum, the DSMEM probe, the histogram, multicast reuse. Host code: run
(build, launch and check every kernel) and notes (the sentences and table columns read from the record).
"""

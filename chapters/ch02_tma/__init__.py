"""Chapter 2, TMA: tensor maps and mbarriers (notebook: chapters/ch02_tma.ipynb).

Kernels: one small kernel per TMA topic (copies, swizzle, out-of-bounds fill, store and reduce, waits, tensor
map replacement), bulk.cuh for the bulk copies. Host code: run (build, launch and check every kernel of the
chapter) and topics (the host side of the later topics, and their measurement on an H200).
"""

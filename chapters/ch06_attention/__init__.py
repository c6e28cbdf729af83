"""Chapter 6, attention on Hopper (notebook: chapters/ch06_attention.ipynb).

Kernels: the attention ladder (attn_02_one_warpgroup: one warpgroup per 64 query rows; attn_03_warp_specialized:
a producer and two consumer warpgroups, and with PINGPONG=1 their turns around the softmax), with helpers in
judge/include/attention.cuh. Host code: attention (build, run on the CPU model, check against float64, time
against torch SDPA's backends) and online (rung 1: the online softmax's arithmetic in numbers).
"""

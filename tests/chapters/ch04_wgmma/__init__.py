"""Tests of chapters/ch04_wgmma/: its kernels (SASS, the CPU model, the H200 where there is one) and host code."""

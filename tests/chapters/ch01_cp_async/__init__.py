"""Tests of chapters/ch01_cp_async/: its kernels (SASS, the CPU model, the H200 where there is one) and host code."""

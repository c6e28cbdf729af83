"""Tests of chapters/ch02_tma/: its kernels (SASS, the CPU model, the H200 where there is one) and host code."""

"""Tests of chapters/ch03_clusters/: its kernels (SASS, the CPU model, the H200 where there is one) and host code."""

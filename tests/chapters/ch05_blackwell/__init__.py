"""Tests of chapters/ch05_blackwell/: its kernels (SASS, the CPU model, the H200 where there is one) and host code."""

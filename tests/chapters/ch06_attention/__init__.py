"""Tests of chapters/ch06_attention/: its kernels on the CPU model against float64, their typical mistakes caught, and the online softmax's numbers."""

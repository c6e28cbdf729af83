"""Grading: exercises and their schema, the CUDA and Python flows, the processes a check runs in, comparison, results."""

"""The builders' exploration runs (lab/README.md): scripts and patches run on an H200 to decide how the
chapters' kernels are built. Not part of the course: `course release` leaves this folder out, and no chapter
quotes a figure from it. A package so that its scripts run as `python -m lab.explore_h200 ...` and tests/lab/
imports them.
"""

"""Tests of the exercises: what their messages tell a learner, what drawn inputs find (every verdict itself is
tests/grading/test_exercises.py's)."""

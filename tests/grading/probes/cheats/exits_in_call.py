"""pipeline_timeline's file whose schedule() ends the process (os._exit) instead of returning."""
import os


def schedule(K, L, C, S):
    os._exit(7)


def pipeline_time(K, L, C, S):
    return 0

"""pipeline_timeline's file with a syntax error on line 5."""


def schedule(K, L, C, S):
    return [(0, L, L, L + C) for k in range(K)

"""A cheat for pipeline_timeline: it loops forever, printing the judge's old progress marker to keep its
watchdog from firing. The judge must call it a HANG after its time limit, not after 15 minutes."""


def schedule(K, L, C, S):
    n = 0
    while True:
        n += 1
        if n % 1000 == 0:
            print(f"@@progress case {n}", flush=True)
            print(f"P case {n}", flush=True)


def pipeline_time(K, L, C, S):
    return schedule(K, L, C, S)

"""python -m judge: what GPU is here, and every figure the H200 recorded (with whether it is current).

    python -m judge            print the record
    python -m judge --readme   rewrite README.md's table of figures from the record
"""
import sys

from judge import gpu
from judge import record

if "--readme" in sys.argv[1:]:
    print("README.md " + ("updated" if record.update_readme() else "already up to date"))
    sys.exit(0)
print(gpu.summary() + "\n")
sys.exit(record.main())

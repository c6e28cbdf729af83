"""python -m judge: what GPU is here, and every figure the H200 recorded (with whether it is current)."""
import sys

from . import gpu, record

print(gpu.summary() + "\n")
sys.exit(record.main())

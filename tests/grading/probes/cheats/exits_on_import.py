"""pipeline_timeline's file that ends its own process while it is imported."""
import sys

sys.exit(3)

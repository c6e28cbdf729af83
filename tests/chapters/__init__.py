"""Tests of the chapters' code, one folder per chapter package (chapters/chNN_name -> tests/chapters/chNN_name),
and the statements that span chapters (test_claims.py, test_errata.py)."""

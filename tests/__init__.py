"""The course's test suite (python -m pytest tests): laid out as the package is; shared helpers beside conftest.py."""

"""pytest plugins that `tests/conftest.py` registers for every test: kinds, and the fixtures shared across domains."""

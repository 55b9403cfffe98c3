"""Example programs (importable so tests and benchmarks reuse their models)."""

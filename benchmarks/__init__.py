"""Benchmarks (run as scripts, e.g. ``.venv/bin/python benchmarks/capture.py``; not part of the package)."""

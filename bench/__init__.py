"""Benchmarks, not tests: each module prints plain-text tables and writes its run as JSON.

Run one from the repository root as `python -m bench.<name>`; the modules import each
other as this package (see bench/README.md).
"""

"""Benchmarks and load generators; each benchmark runs a baseline in the same process.

Commands, not a library: run them with ``python -m loadtests[.bench_...]``; no other package
imports them."""

__all__: list[str] = []

"""Benchmarks and load generators; each benchmark runs a baseline in the same process."""

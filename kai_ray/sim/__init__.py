"""The embedded simulator: synthetic clusters and workloads driving the real scheduler in simulated time."""

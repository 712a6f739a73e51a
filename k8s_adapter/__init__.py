"""Everything that talks to Kubernetes: informers and the cluster cache, pod grouping, binding,
eviction, status, leader election and the scheduling loop that ties them together.

``__all__`` names the modules the CLI, the simulator and the benchmarks may use; the others
(binder, evictor, grouper, kinds, reflector, status, job_clocks, usage_store, prometheus_usage)
are the loop's own parts; ``usage_feeds`` builds the usage source the config asks for. Modules are
imported one at a time: the Kubernetes client is loaded only by what needs it.
"""

__all__ = ["api", "cache", "health", "leader", "metrics", "runner", "usage_feeds"]

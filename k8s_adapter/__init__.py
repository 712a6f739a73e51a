"""Everything that talks to Kubernetes: informers and the cluster cache, pod grouping, binding,
eviction, status, leader election and the scheduling loop that ties them together.

``__all__`` names the modules the CLI, the simulator and the benchmarks may use; the others
(binder, decision_log, events, evictor, grouper, kinds, messages, reflector, resource_status,
status, job_clocks, usage_store, prometheus_usage) are the loop's own parts; ``usage_feeds`` builds
the usage source the config asks for. Modules are imported one at a time: the Kubernetes client is
loaded only by what needs it.
"""

__all__ = ["api", "cache", "crd_upgrade", "health", "leader", "metrics", "runner", "usage_feeds"]

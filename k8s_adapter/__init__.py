"""Everything that talks to Kubernetes: informers and the cluster cache, pod grouping, binding,
eviction, status, leader election and the scheduling loop that ties them together.

``__all__`` names the modules the CLI, the simulator and the benchmarks may use; the others
(binder, claims, decision_log, dra_cache, events, evictor, gpu_env, grouper, job_clocks, kinds,
messages, prometheus_usage, reflector, resource_status, status, usage_store) are the loop's own
parts; ``gpu_sharing`` is public for its settings (the CLI's reservation-pod flags) and
``usage_feeds`` builds the usage source the config asks for. Modules are imported one at a time:
the Kubernetes client is loaded only by what needs it.
"""

__all__ = ["api", "cache", "crd_upgrade", "gpu_sharing", "health", "leader", "metrics", "runner", "usage_feeds"]

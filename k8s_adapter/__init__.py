"""Everything that talks to Kubernetes: informers and the cluster cache, pod grouping, binding,
eviction, status, leader election and the scheduling loop that ties them together.

``__all__`` names the modules the CLI, the simulator and the benchmarks may use; the others
(binder, claims, decision_log, dra_cache, events, evictor, gpu_env, grouper, kinds, messages,
reflector, resource_status, status) are the loop's own parts; ``gpu_sharing`` is public for its
settings (the CLI's reservation-pod flags). Modules are imported one at a time: the Kubernetes
client is loaded only by what needs it.
"""

__all__ = ["api", "cache", "crd_upgrade", "gpu_sharing", "health", "leader", "metrics", "runner"]

"""Everything that talks to Kubernetes: informers and the cluster cache, binding, eviction,
status, leader election and the scheduling loop that ties them together (the pod grouper's
live part, ``pod_grouper.live``, sits beside it in its layer).

``__all__`` names the modules the CLI, the simulator, the benchmarks and the live pod grouper
may use; the others (binder, decision_log, dra_cache, events, evictor, explain, gpu_env,
messages, problems, prometheus_usage, reflector, resource_status, status, usage_store) are the
loop's own parts; ``job_clocks`` is public for the pod grouper, which writes a new PodGroup's
clocks into it; ``gpu_sharing`` is public for its settings (the CLI's reservation-pod flags),
``usage_feeds`` builds the usage source the config asks for, ``kinds`` names the watched kinds
the simulator and the cache benchmark feed the cache by (and the owner kinds the pod grouper
walks), ``claims`` gives the simulator a claim's allocation as the binder writes it, and ``watches``
lets ``kai-ray run`` start the lists before it imports the loop. Modules
are imported one at a time: the Kubernetes client is loaded only by what needs it.
"""

__all__ = [
    "api",
    "cache",
    "claims",
    "crd_upgrade",
    "gpu_sharing",
    "health",
    "job_clocks",
    "kinds",
    "leader",
    "metrics",
    "runner",
    "usage_feeds",
    "watches",
]

"""Everything that talks to Kubernetes: informers, pod grouping, binding, eviction, status, leases,
and the embedded Kubernetes-API-compatible dev cluster."""

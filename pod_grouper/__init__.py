"""The pod grouper: which PodGroup a pod belongs to, as KAI's podgrouper decides it, and the
PodGroups a session sees.

Two parts in two layers (docs/architecture.md#layers). The rules are pure and sit under the
readers, which use them: ``workloads`` (KAI's rules per workload kind), ``grouping`` (a pod and
its owner chain to the PodGroup it gets), ``pod_groups`` (a PodGroup as written, resolved as a
session sees it; implicit groups made), ``workload_api`` (gangs of the Kubernetes Workload API as
the PodGroups they are scheduled as) and ``group_index`` (which pods belong to which group,
and which groups a batch of changes touched). ``live`` is the grouper of the running scheduler:
it reads owners and creates PodGroups through the API, so it sits in the adapter's layer.
Modules are imported one at a time, so a reader never loads the Kubernetes client; this file
imports none of them. ``__all__`` names the modules other packages may use.
"""

__all__ = ["group_index", "grouping", "live", "pod_groups", "workload_api", "workloads"]

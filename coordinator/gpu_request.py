"""How KAI counts a pod's GPUs against its queue, before and after a node is chosen.

A pod's request (KAI's ``ResReq``) is what the queue's requested sums, the fair share, the job
order and a job's queue-capacity check see: whole GPUs, or a fraction times its devices. A
``gpu-memory`` request has no portion until a node is chosen (the portion depends on that node's
GPU memory), so it counts no GPUs there.

Once a node is in view, KAI checks each pod against its queues' limits and non-preemptible quota
again, node by node (``IsTaskAllocationOnNodeOverCapacity``, a predicate), with the portion of
one of that node's GPUs the pod would take, rounded up to hundredths (``GetRequiredInitQuota``).
That is where a ``gpu-memory`` pod's queue limit is checked: it may fit a queue's limit on a
large GPU and not on a small one. What the pod then holds of its queue is
``coordinator.session.accepted_on``.

MIG instances count in both as their profiles' GPUs (``nvidia.com/mig-3g.20gb`` is three), and
the per-node predicate asks a MIG pod's whole request on every node.
"""

from __future__ import annotations

import math

from kai_ray.model import Pod, mig_gpus, mig_instances


def requested_gpus(pod: Pod) -> float:
    """The pod's GPUs as its request counts them (none for a ``gpu-memory`` request; MIG
    instances as their profiles' GPUs, ``kai_ray.model.mig``)."""
    gpus = pod.requests.gpu + mig_gpus(pod.requests.scalars)
    share = pod.gpu_share
    if share is None or share.fraction is None:
        return gpus
    return gpus + share.devices * share.fraction


def node_quota_gpus(pod: Pod, device_mib: float) -> float:
    """The GPUs KAI's per-node capacity predicate asks of the pod's queues on a node whose GPUs
    have ``device_mib`` each: the memory the pod takes of one of them, as a portion rounded up to
    hundredths. One device only, and a whole-GPU pod counts one GPU whatever its count; the job's
    own capacity check, made before any node is tried, already counts its request in full.
    A pod asking for MIG instances asks its whole request here, whatever the node."""
    if mig_instances(pod.requests.scalars):
        return requested_gpus(pod)
    share = pod.gpu_share
    if share is None:
        memory = device_mib if pod.requests.gpu > 0 else 0.0
    elif share.memory_mib is not None:
        memory = float(share.memory_mib)
    else:
        assert share.fraction is not None
        memory = float(int(share.fraction * device_mib))  # KAI keeps whole MiB
    return math.ceil(memory / max(device_mib, 1.0) * 100) / 100

"""kwok manifests: fake GPU nodes and the Stage that completes pods after a duration.

    python -m loadtests.kwok_manifests --nodes 500 --out kwok-nodes.yaml
    kubectl apply -f kwok-nodes.yaml

The Stage marks the load driver's running pods (label ``app=kai-ray-load``) Succeeded
after a while (kwok's own ``pod-complete`` stage only completes pods owned by a Job).
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from kai_ray.app.sim.cluster import synthetic_nodes


def completion_stage(seconds: float = 60.0, jitter: float = 30.0) -> dict[str, Any]:
    """A Stage completing the load driver's running pods after ``seconds`` (+ up to ``jitter``)."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "kai-ray-load-complete"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchLabels": {"app": "kai-ray-load"},
                "matchExpressions": [
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                ],
            },
            "delay": {"durationMilliseconds": int(seconds * 1000), "jitterDurationMilliseconds": int(jitter * 1000)},
            "next": {"statusTemplate": "phase: Succeeded\n"},
        },
    }


def manifests(nodes: int) -> list[dict[str, Any]]:
    return [*synthetic_nodes(nodes, taint=True, prefix="kwok-gpu"), completion_stage()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--out", default="-")
    args = parser.parse_args()
    text = yaml.safe_dump_all(manifests(args.nodes), sort_keys=False)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``kai-ray apply-crds``: the chart's pre-install/pre-upgrade hook, applying the CRDs in the image."""

from __future__ import annotations

import argparse
import os
import sys

# Where the image keeps the chart's CRDs (the Dockerfile copies helm/kai-ray/crds there).
DEFAULT_DIR = os.environ.get("KAI_RAY_CRDS", "/opt/kai-ray/crds")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "apply-crds", help="server-side apply the chart's CRDs (the Helm pre-upgrade hook runs this)"
    )
    parser.add_argument("--dir", default=DEFAULT_DIR, help=f"directory of CRD manifests (default: {DEFAULT_DIR})")
    parser.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)",
    )
    parser.add_argument("--context", help="kubeconfig context to use")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the CRDs to be established")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio  # here, not at the top: every other command would pay its import

    from k8s_adapter.crd_upgrade import read_crds

    crds = read_crds(args.dir)  # bad manifests: one line, exit 2, before anything is sent
    return asyncio.run(_apply(args, crds))


async def _apply(args: argparse.Namespace, crds: list[dict[str, object]]) -> int:
    from k8s_adapter.api import KubeError, connect, describe
    from k8s_adapter.crd_upgrade import apply_crds, wait_established

    api = await connect(args.kubeconfig, args.context)
    try:
        names = await apply_crds(api, crds)
        for name in names:
            print(f"customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied")
        late = await wait_established(api, names, args.timeout)
    except KubeError as exc:
        print(f"kai-ray: error: applying the CRDs failed: {describe(exc)}", file=sys.stderr)
        return 1
    finally:
        await api.close()
    if late:
        print(f"kai-ray: error: not established after {args.timeout:g}s: {', '.join(late)}", file=sys.stderr)
        return 1
    return 0

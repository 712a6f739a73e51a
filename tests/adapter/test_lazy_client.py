"""The API client's packages load name by name: a start does not wait for its 800-odd models."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Run in a fresh interpreter: this test process may have imported the client the plain way.
_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from k8s_adapter import lazy_client

    assert lazy_client.install()
    from kubernetes_asyncio import client, config
    from kubernetes_asyncio.config.config_exception import ConfigException

    async def connect_and_close():
        api = client.ApiClient(client.Configuration())
        await api.close()

    asyncio.run(connect_and_close())
    loaded = sum(1 for name in sys.modules if name.startswith("kubernetes_asyncio"))
    from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock
    lease = client.V1Lease(metadata=client.V1ObjectMeta(name="kai-ray"))
    try:
        client.NoSuchThing
    except AttributeError:
        missing = "AttributeError"
    import kubernetes_asyncio
    print(loaded, lease.metadata.name, client.models.V1Lease is client.V1Lease, missing, kubernetes_asyncio.__version__)
    """
)


def test_the_client_connects_with_a_few_dozen_modules_and_every_name_still_resolves() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True).stdout.split()
    loaded, lease_name, same_class, missing, version = out
    # The plain import loads about 860 of the package's modules; the lazy one what it uses.
    assert int(loaded) < 60, loaded
    assert (lease_name, same_class, missing) == ("kai-ray", "True", "AttributeError")
    assert version[0].isdigit()


def test_install_leaves_an_already_imported_client_alone() -> None:
    script = "import kubernetes_asyncio.client\nfrom k8s_adapter import lazy_client\nprint(lazy_client.install())"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"

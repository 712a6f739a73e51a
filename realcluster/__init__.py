"""A real Kubernetes control plane (and KAI itself) built from Go modules and run on loopback,
for the e2e tier and the load tests. Its modules are its public face: ``build`` (the Go builds
and their cache), ``cluster`` (``RealCluster``), ``kai`` (``KaiDeployment``), ``kwok`` and ``pki``."""

__all__ = ["build", "cluster", "kai", "kwok", "pki"]

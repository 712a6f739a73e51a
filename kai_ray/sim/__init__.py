"""The embedded simulator: synthetic clusters and workloads driving the real scheduler in
simulated time. ``run`` runs one simulation, ``plots`` draws its charts, ``cluster`` builds the
synthetic node pools (the dev cluster and the benchmarks use them too), ``dra`` turns some of them
into DRA nodes and gives jobs ResourceClaims, ``scenarios`` names the fixed scenarios
``--scenario`` runs."""

__all__ = ["cluster", "dra", "plots", "run", "scenarios"]

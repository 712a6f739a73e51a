"""The embedded simulator: synthetic clusters and workloads driving the real scheduler in
simulated time. ``run`` runs one simulation, ``plots`` draws its charts, ``cluster`` builds the
synthetic node pools (the dev cluster and the benchmarks use them too), ``dra`` turns some of them
into DRA nodes and gives jobs ResourceClaims, ``scenarios`` names the fixed scenarios
``--scenario`` runs (``starved_gang`` builds one of them at any size), ``engine`` runs a
simulation on a scheduler it is given, ``apiserver`` writes model records as the manifests the
API server holds (benchmarks write snapshot files with it)."""

__all__ = ["apiserver", "cluster", "dra", "engine", "plots", "run", "scenarios", "starved_gang"]

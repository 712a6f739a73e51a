"""Node shards: partitions of the cluster's nodes as numpy arrays, vectorized filter and score,
two-phase reservations."""

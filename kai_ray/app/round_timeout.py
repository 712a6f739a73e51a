"""How long a round waits for a shard actor's answer before taking the actor for lost.

``kai_ray.app.actors.RayTransport`` waits ``shardRoundTimeout`` for an ordinary round, and more
for the batches that are slow for a good reason. Kept apart from the actors so the allowance is
worked out, and tested, without Ray.
"""

from __future__ import annotations

from shards.protocol import ApplyDeltas, Batch, HandOver, Load, TakeOver

# A round's answer is awaited ``shardRoundTimeout`` (10 s by default), where rounds take
# milliseconds and the slowest measured at 50,000 nodes (every row of a shard) 0.6 s. Two kinds
# of batch take longer and get more, so that a merely slow shard is not rebuilt, nor a rebuild
# abandoned because it is big:
# - one that fills or empties a table (a rebuild's ``Load``, a resize's ``HandOver`` and
#   ``TakeOver``, changes that add nodes or pods): one more timeout per this many nodes, pods,
#   devices and claims it moves. 50,000 nodes took 2-4 s to load in a shard actor on a busy 2-core
#   machine, 25,000 1 s to hand over; this grants 60 s to the 50,000 (20 times that).
# - the first batch to an actor that has not started yet (its process, its imports): one more timeout.
# Scaled with the setting, so that whoever raises it for slow machines raises these too.
TABLE_ITEMS_PER_EXTRA_TIMEOUT = 10_000


def answer_timeout(timeout: float | None, batch: Batch, starting: bool) -> float | None:
    """How long to wait for a shard actor's answer to ``batch`` (None: no limit); ``starting``: the
    actor has not answered anything yet. See ``TABLE_ITEMS_PER_EXTRA_TIMEOUT``."""
    if timeout is None:
        return None
    return timeout * (1 + int(starting) + table_items(batch) / TABLE_ITEMS_PER_EXTRA_TIMEOUT)


def table_items(batch: Batch) -> int:
    """The nodes, pods, devices and claims that ``batch`` adds to its shard's tables, or takes
    out of them for another shard."""
    items = 0
    for request in batch.requests:
        if isinstance(request, Load):
            items += len(request.nodes) + len(request.pods) + len(request.devices) + len(request.claims)
        elif isinstance(request, ApplyDeltas):
            deltas = request.deltas
            items += len(deltas.nodes_upserted) + len(deltas.pods_upserted) + len(deltas.devices) + len(deltas.claims)
        elif isinstance(request, HandOver):  # the rows leave in the answer
            items += len(request.names)
        elif isinstance(request, TakeOver):
            items += len(request.handover.rows.names) + len(request.handover.holdings)
    return items

"""Each of KAI's score bands is a small named scorer with a vectorized and a per-row form; the two
forms agree on every node, and a node turned away says which filter turned it away."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai_ray.model import PodState
from placement.diagnosis import NOT_ENOUGH
from placement.placer import PlacementPolicy
from placement.scorers import BAND_SCORERS, PLACEMENT
from placement.shapes import TaskShape
from shards.messages import ShardDeltas
from shards.shard import Shard
from tests.builders import JobSpec, build, node, queue
from tests.shards.catalog import ASKS, NODE_KINDS, Ask, make_node, make_pod

POLICIES = st.sampled_from(
    [PlacementPolicy(g, c, d) for g in ("binpack", "spread") for c in ("binpack", "spread") for d in ("pack", "spread")]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=POLICIES,
    kinds=st.lists(st.sampled_from(sorted(NODE_KINDS)), min_size=1, max_size=6),
    placed=st.lists(st.tuples(st.sampled_from(ASKS), st.integers(0, 5)), max_size=8),
)
def test_every_scorer_agrees_with_itself_row_by_row(
    policy: PlacementPolicy, kinds: list[str], placed: list[tuple[Ask, int]]
) -> None:
    shard = Shard(0, policy)
    shard.apply(ShardDeltas(nodes_upserted=tuple(make_node(f"n{i}", k) for i, k in enumerate(kinds))))

    for i, (ask, where) in enumerate(placed):  # some usage, shared GPUs included, where it fits
        name = f"n{where % len(kinds)}"
        groups = (f"{name}-g{i % 2}",) * (ask.share.devices if ask.share else 0)
        shard.apply(ShardDeltas(pods_upserted=(make_pod(f"default/p{i}", ask, PodState.RUNNING, name, groups),)))
    placer = shard.placer
    for ask in ASKS:
        shape = ask.shape
        fit = placer.fit(shape)
        rows = np.flatnonzero(fit.future)
        band, placement = placer.rank_keys(shape, fit, rows)
        scoring = placer.scoring(shape)
        mib = None if fit.share_mib is None else fit.share_mib[rows]
        for scorer in BAND_SCORERS:
            if scorer.applies(scoring):
                many = scorer.rows(scoring, rows, fit.now[rows], mib)
                one = [
                    scorer.row(scoring, int(r), bool(fit.now[r]), None if mib is None else int(mib[k]))
                    for k, r in enumerate(rows)
                ]
                assert list(many) == one, scorer.name
        assert list(PLACEMENT.rows(scoring, rows)) == [PLACEMENT.row(scoring, int(r)) for r in rows]
        for k, r in enumerate(rows):
            now, _, row_mib = placer.fit_row(shape, int(r))
            assert placer.rank_row(shape, int(r), now, row_mib) == (band[k], placement[k])


def test_a_pending_reason_counts_the_nodes_turned_away_by_reason() -> None:
    snapshot = build(
        [node("a", gpu=2), node("b", gpu=0, labels={"pool": "cpu"})],
        [queue("q", gpu_quota=8)],
        [JobSpec("big", "q", gpu=4)],
    )
    shard = Shard(0)
    shard.apply(ShardDeltas(nodes_upserted=snapshot.nodes))

    diagnosis = shard.placer.diagnose(TaskShape.of_pod(snapshot.pods[0]))
    assert diagnosis.counts == {NOT_ENOUGH + "GPUs": 2}
    assert "2 node(s) didn't have enough resources: GPUs" in diagnosis.describe(TaskShape.of_pod(snapshot.pods[0]))

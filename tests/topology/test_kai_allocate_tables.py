"""KAI's worked topology placements (allocateTopology_test.go, allocate_multi_topology_test.go),
each run through the readers and the session ``kai-ray schedule`` runs."""

from __future__ import annotations

import pytest

from tests.topology.cluster import decide_docs, documents, topology
from tests.topology.kai_allocate_tables import CASES
from tests.topology.kai_case_builders import RACK_DOMAIN, ZONE_DOMAIN, Case
from tests.topology.kai_multi_topology_tables import MULTI_TOPOLOGY_CASES


def _check(case: Case, docs: list[dict[str, object]], shards: int = 1) -> None:
    decisions = decide_docs(docs, shards=shards)
    for pod, node in case.expected.items():
        decision = decisions.pods[f"default/{pod}"]
        if node is None:
            assert decision.status == "Pending", (pod, decision)
            if case.reason:
                assert case.reason in decision.reason, decision.reason
        else:
            assert (decision.status, decision.node) == ("Binding", node), (pod, decision)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kai_topology_allocate_table(case: Case) -> None:
    _check(case, documents(case.levels, case.nodes, case.jobs))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_same_placements_with_the_nodes_on_three_shards(case: Case) -> None:
    """Domains are merged from every shard's report: a rack split over shards is one rack."""
    _check(case, documents(case.levels, case.nodes, case.jobs), shards=3)


@pytest.mark.parametrize("case", MULTI_TOPOLOGY_CASES, ids=[c.name for c in MULTI_TOPOLOGY_CASES])
def test_sub_groups_may_use_different_topologies(case: Case) -> None:
    docs = documents((), case.nodes, case.jobs)
    docs += [topology((RACK_DOMAIN,), "rack-topology"), topology((ZONE_DOMAIN,), "zone-topology")]
    _check(case, docs)

"""The same outcome, not just the same speed: KAI's and kai-ray's final cluster states after each
scale scenario, compared as a user would look at them.

Per scenario, for each queue: how many of its pods ended bound, pending and evicted, and the GPUs
its bound pods hold; and for the cluster, how the bound GPUs lie (how many nodes carry 0, 1, ...
8 GPUs: bin-packing shows there, node names do not). Which pods were chosen as victims is not
compared one by one: KAI and kai-ray may pick different jobs of equal rank, and a user sees the
counts.

Every difference is looked up in ``KNOWN`` (scenario, aspect -> class and why): ``kai-ray fixed``
(kai-ray does better than KAI v0.12, a case file says how), ``deliberate`` (a README line says
why) or ``KAI bug`` (with the code location). A difference not listed there is ``unclassified``,
and the run says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

REFERENCE, CANDIDATE = "KAI", "kai-ray"

# (scenario, aspect) -> (class, why). None found so far on the quick and 500-node runs.
KNOWN: dict[tuple[str, str], tuple[str, str]] = {}


@dataclass(frozen=True, slots=True)
class Difference:
    scenario: str
    aspect: str  # "queue team-a: bound", "GPUs per node", ...
    reference: object  # KAI's
    candidate: object  # kai-ray's

    @property
    def classified(self) -> tuple[str, str]:
        return KNOWN.get((self.scenario, self.aspect), ("unclassified", ""))

    def describe(self) -> str:
        kind, why = self.classified
        said = f"{self.scenario}: {self.aspect}: KAI {self.reference}, kai-ray {self.candidate} [{kind}]"
        return f"{said} {why}".rstrip()


def outcome(state: Mapping[str, Any]) -> dict[str, object]:
    """What a user compares of one system's final state: aspect -> value (a row that failed may
    have left only part of it)."""
    found: dict[str, object] = {}
    for queue, counts in sorted(state.get("counts", {}).items()):
        for what in ("bound", "pending", "evicted"):
            found[f"queue {queue}: {what}"] = counts.get(what, 0)
    for queue, gpus in sorted(state.get("queueGpus", {}).items()):
        found[f"queue {queue}: GPUs"] = round(float(gpus), 3)
    spread = Counter(int(g) for g in state.get("gpusPerNode", {}).values())
    found["nodes by GPUs in use"] = dict(sorted(spread.items()))
    return found


def differences(states: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[Difference]:
    """Every scenario both KAI and kai-ray finished, compared (``states``: scenario -> system ->
    the state ``kai_scale_state`` records)."""
    out = []
    for scenario, by_system in states.items():
        if REFERENCE not in by_system or CANDIDATE not in by_system:
            continue
        theirs, ours = outcome(by_system[REFERENCE]), outcome(by_system[CANDIDATE])
        for aspect in sorted(theirs.keys() | ours.keys()):
            if theirs.get(aspect, 0) != ours.get(aspect, 0):
                out.append(Difference(scenario, aspect, theirs.get(aspect, 0), ours.get(aspect, 0)))
    return out


def summary(states: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    compared = [s for s, by in states.items() if REFERENCE in by and CANDIDATE in by]
    found = differences(states)
    head = f"final states, KAI against kai-ray: {len(compared)} scenarios compared, {len(found)} differences"
    return "\n".join([head, *(f"  {d.describe()}" for d in found)])

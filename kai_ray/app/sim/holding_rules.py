"""Reading a waiting job's pending reason: which reclaim rule it names, which queues, and the
same reason with its figures taken out (so reasons that differ only in counts are one)."""

from __future__ import annotations

import re
from collections.abc import Mapping

# A figure on its own (not part of a name such as dept-2 or job-00481): "0 pods", "335 node(s)".
_FIGURE = re.compile(r"(?<![\w./-])\d+(?:\.\d+)?(?![\w/-])")
# The pod allocate's message happens to name ("for pod sim/job-00398-4 due to").
_POD = re.compile(r"\bpod [\w.-]+/[\w.-]+")


# Where a pending reason passes from allocate's words to an action's ("...; reclaim: ...").
ACTION_PART = re.compile(r"; (?=(?:consolidation|reclaim|preempt|preemption delay|PreemptionDelayNotElapsed): )")

# The rules a waiting job's reason can name, as (what the reason says, the rule's name). The
# texts are those of ``coordinator.actions.reclaim`` and ``coordinator.reclaim_rules``; the first
# that matches names the rule. All are KAI's, but the last two: the session time budget and the
# search backoff are kai-ray's own and could hold back a reclaim KAI would make.
RULES: tuple[tuple[str, str], ...] = (
    (
        "cannot reclaim: it would go above its fair share",
        "reclaimer's fair share: the job would take its queue above it",
    ),
    (
        "cannot reclaim: a non-preemptible job would take it above its deserved quota",
        "non-preemptible reclaimer: the job would take its queue above its deserved quota",
    ),
    (
        "only a queue above its fair share may give back",
        "victim filter: with the job its side goes above its deserved quota, "
        "so only a queue above its fair share may give back",
    ),
    (
        "only a queue above its deserved quota may give back",
        "victim filter: only a queue above its deserved quota may give back",
    ),
    ("no less saturated than", "saturation: the reclaimer's side would be no less saturated than its victim's"),
    ("at or below its fair share", "reclaim strategies: a victim's queue must stay above its fair share"),
    ("the jobs other queues run are not preemptible", "non-preemptible victims: no other queue runs a preemptible job"),
    ("within their reclaim minimum runtime", "reclaim minimum runtime protects the victims"),
    ("does not make room for its pods", "shape: evicting all it may take does not make room for its pods"),
    ("Workload is within its preemption delay window", "preemption delay"),
    ("spent its time budget", "kai-ray's session time budget postponed the search"),
)


def holding_rule(reason: str) -> str | None:
    """The rule an action's part of a pending reason names (None: no action named one; then
    the job waits on allocate's reason alone)."""
    for part in ACTION_PART.split(reason)[1:]:
        for text, rule in RULES:
            if text in part:
                return rule
    return None


def named_queues(text: str, figures: Mapping[str, tuple[float, float, float | None]]) -> list[str]:
    """The queues of ``figures`` that ``text`` names, in the order it first names them (a name
    inside a longer one, dept-1 in dept-1-team-1 or in a pod's name, does not count)."""
    if not figures:
        return []
    names = sorted(figures, key=len, reverse=True)  # dept-1-team-1 before dept-1
    pattern = re.compile(r"(?<![\w./-])(" + "|".join(re.escape(n) for n in names) + r")(?![\w/-])")
    return list(dict.fromkeys(match.group(1) for match in pattern.finditer(text)))


def with_figures(text: str, figures: Mapping[str, tuple[float, float, float | None]]) -> str:
    """What each queue ``text`` names held, its fair share and its deserved quota (GPUs) at the
    time, one after the other: ``figures`` is name -> (held, fair share, deserved or None when it
    deserves what it requests). "holds 700 = its fair share": not above it (most often a queue
    whose demand is met, since a fair share never exceeds what the queue asks for)."""
    parts = []
    for name in named_queues(text, figures):
        held, fair, deserved = figures[name]
        share = "= its fair share" if abs(held - fair) < 0.005 else f"of fair share {_gpus(fair)}"
        quota = f", deserved {_gpus(deserved)}" if deserved is not None else ""
        parts.append(f"{name} holds {_gpus(held)} {share}{quota}")
    return "; ".join(parts)


def _gpus(value: float) -> str:
    return f"{round(value, 2):g}"


def reason_kind(reason: str) -> str:
    """The reason without its figures and the pod it names, so that "335 node(s)" and "340
    node(s)", or two pods of one gang, are one reason."""
    return _FIGURE.sub("#", _POD.sub("pod #", reason))

"""A remote coordinator's results travel as changes and come back equal, in the same order."""

from __future__ import annotations

import pickle

import pytest

from coordinator.decisions import Decisions, PodDecision
from coordinator.result_changes import ResultReceiver, ResultSender
from coordinator.results import BindIntent, CycleResult


def result(pods: dict[str, str], queues: dict[str, str] | None = None, binds: int = 0) -> CycleResult:
    decisions = Decisions(
        {key: PodDecision(status, None if status == "Pending" else "node-a") for key, status in pods.items()},
        {"ns/job": PodDecision("Running", None)},
        {"q": {"fairShare": {"gpu": 1.0}}},
    )
    keys = list(pods)
    return CycleResult(
        decisions,
        binds=[BindIntent(k, "node-a", (), "r") for k in keys[:binds]],
        pod_queues=queues if queues is not None else dict.fromkeys(keys, "q"),
        pod_jobs=dict.fromkeys(keys, "ns/job"),
    )


def same(a: CycleResult, b: CycleResult) -> None:
    assert a == b
    for x, y in (
        (a.decisions.pods, b.decisions.pods),
        (a.decisions.pod_groups, b.decisions.pod_groups),
        (a.pod_queues, b.pod_queues),
        (a.pod_jobs, b.pod_jobs),
    ):
        assert list(x) == list(y)


def across(sender: ResultSender, receiver: ResultReceiver, sent: CycleResult) -> tuple[CycleResult, int]:
    """The result as the receiver rebuilds it after pickling (as an actor call would), and the
    size of what travelled."""
    wire = pickle.dumps(sender.send(sent, receiver.held))
    return receiver.receive(pickle.loads(wire)), len(wire)


def test_a_sequence_of_results_comes_back_equal_and_in_order() -> None:
    sender, receiver = ResultSender(), ResultReceiver()
    pods = {f"ns/p{i}": "Running" for i in range(50)}
    steps = [
        dict(pods),
        {**pods, "ns/new": "Pending"},  # one arrives
        {k: v for k, v in pods.items() if k != "ns/p3"} | {"ns/new": "Binding"},  # one goes, one changes
        {"ns/first": "Pending"} | pods,  # one arrives ahead of the others: the order is spelled out
        dict(reversed(list(pods.items()))),
        {},
    ]
    for step in steps:
        sent = result(step, binds=2)
        back, _ = across(sender, receiver, sent)
        same(back, sent)


def test_only_what_changed_travels() -> None:
    sender, receiver = ResultSender(), ResultReceiver()
    pods = {f"ns/pod-with-a-long-name-{i}": "Running" for i in range(2000)}
    _, first = across(sender, receiver, result(pods))
    changed = dict(pods) | {"ns/pod-with-a-long-name-7": "Releasing", "ns/arrived": "Pending"}
    del changed["ns/pod-with-a-long-name-9"]
    back, later = across(sender, receiver, result(changed))
    same(back, result(changed))
    assert later * 20 < first


def test_a_result_that_never_arrived_costs_a_full_one_not_a_wrong_one() -> None:
    sender, receiver = ResultSender(), ResultReceiver()
    across(sender, receiver, result({"ns/a": "Running"}))
    sender.send(result({"ns/a": "Running", "ns/b": "Pending"}), receiver.held)  # lost on the way
    third = result({"ns/a": "Releasing", "ns/c": "Pending"})
    change = sender.send(third, receiver.held)
    assert change.base == 0
    same(receiver.receive(change), third)


def test_what_the_caller_does_with_a_result_does_not_change_the_next() -> None:
    sender, receiver = ResultSender(), ResultReceiver()
    back, _ = across(sender, receiver, result({"ns/a": "Running", "ns/b": "Running"}))
    back.decisions.pods.clear()
    back.pod_jobs["ns/z"] = "ns/other"
    second = result({"ns/a": "Running", "ns/b": "Releasing"})
    again, _ = across(sender, receiver, second)
    same(again, second)


def test_a_change_from_a_result_not_held_is_refused() -> None:
    sender, receiver = ResultSender(), ResultReceiver()
    sender.send(result({"ns/a": "Running"}), 0)
    change = sender.send(result({"ns/a": "Running"}), 1)
    with pytest.raises(ValueError, match="result 1"):
        receiver.receive(change)

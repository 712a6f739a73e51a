"""Events expire an hour after their last write, as kube-apiserver's do: a long run of the dev
cluster does not keep every Scheduled event it was ever sent."""

from __future__ import annotations

from devcluster import DevCluster, ManualClock


def event(name: str, clock: ManualClock, last_seen: float | None = None) -> dict[str, object]:
    body: dict[str, object] = {
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Scheduled",
        "message": "assigned",
        "type": "Normal",
    }
    if last_seen is not None:
        body["lastTimestamp"] = clock.timestamp(last_seen)
    return body


def names(cluster: DevCluster) -> list[str]:
    return sorted(e["metadata"]["name"] for e in cluster.objects("", "v1", "events", "default"))


def test_an_event_goes_once_its_ttl_has_passed_since_its_last_write() -> None:
    clock = ManualClock()
    cluster = DevCluster(clock=clock, simulate=False, event_ttl=600.0)
    assert cluster.event_expiry is not None
    cluster.create("", "v1", "events", event("old", clock), "default")
    clock.advance(300)
    cluster.create("", "v1", "events", event("newer", clock), "default")
    cluster.create("", "v1", "events", event("seen-again", clock, last_seen=0.0), "default")
    clock.advance(299)
    assert cluster.event_expiry.sweep() == 0
    clock.advance(1)  # 600 s after "old" was written
    assert cluster.event_expiry.sweep() == 1
    assert names(cluster) == ["newer", "seen-again"]  # created at 300 s, whatever lastTimestamp says
    clock.advance(300)
    assert cluster.event_expiry.sweep() == 2 and names(cluster) == []


def test_events_can_be_kept_for_good() -> None:
    clock = ManualClock()
    cluster = DevCluster(clock=clock, simulate=False, event_ttl=None)
    cluster.create("", "v1", "events", event("kept", clock), "default")
    clock.advance(10 * 86_400)
    assert cluster.event_expiry is None and names(cluster) == ["kept"]

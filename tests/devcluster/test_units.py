"""The dev cluster's pure parts: selectors, patches, printing helpers, fault rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcluster import FaultRule
from devcluster.catalog import POD_FIELDS
from devcluster.discovery import version_priority
from devcluster.errors import ApiError
from devcluster.patch import json_patch, merge_patch, strategic_merge_patch
from devcluster.selectors import label_selector_object, parse_field_selector, parse_label_selector
from devcluster.tables import human_age, json_path


def labelled(**labels: str) -> dict:
    return {"metadata": {"name": "x", "labels": labels}}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a!=1", {"a": "1"}, False),
        ("a in (1, 2)", {"a": "2"}, True),
        ("a notin (1,2)", {}, True),
        ("a notin (1,2)", {"a": "1"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("a,b=2", {"a": "1", "b": "2"}, True),
        ("a > 3", {"a": "4"}, True),
        ("a<3", {"a": "x"}, False),
        ("x.io/k=v", {"x.io/k": "v"}, True),
        (" a = 1 , b ", {"a": "1", "b": "z"}, True),
        ("", {}, True),
    ],
)
def test_label_selector_text(selector: str, labels: dict, expected: bool) -> None:
    assert parse_label_selector(selector)(labelled(**labels)) is expected


@pytest.mark.parametrize("bad", ["a in (", "a in ()", "=1", "a=b=c", "a b", "-a=1", "a=" + "v" * 64])
def test_bad_label_selectors_are_400(bad: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_label_selector(bad)
    assert caught.value.code == 400


def test_label_selector_objects() -> None:
    selects = label_selector_object(
        {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}
    )
    assert selects is not None and selects(labelled(app="a")) and not selects(labelled(app="a", tier="x"))
    assert label_selector_object(None) is None
    everything = label_selector_object({})
    assert everything is not None and everything(labelled())


def test_field_selectors() -> None:
    unbound = {"metadata": {"name": "p", "namespace": "n"}, "spec": {"hostNetwork": False}, "status": {}}
    bound = {**unbound, "spec": {"nodeName": "n1"}}
    select = parse_field_selector("spec.nodeName=", POD_FIELDS, "pods")
    assert select(unbound) and not select(bound)
    assert parse_field_selector("spec.nodeName!=,metadata.namespace==n", POD_FIELDS, "pods")(bound)
    assert parse_field_selector("spec.hostNetwork=false", POD_FIELDS, "pods")(unbound)
    with pytest.raises(ApiError):
        parse_field_selector("spec.containers=x", POD_FIELDS, "pods")


def test_merge_patch_follows_rfc_7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}
    assert merge_patch(target, {"a": "z", "c": {"f": None}, "l": [3]}) == {"a": "z", "c": {"d": "e"}, "l": [3]}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]}  # inputs are never changed


def test_json_patch_operations() -> None:
    doc = {"a": [1, 2], "b": {"c": 1}}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "add", "path": "/a/0", "value": 0},
            {"op": "replace", "path": "/b/c", "value": 2},
            {"op": "move", "from": "/b/c", "path": "/d"},
            {"op": "copy", "from": "/d", "path": "/e"},
            {"op": "remove", "path": "/a/1"},
            {"op": "test", "path": "/e", "value": 2},
            {"op": "add", "path": "/f~1g", "value": 1},
        ],
    )
    assert out == {"a": [0, 2, 3], "b": {}, "d": 2, "e": 2, "f/g": 1}
    assert doc == {"a": [1, 2], "b": {"c": 1}}
    for bad in (
        [{"op": "remove", "path": "/nope"}],
        [{"op": "test", "path": "/a/0", "value": 9}],
        [{"op": "replace", "path": "/a/5", "value": 1}],
        [{"op": "frobnicate", "path": "/a"}],
    ):
        with pytest.raises(ApiError) as caught:
            json_patch(doc, bad)
        assert caught.value.code == 422


def test_strategic_merge_patch_merges_keyed_lists_and_honours_directives() -> None:
    pod = {
        "metadata": {"finalizers": ["a"]},
        "spec": {"containers": [{"name": "main", "image": "v1"}, {"name": "side", "image": "s"}]},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]},
    }
    out = strategic_merge_patch(
        pod,
        {
            "metadata": {"finalizers": ["b"]},
            "spec": {"containers": [{"name": "main", "image": "v2"}, {"name": "side", "$patch": "delete"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]},
        },
    )
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert out["spec"]["containers"] == [{"name": "main", "image": "v2"}]
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "X", "status": "True"}]
    out = strategic_merge_patch(
        {**pod, "spec": {**pod["spec"], "hostname": "h"}},
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                "$retainKeys": ["containers"],
                "containers": [{"name": "side", "image": "s2"}],
            },
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]},
        },
    )
    assert out["metadata"]["finalizers"] == []
    assert out["spec"] == {"containers": [{"name": "side", "image": "s2"}, {"name": "main", "image": "v1"}]}
    replaced = strategic_merge_patch(pod, {"spec": {"$patch": "replace", "hostname": "h"}})
    assert replaced["spec"] == {"hostname": "h"}


@given(
    st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=5),
    st.dictionaries(st.text(max_size=3), st.none() | st.integers(), max_size=5),
)
def test_merge_patch_sets_and_removes_exactly_what_it_names(target: dict, patch: dict) -> None:
    out = merge_patch(target, patch)
    for key, value in patch.items():
        assert (key not in out) if value is None else out[key] == value
    assert all(out[k] == v for k, v in target.items() if k not in patch)


def test_human_ages_read_like_kubectls() -> None:
    assert [human_age(s) for s in (5, 119, 120, 150, 600, 3 * 3600 + 60, 9 * 3600, 50 * 3600, 10 * 86400)] == [
        "5s",
        "119s",
        "2m",
        "2m30s",
        "10m",
        "3h1m",
        "9h",
        "2d2h",
        "10d",
    ]


def test_json_path_for_printer_columns() -> None:
    obj = {"spec": {"priority": 5, "list": [{"n": 1}, {"n": 2}]}, "metadata": {"labels": {"a.b/c": "x"}}}
    assert json_path(obj, ".spec.priority") == 5
    assert json_path(obj, ".spec.list[1].n") == 2
    assert json_path(obj, ".spec.list[*].n") == [1, 2]
    assert json_path(obj, ".metadata.labels['a.b/c']") == "x"
    assert json_path(obj, ".spec.missing") is None


def test_preferred_versions_come_first() -> None:
    assert sorted(["v1alpha1", "v2alpha2", "v1", "v2", "v1beta1"], key=version_priority) == [
        "v2",
        "v1",
        "v1beta1",
        "v2alpha2",
        "v1alpha1",
    ]


def test_fault_rules_are_checked_when_made() -> None:
    with pytest.raises(ValueError):
        FaultRule(verb="POST")
    with pytest.raises(ValueError):
        FaultRule(code=200)
    rule = FaultRule("create", "pods", "binding", 409, times=None)
    assert rule.matches("create", "pods", "binding", "x") and not rule.matches("create", "pods", "", "x")

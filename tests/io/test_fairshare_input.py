"""The fair-share input file of ``kai-ray fairshare`` (docs/architecture.md#fair-share-input)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kai_ray.errors import InputError
from kai_ray.io.fairshare_input import fairshare_problem_from_mapping, load_fairshare_problem

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fairshare.yaml"


def problem(queues: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"total": {"gpu": 8, "cpu": 8000, "memory": 10**10}, "queues": queues, **top}


def test_the_example_file_loads_with_its_units_unchanged() -> None:
    loaded = load_fairshare_problem(EXAMPLE)
    assert list(loaded.total) == [16, 64000, 256_000_000_000]  # memory in bytes, not 10^6
    assert [s.name for s in loaded.specs] == ["research", "team-vision", "team-nlp", "production"]
    nlp = next(s for s in loaded.specs if s.name == "team-nlp")
    assert nlp.parent == "research" and nlp.deserved[0] == 4 and nlp.limit[0] == 6
    assert loaded.request["research"] == (14, 30000, 1e11)


def test_omitted_fields_take_the_simulator_defaults() -> None:
    loaded = fairshare_problem_from_mapping(problem([{"name": "q"}]))
    (spec,) = loaded.specs
    assert spec.parent is None and spec.priority == 100 and spec.created == 0
    assert spec.deserved == (0, 0, 0) and spec.over_quota_weight == (1, 1, 1) and spec.limit == (-1, -1, -1)
    assert loaded.request["q"] == loaded.usage["q"] == (0, 0, 0)
    assert loaded.k_value == 0


@pytest.mark.parametrize(
    ("queues", "top", "message"),
    [
        ([{"name": "q", "resources": {"gpu": {"request": -1}}}], {}, "queue q: resources.gpu.request: must not be"),
        ([{"name": "q", "resources": {"gpu": {"quota": -2}}}], {}, "queue q: resources.gpu.quota: must be -1 or"),
        ([{"name": "q", "resources": {"cpu": {"limit": "lots"}}}], {}, "queue q: resources.cpu.limit: not a number"),
        ([{"name": "q", "resources": {"gpu": 3}}], {}, "queue q: resources.gpu: must be a mapping"),
        ([{"name": "q", "priority": 1.5}], {}, "queue q: priority: must be a whole number"),
        ([{"name": "q", "parent": "nobody"}], {}, "queue q: parent: no queue named 'nobody'"),
        ([{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}], {}, "parent: cycle"),
        ([{"name": "q"}, {"name": "q"}], {}, "queue q: name appears twice"),
        ([{"resources": {}}], {}, "queues[0].name: missing"),
        ([{"name": "q"}], {"kValue": -1}, "kValue: must not be negative"),
        ([{"name": "q"}], {"total": {"gpu": -4}}, "total: amounts must not be negative"),
        ([{"name": "q"}], {"total": {"gpu": "eight"}}, "total.gpu: not a number"),
        ([{"name": "q"}], {"total": [8]}, "total: must be a mapping"),
        ({"name": "q"}, {}, "queues: missing or not a list"),
    ],
)
def test_bad_input_is_refused_naming_the_queue_and_field(
    queues: Any,
    top: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(InputError) as caught:
        fairshare_problem_from_mapping(problem(queues, **top), "fs.yaml")
    assert str(caught.value).startswith("fs.yaml: ") and message in str(caught.value)


def test_a_file_that_is_not_one_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("total: {}\nqueues: []\n---\ntotal: {}\nqueues: []\n")
    with pytest.raises(InputError, match="expected one mapping"):
        load_fairshare_problem(path)
    path.write_text("")
    with pytest.raises(InputError, match="expected one mapping"):
        load_fairshare_problem(path)

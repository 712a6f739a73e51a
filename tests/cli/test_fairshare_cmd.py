"""``kai-ray fairshare FILE``: the division alone, as JSON (docs/architecture.md#fair-share-input)
or as an indented table."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import RunCli
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "fairshare.yaml"


def test_the_example_prints_each_queues_fair_share_and_what_is_left(kai_ray: RunCli) -> None:
    result = kai_ray("fairshare", EXAMPLE)
    assert result.code == 0 and result.err == ""
    out = result.json()
    assert list(out) == ["queues", "remaining"]
    assert list(out["queues"]) == ["research", "team-vision", "team-nlp", "production"]  # input order
    gpus = {name: q["fairShare"]["gpu"] for name, q in out["queues"].items()}
    # Top: research 8 + production 6 deserved, the 2 spare to research (production asks no more).
    # Inside research's 10: quotas 4 + 4, team-nlp asks only 4, so the spare 2 go to team-vision.
    assert gpus == {"research": 10, "team-vision": 6, "team-nlp": 4, "production": 6}
    assert out["remaining"] == {"gpu": 0, "cpu": 34_000, "memory": 156_000_000_000}


def test_the_text_table_lists_children_under_their_parent(kai_ray: RunCli) -> None:
    lines = kai_ray("fairshare", EXAMPLE, "-o", "text").out.splitlines()
    rows = [line.split()[0] for line in lines[2:] if line.strip() and not line.startswith("undistributed")]
    assert rows == ["research", "team-vision", "team-nlp", "production"]
    assert lines[3].startswith("  team-vision") and lines[5].startswith("production")
    assert lines[-1] == "undistributed at the top level: gpu 0, cpu 34, memory 156G"


def test_json_input_works_like_yaml(kai_ray: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "fs.json"
    path.write_text(
        '{"total": {"gpu": 3}, "queues": [{"name": "a", "resources": {"gpu": {"request": 1.8}}},'
        ' {"name": "b", "creationOrder": 1, "resources": {"gpu": {"request": 1.8}}}]}'
    )
    out = kai_ray("fairshare", path).json()
    assert out["queues"]["a"]["fairShare"]["gpu"] == 1.8 and out["queues"]["b"]["fairShare"]["gpu"] == 1.2

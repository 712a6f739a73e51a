"""The long run's memory samples: each process's resident memory split into what can leak and what cannot."""

from __future__ import annotations

import sys

import psutil
import pytest

from loadtests.long_run import Samples, _actor_role

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident pages by kind are Linux's")


def test_a_sample_splits_resident_memory_into_anonymous_and_file_backed_pages() -> None:
    samples = Samples()
    samples.take({"this process": [psutil.Process()]})
    total = samples.rss_mib["this process"][-1][1]
    anonymous = samples.rss_mib["this process [anon]"][-1][1]
    file_backed = samples.rss_mib["this process [file]"][-1][1]
    # A Python process holds its heap in anonymous pages and its interpreter's code in file-backed ones.
    assert anonymous > 0 and file_backed > 0
    assert anonymous + file_backed == pytest.approx(total, abs=1.0)  # read a moment apart


def test_a_process_gone_between_listing_and_sampling_is_left_out() -> None:
    gone = psutil.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    samples = Samples()
    samples.take({"gone": [gone]})
    assert samples.rss_mib["gone"][-1][1] == 0
    assert "gone [anon]" not in samples.rss_mib


def test_each_kai_ray_actor_is_told_apart_by_its_process_title() -> None:
    assert _actor_role("ray::ShardActor.handle_packed") == "ray shard actors"
    assert _actor_role("ray::_CoordinatorHost.call_packed") == "ray coordinator actor"
    assert _actor_role("ray::IDLE") == "ray other workers"

"""The device book: CEL selectors, the allocator's search, a device held by one claim at a time."""

from __future__ import annotations

import pytest

from kai_ray.model import Device
from placement.dra_cel import SELECTORS
from placement.dra_demand import ClaimSpec, RequestSpec
from placement.dra_devices import DeviceBook

DRIVER = "gpu.nvidia.com"
ANY = (f"device.driver == '{DRIVER}'",)


def gpu(i: int, memory_gib: int = 80, product: str = "H100", version: str = "550.1.0") -> Device:
    return Device(
        DRIVER,
        "n",
        f"gpu-{i}",
        ((DRIVER, "index", i), (DRIVER, "productName", product), (DRIVER, "driverVersion", "v:" + version)),
        ((DRIVER, "memory", float(memory_gib * 2**30)),),
    )


def spec(*requests: RequestSpec, name: str = "c") -> tuple[ClaimSpec, ...]:
    return (ClaimSpec(name, requests),)


def req(count: int = 1, *selectors: str, mode: str = "ExactCount", name: str = "r") -> RequestSpec:
    return RequestSpec(name, "gpu", ANY + selectors, mode, count)


@pytest.mark.parametrize(
    ("expression", "selected"),
    [
        (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0", [0]),
        (f"device.capacity['{DRIVER}'].memory.isLessThan(quantity('40Gi'))", [1]),
        (f"device.attributes['{DRIVER}'].productName == 'A100'", [1]),
        (f"device.attributes['{DRIVER}'].driverVersion.isGreaterThan(semver('550.0.0'))", [0]),
        (f"device.attributes['{DRIVER}'].index in [1, 2]", [1]),
        (f"device.attributes['{DRIVER}'].noSuchAttribute == 1", []),  # an error selects nothing
    ],
)
def test_selectors_are_kubernetes_cel(expression: str, selected: list[int]) -> None:
    devices = [gpu(0), gpu(1, memory_gib=24, product="A100", version="535.0.0")]
    assert [i for i, d in enumerate(devices) if SELECTORS.matches((expression,), d)] == selected


def test_a_selector_that_does_not_compile_selects_nothing_and_says_why() -> None:
    book = DeviceBook()
    book.set_devices(0, [gpu(0)])
    broken = spec(req(1, "device.driver ==== 'x'"))
    assert not book.fits(0, broken)
    assert "does not compile" in book.shortfall(0, broken)


def test_the_search_backtracks_when_a_greedy_pick_would_starve_a_later_request() -> None:
    book = DeviceBook()
    book.set_devices(0, [gpu(0, 80), gpu(1, 24)])
    # The first request takes any GPU; the second needs the big one. Greedy would give gpu-0 to the first.
    big = f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"
    allocation = book.allocate(0, spec(req(1, name="any"), req(1, big, name="big")))
    assert allocation is not None
    assert [(name, d.name) for name, d in allocation[0]] == [("any", "gpu-1"), ("big", "gpu-0")]


def test_all_mode_takes_every_matching_device_and_needs_them_all_free() -> None:
    book = DeviceBook()
    book.set_devices(0, [gpu(0), gpu(1), gpu(2, 24)])
    big = f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"
    allocation = book.allocate(0, spec(req(0, big, mode="All")))
    assert allocation is not None and [d.name for _, d in allocation[0]] == ["gpu-0", "gpu-1"]
    book.take("other", [gpu(1).key], 0)
    assert book.allocate(0, spec(req(0, big, mode="All"))) is None


def test_first_available_uses_the_first_alternative_that_fits() -> None:
    book = DeviceBook()
    book.set_devices(0, [gpu(0), gpu(1)])
    options = RequestSpec("r", "gpu", (), "ExactCount", 0, (req(4, name="r/four"), req(2, name="r/two")))
    allocation = book.allocate(0, spec(options))
    assert allocation is not None and {name for name, _ in allocation[0]} == {"r/two"}


def test_a_device_held_by_one_claim_is_refused_to_another_until_released() -> None:
    book = DeviceBook()
    book.set_devices(0, [gpu(0)])
    assert book.take("a", [gpu(0).key], 0) == ""
    assert "already allocated to claim a" in book.take("b", [gpu(0).key], 0)
    assert not book.fits(0, spec(req(1)))
    book.release("a")
    assert book.fits(0, spec(req(1)))


def node_gpus(pool: str, *memory_gib: int) -> list[Device]:
    return [
        Device(DRIVER, pool, f"gpu-{i}", ((DRIVER, "index", i),), ((DRIVER, "memory", float(m * 2**30)),))
        for i, m in enumerate(memory_gib)
    ]


def test_nodes_of_one_type_share_verdicts_but_each_answers_for_its_own_devices() -> None:
    big = f"device.capacity['{DRIVER}'].memory.compareTo(quantity('60Gi')) >= 0"
    two_big = spec(req(2, big))
    book = DeviceBook()
    book.set_devices(0, node_gpus("a", 80, 80))
    book.set_devices(1, node_gpus("b", 80, 80))
    book.set_devices(2, node_gpus("c", 80, 24))  # same names and indices, a smaller second GPU
    assert [book.fits(row, two_big) for row in (0, 1, 2)] == [True, True, False]

    assert book.take("held", ["gpu.nvidia.com/a/gpu-1"]) == ""
    assert [book.fits(row, two_big) for row in (0, 1, 2)] == [False, True, False]

    session = book.copy(None)  # shares what the book learned, not what it holds
    assert session.take("other", ["gpu.nvidia.com/b/gpu-0"]) == ""
    session.release("held")
    assert [session.fits(row, two_big) for row in (0, 1)] == [True, False]
    assert [book.fits(row, two_big) for row in (0, 1)] == [False, True]

    book.release("held")
    assert book.fits(0, two_big)
    book.set_devices(0, node_gpus("a", 24, 80))  # the node's devices change under the same names
    assert not book.fits(0, two_big)


def test_a_claim_over_two_nodes_changes_both_nodes_verdicts() -> None:
    one = spec(req(1))
    book = DeviceBook()
    book.set_devices(0, node_gpus("a", 80))
    book.set_devices(1, node_gpus("b", 80))
    assert book.fits(0, one) and book.fits(1, one)
    assert book.take("wide", ["gpu.nvidia.com/a/gpu-0", "gpu.nvidia.com/b/gpu-0"]) == ""
    assert not book.fits(0, one) and not book.fits(1, one)
    book.release("wide")
    assert book.fits(0, one) and book.fits(1, one)

"""infra/machines.py: machine shapes and the room GKE leaves for pods on a CPU system node."""

import pytest

from infra.machines import gke_reserved_cpu, gke_reserved_memory_gib, machine_shape, system_node_room


@pytest.mark.parametrize(
    ("machine", "shape"),
    [
        ("n2-standard-16", (16, 64.0)),
        ("n2-highmem-8", (8, 64.0)),
        ("e2-highcpu-4", (4, 4.0)),
        ("n1-standard-4", (4, 15.0)),
        ("n2d-standard-32", (32, 128.0)),
    ],
)
def test_predefined_machine_types_of_uniform_families_have_their_documented_shape(machine, shape):
    assert machine_shape(machine) == shape, machine


@pytest.mark.parametrize(
    "machine", ["c4-standard-8", "n4-highcpu-16", "a4-highgpu-8g", "n2-custom-8-32768", "e2-medium"]
)
def test_machine_types_whose_shape_is_not_known_here_are_not_guessed(machine):
    assert machine_shape(machine) is None and system_node_room(machine) is None, machine


def test_a_system_node_keeps_gkes_reservations_and_room_for_system_pods():
    cpu, memory = system_node_room("n2-standard-16")
    # GKE: 6% + 1% + 2 x 0.5% + 12 x 0.25% of the cores; 25/20/10/6% tiers of 64 GiB; 100 MiB eviction.
    assert gke_reserved_cpu(16) == pytest.approx(0.11)
    assert gke_reserved_memory_gib(64) == pytest.approx(1 + 0.8 + 0.8 + 48 * 0.06)
    assert cpu == pytest.approx(16 - 0.11 - 1.0)
    assert memory == pytest.approx(64 * 0.98 - 5.48 - 100 / 1024 - 2.0)


def test_every_machine_of_the_cpu_pool_catalogue_is_priced_by_the_price_table():
    from infra.machines import SYSTEM_POOL_MACHINES, machine_series
    from infra.prices import PriceTable

    table = PriceTable.load()
    unpriced = [
        m
        for m in SYSTEM_POOL_MACHINES
        if not table.has(f"cpu.{machine_series(m)}.vcpuHour") or not table.has(f"cpu.{machine_series(m)}.gibHour")
    ]
    assert not unpriced, f"catalogued but not priced in data/prices.yaml: {unpriced}"


def test_the_catalogue_keeps_the_shapes_that_break_the_ratio():
    # Compute Engine's N2 table: n2-highmem-128 has 864 GB, not 8 x 128.
    assert machine_shape("n2-highmem-128") == (128, 864.0)
    assert machine_shape("n2-highcpu-96") == (96, 96.0)


@pytest.mark.parametrize(
    ("machine", "gpu"),
    [
        ("a4-highgpu-8g", True),
        ("a3-ultragpu-8g", True),
        ("a2-ultragpu-1g", True),
        ("g2-standard-8", True),
        ("a4x-highgpu-4g", True),
        ("n2-highmem-16", False),
        ("c4-standard-8", False),
        ("e2-medium", False),
    ],
)
def test_gpu_machine_types_are_told_from_cpu_ones(machine, gpu):
    from infra.machines import is_gpu_machine_type

    assert is_gpu_machine_type(machine) is gpu

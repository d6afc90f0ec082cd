"""The acceptance gate's storage I/O on a node (workloads/gate/storage_io.py)."""

from __future__ import annotations

from workloads.gate import storage_io


def test_a_read_opens_the_named_nodes_files_so_a_node_whose_files_are_missing_cannot_be_read_in_their_stead(tmp_path):
    # The driver hands each node another node's files (tests/test_driver.py): a read of node 1's must not
    # quietly read node 0's.
    storage_io.parallel_io(tmp_path, 0, storage_io.BLOCK * 2, 2, write=True)
    result = storage_io.parallel_io(tmp_path, 1, storage_io.BLOCK * 2, 2, write=False)
    assert [e.split(":")[0] for e in result["errors"]] == ["node1-0.bin", "node1-1.bin"]
    # The node's own files read whole, in as many streams as were written.
    mine = storage_io.parallel_io(tmp_path, 0, storage_io.BLOCK * 2, 2, write=False)
    assert mine["errors"] == [] and mine["bytes"] == storage_io.BLOCK * 2

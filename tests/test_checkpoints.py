"""Reading the checkpoint directory as NeMo-RL writes it (workloads/checkpoints.py)."""

from __future__ import annotations

import os
import time

from workloads import checkpoints


def write_save(step_dir, optimizer: bool = True):
    """A finished save as NeMo-RL's DTensor worker leaves it: DCP shards, then `.metadata` (written last)."""
    for part in ("weights", "optimizer") if optimizer else ("weights",):
        d = step_dir / "policy" / part
        d.mkdir(parents=True, exist_ok=True)
        (d / "__0_0.distcp").write_bytes(b"x" * 8)
        (d / ".metadata").write_bytes(b"m")


def make(tmp_path, *names: str, files: bool = False):
    for name in names:
        (tmp_path / name).mkdir()
        # NeMo-RL writes training_info.json first, into tmp_step_N: its presence marks nothing.
        (tmp_path / name / "training_info.json").write_text("{}")
        if name.startswith("step_"):
            write_save(tmp_path / name)
    if files:
        (tmp_path / "step_99").write_text("a file, not a checkpoint directory")
    return tmp_path


def test_only_complete_step_directories_count_and_the_newest_is_where_a_run_resumes(tmp_path):
    d = make(tmp_path, "step_2", "step_10", "tmp_step_12", "old_step_4", "step_x", files=True)
    found = checkpoints.scan(d)
    assert found.complete == (2, 10) and found.partial == (12,) and found.latest == 10
    assert checkpoints.scan(tmp_path / "missing") == checkpoints.CheckpointScan((), ())
    assert checkpoints.scan(tmp_path / "missing").latest == 0


def test_stale_partial_saves_are_removed_and_complete_ones_kept(tmp_path):
    d = make(tmp_path, "step_4", "tmp_step_6", "tmp_step_8")
    (d / "tmp_step_6" / "shard-0.distcp").write_bytes(b"x" * 10)
    assert checkpoints.clean_partial(d) == ["tmp_step_6", "tmp_step_8"]
    assert sorted(p.name for p in d.iterdir()) == ["step_4"]
    assert checkpoints.clean_partial(d) == []


def test_a_step_directory_that_appears_before_its_files_is_not_a_checkpoint(tmp_path):
    # An async save (DTensor v2 at NeMo-RL v0.6.0): grpo.py renames tmp_step_6 to step_6 while the
    # background writer is still writing; the writer then re-creates tmp_step_6 with the shards.
    d = make(tmp_path, "step_4")
    (d / "step_6" / "policy" / "weights").mkdir(parents=True)
    (d / "step_6" / "policy" / "optimizer").mkdir(parents=True)
    (d / "step_6" / "training_info.json").write_text("{}")
    assert checkpoints.scan(d).latest == 4 and checkpoints.scan(d).incomplete == (6,)
    # Shards without the `.metadata` DCP writes last: the save has not finished.
    (d / "step_6" / "policy" / "weights" / "__0_0.distcp").write_bytes(b"x")
    (d / "step_6" / "policy" / "weights" / ".metadata").write_bytes(b"m")
    (d / "step_6" / "policy" / "optimizer" / "__0_0.distcp").write_bytes(b"x")
    assert checkpoints.scan(d).latest == 4
    (d / "step_6" / "policy" / "optimizer" / ".metadata").write_bytes(b"m")
    assert checkpoints.scan(d).latest == 6 and checkpoints.scan(d).incomplete == ()
    assert checkpoints.steps_lost(7, checkpoints.scan(d).latest) == 1


def test_a_real_dcp_save_is_whole_only_once_it_finished(tmp_path):
    import torch
    import torch.distributed.checkpoint as dcp

    weights = tmp_path / "step_1" / "policy" / "weights"
    dcp.save({"w": torch.ones(4)}, checkpoint_id=str(weights))
    assert checkpoints.is_whole(tmp_path / "step_1")
    (weights / ".metadata").unlink()
    assert not checkpoints.is_whole(tmp_path / "step_1")


def test_a_partial_save_that_may_still_be_written_after_a_head_restart_is_kept(tmp_path):
    d = make(tmp_path, "tmp_step_6", "tmp_step_8")
    old = time.time() - checkpoints.QUIET_SECONDS - 5
    for path in [d / "tmp_step_8", d / "tmp_step_8" / "training_info.json"]:
        os.utime(path, (old, old))
    (d / "tmp_step_6" / "__0_0.distcp").write_bytes(b"x")  # a live writer's shard, just now
    assert checkpoints.clean_partial(d, quiet=checkpoints.QUIET_SECONDS) == ["tmp_step_8"]
    assert sorted(p.name for p in d.iterdir()) == ["tmp_step_6"]


def test_the_step_an_attempt_was_in_comes_from_nemo_rls_step_banner_and_gives_the_steps_lost():
    log = (
        "\n========================= Step 11/20 =========================\n"
        "Saving checkpoint for step 11...\n"
        "\n========================= Step 12/20 =========================\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    )
    assert checkpoints.last_started_step(log) == 12
    assert checkpoints.last_started_step("no banner\nStep 3/20\n") is None
    # In step 19 with the last complete checkpoint at 10: steps 11..19 are done again (the example of issue 23).
    assert checkpoints.steps_lost(19, 10) == 9
    assert checkpoints.steps_lost(12, 12) == 0 and checkpoints.steps_lost(None, 3) is None

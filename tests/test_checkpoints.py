"""Reading the checkpoint directory as NeMo-RL writes it (workloads/checkpoints.py)."""

from __future__ import annotations

from workloads import checkpoints


def make(tmp_path, *names: str, files: bool = False):
    for name in names:
        (tmp_path / name).mkdir()
        # NeMo-RL writes training_info.json first, into tmp_step_N: its presence marks nothing.
        (tmp_path / name / "training_info.json").write_text("{}")
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

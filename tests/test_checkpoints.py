"""Reading the checkpoint directory as NeMo-RL writes it (workloads/checkpoints.py)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
import yaml

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
        (tmp_path / name).mkdir(parents=True)
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


# ------------------------------------------------------------------ before every attempt: only whole steps resumable


def nemo_rl_latest(directory) -> "Path | None":
    """The step NeMo-RL resumes from, by its own rule: the entries `glob("step_*")` lists whose name
    `re.fullmatch(r"step_\\d+")` accepts, the highest number, unchecked (NVIDIA-NeMo/RL nemo_rl/utils/checkpoint.py
    `get_latest_checkpoint_path`, the same at v0.4.0 c751f811, v0.5.0 6c708930, v0.6.0 5fb58893, v0.7.0 81aa43dd)."""
    steps = [p for p in Path(directory).glob("step_*") if re.fullmatch(r"step_\d+", p.name)]
    return max(steps, key=lambda p: int(p.name.split("_")[1]), default=None)


def write_config(step_dir, model: str, seq: int, tp: int, *, megatron: bool = False, pp: int = 1) -> None:
    """The run's config as NeMo-RL saves it with each step (`init_tmp_checkpoint`: `yaml.safe_dump` of the resolved
    config into `config.yaml`), the keys that name the run only."""
    policy = {
        "model_name": model,
        "max_total_sequence_length": seq,
        "dtensor_cfg": {"enabled": not megatron, "tensor_parallel_size": 1 if megatron else tp},
        "megatron_cfg": {"enabled": megatron, "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp},
    }
    (step_dir / "config.yaml").write_text(yaml.safe_dump({"policy": policy, "grpo": {"max_num_steps": 20}}))


def test_an_incomplete_step_is_renamed_aside_and_kept_so_nemo_rl_resumes_from_the_newest_whole_one(tmp_path):
    d = make(tmp_path, "step_10")
    (d / "step_20" / "policy" / "weights").mkdir(parents=True)  # an async save renamed before its write ended
    (d / "step_20" / "policy" / "weights" / "__0_0.distcp").write_bytes(b"x")
    (d / "step_30").write_text("a file: NeMo-RL's glob lists it too")
    (d / "incomplete_step_20").mkdir()  # set aside by an earlier attempt: never into it
    (d / "incomplete_step_20" / "mine").write_text("kept")
    assert nemo_rl_latest(d).name == "step_30"  # what NeMo-RL would load today
    said: list[str] = []
    assert checkpoints.set_aside_incomplete(d, said.append) == ["incomplete_step_20.2", "incomplete_step_30"]
    assert said == [
        f"nemo-rl-gke: step_20 in {d} is not a whole save (no finish marker): renamed incomplete_step_20.2, kept",
        f"nemo-rl-gke: step_30 in {d} is not a whole save (no finish marker): renamed incomplete_step_30, kept",
    ]
    assert nemo_rl_latest(d) == d / "step_10" and checkpoints.is_whole(nemo_rl_latest(d))
    assert (d / "incomplete_step_20.2" / "policy" / "weights" / "__0_0.distcp").read_bytes() == b"x"
    assert sorted(p.name for p in (d / "incomplete_step_20").iterdir()) == ["mine"]
    assert checkpoints.scan(d) == checkpoints.CheckpointScan((10,), ())
    assert checkpoints.set_aside_incomplete(d, said.append) == [] and len(said) == 2


def test_the_run_a_saved_step_belongs_to_is_read_from_the_config_nemo_rl_saved_with_it(tmp_path):
    for name in ("a", "b", "c", "d"):
        (tmp_path / name).mkdir()
    write_config(tmp_path / "a", "Qwen/Qwen2.5-1.5B-Instruct", 512, 1)
    write_config(tmp_path / "b", "Qwen/Qwen2.5-72B-Instruct", 4096, 4, megatron=True, pp=4)
    (tmp_path / "c" / "config.yaml").write_text("policy: {model_name: x}\n")  # no layout: not known
    assert checkpoints.recorded_run_key(tmp_path / "a") == "Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp1-pp1"
    assert checkpoints.recorded_run_key(tmp_path / "b") == "Qwen_Qwen2.5-72B-Instruct-seq4096-megatron-tp4-pp4"
    assert checkpoints.recorded_run_key(tmp_path / "c") is None and checkpoints.recorded_run_key(tmp_path / "d") is None


def test_a_legacy_step_that_appears_in_the_run_directory_while_it_is_moved_fails_the_attempt_and_is_never_nested(
    tmp_path, monkeypatch
):
    legacy, current = tmp_path / "old", tmp_path / "old" / "Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp1-pp1"
    make(legacy, "step_40")
    write_config(legacy / "step_40", "Qwen/Qwen2.5-1.5B-Instruct", 512, 1)
    real = checkpoints.recorded_run_key

    def and_meanwhile(step_dir):  # after the look at current/step_40, before the move: NeMo-RL finalizes step_40
        current.mkdir(exist_ok=True)
        make(current, "step_40")
        return real(step_dir)

    monkeypatch.setattr(checkpoints, "recorded_run_key", and_meanwhile)
    said: list[str] = []
    with pytest.raises(checkpoints.PrepareError, match=f"cannot move {legacy}/step_40 to {current}/step_40"):
        checkpoints.adopt_legacy(legacy, current, said.append)
    assert said == [] and (legacy / "step_40" / "config.yaml").is_file()
    assert sorted(p.name for p in (current / "step_40").iterdir()) == ["policy", "training_info.json"]


def test_the_step_before_an_attempt_refuses_other_arguments_in_one_line(capsys):
    assert checkpoints.main([]) == 2 and checkpoints.main(["relative/dir"]) == 2
    assert checkpoints.main(["/a", "/b", "/c"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and err[0] == "nemo-rl-gke: usage: CHECKPOINT_DIR [LEGACY_DIR], absolute paths; got []"

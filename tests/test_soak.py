"""The fault-injection soak (tests/soak): a short seeded run on the simulated head, and its checks catching
what they are there to catch."""

from __future__ import annotations

import io
import random

from tests.soak import soak_run
from tests.soak.__main__ import soak
from tests.soak.sim_ray import SimJob


def test_a_short_seeded_soak_injects_its_faults_and_counts_its_runs():
    out = io.StringIO()
    found = soak(24, 7, real_every=0, out=out)
    faults, runs = out.getvalue().split(" faults, ")[0], out.getvalue().split(", ")[1]
    assert faults == "24" and runs.endswith(" runs") and int(runs.split()[0]) >= 8
    assert all("seed 7" in line for line in found)


def test_the_same_seed_gives_the_same_violations():
    assert soak(12, 3, real_every=0, out=io.StringIO()) == soak(12, 3, real_every=0, out=io.StringIO())


def test_a_soak_of_sixty_faults_finds_no_violation():
    assert soak(60, 1, real_every=0, out=io.StringIO()) == []


def test_a_second_training_attempt_beside_a_running_one_is_a_violation(tmp_path):
    run = soak_run.SoakRun(5, 0, [], tmp_path, is_async=False)
    run.advance(150)  # the gate (60 s), then attempt 1 runs
    assert [j.status for j in run.active()] == ["RUNNING"] and run.violations == []
    run.ray.jobs["intruder"] = SimJob("intruder", "x", {}, {}, run.now_ms(), "RUNNING", trainer=run.new_trainer())
    run.ray.jobs["intruder"].trainer.start(run.now)
    run.advance(10)
    assert any("two attempts at once" in v and "intruder" in v for v in run.violations), run.violations


def test_a_submission_without_a_passing_gate_on_the_current_nodes_is_a_violation(tmp_path):
    run = soak_run.SoakRun(5, 1, [], tmp_path, is_async=False)
    run.ray.submit_job(entrypoint="x", submission_id="ungated", metadata=dict(run.spec.metadata))
    assert any("ungated submitted without a passing gate" in v for v in run.violations), run.violations


def test_an_asynchronous_save_renamed_before_its_files_is_found_not_whole(tmp_path):
    run = soak_run.SoakRun(5, 2, ["driver_killed"], tmp_path, is_async=True, sync_override=False)
    run.schedule = [(run.now + 400, "driver_killed")]
    run.play()
    assert any("which is not whole" in v for v in run.violations), run.violations


def test_pick_faults_draws_from_every_simulated_fault():
    rng = random.Random(0)
    drawn = {f for _ in range(200) for f in soak_run.pick_faults(rng, 3)}
    assert drawn == set(soak_run.SIM_FAULTS)

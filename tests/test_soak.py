"""The fault-injection soak (tests/soak): a short seeded run on the simulated head, and its checks catching
what they are there to catch."""

from __future__ import annotations

import io
import random

import pytest

from tests.soak import sim_ray, soak_checks, soak_run
from tests.soak.__main__ import main, soak
from tests.soak.sim_ray import SimJob
from workloads import goodput, job_spec
from workloads.recipes import RECIPES


def test_a_short_seeded_soak_injects_its_faults_and_counts_its_runs():
    out = io.StringIO()
    found = soak(24, 7, real_every=0, out=out)
    faults, runs = out.getvalue().split(" faults, ")[0], out.getvalue().split(", ")[1]
    assert faults == "24" and runs.endswith(" runs") and int(runs.split()[0]) >= 8
    assert all("seed 7" in line for line in found)


def test_the_same_seed_plays_the_same_run(tmp_path):
    def played(workdir):
        run = soak_run.SoakRun(3, 4, ["node_lost", "state_lost", "driver_killed"], workdir, is_async=True)
        run.play()
        return run.injected, [(a.attempt, a.start, a.end, a.cause) for a in run.watcher.ledger.attempts]

    first = played(tmp_path / "a")
    assert len(first[1]) >= 2 and first == played(tmp_path / "b")


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
    run.ray.submit_job(entrypoint=run.spec.entrypoint, submission_id="ungated", metadata=dict(run.spec.metadata))
    assert any("ungated submitted without a passing gate" in v for v in run.violations), run.violations


def test_a_job_builder_without_the_synchronous_save_override_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(job_spec, "_saves_async", lambda tag: False)  # the plant: no ++checkpointing.is_async=false
    run = soak_run.SoakRun(5, 2, ["driver_killed"], tmp_path, is_async=True)
    assert "checkpointing.is_async" not in run.spec.entrypoint
    run.schedule = [(run.now + 400, "driver_killed")]
    run.play()
    assert any("step_3 appeared before its files were written" in v for v in run.violations), run.violations


def test_the_soak_runs_the_job_builders_entrypoint_and_both_save_modes(tmp_path):
    asynchronous = soak_run.SoakRun(5, 5, [], tmp_path / "a", is_async=True)
    synchronous = soak_run.SoakRun(5, 5, [], tmp_path / "s", is_async=False)
    assert asynchronous.spec.entrypoint.endswith(
        job_spec.build_job(
            RECIPES[soak_run.ASYNC_RECIPE],
            soak_run.SoakJobSettings(
                soak_run.ASYNC_RECIPE, RECIPES[soak_run.ASYNC_RECIPE].parallelism, asynchronous.total
            ),
            soak_run.SoakPool(),
            str(tmp_path / "a"),
            "soak",
            False,
            soak_run.PERIOD,
        ).entrypoint.split(" && ")[-1]
    )
    assert asynchronous.new_trainer().is_async is False and asynchronous.native_async is True
    assert synchronous.new_trainer().is_async is False and "is_async" not in synchronous.spec.entrypoint
    assert asynchronous.new_trainer().ckpt == asynchronous.ckpt


def test_pick_faults_draws_from_every_simulated_fault():
    rng = random.Random(0)
    drawn = {f for _ in range(200) for f in soak_run.pick_faults(rng, 3)}
    assert drawn == set(soak_run.SIM_FAULTS)


def test_an_attempt_the_head_forgot_while_the_watcher_was_down_is_charged_until_the_head_restarted(tmp_path):
    # Seed 5's run 66: the attempt fails, its head restarts, and the watcher, down all along, finds it lost later.
    run = soak_run.SoakRun(5, 4, [], tmp_path, is_async=False)
    run.advance(150)
    job = run._running()
    assert job is not None
    run.watcher_down_until = run.now + 400
    run.advance(20)
    run.ray.end(job, "FAILED", 1, "OSError: [Errno 5] Input/output error (checkpoint write)")
    run.advance(20)
    run._fault_head_restart()
    run.advance(600)
    soak_checks.at_end(run)
    assert run.violations == []


def test_a_watcher_that_lost_its_state_with_the_job_table_after_a_success_submits_nothing(tmp_path):
    run = soak_run.SoakRun(5, 3, [], tmp_path, is_async=False)
    run.play()
    assert run.final == "success" and run.violations == []
    run.inject("state_lost")
    run.advance(900)
    assert run.violations == [] and len(run.training()) == 0


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--faults", "-1"], "error: argument --faults: -1 is out of range; allowed: an integer from 1 to 10000"),
        (["--faults", "10001"], "error: argument --faults: 10001 is out of range; allowed: an integer from 1 to 10000"),
        (["--faults", "1\nerror: forged"], "error: argument --faults: '1\\nerror: forged' is not an integer; allowed:"),
        (
            ["--seed", "1.5"],
            "error: argument --seed: '1.5' is not an integer; allowed: an integer from 0 to 4294967295",
        ),
        (["--real-every", "-2"], "error: argument --real-every: -2 is out of range; allowed: an integer from 0 to"),
        (["--fault", "3"], "error: unrecognized arguments: --fault 3; allowed: --faults, --seed, --real-every,"),
    ],
)
def test_a_bad_flag_is_one_error_line_naming_it_and_what_is_allowed_exit_2(argv, expected, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(expected) and err.count("\n") == 1, err


def test_nemo_rl_loading_a_step_that_is_not_whole_is_a_violation(tmp_path, monkeypatch):
    # The entrypoint's checkpoint step skipped, and step_6 planted (written only in part) once the owner has
    # submitted: NeMo-RL's own lookup takes it.
    monkeypatch.setattr(sim_ray, "run_shell_steps", lambda shell: (0, ""))
    run = soak_run.SoakRun(5, 6, [], tmp_path, is_async=False)
    while not run.training():
        run.advance(10)
    monkeypatch.setattr(run.rng, "random", lambda: 0.9)  # in the run's own directory
    run.inject("async_leftover")
    run.advance(30)
    assert any("resumed from step_6, which is not whole" in v for v in run.violations), run.violations


def test_an_attempt_the_head_forgot_and_a_second_submitter_replaced_is_charged_until_the_head_restarted(tmp_path):
    # Seed 5's run 73 with the real head: the watcher is down while the head restarts and a user submits attempt 2.
    run = soak_run.SoakRun(5, 7, [], tmp_path, is_async=False)
    run.advance(150)
    assert run._running() is not None
    run.watcher_down_until = run.now + 400
    run._fault_head_restart()
    run.advance(100)
    run.inject("second_submitter")
    run.advance(600)
    soak_checks.at_end(run)
    assert [r.cause for r in run.watcher.ledger.attempts] == ["superseded", "succeeded"]
    assert run.violations == []


def _played(tmp_path, faults, seed=1, index=0, is_async=False):
    run = soak_run.SoakRun(seed, index, faults, tmp_path, is_async=is_async)
    run.play()
    return run


@pytest.mark.parametrize("fault", ["release_then_up", "helm_restore", "two_day_idle", "old_nodes", "stockout"])
def test_each_fault_of_the_runs_whole_life_plays_without_a_violation_on_the_real_owner(tmp_path, fault):
    run = _played(tmp_path, [fault])
    assert run.violations == [] and fault in run.injected
    if fault == "stockout":  # shrunk to 4 of 8 nodes, then back to 8
        sizes = [a.nodes for a in run.watcher.ledger.attempts]
        assert 4 in sizes and sizes[-1] == 8, sizes
    if fault == "two_day_idle":  # stopped, released, resumed two days later by the user's submission
        assert "idle_resume" in run.injected and run.now - run.start > soak_run.IDLE_S


def test_released_workers_brought_back_and_never_released_again_are_a_violation(tmp_path, monkeypatch):
    run = soak_run.SoakRun(1, 0, [], tmp_path, is_async=False)
    run.play()
    run.advance(600)  # succeeded, and released once the owner's claim lapsed
    assert run.replicas == 0 and run.violations == []
    monkeypatch.setattr(type(run.watcher), "_release_after_run", lambda *a: None)  # the plant: no second release
    run.replicas = run.nodes  # a Helm upgrade's merge patch, no claim
    run.advance(soak_checks.idle_bound(soak_run.LOOK_S) + 300)
    assert any("paid GPU node(s) up" in v for v in run.violations), run.violations


def test_goodput_buckets_that_do_not_fill_the_paid_intervals_are_a_violation(tmp_path, monkeypatch):
    run = _played(tmp_path, ["two_day_idle"])
    assert len(run.watcher.ledger.attempts) == 2 and run.violations == []
    real = goodput.paid_from
    # The plant: the second attempt paid from the first one's end across its release (days of invented badput).
    monkeypatch.setattr(
        goodput, "paid_from", lambda ledger, a: ledger.attempts[0].end if a.attempt > 1 else real(ledger, a)
    )
    soak_checks._buckets_fill_paid_time(run)
    assert any("paid intervals overlap" in v for v in run.violations), run.violations


def test_a_submission_onto_fewer_alive_gpu_workers_than_its_size_is_a_violation(tmp_path):
    run = soak_run.SoakRun(5, 3, [], tmp_path, is_async=False)
    run.replicas = 0
    run.advance(20)  # KubeRay deletes the worker pods
    run.ray.submit_job(entrypoint=run.spec.entrypoint, submission_id="onto-none", metadata=dict(run.spec.metadata))
    assert any("onto-none submitted onto 0 alive GPU worker(s), fewer than its 2" in v for v in run.violations)


def test_goodput_more_than_a_point_off_the_bill_after_a_two_day_idle_is_a_violation(tmp_path, monkeypatch):
    real = goodput.paid_from
    monkeypatch.setattr(
        goodput, "paid_from", lambda ledger, a: ledger.attempts[0].end if a.attempt > 1 else real(ledger, a)
    )
    run = _played(tmp_path, ["two_day_idle"])
    assert any("more than a point apart" in v for v in run.violations), run.violations


def test_a_stockout_the_owner_waits_out_at_full_size_is_a_violation(tmp_path, monkeypatch):
    from workloads.recovery import holds

    without = tuple(h for h in holds.HOLDS if h is not holds.shrink_when_short)
    monkeypatch.setattr(holds.first_hold, "__defaults__", (without,))  # the plant: no shrink hold
    run = soak_run.SoakRun(1, 0, ["stockout"], tmp_path, is_async=False)
    run.limit = run.start + 3 * 3600  # the stock-out lasts about an hour from +1100 s
    run.play()
    assert any("no attempt on fewer nodes" in v for v in run.violations), run.violations


def test_a_finished_run_the_head_forgot_while_a_claim_held_the_workers_is_still_released(tmp_path):
    """Found by the soak (seed 1, run 43: head_restart after a success): the owner released only while the job table
    listed the run, so workers a claim held past the head's restart stayed up. Here a submitter asks for them after
    the run ended (a claim the release honours), dies, and the head restarts: once the claim lapses they go."""
    from workloads import worker_group

    run = soak_run.SoakRun(1, 0, [], tmp_path, is_async=False)
    run.play()
    assert run.final == "success" and run.replicas == 0, "the run's own ask must not hold its workers past its end"
    run.gang.scale(run.nodes, claim_until=run.now + worker_group.CLAIM_TTL_S, asked_at=run.now)
    run.ray.restart_head(run.now_ms())  # the job table forgets the finished run
    run.advance(run.claimed_until - run.now + 2 * soak_run.LOOK_S)
    assert run.replicas == 0 and run.watcher.ledger.attempts[-1].restored

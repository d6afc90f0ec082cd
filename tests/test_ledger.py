"""The run ledger and the budget (workloads/ledger.py, kept by the watcher of workloads/recovery/owner_loop.py)."""

from __future__ import annotations

import json

import pytest
from ray.job_submission import JobDetails
from ray_head import JOB_TIMEOUT

from workloads.job_spec import JobSpec
from workloads.ledger import Attempt, Ledger, LedgerFile, table
from workloads.recovery import Action, RecoveryPolicy, Watcher
from workloads.recovery.budget_stop import SAVE_WAIT_CAP_S
from workloads.run_owner import RunPlan

START_MS = 1_700_000_000_000
PRICE = 36.0  # USD per node-hour: one node spends $10 in 1000 s


class FakeClient:
    def __init__(self, spec: JobSpec):
        self.job = JobDetails(
            type="SUBMISSION",
            entrypoint=spec.entrypoint,
            status="RUNNING",
            submission_id=spec.submission_id,
            start_time=START_MS,
            metadata=dict(spec.metadata),
        )
        self.stopped: list[str] = []

    def get_address(self) -> str:
        return "http://fake"

    def list_jobs(self):
        return [self.job]

    def get_job_info(self, job_id: str) -> JobDetails:
        return self.job

    def get_job_logs(self, job_id: str) -> str:
        return "\n========================= Step 5/20 =========================\n"

    def stop_job(self, job_id: str) -> bool:
        self.stopped.append(job_id)
        return True


def whole_checkpoint(step_dir):
    """A finished DCP save of weights and optimizer (workloads/checkpoints.py `is_whole`)."""
    for part in ("weights", "optimizer"):
        (step_dir / "policy" / part).mkdir(parents=True, exist_ok=True)
        (step_dir / "policy" / part / ".metadata").write_bytes(b"m")


def watcher(tmp_path, now: list[float], **run):
    spec = JobSpec.create(stack="t-budget", recipe="t", entrypoint="python train.py", runtime_env={})
    client = FakeClient(spec)
    plan = RunPlan(
        checkpoint_dir=str(tmp_path / "ckpt"), node_count=1, node_hour_usd=PRICE, save_period=2, step_seconds=300, **run
    )
    (tmp_path / "ckpt").mkdir(exist_ok=True)
    ledger = LedgerFile(tmp_path / "state" / "t-budget.ledger.json")
    w = Watcher(client, spec, RecoveryPolicy(check_interval_seconds=60), clock=lambda: now[0], run=plan, ledger=ledger)
    return w, client, ledger


def at(seconds: float) -> float:
    return START_MS / 1000 + seconds


def test_the_budget_warns_at_80_percent_and_stops_the_run_after_its_next_complete_checkpoint(tmp_path):
    now = [at(700)]
    w, client, ledger_file = watcher(tmp_path, now, budget_usd=10.0)
    whole_checkpoint(tmp_path / "ckpt" / "step_2")
    assert w.step().action is Action.WAIT and not w.ledger.budget_warned  # $7: 70 %
    now[0] = at(850)
    assert w.step().action is Action.WAIT
    assert any(n.startswith("budget warning: $8.50 spent, 85 % of job.budgetUsd $10.00") for n in w.notes)
    now[0] = at(1000)
    waiting = w.step()
    assert (
        waiting.action is Action.WAIT
        and "stops after its next complete checkpoint (newer than step_2)" in waiting.reason
    )
    now[0] = at(1100)
    assert w.step().action is Action.WAIT and client.stopped == []  # within one save period (600 s), no new save
    (tmp_path / "ckpt" / "tmp_step_4").mkdir()  # being written: not a checkpoint yet
    assert w.step().action is Action.WAIT and client.stopped == []
    (tmp_path / "ckpt" / "tmp_step_4").rename(tmp_path / "ckpt" / "step_4")  # renamed before its files
    assert w.step().action is Action.WAIT and client.stopped == []
    whole_checkpoint(tmp_path / "ckpt" / "step_4")
    now[0] = at(1200)
    stopped = w.step()
    assert (
        stopped.action is Action.DONE
        and "stopped t-budget-t-" in stopped.reason
        and "after its checkpoint step_4" in stopped.reason
    )
    assert client.stopped == [client.job.submission_id]
    # The stopped job ends; the ledger (on disk) says why, and nothing is resubmitted.
    client.job = JobDetails(**{**client.job.__dict__, "status": "STOPPED", "end_time": START_MS + 1_210_000})
    assert w.step().action is Action.DONE
    saved = ledger_file.load("t-budget", client.job.submission_id)
    (record,) = saved.attempts
    assert (record.cause, record.saved_step, record.note) == (
        "budget",
        4,
        "stopped by the budget after its checkpoint step_4",
    )
    # First seen with step_2 on disk, in step 5 when stopped (from its whole log): 3 steps run, 1 redone.
    assert (record.resume_step, record.last_step, record.steps_lost, record.steps_done) == (2, 5, 1, 3)
    assert [e.split(" ", 2)[2][:16] for e in saved.events] == [
        "budget warning: ",
        "budget reached: ",
        "budget: stopped ",
        "attempt 1 (t-bud",
    ]


def test_without_a_checkpoint_within_one_save_period_the_budget_stops_the_run_at_once(tmp_path):
    now = [at(1000)]
    w, client, _ = watcher(tmp_path, now, budget_usd=10.0)
    assert w.step().action is Action.WAIT and client.stopped == []
    now[0] = at(1599)
    assert w.step().action is Action.WAIT
    now[0] = at(1600)  # one save period = 2 steps x 300 s
    stopped = w.step()
    assert stopped.action is Action.DONE and "at once: no complete checkpoint within one save period" in stopped.reason
    assert client.stopped == [client.job.submission_id]


def test_a_budget_trip_waits_for_the_checkpoint_write_too_and_for_a_save_in_flight(tmp_path):
    # A save cycle is 2 steps x 300 s plus the 60 s write: a stop at 600 s would land in the write.
    now = [at(1000)]
    w, client, _ = watcher(tmp_path, now, budget_usd=10.0, checkpoint_write_seconds=60.0)
    assert w.step().action is Action.WAIT
    now[0] = at(1640)
    assert w.step().action is Action.WAIT and client.stopped == []
    # The cycle is over but a save is on its way (written, renamed, not finished): wait for it, however slow...
    weights = tmp_path / "ckpt" / "step_2" / "policy" / "weights"
    weights.mkdir(parents=True)
    for t in (1680, 1720, 1000 + 660 + SAVE_WAIT_CAP_S - 1):
        now[0] = at(t)
        assert w.step().action is Action.WAIT and client.stopped == [], t
    # ... then stop right after it is whole, naming it.
    (weights / ".metadata").write_text("")
    stopped = w.step()
    assert stopped.action is Action.DONE and "after its checkpoint step_2" in stopped.reason, stopped
    assert client.stopped == [client.job.submission_id]


def test_a_budget_trip_stops_a_save_stuck_past_its_cap(tmp_path):
    now = [at(1000)]
    w, client, _ = watcher(tmp_path, now, budget_usd=10.0, checkpoint_write_seconds=60.0)
    assert w.step().action is Action.WAIT
    (tmp_path / "ckpt" / "tmp_step_2").mkdir(parents=True)  # a save begun and never finished
    now[0] = at(1000 + 660 + SAVE_WAIT_CAP_S - 1)
    assert w.step().action is Action.WAIT and client.stopped == []
    now[0] = at(1000 + 660 + SAVE_WAIT_CAP_S)
    assert w.step().action is Action.DONE and client.stopped == [client.job.submission_id]


def test_raising_the_budget_after_a_trip_makes_the_next_trip_wait_for_a_checkpoint_again(tmp_path):
    now = [at(1000)]
    w, client, ledger_file = watcher(tmp_path, now, budget_usd=10.0)
    assert w.step().action is Action.WAIT and w.ledger.stop_requested_at == at(1000)
    # job.budgetUsd raised to $20: the watcher restarts with it and reads the same ledger.
    now[0] = at(1500)
    w, client, _ = watcher(tmp_path, now, budget_usd=20.0)
    assert w.step().action is Action.WAIT and client.stopped == []  # $15 of $20: it runs
    assert w.ledger.stop_requested_at is None
    assert ledger_file.load("t-budget", client.job.submission_id).stop_requested_at is None
    now[0] = at(2000)  # $20: a new trip, which waits one save period for a checkpoint
    assert w.step().action is Action.WAIT and client.stopped == []


def test_an_attempt_replaced_between_two_looks_is_closed_once_when_the_newer_one_is_seen(tmp_path):
    now = [at(100)]
    w, client, ledger_file = watcher(tmp_path, now)
    assert w.step().action is Action.WAIT
    # `jobctl submit` (or the hook, or a restarted watcher) replaced it: the job table shows attempt 2 only.
    first = client.job.submission_id
    meta = {**client.job.metadata, "nemo-rl-gke/attempt": "2"}
    client.job = JobDetails(
        **{**client.job.__dict__, "submission_id": f"{first}-r2", "start_time": START_MS + 300_000, "metadata": meta}
    )
    now[0] = at(400)
    assert w.step().action is Action.WAIT
    now[0] = at(5000)
    w.step()
    records = {a.submission_id: a for a in ledger_file.load("t-budget", first).attempts}
    assert (records[first].end, records[first].cause) == (at(300), "superseded")
    assert records[f"{first}-r2"].end is None
    assert sum(1 for e in w.ledger.events if "superseded" in e) == 1


def test_no_budget_means_no_stop_and_the_ledger_survives_a_restart_of_the_watcher(tmp_path):
    now = [at(5000)]
    w, client, ledger_file = watcher(tmp_path, now)
    assert w.step().action is Action.WAIT and client.stopped == []
    again = Watcher(client, w.spec, w.policy, clock=lambda: now[0], run=w.run, ledger=ledger_file)
    assert [a.submission_id for a in again.ledger.attempts] == [client.job.submission_id]
    assert json.loads(ledger_file.path.read_text())["run_id"] == w.spec.run_id


def test_the_ledger_table_shows_every_attempt_with_its_node_hours_steps_and_spend():
    ledger = Ledger("s", "s-r-1", node_hour_usd=40.0, budget_usd=1000.0)
    ledger.attempts = [
        Attempt(
            1,
            "s-r-1",
            0.0,
            2,
            resume_step=0,
            end=5400.0,
            cause="preemption-like",
            last_step=19,
            saved_step=10,
            steps_lost=9,
        ),
        Attempt(
            2,
            "s-r-1-r2",
            6000.0,
            2,
            resume_step=10,
            end=9600.0,
            cause="succeeded",
            last_step=20,
            saved_step=20,
            steps_lost=0,
        ),
    ]
    lines = table(ledger, now=10_000.0)
    assert lines[0].split() == [
        "attempt",
        "start",
        "(UTC)",
        "end",
        "(UTC)",
        "cause",
        "nodes",
        "node-h",
        "resumed",
        "done",
        "lost",
        "spend",
        "$/step",
    ]
    second = lines[2]
    # What a step cost: $120 over the 19 steps attempt 1 ran (the 9 lost included), $80 over attempt 2's 10.
    assert lines[1].split()[-2:] == ["$120.00", "$6.32"] and second.split()[-2:] == ["$80.00", "$8.00"]
    assert "preemption-like" in lines[1] and "3.00" in lines[1] and "step 0" in lines[1] and "$120.00" in lines[1]
    assert "succeeded" in second and "2.00" in second and "step 10" in second and "$80.00" in second
    assert lines[3] == "2 attempt(s), 5.00 node-hours, 9 step(s) lost, spend $200.00 of the budget $1,000.00 (20 %)"


def test_status_prints_the_job_then_the_run_ledger_as_a_table(head, client, tmp_path):
    import io

    from jobctl import cli
    from jobctl.stack import build_spec, load_stack
    from workloads import submit as jobs

    spec = build_spec(load_stack("dev"))
    ledger = Ledger("dev", spec.run_id, node_hour_usd=PRICE, budget_usd=100.0)
    ledger.attempts = [
        Attempt(
            1, spec.submission_id, 0.0, 1, end=3600.0, cause="preemption-like", last_step=7, saved_step=5, steps_lost=2
        )
    ]
    ledger.events = ["2026-12-03 10:00 attempt 1 ended: preemption-like"]
    LedgerFile(tmp_path / "dev.ledger.json").save(ledger)
    job_id = "t-ledger-status-" + spec.spec_hash[:6]
    client.submit_job(entrypoint="true", submission_id=job_id, metadata={"nemo-rl-gke/stack": "t-ledger-status"})
    jobs.wait(client, job_id, timeout=JOB_TIMEOUT, poll_interval=0.2)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        [
            "status",
            "--stack",
            "dev",
            "--address",
            head.address,
            "--job",
            job_id,
            "--ledger-file",
            str(tmp_path / "dev.ledger.json"),
        ],
        out=out,
        err=err,
    )
    assert code == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"{job_id}  SUCCEEDED") and lines[1].startswith("attempt  start (UTC)")
    assert "preemption-like" in lines[2] and "$36.00" in lines[2]
    assert lines[3] == "1 attempt(s), 1.00 node-hours, 2 step(s) lost, spend $36.00 of the budget $100.00 (36 %)"
    assert lines[4] == "  2026-12-03 10:00 attempt 1 ended: preemption-like"


def test_usd_per_step_is_the_attempts_spend_over_the_steps_it_ran_and_none_without_a_price_or_a_step():
    ran = Attempt(1, "s-r-1", 0.0, 2, resume_step=10, end=5400.0, last_step=19)  # 3 node-hours, 9 steps
    priced = Ledger("s", "s-r-1", node_hour_usd=40.0, attempts=[ran])
    assert priced.usd_per_step(ran, now=9999.0) == 120.0 / 9
    assert Ledger("s", "s-r-1", attempts=[ran]).usd_per_step(ran, now=9999.0) is None  # no price
    unknown = Attempt(2, "s-r-1-r2", 6000.0, 2, resume_step=19, end=6100.0)  # its log showed no step
    assert unknown.steps_done is None and priced.usd_per_step(unknown, now=9999.0) is None
    none_run = Attempt(3, "s-r-1-r3", 7000.0, 2, resume_step=19, end=7100.0, last_step=19)
    assert none_run.steps_done == 0 and priced.usd_per_step(none_run, now=9999.0) is None


# ------------------------------------------------------------------------------ a gang from several rungs

LADDER_PRICES = {"spot": 13.2, "flexStart": 30.0, "onDemand": 40.0}  # USD per node-hour of each rung


def test_an_attempt_of_3_spot_and_5_on_demand_nodes_is_priced_at_each_rungs_price():
    mixed = Attempt(1, "s-r-1", 0.0, 8, end=7200.0, last_step=10, rungs="spot 3, onDemand 5")
    ledger = Ledger("s", "s-r-1", node_hour_usd=13.2, rung_node_hour_usd=LADDER_PRICES, attempts=[mixed])
    # 2 h x (3 x $13.20 + 5 x $40.00) = $479.20; the one spot rate would say 16 node-h x $13.20 = $211.20.
    assert ledger.attempt_spend(mixed, now=9999.0) == pytest.approx(479.2)
    assert ledger.spend(now=9999.0) == pytest.approx(479.2)
    assert ledger.usd_per_step(mixed, now=9999.0) == pytest.approx(47.92)
    assert "$479.20" in table(ledger, now=9999.0)[1]


def test_an_attempt_without_a_known_mix_is_priced_at_the_first_rungs_single_rate():
    mixed = Attempt(1, "s-r-1", 0.0, 8, end=7200.0, rungs="spot 3, onDemand 5")
    unseen = Attempt(2, "s-r-1-r2", 7200.0, 8, end=10_800.0)  # submitted by hand: the gang was not looked at
    ledger = Ledger("s", "s-r-1", node_hour_usd=13.2, rung_node_hour_usd=LADDER_PRICES, attempts=[mixed, unseen])
    assert ledger.attempt_spend(unseen, now=99_999.0) == pytest.approx(8 * 13.2)
    assert ledger.spend(now=99_999.0) == pytest.approx(479.2 + 105.6)
    lines = table(ledger, now=99_999.0)
    assert "$105.60" in lines[2] and lines[3].endswith("spend $584.80")
    # The same attempt with no rung prices at all (a one-rung stack): as before the ladder.
    one_rung = Ledger("s", "s-r-1", node_hour_usd=13.2, attempts=[unseen])
    assert one_rung.spend(now=99_999.0) == pytest.approx(105.6)


def test_a_node_of_a_rung_with_no_price_of_its_own_is_priced_at_the_first_rungs_and_with_neither_spend_is_unknown():
    odd = Attempt(1, "s-r-1", 0.0, 2, end=3600.0, rungs="spot 1, unknown pool 1")
    ledger = Ledger("s", "s-r-1", node_hour_usd=13.2, rung_node_hour_usd={"spot": 13.2}, attempts=[odd])
    assert ledger.attempt_spend(odd, now=0.0) == pytest.approx(26.4)
    unpriced = Ledger("s", "s-r-1", rung_node_hour_usd={"spot": 13.2}, attempts=[odd])
    assert unpriced.attempt_spend(odd, now=0.0) is None and unpriced.spend(now=0.0) is None
    assert "spend -" in table(unpriced, now=0.0)[-1]


def test_the_budget_counts_a_mixed_gang_at_its_rungs_prices(tmp_path):
    now = [at(0.85 * 3600)]
    prices = {"spot": 1.0, "onDemand": 20.0}
    w, client, ledger_file = watcher(tmp_path, now, budget_usd=100.0, rung_node_hour_usd=prices)
    # The attempt as the watcher recorded it after the gang wait (8 nodes: 3 spot, 5 on-demand).
    seeded = Ledger("t-budget", client.job.submission_id)
    seeded.attempts = [Attempt(1, client.job.submission_id, at(0), 8, rungs="spot 3, onDemand 5")]
    ledger_file.save(seeded)
    w.ledger = w._load_ledger()
    assert w.ledger.rung_node_hour_usd == prices, "the plan's rung prices, not the file's"
    w.step()
    # 0.85 h x (3 x $1 + 5 x $20) = $87.55, 88 % (at the single $36 rate: 8 x 0.85 x 36 = $244.80, over budget).
    assert any(n.startswith("budget warning: $87.55 spent, 88 % of job.budgetUsd $100.00") for n in w.notes), w.notes
    assert client.stopped == [] and w.ledger.stop_requested_at is None
    # `status` reads the ledger from Lustre: the rung prices are saved with it.
    assert ledger_file.load("t-budget", client.job.submission_id).rung_node_hour_usd == prices


def test_the_spend_says_when_it_rests_on_estimated_prices_and_a_round_trip_keeps_why():
    ledger = Ledger(
        "b200-ladder", "run-1", node_hour_usd=67.662, price_estimate="flexStart: 0.75 x the on-demand price"
    )
    ledger.attempts.append(Attempt(1, "run-1", start=0.0, nodes=2, end=3600.0))
    assert table(ledger, now=3600.0)[-1].endswith("spend $135.32 (at estimated prices: data/prices.yaml)")
    assert Ledger.from_dict(ledger.to_dict()).price_estimate == ledger.price_estimate
    ledger.price_estimate = None
    assert table(ledger, now=3600.0)[-1].endswith("spend $135.32")


def test_a_new_spec_of_the_same_run_adds_to_its_ledger_and_a_new_run_starts_another(tmp_path):
    def spec(entrypoint: str, run_id: str) -> JobSpec:
        return JobSpec.create(stack="s", recipe="r", entrypoint=entrypoint, runtime_env={}, run_id=run_id)

    first, edited, other = (
        spec("train --steps 10", "s-r-aaaa"),
        spec("train --steps 20", "s-r-aaaa"),
        spec("x", "s-r-b"),
    )
    assert first.submission_id != edited.submission_id  # a new attempt is submitted under its own id
    ledger_file = LedgerFile(tmp_path / "s.ledger.json")
    ran = Ledger("s", first.run_id, attempts=[Attempt(1, first.submission_id, 0.0, 1, end=3600.0)])
    ledger_file.save(ran)
    assert [a.submission_id for a in ledger_file.load("s", edited.run_id).attempts] == [first.submission_id]
    assert ledger_file.load("s", other.run_id).attempts == []
    # A ledger written before run ids (keyed by its spec's submission id) is read, as another run's.
    (tmp_path / "old.json").write_text(json.dumps({"stack": "s", "submission_id": "s-r-1234abcd", "attempts": []}))
    assert LedgerFile(tmp_path / "old.json").load("s", "s-r-1234abcd").run_id == "s-r-1234abcd"


def test_the_last_attempt_of_a_spec_counts_only_that_specs_attempts_in_the_runs_ledger():
    from workloads.ledger import Attempt, Ledger

    ledger = Ledger("s", "run")
    ledger.attempts = [Attempt(1, "a", 0, 2), Attempt(2, "a-r2", 1, 2), Attempt(5, "b-r5", 2, 2), Attempt(1, "b", 3, 2)]

    assert (ledger.last_attempt("a"), ledger.last_attempt("b"), ledger.last_attempt("c")) == (2, 5, 0)


# ------------------------------------------------------------------------------ read back from the head


def _ledger_with_two_attempts() -> Ledger:
    ledger = Ledger("t-read", "t-read-r-1", node_hour_usd=PRICE, rung_node_hour_usd={"spot": 13.2}, budget_usd=100.0)
    ledger.attempts = [
        Attempt(1, "t-read-r-1", 1000.0, 2, end=4600.0, cause="preemption-like", last_step=7, saved_step=5),
        Attempt(2, "t-read-r-1-r2", 4700.0, 2, resume_step=5, rungs="spot 2", marks={"podsRunning": 4800.0}),
    ]
    ledger.events = ["2026-12-03 10:00 attempt 1 ended: preemption-like"]
    return ledger


def test_a_ledger_on_the_head_is_read_back_whole_through_a_probe_job(client, tmp_path):
    from workloads.ledger import read_on_head

    ledger = _ledger_with_two_attempts()
    path = tmp_path / "t-read.ledger.json"  # the head is a local process: it reads this machine's files
    LedgerFile(path).save(ledger)
    back = read_on_head(client, str(path), stack="t-read", timeout=JOB_TIMEOUT)
    assert back is not None, "a valid ledger read as none"
    assert back.attempts == ledger.attempts and back.to_dict() == ledger.to_dict()
    # No job of the probe is left on the head. (A ledger not written yet reads as none: the probe's own output for a
    # missing file, run by the same shell, is `test_a_missing_file_or_a_log_cut_or_garbled_reads_as_none`'s.)
    assert not [j for j in client.list_jobs() if (j.metadata or {}).get("nemo-rl-gke/probe") == "t-read"]


def _probe_output(path) -> str:
    """What the probe's command prints, run by the shell Ray's job supervisor uses (`subprocess.Popen(shell=True)`)."""
    import subprocess

    from workloads.ledger import probe_command

    return subprocess.run(probe_command(str(path)), shell=True, capture_output=True, text=True, check=False).stdout


def test_the_supervisors_line_is_no_part_of_the_ledger_wherever_it_lands_in_the_probes_log(tmp_path):
    from workloads.ledger import _BEGIN, _END, ledger_from_probe_log, probe_command, supervisor_line

    ledger = _ledger_with_two_attempts()
    # An event that holds the markers themselves cannot end the body early.
    ledger.events.append(f"note {_END} {_BEGIN}")
    path = tmp_path / "t-read.ledger.json"
    LedgerFile(path).save(ledger)
    command = probe_command(str(path))
    assert _BEGIN not in command and _END not in command, "the supervisor's copy of the command would hold a marker"
    line = supervisor_line("t-read-ledger-1", command)
    out = _probe_output(path)
    assert out.count("\n") > 3, out
    # Ray writes the line before, after or (one write while `base64` prints, in blocks that need not end a line)
    # anywhere inside the output.
    for at in range(0, len(out) + 1, 5):
        back = ledger_from_probe_log("Runtime env is setting up.\n" + out[:at] + line + out[at:], line)
        assert back is not None and back.to_dict() == ledger.to_dict(), at


_RUN = '"stack": "s", "run_id": "r"'
_ONE = '"attempt": 1, "submission_id": "s-r"'
NOT_LEDGERS = {
    "an empty file": "",
    "half a file": f'{{{_RUN}, "attempts": [',
    "a list": "[]",
    "a string": '"a ledger"',
    "an attempt not an object": f'{{{_RUN}, "attempts": [1]}}',
    "attempts not a list": f'{{{_RUN}, "attempts": {{"1": {{}}}}}}',
    "an attempt without start and nodes": f'{{{_RUN}, "attempts": [{{{_ONE}}}]}}',
    "a start in words": f'{{{_RUN}, "attempts": [{{{_ONE}, "start": "noon", "nodes": 2}}]}}',
    "a mark in words": f'{{{_RUN}, "attempts": [{{{_ONE}, "start": 0, "nodes": 2, "marks": {{"podsRunning": "x"}}}}]}}',
    "a gang not an object": f'{{{_RUN}, "gang": 5}}',
    "a price in words": f'{{{_RUN}, "node_hour_usd": "36"}}',
}


@pytest.mark.parametrize("body", NOT_LEDGERS.values(), ids=NOT_LEDGERS.keys())
def test_a_body_that_is_not_a_ledger_reads_as_none(tmp_path, body):
    from workloads.ledger import ledger_from_probe_log

    path = tmp_path / "t-read.ledger.json"
    path.write_text(body)
    assert ledger_from_probe_log(_probe_output(path)) is None


def test_a_missing_file_or_a_log_cut_or_garbled_reads_as_none(tmp_path):
    from workloads.ledger import _BEGIN, _END, ledger_from_probe_log

    assert _END not in _probe_output(tmp_path / "none yet.json")  # the shell said nothing was read
    assert ledger_from_probe_log(_probe_output(tmp_path / "none yet.json")) is None
    path = tmp_path / "t-read.ledger.json"
    LedgerFile(path).save(_ledger_with_two_attempts())
    whole = _probe_output(path)
    assert ledger_from_probe_log(whole) is not None
    assert ledger_from_probe_log(whole.replace(_END, "")) is None  # the job was stopped mid-read
    lines = whole.splitlines()
    garbled = "\n".join([*lines[:2], "2026-12-07 03:33:48 INFO some line", *lines[2:]])
    assert ledger_from_probe_log(garbled) is None  # a stray line inside the body is not decoded as part of it
    assert ledger_from_probe_log(f"{_BEGIN}\nnot base64!\n{_END}\n") is None


def test_an_attempt_with_no_price_makes_the_runs_spend_unknown_not_summed_as_zero():
    priced = Attempt(1, "s-r-1", 0.0, 2, end=3600.0, rungs="spot 2")  # 2 node-h at $13.20
    unpriced = Attempt(2, "s-r-1-r2", 3600.0, 2, end=7200.0, rungs="reservation 2")  # a rung with no price
    ledger = Ledger("s", "s-r-1", rung_node_hour_usd={"spot": 13.2}, budget_usd=100.0, attempts=[priced, unpriced])
    assert ledger.attempt_spend(priced, now=0.0) == pytest.approx(26.4) and ledger.attempt_spend(unpriced, 0.0) is None
    assert ledger.spend(now=0.0) is None, "the unpriced attempt counted as $0"
    assert table(ledger, now=0.0)[-1].endswith("spend - of the budget $100.00")

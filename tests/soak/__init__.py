"""The fault-injection soak of the run's owner (issue 34; docs/testing.md "Fault-injection soak").

`python -m tests.soak --faults N --seed S` drives runs of a fake trainer under the real watcher
(`workloads.recovery.owner_loop.Watcher` and its holds), the real run owner (`workloads.run_owner`), ledger,
checkpoint scan and submission code, with the job the real job builder makes (`workloads.job_spec.build_job`,
its entrypoint's checkpoint step run for real, the trainer resuming as NeMo-RL does), injects faults at seeded
random moments (the run's whole life too: a release then `pulumi up`, a Helm upgrade restoring the workers, a
two-day idle, old live nodes, stock-outs with `recovery.shrink`, over a worker group whose GPU nodes follow its
replicas and are billed until GKE removes them), and checks the owner's invariants after every step
(`soak_checks`). Most runs use a simulated Ray head (`sim_ray`: a job table and node table on a fake clock, so a
run costs milliseconds); the faults that are about Ray itself (a duplicate submission, a stop, a killed driver)
also run against a real private Ray head on loopback (`real_ray`).
"""

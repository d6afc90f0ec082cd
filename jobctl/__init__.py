"""The day-2 command line: submit, gate, watch and stop a stack's training job from your machine.

    python -m jobctl submit [--stack NAME] [--dry-run] [--gate POLICY] [--wait [--timeout S]]
    python -m jobctl gate   [--stack NAME]   (the acceptance gate on demand: GPUs, fabric, Lustre)
    python -m jobctl status [--stack NAME] [--job ID] [--wait [--timeout S]] [--ledger-file PATH]
    python -m jobctl logs   [--stack NAME] [--job ID] [--follow] [--tail N]
    python -m jobctl stop   [--stack NAME] [--job ID]
    python -m jobctl list   [--stack NAME]
    python -m jobctl watch  [--stack NAME] [--once] [--check-interval S] [--state-file PATH]
                            [--run-file PATH]
    python -m jobctl dashboard [--stack NAME] [--port P]   (the Ray dashboard on 127.0.0.1)

Why a package of its own, on the top floor beside `tools/`: it reads the stack file through `infra`
(config model, stack-file reader, pool facts, the job spec `pulumi up` builds) and drives the
runtime in `workloads/` (Ray Job API client, acceptance gate, preemption recovery). `workloads/` is
shipped into the cluster and may import nothing from `infra`, so the CLI cannot live there; the
in-cluster watcher has its own entry module, `workloads/watcher.py`.

The job comes from the stack file (`Pulumi.<stack>.yaml`, default `dev`), built exactly as
`pulumi up` builds it, so both agree on its submission id. Without `--job`, status/logs/stop act
on the stack's newest job.

Where the dashboard is, first match wins:
  --address URL          a dashboard URL, e.g. the one `python -m jobctl dashboard` serves;
  --endpoint HOST        the GKE endpoint and --head-service, through the API server's service
                         proxy with your Google credentials; an IP endpoint also needs --ca-file
                         (the DNS endpoint's certificate is publicly trusted);
  pulumi stack output    when the `pulumi` CLI is installed: clusterEndpoint, rayHeadService
                         and (IP endpoint only) clusterCaCertificate of the stack.

`submit --dry-run` prints the submission id, entrypoint and runtime env and touches no network.

`submit` runs the acceptance gate first (`workloads/gate/`, docs/acceptance-gate.md)
when a job is really going to be submitted, under the stack's `job.gate` policy (`--gate` overrides
it once): on `enforce` a failed gate prints one line naming what failed and the numbers, and nothing
is submitted. `gate` runs it on demand and prints its lines, numbers and cost.

`logs --tail N` prints only the last N lines of the log (with --follow: the last N lines, then
the new output as it comes).

`watch` resubmits the job after a spot preemption (`workloads/recovery/`), with the loop and
flags of the in-cluster watcher (`workloads/watcher.py`); the policy is the run plan's, built from the
stack's `recovery` section, `gpuPool` and `job.submit` exactly as `pulumi up` ships it in run.json;
`--check-interval` looks more or less often, `--state-file` keeps what it saw across restarts.

Exit codes (`workloads/exit_codes.py`): 0 ok; 1 the job ended FAILED or STOPPED (with --wait); 2 bad
config, unknown job or usage; 3 the dashboard is unreachable or refused the credentials; 4 --timeout
passed; 5 the acceptance gate failed (`gate`, or `submit` under enforce).
"""

"""The day-2 command line, `python -m jobctl {submit,gate,status,logs,stop,list,watch,dashboard}` (each
command's flags in its `--help`; docs/day-2.md): submit, gate, watch and stop a stack's training job.

The job is built from the stack file (`Pulumi.<stack>.yaml`, default `dev`) exactly as `pulumi up` builds it,
so both agree on its submission id; without `--job`, status/logs/stop act on the stack's newest job. `submit`
runs the acceptance gate first under `job.gate` (`--gate` overrides it once); `watch` is the in-cluster
watcher's loop (`workloads/watcher.py`) on the run plan `pulumi up` ships.

Where the dashboard is, first match wins: `--address URL`; `--endpoint HOST` and `--head-service`, through
the API server's service proxy with your Google credentials (an IP endpoint also needs `--ca-file`); the
stack outputs clusterEndpoint, rayHeadService and clusterCaCertificate when the `pulumi` CLI is installed.

Exit codes (`workloads/exit_codes.py`): 0 ok; 1 the job ended FAILED or STOPPED (with --wait); 2 bad
config, unknown job or usage; 3 the dashboard is unreachable or refused the credentials; 4 --timeout
passed; 5 the acceptance gate failed (`gate`, or `submit` under enforce).
"""

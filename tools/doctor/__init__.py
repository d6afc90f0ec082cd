"""Preflight doctor (`python -m tools.doctor`, docs/doctor.md): one module per group of checks, the clients, the run
and the command; import from the submodules."""

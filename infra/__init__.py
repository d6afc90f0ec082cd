"""nemo-rl-gke infrastructure: one ComponentResource per concern, driven by `infra.config`."""

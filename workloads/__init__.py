"""NeMo-RL workloads: recipes as typed data, job building and Ray job submission."""

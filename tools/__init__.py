"""Offline and operator tooling: the plan runner, mocks, graph, reference docs and estimates.

Never imported by the Pulumi program or by `infra/` (see docs/architecture.md)."""

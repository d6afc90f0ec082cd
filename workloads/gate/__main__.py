"""`python -m workloads.gate run <plan>` (the gate job's driver) | `rank <spec file>` (one per-GPU process)."""

import sys

from workloads.gate.driver import main

sys.exit(main())

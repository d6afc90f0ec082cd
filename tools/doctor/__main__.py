"""`python -m tools.doctor` (and `make doctor`): the command lives in tools/doctor/doctor_command.py."""

import sys

from tools.doctor.doctor_command import main

sys.exit(main())

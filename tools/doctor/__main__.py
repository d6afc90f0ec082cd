"""`python -m tools.doctor` (and `make doctor`): the command lives in tools/doctor/doctor_command.py."""

from tools.doctor.doctor_command import main

raise SystemExit(main())

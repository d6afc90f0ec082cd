"""`python -m jobctl ...`: the day-2 command line (usage in jobctl/__init__.py)."""

import sys

from jobctl.cli import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m infra.plan`: the offline plan's command, kept at this path for users and scripts.

The plan runner lives in the offline tooling (`tools/offline_plan.py`); this launcher only starts
it. Nothing imports this module (the layer test allows it, and only it, to reach into `tools`).
"""

if __name__ == "__main__":
    import sys

    from tools.offline_plan import main

    sys.exit(main())

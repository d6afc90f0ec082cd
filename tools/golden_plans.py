"""Golden plans: the `--json` plan of every committed stack, kept in tests/golden/ and compared by
tests/test_golden_plans.py, so any change to any resource input is a reviewed diff.

    python -m tools.golden_plans          # rewrite tests/golden/<stack>.json (also `make golden`)

Keys are sorted and the indent is small so a change reads as a short, stable diff.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

from infra.stack_file import ROOT, available_stacks
from tools.offline_plan import committed_plan, plan_document

GOLDEN_DIR = ROOT / "tests" / "golden"


def golden_path(stack: str) -> Path:
    return GOLDEN_DIR / f"{stack}.json"


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def differences(want: Any, got: Any, path: str = "") -> Iterator[str]:
    """Where two plan documents differ; resources are matched by URN so a diff names the resource."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            sub = f"{path}.{key}" if path else key
            if key not in got:
                yield f"{sub}: missing (golden has {_short(want[key])})"
            elif key not in want:
                yield f"{sub}: new ({_short(got[key])})"
            else:
                yield from differences(want[key], got[key], sub)
    elif path == "resources" and isinstance(want, list) and isinstance(got, list):
        by_urn = lambda items: {r.get("urn"): r for r in items if isinstance(r, dict)}  # noqa: E731
        w, g = by_urn(want), by_urn(got)
        for urn in sorted(set(w) | set(g)):
            name = urn.rsplit("::", 1)[-1]
            if urn not in g:
                yield f"resource {name}: no longer planned"
            elif urn not in w:
                yield f"resource {name}: new"
            else:
                yield from differences(w[urn], g[urn], f"resource {name}")
    elif want != got:
        yield f"{path}: {_short(want)} -> {_short(got)}"


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def main(argv: Optional[list[str]] = None) -> int:
    argparse.ArgumentParser(prog="python -m tools.golden_plans", description=__doc__.splitlines()[0]).parse_args(argv)
    for stack in available_stacks(ROOT):
        path = golden_path(stack)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Through JSON and back, as the test reads it: keys sorted as the strings JSON makes of them.
        path.write_text(render(json.loads(render(plan_document(committed_plan(stack))))))
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

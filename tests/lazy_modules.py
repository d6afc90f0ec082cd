"""Modules a test file names at its top but imports only when a test first uses them.

Every xdist worker collects every test file, so what a file imports at its top is paid once per worker.
The Google client libraries the doctor's fakes answer with (`google.cloud.compute_v1` and its
siblings) take about 2 CPU-seconds to import, and only the worker that runs those tests needs them
(docs/testing.md, "Budget").
"""

from __future__ import annotations

import importlib


class LazyModule:
    """Stands for the module `name`, or for the object at `path` in it: reading an attribute of it, or
    calling it, imports the module (under the import system's lock, so threads reading at once get one
    module). Setting an attribute on it does not reach the module: patch the module itself
    (`monkeypatch.setattr("pkg.mod.Name", ...)`)."""

    def __init__(self, name: str, path: str = "") -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_path", path)

    @property
    def target(self):
        found = importlib.import_module(self._name)
        for part in filter(None, self._path.split(".")):
            found = getattr(found, part)
        return found

    def __getattr__(self, attr: str):
        # pytest looks over every name of a test file for fixtures and wrapped functions (`__wrapped__`,
        # `_pytestfixturefunction`, ...): those reads must not import. No test reads a private name.
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.target, attr)

    def __call__(self, *args, **kwargs):
        return self.target(*args, **kwargs)

    def __setattr__(self, attr: str, value) -> None:
        raise AttributeError(f"set {attr} on {self._name} itself, not on its LazyModule")

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r}, {self._path!r})"

"""A stand-in grading session that runs "student" code in this process.

Only for testing the hidden suites themselves: the reference implementations
(or deliberately broken copies) play the student, so a suite can be shown to
give full marks to correct code and to fail wrong code, without notebooks or a
sandbox. Real grading always uses ``autograder.grading.GradingSession``.
Values still make the round trip through the wire format, so a suite that
depends on anything the protocol would refuse fails here too.
"""
from __future__ import annotations

from typing import Any

from autograder.sandbox import protocol
from autograder.sandbox.errors import StudentError
from autograder.sandbox.fixtures import resolve_fixtures
from autograder.sandbox.probes import get_probe


def _round_trip(value: Any) -> Any:
    return protocol.decode(protocol.encode(value))


class InProcessSession:
    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace
        self.sandbox = "in-process (tests only)"

    def _run(self, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as err:  # mirror the worker: student exceptions become StudentError
            raise StudentError(type(err).__name__, str(err)) from err

    def call(self, solution: str, name: str, args, kwargs, *, timeout=None) -> Any:
        if name not in self.namespace:
            raise StudentError("NameError", f"name {name!r} is not defined")
        args = resolve_fixtures(list(_round_trip(list(args))))
        kwargs = resolve_fixtures(dict(_round_trip(dict(kwargs))))
        return _round_trip(self._run(self.namespace[name], *args, **kwargs))

    def probe(self, solution: str, probe: str, params: dict, *, timeout=None) -> Any:
        params = resolve_fixtures(dict(_round_trip(dict(params))))
        return _round_trip(self._run(get_probe(probe), self.namespace, params))


def reference_namespace() -> dict[str, Any]:
    """Every public name of every reference module, as a student namespace."""
    import importlib
    import pkgutil

    import autograder.reference as package

    namespace: dict[str, Any] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"autograder.reference.{module_info.name}")
        namespace.update({k: v for k, v in vars(module).items() if not k.startswith("_")})
    return namespace

"""The grader's rooms keep their layering (``autograder/README.md``): read from the code's
own module-level imports, with nothing imported or run; hidden suites aside (pytest
loads them, nothing imports them).

* the primitives (``paths``, ``errors``, ``files``) import no other room;
* nothing that grades imports the build tools, the analytics or the nbgrader face;
* the package's imports, deferred ones included, form no cycle, so no import has to hide
  inside a function to dodge one.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

from autograder.paths import PACKAGE

PRIMITIVES = {"autograder.paths", "autograder.errors", "autograder.files"}
# The rooms that only ever sit on top of the pipeline.
UPPER_ROOMS = ("autograder.build", "autograder.analytics", "autograder.nbgrader")
FACES = {"autograder.cli", "autograder.__main__"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The autograder modules ``path`` imports, at module level or inside a function (an
    import deferred for start-up time is still an arrow of the layering)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from . import x` names a module
    return {m for m in found if m in modules() and m != name}


@functools.cache
def modules() -> frozenset[str]:
    return frozenset(module_name(p) for p in PACKAGE.rglob("*.py"))


@functools.cache
def graph() -> dict[str, set[str]]:
    """module -> the autograder modules it imports, read once for the three tests."""
    return {module_name(path): imports_of(path) for path in PACKAGE.rglob("*.py")
            if "__pycache__" not in path.parts and "hidden" not in path.relative_to(PACKAGE).parts}


def in_room(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


def test_the_primitives_import_no_other_room():
    for module in PRIMITIVES:
        assert graph()[module] <= PRIMITIVES, f"{module} imports {sorted(graph()[module] - PRIMITIVES)}"


def test_nothing_that_grades_imports_the_rooms_above_it():
    for module, imports in graph().items():
        if module in FACES or any(in_room(module, room) for room in UPPER_ROOMS):
            continue
        above = sorted(i for i in imports if any(in_room(i, room) for room in UPPER_ROOMS))
        assert not above, f"{module} imports {above}"


def test_the_imports_form_no_cycle():
    edges = graph()
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(edges.get(module, ())):
            if state.get(target) == "open":
                cycle = path[path.index(target):] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])


def test_the_suite_hash_reads_what_grades_and_not_the_tools_above_it():
    """A report is re-graded when a file that can change its grade changes (``suite_hash``):
    every module that grades, the hidden suites and their ini; a new build tool or class
    report changes no grade, so it leaves every report up to date."""
    from autograder.version import NOT_GRADING, graded_by

    hashed = set(graded_by())
    tools = [path for path in PACKAGE.rglob("*.py") if any(path.is_relative_to(room) for room in NOT_GRADING)]
    assert tools and not hashed & set(tools)
    assert {f"autograder.{room.name}" for room in NOT_GRADING} <= set(UPPER_ROOMS)
    grading = {module_name(path) for path in hashed if path.suffix == ".py"}
    assert modules() - {module_name(path) for path in tools} <= grading
    assert PACKAGE / "hidden" / "pytest.ini" in hashed and any(path.suffix == ".ipynb" for path in hashed)

"""The dependency pins must agree everywhere they are written down."""
from __future__ import annotations

import re
import tomllib

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)$")


def _pins(lines):
    found = {}
    for line in lines:
        match = PIN.match(line.strip().lstrip("- ").strip())
        if match:
            found[match.group(1).lower().replace("_", "-")] = match.group(2)
    return found


def _pyproject(repo_root):
    return tomllib.loads((repo_root / "pyproject.toml").read_text())


def test_pyproject_pins_are_exact(repo_root):
    for requirement in _pyproject(repo_root)["project"]["dependencies"]:
        assert PIN.match(requirement), f"{requirement!r} in pyproject.toml is not pinned with =="


def test_environment_yml_mirrors_pyproject(repo_root):
    pyproject = _pins(_pyproject(repo_root)["project"]["dependencies"])
    text = (repo_root / "environment.yml").read_text()
    pip_section = text.split("- pip:", 1)[1].splitlines()
    conda = _pins(pip_section)
    assert conda == pyproject, (
        "environment.yml and pyproject.toml disagree: "
        f"only in environment.yml {set(conda.items()) - set(pyproject.items())}, "
        f"only in pyproject.toml {set(pyproject.items()) - set(conda.items())}"
    )


def test_no_deps_and_torch_pins_agree(repo_root):
    makefile = (repo_root / "Makefile").read_text()
    torch_pin = re.search(r"^TORCH_PIN := (\S+)$", makefile, re.M).group(1)
    no_deps = re.search(r"^NO_DEPS_PINS := (.+)$", makefile, re.M).group(1).split()
    pyproject = _pyproject(repo_root)["project"]["dependencies"]
    assert torch_pin in pyproject
    env_text = (repo_root / "environment.yml").read_text()
    for pin in no_deps:
        assert f"pip install --no-deps {pin}" in env_text, f"environment.yml lacks the {pin} step"
        assert pin in (repo_root / "pyproject.toml").read_text()


def test_lock_agrees_with_direct_pins(repo_root):
    lock = _pins((repo_root / "requirements.lock").read_text().splitlines())
    for name, version in _pins(_pyproject(repo_root)["project"]["dependencies"]).items():
        assert lock.get(name) == version, f"requirements.lock has {name}=={lock.get(name)}, pyproject {version}"


def test_supported_pythons_agree(repo_root):
    """pyproject's requires-python, the Makefile's start-up check and the README name the same versions."""
    requires = _pyproject(repo_root)["project"]["requires-python"]
    assert requires == ">=3.11,<3.13", requires
    makefile = (repo_root / "Makefile").read_text()
    assert "(3, 11) <= sys.version_info[:2] <= (3, 12)" in makefile
    assert "Python 3.11 or 3.12" in (repo_root / "README.md").read_text()


def test_lock_installs_on_every_supported_python(repo_root):
    """Every unconditional pin of the lock accepts the oldest and newest supported Python.

    Read from the metadata of the installed releases (the ones the lock pins). A
    release that needs a newer Python (soupsieve >= 3 needs 3.11.5; Debian 12 ships
    3.11.2) must carry an environment marker, with a fallback pin for the others.
    """
    from importlib import metadata

    from packaging.specifiers import SpecifierSet

    unconditional = _pins((repo_root / "requirements.lock").read_text().splitlines())
    assert unconditional, "no pins found in requirements.lock"
    excluding = []
    for name, version in unconditional.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here (e.g. a platform-specific pin)
        if dist.version != version:
            continue
        requires = dist.metadata.get("Requires-Python")
        if requires and not all(v in SpecifierSet(requires) for v in ("3.11.0", "3.12.0")):
            excluding.append(f"{name}=={version} (Requires-Python {requires})")
    assert not excluding, "pins that exclude a supported Python: " + ", ".join(excluding)
    markers = [line for line in (repo_root / "requirements.lock").read_text().splitlines() if ";" in line]
    assert all("python_full_version" in line for line in markers), markers

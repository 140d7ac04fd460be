"""The dependency locks follow pyproject.toml: every direct dependency, of the runtime and of each
group, is pinned at its version in requirements.txt (what `make venv` installs), and the runtime
lock holds the runtime's packages at the same versions (`make lock` writes both)."""

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split(";")[0].strip()
        if line and not line.startswith("#") and "==" in line:
            name, version = line.split("==")
            out[canonicalize_name(name.split("[")[0])] = version.strip()
    return out


def direct(project: dict) -> list[Requirement]:
    groups = project["dependency-groups"]
    wanted = [*project["project"]["dependencies"]]
    for members in groups.values():
        wanted += [m for m in members if isinstance(m, str)]
    return [Requirement(r) for r in wanted]


def test_every_direct_dependency_is_locked_at_its_pinned_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    locked = pins(ROOT / "requirements.txt")
    wrong = {
        r.name: (str(r.specifier), locked.get(canonicalize_name(r.name)))
        for r in direct(project)
        if locked.get(canonicalize_name(r.name)) not in r.specifier
    }
    assert wrong == {}, "pyproject.toml and requirements.txt differ: run `make lock`"
    for r in direct(project):
        assert str(r.specifier).startswith("=="), f"{r.name} is not pinned in pyproject.toml"


def test_the_runtime_lock_is_the_runtime_part_of_the_whole_lock():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime, whole = pins(ROOT / "requirements-runtime.txt"), pins(ROOT / "requirements.txt")
    assert {canonicalize_name(Requirement(r).name) for r in project["project"]["dependencies"]} <= set(runtime)
    assert {name: whole.get(name) for name in runtime} == runtime
    tools = {"pytest", "ruff", "mypy", "hypothesis", "playwright", "nats-py", "uv"}
    assert not tools & set(runtime)  # no test, lint or bench tool in a deployment

"""The maintainers' map stays true: `docs/architecture.md` names every module of the server, and
a dotted name of the project written in backticks in a comment, a docstring or a doc
(`groups.consuming.reading.read_woken`, `retention.cycle.buckets:run_bucket`) names something
that exists; and nothing cites a
design document outside the repository (the project's own are under docs/design/)."""

import importlib
import re
from pathlib import Path

import pytest

from spark_tasks.shipping import PACKAGES  # every first-party package of the server

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {"migrations", "__pycache__", "management", "templatetags"}
# a dotted name of the project as comments and docs write one: in backticks (`streams.waking`,
# `retention.cycle.buckets:run_bucket`, `domain.acks.check_backoff(…)`)
_NAMES = "|".join(PACKAGES)
DOTTED = re.compile(rf"`((?:{_NAMES})(?:\.[A-Za-z_]\w*)+)(?::([A-Za-z_]\w*))?")
FILE_SUFFIXES = {"md", "py", "html", "json", "lua", "txt", "toml", "js", "css", "yml", "yaml", "sh", "svg", "png"}
OUTSIDE = re.compile(
    r"\b(DESIGN|RETENTION-ALGORITHM|SCALING|DELAYED-DELIVERY|COMPACTION|STYLE)\.md\b|\bDESIGN §|\.\./shared"
)


def _server_modules() -> list[Path]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if SKIP_DIRS & set(path.relative_to(ROOT).parts) or path.name == "__init__.py":
                continue
            out.append(path.relative_to(ROOT))
    return out


def _texts() -> list[Path]:
    paths = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    paths += list((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    paths += list((ROOT / "templates").rglob("*.html")) + list((ROOT / "tests").rglob("*.py"))
    return sorted(paths)


def test_the_package_list_is_every_package_of_the_server():
    """What this file checks and what a Spark executor is shipped are one list: a new package
    missing from it would be neither checked nor shipped."""
    found = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench", "client"}
    assert found == set(PACKAGES)


def test_architecture_names_every_module():
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = []
    for module in _server_modules():
        parent = module.parent.name
        named = (
            f"`{module.name}`" in text
            or f"`{module.as_posix()}`" in text
            or f"`{module.with_suffix('').as_posix().replace('/', '.')}`" in text
            or (len(module.parts) > 2 and f"`{parent}/`" in text)  # a sub-package named as a whole
        )
        if not named:
            missing.append(module.as_posix())
    assert not missing, f"docs/architecture.md does not name: {missing}"


def _resolves(dotted: str, attribute: str | None) -> bool:
    parts = dotted.split(".")
    if parts[-1] in FILE_SUFFIXES:  # `console/views.py` written with dots is a file, not a name
        return True
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:] + ([attribute] if attribute else []):
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


@pytest.mark.django_db
def test_every_dotted_name_in_comments_and_docs_resolves():
    unresolved = set()
    for path in _texts():
        for match in DOTTED.finditer(path.read_text(errors="replace")):
            dotted, attribute = match.group(1).rstrip("."), match.group(2)
            if not _resolves(dotted, attribute):
                unresolved.add(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert not unresolved, "names that no longer exist:\n" + "\n".join(sorted(unresolved))


def test_nothing_cites_a_design_document_outside_the_repository():
    citing = sorted(
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in _texts()
        if path.name != "test_docs_resolve.py"
        for match in OUTSIDE.finditer(path.read_text(errors="replace"))
    )
    assert not citing, "cite docs/design/ or docs/ instead:\n" + "\n".join(citing)

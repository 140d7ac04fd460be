"""The segment store and the domain are plain Python: no module of `store/` or `domain/` imports
Django (the store serves a Spark executor before Django is set up there, and the domain is
tested without it). import-linter's contracts see only the project's packages; this sees the rest."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("package", ["store", "domain"])
def test_no_module_imports_django(package):
    importing = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name == "django" or name.startswith(("django.", "rest_framework", "celery")) for name in names):
                importing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not importing, importing

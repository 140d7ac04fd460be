"""The project's code, shipped with every Spark session: its packages in one zip that Spark hands
to each executor (`SparkContext.addPyFile`, PySpark's documented way to ship Python code). An
executor's Python needs only the third-party packages (a packed virtualenv through
`spark.archives`, or the same packages installed on the workers: docs/cluster.md); it never needs
a checkout of CBR, and it may start in any directory."""

from __future__ import annotations

import tempfile
import threading
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# every first-party package: Django sets up all installed apps in an executor
PACKAGES = (
    "access",
    "api",
    "cbrweb",
    "compaction",
    "console",
    "domain",
    "groups",
    "ops",
    "retention",
    "spark_tasks",
    "store",
    "streams",
)
_SKIP_DIRS = {"__pycache__", "migrations", "templates", "static"}
_lock = threading.Lock()
_zip: Path | None = None


def project_zip() -> Path:
    """The zip of the project's packages (their modules and package data, such as Lua scripts),
    made once per process in a temporary directory."""
    global _zip
    with _lock:
        if _zip is None or not _zip.exists():
            path = Path(tempfile.mkdtemp(prefix="cbr-code-")) / "cbr.zip"
            with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
                for package in PACKAGES:
                    for file in sorted((ROOT / package).rglob("*")):
                        relative = file.relative_to(ROOT)
                        if file.is_file() and not _SKIP_DIRS & set(relative.parts) and file.suffix != ".pyc":
                            zf.write(file, str(relative))
            _zip = path
        return _zip


def ship(spark) -> None:
    """Hand the project's zip to the session's executors."""
    spark.sparkContext.addPyFile(str(project_zip()))

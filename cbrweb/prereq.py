"""Checks of what CBR needs from the machine, with a sentence instead of a stack trace.

`python -m cbrweb.prereq` exits non-zero and says what is missing. Java 17+ is the one system
prerequisite (PySpark runs on it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys


def java_problem() -> str | None:
    java = shutil.which("java")
    if java is None:
        return (
            "Java 17 or newer is needed (PySpark runs on it) and no `java` is on the PATH.\n"
            "Install it, e.g. `apt-get install openjdk-17-jre-headless` or `brew install openjdk@17`."
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`java -version` did not run: {exc}"
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return f"could not read the Java version from: {out.stderr.strip()[:200]}"
    major = int(match.group(1))
    if major == 1:  # "1.8.0" style
        major = int(match.group(2) or 0)
    if major < 17:
        return f"Java 17 or newer is needed (PySpark runs on it); found Java {major} at {java}."
    return None


def python_problem() -> str | None:
    if sys.version_info < (3, 11):
        return f"Python 3.11 or newer is needed; this is {sys.version.split()[0]}."
    return None


def main() -> int:
    problems = [p for p in (python_problem(), java_problem()) if p]
    for p in problems:
        print(f"cbr: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

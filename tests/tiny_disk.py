"""A small filesystem for the disk-full tests: a tmpfs of a given size, mounted for the test.

As root (CI) the tmpfs is mounted in place and unmounted afterwards. Without root, a test's work
runs in a child process inside its own user and mount namespace (`unshare --user
--map-root-user --mount`), where it may mount one; `run_in_namespace` does that. It never touches
a mount it did not make.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def is_root() -> bool:
    return os.geteuid() == 0


def can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    """A tmpfs of `size` (mount's syntax: "256k", "4m") at `path`, as root."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def run_in_namespace(path: Path, size: str, module: str, function: str) -> None:
    """Run `module.function(path)` in a child that mounts a tmpfs of `size` at `path` in a mount
    namespace of its own (no root needed); its assertion errors fail the caller."""
    path.mkdir(parents=True, exist_ok=True)
    code = (
        "import subprocess, importlib, pathlib;"
        f"subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size={size}', 'tmpfs', {str(path)!r}], check=True);"
        f"getattr(importlib.import_module({module!r}), {function!r})(pathlib.Path({str(path)!r}))"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},  # the tests' own helper modules
    )
    assert done.returncode == 0, done.stderr[-4000:]

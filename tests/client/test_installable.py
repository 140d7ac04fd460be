"""The client is a package of its own: built into a wheel and installed in a fresh virtualenv
(no Django, nothing of the server), it imports and its `cbr` command runs, from any directory."""

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_the_client_installs_alone_and_runs_anywhere(tmp_path):
    source = tmp_path / "client"  # built from a copy: a build leaves build/ and *.egg-info behind
    shutil.copytree(
        Path(__file__).resolve().parents[2] / "client", source, ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            tmp_path / "dist",
            source,
        ],
        check=True,
    )
    (wheel,) = (tmp_path / "dist").glob("cbr_client-*.whl")
    venv.create(tmp_path / "fresh", with_pip=True)
    bin_dir = tmp_path / "fresh" / "bin"
    subprocess.run([bin_dir / "pip", "install", "--quiet", "--no-index", "--no-deps", wheel], check=True)
    probe = "import sys, cbr_client; assert 'django' not in sys.modules; print(cbr_client.Client.__name__)"
    done = subprocess.run([bin_dir / "python", "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout.strip() == "Client", done.stderr
    with pytest.raises(subprocess.CalledProcessError):  # nothing of the server came along
        subprocess.run([bin_dir / "python", "-c", "import django"], cwd=tmp_path, check=True, capture_output=True)
    usage = subprocess.run([bin_dir / "cbr", "--help"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "streams" in usage.stdout and "consume" in usage.stdout
    refused = subprocess.run(
        [bin_dir / "cbr", "--server", "http://127.0.0.1:9", "streams", "list"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and refused.stderr.startswith("cbr: ")

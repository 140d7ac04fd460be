"""The README's Python example runs as it is written, on its own (it makes what it uses) and twice
in a row (`exist_ok`): each run prints the five events it published, in order per routing key."""

import contextlib
import io
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (code,) = [b for b in blocks if "from cbr_client import Client" in b]
    return code


def test_the_readme_example_runs_as_written_and_again(live_server, admin_user, data_dir):
    code = example()
    assert 'Client("http://127.0.0.1:8000", username="admin", password="…")' in code
    code = code.replace('"http://127.0.0.1:8000"', repr(live_server.url))
    code = code.replace('username="admin", password="…"', 'username="ada", password="pw-ada-123"')
    for _ in range(2):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own example
        printed = out.getvalue().split()
        assert sorted(printed[1::2]) == ["0", "1", "2", "3", "4"] and set(printed[0::2]) == {"order"}

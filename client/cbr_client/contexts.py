"""Named contexts for `cbr`, as `nats context` keeps them: a server and the credentials to use
with it, saved under a name, one of them selected. Kept in `contexts.json` in `$CBR_CONFIG_DIR`
(default `~/.config/cbr`), readable by its owner only (it may hold a token or a password).

What a command uses, each setting on its own: its flag, else its environment variable
(`CBR_SERVER`, `CBR_TOKEN`, …), else the context (`--context NAME`, `CBR_CONTEXT`, else the one
selected with `cbr context use`), else the default (`http://127.0.0.1:8000`, no credentials)."""

from __future__ import annotations

import json
import os
from pathlib import Path

SETTINGS = ("server", "token", "api_key", "user", "password")
ENVIRONMENT = {
    "server": "CBR_SERVER",
    "token": "CBR_TOKEN",
    "api_key": "CBR_API_KEY",
    "user": "CBR_USER",
    "password": "CBR_PASSWORD",
}
DEFAULT_SERVER = "http://127.0.0.1:8000"
SECRETS = ("token", "api_key", "password")


def config_file() -> Path:
    base = os.environ.get("CBR_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".config", "cbr")
    return Path(base) / "contexts.json"


def load() -> dict:
    """`{"current": name or None, "contexts": {name: {setting: value}}}` (empty without a file)."""
    try:
        data = json.loads(config_file().read_text())
    except FileNotFoundError:
        return {"current": None, "contexts": {}}
    except (OSError, ValueError) as exc:
        raise ValueError(f"{config_file()} cannot be read: {exc}") from None
    return {"current": data.get("current"), "contexts": dict(data.get("contexts") or {})}


def save(data: dict) -> None:
    """Written whole to a new file readable by its owner only, then put in place of the old one."""
    path = config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    new = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
    os.replace(new, path)


def resolve(given: dict[str, str | None], context: str | None) -> dict[str, str | None]:
    """Each setting from the flag given, else the environment, else the context, else its default."""
    data = load()
    name = context or os.environ.get("CBR_CONTEXT") or data["current"]
    chosen: dict = {}
    if name:
        if name not in data["contexts"]:
            raise ValueError(f"no context {name!r} (cbr context list shows them)")
        chosen = data["contexts"][name]
    out: dict[str, str | None] = {}
    for setting in SETTINGS:
        value = given.get(setting)
        if value is None:
            value = os.environ.get(ENVIRONMENT[setting]) or chosen.get(setting)
        out[setting] = value
    out["server"] = out["server"] or DEFAULT_SERVER
    return out


def shown(context: dict) -> dict:
    """A context as `cbr context show` prints it: secrets masked."""
    return {k: ("****" if k in SECRETS and v else v) for k, v in context.items()}

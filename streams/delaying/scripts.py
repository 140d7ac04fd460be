"""The Lua scripts of a stream's delayed index in Redis (streams.delaying.index explains the keys).
Each runs atomically: one per publish batch on a segment (ADD), one per hand-out round (RELEASE),
one per snapshot segment loaded into the shared queue (LOAD). They follow the rules of
docs/design/delayed-delivery.md, which domain.delayed states in plain Python.

The scripts are `.lua` files in `lua/` beside this module: `common.lua`, which every script starts
with, and one file per script, which says what it takes and returns."""

from importlib.resources import files

_LUA = files("streams.delaying") / "lua"  # read through importlib: the package may be in a zip (a Spark job's)


def _lua(name: str) -> str:
    """A script's own part, from `lua/<name>.lua` beside this module (read once, at import)."""
    return "\n" + (_LUA / f"{name}.lua").read_text()


_COMMON = _lua("common")
ADD = _COMMON + _lua("add")
RELEASE = _COMMON + _lua("release")
LOAD = _COMMON + _lua("load")
DROP_GEN = _COMMON + _lua("drop_gen")

"""Reading actorflow's ``ACTORFLOW_*`` environment variables, with errors that name them."""
from __future__ import annotations

import os

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def env_int(var: str, default: int, minimum: int = 0) -> int:
    """The integer in ``var`` (``default`` when unset or empty); a value that is not an integer
    or is below ``minimum`` raises a ``ValueError`` naming the variable."""
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{var} must be an integer >= {minimum}, got {raw!r}") from None
    if n < minimum:
        raise ValueError(f"{var} must be an integer >= {minimum}, got {n}")
    return n


def env_flag(var: str, default: bool) -> bool:
    """Whether ``var`` is switched on (1/true/yes/on) or off (0/false/no/off); ``default`` when
    unset, empty or anything else."""
    raw = os.environ.get(var, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    return default

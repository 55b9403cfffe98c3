"""Printing of modules: ``Name(extra)`` with the children indented (moved from
``nn/module.py``; ``nn/modules/container.py`` uses it too)."""
from __future__ import annotations


def _format_repr(name: str, extra: list, children: list) -> str:
    """``Name(extra)`` on one line, or one entry per line indented by two spaces."""
    if not extra and not children:
        return name + "()"
    if len(extra) == 1 and not children:
        return f"{name}({extra[0]})"
    body = "\n".join("  " + line for line in extra + children)
    return f"{name}(\n{body}\n)"


def _indent(text: str, n: int) -> str:
    lines = text.split("\n")
    return "\n".join(lines[:1] + [" " * n + line for line in lines[1:]])

"""``python -m actorflow.ops [name ...]``: print the registered ops (all, or the named ones) with
their docs, kernels and traits, as ``Op.describe`` gives them.

``python -m actorflow.ops --markdown [--oneflow-git GIT_DIR --list FILE]`` prints the op table
of ``docs/ops.md`` instead: one row per op with its description, whether it has a gradient rule
and SBP rules, its traits and, given OneFlow's git directory and a list of its test files, the
test files whose source calls a function or method of that name (a text match: the functional
name can differ from the op's, so it shows where an op is likely exercised, not proof).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys

from actorflow.ops import registry


def _test_sources(git_dir: str, list_file: str) -> dict:
    """OneFlow test file name -> its source, for the paths listed in ``list_file``."""
    out = {}
    for line in open(list_file):
        path = line.split("#", 1)[0].strip()
        if not path:
            continue
        src = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"],
                             capture_output=True, text=True).stdout
        out[path.rsplit("/", 1)[-1]] = src
    return out


def markdown(ops: dict, sources: dict | None) -> str:
    """The op table (see the module docstring)."""
    rows = ["| op | description | gradient | SBP rules | traits | OneFlow test files |",
            "|---|---|---|---|---|---|"]
    for name in sorted(ops):
        op = ops[name]
        files = ""
        if sources is not None:
            pat = re.compile(r"\." + re.escape(name) + r"\(")
            files = ", ".join(sorted(f for f, src in sources.items() if pat.search(src)))
        doc = (op.doc or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{name}` | {doc} | {'yes' if op.grad_fn else 'no'} | "
                    f"{'yes' if op.sbp_fn else 'no'} | {', '.join(op.traits())} | {files} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    """Print ``describe()`` of the ops named in ``argv`` (every op when empty) or, with
    ``--markdown``, the op table; 1 for an unknown name."""
    p = argparse.ArgumentParser(prog="python -m actorflow.ops")
    p.add_argument("names", nargs="*")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--oneflow-git")
    p.add_argument("--list")
    args = p.parse_args(argv)
    ops = registry.all_ops()
    if args.markdown:
        sources = None
        if args.oneflow_git and args.list:
            sources = _test_sources(args.oneflow_git, args.list)
        print(markdown(ops, sources))
        return 0
    names = list(args.names) or sorted(ops)
    unknown = [n for n in names if n not in ops]
    if unknown:
        print(f"no op named {', '.join(unknown)} is registered", file=sys.stderr)
        return 1
    print("\n".join(ops[n].describe() for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

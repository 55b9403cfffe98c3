"""``python -m actorflow.ops [name ...]``: print the registered ops (all, or the named ones) with
their docs, kernels and traits, as ``Op.describe`` gives them."""
from __future__ import annotations

import sys

from actorflow.ops import registry


def main(argv: list[str]) -> int:
    """Print ``describe()`` of the ops named in ``argv`` (every op when empty); 1 for an
    unknown name."""
    ops = registry.all_ops()
    names = list(argv) or sorted(ops)
    unknown = [n for n in names if n not in ops]
    if unknown:
        print(f"no op named {', '.join(unknown)} is registered", file=sys.stderr)
        return 1
    print("\n".join(ops[n].describe() for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

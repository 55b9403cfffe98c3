"""Run under ``mpiexec -n N``: several rank scripts of this folder in one launch, one after
another in this process (one MPI start-up and one ``import actorflow`` per rank for all of
them). argv: the scripts, each followed by its own arguments, separated by ``--``
(``graph_dp.py vm -- global_init.py``).

Each script runs as ``__main__`` with its own ``sys.argv``; the environment is restored after
it (a script may set ``ACTORFLOW_RUN_GRAPH_BY_VM``). Around each one every rank prints
``BEGIN <label> rank R`` and, once the script returned and printed its own ``OK rank R``,
``PASSED <label> rank R``; a script that raises prints ``FAILED <label> rank R`` and its
traceback, and the error is raised again, so that the watchdog's exception hook ends every
rank as a single script's failure does (the scripts after it do not run; the launching test
runs those alone). Labels are the script and its arguments joined by spaces."""
from __future__ import annotations

import io
import os
import runpy
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


class _Tee(io.TextIOBase):
    """A text stream writing to ``stream`` and keeping a copy of what was written."""

    def __init__(self, stream):
        self.stream, self.parts = stream, []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def text(self) -> str:
        return "".join(self.parts)


def _say(line: str) -> None:
    """One line in one write (the ranks' outputs interleave by writes)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def split_specs(argv: list[str]) -> list[list[str]]:
    """The scripts with their arguments: ``argv`` cut at each ``--``."""
    specs, cur = [], []
    for a in argv:
        if a == "--":
            if cur:
                specs.append(cur)
            cur = []
        else:
            cur.append(a)
    if cur:
        specs.append(cur)
    return specs


def run_one(spec: list[str], rank: int) -> None:
    """Run one script (``spec[0]``, arguments ``spec[1:]``) as ``__main__``; raise if it fails
    or does not print its ``OK rank R``."""
    label = " ".join(spec)
    path = os.path.join(HERE, spec[0])
    _say(f"BEGIN {label} rank {rank}")
    saved_env, saved_argv, saved_out = dict(os.environ), sys.argv, sys.stdout
    tee = _Tee(saved_out)
    sys.stdout, sys.argv = tee, [path, *spec[1:]]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    except BaseException:
        sys.stdout = saved_out
        _say(f"FAILED {label} rank {rank}\n{traceback.format_exc()}")
        raise
    finally:
        sys.stdout, sys.argv = saved_out, saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    said = tee.text().split()
    if not any(said[i:i + 3] == ["OK", "rank", str(rank)] for i in range(len(said))):
        _say(f"FAILED {label} rank {rank}: no 'OK rank {rank}' printed")
        raise AssertionError(f"{label}: rank {rank} did not print OK")
    _say(f"PASSED {label} rank {rank}")


def main() -> None:
    """Run every script given in ``sys.argv`` in turn."""
    import actorflow as flow

    rank = flow.env.get_rank()
    for spec in split_specs(sys.argv[1:]):
        run_one(spec, rank)


if __name__ == "__main__":
    main()

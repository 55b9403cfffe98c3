"""Rank scripts that share one ``mpiexec`` launch (``run_scripts.py``): each test still checks
its own script by name, but the MPI start-up and the ``import actorflow`` of every rank are
paid once per group of scripts rather than once per script.

A group is a tuple of specs (a script and its arguments) run on ``n`` ranks. The first test of
a group to run launches the whole group (guarded by the group's timeout) and keeps its output;
each test then asks for its own spec's ``PASSED <label> rank R`` line on every rank. A script
that failed in the group fails its test with the launch's output (its ``FAILED`` line and
traceback are there). A script that did not run (an earlier one failed and ended the ranks,
or the group timed out) runs alone in its own launch, so one failure hides no other result."""
from __future__ import annotations

import subprocess

import pytest

from tests.distributed.test_distributed import run_ranks

_OUTPUTS: dict[tuple, str] = {}


def _text(part) -> str:
    if part is None:
        return ""
    return part.decode(errors="replace") if isinstance(part, bytes) else part


def _launch(n: int, group: tuple[tuple[str, ...], ...], timeout: float) -> str:
    argv: list[str] = []
    for spec in group:
        argv += [*spec, "--"]
    try:
        _, _, out = run_ranks(n, "run_scripts.py", *argv, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = _text(e.stdout) + _text(e.stderr) + f"\n(shared launch timed out after {timeout} s)"
    return out


def check_shared(n: int, group: tuple[tuple[str, ...], ...], spec: tuple[str, ...],
                 group_timeout: float, alone_timeout: float = 120) -> str:
    """Assert that rank script ``spec`` (a member of ``group``) passes on ``n`` ranks, from
    the group's shared launch or, where it did not run there, from a launch of its own.
    Returns the output that shows it passing."""
    assert spec in group, (spec, group)
    key = (n, group)
    if key not in _OUTPUTS:
        _OUTPUTS[key] = _launch(n, group, group_timeout)
    out = _OUTPUTS[key]
    label = " ".join(spec)
    if all(f"PASSED {label} rank {r}" in out for r in range(n)):
        return out
    if f"FAILED {label} rank " in out:
        pytest.fail(f"{label} failed on {n} ranks in the shared launch of "
                    f"{[' '.join(s) for s in group]}:\n{out}")
    code, _, alone = run_ranks(n, spec[0], *spec[1:], timeout=alone_timeout)
    assert code == 0, alone
    for r in range(n):
        assert f"OK rank {r}" in alone, alone
    return alone


# the eager global scripts on 2 ranks whose tests only ask for each rank's OK (one launch)
EAGER_2 = tuple((s,) for s in (
    "global_init.py", "global_gather_coinflip.py", "global_setitem_placement.py",
    "global_meta.py", "global_meta_device.py", "global_like.py", "global_alongdim.py",
    "global_ndarray.py", "global_sbp_rules.py", "global_apimath.py", "global_new_like.py",
    "global_rearrange.py", "global_rnn.py", "global_scalars.py", "global_sigchoice.py",
    "global_view_none.py", "global_mode.py", "module_global.py"))
EAGER_2_TIMEOUT = 300   # the group's launch (about 10 s alone on an idle 2-core machine)


def check_eager_2(script: str) -> str:
    """``check_shared`` for a script of ``EAGER_2`` (tests mark themselves
    ``timeout(EAGER_2_TIMEOUT + 150)``: the shared launch, then maybe a launch alone)."""
    return check_shared(2, EAGER_2, (script,), EAGER_2_TIMEOUT, alone_timeout=140)

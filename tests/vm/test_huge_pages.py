"""NumPy's huge pages for large arrays are off once actorflow is imported (see
``actorflow/vm/memory.py``), unless the user chose with ``NUMPY_MADVISE_HUGEPAGE`` or turned the
tuning off."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# prints whether NumPy's madvise(MADV_HUGEPAGE) is on after importing (or not) actorflow
PROBE = ("import sys, numpy\n"
         "if sys.argv[1] == '1':\n"
         "    import actorflow\n"
         "from numpy._core.multiarray import _set_madvise_hugepage as s\n"
         "print(s(False))\n")


def _huge_pages_on(import_actorflow: bool, **env) -> bool:
    e = {k: v for k, v in os.environ.items()
         if k not in ("NUMPY_MADVISE_HUGEPAGE", "ACTORFLOW_MALLOC_TUNING")}
    e.update(env, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", PROBE, "1" if import_actorflow else "0"],
                       capture_output=True, text=True, timeout=120, env=e)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip() == "True"


@pytest.mark.timeout(300)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="transparent huge pages")
def test_importing_actorflow_turns_numpys_huge_pages_off():
    if not _huge_pages_on(False):
        pytest.skip("NumPy does not use huge pages on this kernel")
    assert not _huge_pages_on(True)
    assert _huge_pages_on(True, NUMPY_MADVISE_HUGEPAGE="1")   # the user's choice stands
    assert _huge_pages_on(True, ACTORFLOW_MALLOC_TUNING="0")  # tuning off: NumPy's default

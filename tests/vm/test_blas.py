"""actorflow restarts OpenBLAS's threads so that idle ones sleep instead of spinning."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

# A GEMM big enough for OpenBLAS to use its threads, then an idle gap: the process CPU time
# spent during the gap is what spinning BLAS threads burn.
PROBE = textwrap.dedent("""
    import resource, time
    import numpy as np
    import actorflow
    from actorflow.vm import blas
    a = np.ones((512, 512), np.float32)
    spent = []
    for _ in range(5):
        a @ a
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(0.05)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        spent.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    print(blas.applied, min(spent))
""")


def _probe(**env):
    full = {k: v for k, v in os.environ.items()
            if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT")}
    full.update({"OPENBLAS_NUM_THREADS": "2"}, **env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True,
                         text=True, timeout=100, check=True).stdout.split()
    return out[0] == "True", float(out[1])


def _openblas_with_pool():
    import numpy as np
    cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    return "openblas" in str(cfg.get("name", "")).lower()


needs_openblas = pytest.mark.skipif(not sys.platform.startswith("linux") or
                                    not _openblas_with_pool(), reason="needs OpenBLAS on Linux")


@needs_openblas
def test_idle_blas_threads_do_not_spin():
    applied, cpu_in_gap = _probe()
    assert applied
    assert cpu_in_gap < 0.02  # a spinning helper would burn about the whole 50 ms gap


@needs_openblas
def test_user_setting_and_opt_out_are_respected():
    assert not _probe(OPENBLAS_THREAD_TIMEOUT="20")[0]
    assert not _probe(ACTORFLOW_BLAS_TUNING="0")[0]

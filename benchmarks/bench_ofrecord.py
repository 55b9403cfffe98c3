"""OFRecord pipeline throughput: records per second through the stages of an ImageNet-style
input pipeline (``nn.OFRecordReader``, the label and PNG image decoders, ``nn.image.Resize``,
``nn.CropMirrorNormalize``), on a part file of 64x64 RGB PNG records written first.

    python benchmarks/bench_ofrecord.py [--quick]
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import actorflow as flow  # noqa: E402
from actorflow.nn.data import write_ofrecord  # noqa: E402
from actorflow.nn.data.image_codec import encode_png  # noqa: E402
from benchmarks.common import quick_parser, table, versions  # noqa: E402

BATCH = 32


def _dataset(d: str, n: int = 256) -> None:
    rng = np.random.default_rng(0)
    img = np.cumsum(rng.integers(0, 5, (64, 64, 3)), axis=1).astype(np.uint8)
    write_ofrecord(os.path.join(d, "part-0"), [
        {"encoded": encode_png(img), "class/label": np.array([i], np.int32)} for i in range(n)])


def _rate(fn, min_time: float) -> float:
    fn()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_time:
        fn()
        n += BATCH
    return n / (time.perf_counter() - t0)


def main() -> None:
    args = quick_parser(__doc__).parse_args()
    print(versions())
    with tempfile.TemporaryDirectory() as d:
        _dataset(d)
        reader = flow.nn.OFRecordReader(d, batch_size=BATCH)
        label = flow.nn.OFRecordRawDecoder("class/label", shape=(), dtype=flow.int32)
        image = flow.nn.OFRecordImageDecoder("encoded", color_space="RGB")
        resize = flow.nn.image.Resize(target_size=64, keep_aspect_ratio=True)
        cmn = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=56, crop_w=56,
                                          mean=[123.7, 116.8, 103.9], std=[58.4, 57.1, 57.4])
        stages = [
            ("read + parse records", lambda: reader()),
            ("+ label decoder", lambda: label(reader()).numpy()),
            ("+ PNG image decoder", lambda: image(reader())),
            ("+ CropMirrorNormalize", lambda: cmn(image(reader())).numpy()),
            ("+ Resize (keep ratio) before CMN", lambda: cmn(resize(image(reader()))[0]).numpy()),
        ]
        t = 1.0 if args.quick else 3.0
        rows = [(name, f"{_rate(fn, t):.0f}") for name, fn in stages]
    print(table(rows, ("pipeline (batch 32, 64x64 RGB PNG)", "records/s")))


if __name__ == "__main__":
    main()

"""nn.COCOReader on a small COCO-format dataset written here (annotation JSON + PNG files):
boxes, labels, polygons, image filtering, order, shuffling, aspect-ratio grouping."""
from __future__ import annotations

import json

import numpy as np
import pytest

import actorflow as flow
from actorflow.nn.data.image_codec import encode_png
from actorflow.process.world import simulate_rank

pytestmark = pytest.mark.timeout(120)

# (id, height, width); groups h // w: 1, 2 -> 0, 4, 5, 6 -> 1, 3 -> 2
IMAGES = [(1, 6, 8), (2, 5, 9), (3, 20, 7), (4, 4, 4), (5, 6, 6), (6, 6, 6)]


def _dataset(tmp_path):
    rng = np.random.default_rng(0)
    images = []
    for i, h, w in IMAGES:
        name = f"{i:06d}.png"
        (tmp_path / name).write_bytes(encode_png(rng.integers(0, 256, (h, w, 3),
                                                              dtype=np.uint8)))
        images.append({"id": i, "height": h, "width": w, "file_name": name})
    poly = [1.0, 1.0, 3.0, 1.0, 3.0, 3.0, 1.0, 3.0]
    annos = [
        {"id": 10, "image_id": 1, "category_id": 7, "iscrowd": 0, "bbox": [1, 2, 3, 2],
         "segmentation": [poly, poly[:6] + [5.0, 5.0]]},
        {"id": 11, "image_id": 1, "category_id": 3, "iscrowd": 0, "bbox": [-2, 0, 20, 4],
         "segmentation": [poly]},
        {"id": 12, "image_id": 1, "category_id": 3, "iscrowd": 1, "bbox": [0, 0, 2, 2],
         "segmentation": {"counts": [1], "size": [6, 8]}},
        {"id": 13, "image_id": 2, "category_id": 9, "iscrowd": 0, "bbox": [0, 0, 4, 4],
         "segmentation": [poly]},
        {"id": 14, "image_id": 3, "category_id": 7, "iscrowd": 0, "bbox": [1, 1, 2, 9],
         "segmentation": [poly]},
        {"id": 15, "image_id": 4, "category_id": 7, "iscrowd": 0, "bbox": [0, 0, 1, 1],
         "segmentation": [poly]},                       # tiny box only: image 4 dropped
        {"id": 16, "image_id": 5, "category_id": 3, "iscrowd": 0, "bbox": [0, 0, 3, 3],
         "segmentation": [poly]},
    ]                                                   # image 6: no annotation, dropped
    cats = [{"id": c, "name": str(c)} for c in (9, 3, 7)]
    path = tmp_path / "ann.json"
    path.write_text(json.dumps({"images": images, "annotations": annos, "categories": cats}))
    return str(path), str(tmp_path)


def test_outputs_of_one_batch(tmp_path):
    ann, d = _dataset(tmp_path)
    r = flow.nn.COCOReader(ann, d, batch_size=2, shuffle=False, group_by_aspect_ratio=False)
    image, ids, size, bbox, label, segm, segm_index = r()
    assert ids.dtype == flow.int64 and ids.numpy().tolist() == [1, 2]
    assert size.dtype == flow.int32 and size.numpy().tolist() == [[6, 8], [5, 9]]
    assert image[0].tobytes() == (tmp_path / "000001.png").read_bytes()
    decoded = flow.nn.image.decode()(image)
    assert decoded.instance_shapes == [(6, 8, 3), (5, 9, 3)]
    # xywh -> inclusive xyxy, clipped to the image; crowd left out
    np.testing.assert_array_equal(bbox[0], [[1, 2, 3, 3], [0, 0, 7, 3]])
    assert bbox[0].dtype == np.float32
    assert label[0].tolist() == [2, 1] and label[1].tolist() == [3]  # 3 -> 1, 7 -> 2, 9 -> 3
    assert segm[0].shape == (12, 2) and segm[0].dtype == np.float32
    idx = segm_index[0]
    assert idx.dtype == np.int32 and idx.shape == (12, 3)
    assert idx[:, 0].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]
    assert idx[:, 1].tolist() == [0] * 4 + [1] * 4 + [0] * 4
    assert idx[:, 2].tolist() == [0] * 8 + [1] * 4
    np.testing.assert_array_equal(segm[0][7], [5.0, 5.0])


def test_order_filtering_and_wraparound(tmp_path):
    ann, d = _dataset(tmp_path)
    r = flow.nn.COCOReader(ann, d, batch_size=3, shuffle=False, group_by_aspect_ratio=False)
    assert [r()[1].numpy().tolist() for _ in range(2)] == [[1, 2, 3], [5, 1, 2]]
    keep = flow.nn.COCOReader(ann, d, batch_size=6, shuffle=False,
                              group_by_aspect_ratio=False,
                              remove_images_without_annotations=False)
    assert keep()[1].numpy().tolist() == [1, 2, 3, 4, 5, 6]
    assert keep()[4][5].shape == (0,)          # image 6 has no labels


def test_shuffle_is_seeded_per_epoch(tmp_path):
    ann, d = _dataset(tmp_path)

    def ids(seed):
        r = flow.nn.COCOReader(ann, d, batch_size=4, shuffle=True, random_seed=seed,
                               group_by_aspect_ratio=False)
        return [r()[1].numpy().tolist() for _ in range(3)]

    a = ids(3)
    assert a == ids(3) and a != ids(4)
    assert sorted(a[0]) == [1, 2, 3, 5]


def test_group_by_aspect_ratio(tmp_path):
    ann, d = _dataset(tmp_path)
    r = flow.nn.COCOReader(ann, d, batch_size=2, shuffle=False, group_by_aspect_ratio=True)
    got = [r()[1].numpy().tolist() for _ in range(4)]
    # stream 1, 2 | 3, (5, 1, 2 buffered by group), 3 | buffered 5, then 5 | buffered 1, 2
    assert got == [[1, 2], [3, 3], [5, 5], [1, 2]]
    for batch in got:
        heights = {h // w for i, h, w in IMAGES if i in batch}
        assert len(heights) == 1


def test_ranks_read_strided_or_contiguous_shares(tmp_path):
    ann, d = _dataset(tmp_path)
    got = {}
    for stride in (True, False):
        for rank in range(2):
            with simulate_rank(rank, 2):
                r = flow.nn.COCOReader(ann, d, batch_size=2, shuffle=False,
                                       group_by_aspect_ratio=False, stride_partition=stride)
                got[stride, rank] = r()[1].numpy().tolist()
    assert got[True, 0] == [1, 3] and got[True, 1] == [2, 5]
    assert got[False, 0] == [1, 2] and got[False, 1] == [3, 5]


def test_errors(tmp_path):
    ann, d = _dataset(tmp_path)
    with pytest.raises(ValueError, match="batch_size"):
        flow.nn.COCOReader(ann, d, batch_size=0)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"images": [{"id": 1, "height": 2, "width": 2,
                                           "file_name": "x"}],
                               "annotations": [{"id": 1, "image_id": 1, "category_id": 1,
                                                "iscrowd": 0, "bbox": [0, 0, 2, 2],
                                                "segmentation": [[0, 0, 1, 1]]}],
                               "categories": [{"id": 1}]}))
    with pytest.raises(ValueError, match="fewer than 4 points"):
        flow.nn.COCOReader(str(bad), d, batch_size=1)

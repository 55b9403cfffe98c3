"""``nn.COCOReader``: batches of a COCO detection dataset (an annotation JSON in COCO's format
and a directory of images), as OneFlow's reader gives them."""
from __future__ import annotations

import json
import os

import numpy as np

from actorflow.functional.creation import tensor as _tensor
from actorflow.nn.data.tensor_buffer import TensorBuffer
from actorflow.nn.module import Module
from actorflow.process.world import get_rank, get_world_size
from actorflow.random import default_generator
from actorflow.scope import current_interpreter

__all__ = ["COCOReader", "COCOMeta"]

_MIN_KEYPOINTS = 10


class COCOMeta:
    """The parsed annotation file: the image ids kept (sorted), each one's annotations (crowd
    annotations left out) and the category ids mapped to contiguous labels from 1."""

    def __init__(self, annotation_file: str, image_dir: str,
                 remove_images_without_annotations: bool) -> None:
        with open(annotation_file, encoding="utf-8") as f:
            js = json.load(f)
        self.image_dir = image_dir
        self.images = {int(im["id"]): im for im in js.get("images", [])}
        self.annos = {i: [] for i in self.images}
        for a in js.get("annotations", []):
            if a.get("iscrowd", 0) == 1:
                continue
            seg = a.get("segmentation")
            if isinstance(seg, list) and any(len(p) <= 6 for p in seg):
                raise ValueError(f"COCOReader: annotation {a.get('id')} has a polygon of "
                                 f"fewer than 4 points")
            image_id = int(a["image_id"])
            if image_id not in self.annos:
                raise ValueError(f"COCOReader: annotation {a.get('id')} names image "
                                 f"{image_id}, which the file does not list")
            self.annos[image_id].append(a)
        ids = sorted(self.images)
        if remove_images_without_annotations:
            ids = [i for i in ids if self._valid(i)]
        self.ids = ids
        cats = sorted(int(c["id"]) for c in js.get("categories", []))
        self.label_of = {c: k + 1 for k, c in enumerate(cats)}

    def _valid(self, image_id: int) -> bool:
        annos = self.annos[image_id]
        if not annos or all(not (a["bbox"][2] > 1 and a["bbox"][3] > 1) for a in annos):
            return False
        if "keypoints" not in annos[0]:
            return True
        visible = sum(1 for a in annos for v in a.get("keypoints", [])[2::3] if v > 0)
        return visible >= _MIN_KEYPOINTS

    def height(self, image_id: int) -> int:
        return int(self.images[image_id]["height"])

    def width(self, image_id: int) -> int:
        return int(self.images[image_id]["width"])

    def boxes(self, image_id: int) -> np.ndarray:
        """(n, 4) float32 boxes as (x1, y1, x2, y2), inclusive pixel corners, clipped to the
        image; empty boxes left out."""
        h, w = self.height(image_id), self.width(image_id)
        out = []
        for a in self.annos[image_id]:
            x, y, bw, bh = (np.float32(v) for v in a["bbox"])
            x2, y2 = x + max(bw - 1, np.float32(0)), y + max(bh - 1, np.float32(0))
            x, x2 = (min(max(v, np.float32(0)), np.float32(w - 1)) for v in (x, x2))
            y, y2 = (min(max(v, np.float32(0)), np.float32(h - 1)) for v in (y, y2))
            if x2 > x and y2 > y:
                out.append((x, y, x2, y2))
        return np.array(out, np.float32).reshape(-1, 4)

    def labels(self, image_id: int) -> np.ndarray:
        return np.array([self.label_of[int(a["category_id"])] for a in self.annos[image_id]],
                        np.int32)

    def segmentations(self, image_id: int) -> tuple:
        """(points (k, 2) float32, index (k, 3) int32 as (point, polygon, annotation))."""
        pts, idx = [], []
        for ai, a in enumerate(self.annos[image_id]):
            seg = a.get("segmentation")
            if not isinstance(seg, list):
                continue
            for pi, poly in enumerate(seg):
                if len(poly) % 2:
                    raise ValueError(f"COCOReader: annotation {a.get('id')} has a polygon of "
                                     f"odd length {len(poly)}")
                pts.extend(poly)
                idx.extend((k, pi, ai) for k in range(len(poly) // 2))
        return (np.array(pts, np.float32).reshape(-1, 2),
                np.array(idx, np.int32).reshape(-1, 3))


class COCOReader(Module):
    """Reads ``batch_size`` images of a COCO dataset per call (OneFlow's ``nn.COCOReader``).

    Returns ``(image, image_id, image_size, gt_bbox, gt_label, gt_segm, gt_segm_index)``:
    a ``TensorBuffer`` of the encoded image files (decode them with ``nn.image.decode``),
    int64 ids (N,), int32 sizes (N, 2) as (height, width), and ``TensorBuffer``s of float32
    boxes (n, 4) as (x1, y1, x2, y2), int32 labels (n,) (contiguous from 1 in category id
    order), float32 polygon points (k, 2) and their int32 (point, polygon, annotation)
    indices (k, 3). Images come in id order, or with ``shuffle`` in a permutation seeded by
    ``random_seed`` (None: drawn from the global generator) and the epoch; the processes
    read interleaved (``stride_partition``) or contiguous shares; ``group_by_aspect_ratio``
    batches only images whose ``height // width`` agree, buffering the others."""

    def __init__(self, annotation_file: str, image_dir: str, batch_size: int,
                 shuffle: bool = True, random_seed: int | None = None,
                 group_by_aspect_ratio: bool = True,
                 remove_images_without_annotations: bool = True,
                 stride_partition: bool = True, device=None, placement=None,
                 sbp=None) -> None:
        super().__init__()
        if placement is not None or sbp is not None:
            raise NotImplementedError("COCOReader: placement / sbp (a global batch) is not "
                                      "supported; each process reads its own share")
        if batch_size <= 0:
            raise ValueError(f"COCOReader: batch_size must be positive, got {batch_size}")
        self.meta = COCOMeta(annotation_file, image_dir, remove_images_without_annotations)
        if not self.meta.ids:
            raise ValueError(f"COCOReader: {annotation_file} has no image to read")
        self.batch_size, self.shuffle = batch_size, shuffle
        self.group_by_aspect_ratio, self.stride_partition = group_by_aspect_ratio, \
            stride_partition
        self.random_seed = (default_generator.next_seed() if shuffle else -1) \
            if random_seed is None else int(random_seed)
        self.device = device
        self._world, self._rank = get_world_size(), get_rank()
        n = len(self.meta.ids)
        self._order = list(range(n))
        self._epoch = 0
        self._new_epoch()
        self._shard = -(-n // self._world)
        self._pos = self._rank if stride_partition else self._rank * self._shard
        self._in_shard = 0
        self._groups: dict = {}     # group id -> list of [order, samples]
        self._count = 0

    def _new_epoch(self) -> None:
        if self.shuffle:
            rng = np.random.Generator(np.random.MT19937(self.random_seed + self._epoch))
            self._order = [self._order[i] for i in rng.permutation(len(self._order))]
        self._epoch += 1

    def _next_index(self) -> int:
        index = self._order[self._pos]
        if self.stride_partition:
            self._pos += self._world
        else:
            self._pos += 1
            self._in_shard += 1
            if self._in_shard == self._shard:
                self._pos += (self._world - 1) * self._shard
                self._in_shard = 0
        if self._pos >= len(self._order):
            self._new_epoch()
            self._pos %= len(self._order)
        return index

    def _group(self, index: int) -> int:
        image_id = self.meta.ids[index]
        return self.meta.height(image_id) // self.meta.width(image_id)

    def _batch(self) -> list:
        if not self.group_by_aspect_ratio:
            return [self._next_index() for _ in range(self.batch_size)]
        batch, group = [], -1
        waiting = [(lst[0][0], g) for g, lst in self._groups.items() if lst]
        if waiting:
            group = min(waiting)[1]
            batch = self._groups[group].pop(0)[1]
        while len(batch) < self.batch_size:
            index = self._next_index()
            g = self._group(index)
            if group == -1:
                group = g
            if g == group:
                batch.append(index)
                continue
            lst = self._groups.setdefault(g, [])
            if not lst or len(lst[-1][1]) == self.batch_size:
                lst.append([self._count, [index]])
                self._count += 1
            else:
                lst[-1][1].append(index)
        return batch

    def forward(self) -> tuple:
        if current_interpreter() is not None:
            raise RuntimeError("COCOReader runs on the host, eagerly; it cannot be traced into "
                               "an nn.Graph")
        ids = [self.meta.ids[i] for i in self._batch()]
        images = []
        for i in ids:
            path = os.path.join(self.meta.image_dir, self.meta.images[i]["file_name"])
            with open(path, "rb") as f:
                images.append(np.frombuffer(f.read(), np.uint8).copy())
        segm = [self.meta.segmentations(i) for i in ids]
        return (TensorBuffer(images), _tensor(np.array(ids, np.int64)),
                _tensor(np.array([(self.meta.height(i), self.meta.width(i)) for i in ids],
                                 np.int32).reshape(-1, 2)),
                TensorBuffer([self.meta.boxes(i) for i in ids]),
                TensorBuffer([self.meta.labels(i) for i in ids]),
                TensorBuffer([s[0] for s in segm]), TensorBuffer([s[1] for s in segm]))

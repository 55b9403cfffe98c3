"""OFRecord: the protobuf wire format against hand-built bytes, part files, the reader
(order, wrap-around, shuffles, the share of each rank) and the decoders."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import actorflow as flow
from actorflow.nn.data import ofrecord as ofr
from actorflow.nn.data.image_codec import encode_png
from actorflow.nn.data.protowire import Feature, decode_record, encode_record
from actorflow.nn.data.random_crop import RandomCropGenerator, crop_seed
from actorflow.nn.data.resize import resize_image
from actorflow.process.world import simulate_rank

pytestmark = pytest.mark.timeout(120)


# ---- wire format -----------------------------------------------------------------------------

def _len(field, payload):
    assert len(payload) < 128
    return bytes([(field << 3) | 2, len(payload)]) + payload


def _entry(key, feature):
    return _len(1, _len(1, key) + _len(2, feature))


def test_encode_matches_hand_built_protobuf():
    int64s = _len(5, _len(1, b"\x01" + b"\xff" * 9 + b"\x01"))          # [1, -1], packed
    floats = _len(2, _len(1, struct.pack("<f", 1.5)))
    doubles = _len(3, _len(1, struct.pack("<dd", -2.0, 0.25)))
    int32s = _len(4, _len(1, b"\x7b" + b"\xfe" + b"\xff" * 8 + b"\x01"))  # [123, -2]
    byts = _len(1, _len(1, b"hi") + _len(1, b""))
    want = (_entry(b"a", int64s) + _entry(b"f", floats) + _entry(b"d", doubles)
            + _entry(b"i", int32s) + _entry(b"b", byts))
    got = encode_record({"a": np.array([1, -1], np.int64), "f": np.array([1.5], np.float32),
                         "d": [-2.0, 0.25], "i": np.array([123, -2], np.int32),
                         "b": [b"hi", b""]})
    assert got == want
    back = decode_record(want)
    assert list(back) == ["a", "f", "d", "i", "b"]
    assert back["a"].kind == "int64_list" and back["a"].value.tolist() == [1, -1]
    assert back["f"].value.dtype == np.float32 and back["f"].value.tolist() == [1.5]
    assert back["d"].value.tolist() == [-2.0, 0.25]
    assert back["i"].value.dtype == np.int32 and back["i"].value.tolist() == [123, -2]
    assert back["b"] == Feature("bytes_list", [b"hi", b""])


def test_decode_accepts_unpacked_repeats_unknown_fields_and_last_wins():
    unpacked = _len(4, b"\x08\x05\x08\x7b")                     # int32 5, 123 unpacked
    unpacked_f = _len(2, b"\x0d" + struct.pack("<f", 2.0))      # one fixed32 float
    unknown = b"\x38\x07"                                      # field 7 varint, ignored
    rec = (_entry(b"x", unpacked) + unknown + _entry(b"y", unpacked_f)
           + _entry(b"x", _len(5, _len(1, b"\x02"))))           # "x" again: this one wins
    back = decode_record(rec)
    assert back["x"].kind == "int64_list" and back["x"].value.tolist() == [2]
    assert back["y"].value.tolist() == [2.0]
    assert decode_record(_entry(b"z", unpacked))["z"].value.tolist() == [5, 123]


def test_decode_errors_are_clear():
    with pytest.raises(ValueError, match="runs past"):
        decode_record(b"\x0a\x05\x0a")
    with pytest.raises(ValueError, match="no Feature"):
        decode_record(_len(1, _len(1, b"k")))
    with pytest.raises(TypeError, match="cannot store"):
        encode_record({"c": np.array([1j])})


# ---- files and the reader --------------------------------------------------------------------

def _dataset(tmp_path, parts=(5, 4), suffix=5):
    n = 0
    for p, count in enumerate(parts):
        recs = [{"label": np.array([n + k], np.int32),
                 "vec": np.arange(3, dtype=np.float32) + n + k} for k in range(count)]
        name = ofr.part_file_names(len(parts), "part-", suffix)[p]
        assert ofr.write_ofrecord(str(tmp_path / name), recs) == count
        n += count
    return str(tmp_path)


def _labels(reader, calls):
    dec = flow.nn.OFRecordRawDecoder("label", shape=(), dtype=flow.int32)
    return [dec(reader()).numpy().tolist() for _ in range(calls)]


def test_part_file_framing(tmp_path):
    path = str(tmp_path / "part-0")
    ofr.write_ofrecord(path, [{"a": b"xyz"}, {"a": b"q"}])
    raw = open(path, "rb").read()
    first = encode_record({"a": b"xyz"})
    assert raw[:8] == struct.pack("<q", len(first)) and raw[8:8 + len(first)] == first
    assert [decode_record(r)["a"].value for r in ofr.read_ofrecord(path)] == [[b"xyz"], [b"q"]]
    open(path, "ab").write(struct.pack("<q", 50) + b"abc")
    with pytest.raises(ValueError, match="truncated"):
        list(ofr.read_ofrecord(path))


def test_reader_order_and_wraparound(tmp_path):
    d = _dataset(tmp_path)
    r = flow.nn.OFRecordReader(d, batch_size=4, data_part_num=2, part_name_suffix_length=5)
    assert _labels(r, 3) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 0, 1, 2]]
    batch = r()
    assert batch.shape == (4,) and sorted(batch[0]) == ["label", "vec"]
    with pytest.raises(FileNotFoundError, match="part-2"):
        flow.nn.OFRecordReader(d, data_part_num=3)   # suffix length -1: "part-0" ... missing


def test_reader_random_shuffle_is_seeded(tmp_path):
    d = _dataset(tmp_path)
    kw = dict(batch_size=9, data_part_num=2, part_name_suffix_length=5, random_shuffle=True,
              shuffle_buffer_size=4)
    a = _labels(flow.nn.OFRecordReader(d, random_seed=7, **kw), 4)
    b = _labels(flow.nn.OFRecordReader(d, random_seed=7, **kw), 4)
    c = _labels(flow.nn.OFRecordReader(d, random_seed=8, **kw), 4)
    assert a == b and a != c
    flat = sum(a, [])
    assert set(flat) == set(range(9)) and flat[:9] != list(range(9))
    flow.manual_seed(3)
    x = _labels(flow.nn.OFRecordReader(d, **kw), 2)
    flow.manual_seed(3)
    assert _labels(flow.nn.OFRecordReader(d, **kw), 2) == x


def test_reader_shuffle_after_epoch_permutes_parts(tmp_path):
    d = _dataset(tmp_path, parts=(2, 2, 2, 2))
    r = flow.nn.OFRecordReader(d, batch_size=8, data_part_num=4, part_name_suffix_length=5,
                               shuffle_after_epoch=True, random_seed=1)
    epochs = _labels(r, 4)
    assert epochs[0] == list(range(8))
    for e in epochs[1:]:            # each epoch: whole parts, in some order
        assert sorted(e) == list(range(8))
        assert all(e[k + 1] == e[k] + 1 and e[k] % 2 == 0 for k in range(0, 8, 2))
    assert any(e != list(range(8)) for e in epochs[1:])


def test_reader_splits_parts_over_ranks(tmp_path):
    d = _dataset(tmp_path, parts=(1, 1, 1))
    got = []
    for rank in range(2):
        with simulate_rank(rank, 2):
            got.append(_labels(flow.nn.OFRecordReader(d, batch_size=3, data_part_num=3,
                                                      part_name_suffix_length=5), 1)[0])
    assert got == [[0, 1, 0], [2, 2, 2]]       # parts {0, 1} and {2}
    with simulate_rank(0, 4), pytest.raises(ValueError, match="at least as many"):
        flow.nn.OFRecordReader(d, data_part_num=3, part_name_suffix_length=5)


def test_reader_argument_errors(tmp_path):
    assert flow.nn.OfrecordReader is flow.nn.OFRecordReader          # OneFlow's aliases
    assert flow.nn.OfrecordRawDecoder is flow.nn.OFRecordRawDecoder
    d = _dataset(tmp_path)
    with pytest.raises(ValueError, match="batch_size"):
        flow.nn.OFRecordReader(d, batch_size=0)
    with pytest.raises(NotImplementedError, match="placement"):
        flow.nn.OFRecordReader(d, placement=flow.placement("cpu", ranks=[0]),
                               sbp=flow.sbp.split(0))


# ---- decoders --------------------------------------------------------------------------------

def _batch(*records):
    return ofr.OFRecordBatch([decode_record(encode_record(r)) for r in records])


def test_raw_decoder_shapes_dtypes_truncation():
    b = _batch({"v": np.arange(6, dtype=np.float32), "s": b"\x01\xff\x07"},
               {"v": np.arange(6, 12, dtype=np.float32), "s": b"\x05"})
    out = flow.nn.OFRecordRawDecoder("v", shape=(2, 3), dtype=flow.float64)(b)
    assert out.dtype == flow.float64 and out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out.numpy(), np.arange(12).reshape(2, 2, 3))
    cut = flow.nn.OFRecordRawDecoder("v", shape=(4,), dtype=flow.int64, truncate=True)(b)
    np.testing.assert_array_equal(cut.numpy(), [[0, 1, 2, 3], [6, 7, 8, 9]])
    pad = flow.nn.OFRecordRawDecoder("v", shape=(8,), dtype=flow.int32, truncate=True)(b)
    np.testing.assert_array_equal(pad.numpy()[:, 6:], 0)
    var = flow.nn.OFRecordRawDecoder("v", shape=(7,), dtype=flow.float32,
                                     dim1_varying_length=True)(b)
    np.testing.assert_array_equal(var.numpy()[0], [0, 1, 2, 3, 4, 5, 0])
    s = flow.nn.OFRecordRawDecoder("s", shape=(3,), dtype=flow.int32)(b)   # bytes as int8
    np.testing.assert_array_equal(s.numpy(), [[1, -1, 7], [5, 0, 0]])
    with pytest.raises(ValueError, match="holds 6 values, the shape needs 4"):
        flow.nn.OFRecordRawDecoder("v", shape=(4,), dtype=flow.float32)(b)
    with pytest.raises(KeyError, match="no feature 'w'"):
        flow.nn.OFRecordRawDecoder("w", shape=(1,), dtype=flow.float32)(b)
    with pytest.raises(TypeError, match="dtype"):
        flow.nn.OFRecordRawDecoder("v", shape=(1,), dtype=flow.float16)


def test_bytes_and_image_decoders():
    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 256, (5, 7, 3), dtype=np.uint8),
            rng.integers(0, 256, (4, 2, 3), dtype=np.uint8)]
    b = _batch(*({"encoded": encode_png(im, "BGR"), "n": np.array([1])} for im in imgs))
    raw = flow.nn.OFRecordBytesDecoder("encoded")(b)
    assert raw.shape == (2,) and raw[0].dtype == np.uint8
    assert raw[0].tobytes() == encode_png(imgs[0], "BGR")
    bgr = flow.nn.OFRecordImageDecoder("encoded")(b).numpy()
    rgb = flow.nn.OFRecordImageDecoder("encoded", color_space="RGB")(b).numpy()
    for im, x, y in zip(imgs, bgr, rgb):
        np.testing.assert_array_equal(x, im)
        np.testing.assert_array_equal(y, im[..., ::-1])
    gray = flow.nn.OFRecordImageDecoder("encoded", color_space="GRAY")(b)[0]
    want = np.rint(im_rgb_luma(imgs[0][..., ::-1]))
    np.testing.assert_array_equal(gray[..., 0], want)
    with pytest.raises(ValueError, match="bytes_list of one"):
        flow.nn.OFRecordBytesDecoder("n")(b)


def im_rgb_luma(rgb):
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def test_image_decoder_random_crop_windows():
    img = np.arange(40 * 30 * 3, dtype=np.int64).reshape(40, 30, 3).astype(np.uint8)
    b = _batch(*({"encoded": encode_png(img)} for _ in range(3)))
    dec = flow.nn.OFRecordImageDecoderRandomCrop("encoded", random_seed=5,
                                                 random_area=(0.2, 0.6),
                                                 random_aspect_ratio=(0.5, 2.0))
    out = [dec(b), dec(b)]
    gens = [RandomCropGenerator((0.5, 2.0), (0.2, 0.6), crop_seed(5, i)) for i in range(3)]
    for call in out:
        for i, crop in enumerate(call):
            y, x, h, w = gens[i].window(40, 30)
            np.testing.assert_array_equal(crop, img[y:y + h, x:x + w])
            assert 0.5 <= w / h <= 2.0 and h * w <= 0.6 * 1200 + 40
    assert out[0][0].shape != out[0][1].shape or not np.array_equal(out[0][0], out[0][1])
    again = flow.nn.OFRecordImageDecoderRandomCrop("encoded", random_seed=5,
                                                   random_area=(0.2, 0.6),
                                                   random_aspect_ratio=(0.5, 2.0))(b)
    np.testing.assert_array_equal(again[2], out[0][2])
    with pytest.raises(ValueError, match="random_area"):
        flow.nn.OFRecordImageDecoderRandomCrop("encoded", random_area=(0.5, 1.5))


def test_random_crop_fallbacks():
    # no window of ratio in [3, 4] fits a tall image with area >= 0.9: the fallback
    g = RandomCropGenerator((3.0, 4.0), (0.9, 1.0), seed=0)
    for _ in range(5):
        y, x, h, w = g.window(100, 10)
        assert 0 <= y <= 100 - h and x == 0 and w == 10 and 1 <= h <= 100


def test_reader_not_in_graph(tmp_path):
    d = _dataset(tmp_path)
    reader = flow.nn.OFRecordReader(d, data_part_num=2, part_name_suffix_length=5)

    class G(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.r = reader

        def build(self, x):
            self.r()
            return x

    with pytest.raises(RuntimeError, match="cannot be traced"):
        G()(flow.ones(1))


def test_imagenet_style_pipeline_matches_numpy(tmp_path):
    """OneFlow's test_dataset.py pipeline: reader -> label + image decoders -> resize the
    shorter side -> crop, mirror, normalise; checked step by step against NumPy."""
    rng = np.random.default_rng(9)
    imgs = [rng.integers(0, 256, (30, 40, 3), dtype=np.uint8),
            rng.integers(0, 256, (36, 24, 3), dtype=np.uint8)]
    ofr.write_ofrecord(str(tmp_path / "part-00000"),
                       [{"encoded": encode_png(im), "class/label": np.array([k + 4], np.int32)}
                        for k, im in enumerate(imgs)])
    reader = flow.nn.OFRecordReader(str(tmp_path), batch_size=2, part_name_suffix_length=5)
    rec = reader()
    label = flow.nn.OFRecordRawDecoder("class/label", shape=(), dtype=flow.int32)(rec)
    assert label.numpy().tolist() == [4, 5]
    raw = flow.nn.OFRecordImageDecoder("encoded", color_space="RGB")(rec)
    np.testing.assert_array_equal(raw[1], imgs[1][..., ::-1])
    resized, size, _ = flow.nn.image.Resize(resize_side="shorter", keep_aspect_ratio=True,
                                            target_size=20, interpolation_type="bilinear")(raw)
    assert size.numpy().tolist() == [[27, 20], [20, 30]]
    mean, std = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]
    out = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=16, crop_w=16, mean=mean,
                                      std=std)(resized).numpy()
    assert out.shape == (2, 3, 16, 16)
    for k, (im, (w, h)) in enumerate(zip(imgs, size.numpy().tolist())):
        r = resize_image(im[..., ::-1], h, w, "bilinear")
        y0, x0 = int((h - 16) * 0.5), int((w - 16) * 0.5)
        want = (r[y0:y0 + 16, x0:x0 + 16].astype(np.float32) - np.float32(mean)) / \
            np.float32(std)
        np.testing.assert_allclose(out[k], want.transpose(2, 0, 1), rtol=1e-5, atol=1e-5)

"""OneFlow's image data ops: PNG/JPEG decoding, nn.image (Resize, batch_align, decode, flip,
normalize), CropMirrorNormalize (eager, in a Graph, from a TensorBuffer) and tensor buffers,
against NumPy, PyTorch's interpolate and Pillow."""
from __future__ import annotations

import io

import numpy as np
import pytest

import actorflow as flow
from actorflow.nn.data import TensorBuffer
from actorflow.nn.data.image_codec import decode_image, encode_png
from actorflow.nn.data.resize import resize_image
from tests.helpers import torch

pytestmark = pytest.mark.timeout(120)

try:
    import PIL.Image as PILImage
except ImportError:  # pragma: no cover - Pillow is the optional 'image' extra
    PILImage = None

needs_pil = pytest.mark.skipif(PILImage is None, reason="Pillow (actorflow[image]) missing")
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch missing")


def _imgs(seed=0, shapes=((6, 9, 3), (8, 5, 3))):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, s, dtype=np.uint8) for s in shapes]


# ---- codecs ----------------------------------------------------------------------------------

@needs_pil
@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA", "P", "1", "LA"])
def test_png_decoder_matches_pillow(mode):
    rng = np.random.default_rng(1)
    base = np.cumsum(rng.integers(0, 9, (23, 31, 3)), axis=1).astype(np.uint8)  # smooth:
    im = PILImage.fromarray(base).convert(mode)                                # all filters
    buf = io.BytesIO()
    im.save(buf, "PNG")
    ref = np.asarray(im.convert("RGB"))
    np.testing.assert_array_equal(decode_image(buf.getvalue(), "RGB"), ref)
    np.testing.assert_array_equal(decode_image(buf.getvalue(), "BGR"), ref[..., ::-1])


@needs_pil
def test_jpeg_decoded_through_pillow():
    img = _imgs(2, ((16, 24, 3),))[0]
    buf = io.BytesIO()
    PILImage.fromarray(img).save(buf, "JPEG", quality=95)
    ref = np.asarray(PILImage.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    got = flow.nn.image.decode(color_space="RGB")(TensorBuffer([np.frombuffer(
        buf.getvalue(), np.uint8)]))
    np.testing.assert_array_equal(got[0], ref)


def test_decode_of_zero_padded_bytes_like_oneflows_test():
    """OneFlow's test_image_decode.py: files' bytes zero-padded into one int8 tensor, made a
    tensor buffer, decoded."""
    imgs = _imgs(9)
    files = [encode_png(a) for a in imgs]
    padded = np.zeros((2, max(len(f) for f in files)), np.int8)
    for k, f in enumerate(files):
        padded[k, :len(f)] = np.frombuffer(f, np.int8)
    buf = flow.tensor_to_tensor_buffer(flow.tensor(padded, dtype=flow.int8), instance_dims=1)
    out = flow.nn.image.decode(color_space="BGR")(buf).numpy()
    for a, o in zip(imgs, out):
        np.testing.assert_array_equal(o, a)
    f32 = flow.nn.image.decode(dtype=flow.float32, color_space="RGB")(buf)[0]
    assert f32.dtype == np.float32
    np.testing.assert_array_equal(f32, imgs[0][..., ::-1])


def test_non_png_without_pillow_names_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "PIL", None)
    with pytest.raises(ImportError, match=r"pip install actorflow\[image\]"):
        decode_image(b"\xff\xd8\xff\xe0 a JPEG header")


def test_png_roundtrip_16_bit_and_gray():
    a = np.arange(12 * 5, dtype=np.uint16).reshape(12, 5) * 1000
    np.testing.assert_array_equal(decode_image(encode_png(a))[..., 0], (a >> 8)[..., None]
                                  .repeat(3, axis=2)[..., 0])
    g = _imgs(3, ((4, 4, 1),))[0]
    np.testing.assert_array_equal(decode_image(encode_png(g), "GRAY"), g)
    with pytest.raises(ValueError, match="color_space"):
        decode_image(encode_png(g), "HSV")
    with pytest.raises(ValueError, match="empty"):
        decode_image(b"")


# ---- tensor buffers --------------------------------------------------------------------------

def test_tensor_buffer_conversions():
    x = np.random.default_rng(0).random((4, 3, 5, 6)).astype(np.float32)
    buf = flow.tensor_to_tensor_buffer(flow.tensor(x), instance_dims=2)
    assert buf.shape == (4, 3) and len(buf) == 12 and buf.instance_shapes[0] == (5, 6)
    np.testing.assert_array_equal(buf[4], x[1, 1])
    back = flow.tensor_buffer_to_tensor(buf, dtype=flow.float32, instance_shape=[5, 6])
    np.testing.assert_array_equal(back.numpy(), x)
    ts = flow.tensor_buffer_to_list_of_tensors(buf, [(5, 6)], [flow.float64])
    assert len(ts) == 12 and ts[0].dtype == flow.float64
    g = flow.gen_tensor_buffer((2,), [(1, 2), (3,)], [1.5, 2.0])
    assert g.instance_shapes == [(1, 2), (3,)] and g[1].tolist() == [2.0] * 3
    with pytest.raises(ValueError, match="instance_dims"):
        flow.tensor_to_tensor_buffer(flow.tensor(x), instance_dims=4)


# ---- flip, normalize, batch_align ------------------------------------------------------------

def test_flip_codes():
    imgs = _imgs()
    out = flow.nn.image.flip()(TensorBuffer(imgs), flow.tensor([1, 2], dtype=flow.int8))
    np.testing.assert_array_equal(out[0], imgs[0][:, ::-1])
    np.testing.assert_array_equal(out[1], imgs[1][::-1])
    both = flow.nn.image.flip()(imgs, 3)
    np.testing.assert_array_equal(both[1], imgs[1][::-1, ::-1])
    with pytest.raises(ValueError, match="0-3"):
        flow.nn.image.flip()(imgs, 4)


def test_normalize_per_channel():
    imgs = [a.astype(np.float32) for a in _imgs()]
    std, mean = (102.9801, 115.9465, 122.7717), (1.0, 2.0, 3.0)
    out = flow.nn.image.normalize(std, mean)(TensorBuffer(imgs)).numpy()
    for a, o in zip(imgs, out):
        np.testing.assert_allclose(o, (a - np.array(mean)) / np.array(std), rtol=1e-6)
    with pytest.raises(ValueError, match="1 or 3 values"):
        flow.nn.image.normalize((1.0, 2.0), (0.0,))(imgs)


def test_batch_align_pads_top_left():
    imgs = _imgs()
    out = flow.nn.image.batch_align(shape=(16, 16, 3), dtype=flow.float32, alignment=8)(
        TensorBuffer(imgs))
    want = np.zeros((2, 16, 16, 3), np.float32)
    for k, a in enumerate(imgs):
        want[k, :a.shape[0], :a.shape[1]] = a
    assert out.dtype == flow.float32
    np.testing.assert_array_equal(out.numpy(), want)
    with pytest.raises(ValueError, match="do not fit"):
        flow.nn.image.batch_align(shape=(8, 16, 3), dtype=flow.uint8, alignment=16)(imgs)
    with pytest.raises(ValueError, match="power of 2"):
        flow.nn.image.batch_align(shape=(8, 8, 3), dtype=flow.uint8, alignment=3)


# ---- resize ----------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("mode,tmode", [("bilinear", "bilinear"), ("bicubic", "bicubic"),
                                        ("nearest_neighbor", "nearest")])
@pytest.mark.parametrize("size", [(13, 7), (4, 3), (9, 9)])
def test_resize_matches_torch_interpolate(mode, tmode, size):
    img = np.random.default_rng(4).random((9, 11, 3))
    got = resize_image(img, size[0], size[1], mode)
    t = torch.from_numpy(img.transpose(2, 0, 1)[None].copy())
    kw = {} if tmode == "nearest" else {"align_corners": False}
    ref = torch.nn.functional.interpolate(t, size=size, mode=tmode, **kw)[0]
    np.testing.assert_allclose(got, ref.numpy().transpose(1, 2, 0), atol=1e-10)


@needs_torch
def test_resize_area_integer_factor_is_box_mean():
    img = np.random.default_rng(5).random((12, 8, 3))
    got = resize_image(img, 4, 2, "area")
    np.testing.assert_allclose(got, img.reshape(4, 3, 2, 4, 3).mean(axis=(1, 3)))
    # fractional: the weights of each output pixel sum to one
    np.testing.assert_allclose(resize_image(np.ones((7, 5, 1)), 3, 2, "area"), 1.0)


def test_resize_fixed_and_keep_aspect_ratio():
    imgs = [np.full((300, 400, 3), 7, np.uint8), np.full((50, 20, 3), 200, np.uint8)]
    out, scale, none = flow.nn.image.Resize(target_size=(32, 24), dtype=flow.float32)(
        TensorBuffer(imgs))
    assert none is None and out.shape == (2, 24, 32, 3) and out.dtype == flow.float32
    np.testing.assert_allclose(out.numpy()[0], 7.0)
    np.testing.assert_allclose(scale.numpy(), [[32 / 400, 24 / 300], [32 / 20, 24 / 50]])
    res, size, scale = flow.nn.image.Resize(target_size=256, keep_aspect_ratio=True,
                                            resize_side="shorter")(imgs)
    assert res.instance_shapes == [(256, 341, 3), (640, 256, 3)]
    np.testing.assert_array_equal(size.numpy(), [[341, 256], [256, 640]])
    assert res[1].dtype == np.uint8 and (res[1] == 200).all()
    res, size, _ = flow.nn.image.Resize(target_size=256, keep_aspect_ratio=True,
                                        max_size=500)(imgs)
    assert size.numpy().tolist() == [[341, 256], [200, 500]]
    res, size, _ = flow.nn.image.Resize(target_size=100, keep_aspect_ratio=True,
                                        resize_side="longer", min_size=60)(imgs)
    assert size.numpy().tolist() == [[100, 75], [60, 150]]
    with pytest.raises(ValueError, match="channels"):
        flow.nn.image.Resize(target_size=(4, 4), channels=1)(imgs)
    with pytest.raises(ValueError, match="interpolation_type"):
        flow.nn.image.Resize(target_size=(4, 4), interpolation_type="lanczos")


def test_resize_uint8_rounds_and_saturates():
    img = np.array([[[0], [255]], [[255], [0]]], np.uint8)
    out = resize_image(img, 3, 3, "bicubic")
    ref = resize_image(img.astype(np.float64), 3, 3, "bicubic")
    np.testing.assert_array_equal(out, np.clip(np.rint(ref), 0, 255))


# ---- crop / mirror / normalize ---------------------------------------------------------------

def _cmn_ref(x, mirror, h, w, py, px, mean, std, layout):
    n, H, W, C = x.shape
    y0, x0 = int((H - h) * np.float32(py)), int((W - w) * np.float32(px))
    win = x[:, y0:y0 + h, x0:x0 + w].astype(np.float32)
    if mirror is not None:
        win = np.where(mirror[:, None, None, None] != 0, win[:, :, ::-1], win)
    out = (win - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return out.transpose(0, 3, 1, 2) if layout == "NCHW" else out


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_crop_mirror_normalize_matches_numpy(layout):
    x = np.random.default_rng(6).integers(0, 256, (3, 10, 12, 3), dtype=np.uint8)
    mirror = np.array([1, 0, 1], np.int8)
    mean, std = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]
    m = flow.nn.CropMirrorNormalize(output_layout=layout, crop_h=6, crop_w=5, crop_pos_y=0.3,
                                    crop_pos_x=0.9, mean=mean, std=std)
    got = m(flow.tensor(x), flow.tensor(mirror)).numpy()
    np.testing.assert_allclose(got, _cmn_ref(x, mirror, 6, 5, 0.3, 0.9, mean, std, layout),
                               rtol=1e-6, atol=1e-6)
    full = flow.nn.CropMirrorNormalize(output_layout=layout, output_dtype=flow.float16)(
        flow.tensor(x))
    assert full.dtype == flow.float16
    np.testing.assert_allclose(full.numpy(), _cmn_ref(x, None, 10, 12, .5, .5, [0.], [1.],
                                                      layout), rtol=1e-3)


def test_crop_mirror_normalize_gray_tensorbuffer_and_errors():
    imgs = [np.random.default_rng(k).integers(0, 256, (8 + k, 9, 1), dtype=np.uint8)
            for k in range(2)]
    m = flow.nn.CropMirrorNormalize(color_space="GRAY", crop_h=4, crop_w=4, mean=[10.0],
                                    std=[2.0])
    got = m(TensorBuffer(imgs), flow.tensor([0, 1], dtype=flow.int8)).numpy()
    for k, a in enumerate(imgs):
        ref = _cmn_ref(a[None], np.array([k]), 4, 4, .5, .5, [10.], [2.], "NCHW")
        np.testing.assert_allclose(got[k:k + 1], ref, rtol=1e-6)
    with pytest.raises(ValueError, match="one size"):
        flow.nn.CropMirrorNormalize(color_space="GRAY")(TensorBuffer(imgs))
    x = flow.tensor(np.zeros((2, 4, 4, 3), np.uint8))
    with pytest.raises(RuntimeError, match="must fit"):
        flow.nn.CropMirrorNormalize(crop_h=5, crop_w=2)(x).numpy()
    with pytest.raises(RuntimeError, match="1 or 3 values"):
        flow.nn.CropMirrorNormalize(mean=[1.0, 2.0])(x).numpy()
    with pytest.raises(RuntimeError, match="needs 1 channels"):
        flow.nn.CropMirrorNormalize(color_space="GRAY")(x).numpy()
    with pytest.raises(TypeError, match="uint8"):
        flow.nn.CropMirrorNormalize()(flow.zeros(2, 4, 4, 3))


def test_crop_mirror_normalize_in_graph_equals_eager():
    x = flow.tensor(np.random.default_rng(7).integers(0, 256, (4, 7, 7, 3), dtype=np.uint8))
    flags = flow.tensor([0, 1, 1, 0], dtype=flow.int8)
    m = flow.nn.CropMirrorNormalize(crop_h=5, crop_w=3, mean=[1., 2., 3.], std=[4., 5., 6.])

    class G(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = m

        def build(self, a, b):
            return self.m(a, b)

    np.testing.assert_array_equal(G()(x, flags).numpy(), m(x, flags).numpy())


def test_crop_mirror_normalize_on_a_global_batch():
    P = flow.placement("cpu", ranks=[0])
    x = np.random.default_rng(8).integers(0, 256, (4, 6, 6, 3), dtype=np.uint8)
    flags = np.array([0, 1, 0, 1], np.int8)
    m = flow.nn.CropMirrorNormalize(crop_h=4, crop_w=4, mean=[3.0], std=[2.0])
    y = m(flow.tensor(x).to_global(P, flow.sbp.split(0)),
          flow.tensor(flags).to_global(P, flow.sbp.split(0)))
    assert y.sbp == (flow.sbp.split(0),)
    np.testing.assert_array_equal(y.to_local().numpy(),
                                  m(flow.tensor(x), flow.tensor(flags)).numpy())

"""``actorflow.nn.image``: OneFlow's image ops over batches of images (``TensorBuffer`` or
lists of (H, W, C) arrays), as modules: ``Resize``, ``batch_align``, ``decode``, ``flip``,
``normalize``."""
from actorflow.nn.data.image_modules import ImageBatchAlign as batch_align  # noqa: F401
from actorflow.nn.data.image_modules import ImageDecode as decode  # noqa: F401
from actorflow.nn.data.image_modules import ImageFlip as flip  # noqa: F401
from actorflow.nn.data.image_modules import ImageNormalize as normalize  # noqa: F401
from actorflow.nn.data.image_modules import ImageResize as Resize  # noqa: F401

__all__ = ["Resize", "batch_align", "decode", "flip", "normalize"]

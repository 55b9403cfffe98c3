"""``actorflow.nn``: Module, Parameter, the layers, ``init`` and ``functional``."""
from actorflow.nn import functional, init  # noqa: F401
from actorflow.nn.module import Module, RemovableHandle  # noqa: F401
from actorflow.nn.modules import *  # noqa: F401,F403
from actorflow.nn.modules import __dict__ as _modules_dict
from actorflow.nn.parameter import Parameter  # noqa: F401
from actorflow.nn import utils  # noqa: F401
from actorflow.nn import image  # noqa: F401,E402  (OneFlow's nn.image data ops)
from actorflow.nn.data import (  # noqa: F401,E402  (OFRecord, COCO, CropMirrorNormalize)
    COCOReader, CropMirrorNormalize, OFRecordBytesDecoder, OFRecordImageDecoder,
    OFRecordImageDecoderRandomCrop, OFRecordRawDecoder, OFRecordReader,
)
from actorflow.nn.data import OFRecordRawDecoder as OfrecordRawDecoder  # noqa: F401,E402
from actorflow.nn.data import OFRecordReader as OfrecordReader  # noqa: F401,E402
from actorflow.nn import parallel  # noqa: F401,E402
from actorflow.nn import optimizer  # noqa: F401,E402

__all__ = ["Module", "Parameter", "RemovableHandle", "functional", "init", "utils"] + sorted(
    n for n, v in _modules_dict.items() if isinstance(v, type) and issubclass(v, Module))
from actorflow.nn import graph  # noqa: F401,E402
from actorflow.nn.graph import Graph  # noqa: F401,E402

"""OneFlow's data-pipeline modules of ``nn``: OFRecord files, their reader and decoders, the
COCO reader, ``TensorBuffer`` batches and the image ops over them (``nn.image``)."""
from actorflow.nn.data.coco import COCOReader  # noqa: F401
from actorflow.nn.data.image_modules import (  # noqa: F401
    CropMirrorNormalize, ImageBatchAlign, ImageDecode, ImageFlip, ImageNormalize, ImageResize,
)
from actorflow.nn.data.ofrecord import (  # noqa: F401
    OFRecordBatch, OFRecordBytesDecoder, OFRecordImageDecoder, OFRecordImageDecoderRandomCrop,
    OFRecordRawDecoder, OFRecordReader, read_ofrecord, write_ofrecord,
)
from actorflow.nn.data.protowire import Feature  # noqa: F401
from actorflow.nn.data.tensor_buffer import (  # noqa: F401
    TensorBuffer, gen_tensor_buffer, tensor_buffer_to_list_of_tensors, tensor_buffer_to_tensor,
    tensor_to_tensor_buffer,
)

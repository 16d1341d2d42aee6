"""TFRecord shards of serialized tensors read without TensorFlow: the record framing and the `Example` message from
the `tfrecord` package, the `TensorProto` message from `tensorboardX` (a copy of TensorFlow's tensor.proto)."""
from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from google.protobuf.message import DecodeError

from ...errors import GenbenchError

# TensorFlow DataType numbers (tensorflow/core/framework/types.proto) -> numpy dtype and the TensorProto field that
# holds the values when `tensor_content` is empty.
_DTYPES: dict[int, tuple[str, str]] = {
    1: ("<f4", "float_val"), 2: ("<f8", "double_val"), 3: ("<i4", "int_val"), 4: ("u1", "int_val"),
    5: ("<i2", "int_val"), 6: ("i1", "int_val"), 9: ("<i8", "int64_val"), 10: ("?", "bool_val"),
    17: ("<u2", "int_val"), 19: ("<f2", "half_val"), 22: ("<u4", "uint32_val"), 23: ("<u8", "uint64_val"),
}
_HEADER = 12  # length (8 bytes) + its masked crc32c (4 bytes) before each record's data
_FOOTER = 4  # the data's masked crc32c
MAX_VALUES = 1 << 28  # values in one example's tensor at most (1 GiB of float32): more is a damaged shape


def tensor_to_numpy(serialized: bytes) -> np.ndarray:
    """A serialized TensorFlow TensorProto (what tf.io.serialize_tensor writes) as a numpy array."""
    from tensorboardX.proto.tensor_pb2 import TensorProto

    t = TensorProto()
    t.ParseFromString(serialized)
    if t.dtype not in _DTYPES:
        raise ValueError(f"tensor dtype number {t.dtype} is not supported (supported: {sorted(_DTYPES)})")
    dtype, field = _DTYPES[t.dtype]
    shape = tuple(d.size for d in t.tensor_shape.dim)
    count = int(np.prod(shape, dtype=object))  # a Python int: a damaged shape must not overflow
    if any(n < 0 for n in shape) or count > MAX_VALUES:
        raise ValueError(f"its tensor declares shape {list(shape)}, no array of at most {MAX_VALUES} values")
    if t.tensor_content:
        values = np.frombuffer(t.tensor_content, dtype=dtype)
    else:
        raw = getattr(t, field)
        values = (np.frombuffer(np.asarray(raw, dtype="<u2").tobytes(), dtype=dtype) if field == "half_val"
                  else np.asarray(raw, dtype=dtype))
        if values.size == 1 and count > 1:  # TensorFlow repeats a single value over the shape
            values = np.full(int(np.prod(shape)), values[0], dtype=dtype)
    if values.size != count:
        raise ValueError(f"its tensor declares shape {list(shape)} ({count} values) and holds {values.size} values")
    return values.reshape(shape).astype(dtype.lstrip("<"), copy=False)


def records(path: Path) -> Iterator[tuple[int, bytes]]:
    """(byte offset, data) of each record of one shard. A record cut off, or whose length or data fail their checksum
    (a damaged length would have tfrecord allocate it; damaged data would import as wrong inputs) is a GenbenchError
    naming the shard and the offset where that record starts."""
    from tfrecord.reader import tfrecord_iterator
    from tfrecord.writer import TFRecordWriter

    offset, size = 0, path.stat().st_size

    def damaged(what: str) -> GenbenchError:
        return GenbenchError(f"TFRecord shard {path} is truncated or damaged: the record at byte offset {offset} "
                             f"{what} (the file has {size} bytes); copy or extract the task again")

    it = tfrecord_iterator(str(path))
    with path.open("rb") as f:
        while True:
            f.seek(offset)
            head = f.read(_HEADER)
            if len(head) == _HEADER:
                length = struct.unpack("<Q", head[:8])[0]
                if TFRecordWriter.masked_crc(head[:8]) != head[8:]:
                    raise damaged(f"has a length field ({length}) that fails its checksum")
                if length > size - offset - _HEADER - _FOOTER:
                    raise damaged(f"is cut off (its header declares {length} bytes of data)")
            try:
                data = next(it)
            except StopIteration:
                return
            except RuntimeError as e:  # tfrecord's "Failed to read the record ..." on a short read
                raise damaged(f"is cut off ({e})") from None
            f.seek(offset + _HEADER + len(data))
            if f.read(_FOOTER) != TFRecordWriter.masked_crc(bytes(data)):
                raise damaged("holds data that fail their checksum")
            yield offset, bytes(data)
            offset += _HEADER + len(data) + _FOOTER


def read_examples(shards: Sequence[Path], features: Sequence[str]) -> dict[str, np.ndarray]:
    """The named tensor features of every Example in `shards` (in order), each stacked into one array."""
    from tfrecord.example_pb2 import Example

    out: dict[str, list[np.ndarray]] = {f: [] for f in features}
    for path in shards:
        for offset, data in records(path):
            ex = Example()
            try:
                ex.ParseFromString(data)
                for name in features:
                    if name not in ex.features.feature:
                        raise ValueError(f"it has no feature {name!r} (it has {sorted(ex.features.feature)})")
                    out[name].append(tensor_to_numpy(ex.features.feature[name].bytes_list.value[0]))
            except (DecodeError, ValueError, IndexError) as e:
                raise GenbenchError(f"TFRecord shard {path}: the record at byte offset {offset} is not an Example of "
                                    f"serialized tensors {list(features)}: {e}") from None
    for name, arrays in out.items():
        shapes = {a.shape for a in arrays}
        if len(shapes) > 1:
            raise GenbenchError(f"TFRecord shards {[str(p) for p in shards]}: feature {name!r} has several shapes "
                                f"{sorted(shapes)[:4]}; expected one shape for every example")
    return {name: np.stack(arrays) if arrays else np.zeros((0,)) for name, arrays in out.items()}

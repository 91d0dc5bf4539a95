"""The private descriptor pool the generated modules register in (see proto/generate.py)."""

from __future__ import annotations

from google.protobuf import descriptor_pool, duration_pb2, timestamp_pb2

POOL = descriptor_pool.DescriptorPool()
for _module in (timestamp_pb2, duration_pb2):
    POOL.AddSerializedFile(_module.DESCRIPTOR.serialized_pb)

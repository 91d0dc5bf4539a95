"""The official 5.x Python client's classes, imported from their own modules.

`rocketmq-python-client` shares the top-level `rocketmq` package with the C++ client
(`rocketmq==0.4.4`, the compatibility tests'), whose empty `rocketmq/__init__.py` replaces the
5.x one when it is installed last; the `rocketmq.v5` modules are there either way.
"""

from __future__ import annotations

from rocketmq.grpc_protocol import TransactionResolution
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer, SimpleConsumer
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer, TransactionChecker
from rocketmq.v5.util.signature import Signature

__all__ = ["ClientConfiguration", "ConsumeResult", "Credentials", "FilterExpression", "Message",
           "MessageListener", "Producer", "PushConsumer", "Signature", "SimpleConsumer",
           "TransactionChecker", "TransactionResolution"]

"""The dispatch table of ``txnspec serve``: every served API's handler by Kafka's API name, gathered from the
modules that answer them as Kafka's components do (cluster metadata, transactions, the partition leader, groups).
"""

from __future__ import annotations

from txnspec.serve import broker, groups, leader, transactions
from txnspec.serve.broker import Handler

HANDLERS: dict[str, Handler] = {**broker.HANDLERS, **transactions.HANDLERS, **leader.HANDLERS, **groups.HANDLERS}

__all__ = ["HANDLERS"]

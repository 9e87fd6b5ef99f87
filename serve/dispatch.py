"""The dispatch table of ``txnspec serve``: every served API's handler by Kafka's API name, gathered from the
modules that answer them as Kafka's components do (cluster metadata, topic and config admin, transactions, the
partition leader, groups and their admin, transaction admin).
"""

from __future__ import annotations

from txnspec.serve import admin, consumer_group, group_admin, groups, leader, metadata, transactions, txn_admin
from txnspec.serve.broker import Handler

HANDLERS: dict[str, Handler] = {**metadata.HANDLERS, **admin.HANDLERS, **transactions.HANDLERS, **leader.HANDLERS,
                                **groups.HANDLERS, **group_admin.HANDLERS, **txn_admin.HANDLERS,
                                **consumer_group.HANDLERS}

__all__ = ["HANDLERS"]

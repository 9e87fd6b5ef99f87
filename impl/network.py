"""The explicit network of the oracle cluster: messages in flight, delivered oldest first unless a test holds,
drops, loses or duplicates them.

Kafka sources: none; this stands for the sockets between Kafka's clients (``NetworkClient``) and the broker,
and for the coordinator's ``TransactionMarkerChannelManager`` connections to the partition leaders, so that a
test decides what arrives and when. A lost request or response is what ``NetworkClient`` reports as a
disconnect; a duplicate is a request sent again.

Assumed: one broker, so a message names only its client (``"coordinator"`` for markers). Left out: latency,
connection state, per-connection ordering beyond the explicit order of :attr:`Network.messages`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from txnspec.impl.messages import Request, Response
from txnspec.impl.txn_markers import TxnMarker


@dataclass
class Message:
    """One message on the network: a request to the broker, or the broker's response to a client."""

    id: int
    client: str
    request: Request | TxnMarker
    response: Response | None = None

    @property
    def kind(self) -> str:
        return "response" if self.response is not None else "request"

    @property
    def name(self) -> str:
        return type(self.request).__name__

    def __repr__(self) -> str:
        what = self.response.error.name if self.response is not None else "request"
        return f"<#{self.id} {self.client} {self.name} {what}>"


MessageFilter = Callable[[Message], bool]


@dataclass
class Network:
    """Messages in flight, delivered oldest first unless held; faults are explicit calls."""

    messages: list[Message] = field(default_factory=list)
    held: list[MessageFilter] = field(default_factory=list)
    _drop: list[MessageFilter] = field(default_factory=list)
    _dup: list[MessageFilter] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    log: list[str] = field(default_factory=list)

    def send(self, client: str, request: Request | TxnMarker, response: Response | None = None) -> Message:
        m = Message(next(self._ids), client, request, response)
        self.messages.append(m)
        return m

    def hold(self, match: MessageFilter) -> None:
        """Keep matching messages in flight until :meth:`release` (e.g. delay an EndTxn or a marker)."""
        self.held.append(match)

    def release(self, match: MessageFilter | None = None) -> None:
        self.held = [] if match is None else [h for h in self.held if h is not match]

    def drop_next(self, match: MessageFilter) -> None:
        """Lose the next matching message (a lost request or response: the client sees a disconnect)."""
        self._drop.append(match)

    def lose(self, m: Message) -> None:
        """Lose ``m`` now; its sender finds out only when its request times out (:meth:`Cluster.time_out`)."""
        self.messages.remove(m)
        self.log.append(f"lost {m!r}")

    def duplicate_next(self, match: MessageFilter) -> None:
        """Deliver the next matching message twice (a retransmitted request)."""
        self._dup.append(match)

    def pending(self, match: MessageFilter | None = None) -> list[Message]:
        return [m for m in self.messages if match is None or match(m)]

    def is_held(self, m: Message) -> bool:
        return any(h(m) for h in self.held)

    def next_deliverable(self) -> Message | None:
        for m in self.messages:
            if not self.is_held(m):
                return m
        return None


def named(name: str, client: str | None = None) -> MessageFilter:
    """A message filter: requests/responses of RPC ``name`` (e.g. ``"EndTxn"``), optionally of one client."""
    return lambda m: m.name == name and (client is None or m.client == client)


__all__ = ["Message", "MessageFilter", "Network", "named"]

"""Faults as data: a seeded schedule of what happens to the cluster and the clients, and its injection.

What it models
    A :class:`Fault` is when (seconds after the workload started), what (:data:`KINDS`) and whom: a node
    chosen *by role* at injection time (the transaction coordinator of a workload's ``transactional.id``,
    the leader of an output partition, or the active KRaft controller), or a client (a producer index).

    * ``kill``: SIGKILL of the node's JVM, restart on the same data after :attr:`Fault.duration` seconds;
    * ``pause``: SIGSTOP, SIGCONT after :attr:`Fault.duration` seconds (longer than the 3 s broker session
      and the clients' request timeout, so the node is fenced and requests to it time out);
    * ``client``: kill -9 of a transactional producer process mid-transaction (a new instance with the same
      ``transactional.id`` takes over), or a zombie: a second instance started while the first still runs;
    * ``network``: through the TCP proxy of :mod:`.proxy` in front of every node, the node is cut off
      (every connection to it closed, new ones refused) or every byte to and from it delayed by
      :data:`DELAY_MS`, for :attr:`Fault.duration` seconds (opt in: the run then puts the proxy in place);
    * ``member``: a consume-transform-produce process stopped (SIGSTOP) past its consumer group session
      timeout, so the group evicts it and rebalances, then resumed (SIGCONT): a zombie member whose next
      ``send_offsets_to_transaction`` carries a stale generation (KIP-447 must refuse it);
    * ``timeout``: a producer leaves its open transaction idle past ``transaction.timeout.ms`` before it
      tries to commit (the coordinator must abort it; the commit must fail).

    :func:`schedule` draws the faults from a seed: kinds in a shuffled round-robin over those asked for,
    about :data:`SPACING` seconds apart (jittered), node faults short enough that at most one node is down
    at once (every node is a voter: two down lose the quorum). The schedule is printed and saved with the
    run (``faults.json``); the injector records what it actually did as ``nemesis`` events in the history.

Assumes
    The roles are found through the brokers: ``FindCoordinator`` (key type 1: transaction), ``Metadata``
    (partition leaders) and ``DescribeQuorum`` (the active controller, forwarded by a broker).

Leaves out
    A Kafka-aware proxy (dropping one request type) and a two-way isolation, disk faults, clock skew.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

FaultKind = Literal["kill", "pause", "network", "client", "timeout", "member"]
KINDS: tuple[FaultKind, ...] = ("kill", "pause", "network", "client", "timeout", "member")
DEFAULT_KINDS: tuple[FaultKind, ...] = ("kill", "pause", "client", "timeout")  # network, member: opt in
MEMBER_FOR = (13.0, 15.0)  # a stopped consumer-group member: past its 10 s session timeout, so it is evicted
NETWORK_ACTIONS = ("cut", "delay")
NETWORK_FOR = (4.0, 6.0)
DELAY_MS = 400
NODE_ROLES = ("coordinator", "leader", "controller")
CLIENT_ACTIONS = ("kill", "zombie")
SPACING = 10.0
FIRST_AT = 6.0
KILL_DOWN = (2.0, 4.0)   # seconds a killed node stays down before its restart
PAUSE_FOR = (4.0, 6.0)   # seconds a paused node stays stopped (> broker.session.timeout.ms = 3 s)


@dataclass(frozen=True)
class Fault:
    at: float
    kind: FaultKind
    target: str  # a node role (coordinator, leader, controller) or "producer-N"
    action: str = ""  # client faults: kill or zombie
    duration: float = 0.0

    def describe(self) -> str:
        what = f"{self.kind} {self.target}" + (f" ({self.action})" if self.action else "")
        return f"t+{self.at:5.1f}s {what}" + (f" for {self.duration:.1f}s" if self.duration else "")


class ScheduleError(ValueError):
    """A fault list or duration that cannot be scheduled; the message says which."""


def parse_kinds(text: str) -> tuple[FaultKind, ...]:
    """``kill,pause,client,timeout`` (or ``none``) into fault kinds; an unknown name is a clear error."""
    if text.strip() in ("", "none"):
        return ()
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ScheduleError(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    return tuple(dict.fromkeys(kinds))  # type: ignore[arg-type]


def schedule(seed: int, seconds: float, kinds: tuple[FaultKind, ...], producers: int, members: int = 2
             ) -> list[Fault]:
    """Faults for a workload of ``seconds`` with ``producers`` transactional producers and ``members``
    consume-transform-produce members, drawn from ``seed``.

    The last fault starts at least :data:`SPACING` seconds before the end so that it heals in the run."""
    if seconds <= 0:
        raise ScheduleError(f"--seconds {seconds}: the workload must run for a positive time")
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = FIRST_AT + rng.uniform(0, 2)
    order: list[FaultKind] = []
    roles: list[str] = []
    while kinds and at <= seconds - SPACING * 0.8:
        if not roles:  # node faults go round the roles too: coordinator, leader and controller all get hit
            roles = list(NODE_ROLES)
            rng.shuffle(roles)
        if not order:
            order = list(kinds)
            rng.shuffle(order)
        kind = order.pop()
        if kind == "kill":
            fault = Fault(round(at, 1), kind, roles.pop(), duration=round(rng.uniform(*KILL_DOWN), 1))
        elif kind == "pause":
            fault = Fault(round(at, 1), kind, roles.pop(), duration=round(rng.uniform(*PAUSE_FOR), 1))
        elif kind == "network":
            fault = Fault(round(at, 1), kind, roles.pop(), rng.choice(NETWORK_ACTIONS),
                          duration=round(rng.uniform(*NETWORK_FOR), 1))
        elif kind == "member":
            fault = Fault(round(at, 1), kind, f"ctp-{rng.randrange(members)}", "stop",
                          duration=round(rng.uniform(*MEMBER_FOR), 1))
        elif kind == "client":
            fault = Fault(round(at, 1), kind, f"producer-{rng.randrange(producers)}", rng.choice(CLIENT_ACTIONS))
        else:
            fault = Fault(round(at, 1), kind, f"producer-{rng.randrange(producers)}")
        faults.append(fault)
        at += SPACING + rng.uniform(-1.5, 1.5)
    return faults


def save(faults: list[Fault], path: Path, seed: int) -> None:
    path.write_text(json.dumps({"seed": seed, "faults": [asdict(f) for f in faults]}, indent=1) + "\n")


def load(path: Path) -> list[Fault]:
    data = json.loads(path.read_text())
    return [Fault(**f) for f in data["faults"]]


# --- finding a node by its role ----------------------------------------------------------------------

def find_role(addresses: list[tuple[int, str]], role: str, transactional_id: str, topic: str) -> tuple[int | None, str]:
    """The node id holding ``role`` now, asked of the first node in ``addresses`` (id, host:port) that
    answers; (None, why) when none could say."""
    from txnspec.audit.connection import BrokerConnection, WireError
    from txnspec.audit.report import BrokerUnavailable

    last = "no node answered"
    for _, address in addresses:
        host, port = address.rsplit(":", 1)
        try:
            conn = BrokerConnection(host, int(port), timeout=2.0)
        except (BrokerUnavailable, OSError) as exc:
            last = str(exc)
            continue
        try:
            node = _ask(conn, role, transactional_id, topic)
            if node is not None and node >= 0:
                return node, f"{role} found by asking {address}"
            last = f"{address} named no {role}"
        except (WireError, OSError) as exc:
            last = f"{address}: {exc}"
        finally:
            conn.close()
    return None, last


def _ask(conn: Any, role: str, transactional_id: str, topic: str) -> int | None:
    if role == "coordinator":
        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

        response = conn.call(FindCoordinatorRequest, FindCoordinatorResponse, 1, key=transactional_id, key_type=1)
        return int(response.node_id) if response.error_code == 0 else None
    if role == "leader":
        from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

        response = conn.call(MetadataRequest, MetadataResponse, 1, topics=[MetadataRequest.MetadataRequestTopic(
            name=topic)] if hasattr(MetadataRequest, "MetadataRequestTopic") else [topic])
        for t in response.topics:
            for p in t.partitions:
                if p.partition_index == 0:
                    return int(p.leader_id)
        return None
    if role == "controller":
        from kafka.protocol.admin.cluster import DescribeQuorumRequest, DescribeQuorumResponse

        topic_data = DescribeQuorumRequest.TopicData(topic_name="__cluster_metadata", partitions=[
            DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])
        response = conn.call(DescribeQuorumRequest, DescribeQuorumResponse, 0, topics=[topic_data])
        for t in response.topics:
            for p in t.partitions:
                return int(p.leader_id)
        return None
    raise ValueError(f"unknown role {role!r}; known: {', '.join(NODE_ROLES)}")

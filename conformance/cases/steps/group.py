"""Behaviour cases of the group coordinator's (``OffsetMetadataManager``, classic groups, KIP-848's consumer groups):
offset commits, transactional offset commits, markers, rebalances, consumer-group heartbeats and offset fetches.

The rules every component's cases share are in :mod:`txnspec.conformance.cases.steps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from txnspec.conformance.cases.format import CaseInputError
from txnspec.conformance.cases.values import (
    RESULTS,
    Observation,
    error_name,
    get_bool,
    get_choice,
    get_int,
    get_str,
    get_str_list,
    named_choice,
)


def _offsets(obj: Mapping[str, Any], key: str) -> tuple[tuple[str, int], ...]:
    offsets = obj.get(key)
    if not isinstance(offsets, Mapping) or not all(isinstance(k, str) and isinstance(v, int)
                                                   and not isinstance(v, bool) and v >= 0 for k, v in offsets.items()):
        raise CaseInputError(f"{key!r} must be an object of partition -> non-negative offset, got {offsets!r}")
    return tuple(offsets.items())


def _members(obj: Mapping[str, Any], key: str) -> tuple[tuple[str, str | None], ...]:
    members = obj.get(key, {})
    if not isinstance(members, Mapping) or not all(
            isinstance(k, str) and k and (v is None or isinstance(v, str)) for k, v in members.items()):
        raise CaseInputError(f"{key!r} must be an object of member id -> group instance id (or null), got {members!r}")
    instances = [v for v in members.values() if v is not None]
    if len(set(instances)) != len(instances):
        raise CaseInputError(f"{key!r}: a group instance id belongs to one member only")
    return tuple(sorted(members.items()))


@dataclass(frozen=True)
class GroupMembersCase:
    """A classic group as a case gives it (a txnspec extension): Stable at ``generation_id`` with ``members``
    (member id, group instance id or None), Empty when it has none."""

    group_id: str
    generation_id: int
    members: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class GroupGiven:
    offsets: tuple[tuple[str, tuple[tuple[str, int], ...]], ...]  # group -> committed offsets, in given order
    groups: tuple[GroupMembersCase, ...]

    @staticmethod
    def parse(given: Mapping[str, Any]) -> GroupGiven:
        offsets = given.get("offsets", {})
        if not isinstance(offsets, Mapping):
            raise CaseInputError("'offsets' must be an object of group id -> {partition: offset}")
        groups = given.get("groups", {})
        if not isinstance(groups, Mapping) or not all(isinstance(g, Mapping) for g in groups.values()):
            raise CaseInputError("'groups' must be an object of group id -> {generation_id, members}")
        return GroupGiven(tuple((g, _offsets(offsets, g)) for g in offsets),
                          tuple(GroupMembersCase(g, get_int(v, "generation_id", minimum=0), _members(v, "members"))
                                for g, v in sorted(groups.items())))


@dataclass(frozen=True)
class OffsetCommitStep:
    """A plain ``OffsetCommit``; the member fields (a txnspec extension, KIP-447's checks of classic groups)
    default to a consumer outside group management."""

    group_id: str
    offsets: tuple[tuple[str, int], ...]
    member_id: str = ""
    generation_id: int = -1
    group_instance_id: str | None = None
    version: int | None = None  # the OffsetCommit version (None: the newest, 10)


@dataclass(frozen=True)
class CommitVerification:
    """A ``TxnOffsetCommit``'s ``verification`` (a txnspec extension, FORMAT.md): the group coordinator's leader
    verified the offsets partition with the transaction coordinator (KIP-890), which answered
    ``coordinator_error``; ``version`` is the TxnOffsetCommit version the client sent."""

    coordinator_error: str  # Kafka's error name; NONE: verified
    version: int = 5


@dataclass(frozen=True)
class TxnOffsetCommitStep:
    """A ``TxnOffsetCommit`` as it reaches the group coordinator; the member fields default to a producer
    outside group management (the generation fields are a txnspec extension, KIP-447)."""

    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[tuple[str, int], ...]
    member_id: str = ""
    generation_id: int = -1
    group_instance_id: str | None = None
    verification: CommitVerification | None = None
    version: int | None = None  # the TxnOffsetCommit version for a consumer group's checks (None: the newest, 6)


def _commit_verification(when: Mapping[str, Any]) -> CommitVerification | None:
    verification = when.get("verification")
    if verification is None:
        return None
    if not isinstance(verification, Mapping):
        raise CaseInputError("'verification' must be an object")
    return CommitVerification(error_name({"error": verification.get("coordinator_error")}),
                              get_int(verification, "txn_offset_commit_version", 5, minimum=0))


@dataclass(frozen=True)
class GroupMarkerStep:
    producer_id: int
    producer_epoch: int
    result: str  # "COMMIT" or "ABORT"


@dataclass(frozen=True)
class RebalanceStep:
    """A rebalance of the group completed (a txnspec extension): the next generation with exactly ``members``."""

    group_id: str
    members: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class OffsetFetchStep:
    group_id: str
    partitions: tuple[str, ...]
    require_stable: bool


@dataclass(frozen=True)
class HeartbeatStep:
    """A ``ConsumerGroupHeartbeat`` (KIP-848; one topic's partitions): ``partitions`` the partitions of the
    member's subscription as the metadata has them (None: unchanged), ``owned`` the partitions it still owns
    (None: not sent)."""

    group_id: str
    member_id: str
    member_epoch: int
    partitions: tuple[str, ...] | None
    owned: tuple[str, ...] | None


@dataclass(frozen=True)
class FenceMemberStep:
    """A consumer group's member fenced by the coordinator (its session timed out: ``consumerGroupFenceMember``)."""

    group_id: str
    member_id: str


GroupStep = (OffsetCommitStep | TxnOffsetCommitStep | GroupMarkerStep | RebalanceStep | OffsetFetchStep
             | HeartbeatStep | FenceMemberStep)


def _optional_list(when: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    return None if when.get(key) is None else tuple(get_str_list(when, key))


def _version(when: Mapping[str, Any]) -> int | None:
    return None if when.get("version") is None else get_int(when, "version", minimum=0)


def parse_group_step(when: Mapping[str, Any]) -> GroupStep:
    if "request" in when:
        request = named_choice(when, "request", ("OffsetCommit", "TxnOffsetCommit", "ConsumerGroupHeartbeat"),
                               "group request")
        group_id = get_str(when, "group_id")
        if not group_id:
            raise CaseInputError("'group_id' must not be empty")
        if request == "ConsumerGroupHeartbeat":
            member_id = get_str(when, "member_id")
            if not member_id:
                raise CaseInputError("a ConsumerGroupHeartbeat needs a 'member_id' (KIP-1082: the client's)")
            return HeartbeatStep(group_id, member_id, get_int(when, "member_epoch", minimum=-2),
                                 _optional_list(when, "partitions"), _optional_list(when, "owned"))
        if request == "OffsetCommit":
            return OffsetCommitStep(group_id, _offsets(when, "offsets"), get_str(when, "member_id", ""),
                                    get_int(when, "generation_id", -1, minimum=-1),
                                    get_str(when, "group_instance_id", None, nullable=True), _version(when))
        return TxnOffsetCommitStep(group_id, get_int(when, "producer_id", minimum=0),
                                   get_int(when, "producer_epoch", minimum=0), _offsets(when, "offsets"),
                                   get_str(when, "member_id", ""), get_int(when, "generation_id", -1, minimum=-1),
                                   get_str(when, "group_instance_id", None, nullable=True),
                                   _commit_verification(when), _version(when))
    if "append" in when:
        get_choice(when, "append", ("marker",))
        return GroupMarkerStep(get_int(when, "producer_id", minimum=0), get_int(when, "producer_epoch", minimum=0),
                               get_choice(when, "result", RESULTS))
    if "event" in when:
        event = named_choice(when, "event", ("Rebalance", "FenceMember"), "group event")
        if event == "FenceMember":
            return FenceMemberStep(get_str(when, "group_id"), get_str(when, "member_id"))
        return RebalanceStep(get_str(when, "group_id"), _members(when, "members"))
    if "read" in when:
        named_choice(when, "read", ("OffsetFetch",), "group read")
        partitions = get_str_list(when, "partitions")
        return OffsetFetchStep(get_str(when, "group_id"), tuple(partitions), get_bool(when, "require_stable", False))
    raise CaseInputError(f"a group step needs 'request', 'append', 'event' or 'read': {dict(when)!r}")


@dataclass(frozen=True)
class GroupObservation(Observation):
    """What a group step shows: the request's error, or an OffsetFetch's partitions."""

    error: str | None = None
    partitions: dict[str, dict[str, Any]] | None = None  # partition -> {"offset", "error"}
    member_epoch: int | None = None  # a heartbeat's answer
    assignment: list[str] | None = None  # a heartbeat's: the partitions assigned to the member after it


def fetched_partition(error: str, offset: int | None) -> dict[str, Any]:
    """One partition of an OffsetFetch answer (``offset`` None: nothing committed, Kafka's INVALID_OFFSET)."""
    return {"offset": -1 if offset is None or error != "NONE" else offset, "error": error}

"""The spec's classic consumer group (KIP-447 scenarios) driven through the implementation's membership protocol.

System
    Each spec producer's application consumes in one classic group (``ClassicGroup``): its consumer joins
    through ``JoinGroup`` and learns its generation through ``SyncGroup`` (:class:`txnspec.impl.membership
    .Membership`), so the member id and generation a ``TxnOffsetCommit`` carries are the coordinator's own.
    The spec starts the group Stable with every producer's member; its ``rebalance`` fault completes a new
    generation without one member (a zombie from then on).

Assumptions
    No session expires (the session timeout is beyond any run): only the spec's rebalance changes the group.
    The membership runs on its own clock, which only a rebalance moves (by the rebalance timeout).

Left out
    Heartbeats, static membership (``group.instance.id``), assignors (one ``range`` protocol, empty metadata).
"""

from __future__ import annotations

from typing import Any

from txnspec.impl.membership import GroupState, MemberIdentity, Membership

PROTOCOLS = (("range", b""),)
SESSION_TIMEOUT_MS = 10**9  # no session expires: only the spec's rebalance changes the group
REBALANCE_TIMEOUT_MS = 1_000


class GroupMembers:
    """The members of one group, by the spec producer (address) whose consumer each is."""

    def __init__(self, membership: Membership, group_id: str) -> None:
        self.membership = membership
        self.group_id = group_id
        self.members: dict[Any, MemberIdentity] = {}  # spec producer -> its consumer's identity
        self.clock = 0  # the membership's own clock: only the rebalance moves it

    def _join(self, member_id: str) -> str:
        result = self.membership.join(self.group_id, member_id, None, "consumer", PROTOCOLS, SESSION_TIMEOUT_MS,
                                      REBALANCE_TIMEOUT_MS, self.clock)
        return str(result.member_id)

    def _sync(self, member_ids: dict[Any, str]) -> None:
        """Every member syncs (the leader first, handing out the assignment); each learns the generation."""
        group = self.membership.groups[self.group_id]
        ordered = sorted(member_ids.items(), key=lambda kv: kv[1] != group.leader_id)
        for who, member_id in ordered:
            assignment = dict.fromkeys(member_ids.values(), b"") if member_id == group.leader_id else {}
            synced = self.membership.sync(self.group_id, member_id, group.generation_id, None, assignment, self.clock)
            if synced is None or synced.error.name != "NONE":
                raise RuntimeError(f"{who}'s SyncGroup failed: {synced}")
            self.members[who] = MemberIdentity(member_id, None, group.generation_id)

    def form(self, producers: list[Any]) -> None:
        """The producers' consumers join through JoinGroup (a newcomer first learns its member id, KIP-394), and
        every member rejoins until the join phase holds all of them (each newcomer restarts it: with three members
        one pass is not enough), then SyncGroup: the group is Stable with all of them, as the spec starts it."""
        ids = {who: self._join("") for who in producers}
        group = self.membership.groups[self.group_id]

        def joined() -> bool:
            return group.state is GroupState.COMPLETING_REBALANCE and set(group.members) == set(ids.values())

        rejoins = [member_id for _ in range(len(ids) + 1) for member_id in ids.values()]  # bounded passes
        for member_id in rejoins:
            if joined():
                break
            self._join(member_id)
        if not joined():
            raise RuntimeError(f"the group {self.group_id!r} never completed its join phase: {group.state.name}")
        self._sync(ids)

    def rebalance(self, zombie: Any) -> None:
        """The spec's rebalance through the membership's own protocol: every member but ``zombie`` rejoins, the
        rebalance timeout passes, the coordinator completes the generation without it, the others sync."""
        others = {who: m.member_id for who, m in self.members.items() if who != zombie}
        for member_id in others.values():
            self._join(member_id)
        self.clock += REBALANCE_TIMEOUT_MS
        self.membership.tick(self.clock)
        self._sync(others)


__all__ = ["GroupMembers"]

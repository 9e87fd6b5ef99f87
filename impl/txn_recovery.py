"""Transaction-log recovery against the data logs: a coordinator that loaded less than the partitions saw.

Kafka's ``TransactionStateManager.loadTransactionsForTxnTopicPartition`` trusts the transaction log: it is
replicated and written before any marker is sent, so no partition can be ahead of it. A durable broker
without ``fsync`` that loses power can come back with a transaction log cut inside its last frames while the
data logs kept what followed (the cut frames are truncated as a torn tail). Loading then yields the last
complete transition, and three things can be ahead of it:

* an epoch the partitions saw that the log never recorded (a lost ``InitProducerId`` or TV2 bump): the
  next ``InitProducerId`` would hand out that epoch again, and the partitions reject its sequences;
* a transaction open on a partition that the loaded metadata does not hold (a lost ``AddPartitionsToTxn``
  or ``Ongoing`` transition): no marker would ever close it, its partition's last stable offset is stuck,
  and a later transaction of the same epoch would be committed together with it;
* a ``PrepareCommit``/``PrepareAbort`` whose markers were all written (its ``Complete*`` was cut): resending
  a marker to a partition that already holds the next transaction's records would end that one instead.

:class:`TxnLogRecovery` settles each case as the coordinator would have had it seen the lost records: a
partition that already holds the prepared transaction's marker gets none again (markers of a producer and
epoch counted against the completed prepares of the log's history), the epoch is raised to the highest any
partition saw, and open transactions the log lost are adopted as ``Ongoing`` (written to the log), so the
next ``InitProducerId`` fences them with an abort or their timeout aborts them, as Kafka does with an
``Ongoing`` transaction it loads. Consistent logs are left exactly as loaded.

Assumes: markers are not duplicated between the last complete prepare and the cut (a retried marker written
twice there makes a partition look as if it had the prepared marker already). Left out: producer-id rotation
(only the current producer id is compared).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from txnspec.impl.internal_topics import TRANSACTION_STATE_TOPIC
from txnspec.impl.partition import Partition
from txnspec.impl.topic_partition import TopicPartition
from txnspec.impl.txn_log import metadata_from_json
from txnspec.impl.txn_metadata import TransactionMetadata, TransactionState

S = TransactionState
WriteFn = Callable[[str, TransactionMetadata], None]
log = logging.getLogger("txnspec.impl.txn_recovery")


@dataclass
class TxnLogRecovery:
    """Compares the loaded transaction metadata with the data partitions' producer states (see the module)."""

    partitions: Mapping[str, Partition]
    notes: list[str] = field(default_factory=list)  # what was settled, one line per transactional id

    def _data_partitions(self) -> dict[str, Partition]:
        return {n: p for n, p in self.partitions.items() if TopicPartition.of(n).topic != TRANSACTION_STATE_TOPIC}

    def _history(self, transactional_id: str) -> list[TransactionMetadata]:
        out: list[TransactionMetadata] = []
        for name, p in self.partitions.items():
            if TopicPartition.of(name).topic != TRANSACTION_STATE_TOPIC:
                continue
            for batch in p.log.batches:
                for r in batch.records:
                    if r.key == transactional_id and r.value is not None:
                        try:
                            out.append(metadata_from_json(transactional_id, str(r.value)))
                        except (ValueError, KeyError, TypeError):
                            continue
        return out

    def prune_delivered_markers(self, loaded: Mapping[str, TransactionMetadata]) -> None:
        """Before markers are re-sent: drop the partitions that already hold a prepared transaction's marker."""
        data = self._data_partitions()
        for tid, md in loaded.items():
            if md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) or not md.topic_partitions:
                continue
            pid, epoch = md.producer_id, md.producer_epoch
            newest = max((e.producer_epoch for p in data.values()
                          if (e := p.producer_state.last_entry(pid)) is not None), default=-1)
            # the markers carry the prepare's epoch; earlier prepares of that epoch (TV1) had theirs written
            expected: Counter[str] = Counter()
            history = self._history(tid)
            for h in history[:-1]:
                if h.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and h.producer_id == pid \
                        and h.producer_epoch == epoch:
                    expected.update(h.topic_partitions)
            delivered = set()
            for name in md.topic_partitions:
                p = data.get(name)
                if p is None:
                    continue
                found = sum(1 for b in p.log.batches if b.is_control and b.producer_id == pid
                            and b.producer_epoch == epoch)
                if found > expected[name] or newest > epoch:
                    delivered.add(name)
            if delivered:
                md.topic_partitions -= delivered
                self.notes.append(f"{tid}: markers of its {md.state.value} already in {sorted(delivered)}")

    def adopt_lost_transitions(self, loaded: Mapping[str, TransactionMetadata], now_ms: int,
                               write: WriteFn) -> None:
        """After markers are queued: raise epochs the partitions saw, adopt open transactions the log lost."""
        data = self._data_partitions()
        for tid, md in loaded.items():
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.DEAD) or md.pending_state is not None:
                continue
            entries = {n: e for n, p in data.items() if (e := p.producer_state.last_entry(md.producer_id))}
            if not entries:
                continue
            newest = max(e.producer_epoch for e in entries.values())
            open_here = {n for n, e in entries.items() if e.current_txn_first_offset is not None}
            raised = newest > md.producer_epoch
            lost_open = open_here - (md.topic_partitions if md.state is S.ONGOING else set())
            if not raised and not lost_open:
                continue
            if raised:
                md.last_producer_epoch = md.producer_epoch
                md.producer_epoch = newest
            if lost_open:
                if md.state is not S.ONGOING:
                    md.txn_start_timestamp = now_ms  # its timeout runs from now: the original start is lost
                md.state = S.ONGOING
                md.topic_partitions |= lost_open
            md.txn_last_update_timestamp = now_ms
            write(tid, md)
            self.notes.append(f"{tid}: the log was behind the partitions: epoch {md.producer_epoch}"
                              + (f", open on {sorted(lost_open)} (adopted as Ongoing)" if lost_open else ""))
        for note in self.notes:
            log.warning("transaction-log recovery: %s", note)


__all__ = ["TxnLogRecovery"]

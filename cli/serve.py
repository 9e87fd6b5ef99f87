"""``txnspec serve``: the reference implementation as a Kafka broker on 127.0.0.1 (see
:mod:`txnspec.serve`).

Exit 0 after SIGTERM/SIGINT, 2 on bad arguments or when the port is taken.
"""

from __future__ import annotations

import argparse
import logging
import sys

from txnspec.cli.base import EXIT_OK, EXIT_USAGE, Command, UsageError


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on and advertise (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9092, help="TCP port (default 9092; 0: any free port)")
    p.add_argument("--transaction-version", type=int, choices=(1, 2), default=2,
                   help="the finalized transaction.version feature: 2 (KIP-890, default) or 1")
    p.add_argument("--durable", metavar="DIR", help="keep logs in DIR (recovered on restart); default in memory")
    p.add_argument("--fsync", action="store_true",
                   help="with --durable: fsync every append before acknowledging it (survives power loss, slower)")
    p.add_argument("--recover-corruption", action="store_true",
                   help="with --durable: truncate a damaged segment at the damage and report what was dropped, "
                        "instead of refusing to start")
    p.add_argument("--partitions", type=int, default=1,
                   help="partitions of a topic created automatically or with -1 partitions (default 1)")
    p.add_argument("--topics", nargs="*", default=[], metavar="NAME[:PARTITIONS]", help="topics to create at start")
    p.add_argument("--nodes", type=int, default=1,
                   help="node ids 0..N-1 in one process, node i on port PORT+i: partition leaders and coordinators "
                        "spread over them (default 1)")
    p.add_argument("--socket-request-max-bytes", type=int, default=100 * 1024 * 1024, metavar="BYTES",
                   help="the largest request frame; a larger one closes its connection (default 104857600)")
    p.add_argument("--queued-max-request-bytes", type=int, default=100 * 1024 * 1024, metavar="BYTES",
                   help="the bytes of requests being read or handled, all connections together; a connection "
                        "waits unread while they are used up (default 104857600; -1: unbounded)")
    p.add_argument("--transaction-two-phase-commit-enable", action="store_true",
                   help="transaction.two.phase.commit.enable: allow KIP-939's Enable2Pc (default off, as Kafka)")
    p.add_argument("--unstable-api-versions-enable", action="store_true",
                   help="unstable.api.versions.enable: serve Kafka 4.4's unstable latest versions (InitProducerId v6, "
                        "KIP-939's 2PC fields)")
    p.add_argument("--verbose", action="store_true", help="log every closed connection and internal error")


def cmd_serve(args: argparse.Namespace) -> int:
    from txnspec.serve.broker import ServeConfig, topic_name_problem
    from txnspec.serve.server import PortInUse, serve_forever

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    if not 1 <= args.nodes <= 64:
        raise UsageError(f"--nodes must be in 1..64, got {args.nodes}")
    if args.port and args.port + args.nodes - 1 > 65535:
        raise UsageError(f"--port {args.port} with --nodes {args.nodes} needs ports up to {args.port + args.nodes - 1}")
    if args.socket_request_max_bytes < 1:
        raise UsageError(f"--socket-request-max-bytes must be positive, got {args.socket_request_max_bytes}")
    if args.queued_max_request_bytes == 0 or args.queued_max_request_bytes < -1:
        raise UsageError(f"--queued-max-request-bytes must be positive or -1, got {args.queued_max_request_bytes}")
    if args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, got {args.partitions}")
    for spec in args.topics:
        name, _, count = spec.partition(":")
        if topic_name_problem(name):
            raise UsageError(f"--topics {spec!r}: {topic_name_problem(name)}")
        if count and (not count.isdigit() or int(count) < 1):
            raise UsageError(f"--topics {spec!r}: the partition count must be a positive integer")
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if (args.fsync or args.recover_corruption) and not args.durable:
        raise UsageError("--fsync and --recover-corruption apply to --durable DIR")
    config = ServeConfig(host=args.host, port=args.port, transaction_version=args.transaction_version,
                         data_dir=args.durable, fsync=args.fsync, recover_corruption=args.recover_corruption,
                         default_partitions=args.partitions, topics=tuple(args.topics),
                         max_request_bytes=args.socket_request_max_bytes, nodes=args.nodes,
                         queued_max_request_bytes=args.queued_max_request_bytes,
                         transaction_two_phase_commit_enable=args.transaction_two_phase_commit_enable,
                         unstable_api_versions_enable=args.unstable_api_versions_enable)
    from txnspec.impl.errors import KafkaStorageException
    from txnspec.impl.storage import CorruptDataError

    try:
        serve_forever(config, announce=lambda line: print(line, flush=True))
    except CorruptDataError as exc:
        print(f"txnspec serve: error: {exc} (start with --recover-corruption to truncate there)", file=sys.stderr)
        return EXIT_USAGE
    except KafkaStorageException as exc:  # the data directory cannot be opened (read-only, full, no access)
        print(f"txnspec serve: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PortInUse as exc:
        print(f"txnspec serve: error: {exc.strerror} (is another broker running there? choose --port)",
              file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


COMMAND = Command("serve",
                  "run the reference implementation as a Kafka broker real clients can use",
                  _arguments, cmd_serve)

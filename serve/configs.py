"""Topic configs as Kafka 4.4 defines them (``LogConfig``'s ``ConfigDef``, the names of ``TopicConfig``): a table
of every name with its type, default and validator, the checks ``ConfigDef.parse`` makes of a value given to
CreateTopics or IncrementalAlterConfigs, and the configs of one topic as DescribeConfigs answers them.

A config named in no row is refused (``INVALID_CONFIG``, "Unknown topic config name"), as is a value that does
not parse as its type or fails its validator (``Invalid value V for configuration N: ...``). Which configs change
what ``txnspec serve`` does is decided where they act: ``max.message.bytes`` (the batch size as sent),
``max.decompressed.message.bytes`` (one record after decompression), ``cleanup.policy`` (a compacted topic
refuses records without a key; nothing is compacted), ``compression.type``
(batches recompressed on the way in), ``min.insync.replicas`` (above 1, acks=-1 is NOT_ENOUGH_REPLICAS: one
broker is one replica); the others, ``retention.*`` included, are stored and described, not acted on (no
segment is ever deleted). Broker-level defaults (``log.*`` synonyms) and sensitive configs are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ``config_type`` (``DescribeConfigsResponse.ConfigType``)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigSource(IntEnum):
    """``DescribeConfigsResponse.ConfigSource``: a topic's own value, a cluster-wide default, or the default."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    DEFAULT_CONFIG = 5


Value = int | float | bool | str | tuple[str, ...]


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Value
    check: Callable[[Value], str] | None = None  # a validator: "" when the value is valid, else why not
    # where a topic without its own value gets it from: KRaft's controller sets min.insync.replicas cluster-wide
    default_source: ConfigSource = ConfigSource.DEFAULT_CONFIG


def at_least(low: float) -> Callable[[Value], str]:
    return lambda v: "" if isinstance(v, int | float) and v >= low else f"Value must be at least {low}"


def between(low: float, high: float) -> Callable[[Value], str]:
    return lambda v: "" if isinstance(v, int | float) and low <= v <= high else \
        f"Value must be no less than {low} and no more than {high}"


def one_of(*allowed: str) -> Callable[[Value], str]:
    def check(v: Value) -> str:
        values = v if isinstance(v, tuple) else (v,)
        return "" if all(x in allowed for x in values) else f"String must be one of: {', '.join(allowed)}"
    return check


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # BrokerCompressionType

T = ConfigType
TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in (
    ConfigKey("cleanup.policy", T.LIST, ("delete",), one_of("compact", "delete")),
    ConfigKey("compression.gzip.level", T.INT, -1, lambda v: "" if v == -1 or (isinstance(v, int) and 1 <= v <= 9)
              else "Value must be between 1 and 9, or -1"),
    ConfigKey("compression.lz4.level", T.INT, 9, between(1, 17)),
    ConfigKey("compression.type", T.STRING, "producer", one_of(*COMPRESSION_TYPES)),
    ConfigKey("compression.zstd.level", T.INT, 3, between(-131072, 22)),
    ConfigKey("delete.retention.ms", T.LONG, 86_400_000, at_least(0)),
    ConfigKey("errors.deadletterqueue.group.enable", T.BOOLEAN, False),
    ConfigKey("file.delete.delay.ms", T.LONG, 60_000, at_least(0)),
    ConfigKey("flush.messages", T.LONG, LONG_MAX, at_least(1)),
    ConfigKey("flush.ms", T.LONG, LONG_MAX, at_least(0)),
    ConfigKey("follower.replication.throttled.replicas", T.LIST, ()),
    ConfigKey("index.interval.bytes", T.INT, 4096, at_least(0)),
    ConfigKey("leader.replication.throttled.replicas", T.LIST, ()),
    ConfigKey("local.retention.bytes", T.LONG, -2, at_least(-2)),
    ConfigKey("local.retention.ms", T.LONG, -2, at_least(-2)),
    ConfigKey("max.compaction.lag.ms", T.LONG, LONG_MAX, at_least(1)),
    ConfigKey("max.decompressed.message.bytes", T.INT, 2_147_483_639, at_least(0)),
    ConfigKey("max.message.bytes", T.INT, 1_048_588, at_least(0)),
    ConfigKey("message.timestamp.after.max.ms", T.LONG, 3_600_000, at_least(0)),
    ConfigKey("message.timestamp.before.max.ms", T.LONG, LONG_MAX, at_least(0)),
    ConfigKey("message.timestamp.type", T.STRING, "CreateTime", one_of("CreateTime", "LogAppendTime")),
    ConfigKey("min.cleanable.dirty.ratio", T.DOUBLE, 0.5, between(0, 1)),
    ConfigKey("min.compaction.lag.ms", T.LONG, 0, at_least(0)),
    ConfigKey("min.insync.replicas", T.INT, 1, at_least(1), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ConfigKey("preallocate", T.BOOLEAN, False),
    ConfigKey("remote.copy.lag.bytes", T.LONG, -1, at_least(-1)),
    ConfigKey("remote.copy.lag.ms", T.LONG, 0, at_least(-1)),
    ConfigKey("remote.log.copy.disable", T.BOOLEAN, False),
    ConfigKey("remote.log.delete.on.disable", T.BOOLEAN, False),
    ConfigKey("remote.storage.enable", T.BOOLEAN, False),
    ConfigKey("retention.bytes", T.LONG, -1),
    ConfigKey("retention.ms", T.LONG, 604_800_000, at_least(-1)),
    ConfigKey("segment.bytes", T.INT, 1_073_741_824, at_least(14)),
    ConfigKey("segment.index.bytes", T.INT, 10_485_760, at_least(4)),
    ConfigKey("segment.jitter.ms", T.LONG, 0, at_least(0)),
    ConfigKey("segment.ms", T.LONG, 604_800_000, at_least(1)),
    ConfigKey("unclean.leader.election.enable", T.BOOLEAN, False),
)}


class ConfigError(ValueError):
    """A config Kafka refuses with INVALID_CONFIG; the message is Kafka's."""


def parse(name: str, text: str | None) -> Value:
    """``ConfigDef.parseType`` and the validator of ``name``: the typed value, or :class:`ConfigError`."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    if text is None:
        raise ConfigError(f"Null value not supported for topic configs: {name}")
    raw = text.strip()
    value: Value
    try:
        if key.type is T.INT:
            value = int(raw)
            if not -(1 << 31) <= value <= INT_MAX:
                raise ValueError
        elif key.type is T.LONG:
            value = int(raw)
            if not -(1 << 63) <= value <= LONG_MAX:
                raise ValueError
        elif key.type is T.DOUBLE:
            value = float(raw)
        elif key.type is T.BOOLEAN:
            if raw.lower() not in ("true", "false"):
                raise ValueError
            value = raw.lower() == "true"
        elif key.type is T.LIST:
            value = tuple(x.strip() for x in raw.split(",")) if raw else ()
        else:
            value = raw
    except ValueError:
        raise ConfigError(f"Invalid value {text} for configuration {name}: Not a number of type {key.type.name}"
                          if key.type is not T.BOOLEAN else
                          f"Invalid value {text} for configuration {name}: Expected value to be either true or false"
                          ) from None
    problem = key.check(value) if key.check is not None else ""
    if problem:
        raise ConfigError(f"Invalid value {text} for configuration {name}: {problem}")
    return value


def parse_all(given: Mapping[str, str | None]) -> dict[str, Value]:
    return {name: parse(name, text) for name, text in given.items()}


def as_text(value: Value) -> str:
    """A value as DescribeConfigs shows it (``ConfigDef.convertToString``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


@dataclass(frozen=True)
class DescribedConfig:
    name: str
    value: str
    source: ConfigSource
    type: ConfigType


def describe(overrides: Mapping[str, Value], names: list[str] | None = None) -> list[DescribedConfig]:
    """A topic's configs (all, or ``names`` among those that exist) as DescribeConfigs lists them."""
    wanted = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
    out = []
    for name in wanted:
        key = TOPIC_CONFIGS[name]
        own = name in overrides
        out.append(DescribedConfig(name, as_text(overrides[name] if own else key.default),
                                   ConfigSource.DYNAMIC_TOPIC_CONFIG if own else key.default_source,
                                   key.type))
    return out


def value_of(overrides: Mapping[str, Value], name: str) -> Value:
    return overrides.get(name, TOPIC_CONFIGS[name].default)


__all__ = ["TOPIC_CONFIGS", "ConfigError", "ConfigSource", "ConfigType", "DescribedConfig", "as_text", "describe",
           "parse", "parse_all", "value_of"]

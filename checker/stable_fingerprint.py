"""A 64-bit fingerprint of a state that is the same in every Python process.

What is modelled
    ``hash()`` cannot name a state across processes: ``str`` hashes are salted per process
    (``PYTHONHASHSEED``), an enum member hashes as its name, and in Python 3.11 ``hash(None)`` is its
    address, which differs between interpreters. A search whose workers are separate interpreters (Spark's
    executors, :mod:`txnspec.checker.spark_bfs`) must agree on which states are equal, and which worker owns
    a state, without sharing a hash seed. :func:`fingerprint` gives a signed 64-bit integer computed only from
    the state's structure: BLAKE2b over a canonical encoding.

Encoding
    Leaves are written inline with a tag: ``None``, ``bool``, ``int`` (length-prefixed two's complement),
    ``float`` (IEEE 754 bytes), ``str`` (UTF-8) and ``bytes`` (length-prefixed), an enum member (its class's
    qualified name and the member's name), a class (its qualified name). A composite value is written as the
    16-byte BLAKE2b digest of its own encoding (a Merkle tree): a tuple is its elements in order; a frozenset
    its elements' encodings sorted bytewise (so the order of iteration, which follows salted hashes, does not
    matter); a dataclass its class's qualified name, then the fields that take part in equality, in
    declaration order. Every encoding is self-delimiting, so the encoding is injective on these values. Values
    of two classes with equal fields differ (the class name is encoded). The fingerprint is the first 8 bytes
    of the top digest, read as a signed big-endian integer (it fits an ``array('q')``).

    A composite's digest is remembered in a dict keyed by the value itself (Python's hash and equality, within
    this process): a successor shares most of its sub-values with its parent, or has sub-values equal to ones
    met before (the spec rebuilds equal envelopes, tuples and metadata), and fingerprinting it costs what is
    new, as the cached ``hash()`` of the spec's values does. The memory is dropped whole when it exceeds
    ``limit`` entries. Keyed by value, a lookup of an equal but distinct object (one unpickled afresh) hashes
    it and compares it field by field, all the way down: where states arrive unpickled (Spark's executors),
    ``by_identity=True`` keys the memory by identity instead, and the caller clears it between batches.
    ``bench/fingerprint_bench.py`` measures the cost: on the default scenario about 12 µs a
    successor with the memory (``hash()``: about 2 µs; the successor itself about 18 µs), 120 µs without.

Assumes
    States are built from the types above (frozen dataclasses, enums, tuples, frozensets, ints, strs, None,
    bools, floats, bytes, classes); anything else is a ``TypeError`` naming its type. Fields with
    ``compare=False`` are left out, as equality leaves them out. Values that Python calls equal across types
    (``1 == 1.0 == True``, an ``IntEnum`` member and its int) are encoded apart, but the memory, keyed by
    equality, would give a composite holding one the digest of the first it met holding the other: a model
    must not mix them in one place (the exact engines would take such states for one state anyway).

Leaves out
    Dicts, lists and sets (they are not hashable, so they are not in states) and objects with a custom
    ``__eq__`` other than dataclasses: they are refused rather than fingerprinted by a guess.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Callable
from hashlib import blake2b
from typing import Any

_DIGEST = 16  # bytes of a composite's digest inside its parent's encoding
_LIMIT = 1 << 18  # composites (and strings) remembered before the memory is dropped
_COMPOSITE = ord("#")  # the tag of a composite's digest


def _name(cls: type) -> bytes:
    return f"{cls.__module__}.{cls.__qualname__}".encode()


def _length(n: int) -> bytes:
    return n.to_bytes(4, "big")


class _ByIdentity:
    """A memory keyed by identity (the object is held, so its identity is not reused while remembered)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[int, tuple[Any, bytes]] = {}

    def get(self, value: Any) -> bytes | None:
        found = self._held.get(id(value))
        return None if found is None else found[1]

    def __setitem__(self, value: Any, digest: bytes) -> None:
        self._held[id(value)] = (value, digest)

    def __len__(self) -> int:
        return len(self._held)

    def clear(self) -> None:
        self._held.clear()


class Fingerprinter:
    """Fingerprints with a memory of the composites already digested (see the module doc).

    >>> f = Fingerprinter()
    >>> f.fingerprint((1, "a", None)) == f.fingerprint((1, "a", None)), f.fingerprint(1) == f.fingerprint(True)
    (True, False)
    """

    __slots__ = ("_encoders", "_fields", "_leaves", "_memo", "limit")

    def __init__(self, limit: int = _LIMIT, *, by_identity: bool = False) -> None:
        self.limit = limit
        self._memo: dict[Any, bytes] | _ByIdentity = _ByIdentity() if by_identity else {}
        self._leaves: dict[str, bytes] = {}
        self._fields: dict[type, tuple[str, ...]] = {}
        self._encoders: dict[type, Callable[[Any], bytes]] = {
            type(None): lambda _: b"n", bool: lambda v: b"t" if v else b"f", int: self._int, str: self._str,
            bytes: lambda v: b"b" + _length(len(v)) + v, float: lambda v: b"r" + struct.pack(">d", v),
            tuple: self._tuple, frozenset: self._frozenset,
        }

    def clear(self) -> None:
        """Forget every digest (the memory's objects are released)."""
        self._memo.clear()
        self._leaves.clear()

    def fingerprint(self, value: Any) -> int:
        """The signed 64-bit fingerprint of ``value``."""
        if len(self._memo) + len(self._leaves) > self.limit:
            self.clear()
        try:
            encoded = self.encode(value)
        except TypeError as exc:
            if not str(exc).startswith("unhashable"):
                raise
            raise TypeError(f"cannot fingerprint a value that is not hashable: {exc}") from None
        if encoded[0] != _COMPOSITE:  # a leaf: digest its encoding; a composite's digest is at hand
            encoded = b"#" + blake2b(encoded, digest_size=_DIGEST).digest()
        return int.from_bytes(encoded[1:9], "big", signed=True)

    def _components(self, value: Any) -> tuple[Any, ...] | None:
        """A dataclass's compared fields or a tuple's items (ordered components; a frozenset's order is not
        the same in two processes, so it has none here)."""
        if type(value) is tuple:
            return value
        names = self._fields.get(type(value))
        if names is None:
            if not dataclasses.is_dataclass(value) or isinstance(value, type):
                return None
            names = self._fields[type(value)] = tuple(f.name for f in dataclasses.fields(value) if f.compare)
        return tuple(getattr(value, n) for n in names)

    def parts(self, value: Any) -> tuple[bytes | None, ...] | None:
        """The remembered digests of ``value``'s direct components (after :meth:`fingerprint` of it), to be
        handed to :meth:`seed` in another process with the same value unpickled."""
        components = self._components(value)
        if components is None:
            return None
        return tuple(self._memo.get(c) for c in components)

    def seed(self, value: Any, parts: tuple[bytes | None, ...] | None) -> None:
        """Remember the digests :meth:`parts` gave for ``value``'s components: a successor that shares them
        is fingerprinted without encoding them again."""
        components = self._components(value) if parts is not None else None
        if components is None or parts is None or len(components) != len(parts):
            return
        for component, digest in zip(components, parts, strict=True):
            if digest is not None:
                self._memo[component] = digest

    def encode(self, value: Any) -> bytes:
        """The canonical, self-delimiting encoding of ``value`` (a composite as its tagged digest)."""
        encoder = self._encoders.get(type(value))
        if encoder is None:
            encoder = self._encoder_for(type(value))
        return encoder(value)

    def _encoder_for(self, cls: type) -> Callable[[Any], bytes]:
        if isinstance(cls, type) and issubclass(cls, type):
            encoder: Callable[[Any], bytes] = lambda v: b"c" + _length(len(_name(v))) + _name(v)  # noqa: E731
        elif issubclass(cls, enum.Enum):
            tag = b"e" + _length(len(_name(cls))) + _name(cls)
            encoder = lambda v: tag + self._str(v.name)  # noqa: E731
        elif dataclasses.is_dataclass(cls):
            encoder = self._dataclass_encoder(cls)
        elif issubclass(cls, tuple | frozenset | int | str | bytes | float):
            raise TypeError(f"cannot fingerprint {cls.__qualname__}: a subclass of a builtin whose equality "
                            "the fingerprint cannot know")
        else:
            raise TypeError(f"cannot fingerprint a {cls.__module__}.{cls.__qualname__}: states are built from "
                            "dataclasses, enums, tuples, frozensets, ints, strs, bools, floats, bytes and None")
        self._encoders[cls] = encoder
        return encoder

    def _dataclass_encoder(self, cls: type) -> Callable[[Any], bytes]:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
        head = b"d" + _length(len(_name(cls))) + _name(cls) + _length(len(names))
        memo, encode = self._memo, self.encode

        def encoder(v: Any) -> bytes:
            digest = memo.get(v)
            if digest is None:
                body = head + b"".join([encode(getattr(v, n)) for n in names])
                digest = memo[v] = b"#" + blake2b(body, digest_size=_DIGEST).digest()
            return digest

        return encoder

    def _int(self, v: int) -> bytes:
        if -128 <= v < 128:
            return b"i\x01" + v.to_bytes(1, "big", signed=True)
        raw = v.to_bytes((v.bit_length() + 8) // 8, "big", signed=True)
        return b"I" + _length(len(raw)) + raw

    def _str(self, v: str) -> bytes:
        found = self._leaves.get(v)
        if found is None:
            raw = v.encode("utf-8", "surrogatepass")
            found = self._leaves[v] = b"s" + _length(len(raw)) + raw
        return found

    def _tuple(self, v: tuple[Any, ...]) -> bytes:
        return self._composite(v, b"(" + _length(len(v)), v)

    def _frozenset(self, v: frozenset[Any]) -> bytes:
        digest = self._memo.get(v)
        if digest is None:
            encode = self.encode
            body = b"{" + _length(len(v)) + b"".join(sorted([encode(x) for x in v]))
            digest = self._memo[v] = b"#" + blake2b(body, digest_size=_DIGEST).digest()
        return digest

    def _composite(self, v: Any, head: bytes, items: Any) -> bytes:
        digest = self._memo.get(v)
        if digest is None:
            encode = self.encode
            body = head + b"".join([encode(x) for x in items])
            digest = self._memo[v] = b"#" + blake2b(body, digest_size=_DIGEST).digest()
        return digest


_DEFAULT = Fingerprinter()


def fingerprint(value: Any) -> int:
    """The signed 64-bit structural fingerprint of ``value``, equal in every Python process.

    >>> fingerprint(("producer-0", None, 3)) == fingerprint(("producer-0", None, 3))
    True
    """
    return _DEFAULT.fingerprint(value)

"""A map in least-recently-used order whose lookup hashes and compares its key once.

Nova's caches are keyed by structure: a step's key lists every node's signature and
operands (a medium GPT's: ~3,500 values in nested tuples), a backward pass's every
GradFn. CPython caches no tuple's hash, so ``OrderedDict.get(key)`` followed by
``move_to_end(key)`` hashed such a key twice and compared it, element by element, with
the stored one twice: ~0.13 ms for each of a recorded step's two big lookups (29-44 us
a hash, 28-33 us a comparison, measured on a medium GPT step). Here a lookup wraps the
key with its hash computed once (:class:`HashedKey`), compares it once with the stored
key, and moves the entry by the stored key object itself, which the dictionary finds by
identity.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

V = TypeVar("V")


class HashedKey:
    """``key`` with its hash computed once; equal to another HashedKey of an equal key."""

    __slots__ = ("key", "_hash")

    def __init__(self, key: Hashable):
        self.key = key
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is HashedKey and self._hash == other._hash
                                 and self.key == other.key)

    def __repr__(self) -> str:
        return f"HashedKey({self.key!r})"


class LRU(Generic[V]):
    """Entries in least-recently-used order (the oldest first). ``get`` marks a found
    entry used; ``pop_oldest`` evicts. Bounding it is the owner's decision (by count,
    by bytes): this only keeps the order. Not thread-safe: owners hold their lock."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        # by HashedKey: (the stored HashedKey, value)
        self._entries: OrderedDict[HashedKey, tuple[HashedKey, V]] = OrderedDict()

    def get(self, key: Hashable, default: V | None = None) -> V | None:
        """The value of ``key`` (then the most recently used entry), or ``default``."""
        found = self._entries.get(HashedKey(key))
        if found is None:
            return default
        self._entries.move_to_end(found[0])     # (found by identity: no comparison)
        return found[1]

    def __setitem__(self, key: Hashable, value: V) -> None:
        hashed = HashedKey(key)
        # (an update replaces the stored key too, so later lookups move it by identity)
        self._entries.pop(hashed, None)
        self._entries[hashed] = (hashed, value)

    def pop_oldest(self) -> tuple[Hashable, V]:
        """Remove and return the least recently used entry, as (key, value)."""
        hashed, (_, value) = self._entries.popitem(last=False)
        return hashed.key, value

    def pop(self, key: Hashable) -> V:
        return self._entries.pop(HashedKey(key))[1]

    def __contains__(self, key: Hashable) -> bool:
        return HashedKey(key) in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Hashable]:
        return (hashed.key for hashed in list(self._entries))

    def keys(self) -> list[Hashable]:
        return [hashed.key for hashed in self._entries]

    def values(self) -> list[V]:
        return [value for _, value in self._entries.values()]

    def items(self) -> list[tuple[Hashable, V]]:
        return [(hashed.key, value) for hashed, value in self._entries.values()]

    def clear(self) -> None:
        self._entries.clear()

"""``nova.core.lru``: least-recently-used order, and a lookup that hashes its key once."""
from __future__ import annotations

from nova.core.lru import LRU, HashedKey


class CountingKey:
    """A key part that counts how often it is hashed and compared."""

    hashes = 0
    compares = 0

    def __init__(self, v: int):
        self.v = v

    def __hash__(self) -> int:
        CountingKey.hashes += 1
        return hash(self.v)

    def __eq__(self, other: object) -> bool:
        CountingKey.compares += 1
        return isinstance(other, CountingKey) and self.v == other.v


def test_order_is_least_recently_used_first():
    lru: LRU[str] = LRU()
    for k in ("a", "b", "c"):
        lru[("key", k)] = k
    assert lru.get(("key", "a")) == "a"          # a is now the most recent
    assert lru.get(("key", "zzz"), False) is False
    assert lru.keys() == [("key", "b"), ("key", "c"), ("key", "a")]
    assert lru.pop_oldest() == (("key", "b"), "b")
    lru[("key", "c")] = "C"                      # an update is a use
    assert lru.items() == [(("key", "a"), "a"), (("key", "c"), "C")]
    assert ("key", "a") in lru and ("key", "b") not in lru and len(lru) == 2
    assert list(lru) == [("key", "a"), ("key", "c")] and lru.values() == ["a", "C"]
    assert lru.pop(("key", "a")) == "a" and len(lru) == 1
    lru.clear()
    assert len(lru) == 0


def test_none_is_a_value_not_a_miss():
    lru: LRU[None] = LRU()
    lru[(1,)] = None
    assert lru.get((1,), False) is None and lru.get((2,), False) is False


def test_a_hit_hashes_and_compares_the_key_once():
    lru: LRU[int] = LRU()
    lru[(CountingKey(1), "x")] = 1
    lru[(CountingKey(2), "x")] = 2
    CountingKey.hashes = CountingKey.compares = 0
    probe = (CountingKey(1), "x")               # equal to the stored key, not the same
    assert lru.get(probe) == 1
    assert (CountingKey.hashes, CountingKey.compares) == (1, 1)
    assert lru.keys()[-1] == probe              # moved to the most recent end


def test_hashed_keys_compare_by_key():
    a, b = HashedKey((1, (2, 3))), HashedKey((1, (2, 3)))
    assert a == b and hash(a) == hash(b) and a != HashedKey((1, (2, 4)))
    assert a != (1, (2, 3))                     # only another HashedKey is equal

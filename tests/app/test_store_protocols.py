"""The store's concerns: each protocol's memory and Redis implementations expose the same methods with
the same signatures, the composed stores are every concern at once, every public method belongs to a
protocol, and every public Redis method turns an outage into StoreUnavailable. No server needed."""

from __future__ import annotations

import inspect

import pytest

from mgmatch.app.store import MemoryStore, RedisStore, Store, protocols
from mgmatch.app.store import memory as mem
from mgmatch.app.store import redis as red

# concern → (protocol, in-memory implementation or None where only Redis has it, Redis implementation)
CONCERNS = {
    "tickets": (protocols.TicketStore, mem.MemoryTickets, red.RedisTickets),
    "records": (protocols.RecordStore, mem.MemoryRecords, red.RedisRecords),
    "backfills": (protocols.BackfillStore, mem.MemoryBackfills, red.RedisBackfills),
    "stats": (protocols.StatsStore, mem.MemoryStats, red.RedisStats),
    "ratings": (protocols.RatingStore, mem.MemoryRatings, red.RedisRatings),
    "checks": (protocols.ReadyCheckStore, mem.MemoryChecks, red.RedisChecks),
    "jobs": (protocols.JobStore, None, red.RedisJobs),
    "inference": (protocols.InferenceStore, None, red.RedisInference),
    "leases": (protocols.LeaseStore, None, red.RedisLeases),
}
# public methods of the shared cores, in no protocol of a concern (construction, health, stream groups)
CORE_METHODS = {"ping", "close", "from_url", "ensure_group"}


def methods(proto: type) -> set[str]:
    """The protocol's own public methods (not those of Protocol itself)."""
    return {n for n, v in vars(proto).items() if not n.startswith("_") and inspect.isfunction(v)}


def public_methods(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(inspect.getattr_static(cls, n))}


def shape(fn) -> list[tuple[str, object, object]]:
    """A method's parameters as (name, kind, default), whether it is a coroutine function last."""
    params = [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]
    return [*params, ("async", inspect.iscoroutinefunction(inspect.unwrap(fn)), None)]


def test_every_concern_protocol_is_listed():
    found = {v for v in vars(protocols).values() if isinstance(v, type) and v not in (Store, protocols.Protocol)
             and issubclass(v, protocols.Protocol) and getattr(v, "_is_protocol", False)}
    assert found == {proto for proto, _, _ in CONCERNS.values()}


@pytest.mark.parametrize("concern", sorted(CONCERNS))
def test_each_implementation_is_complete_and_the_two_agree(concern):
    proto, memory_impl, redis_impl = CONCERNS[concern]
    names = methods(proto)
    assert names, concern
    for impl in (memory_impl, redis_impl):
        if impl is None:
            continue
        assert issubclass(impl, proto)
        assert not impl.__abstractmethods__, f"{impl.__name__} leaves {sorted(impl.__abstractmethods__)}"
        for name in names:
            assert shape(getattr(impl, name)) == shape(getattr(proto, name)), f"{impl.__name__}.{name}"
    if memory_impl is not None:
        # the memory and Redis classes answer the same public calls (nothing one-sided beyond the protocol)
        extra = (public_methods(redis_impl) ^ public_methods(memory_impl)) - CORE_METHODS
        assert not extra, f"{concern}: only one implementation has {sorted(extra)}"


@pytest.mark.parametrize("store_cls", [MemoryStore, RedisStore])
def test_the_composed_stores_are_every_concern_they_implement(store_cls):
    redis_side = store_cls is RedisStore
    assert issubclass(store_cls, Store) and not store_cls.__abstractmethods__
    declared = set(CORE_METHODS)
    for proto, memory_impl, redis_impl in CONCERNS.values():
        impl = redis_impl if redis_side else memory_impl
        if impl is None:
            assert not issubclass(store_cls, proto)
            continue
        assert issubclass(store_cls, impl) and issubclass(store_cls, proto)
        declared |= methods(proto)
    # a public method no protocol declares is a concern's API that callers cannot type against
    assert public_methods(store_cls) - declared == set()


@pytest.mark.parametrize("concern", sorted(CONCERNS))
def test_every_public_redis_method_is_guarded(concern):
    """A method outside the guard would leak redis-py's ConnectionError (a 500) instead of a 503."""
    impl = CONCERNS[concern][2]
    for name in methods(CONCERNS[concern][0]):
        fn = inspect.getattr_static(impl, name)
        owner = next(c for c in impl.__mro__ if name in vars(c))
        if owner.__module__.startswith("mgmatch.app.store.redis"):
            assert hasattr(fn, "__wrapped__"), f"{owner.__name__}.{name} is not guarded"
    assert hasattr(inspect.getattr_static(red.RedisCore, "ensure_group"), "__wrapped__")


def test_a_concern_class_works_alone():
    """One concern's implementation is a store of its own (what a caller typed against it may be given)."""
    from mgmatch.app.store import MatchRecord, MatchResult, Ticket, new_ticket_id

    tickets = mem.MemoryTickets()
    assert isinstance(tickets, protocols.TicketStore)
    ids = [tickets.create(Ticket(new_ticket_id("p"), "p", [{"id": f"u{i}", "features": [0.5]}], 0.0, 1e12))[0].id
           for i in range(2)]
    assert tickets.claim("p", ids, "m0", 1e12)
    mid = "p.m0"
    assert tickets.commit("p", "m0", ids, [], MatchResult(mid, [["u0"], ["u1"]], {ids[0]: 0, ids[1]: 1}),
                          MatchRecord(mid, "p", [[{"id": "u0"}], [{"id": "u1"}]]))
    assert tickets.get(ids[0]).status == "matched" and tickets.queue_depth("p") == 0
    records = red.RedisRecords.from_url("redis://127.0.0.1:1/0", prefix="nowhere")  # builds without connecting
    assert isinstance(records, protocols.RecordStore) and not isinstance(records, red.RedisTickets)

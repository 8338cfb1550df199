"""The state service (llm-state) on a real Redis, spoken to as the gateway
speaks to it (its protocol: docs/src/architecture/state-service.md): entries
and chains by store, namespace and key; a time to live on the service's
clock, moved ahead (never slept); the entry bound; the semantic cache's
vectors (searched within their partition, bounded, expiring); Redis's memory bound;
Redis down (503 at once) and back (what it held, kept by its append-only
file). The gateway's use of it through Envoy: tests/test_shared_state.py."""

import struct
import time

import pytest

from state_service import StateStore

NS_A, NS_B = "a" * 32, "b" * 32
KEYS = [f"{n:032x}" for n in range(1, 8)]


def path(key, ns=NS_A, store="test"):
    return f"/v1/entries/{store}/{ns}/{key}"


def frames(body):
    out = []
    while body:
        (length,) = struct.unpack(">I", body[:4])
        out.append(body[4:4 + length])
        body = body[4 + length:]
    return out


@pytest.fixture(scope="module")
def state():
    s = StateStore()
    s.start_redis()
    s.start_service("--max-entry-bytes", "1000", "--max-vectors", "3")
    yield s
    s.stop()


def test_entries_chains_and_deletes(state):
    put = lambda key, body, **h: state.raw("PUT", path(key), body, {"x-llm-ttl": "60", **h})[0]  # noqa: E731
    assert put(KEYS[0], b"first") == 204
    assert put(KEYS[1], b"second", **{"x-llm-parent": KEYS[0]}) == 204
    assert put(KEYS[2], b"third", **{"x-llm-parent": KEYS[1]}) == 204
    status, headers, body = state.raw("GET", path(KEYS[1]))
    assert (status, body, headers["age"]) == (200, b"second", "0")
    status, headers, body = state.raw("GET", path(KEYS[2]) + "?chain=1024")
    assert headers["content-type"] == "application/x-llm-state-chain"
    assert frames(body) == [b"third", b"second", b"first"]
    assert frames(state.raw("GET", path(KEYS[2]) + "?chain=2")[2]) == [b"third", b"second"]
    # Another namespace never finds them, nor deletes them: the service's
    # own 404, which says so (the gateway tells it from any other 404).
    status, headers, _ = state.raw("GET", path(KEYS[1], ns=NS_B))
    assert (status, headers["x-llm-state"]) == (404, "missing")
    assert state.raw("DELETE", path(KEYS[1], ns=NS_B))[0] == 404
    # A deleted link ends the chain there.
    assert state.raw("DELETE", path(KEYS[1]))[0] == 204
    assert state.raw("DELETE", path(KEYS[1]))[0] == 404
    assert frames(state.raw("GET", path(KEYS[2]) + "?chain=1024")[2]) == [b"third"]
    # Bounds and bad requests.
    assert put(KEYS[3], b"x" * 1001) == 413
    assert state.raw("PUT", path(KEYS[3]), b"no ttl")[0] == 400
    assert state.raw("GET", "/v1/entries/test/short/key")[0] == 404
    assert state.raw("GET", "/healthz")[0] == 200


def test_a_time_to_live_on_the_services_clock(state):
    assert state.raw("PUT", path(KEYS[4]), b"brief", {"x-llm-ttl": "3600"})[0] == 204
    try:
        state.move_clock(3599)
        assert state.raw("GET", path(KEYS[4]))[:3:2] == (200, b"brief")
        assert state.raw("GET", path(KEYS[4]))[1]["age"] == "3599"
        state.move_clock(3600)
        assert state.raw("GET", path(KEYS[4]))[0] == 404
        assert state.raw("DELETE", path(KEYS[4]))[0] == 404
    finally:
        state.move_clock(0)


def vec(*components):
    """A quantised vector as the gateway sends it: a signed byte a component."""
    return struct.pack(f"{len(components)}b", *components)


def vpath(partition, last, store="test_vec"):
    return f"/v1/vectors/{store}/{partition}/{last}"


def test_vectors_are_searched_within_their_partition_bounded_and_expire(state):
    ids = [f"{n:064x}" for n in range(1, 8)]
    put = lambda partition, id, v, ttl="60": state.raw(  # noqa: E731
        "PUT", vpath(partition, id), v, {"x-llm-ttl": ttl})[0]
    search = lambda partition, v, t="0.9": state.raw(  # noqa: E731
        "POST", vpath(partition, f"search?threshold={t}"), v)
    assert put(NS_A, ids[0], vec(127, 0, 0, 0)) == 204
    assert put(NS_A, ids[1], vec(0, 127, 0, 0)) == 204
    # The closest one, at least the threshold close.
    status, headers, body = search(NS_A, vec(120, 20, 0, 0))
    assert (status, body) == (200, ids[0].encode())
    assert 0.9 <= float(headers["x-llm-similarity"]) <= 1.0
    status, headers, _ = search(NS_A, vec(0, 0, 127, 0))
    assert (status, headers["x-llm-state"]) == (404, "missing")
    assert search(NS_A, vec(90, 90, 0, 0), t="0.9")[0] == 404
    # Another partition (another key's, group's or parameters') never sees them.
    assert search(NS_B, vec(127, 0, 0, 0))[0] == 404
    # Another dimension is not compared; a zero, empty or too long vector is refused.
    assert search(NS_A, vec(127, 0, 0))[0] == 404
    assert search(NS_A, vec(0, 0, 0, 0))[0] == 400
    assert put(NS_A, ids[2], b"", "60") == 400
    assert put(NS_A, ids[2], b"\x01" * 8193) == 413
    assert put(NS_A, ids[2], vec(1, 2, 3, 4), "0") == 400
    assert state.raw("POST", vpath(NS_A, "search?threshold=0"), vec(1, 0, 0, 0))[0] == 404
    # At most 3 a partition: past it, the soonest to expire goes.
    assert put(NS_B, ids[3], vec(0, 0, 127, 0), "30") == 204
    assert put(NS_B, ids[4], vec(0, 0, 0, 127), "60") == 204
    assert put(NS_B, ids[5], vec(0, 127, 0, 0), "60") == 204
    assert put(NS_B, ids[6], vec(127, 0, 0, 0), "60") == 204
    assert search(NS_B, vec(0, 0, 127, 0))[0] == 404
    assert search(NS_B, vec(0, 0, 0, 127))[2] == ids[4].encode()
    # Past their time to live, on the service's clock: gone.
    try:
        state.move_clock(61)
        assert search(NS_A, vec(127, 0, 0, 0))[0] == 404
    finally:
        state.move_clock(0)
    assert search(NS_A, vec(127, 0, 0, 0))[2] == ids[0].encode()


def test_redis_down_is_a_prompt_503_and_back_it_has_kept_everything(state):
    assert state.raw("PUT", path(KEYS[5]), b"kept", {"x-llm-ttl": "600"})[0] == 204
    state.stop_redis()
    started = time.monotonic()
    assert state.raw("GET", path(KEYS[5]))[0] == 503
    assert state.raw("PUT", path(KEYS[6]), b"lost", {"x-llm-ttl": "600"})[0] == 503
    assert state.raw("GET", "/healthz")[0] == 503
    # Bounded by --redis-timeout-ms (1 s here) per call, not hanging.
    assert time.monotonic() - started < 10
    state.start_redis()
    deadline = time.monotonic() + 20
    while state.raw("GET", "/healthz")[0] != 200:
        assert time.monotonic() < deadline, "the service did not find Redis again"
        time.sleep(0.05)
    assert state.raw("GET", path(KEYS[5]))[:3:2] == (200, b"kept")
    assert "llm-state: " in (state.dir / "service.log").read_text()


def test_redis_memory_bound_evicts_entries():
    s = StateStore(maxmemory=2 << 20)
    try:
        s.start_redis()
        s.start_service()
        entry = b"x" * 10_000
        for n in range(1000):
            assert s.raw("PUT", path(f"{n:032x}"), entry, {"x-llm-ttl": "600"})[0] == 204
        held = s.entries()
        assert 0 < held < 300, held
        # Redis's least-recently-used is approximate (sampled, a clock of
        # seconds): most of the oldest went, not necessarily the very first.
        oldest = [s.raw("GET", path(f"{n:032x}"))[0] for n in range(20)]
        assert oldest.count(404) >= 10, oldest
        assert s.raw("GET", path(f"{999:032x}"))[0] == 200
    finally:
        s.stop()

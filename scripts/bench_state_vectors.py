"""Times the state service's semantic search (docs/src/architecture/state-service.md,
"The semantic cache's vectors"): one partition of 10,000 vectors (or the
first argument's number) of 1,536 dimensions in a fresh Redis, searched over HTTP as the gateway searches
(the partition's hash read from Redis per search, scanned by brute force).
Prints the median and 95th percentile of a hit and of a miss. Not a test
(no assertion on time): `make bench-state-vectors`, after `make state-build`."""

import http.client
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import gateway  # noqa: E402

# The partition's size: the first argument, 10,000 by default.
VECTORS = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
DIMENSIONS, SEARCHES = 1536, 50
PARTITION = "ab" * 16


def vector(rng):
    return struct.pack(f"{DIMENSIONS}b", *(rng.randint(-127, 127) for _ in range(DIMENSIONS)))


def timed(conn, method, path, body, headers=None):
    start = time.perf_counter()
    conn.request(method, path, body=body, headers=headers or {})
    response = conn.getresponse()
    response.read()
    return response.status, (time.perf_counter() - start) * 1000


def main():
    directory = Path(tempfile.mkdtemp(prefix="llm-bv-"))
    redis = gateway.start_redis(directory)
    with open(directory / "service.log", "ab") as log:
        service = gateway.start_state_service(directory / "redis.sock", log, "--max-vectors", str(VECTORS))
    try:
        rng = random.Random(7)
        conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=60)
        stored = []
        for n in range(VECTORS):
            v = vector(rng)
            if n % max(1, VECTORS // 10) == 0:
                stored.append(v)
            status, _ = timed(conn, "PUT", f"/v1/vectors/bench/{PARTITION}/{n:064x}", v, {"x-llm-ttl": "3600"})
            assert status == 204, status
        search = f"/v1/vectors/bench/{PARTITION}/search?threshold=0.95"
        for name, queries, want in (("a hit", stored, 200), ("a miss", [vector(rng) for _ in range(10)], 404)):
            times = []
            for i in range(SEARCHES):
                status, ms = timed(conn, "POST", search, queries[i % len(queries)])
                assert status == want, status
                times.append(ms)
            times.sort()
            print(f"state service search, {VECTORS:,} vectors of {DIMENSIONS:,}, {name}: "
                  f"median {statistics.median(times):.2f} ms, p95 {times[int(len(times) * 0.95) - 1]:.2f} ms")
    finally:
        gateway.stop(service)
        gateway.stop(redis)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()

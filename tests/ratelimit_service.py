"""TEST-ONLY rate limit service: never deploy it (production runs
envoyproxy/ratelimit with Redis, see envoy/ratelimit.yaml). It speaks the
real envoy.service.ratelimit.v3.RateLimitService gRPC protocol (the protos
of the `xds-protos` package), with fixed-window counters per descriptor, as
envoyproxy/ratelimit keeps them: each descriptor adds its `hits_addend`
(the descriptor's own when set, 0 included, else the request's, else 1) and
is over its limit when the count after adding exceeds the limit. It runs in
the test's own process, so a test reads its counters and calls directly."""

import threading
import time
from concurrent import futures

import grpc
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

UNITS = {"second": (1, rls_pb2.RateLimitResponse.RateLimit.SECOND),
         "minute": (60, rls_pb2.RateLimitResponse.RateLimit.MINUTE),
         "hour": (3600, rls_pb2.RateLimitResponse.RateLimit.HOUR),
         "day": (86400, rls_pb2.RateLimitResponse.RateLimit.DAY)}
OK = rls_pb2.RateLimitResponse.OK
OVER_LIMIT = rls_pb2.RateLimitResponse.OVER_LIMIT


class Limit:
    """A limit on descriptors whose entries are exactly `entries` (key ->
    value; a value of None matches any value, each value counted apart)."""

    def __init__(self, entries, limit, unit):
        self.entries, self.limit, self.unit = entries, limit, unit

    def matches(self, entries):
        return [k for k, _ in entries] == list(self.entries) and all(
            want is None or want == got for (_, got), want in zip(entries, self.entries.values()))


class Service(rls_pb2_grpc.RateLimitServiceServicer):
    def __init__(self, domain, limits):
        self.domain, self.limits = domain, limits
        self.lock = threading.Lock()
        self.counts = {}   # (entries, window start) -> hits
        self.calls = []    # every RateLimitRequest, in order

    def count(self, entries, unit="minute"):
        """What the current window of `unit` counted for `entries` ((key, value) pairs)."""
        seconds = UNITS[unit][0]
        with self.lock:
            return self.counts.get((tuple(entries), int(time.time()) // seconds * seconds), 0)

    def ShouldRateLimit(self, request, context):
        now = time.time()
        response = rls_pb2.RateLimitResponse(overall_code=OK)
        with self.lock:
            self.calls.append(request)
            for descriptor in request.descriptors:
                entries = tuple((e.key, e.value) for e in descriptor.entries)
                if descriptor.HasField("hits_addend"):
                    hits = descriptor.hits_addend.value
                else:
                    hits = request.hits_addend or 1
                limit = next((l for l in self.limits if l.matches(entries)), None)
                if request.domain != self.domain or limit is None:
                    response.statuses.add(code=OK)
                    continue
                seconds, unit = UNITS[limit.unit]
                window = int(now) // seconds * seconds
                used = self.counts.get((entries, window), 0) + hits
                self.counts[(entries, window)] = used
                status = response.statuses.add(
                    code=OVER_LIMIT if used > limit.limit else OK,
                    current_limit=rls_pb2.RateLimitResponse.RateLimit(requests_per_unit=limit.limit, unit=unit),
                    limit_remaining=max(0, limit.limit - used))
                status.duration_until_reset.seconds = max(1, int(window + seconds - now))
                if used > limit.limit:
                    response.overall_code = OVER_LIMIT
        return response


def start(domain, limits):
    """Starts the service on a loopback port of the kernel's choosing;
    returns (server, port, service). Stop it with `server.stop(0)`."""
    service = Service(domain, limits)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    rls_pb2_grpc.add_RateLimitServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, service

"""TEST-ONLY rate limit service: never deploy it (production runs
envoyproxy/ratelimit with Redis, see envoy/ratelimit.yaml). It speaks the
real envoy.service.ratelimit.v3.RateLimitService gRPC protocol, with
fixed-window counters per descriptor, as envoyproxy/ratelimit keeps them:
each descriptor adds its `hits_addend` (the descriptor's own when set, 0
included, else the request's, else 1) and is over its limit when the count
after adding exceeds the limit. It runs in the test's own process, so a test
reads its counters and calls directly.

The messages are declared here, with the field numbers and types of Envoy's
rls.proto and ratelimit.proto (the fields this service reads and writes;
protobuf skips the others). The `xds-protos` package would bring them, but
it also installs an old copy of the OpenTelemetry protos over
`opentelemetry-proto`'s, which breaks tests/test_tracing.py."""

import threading
import time
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, wrappers_pb2

F = descriptor_pb2.FieldDescriptorProto


def _field(name, number, kind, type_name=None, repeated=False):
    field = F(name=name, number=number, type=kind, label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = type_name
    return field


def _messages():
    pool = descriptor_pool.DescriptorPool()
    for well_known in (wrappers_pb2, duration_pb2):
        pool.AddSerializedFile(well_known.DESCRIPTOR.serialized_pb)
    common = descriptor_pb2.FileDescriptorProto(
        name="envoy/extensions/common/ratelimit/v3/ratelimit.proto", syntax="proto3",
        package="envoy.extensions.common.ratelimit.v3", dependency=["google/protobuf/wrappers.proto"])
    descriptor = common.message_type.add(name="RateLimitDescriptor")
    descriptor.nested_type.add(name="Entry", field=[_field("key", 1, F.TYPE_STRING), _field("value", 2, F.TYPE_STRING)])
    descriptor.field.extend([
        _field("entries", 1, F.TYPE_MESSAGE, ".envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry", True),
        _field("hits_addend", 3, F.TYPE_MESSAGE, ".google.protobuf.UInt64Value")])
    pool.Add(common)
    rls = descriptor_pb2.FileDescriptorProto(
        name="envoy/service/ratelimit/v3/rls.proto", syntax="proto3", package="envoy.service.ratelimit.v3",
        dependency=[common.name, "google/protobuf/duration.proto"])
    rls.message_type.add(name="RateLimitRequest", field=[
        _field("domain", 1, F.TYPE_STRING),
        _field("descriptors", 2, F.TYPE_MESSAGE, ".envoy.extensions.common.ratelimit.v3.RateLimitDescriptor", True),
        _field("hits_addend", 3, F.TYPE_UINT32)])
    response = rls.message_type.add(name="RateLimitResponse")
    prefix = ".envoy.service.ratelimit.v3.RateLimitResponse"
    response.enum_type.add(name="Code").value.extend(
        descriptor_pb2.EnumValueDescriptorProto(name=n, number=i) for i, n in enumerate(("UNKNOWN", "OK", "OVER_LIMIT")))
    limit = response.nested_type.add(name="RateLimit", field=[
        _field("requests_per_unit", 1, F.TYPE_UINT32), _field("unit", 2, F.TYPE_ENUM, f"{prefix}.RateLimit.Unit")])
    limit.enum_type.add(name="Unit").value.extend(
        descriptor_pb2.EnumValueDescriptorProto(name=n, number=i)
        for n, i in (("UNKNOWN", 0), ("SECOND", 1), ("MINUTE", 2), ("HOUR", 3), ("DAY", 4)))
    response.nested_type.add(name="DescriptorStatus", field=[
        _field("code", 1, F.TYPE_ENUM, f"{prefix}.Code"),
        _field("current_limit", 2, F.TYPE_MESSAGE, f"{prefix}.RateLimit"),
        _field("limit_remaining", 3, F.TYPE_UINT32),
        _field("duration_until_reset", 4, F.TYPE_MESSAGE, ".google.protobuf.Duration")])
    response.field.extend([_field("overall_code", 1, F.TYPE_ENUM, f"{prefix}.Code"),
                           _field("statuses", 2, F.TYPE_MESSAGE, f"{prefix}.DescriptorStatus", True)])
    pool.Add(rls)
    get = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))  # noqa: E731
    return get("envoy.service.ratelimit.v3.RateLimitRequest"), get("envoy.service.ratelimit.v3.RateLimitResponse")


RateLimitRequest, RateLimitResponse = _messages()
SERVICE = "envoy.service.ratelimit.v3.RateLimitService"

UNITS = {"second": (1, 1),
         "minute": (60, 2),
         "hour": (3600, 3),
         "day": (86400, 4)}
OK, OVER_LIMIT = 1, 2


class Limit:
    """A limit on descriptors whose entries are exactly `entries` (key ->
    value; a value of None matches any value, each value counted apart)."""

    def __init__(self, entries, limit, unit):
        self.entries, self.limit, self.unit = entries, limit, unit

    def matches(self, entries):
        return [k for k, _ in entries] == list(self.entries) and all(
            want is None or want == got for (_, got), want in zip(entries, self.entries.values()))


class Service:
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
        response = RateLimitResponse(overall_code=OK)
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
                    current_limit={"requests_per_unit": limit.limit, "unit": unit},
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
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {
        "ShouldRateLimit": grpc.unary_unary_rpc_method_handler(
            service.ShouldRateLimit, request_deserializer=RateLimitRequest.FromString,
            response_serializer=RateLimitResponse.SerializeToString)})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, service

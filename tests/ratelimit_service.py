"""The global rate limit engine for the tests: Debian's redis-server on a
unix socket of a fresh directory (no port to race for), and the project's
rate limit service (target/release/llm-ratelimit: limitador over that
Redis, Envoy's RateLimitService gRPC API) on a loopback port it picks
itself. `check` asks the service the way Envoy does, with hits 0 (a check
that adds nothing), to read what a limit has counted.

The messages are declared here, with the field numbers and types of Envoy's
rls.proto and ratelimit.proto (the fields the tests read and write;
protobuf skips the others). The `xds-protos` package would bring them, but
it also installs an old copy of the OpenTelemetry protos over
`opentelemetry-proto`'s, which breaks tests/test_tracing.py."""

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, wrappers_pb2

import gateway

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
        _field("requests_per_unit", 1, F.TYPE_UINT32), _field("unit", 2, F.TYPE_ENUM, f"{prefix}.RateLimit.Unit"),
        _field("name", 3, F.TYPE_STRING)])
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
BINARY = gateway.ROOT / "target/release/llm-ratelimit"
OK, OVER_LIMIT = 1, 2


def limit(name, max_value, seconds, conditions, variables, namespace="llm_gateway"):
    """One limit of the service's limits file (limitador's format)."""
    return {"namespace": namespace, "name": name, "max_value": max_value, "seconds": seconds,
            "conditions": conditions, "variables": variables}


class Engine:
    """Redis and any number of rate limit services sharing it."""

    def __init__(self, limits):
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server not found: run `make redis-tools` (apt-get install redis-server)")
        # Short: a unix socket path has at most 107 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="llm-rl-"))
        self.socket = self.dir / "redis.sock"
        self.limits = self.dir / "limits.yaml"
        self.limits.write_text(yaml.safe_dump(limits))
        self.redis = None
        self.services = []

    def start_redis(self):
        """Redis with an append-only file: what it counted survives its restart."""
        log = open(self.dir / "redis.log", "ab")
        self.redis = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700",
             "--dir", str(self.dir), "--appendonly", "yes", "--save", ""],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 10
        while not self._pong():
            if self.redis.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis did not start: " + (self.dir / "redis.log").read_text()[-2000:])
            time.sleep(0.02)

    def _pong(self):
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1)
                s.connect(str(self.socket))
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop_redis(self):
        gateway.stop(self.redis)
        self.redis = None

    def start_service(self):
        """A service on a loopback port of its own choosing; returns its process (`.port`)."""
        log = open(self.dir / "service.log", "ab")
        proc = subprocess.Popen(
            [str(BINARY), "--limits", str(self.limits), "--redis", f"unix://{self.socket}",
             "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        line = proc.stdout.readline()
        if not line.startswith("llm-ratelimit listening on "):
            gateway.stop(proc)
            raise RuntimeError(f"llm-ratelimit did not start: {line!r} "
                               + (self.dir / "service.log").read_text()[-2000:])
        proc.port = int(line.split()[3].rsplit(":", 1)[1])
        self.services.append(proc)
        return proc

    def check(self, entries, port=None, domain="llm_gateway"):
        """(code, limit_remaining, limit name) of one descriptor, checked with hits 0."""
        port = port or next(p.port for p in self.services if p.poll() is None)
        request = RateLimitRequest(domain=domain)
        descriptor = request.descriptors.add()
        descriptor.hits_addend.value = 0
        for key, value in entries:
            descriptor.entries.add(key=key, value=value)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(f"/{SERVICE}/ShouldRateLimit",
                                       request_serializer=RateLimitRequest.SerializeToString,
                                       response_deserializer=RateLimitResponse.FromString)
            status = call(request, timeout=5).statuses[0]
        return status.code, status.limit_remaining, status.current_limit.name

    def used(self, entries, max_value):
        return max_value - self.check(entries)[1]

    def stop(self):
        for proc in self.services:
            gateway.stop(proc)
        self.stop_redis()
        shutil.rmtree(self.dir, ignore_errors=True)

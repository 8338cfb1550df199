#!/usr/bin/env python3
"""`make bench-profile`: where the native host's CPU goes, on a large request and a small one.

One native-host Envoy (the gateway's module built with symbols,
`target/profiled/`), the mock, and wrk at c=16 sending a 100 KB Chat
Completions request (where the body's parse and encode show), then the
bench's 1 KB one (where the per-request costs show, and the issue's targets
are), each translated (mock-anthropic) and passed through (mock-openai),
while `perf record` samples the Envoy process. The shares
by object (Envoy, the module, the kernel, libc) and the module's top
symbols go into BENCHMARKS.md's `profile` section: the levers of the
native host are chosen from these, not guessed. Nothing is asserted.

With `PROFILE_BASELINE=<dir holding a libllm_gateway.so>` (`make
bench-profile BASELINE_MODULE=...`, a symbols-kept build of an earlier
commit), that build is profiled too, and both answer the same requests in
alternating rounds: its CPU per request against this build's, per round
(PROFILE_ROUNDS of them, 4 unless set: more where the machine is noisy).

With `PROFILE_METRICS_OFF=1` instead, the second Envoy runs this same build
with `request_metrics` off (no per-request labelled series): the rounds then
say what Envoy's labelled metrics cost per request, metrics off / on.
"""
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402
import gateway  # noqa: E402

MODULE_DIR = gateway.ROOT / "target/profiled/envoy-module"
SIZE = int(os.environ.get("PROFILE_SIZE", "100000"))
SMALL_SIZE = int(os.environ.get("PROFILE_SMALL_SIZE", "1000"))
SECONDS = int(os.environ.get("PROFILE_SECONDS", "10"))
CONNECTIONS = 16
GROUPS = (("mock-anthropic", "translated to Anthropic"), ("mock-openai", "passed through to OpenAI"))
TOP = 12
BASELINE = os.environ.get("PROFILE_BASELINE")
BASELINE_NAME = os.environ.get("PROFILE_BASELINE_NAME", BASELINE)
ROUNDS = int(os.environ.get("PROFILE_ROUNDS", "4"))
METRICS_OFF = os.environ.get("PROFILE_METRICS_OFF") == "1"
if METRICS_OFF and BASELINE:
    sys.exit("PROFILE_METRICS_OFF compares this build with itself: leave PROFILE_BASELINE unset")
# The second Envoy of the comparison, and what it is called in the report.
OTHER = "metrics off" if METRICS_OFF else "baseline"


def perf_report(data, *args):
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "-g", "none", *args],
                         check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].endswith("%") and not line.startswith("#"):
            rows.append((float(parts[0].rstrip("%")), parts[1].replace("[.] ", "").replace("[k] ", "").strip()))
    return rows


def short(symbol):
    # perf pads the symbol column and may add more columns after it.
    symbol = re.split(r"\s{2,}", symbol.strip())[0]
    symbol = symbol.replace("llm_gateway_core::", "").replace("llm_gateway_native::", "native::")
    return symbol if len(symbol) <= 110 else symbol[:107] + "..."


def profile(name, envoy, request, workdir, tag, module):
    """A `perf record` of `envoy` under load: its table lines."""
    data = workdir / f"perf-{tag}.data"
    perf = subprocess.Popen(["perf", "record", "-F", "999", "-o", str(data), "-p", str(envoy.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    run = bench.measure(envoy, request, CONNECTIONS, SECONDS, workdir)
    perf.send_signal(2)
    perf.wait(timeout=60)
    by_object = perf_report(data, "--sort", "dso")
    ours = perf_report(data, "--sort", "symbol", "--dsos", module)
    lines = [f"**{name}**: {run['rps']:.0f} req/s, {1e6 * run['cpu_s'] / max(1, run['requests']):.0f} µs of "
             f"Envoy CPU per request (under perf), {run['failed']} failed.\n",
             "| object | share of Envoy's CPU |", "|---|---|"]
    lines += [f"| {obj} | {share:.1f}% |" for share, obj in by_object if share >= 0.5]
    lines += ["", "| the module's symbol | share of Envoy's CPU |", "|---|---|"]
    lines += [f"| `{short(sym)}` | {share:.2f}% |" for share, sym in ours[:TOP]]
    return lines + [""]


def imported_callbacks(module):
    """The Envoy callbacks `module` (a libllm_gateway.so) imports: the ABI calls it can make."""
    out = subprocess.run(["nm", "-D", "--undefined-only", str(module)], check=True, capture_output=True,
                         text=True).stdout
    return sorted({line.split()[-1] for line in out.splitlines() if "envoy_dynamic_module_callback_" in line})


def abi_calls(envoy, module, request, workdir):
    """How often each Envoy callback runs per request (a uprobe on each one `module`
    imports, counted by `perf stat` over a short wrk run): what the module asks of Envoy.
    {callback: calls per request}, or None where uprobes cannot be set."""
    binary = Path(os.readlink(f"/proc/{envoy.pid}/exe"))
    callbacks = imported_callbacks(module)
    events = {}
    try:
        for i, callback in enumerate(callbacks):
            added = subprocess.run(["perf", "probe", "-q", "-x", str(binary), "--add", f"llm_abi:call{i}={callback}"],
                                   capture_output=True, text=True)
            if added.returncode == 0:
                events[f"llm_abi:call{i}"] = callback
        if not events:
            return None
        out = workdir / "abi-calls.csv"
        stat = subprocess.Popen(["perf", "stat", "-x", ",", "-o", str(out), "-e", ",".join(events),
                                 "-p", str(envoy.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        run = bench.measure(envoy, request, CONNECTIONS, 3, workdir)
        stat.send_signal(2)
        stat.wait(timeout=60)
        counts = {}
        for line in out.read_text().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2] in events and fields[0].isdigit():
                counts[events[fields[2]]] = int(fields[0]) / max(1, run["requests"])
        return counts
    finally:
        subprocess.run(["perf", "probe", "-q", "-d", "llm_abi:*"], capture_output=True)


def abi_table(envoys, requests, workdir):
    """The ABI calls per request of each build, side by side: the table lines."""
    per_build = []
    for (name, envoy, _, module), request in zip(envoys, requests):
        counts = abi_calls(envoy, module, request, workdir)
        if counts is None:
            return ["(No uprobes on this machine: the ABI calls per request were not counted.)", ""]
        per_build.append((name, counts))
    callbacks = sorted({c for _, counts in per_build for c in counts},
                       key=lambda c: -per_build[0][1].get(c, 0))
    short_name = lambda c: c.replace("envoy_dynamic_module_callback_", "")  # noqa: E731
    lines = ["Envoy callbacks the module ran per request (a uprobe on each, counted over a 3 s run):", "",
             "| callback | " + " | ".join(name for name, _ in per_build) + " |",
             "|---|" + "---|" * len(per_build)]
    for callback in callbacks:
        row = [counts.get(callback, 0) for _, counts in per_build]
        if any(round(v, 1) for v in row):
            lines.append(f"| `{short_name(callback)}` | " + " | ".join(f"{v:.1f}" for v in row) + " |")
    lines.append("| **all** | " + " | ".join(f"**{sum(counts.values()):.1f}**" for _, counts in per_build) + " |")
    return lines + [""]


def compare(envoys, requests, workdir):
    """CPU per request of each build, in alternating rounds without perf;
    which build goes first alternates too, so neither always runs on what
    the other left (a warm cache, a load that was rising)."""
    cpu = {name: [] for name, *_ in envoys}
    pairs = list(zip(envoys, requests))
    for round_number in range(ROUNDS):
        for (name, envoy, *_), request in pairs[::-1] if round_number % 2 else pairs:
            run = bench.measure(envoy, request, CONNECTIONS, SECONDS // 2, workdir)
            cpu[name].append(1e6 * run["cpu_s"] / max(1, run["requests"]))
    if METRICS_OFF:
        ratios = sorted(a / b for a, b in zip(cpu[OTHER], cpu["this build"]))
        ratio_name = "metrics off / on"
    else:
        ratios = sorted(a / b for a, b in zip(cpu["this build"], cpu[OTHER]))
        ratio_name = "this build / baseline"
    return [f"Without perf, {ROUNDS} alternating rounds of {SECONDS // 2} s (each Envoy first in every "
            f"other round): CPU per request "
            f"{', '.join(f'{c:.0f}' for c in cpu['this build'])} µs (this build) against "
            f"{', '.join(f'{c:.0f}' for c in cpu[OTHER])} µs ({OTHER}); **{ratio_name}: "
            f"{', '.join(f'{r:.2f}' for r in ratios)}** (round by round, sorted).", ""]


def profile_size(size, envoys, workdir, module):
    """The profile (and comparison) of each group at one request size: the subsection's groups."""
    sections = []
    for group, what in GROUPS:
        body = bench.unified_body(size, False)
        headers = {"content-type": "application/json", "x-model-group": group,
                   "authorization": f"Bearer {bench.CLIENT_KEY}"}
        size_label = f"{len(body) // 1000} KB" if len(body) >= 1000 else f"{len(body)} bytes"
        lines = [f"#### {group}: Chat Completions, {size_label}, {what}\n"]
        requests = []
        for name, envoy, port, _ in envoys:
            request = bench.Request(workdir, f"profile-{size}-{group}-{len(requests)}",
                                    f"http://127.0.0.1:{port}/v1/chat/completions", headers, body)
            status, _ = bench.post(request.url, headers, body)
            if status != 200:
                raise RuntimeError(f"{name}, {group}: {status}")
            requests.append(request)
            bench.measure(envoy, request, CONNECTIONS, 2, workdir)  # warm-up
            lines += profile(name, envoy, request, workdir, f"{size}-{group}-{len(requests)}", module)
        lines += abi_table(envoys, requests, workdir)
        if len(envoys) > 1:
            lines += compare(envoys, requests, workdir)
        sections.append("\n".join(lines) + "\n")
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    return (f"`perf record` (999 Hz) on one native-host Envoy (`--concurrency 1`, pinned to a core) "
            f"for {SECONDS} s of wrk at c={CONNECTIONS}; the module built as released but with its "
            f"symbols kept. Load average at the end: {load}."
            + (f" Baseline: `{BASELINE_NAME}`." if BASELINE else "")
            + (" Against the same build with `request_metrics` off." if METRICS_OFF else "") + "\n\n"
            + "\n".join(sections))


def main():
    module = MODULE_DIR / "libllm_gateway.so"
    if not module.exists():
        sys.exit(f"{module} is missing: `make bench-profile` builds it")
    os.environ.pop("LLM_GATEWAY_HOST", None)
    workdir = Path(tempfile.mkdtemp(prefix="llm-profile-"))
    stack = bench.Stack()
    try:
        mock_port = bench.start_mock(stack, fast=True)
        builds = [("this build", MODULE_DIR, None)]
        if BASELINE:
            builds.append((OTHER, Path(BASELINE), None))
        if METRICS_OFF:
            builds.append((OTHER, MODULE_DIR, bench.unmetered))
        envoys = []
        for name, directory, edit in builds:
            port, admin = bench.free_ports(2)
            env = gateway.native_env()
            env["ENVOY_DYNAMIC_MODULES_SEARCH_PATH"] = str(directory)
            envoy = bench.Envoy(stack, f"gateway-native-profiled-{len(envoys)}", gateway.to_native(
                gateway.build_bootstrap(port, admin, mock_port, env={}, edit=edit)), port, admin, workdir, env=env)
            bench.pin(envoy.pid, bench.GATEWAY_CORE)
            envoys.append((name, envoy, port, directory / "libllm_gateway.so"))
        large = profile_size(SIZE, envoys, workdir, module.name)
        small = profile_size(SMALL_SIZE, envoys, workdir, module.name) if SMALL_SIZE else ""
    finally:
        stack.stop()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"## `make bench-profile`, {now}\n\n"
            f"### Where the native host's CPU goes on a large request\n\n{large}")
    if small:
        text += f"\n### Where the native host's CPU goes on a small request\n\n{small}"
    bench.replace_section("profile", text)


if __name__ == "__main__":
    main()

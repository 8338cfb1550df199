#!/usr/bin/env python3
"""Runs the integration suite on both hosts at once: the wasm filter's leg and
the dynamic module's (LLM_GATEWAY_HOST=native), each in its own pytest with a
temporary directory of its own. Every Envoy, mock and service a test starts
takes ports of 0 and its own directory, so the legs never share one; on a
2-core machine they spend most of their time waiting on Envoy, the vendors'
mock and the clients, so together they take far less than one after the
other. Each line a leg prints is prefixed with its name; the exit status is
the first failing leg's."""

import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = os.environ.get("PY", str(ROOT / ".venv/bin/python"))
LEGS = {"wasm": {}, "native": {"LLM_GATEWAY_HOST": "native"}}


def run(name, extra_env, args, results):
    basetemp = ROOT / ".run" / f"pytest-{name}"
    cmd = [PY, "-m", "pytest", "-q", "-rfE", f"--basetemp={basetemp}", *args]
    env = dict(os.environ, **extra_env)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    for line in proc.stdout:
        sys.stdout.write(f"[{name}] {line}")
        sys.stdout.flush()
    results[name] = proc.wait()


def main():
    args = sys.argv[1:] or ["tests"]
    (ROOT / ".run").mkdir(exist_ok=True)
    results = {}
    threads = [threading.Thread(target=run, args=(name, env, args, results)) for name, env in LEGS.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, code in results.items():
        print(f"{name} leg: {'passed' if code == 0 else f'failed (exit {code})'}")
    sys.exit(next((code for code in results.values() if code), 0))


if __name__ == "__main__":
    main()

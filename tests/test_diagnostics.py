"""The diagnostics view through a real Envoy (two workers), on the host of
the run: traffic that fails over, then what the JSON says of it (every
attempt, backend health, limits with what requests in flight reserve), who
may read it, what it never shows, its paths never routed, and the page in
a real browser (Debian's chromium, headless, driven by Selenium). The
gateway also caches one group and discovers the mock's models (the shipped
configuration's discovery): the cache and discovery sections, the routing
table's discovered state and each request's cache status."""

import json
import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import gateway
from conftest import ALL_GROUPS_KEY, HOST, VENDOR_KEYS, Gateway, configure_test_gateway

ADMIN_KEY = "diagnostics-admin-test-key"
# Screenshots of the page, kept as test artifacts (gitignored).
ARTIFACTS = Path(__file__).resolve().parent / "artifacts" / "diagnostics"
CAPTURE_BYTES = 64
OK_MSG = [{"role": "user", "content": "tell me about failover"}]
RETIRED = "gpt-retired-by-its-vendor"


def configure(config):
    configure_test_gateway(config)
    config["providers"]["mock-openai"]["prices"] = {"*": {"input": 2.5, "output": 10}}
    config["limits"]["rate"] = [{"key": "tester", "tokens_per_hour": 10_000_000}]
    config["diagnostics"] = {
        "admin_keys": [{"name": "oncall", "sha256": gateway.key_hash(ADMIN_KEY)}],
        "recent_requests": 128,
        "capture_content": True,
        "capture_bytes": CAPTURE_BYTES,
        "api_requests_per_second": 50,
    }
    # A cached group, and one naming a model the mock does not list (retired).
    config["model_groups"]["diag-cached"] = {"candidates": [{"cluster": "mock_openai", "provider": "mock-openai"}],
                                             "cache": {"max_entries": 16}}
    config["model_groups"]["diag-retired"] = {"candidates": [
        {"cluster": "mock_openai", "provider": "mock-openai", "model": RETIRED}]}


@pytest.fixture(scope="module")
def diag(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("diagnostics")
    mock, mock_port = gateway.start_mock()
    envoy = None
    try:
        bootstrap = gateway.build_bootstrap(0, 0, mock_port, env={}, edit=configure,
                                            access_log=workdir / "access.log")
        # Two workers: the view is the proxy's, whichever worker recorded a request.
        envoy = gateway.start_envoy(bootstrap, workdir, concurrency=2,
                                    extra_args=["--file-flush-interval-msec", "50"])
        yield Gateway(envoy.port, envoy.admin_port, mock_port, workdir)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)


def view(gw, path="view", query="", key=ADMIN_KEY):
    """(status, headers, JSON) of the view's API; waits out its rate limit (bounded)."""
    headers = {"authorization": f"Bearer {key}" if key else None, "content-type": None}
    for _ in range(50):
        status, hdrs, body = gw.request("GET", f"/llm-gateway/api/{path}" + (f"?{query}" if query else ""),
                                        headers=headers)
        if status != 429:
            return status, hdrs, json.loads(body)
        time.sleep(0.1)
    raise AssertionError("the view stayed rate-limited")


def poll(what, timeout=15.0):
    """`what()` once it is truthy (a bounded poll)."""
    deadline = time.monotonic() + timeout
    while True:
        found = what()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def recorded(gw, request_id):
    """The view's trace of a request, once it is recorded."""
    def find():
        status, _, data = view(gw, f"requests/{request_id}")
        return data if status == 200 else None
    trace = poll(find)
    assert trace, f"{request_id} was not recorded"
    return trace


def failover(gw, request_id, stream=False):
    status, hdrs, data = gw.request("POST", "/v1/chat/completions",
                                    {"model": "any", "messages": OK_MSG, "stream": stream},
                                    {"x-model-group": "mock-failover", "x-request-id": request_id})
    assert status == 200, data[:300]
    return data


def cached(gw, request_id, headers=None):
    """A request on the cached group (the same each time); its `x-llm-cache`."""
    status, hdrs, data = gw.request("POST", "/v1/chat/completions",
                                    {"model": "diag-cached", "messages": OK_MSG},
                                    {"x-request-id": request_id, **(headers or {})})
    assert status == 200, data[:300]
    return hdrs["x-llm-cache"]


def section(gw, name):
    status, _, data = view(gw, name)
    assert status == 200, data
    return data


def test_a_cache_hit_shows_in_the_cache_section_and_in_its_request(diag):
    before = next((g for g in section(diag, "cache")["groups"] if g["group"] == "diag-cached"), None)
    assert before is not None and before["scope"] == "key" and before["max_entries"] == 16
    cached(diag, "diag-cache-1")
    assert cached(diag, "diag-cache-2") == "hit"
    assert cached(diag, "diag-cache-3", {"cache-control": "no-store"}) == "bypass"
    assert recorded(diag, "diag-cache-2")["cache"] == "hit"
    assert recorded(diag, "diag-cache-3")["cache"] == "bypass"
    first = recorded(diag, "diag-cache-1")
    assert first["cache"] in ("miss", "hit"), first  # a hit if another test stored it first
    # A group without a cache: no status.
    failover(diag, "diag-cache-none")
    assert recorded(diag, "diag-cache-none")["cache"] is None
    after = next(g for g in section(diag, "cache")["groups"] if g["group"] == "diag-cached")
    assert after["lookups"] >= before["lookups"] + 2 and after["hits"] >= before["hits"] + 1, after
    assert 0 < after["hit_ratio"] <= 1
    # Priced from the stored usage (mock-openai's prices), held in the store.
    assert after["saved_usd"] > before["saved_usd"], after
    assert after["entries"] >= 1 and 0 < after["bytes"] <= after["max_bytes"], after
    # Filtered to another group, the section shows none.
    status, _, other = view(diag, "cache", "group=mock-failover")
    assert status == 200 and other["groups"] == []


def test_discovery_shows_each_providers_list_and_the_retired_model(diag):
    def read():
        data = section(diag, "discovery")
        mock = next((p for p in data["providers"] if p["provider"] == "mock-openai"), None)
        return (data, mock) if mock and mock["models"] else None
    found = poll(read, timeout=30)
    assert found, section(diag, "discovery")
    data, mock = found
    assert data["enabled"] and data["route"]
    assert mock["models"] >= 2 and mock["failures"] == 0 and mock["last_error"] is None
    assert mock["last_verified"] > 0 and mock["calls"] >= 1
    assert mock["retired"] == [RETIRED]
    # The routing table: the listed model and the retired one, candidate by candidate.
    groups = {g["name"]: g for g in section(diag, "routes")["groups"]}
    listed = groups["diag-cached"]["candidates"][0]
    assert (listed["model"], listed["discovered"]) == ("mock-gpt-4o", True), listed
    assert listed["last_verified"] >= mock["last_verified"]
    gone = groups["diag-retired"]["candidates"][0]
    assert (gone["discovered"], gone["last_verified"]) == (False, None), gone


def test_a_failover_is_recorded_attempt_by_attempt(diag):
    failover(diag, "diag-failover-1")
    trace = recorded(diag, "diag-failover-1")
    assert (trace["group"], trace["key"], trace["cluster"], trace["status"]) == ("mock-failover", "tester", "mock_failover", 200)
    first, second = trace["attempts"]
    assert (first["provider"], first["outcome"], first["retry_on"]) == ("mock-anthropic-down", "503", None)
    assert first["code"] == "UPSTREAM_BUSY"
    assert (second["provider"], second["outcome"], second["retry_on"]) == ("mock-openai", "200", "5xx")
    assert second["start_ms"] >= first["start_ms"] and first["latency_ms"] is not None
    assert second["input_tokens"] > 0 and trace["input_tokens"] == second["input_tokens"]
    assert trace["cost_usd"] > 0, "priced at mock-openai's prices"
    # Captured (this gateway captures content): the first bytes of the prompt.
    assert trace["prompt"].startswith('{"model"') and len(trace["prompt"].encode()) <= CAPTURE_BYTES
    assert trace["cache"] is None and trace["fitting"] is None


def test_health_names_the_failing_vendor_and_the_one_that_answered(diag):
    for i in range(3):
        failover(diag, f"diag-health-{i}")

    def backends():
        _, _, data = view(diag, "health", "group=mock-failover")
        rows = {f'{b["cluster"]}/{b["provider"]}': b for b in data["backends"]}
        down = rows.get("mock_failover/mock-anthropic-down")
        return rows if down and down["consecutive_failures"] >= 3 else None
    rows = poll(backends)
    assert rows, "the failing vendor's streak shows"
    down, up = rows["mock_failover/mock-anthropic-down"], rows["mock_failover/mock-openai"]
    assert down["state"] == "failing" and down["error_rate"] == 1.0
    assert down["last_error"]["outcome"] == "503" and down["last_error"]["code"] == "UPSTREAM_BUSY"
    assert up["state"] == "healthy" and up["failures"] == 0 and up["latency_ms"]["p50"] >= 0
    assert len(up["series"]) == 12 and sum(p["attempts"] for p in up["series"]) == up["attempts"]
    _, _, data = view(diag, "health", "group=mock-failover")
    [cluster] = data["clusters"]
    assert cluster["cluster"] == "mock_failover" and cluster["retried"] >= 3


def test_a_stream_records_its_time_to_first_token_and_answer(diag):
    body = failover(diag, "diag-stream-1", stream=True)
    trace = recorded(diag, "diag-stream-1")
    assert trace["stream"] is True and trace["ttft_ms"] is not None
    assert trace["attempts"][-1]["ttft_ms"] is not None
    # The answer as the client got it, its first bytes.
    assert body.decode().startswith(trace["answer"]) and trace["answer"].startswith("data: ")


def test_every_worker_records_into_one_view(diag):
    ids = [f"diag-workers-{i}" for i in range(16)]
    for request_id in ids:  # a connection each: Envoy spreads them over its workers
        status, _, _ = diag.request("POST", "/v1/chat/completions", {"model": "mock-openai", "messages": OK_MSG},
                                    {"x-request-id": request_id, "connection": "close"})
        assert status == 200

    def all_there():
        _, _, data = view(diag, "requests", "group=mock-openai")
        seen = {r["request_id"] for r in data["requests"]}
        return set(ids) <= seen
    assert poll(all_there)


def test_admin_keys_guard_the_api_and_the_page_holds_no_data(diag):
    for key in (None, ALL_GROUPS_KEY, "not-a-key"):
        status, hdrs, data = view(diag, key=key)
        assert status == 401, data
        assert data["error"]["code"] == "AUTH_FAILED"
        assert hdrs["www-authenticate"].startswith("Bearer")
    status, _, data = view(diag)
    assert status == 200 and data["admin"] == "oncall"
    status, hdrs, page = diag.request("GET", "/llm-gateway/", headers={"authorization": None})
    assert status == 200 and hdrs["content-type"].startswith("text/html")
    assert "script-src 'self'" in hdrs["content-security-policy"]
    status, hdrs, script = diag.request("GET", "/llm-gateway/app.js", headers={"authorization": None})
    assert status == 200 and b'LLMGW.section("health"' in script
    assert b"diag-failover" not in page + script


def test_the_prefix_never_reaches_a_vendor(diag, test_id):
    cases = [("POST", "/llm-gateway/v1/chat/completions", 405), ("GET", "/llm-gateway/v1/models", 404),
             ("GET", "/llm-gateway/api/unknown", 404), ("DELETE", "/llm-gateway/api/view", 405),
             ("GET", "/llm-gateway/..%2Fv1%2Fmodels", 404)]
    for method, path, expected in cases:
        body = {"model": "mock-openai", "messages": OK_MSG} if method == "POST" else None
        status, hdrs, data = diag.request(method, path, body,
                                          {"x-test-id": test_id, "authorization": f"Bearer {ADMIN_KEY}"})
        assert status == expected, (path, data)
        assert json.loads(data)["error"]["param"] in ("path", "method"), data
    assert diag.mock_requests(test_id) == []


def test_the_view_never_shows_a_secret(diag):
    diag.request("POST", "/v1/chat/completions", {"model": "mock-openai", "messages": OK_MSG},
                 {"x-request-id": "diag-secrets", "x-secret-test": "s3cr3t-header-value"})
    recorded(diag, "diag-secrets")
    texts = []
    for path in ("view", "requests", "routes", "limits", "health", "requests/diag-secrets"):
        _, _, data = view(diag, path)
        texts.append(json.dumps(data))
    text = "\n".join(texts)
    for secret in (*VENDOR_KEYS, ALL_GROUPS_KEY, ADMIN_KEY, "s3cr3t-header-value", "x-secret-test"):
        assert secret not in text, secret


def test_limits_show_what_requests_in_flight_reserve(diag):
    def row():
        _, _, data = view(diag, "limits", "key=tester")
        [tokens] = [r for r in data["rows"] if r["limit_field"] == "tokens_per_hour"]
        return tokens
    before = row()
    slow = threading.Thread(target=lambda: diag.request(
        "POST", "/v1/chat/completions", {"model": "mock-openai", "messages": OK_MSG, "max_tokens": 50},
        {"x-mock-scenario": "slow=4000", "x-request-id": "diag-in-flight"}))
    slow.start()
    try:
        held = poll(lambda: (r := row())["reserved"] > 0 and r)
        assert held, "the slow request's reservation shows while it is in flight"
        assert held["reserved"] >= 50 and held["left"] == held["limit"] - held["used"] - held["reserved"]
    finally:
        slow.join(timeout=30)
    after = poll(lambda: (r := row())["reserved"] == 0 and r["used"] > before["used"] and r)
    assert after, "settled when it ended: nothing reserved, what it used counted"


def test_bad_filters_are_refused_naming_the_parameter(diag):
    status, _, data = view(diag, "requests", "status=teapot")
    assert status == 400 and data["error"]["param"] == "status"
    status, _, data = view(diag, "requests", "colour=red")
    assert status == 400 and data["error"]["param"] == "colour"


def test_the_api_is_rate_limited_per_proxy(diag):
    headers = {"authorization": f"Bearer {ADMIN_KEY}", "content-type": None}
    statuses = []
    for _ in range(400):
        status, hdrs, _ = diag.request("GET", "/llm-gateway/api", headers=headers)
        statuses.append(status)
        if status == 429:
            assert hdrs["retry-after"] == "1"
            break
    assert statuses[-1] == 429 and set(statuses) == {200, 429}
    assert poll(lambda: diag.request("GET", "/llm-gateway/api", headers=headers)[0] == 200)
    stat = diag.stat("wasmcustom.llm_gateway.diagnostics_requests;outcome=rate_limited")
    assert stat is not None and int(stat) >= 1


# The page in a real browser.

def chrome(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1800", f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))


def test_the_page_shows_the_failover_in_a_real_browser(diag, tmp_path):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait
    for i in range(3):
        failover(diag, f"diag-page-{i}")
    diag.request("POST", "/v1/chat/completions", {"model": "mock-openai", "messages": OK_MSG},
                 {"x-request-id": "diag-page-bad", "x-mock-scenario": "error-500"})
    cached(diag, "diag-page-miss")
    assert cached(diag, "diag-page-hit") == "hit"
    recorded(diag, "diag-page-bad")
    recorded(diag, "diag-page-hit")
    # The page is paused below: discovery has read the mock's lists by then.
    assert poll(lambda: any(p["models"] for p in section(diag, "discovery")["providers"]), timeout=30)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser = chrome(tmp_path)
    # The page re-renders as it polls: an element found may be replaced
    # before it is read, and is then looked for again.
    wait = WebDriverWait(browser, 20, ignored_exceptions=(StaleElementReferenceException, NoSuchElementException))
    try:
        browser.get(f"{diag.base}/llm-gateway/?interval=500")
        # No key yet: the page asks for one.
        wait.until(ready.visibility_of_element_located((By.ID, "admin-key"))).send_keys(ADMIN_KEY)
        browser.find_element(By.CSS_SELECTOR, "#login button").click()

        def backend(name, what="data-state"):
            row = f'section[data-section="health"] tr[data-backend="{name}"]'
            return lambda b: b.find_element(By.CSS_SELECTOR, row).get_attribute(what)
        assert wait.until(backend("mock_failover/mock-anthropic-down")) == "failing"
        assert wait.until(backend("mock_failover/mock-openai")) == "healthy"
        # The backends' charts are drawn.
        assert wait.until(lambda b: b.find_elements(
            By.CSS_SELECTOR, 'tr[data-backend="mock_failover/mock-anthropic-down"] svg.spark'))
        # Paused, so that the rows stay put while they are clicked.
        browser.find_element(By.ID, "live").click()
        wait.until(lambda b: "paused" in b.find_element(By.ID, "status").text)

        def opened(b):
            # A render may replace the row between finding and clicking it: then again.
            try:
                row = b.find_element(By.CSS_SELECTOR, 'tr[data-request-id="diag-page-2"]')
                text = row.text
                row.click()
                return text
            except (StaleElementReferenceException, NoSuchElementException):
                return False
        text = wait.until(opened)
        assert "mock-anthropic-down:503" in text and "mock-openai:200" in text
        bars = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, '[data-detail="diag-page-2"] .timeline rect.bar'))
        assert [bar.get_attribute("data-outcome") for bar in bars] == ["503", "200"]
        detail = browser.find_element(By.CSS_SELECTOR, '[data-detail="diag-page-2"]')
        assert "retry on 5xx" in detail.text
        browser.save_screenshot(str(ARTIFACTS / f"{HOST}-failover.png"))
        # The routing table and the limits are there too.
        assert wait.until(lambda b: b.find_element(
            By.CSS_SELECTOR, 'section[data-section="routes"] tr[data-group="mock-failover"]'))
        assert wait.until(lambda b: b.find_element(
            By.CSS_SELECTOR, 'section[data-section="limits"] tr[data-key="tester"]'))
        # The cache and discovery sections, and a request's cache status.
        assert wait.until(lambda b: b.find_element(
            By.CSS_SELECTOR, 'section[data-section="cache"] tr[data-group="diag-cached"]').get_attribute("data-hits")) != "0"
        assert wait.until(lambda b: b.find_element(
            By.CSS_SELECTOR, 'section[data-section="discovery"] tr[data-provider="mock-openai"]')
            .get_attribute("data-retired")) == RETIRED
        assert browser.find_element(By.CSS_SELECTOR, 'tr[data-request-id="diag-page-hit"]').get_attribute("data-cache") == "hit"
        assert browser.find_element(By.CSS_SELECTOR, 'tr[data-request-id="diag-page-2"]').get_attribute("data-cache") == "none"
        assert browser.find_element(By.CSS_SELECTOR,
                                    'section[data-section="routes"] tr[data-group="diag-retired"]').get_attribute("data-discovered") == "false"
        browser.execute_script('document.querySelector(\'section[data-section="cache"]\').scrollIntoView()')
        browser.save_screenshot(str(ARTIFACTS / f"{HOST}-cache-discovery.png"))
        # Filtered to 5xx: the failed request stays, the failovers (answered 200) go.
        Select(browser.find_element(By.ID, "filter-status")).select_by_value("5xx")
        wait.until(lambda b: not b.find_elements(By.CSS_SELECTOR, 'tr[data-request-id="diag-page-2"]')
                   and b.find_elements(By.CSS_SELECTOR, 'tr[data-request-id="diag-page-bad"]'))
        # And to a group.
        Select(browser.find_element(By.ID, "filter-status")).select_by_value("")
        Select(browser.find_element(By.ID, "filter-group")).select_by_value("mock-failover")
        wait.until(lambda b: not b.find_elements(By.CSS_SELECTOR, 'tr[data-request-id="diag-page-bad"]')
                   and b.find_elements(By.CSS_SELECTOR, 'tr[data-request-id="diag-page-2"]'))
        browser.save_screenshot(str(ARTIFACTS / f"{HOST}-filtered.png"))
        # Nothing the page ran failed: its console has no error but the
        # refused requests before the key was given (the browser logs those).
        errors = [e for e in browser.get_log("browser")
                  if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]
        assert not errors, errors
    finally:
        browser.quit()

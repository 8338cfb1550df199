"""What api.openai.com would do, through every vendor: the request each
vendor model accepts, fields only the gateway reads, retry-after from any
form a vendor gives it."""

from conftest import ALL_GROUPS_KEY  # noqa: F401  (the gw fixture's key)

USER_HI = [{"role": "user", "content": "hi"}]


def test_openai_reasoning_models_get_what_they_accept(gw, test_id):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI, "max_tokens": 50,
                                     "temperature": 0.3, "top_p": 0.5, "presence_penalty": 0.1, "user": "u1"},
                                    **{"x-model-group": "reasoning", "x-test-id": test_id})
    assert status == 200, body
    assert headers["x-llm-model"] == "o3"
    [seen] = gw.mock_requests(test_id)
    sent = seen["body"]
    assert sent["model"] == "o3"
    assert sent["max_completion_tokens"] == 50
    for dropped in ("max_tokens", "temperature", "top_p", "presence_penalty"):
        assert dropped not in sent, dropped
    assert sent["user"] == "u1"


def test_other_openai_models_get_the_clients_parameters(gw, test_id):
    status, _, body = gw.chat({"model": "m", "messages": USER_HI, "max_tokens": 50, "temperature": 0.3},
                              **{"x-model-group": "mock-openai", "x-test-id": test_id})
    assert status == 200, body
    [seen] = gw.mock_requests(test_id)
    assert (seen["body"]["max_tokens"], seen["body"]["temperature"]) == (50, 0.3)


def test_gateway_only_fields_never_reach_openai(gw, test_id):
    for store, expected in [(None, None), (True, {"team": "search"})]:
        body = {"model": "m", "messages": USER_HI, "request_id": f"{test_id}-{store}",
                "metadata": {"task_type": "code", "team": "search"}}
        if store:
            body["store"] = True
        status, _, answer = gw.chat(body, **{"x-model-group": "mock-openai", "x-test-id": test_id})
        assert status == 200, answer
        sent = gw.mock_requests(test_id)[-1]["body"]
        assert sent.get("metadata") == expected
        assert "request_id" not in sent
        assert sent["messages"] == USER_HI


def test_gemini_retry_info_becomes_retry_after(gw):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": "mock-gemini", "x-mock-scenario": "error-429"})
    assert status == 429, body
    assert body["error"]["code"] == "UPSTREAM_RATE_LIMIT" and body["error"]["type"] == "requests"
    assert headers["retry-after"] == "7"


def test_a_single_vendor_429_is_not_retried_and_its_delay_reaches_the_client(gw, test_id):
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": "mock-anthropic", "x-mock-scenario": "error-429",
                                       "x-test-id": test_id})
    assert status == 429, body
    assert headers["retry-after"] == "7"
    assert len(gw.mock_requests(test_id)) == 1, "no storm against the vendor that refused"


def test_a_failover_429_moves_to_the_next_vendor(gw, test_id):
    # mock-failover: an Anthropic primary that always fails, then the OpenAI mock.
    status, headers, body = gw.chat({"model": "m", "messages": USER_HI},
                                    **{"x-model-group": "mock-failover", "x-test-id": test_id})
    assert status == 200, body
    assert headers["x-llm-provider"] == "mock-openai"
    assert [r["path"].endswith("/v1/messages") for r in gw.mock_requests(test_id)] == [True, False]


def test_shipped_hcms_close_cut_streams_promptly():
    # A vendor that cuts a stream ends the client's HTTP/1.1 connection; with
    # Envoy's default delayed_close_timeout (1 s) every cut stream ended 1 s late.
    import gateway
    import yaml
    for name in ["gateway.yaml", "failover.yaml", "sidecar.yaml", "tracing.yaml", "hot-reload/gateway.yaml",
                 "compose/envoy.yaml"]:
        doc = yaml.safe_load((gateway.ROOT / "envoy" / name).read_text())
        for listener in doc["static_resources"]["listeners"]:
            hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
            assert hcm["delayed_close_timeout"] == "0.1s", name


def test_a_circuit_breaker_refusal_says_so(tmp_path):
    # mock_openai allows one request at a time here: the second of two
    # concurrent ones is refused by Envoy's breaker, not by the vendor.
    import json
    import threading
    import gateway
    from conftest import Gateway

    def edit_bootstrap(bootstrap):
        for cluster in bootstrap["static_resources"]["clusters"]:
            if cluster["name"] == "mock_openai":
                cluster["circuit_breakers"] = {"thresholds": [{"max_requests": 1, "max_pending_requests": 1,
                                                               "max_connections": 1}]}
    mock, mock_port = gateway.start_mock()
    port, admin_port = gateway.free_port(), gateway.free_port()
    envoy = None
    try:
        bootstrap = gateway.build_bootstrap(port, admin_port, mock_port, env={}, edit_bootstrap=edit_bootstrap)
        envoy = gateway.start_envoy(bootstrap, tmp_path, admin_port)
        gw = Gateway(port, admin_port, mock_port, tmp_path, key=None)
        results = []

        def call():
            results.append(gw.chat({"model": "m", "messages": USER_HI},
                                   **{"x-model-group": "mock-openai", "x-mock-scenario": "slow=400"}))
        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused = [body for status, _, body in results if status == 503]
        assert refused, [r[0] for r in results]
        for body in refused:
            err = body["error"]
            assert err["code"] == "UPSTREAM_BUSY", json.dumps(err)
            assert err["message"].startswith(
                "The server is overloaded or not ready yet: the gateway's circuit breaker for this provider is open"), err
        assert any(status == 200 for status, _, _ in results)
    finally:
        gateway.stop(envoy)
        gateway.stop(mock)

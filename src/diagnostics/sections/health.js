// Backend health: one row per provider behind a cluster, with its state,
// rates, percentiles, streak, last error and small charts; then Envoy's
// verdicts per cluster (response flags).
LLMGW.section("health", function (data, el, ctx) {
  const { el: h, table, sparkline, fmt } = LLMGW;
  el.append(h("p", { class: "muted" },
    `attempts of the last ${data.window_s} s the ring still holds` +
      (data.since_ms ? ` (since ${fmt.time(data.since_ms)})` : "")));
  if (!data.backends.length) {
    el.append(h("p", { class: "empty" }, "no attempt recorded in the window"));
  } else {
    el.append(table([
      { title: "backend", value: (b) => h("span", {}, h("strong", {}, b.provider), h("span", { class: "muted" }, ` via ${b.cluster}`)) },
      { title: "state", value: (b) => h("span", { class: `badge ${b.state}` }, b.state) },
      { title: "attempts", value: (b) => fmt.num(b.attempts), num: true },
      { title: "success", value: (b) => fmt.pct(b.success_rate), num: true },
      { title: "errors", value: (b) => h("span", { class: b.failures ? "bad" : "" }, fmt.pct(b.error_rate)), num: true },
      { title: "latency p50 / p90 / p99", value: (b) => `${fmt.ms(b.latency_ms.p50)} / ${fmt.ms(b.latency_ms.p90)} / ${fmt.ms(b.latency_ms.p99)}`, num: true },
      { title: "TTFT p50 / p90", value: (b) => (b.ttft_ms ? `${fmt.ms(b.ttft_ms.p50)} / ${fmt.ms(b.ttft_ms.p90)}` : "–"), num: true },
      { title: "failures in a row", value: (b) => `${b.consecutive_failures}${b.streak_reaches_window ? "+" : ""}`, num: true },
      { title: "last error", value: (b) => (b.last_error
        ? h("span", { class: "bad", title: b.last_error.request_id },
            `${b.last_error.outcome}${b.last_error.code ? ` ${b.last_error.code}` : ""}, ${fmt.ago(b.last_error.at_ms, ctx.now)}`)
        : "–") },
      { title: "latency", value: (b) => sparkline(b.series.map((p) => p.p50_ms), { label: `median latency of ${b.provider} over the window` }) },
      { title: "error rate", value: (b) => sparkline(b.series.map((p) => (p.attempts ? p.failures / p.attempts : null)), { bars: true, max: 1, label: `error rate of ${b.provider} over the window` }) },
    ], data.backends, (b) => ({ "data-backend": `${b.cluster}/${b.provider}`, "data-state": b.state })));
  }
  if (data.clusters.length) {
    el.append(h("h3", {}, "Envoy, per cluster (response flags)"));
    el.append(table([
      { title: "cluster", value: (c) => c.cluster },
      { title: "requests", value: (c) => fmt.num(c.requests), num: true },
      { title: "retried", value: (c) => fmt.num(c.retried), num: true },
      { title: "no healthy upstream (UH)", value: (c) => fmt.num(c.no_healthy_upstream), num: true },
      { title: "overflow (UO)", value: (c) => fmt.num(c.overflow), num: true },
      { title: "retries exhausted (URX)", value: (c) => fmt.num(c.retry_limit_exceeded), num: true },
      { title: "timeouts (UT)", value: (c) => fmt.num(c.timeouts), num: true },
      { title: "connection failures (UF, UR, UC)", value: (c) => fmt.num(c.connection_failures), num: true },
    ], data.clusters, (c) => ({ "data-cluster": c.cluster })));
  }
});

// Recent requests: newest first, filtered by the page's filters; a row
// opens the request's attempt timeline (and its captured content, if any).
LLMGW.section("requests", function (data, el, ctx) {
  const { el: h, svg, table, fmt, outcomeClass } = LLMGW;
  el.append(h("p", { class: "muted" },
    `${data.matching} of the ${data.recorded} requests the ring holds (it keeps ${data.ring_size})`));
  if (!data.requests.length) {
    el.append(h("p", { class: "empty" }, "no request matches"));
    return;
  }
  const select = (r) => {
    ctx.state.selected = ctx.state.selected === r.request_id ? null : r.request_id;
    ctx.rerender();
  };
  el.append(table([
    { title: "time", value: (r) => fmt.time(r.at_ms) },
    { title: "request id", value: (r) => r.request_id },
    { title: "surface", value: (r) => r.surface },
    { title: "group", value: (r) => r.group || "–" },
    { title: "key", value: (r) => r.key || "–" },
    { title: "status", value: (r) => h("span", { class: `badge ${outcomeClass(r.status, "")}` }, `${r.status}${r.code ? ` ${r.code}` : ""}`) },
    { title: "attempts", value: (r) => r.attempts.map((a) => `${a.provider}:${a.outcome}`).join(" → ") || "–" },
    { title: "duration", value: (r) => fmt.ms(r.duration_ms), num: true },
    { title: "TTFT", value: (r) => fmt.ms(r.ttft_ms), num: true },
    { title: "tokens in / out", value: (r) => `${r.input_tokens} / ${r.output_tokens}${r.usage_estimated ? " ~" : ""}`, num: true },
    { title: "cost", value: (r) => fmt.usd(r.cost_usd), num: true },
    { title: "cache", value: (r) => r.cache || h("span", { class: "muted" }, "none") },
    { title: "fitting", value: (r) => r.fitting || "–" },
  ], data.requests, (r) => ({
    class: `selectable${ctx.state.selected === r.request_id ? " selected" : ""}`,
    "data-request-id": r.request_id, "data-status": r.status, "data-cache": r.cache || "none", onclick: () => select(r),
  })));
  const chosen = data.requests.find((r) => r.request_id === ctx.state.selected);
  if (chosen) el.append(detail(chosen));

  function detail(r) {
    const box = h("div", { class: "detail", "data-detail": r.request_id },
      h("h3", {}, `request ${r.request_id}: ${r.surface} ${r.operation} on ${r.group || "no group"}, ${r.stream ? "streamed" : "not streamed"}`),
      timeline(r));
    box.append(table([
      { title: "#", value: (a) => a.n, num: true },
      { title: "provider", value: (a) => a.provider },
      { title: "vendor model", value: (a) => a.model },
      { title: "why Envoy made it", value: (a) => (a.retry_on ? `retry on ${a.retry_on}` : "first attempt") },
      { title: "outcome", value: (a) => h("span", { class: `badge ${outcomeClass(a.status, a.outcome)}` }, `${a.outcome}${a.code ? ` ${a.code}` : ""}`) },
      { title: "started", value: (a) => (a.start_ms === null ? "–" : `+${fmt.ms(a.start_ms)}`), num: true },
      { title: "latency", value: (a) => fmt.ms(a.latency_ms), num: true },
      { title: "TTFT", value: (a) => fmt.ms(a.ttft_ms), num: true },
      { title: "tokens in / out", value: (a) => `${fmt.num(a.input_tokens)} / ${fmt.num(a.output_tokens)}`, num: true },
      { title: "context fitting", value: (a) => a.context || "–" },
    ], r.attempts, (a) => ({ "data-attempt": a.n, "data-outcome": a.outcome })));
    const facts = [
      r.envoy_flags.length ? `Envoy flags: ${r.envoy_flags.join(", ")}` : null,
      r.rate_limit ? `refused by limit ${r.rate_limit}` : null,
      r.client_disconnected ? "the client left before the end" : null,
      r.attempts_dropped ? `${r.attempts_dropped} attempts left out` : null,
    ].filter(Boolean);
    if (facts.length) box.append(h("p", { class: "muted" }, facts.join("; ")));
    const content = h("div", { class: "content-box" });
    box.append(content);
    ctx.api(`requests/${encodeURIComponent(r.request_id)}?`).then(({ status, body }) => {
      if (status !== 200) return;
      if (body.prompt !== undefined) content.append(h("h3", {}, "prompt (captured)"), h("pre", { class: "content" }, body.prompt));
      if (body.answer !== undefined) content.append(h("h3", {}, "answer (captured)"), h("pre", { class: "content" }, body.answer));
    });
    return box;
  }

  // The attempts on one time axis: each a bar from its start to its end.
  function timeline(r) {
    const width = 900, row = 22, left = 8;
    const end = Math.max(1, r.duration_ms, ...r.attempts.map((a) => (a.start_ms || 0) + (a.latency_ms || 0)));
    const x = (ms) => left + (ms / end) * (width - 2 * left - 260);
    const chart = svg("svg", { viewBox: `0 0 ${width} ${row * r.attempts.length + 24}`, role: "img", "aria-label": `attempt timeline of ${r.request_id}` });
    r.attempts.forEach((a, i) => {
      const start = a.start_ms || 0, length = a.latency_ms || 0;
      const y = 4 + i * row;
      chart.append(svg("rect", { class: `bar ${outcomeClass(a.status, a.outcome)}`, "data-attempt": a.n, "data-outcome": a.outcome,
        x: x(start), y, width: Math.max(2, x(start + length) - x(start)), height: row - 8, rx: 2 }));
      chart.append(svg("text", { x: x(start + length) + 6, y: y + row / 2 }, `#${a.n} ${a.provider} ${a.outcome}${a.code ? ` ${a.code}` : ""}, ${fmt.ms(length)}${a.retry_on ? ` (retry on ${a.retry_on})` : ""}`));
    });
    chart.append(svg("text", { x: left, y: row * r.attempts.length + 18 }, `0 — ${fmt.ms(end)}`));
    return h("div", { class: "timeline" }, chart);
  }
});

// Model discovery: each provider's last good list, its reads, its retired models.
LLMGW.section("discovery", function (data, el) {
  const { el: h, table, fmt } = LLMGW;
  if (!data.enabled) {
    el.append(h("p", { class: "empty" }, "model discovery is off (discovery)"));
    return;
  }
  el.append(h("p", { class: "muted" },
    `read every ${fmt.num(data.interval_seconds)} s; ${data.route ? "routes to listed models" : "does not route to listed models"}; ` +
    `${data.avoid_retired ? "retired models are no candidates" : "retired models are flagged only"}`));
  el.append(table([
    { title: "provider", value: (p) => p.provider },
    { title: "models listed", value: (p) => (p.models === null ? h("span", { class: "muted" }, "none read yet") : fmt.num(p.models)), num: true },
    { title: "last verified", value: (p) => (p.last_verified ? fmt.time(p.last_verified) : "–") },
    { title: "next read", value: (p) => (p.next_at_ms ? fmt.time(p.next_at_ms) : "–") },
    { title: "failures in a row", value: (p) => h("span", { class: p.failures ? "bad" : "" }, String(p.failures)), num: true },
    { title: "last error", value: (p) => p.last_error || "–" },
    { title: "calls", value: (p) => fmt.num(p.calls), num: true },
    { title: "retired (configured, not listed)", value: (p) => (p.retired.length ? h("span", { class: "bad" }, p.retired.join(", ")) : "none") },
  ], data.providers, (p) => ({ "data-provider": p.provider, "data-retired": p.retired.join(" ") })));
});

// The routing table: each group's candidates, then the rules and providers.
LLMGW.section("routes", function (data, el) {
  const { el: h, table, fmt } = LLMGW;
  if (data.default_group) el.append(h("p", { class: "muted" }, `requests naming no group go to ${data.default_group}`));
  const rows = data.groups.flatMap((g) => g.candidates.map((c, i) => ({ group: g, c, first: i === 0 })));
  el.append(table([
    { title: "group", value: (r) => (r.first ? h("strong", {}, r.group.name) : "") },
    { title: "cluster", value: (r) => r.c.cluster },
    { title: "provider", value: (r) => r.c.provider || h("span", { class: "muted" }, "the cluster's endpoints") },
    { title: "dialect", value: (r) => r.c.dialect || "–" },
    { title: "vendor model", value: (r) => r.c.model || h("span", { class: "muted" }, "the client's") },
    { title: "weight", value: (r) => `${r.c.weight} (${fmt.pct(r.c.share)})`, num: true },
    { title: "capabilities", value: (r) => capabilities(r.c.capabilities) },
    { title: "fallback", value: (r) => (r.first && r.group.fallback.length ? `${r.group.fallback.join(" → ")} via ${r.group.ladder_cluster}` : "") },
    { title: "discovered", value: (r) => (r.c.discovered === null ? "–" : r.c.discovered ? "listed" : h("span", { class: "bad" }, "not listed (retired)")) },
    { title: "last verified", value: (r) => (r.c.last_verified ? fmt.time(r.c.last_verified) : "–") },
  ], rows, (r) => ({ "data-group": r.group.name, "data-cluster": r.c.cluster, "data-discovered": r.c.discovered === null ? "" : String(r.c.discovered) })));
  if (data.rules.length) {
    el.append(h("h3", {}, "rules (highest priority first)"));
    el.append(table([
      { title: "priority", value: (r) => r.priority, num: true },
      { title: "model", value: (r) => r.model || "any" },
      { title: "headers", value: (r) => r.headers.join(", ") || "–" },
      { title: "task type", value: (r) => r.task_type || "any" },
      { title: "group", value: (r) => r.group },
    ], data.rules));
  }
  el.append(h("h3", {}, "providers"));
  el.append(table([
    { title: "provider", value: (p) => p.name },
    { title: "dialect", value: (p) => p.dialect },
    { title: "host", value: (p) => `${p.host || "(the cluster's)"}${p.base_path}` },
    { title: "models", value: (p) => Object.entries(p.models).map(([k, v]) => `${k} → ${v}`).join(", ") || "the client's" },
    { title: "priced", value: (p) => p.priced.join(", ") || "–" },
  ], data.providers, (p) => ({ "data-provider": p.name })));

  function capabilities(c) {
    const no = ["tools", "vision", "json"].filter((k) => !c[k]).map((k) => `no ${k}`);
    if (c.context_window) no.push(`${fmt.num(c.context_window)}-token window`);
    if (c.max_output_tokens) no.push(`≤ ${fmt.num(c.max_output_tokens)} output`);
    return no.join(", ") || "all";
  }
});

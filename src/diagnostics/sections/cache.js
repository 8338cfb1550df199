// The response cache: each cached group's hits, savings and store.
LLMGW.section("cache", function (data, el) {
  const { el: h, table, fmt } = LLMGW;
  if (!data.groups.length) {
    el.append(h("p", { class: "empty" }, "no group is cached (model_groups.<name>.cache)"));
    return;
  }
  const bytes = (n) => (n === null ? "–" : n < 1024 ? `${n} B` : n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`);
  el.append(table([
    { title: "group", value: (g) => h("strong", {}, g.group) },
    { title: "scope", value: (g) => (g.scope === "key" ? "per key" : "shared by the group") },
    { title: "caches", value: (g) => (g.when === "always" ? "every request" : "deterministic requests") },
    { title: "lookups", value: (g) => fmt.num(g.lookups), num: true },
    { title: "hits", value: (g) => fmt.num(g.hits), num: true },
    { title: "hit ratio", value: (g) => (g.hit_ratio === null ? "–" : fmt.pct(g.hit_ratio)), num: true },
    { title: "saved", value: (g) => fmt.usd(g.saved_usd), num: true },
    { title: "held", value: (g) => `${bytes(g.bytes)} of ${bytes(g.max_bytes)}`, num: true },
    { title: "entries", value: (g) => `${fmt.num(g.entries)} of ${fmt.num(g.max_entries)}`, num: true },
    { title: "entry at most", value: (g) => bytes(g.max_entry_bytes), num: true },
    { title: "time to live", value: (g) => `${fmt.num(g.ttl_seconds)} s`, num: true },
  ], data.groups, (g) => ({ "data-group": g.group, "data-hits": g.hits, "data-lookups": g.lookups })));
});

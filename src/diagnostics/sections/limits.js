// Limits and budgets per key and group, in their current windows.
LLMGW.section("limits", function (data, el) {
  const { el: h, table, fmt } = LLMGW;
  if (!data.rows.length) {
    el.append(h("p", { class: "empty" }, "no limit applies (limits.rate)"));
    return;
  }
  const amount = (row, v) => (row.unit === "usd" ? fmt.usd(v) : fmt.num(v));
  el.append(table([
    { title: "key", value: (r) => r.key || h("span", { class: "muted" }, "all keys") },
    { title: "group", value: (r) => r.group || h("span", { class: "muted" }, "all groups") },
    { title: "limit", value: (r) => `${r.limit_field} (${r.unit.replace("_", " ")} per ${r.window})` },
    { title: "limit", value: (r) => amount(r, r.limit), num: true },
    { title: "used", value: (r) => amount(r, r.used), num: true },
    { title: "reserved in flight", value: (r) => amount(r, r.reserved), num: true },
    { title: "left", value: (r) => h("span", { class: r.left <= 0 ? "bad" : r.left < r.limit * 0.2 ? "warn" : "" }, amount(r, r.left)), num: true },
    { title: "resets in", value: (r) => fmt.ms(r.resets_in_ms), num: true },
  ], data.rows, (r) => ({ "data-limit": `${r.scope}.${r.limit_field}`, "data-key": r.key, "data-group": r.group })));
  if (data.truncated) el.append(h("p", { class: "muted" }, `${data.truncated} more rows left out`));
});

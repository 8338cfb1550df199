// The diagnostics page's core: polls the view's JSON, keeps the filters
// and the admin key, and hands each section's data to the renderer its
// script registered (LLMGW.section). It knows no section itself. Data is
// only ever put in the page as text (never as HTML).
"use strict";
(function () {
  const KEY_STORE = "llm-gateway-admin-key";
  const renderers = new Map();
  const state = {
    filters: { group: "", key: "", status: "" },
    key: sessionStorage.getItem(KEY_STORE) || "",
    live: true,
    interval: Math.max(500, Number(new URLSearchParams(location.search).get("interval")) || 2000),
    selected: null,
    last: null,
    timer: null,
  };

  // A DOM element: attributes (class, data-*, on*) and children (nodes or text).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }
  function append(node, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    return append(node, children);
  }

  // A table: columns are {title, value(row) -> text or node, num: bool}; rowAttrs(row) adds attributes.
  function table(columns, rows, rowAttrs) {
    const head = el("tr", {}, columns.map((c) => el("th", { class: c.num ? "num" : null }, c.title)));
    const body = rows.map((row) =>
      el("tr", rowAttrs ? rowAttrs(row) : {}, columns.map((c) => el("td", { class: c.num ? "num" : null }, c.value(row)))));
    return el("table", {}, el("thead", {}, head), el("tbody", {}, body));
  }

  // A small chart: values (numbers or null) as a line, or as bars with {bars: true}.
  function sparkline(values, opts) {
    const o = Object.assign({ width: 120, height: 24, bars: false, max: null, label: "" }, opts || {});
    const present = values.filter((v) => v !== null && v !== undefined);
    const max = o.max || Math.max(1, ...present);
    const step = o.width / Math.max(1, values.length);
    const y = (v) => o.height - 1 - (v / max) * (o.height - 2);
    const chart = svg("svg", { class: "spark", width: o.width, height: o.height, viewBox: `0 0 ${o.width} ${o.height}`, role: "img", "aria-label": o.label });
    chart.append(svg("line", { class: "base", x1: 0, y1: o.height - 0.5, x2: o.width, y2: o.height - 0.5 }));
    if (o.bars) {
      values.forEach((v, i) => {
        if (v) chart.append(svg("rect", { class: "err", x: i * step + 1, y: y(v), width: Math.max(1, step - 2), height: o.height - 1 - y(v) }));
      });
    } else {
      const points = values.map((v, i) => (v === null || v === undefined ? null : `${(i + 0.5) * step},${y(v)}`)).filter(Boolean);
      if (points.length) chart.append(svg("polyline", { class: "line", points: points.join(" ") }));
    }
    chart.append(svg("title", {}, o.label));
    return chart;
  }

  const fmt = {
    ms: (v) => (v === null || v === undefined ? "–" : v < 1000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`),
    pct: (v) => (v === null || v === undefined ? "–" : `${(v * 100).toFixed(v > 0 && v < 0.1 ? 1 : 0)}%`),
    usd: (v) => (v === null || v === undefined ? "–" : `$${v < 0.01 ? v.toFixed(6) : v.toFixed(4)}`),
    num: (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US", { maximumFractionDigits: 6 })),
    time: (ms) => (ms ? new Date(ms).toLocaleTimeString("en-GB", { hour12: false }) : "–"),
    ago: (ms, now) => (ms ? `${Math.max(0, Math.round(((now || Date.now()) - ms) / 1000))} s ago` : "never"),
  };

  // An outcome's class: ok, warn (429, client errors) or bad.
  function outcomeClass(status, outcome) {
    if (outcome === "reset" || status === 0) return "reset";
    if (status >= 500) return "bad";
    if (status >= 400) return "warn";
    return "ok";
  }

  function headers() {
    return state.key ? { authorization: `Bearer ${state.key}` } : {};
  }

  function query() {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(state.filters)) if (value) params.set(name, value);
    return params.toString();
  }

  async function api(path) {
    const q = query();
    const response = await fetch(`api/${path}${q && !path.includes("?") ? `?${q}` : ""}`, { headers: headers(), cache: "no-store" });
    const body = await response.json().catch(() => ({}));
    return { status: response.status, body, retryAfter: Number(response.headers.get("retry-after")) || 1 };
  }

  function setStatus(text, bad) {
    const node = document.getElementById("status");
    node.textContent = text;
    node.className = bad ? "bad" : "";
  }

  function showLogin(message) {
    const form = document.getElementById("login");
    form.hidden = false;
    document.getElementById("login-error").textContent = message || "";
    document.getElementById("admin-key").focus();
  }

  function fillSelect(id, values, label) {
    const select = document.getElementById(id);
    const current = select.value;
    const wanted = ["", ...values];
    const have = Array.from(select.options).map((o) => o.value);
    if (wanted.join("\u0000") === have.join("\u0000")) return;
    select.replaceChildren(...wanted.map((v) => el("option", { value: v }, v === "" ? "all" : label ? label(v) : v)));
    select.value = wanted.includes(current) ? current : "";
  }

  function render(view) {
    state.last = view;
    const filters = view.filters || {};
    fillSelect("filter-group", filters.groups || []);
    fillSelect("filter-key", filters.keys || [], (k) => k);
    const statusSelect = document.getElementById("filter-status");
    for (const code of filters.statuses || []) {
      if (!Array.from(statusSelect.options).some((o) => o.value === String(code))) {
        statusSelect.append(el("option", { value: String(code) }, String(code)));
      }
    }
    const main = document.getElementById("sections");
    for (const part of view.sections) {
      let panel = document.querySelector(`section[data-section="${CSS.escape(part.name)}"]`);
      if (!panel) {
        panel = el("section", { class: "panel", "data-section": part.name, id: `section-${part.name}` },
          el("h2", {}, part.title), el("div", { class: "body" }));
        main.append(panel);
      }
      const body = panel.querySelector(".body");
      const renderer = renderers.get(part.name);
      const ctx = { now: view.generated_at_ms, state, api, rerender: () => render(state.last) };
      try {
        body.replaceChildren();
        if (renderer) renderer(part.data, body, ctx);
        else body.append(el("pre", { class: "content" }, JSON.stringify(part.data, null, 2)));
      } catch (e) {
        body.replaceChildren(el("p", { class: "bad" }, `this section could not be shown: ${e}`));
      }
    }
    const who = view.admin ? `as ${view.admin}` : "from this host";
    setStatus(`updated ${fmt.time(view.generated_at_ms)} (${who})${state.live ? `, every ${state.interval / 1000} s` : ", paused"}`);
    document.getElementById("forget-key").hidden = !state.key;
  }

  async function poll() {
    clearTimeout(state.timer);
    let wait = state.interval;
    try {
      const { status, body, retryAfter } = await api("view");
      if (status === 200) {
        document.getElementById("login").hidden = true;
        render(body);
      } else if (status === 401) {
        setStatus("an admin key is needed", true);
        showLogin(state.key ? "that key was refused" : "");
        return;
      } else if (status === 429) {
        wait = retryAfter * 1000;
        setStatus("rate-limited: waiting", true);
      } else {
        setStatus(`the view answered ${status}: ${(body.error && body.error.message) || ""}`, true);
      }
    } catch (e) {
      setStatus(`the gateway did not answer (${e})`, true);
    }
    if (state.live) state.timer = setTimeout(poll, wait);
  }

  window.LLMGW = {
    section(name, render) { renderers.set(name, render); },
    el, svg, table, sparkline, fmt, outcomeClass, state,
  };

  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("login").addEventListener("submit", (e) => {
      e.preventDefault();
      state.key = document.getElementById("admin-key").value.trim();
      sessionStorage.setItem(KEY_STORE, state.key);
      poll();
    });
    document.getElementById("forget-key").addEventListener("click", () => {
      state.key = "";
      sessionStorage.removeItem(KEY_STORE);
      poll();
    });
    for (const name of Object.keys(state.filters)) {
      document.getElementById(`filter-${name}`).addEventListener("change", (e) => {
        state.filters[name] = e.target.value;
        poll();
      });
    }
    document.getElementById("live").addEventListener("change", (e) => {
      state.live = e.target.checked;
      poll();
    });
    document.getElementById("refresh").addEventListener("click", poll);
    poll();
  });
})();

/* tiltframe dashboard page: plain JavaScript, no build step, no external URLs.
 *
 * Talks to the JSON API of `tiltframe serve` (relative URLs, so the page also works under a path prefix):
 *   GET  api/aggregations                     the aggregations, their measures, granularities, zone, stored range
 *   GET  api/aggregations/{name}/series?...   one series per group-by key, for the chart and the table
 *   GET  api/status                           the running pipeline's counters
 *   GET  api/rejected/{name}?limit=20         the latest rejected events
 *   POST api/query                            the query box
 * For browser tests: window.tiltframe = {series, drawnAt} holds the data given to the chart, and
 * document.body.dataset.state becomes "ready" after each successful draw, "error" after a failed one.
 */
(function () {
  "use strict";

  const REFRESH_MS = 2000;
  const MAX_SERIES = 10;
  const MAX_TABLE_ROWS = 1000;
  const REJECTED_LIMIT = 20;
  const NUMERIC = new Set(["int", "long", "float", "double", "integer", "bigint", "short", "byte", "decimal"]);
  const TOKEN_KEY = "tiltframe.token";
  // Finest to coarsest; a granularity the API names but this list lacks is still offered, just never chosen by default.
  const GRAIN_ORDER = ["seconds", "minutes", "hours", "days", "weeks", "months", "years"];
  // Nominal lengths, to count a level's buckets in a range (months and years vary; close enough for a default).
  const NOMINAL_MS = { seconds: 1e3, minutes: 6e4, hours: 3.6e6, days: 8.64e7, weeks: 6.048e8, months: 2.6298e9,
    years: 3.15576e10 };
  const MIN_POINTS = 12;
  const PALETTE = ["#2f6fde", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0c8599",
    "#a61e4d", "#5c940d", "#d9480f", "#495057"];

  const $ = (id) => document.getElementById(id);

  window.tiltframe = { series: null, drawnAt: null };

  const state = {
    aggregations: [],     // from api/aggregations
    agg: null,            // the selected aggregation's entry
    applied: null,        // the parameters of the last Draw: {agg, measure, per, start, end, on}
    chart: null,          // the uPlot instance
    chartKey: null,       // labels + measure + per + zone the chart was built for (rebuilt when it changes)
    zoom: null,           // {min, max} of the x scale when the user zoomed in, else null
    dataRange: null,      // [min, max] of the drawn x values
    drawSeq: 0,           // discards answers to superseded requests
    timer: null,
    errors: new Map(),    // source -> {message, hint, auth}
    status: null,
  };

  // ---------------------------------------------------------------- authentication and fetch

  let memoryToken = null; // when sessionStorage is unavailable

  function readTokenFromHash() {
    const m = /(?:^#|&)token=([^&]*)/.exec(window.location.hash);
    if (!m) return;
    try {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    } catch (e) {
      memoryToken = decodeURIComponent(m[1]);
    }
    // Take the token out of the address bar (and so out of bookmarks and screenshots).
    const rest = window.location.hash.replace(/(^#|&)token=[^&]*/, "$1").replace(/^#&/, "#").replace(/&$/, "");
    history.replaceState(null, "", window.location.pathname + window.location.search + (rest === "#" ? "" : rest));
  }

  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || memoryToken; } catch (e) { return memoryToken; }
  }
  function setToken(value) {
    memoryToken = value;
    try { sessionStorage.setItem(TOKEN_KEY, value); } catch (e) { /* kept in memory */ }
  }

  class ApiError extends Error {
    constructor(status, body, fallback) {
      super((body && body.error) || fallback);
      this.status = status;
      this.line = body && body.line;
      this.column = body && body.column;
      this.hint = body && body.hint;
    }
  }

  async function api(path, options) {
    const headers = Object.assign({ Accept: "application/json" }, (options && options.headers) || {});
    const t = token();
    if (t) headers.Authorization = "Bearer " + t;
    let response;
    try {
      response = await fetch(path, Object.assign({}, options || {}, { headers, cache: "no-store" }));
    } catch (e) {
      throw new ApiError(0, null, "cannot reach the server (" + e.message + ")");
    }
    let body = null;
    const text = await response.text();
    if (text) {
      try { body = JSON.parse(text); } catch (e) { body = null; }
    }
    if (!response.ok) {
      const fallback = response.status === 401 ? "this server needs a token"
        : "HTTP " + response.status + " " + response.statusText + " on " + path;
      throw new ApiError(response.status, body, fallback);
    }
    if (body === null) throw new ApiError(response.status, null, "not JSON from " + path);
    return body;
  }

  // ---------------------------------------------------------------- errors

  function setError(source, err) {
    if (!err) {
      if (state.errors.delete(source)) renderErrors();
      return;
    }
    const auth = err.status === 401;
    let message = err.message || String(err);
    if (err.line != null) message += " (line " + err.line + (err.column != null ? ", column " + err.column : "") + ")";
    const before = state.errors.get(source);
    if (before && before.message === message && before.hint === (err.hint || null) && before.auth === auth) return;
    state.errors.set(source, { message, hint: err.hint || null, auth });
    renderErrors(); // only when something changed, so a half-typed token survives the refreshes
  }

  function renderErrors() {
    const box = $("error");
    box.replaceChildren();
    let auth = false;
    for (const [source, e] of state.errors) {
      if (e.auth) { auth = true; continue; }
      const item = el("div", { class: "error-item" }, source + ": " + e.message);
      if (e.hint) item.append(el("span", { class: "hint" }, e.hint));
      box.append(item);
    }
    if (auth) {
      const item = el("div", { class: "error-item" },
        token() ? "The token was refused. Enter another one:" : "This server needs a token. Enter it:");
      const input = el("input", { id: "token", type: "password", placeholder: "token", autocomplete: "off" });
      const form = el("form", {}, input, el("button", { type: "submit" }, "Use token"));
      form.addEventListener("submit", (ev) => {
        ev.preventDefault();
        if (!input.value.trim()) return;
        setToken(input.value.trim());
        for (const [source, e] of state.errors) if (e.auth) state.errors.delete(source);
        renderErrors();
        start();
      });
      item.append(form);
      box.append(item);
    }
    box.hidden = box.childElementCount === 0;
  }

  // ---------------------------------------------------------------- small DOM helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }

  function table(target, headers, rows) {
    // headers: [{text, class}], rows: [{attrs, cells: [{text, class, attrs}]}]
    const thead = el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", { class: h.class, title: h.title }, h.text))));
    const tbody = el("tbody");
    for (const r of rows) {
      const tr = el("tr", r.attrs || {});
      for (const c of r.cells) tr.append(el("td", Object.assign({ class: c.class, title: c.title }, c.attrs || {}), c.text));
      tbody.append(tr);
    }
    target.replaceChildren(thead, tbody);
  }

  const numberFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 6 });
  function fmtNumber(v) {
    if (v === null || v === undefined) return "—";
    if (typeof v === "number") return numberFormat.format(v);
    return String(v);
  }
  const countFormat = new Intl.NumberFormat("en-US");
  function fmtCount(v) {
    return v === null || v === undefined ? "—" : typeof v === "number" ? countFormat.format(v) : String(v);
  }

  function fmtDuration(seconds) {
    if (seconds === null || seconds === undefined) return "—";
    let s = Math.floor(seconds);
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    const pad = (n) => String(n).padStart(2, "0");
    if (d) return d + "d " + pad(h) + "h " + pad(m) + "m";
    if (h) return h + "h " + pad(m) + "m " + pad(s) + "s";
    if (m) return m + "m " + pad(s) + "s";
    return (Math.round(seconds * 10) / 10) + "s";
  }

  // ---------------------------------------------------------------- time zones
  // A zone is an IANA name (Intl knows it), UTC/GMT, or a fixed offset such as +05:30.

  const FIXED_ZONE = /^(?:UTC|GMT)?\s*([+-])(\d{1,2})(?::?(\d{2}))?$/i;
  const dtfCache = new Map();

  function zoneOffsetMs(ms, zone) {
    if (!zone || /^(UTC|GMT|Z|Etc\/UTC|Etc\/GMT)$/i.test(zone)) return 0;
    const fixed = FIXED_ZONE.exec(zone);
    if (fixed) return (fixed[1] === "-" ? -1 : 1) * (Number(fixed[2]) * 60 + Number(fixed[3] || 0)) * 60000;
    let dtf = dtfCache.get(zone);
    if (dtf === undefined) {
      try {
        dtf = new Intl.DateTimeFormat("en-US", {
          timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
          hour: "2-digit", minute: "2-digit", second: "2-digit", era: "short",
        });
      } catch (e) {
        dtf = null; // unknown to this browser: times are shown in UTC (and say so)
      }
      dtfCache.set(zone, dtf);
    }
    if (!dtf) return 0;
    const whole = Math.floor(ms / 1000) * 1000;
    const p = {};
    for (const part of dtf.formatToParts(new Date(whole))) p[part.type] = part.value;
    let year = Number(p.year);
    if (p.era === "BC" || p.era === "B") year = 1 - year;
    const wall = Date.UTC(year, Number(p.month) - 1, Number(p.day), Number(p.hour) % 24, Number(p.minute), Number(p.second));
    // Date.UTC maps years 0..99 to 1900..1999.
    const fixedWall = year >= 0 && year < 100 ? new Date(wall).setUTCFullYear(year) : wall;
    return fixedWall - whole;
  }

  function zoneKnown(zone) {
    if (!zone || FIXED_ZONE.test(zone) || /^(UTC|GMT|Z)$/i.test(zone)) return true;
    zoneOffsetMs(0, zone);
    return dtfCache.get(zone) !== null;
  }

  /** The wall-clock fields of an instant in a zone, as the UTC fields of a Date. */
  function wallDate(ms, zone) {
    return new Date(ms + zoneOffsetMs(ms, zone));
  }

  /** The instant of a wall-clock time in a zone (the earlier one when the clock goes back). */
  function fromWall(wallMs, zone) {
    const off1 = zoneOffsetMs(wallMs, zone);
    let t = wallMs - off1;
    const off2 = zoneOffsetMs(t, zone);
    if (off2 !== off1) t = wallMs - off2;
    return t;
  }

  function pad(n, w) { return String(n).padStart(w || 2, "0"); }

  /** ISO-like text of an instant in the zone, to the precision of a granularity (or milliseconds). */
  function fmtTime(ms, zone, per) {
    if (ms === null || ms === undefined) return "—";
    const d = wallDate(ms, zone);
    const date = pad(d.getUTCFullYear(), 4) + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
    const hm = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes());
    const sec = pad(d.getUTCSeconds());
    switch (per) {
      case "years": return pad(d.getUTCFullYear(), 4);
      case "months": return date.slice(0, 7);
      case "days": case "weeks": return date;
      case "hours": case "minutes": return date + " " + hm;
      case "seconds": return date + " " + hm + ":" + sec;
      default: {
        const msPart = d.getUTCMilliseconds();
        return date + " " + hm + ":" + sec + (msPart ? "." + pad(msPart, 3) : "");
      }
    }
  }

  const ISO_INPUT = /^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?)?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$/i;

  /** Reads a start/end input: empty -> null; an ISO date/time (in the zone unless it has an offset) or epoch ms -> ms. */
  function parseTimeInput(text, zone) {
    const s = text.trim();
    if (!s) return null;
    if (/^-?\d{9,}$/.test(s)) return Number(s); // epoch milliseconds
    const m = ISO_INPUT.exec(s);
    if (!m) throw new Error("cannot read '" + s + "' as a time: write 2024-01-01 or 2024-01-01T10:00");
    const [year, month, day, hour, minute, second, frac] =
      [m[1], m[2] || 1, m[3] || 1, m[4] || 0, m[5] || 0, m[6] || 0, (m[7] || "0").padEnd(3, "0")].map(Number);
    let wall = Date.UTC(year, month - 1, day, hour, minute, second, frac);
    if (year < 100) wall = new Date(wall).setUTCFullYear(year);
    const back = new Date(wall);
    if (back.getUTCMonth() !== month - 1 || back.getUTCDate() !== day || back.getUTCHours() !== hour ||
        back.getUTCMinutes() !== minute || back.getUTCSeconds() !== second) {
      throw new Error("'" + s + "' is not a valid date or time");
    }
    if (m[8]) {
      if (m[8].toUpperCase() === "Z") return wall;
      const o = /([+-])(\d{2}):?(\d{2})/.exec(m[8]);
      return wall - (o[1] === "-" ? -1 : 1) * (Number(o[2]) * 60 + Number(o[3])) * 60000;
    }
    return fromWall(wall, zone);
  }

  /** A Date whose local fields show the zone's wall clock: what uPlot's tzDate option wants. */
  function uplotTzDate(ms, zone) {
    const d = wallDate(ms, zone);
    const local = new Date(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(),
      d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds());
    if (d.getUTCFullYear() < 100) local.setFullYear(d.getUTCFullYear());
    return local;
  }

  // ---------------------------------------------------------------- aggregations and controls

  function groupByNames(agg) {
    return (agg.group_by || []).map((g) => (typeof g === "string" ? g : g.name));
  }
  function groupByType(agg, name) {
    for (const g of agg.group_by || []) if (typeof g === "object" && g && g.name === name) return g.type || null;
    return null;
  }

  function numericMeasures(agg) {
    return (agg.measures || []).filter((m) => NUMERIC.has(String(m.type || "").toLowerCase()));
  }

  function granularities(agg) {
    const gs = (agg.granularities || []).slice();
    const rank = (g) => { const i = GRAIN_ORDER.indexOf(g); return i < 0 ? -1 : i; };
    return gs.sort((a, b) => rank(a) - rank(b));
  }

  /**
   * The coarsest granularity with at least MIN_POINTS buckets in the stored range (a line worth drawing),
   * else the coarsest with 2, else days if offered, else the finest.
   */
  function defaultPer(agg) {
    const gs = granularities(agg);
    if (!gs.length) return null;
    const tables = new Map((agg.tables || []).map((t) => [t.granularity, t]));
    let fallback = null;
    for (let i = gs.length - 1; i >= 0; i--) {
      const g = gs[i];
      const t = tables.get(g);
      const span = t && t.first_bucket != null && t.last_bucket != null ? [t.first_bucket, t.last_bucket]
        : agg.first_event != null && agg.last_event != null ? [agg.first_event, agg.last_event] : null;
      if (!span || !NOMINAL_MS[g]) continue;
      const buckets = Math.floor((span[1] - span[0]) / NOMINAL_MS[g]) + 1;
      if (buckets >= MIN_POINTS) return g;
      if (buckets >= 2 && fallback === null) fallback = g;
    }
    return fallback || (gs.includes("days") ? "days" : gs[0]);
  }

  function fillSelect(select, items, selected) {
    // items: [{value, text}]
    select.replaceChildren(...items.map((it) => el("option", { value: it.value }, it.text)));
    if (selected !== undefined && items.some((it) => it.value === selected)) select.value = selected;
  }

  function selectAggregation(name, keepChoices) {
    const agg = state.aggregations.find((a) => a.name === name) || state.aggregations[0] || null;
    const previous = state.agg;
    state.agg = agg;
    if (!agg) return;
    $("aggregation").value = agg.name;
    const same = keepChoices && previous && previous.name === agg.name;

    const measures = numericMeasures(agg);
    fillSelect($("measure"), measures.map((m) => ({ value: m.name, text: m.name + " (" + m.function + ")" })),
      same ? $("measure").value : undefined);

    const gs = granularities(agg);
    fillSelect($("per"), gs.map((g) => ({ value: g, text: g })), same ? $("per").value : defaultPer(agg));

    const keys = $("keys");
    const old = new Map([...keys.querySelectorAll("input[data-key]")].map((i) => [i.dataset.key, i.value]));
    const legend = keys.querySelector("legend");
    keys.replaceChildren(legend);
    for (const k of groupByNames(agg)) {
      const input = el("input", { type: "text", "data-key": k, placeholder: "all", spellcheck: "false" });
      if (same && old.has(k)) input.value = old.get(k);
      keys.append(el("label", {}, k, input));
    }
    keys.classList.toggle("none", groupByNames(agg).length === 0);

    if (!same) {
      $("start").value = "";
      $("end").value = "";
    }
    renderAggregationInfo();
  }

  function renderAggregationInfo() {
    const agg = state.agg;
    if (!agg) { $("aggregation-info").textContent = ""; return; }
    const zone = agg.zone || "UTC";
    const parts = [];
    if (agg.source) parts.push("from " + agg.source);
    if (groupByNames(agg).length) parts.push("group by " + groupByNames(agg).join(", "));
    if (agg.first_event != null) {
      parts.push("events " + fmtTime(agg.first_event, zone) + " … " + fmtTime(agg.last_event, zone));
    } else {
      parts.push("no events stored yet");
    }
    const ev = agg.events;
    if (ev) {
      parts.push(fmtCount(ev.read) + " read, " + fmtCount(ev.aggregated) + " aggregated, " +
        fmtCount(ev.moved) + " moved, " + fmtCount(ev.rejected) + " rejected");
    }
    $("aggregation-info").textContent = parts.join(" · ");
    const note = zoneKnown(zone) ? "times in " + zone : "times in UTC (this browser does not know the zone " + zone + ")";
    $("zone-note").textContent = note;
    $("start").placeholder = agg.first_event != null ? "from " + fmtTime(agg.first_event, zone, "days") : "whole stored range";
    $("end").placeholder = "to the latest";
  }

  function quoteValue(value, type) {
    const v = value.trim();
    if (/^(["']).*\1$/.test(v)) return v; // already a literal
    const t = (type || "").toLowerCase();
    if (t === "bool" || t === "boolean") return v.toLowerCase();
    if (NUMERIC.has(t)) return v;
    if (!t && /^-?\d+(\.\d+)?$/.test(v)) return v; // type unknown: a number stays a number
    return '"' + v.replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';
  }

  /** The `on` condition from the group-by inputs: values of one attribute or-ed, attributes and-ed. */
  function keysCondition(agg) {
    const groups = [];
    for (const input of $("keys").querySelectorAll("input[data-key]")) {
      const name = input.dataset.key;
      const values = input.value.split(",").map((v) => v.trim()).filter((v) => v);
      if (!values.length) continue;
      const type = groupByType(agg, name);
      groups.push(values.map((v) => name + " == " + quoteValue(v, type)));
    }
    if (groups.length === 1) return groups[0].join(" or ");
    return groups.map((terms) => (terms.length > 1 ? "(" + terms.join(" or ") + ")" : terms[0])).join(" and ");
  }

  /** The parameters of a draw from the controls; throws with a readable message on a bad time. */
  function readControls() {
    const agg = state.agg;
    const zone = agg.zone || "UTC";
    const p = { agg: agg.name, measure: $("measure").value, per: $("per").value, zone, start: null, end: null, on: "" };
    for (const which of ["start", "end"]) {
      const input = $(which);
      input.classList.remove("invalid");
      try {
        p[which] = parseTimeInput(input.value, zone);
      } catch (e) {
        input.classList.add("invalid");
        throw new Error(which + ": " + e.message);
      }
    }
    if (p.start !== null && p.end !== null && p.end <= p.start) {
      $("end").classList.add("invalid");
      throw new Error("end: must come after start (the end is excluded)");
    }
    p.on = keysCondition(agg);
    return p;
  }

  // ---------------------------------------------------------------- series: chart and table

  function seriesUrl(p) {
    const q = new URLSearchParams({ per: p.per, measure: p.measure, max_series: String(MAX_SERIES) });
    if (p.start !== null) q.set("start", String(p.start));
    if (p.end !== null) q.set("end", String(p.end));
    if (p.on) q.set("on", p.on);
    return "api/aggregations/" + encodeURIComponent(p.agg) + "/series?" + q.toString();
  }

  function seriesLabel(s, i) {
    if (s.label !== undefined && s.label !== null && s.label !== "") return String(s.label);
    const values = s.key ? Object.values(s.key) : [];
    return values.length ? values.join(" / ") : "series " + (i + 1);
  }

  /** Aligns the series on the union of their timestamps: uPlot's [xs, ys1, ys2, ...]. */
  function alignedData(json) {
    const xs = new Set();
    for (const s of json.series || []) for (const pt of s.points || []) xs.add(pt[0]);
    const x = [...xs].sort((a, b) => a - b);
    const index = new Map(x.map((t, i) => [t, i]));
    const ys = (json.series || []).map((s) => {
      const y = new Array(x.length).fill(null);
      for (const pt of s.points || []) y[index.get(pt[0])] = pt[1] === null || pt[1] === undefined ? null : Number(pt[1]);
      return y;
    });
    return [x, ...ys];
  }

  function chartWidth() {
    return Math.max(300, $("chart").clientWidth || $("chart").parentElement.clientWidth - 28);
  }

  function buildChart(json, data, p) {
    const zone = json.zone || p.zone;
    const labels = (json.series || []).map(seriesLabel);
    const opts = {
      width: chartWidth(),
      height: 340,
      ms: 1,
      tzDate: (ts) => uplotTzDate(ts, zone),
      cursor: { drag: { x: true, y: false, setScale: true } },
      scales: { x: { time: true } },
      legend: { live: true },
      axes: [
        { stroke: "#656d76", grid: { stroke: "#eef0f2" }, ticks: { stroke: "#dde1e6" } },
        { stroke: "#656d76", grid: { stroke: "#eef0f2" }, ticks: { stroke: "#dde1e6" }, size: 70,
          values: (u, splits) => splits.map((v) => fmtNumber(v)) },
      ],
      series: [
        { label: "time (" + zone + ")", value: (u, v) => (v == null ? "—" : fmtTime(v, zone, p.per)) },
        ...labels.map((label, i) => ({
          label,
          stroke: PALETTE[i % PALETTE.length],
          width: 1.75,
          spanGaps: true,
          points: { size: 5 },
          value: (u, v) => fmtNumber(v),
        })),
      ],
      hooks: {
        setScale: [(u, key) => {
          if (key !== "x" || !state.dataRange) return;
          const min = u.scales.x.min, max = u.scales.x.max;
          const [dmin, dmax] = state.dataRange;
          state.zoom = min > dmin || max < dmax ? { min, max } : null;
        }],
      },
    };
    if (state.chart) state.chart.destroy();
    $("chart").replaceChildren();
    state.chart = new uPlot(opts, data, $("chart"));
  }

  function drawChart(json, p) {
    const data = alignedData(json);
    const labels = (json.series || []).map(seriesLabel);
    const key = JSON.stringify([labels, p.agg, p.measure, p.per, json.zone || p.zone]);
    const zoom = key === state.chartKey ? state.zoom : null;
    const empty = data[0].length === 0;
    $("chart-empty").hidden = !empty;
    $("chart-empty").textContent = empty ? "No data in this range" + (state.agg && state.agg.first_event == null ? " yet." : ".") : "";
    $("chart").hidden = empty;
    state.dataRange = empty ? null : [data[0][0], data[0][data[0].length - 1]];
    if (empty) {
      if (state.chart) { state.chart.destroy(); state.chart = null; }
      state.chartKey = null;
      state.zoom = null;
      return;
    }
    if (state.chart && key === state.chartKey) {
      if (zoom) {
        state.chart.setData(data, false);
        state.chart.setScale("x", zoom);
      } else {
        state.chart.setData(data);
      }
    } else {
      state.zoom = null;
      buildChart(json, data, p);
      state.chartKey = key;
    }
  }

  function drawTable(json, p) {
    const zone = json.zone || p.zone;
    const series = json.series || [];
    const labels = series.map(seriesLabel);
    const byTs = new Map();
    series.forEach((s, i) => {
      for (const [ts, v] of s.points || []) {
        if (!byTs.has(ts)) byTs.set(ts, new Array(series.length).fill(undefined));
        byTs.get(ts)[i] = v;
      }
    });
    const all = [...byTs.keys()].sort((a, b) => b - a); // newest first
    const shown = all.slice(0, MAX_TABLE_ROWS);
    const headers = [{ text: "AGG_TIMESTAMP (" + zone + ")" }, ...labels.map((l) => ({ text: l, class: "num", title: p.measure }))];
    const rows = shown.map((ts) => ({
      attrs: { "data-ts": String(ts) },
      cells: [
        { text: fmtTime(ts, zone, p.per), class: "time", title: String(ts) },
        ...byTs.get(ts).map((v, i) => {
          const missing = v === undefined || v === null;
          return {
            text: v === undefined ? "" : fmtNumber(v),
            class: "num" + (missing ? " null" : ""),
            attrs: { "data-value": missing ? "" : String(v), "data-series": labels[i] },
          };
        }),
      ],
    }));
    table($("table"), headers, rows);
    $("table-note").textContent = all.length > shown.length
      ? "latest " + shown.length + " of " + all.length + " buckets"
      : all.length + " bucket" + (all.length === 1 ? "" : "s");
  }

  function drawNotes(json, p) {
    const total = json.series_total;
    const n = (json.series || []).length;
    let note = p.measure + " per " + p.per;
    if (typeof total === "number" && total > n) note += " · showing " + n + " of " + total + " series";
    else note += " · " + n + " series";
    if (p.on) note += " · on " + p.on;
    $("series-note").textContent = note;
    $("chart-title").textContent = p.agg;
  }

  async function drawSeries(p) {
    const seq = ++state.drawSeq;
    try {
      const json = await api(seriesUrl(p));
      if (seq !== state.drawSeq) return;
      drawChart(json, p);
      drawTable(json, p);
      drawNotes(json, p);
      window.tiltframe = { series: json, drawnAt: Date.now(), params: p };
      setError("series", null);
      document.body.dataset.state = "ready";
    } catch (e) {
      if (seq !== state.drawSeq) return;
      setError("series", e);
      document.body.dataset.state = "error";
    }
  }

  // ---------------------------------------------------------------- status and rejected events

  async function refreshStatus() {
    try {
      const st = await api("api/status");
      state.status = st;
      renderStatus(st);
      setError("status", null);
    } catch (e) {
      setError("status", e);
      $("pipeline-badge").className = "badge badge-error";
      $("pipeline-badge").textContent = "status unavailable";
    }
  }

  function renderStatus(st) {
    const box = $("status");
    const pipeline = st.pipeline;
    const badge = $("pipeline-badge");
    const zone = (state.agg && state.agg.zone) || "UTC";
    $("status-note").textContent = "times in " + zone;
    const nodes = [];
    if (pipeline && pipeline.running) {
      badge.className = "badge badge-running";
      badge.textContent = "pipeline running";
    } else {
      badge.className = "badge badge-idle";
      badge.textContent = pipeline ? "pipeline stopped" : "no pipeline";
    }
    const kv = el("dl", { class: "kv" },
      el("dt", {}, "pipeline"), el("dd", {}, pipeline ? (pipeline.running ? "running" : "stopped") : "none in this server"));
    if (pipeline) {
      kv.append(el("dt", {}, "started"), el("dd", {}, fmtTime(pipeline.started_at, zone)));
      kv.append(el("dt", {}, "uptime"), el("dd", {}, fmtDuration(pipeline.uptime_seconds)));
    }
    nodes.push(kv);
    const aggs = Object.entries(st.aggregations || {});
    if (aggs.length) {
      const t = el("table", { id: "status-table" });
      const selected = state.agg && state.agg.name;
      table(t,
        [{ text: "aggregation" }, { text: "batches", class: "num" }, { text: "read", class: "num" },
          { text: "aggregated", class: "num" }, { text: "moved", class: "num" }, { text: "rejected", class: "num" },
          { text: "events/s", class: "num" }, { text: "watermark" }, { text: "last batch" }],
        aggs.map(([name, a]) => {
          return {
            attrs: { "data-aggregation": name, class: name === selected ? "selected" : null },
            cells: [
              { text: name },
              { text: fmtCount(a.batches), class: "num" },
              { text: fmtCount(a.events_read), class: "num" },
              { text: fmtCount(a.events_aggregated), class: "num" },
              { text: fmtCount(a.events_moved), class: "num" },
              { text: fmtCount(a.events_rejected), class: "num" },
              { text: a.events_per_second == null ? "—" : fmtNumber(Math.round(a.events_per_second * 10) / 10), class: "num" },
              { text: fmtTime(a.watermark, zone), class: "time" },
              { text: fmtTime(a.last_batch_at, zone), class: "time" },
            ],
          };
        }));
      nodes.push(el("div", { class: "scroll" }, t));
      const skipped = aggs.flatMap(([name, a]) => (a.values_skipped || []).map((v) => [name, v]));
      if (skipped.length) nodes.push(skippedTable(skipped, selected));
    } else if (pipeline) {
      nodes.push(el("p", { class: "muted" }, "No batch has run yet."));
    }
    box.replaceChildren(...nodes);
  }

  // Per aggregation and measure that takes an argument: the events whose argument was null or NaN, which the
  // measure skipped (as the store totals them; "unknown" where no committed batch counted them).
  function skippedTable(skipped, selected) {
    const t = el("table", { id: "skipped-table" });
    const share = (v) => v.skipped == null ? "unknown"
      : v.events ? (Math.round(1000 * v.skipped / v.events) / 10).toFixed(1) + "%" : "—";
    table(t,
      [{ text: "aggregation" }, { text: "measure" },
        { text: "values skipped", class: "num", title: "events whose argument was null or NaN, skipped by the measure" },
        { text: "of events", class: "num" }, { text: "share", class: "num" },
        { text: "batches not counted", class: "num", title: "committed by a version that did not count, or before the measure was added" }],
      skipped.map(([name, v]) => ({
        attrs: { "data-aggregation": name, "data-measure": v.measure, class: name === selected ? "selected" : null },
        cells: [
          { text: name },
          { text: v.measure },
          { text: v.skipped == null ? "unknown" : fmtCount(v.skipped), class: "num" },
          { text: fmtCount(v.events), class: "num" },
          { text: share(v), class: "num" },
          { text: fmtCount(v.batches_not_counted), class: "num" },
        ],
      })));
    return el("div", { class: "scroll" }, el("h3", { class: "small muted" }, "Values skipped (argument null or NaN)"), t);
  }

  async function refreshRejected() {
    const agg = state.applied ? state.applied.agg : state.agg && state.agg.name;
    if (!agg) return;
    const zone = (state.aggregations.find((a) => a.name === agg) || {}).zone || "UTC";
    try {
      const json = await api("api/rejected/" + encodeURIComponent(agg) + "?limit=" + REJECTED_LIMIT);
      const rows = json.rows || [];
      const box = $("rejected");
      if (!rows.length) {
        box.replaceChildren(el("p", { class: "muted" }, "None rejected in " + agg + "."));
      } else {
        const t = el("table", { id: "rejected-table" });
        table(t,
          [{ text: "batch", class: "num" }, { text: "kind" }, { text: "reason" }, { text: "value" },
            { text: "event time" }, { text: "raw" }],
          rows.map((r) => ({
            cells: [
              { text: r.batch_id == null ? "—" : String(r.batch_id), class: "num" },
              { text: r.kind == null ? "" : String(r.kind) },
              { text: r.reason == null ? "" : String(r.reason), class: "wrap" },
              { text: r.value == null ? "" : String(r.value), class: "wrap" },
              { text: fmtEventTime(r.event_time, zone), class: "time", title: r.event_time || null },
              { text: r.raw == null ? "" : String(r.raw), class: "raw mono", title: r.raw == null ? null : String(r.raw) },
            ],
          })));
        box.replaceChildren(t);
      }
      $("rejected-note").textContent = agg + (rows.length >= REJECTED_LIMIT ? " · latest " + REJECTED_LIMIT : "");
      setError("rejected", null);
    } catch (e) {
      setError("rejected", e);
    }
  }

  function fmtEventTime(v, zone) {
    if (v === null || v === undefined || v === "") return "—";
    if (typeof v === "number") return fmtTime(v, zone);
    const ms = Date.parse(v);
    return Number.isNaN(ms) ? String(v) : fmtTime(ms, zone);
  }

  // ---------------------------------------------------------------- query box

  async function runQuery(ev) {
    ev.preventDefault();
    const text = $("query").value.trim();
    if (!text) return;
    $("query-note").textContent = "running…";
    try {
      const json = await api("api/query", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ query: text }),
      });
      const cols = json.columns || [];
      const rows = json.rows || [];
      const from = /\bfrom\s+([A-Za-z_][A-Za-z0-9_]*)/i.exec(text);
      const target = from && state.aggregations.find((a) => a.name.toLowerCase() === from[1].toLowerCase());
      const zone = (target && target.zone) || "UTC";
      const isTime = (name) => /^AGG_TIMESTAMP$|timestamp$|_at$/i.test(name);
      table($("query-result"), cols.map((c) => ({ text: typeof c === "string" ? c : c.name })),
        rows.slice(0, MAX_TABLE_ROWS).map((r) => ({
          cells: cols.map((c) => {
            const name = typeof c === "string" ? c : c.name;
            const v = Array.isArray(r) ? r[cols.indexOf(c)] : r[name];
            if (typeof v === "number" && isTime(name)) return { text: fmtTime(v, zone), class: "time", title: String(v) };
            return { text: typeof v === "number" ? fmtNumber(v) : v === null || v === undefined ? "—" : String(v),
              class: typeof v === "number" ? "num" : null };
          }),
        })));
      $("query-note").textContent = rows.length + " row" + (rows.length === 1 ? "" : "s") + " · times in " + zone +
        (rows.length > MAX_TABLE_ROWS ? " (first " + MAX_TABLE_ROWS + " shown)" : "");
      setError("query", null);
    } catch (e) {
      $("query-note").textContent = "";
      setError("query", e);
    }
  }

  // ---------------------------------------------------------------- refresh loop

  async function refreshAggregations() {
    try {
      const json = await api("api/aggregations");
      const fresh = json.aggregations || [];
      const names = (list) => list.map((a) => a.name).join("\u0000");
      const changed = names(fresh) !== names(state.aggregations);
      state.aggregations = fresh;
      if (changed) {
        const keep = state.agg && fresh.some((a) => a.name === state.agg.name) ? state.agg.name : undefined;
        fillSelect($("aggregation"), fresh.map((a) => ({ value: a.name, text: a.name })), keep);
        selectAggregation(keep || (fresh[0] && fresh[0].name), true);
      } else if (state.agg) {
        state.agg = fresh.find((a) => a.name === state.agg.name) || state.agg;
        renderAggregationInfo();
      }
      setError("aggregations", null);
      return true;
    } catch (e) {
      setError("aggregations", e);
      return false;
    }
  }

  function schedule() {
    clearTimeout(state.timer);
    state.timer = null;
    if ($("auto-refresh").checked) state.timer = setTimeout(tick, REFRESH_MS);
  }

  async function tick() {
    state.timer = null;
    if (!$("auto-refresh").checked) return;
    await Promise.all([
      refreshAggregations(),
      refreshStatus(),
      refreshRejected(),
      state.applied ? drawSeries(state.applied) : Promise.resolve(),
    ]);
    schedule();
  }

  function draw() {
    if (!state.agg) return;
    if (!$("measure").value) {
      setError("series", new Error(state.agg.name + " has no numeric measure to chart"));
      document.body.dataset.state = "error";
      return;
    }
    let p;
    try {
      p = readControls();
    } catch (e) {
      setError("series", e);
      document.body.dataset.state = "error";
      return;
    }
    const changedAgg = !state.applied || state.applied.agg !== p.agg;
    state.applied = p;
    document.body.dataset.state = "loading";
    drawSeries(p);
    if (changedAgg) refreshRejected();
    if (state.status) renderStatus(state.status);
    schedule();
  }

  async function start() {
    document.body.dataset.state = "loading";
    const ok = await refreshAggregations();
    refreshStatus();
    if (!ok) {
      document.body.dataset.state = "error";
      schedule();
      return;
    }
    if (!state.aggregations.length) {
      $("chart-empty").hidden = false;
      $("chart-empty").textContent = "This app defines no aggregation.";
      $("rejected").replaceChildren(el("p", { class: "muted" }, "No aggregation."));
      $("table").replaceChildren();
      document.body.dataset.state = "empty";
      schedule();
      return;
    }
    draw();
  }

  // ---------------------------------------------------------------- wiring

  function init() {
    readTokenFromHash();
    $("controls").addEventListener("submit", (ev) => { ev.preventDefault(); draw(); });
    $("aggregation").addEventListener("change", () => { selectAggregation($("aggregation").value, false); draw(); });
    $("measure").addEventListener("change", draw);
    $("per").addEventListener("change", draw);
    $("auto-refresh").addEventListener("change", () => { if ($("auto-refresh").checked) tick(); else schedule(); });
    $("query-form").addEventListener("submit", runQuery);
    window.addEventListener("hashchange", () => { if (/token=/.test(window.location.hash)) { readTokenFromHash(); start(); } });
    if (window.ResizeObserver) {
      new ResizeObserver(() => {
        if (state.chart) state.chart.setSize({ width: chartWidth(), height: 340 });
      }).observe($("chart").parentElement);
    }
    start();
  }

  if (typeof uPlot === "undefined") {
    document.addEventListener("DOMContentLoaded", () => {
      setError("page", new Error("the chart library (vendor/uPlot.iife.min.js) did not load"));
      document.body.dataset.state = "error";
    });
    return;
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();

// Small line charts drawn as SVG from a series of {t, v} points over the history window.
import { h, fmtRate } from "./dom.js";
import { points } from "./history.js";

const SVG = "http://www.w3.org/2000/svg";
const WINDOW_MS = 5 * 60 * 1000;
const MIN_SPAN_MS = 30 * 1000;

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

export function sparkline(key, { width = 260, height = 56, labels = true } = {}) {
  const data = points(key);
  const root = svg("svg", { class: "spark", width, height, viewBox: `0 0 ${width} ${height}`, "data-series": key,
                            "data-points": data.length });
  if (data.length === 0) return root;
  const now = Date.now();
  const max = Math.max(1, ...data.map((p) => p.v));
  const top = labels ? 10 : 2;
  // the x axis spans the history there is, from 30 s up to the whole window
  const span = Math.min(WINDOW_MS, Math.max(MIN_SPAN_MS, now - data[0].t));
  const x = (t) => Math.max(0, width - ((now - t) / span) * width);
  const y = (v) => height - 2 - (v / max) * (height - top - 2);
  const coords = data.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`);
  if (data.length === 1) coords.unshift(`${(x(data[0].t) - 2).toFixed(1)},${y(data[0].v).toFixed(1)}`);
  const first = coords[0].split(",")[0];
  const last = coords[coords.length - 1].split(",")[0];
  root.append(svg("polygon", { class: "area", points: `${first},${height} ${coords.join(" ")} ${last},${height}` }));
  root.append(svg("polyline", { points: coords.join(" ") }));
  if (labels) {
    const label = svg("text", { x: 2, y: 9 });
    label.textContent = `max ${fmtRate(max)}`;
    root.append(label);
  }
  return root;
}

// A titled chart: the series' latest value and its history.
export function chartCard(title, key, unit, testid) {
  const data = points(key);
  const now = data.length ? data[data.length - 1].v : null;
  return h("div", { class: "chart", "data-testid": testid },
    h("div", { class: "title" }, h("span", {}, title), h("span", { class: "now" }, `${fmtRate(now)} ${unit}`)),
    sparkline(key));
}

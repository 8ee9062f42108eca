// Building elements from data: text always goes in as text, never as HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function fmt(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "–";
}

export function fmtRate(r) {
  return r === null || r === undefined ? "–" : r.toLocaleString("en-US", { maximumFractionDigits: r < 10 ? 1 : 0 });
}

export function fmtDuration(ns) {
  let s = Math.floor(ns / 1e9);
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (s >= size) { parts.push(`${Math.floor(s / size)}${unit}`); s %= size; }
  }
  parts.push(`${s}s`);
  return parts.slice(0, 2).join(" ");
}

export function table(headers, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, headers.map(([label, cls]) => h("th", { class: cls }, label)))),
    h("tbody", {}, rows));
}

export const num = (value, attrs = {}) => h("td", { class: "num", ...attrs }, fmt(value));
export const badge = (text, kind, attrs = {}) => h("span", { class: `badge ${kind}`, ...attrs }, text);

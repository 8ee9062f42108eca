// The page's frame: routing by path, polling the current view, banners, and admin actions
// behind a confirmation dialog.
import { config, api, url } from "./api.js";
import { h } from "./dom.js";
import { overview, topicView, channelView, nodesView, nodeView, lookupView, counterView } from "./views.js";

const ROUTES = [
  [/^\/(?:topics\/?)?$/, overview],
  [/^\/topics\/([^/]+)\/?$/, topicView],
  [/^\/topics\/([^/]+)\/([^/]+)\/?$/, channelView],
  [/^\/nodes\/?$/, nodesView],
  [/^\/nodes\/([^/]+)\/?$/, nodeView],
  [/^\/lookup\/?$/, lookupView],
  [/^\/counter\/?$/, counterView],
];

const page = document.getElementById("page");
const banners = document.getElementById("banners");
const dialog = document.getElementById("confirm");
let timer = null;
let generation = 0;
let actionBanners = [];

function currentPath() {
  let path = location.pathname;
  if (config.basePath && path.startsWith(config.basePath)) path = path.slice(config.basePath.length);
  return path || "/";
}

function route(path) {
  for (const [pattern, view] of ROUTES) {
    const match = pattern.exec(path);
    if (match) return { view, params: match.slice(1).map(decodeURIComponent) };
  }
  return null;
}

export function navigate(path) {
  actionBanners = [];
  history.pushState(null, "", url(path));
  refresh();
}

function link(text, path) {
  return h("a", { class: "link", href: url(path), onclick: (e) => {
    if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    navigate(path);
  } }, text);
}

function banner(kind, text, origin) {
  return h("div", { class: `banner ${kind}`, "data-testid": `banner-${kind}`, "data-origin": origin }, text);
}

// Asks, then calls the API; the answer (or its warning) is shown until the next page.
async function run(question, method, path, body, then, label) {
  document.getElementById("confirm-text").textContent = question;
  dialog.returnValue = "";
  dialog.showModal();
  const choice = await new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue), { once: true }));
  if (choice !== "ok") return;
  const answer = await api(method, path, body);
  const message = answer.data.message || "";
  if (!answer.ok) actionBanners = [banner("error", `${label} failed (HTTP ${answer.status}): ${message}`, "action")];
  else if (message) actionBanners = [banner("warning", `${label}: done, with warnings: ${message}`, "action")];
  else actionBanners = [banner("info", `${label}: done`, "action")];
  if (answer.ok && then) {
    const kept = actionBanners;
    navigate(then);
    actionBanners = kept;
  }
  refresh();
}

function action(label, question, method, path, body, { kind = "", small = false, testid = "", then = "" } = {}) {
  return h("button", { type: "button", class: `${kind} ${small ? "small" : ""}`.trim(), "data-action": testid,
                       onclick: () => run(question, method, path, body, then, label) }, label);
}

function makeContext() {
  const warnings = [];
  return {
    warnings,
    warn: (message) => { if (message) warnings.push(message); },
    link,
    action,
    run: (question, method, path, body, label) => run(question, method, path, body, "", label),
    admin: (el) => (config.isAdmin ? el : null),
  };
}

async function refresh() {
  clearTimeout(timer);
  const mine = ++generation;
  const path = currentPath();
  const found = route(path);
  const ctx = makeContext();
  let content;
  if (!found) {
    content = h("div", { class: "error-panel" }, `No page at ${path}`);
  } else {
    try {
      content = await found.view(ctx, ...found.params);
    } catch (e) {
      content = h("div", { class: "error-panel", "data-testid": "error" }, `This page failed to draw: ${e.message}`);
    }
  }
  if (mine !== generation) return; // a newer refresh (navigation, action) took over
  page.replaceChildren(content);
  banners.replaceChildren(...actionBanners, ...ctx.warnings.map((w) => banner("warning", w, "poll")));
  for (const a of document.querySelectorAll("header nav a")) {
    const target = a.dataset.route;
    a.classList.toggle("active", target === "/" ? route(path) && route(path).view === overview : path.startsWith(target));
  }
  document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
  document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
  timer = setTimeout(refresh, config.pollSeconds * 1000);
}

function start() {
  document.getElementById("version").textContent = `v${config.version}`;
  for (const a of document.querySelectorAll("[data-route]")) {
    a.setAttribute("href", url(a.dataset.route));
    a.addEventListener("click", (e) => { e.preventDefault(); navigate(a.dataset.route); });
  }
  window.addEventListener("popstate", () => { actionBanners = []; refresh(); });
  refresh();
}

start();

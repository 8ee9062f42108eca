// The pages. Each view fetches what it shows from the JSON API, records the numbers it
// charts, and returns the page's element; app.js calls it again on every poll.
import { config, get, enc } from "./api.js";
import { h, fmt, fmtRate, fmtDuration, table, num, badge } from "./dom.js";
import { record, rate } from "./history.js";
import { chartCard, sparkline } from "./chart.js";

const addr = (node) => `${node.broadcast_address}:${node.http_port}`;
const sum = (items, key) => items.reduce((acc, item) => acc + (item[key] || 0), 0);

function statusBadge(paused, testid) {
  return paused ? badge("Paused", "paused", { "data-testid": testid }) : badge("Active", "ok", { "data-testid": testid });
}

function errorPanel(title, answer) {
  const message = (answer.data && answer.data.message) || `HTTP ${answer.status}`;
  return h("div", { class: "error-panel", "data-testid": "error" }, h("strong", {}, title), h("div", {}, message));
}

function whyTopicFailed(topic, answer) {
  const message = (answer.data && answer.data.message) || "";
  if (message.includes("TOPIC_NOT_FOUND")) return `Topic ${topic} not found`;
  if (/failed to query any nsqd: ?$/.test(message)) return `No nsqd holds topic ${topic}`;
  return `Topic ${topic} could not be read`;
}

// Reads every node's stats; answers [{node, ok, data}] with the unreachable ones marked.
async function nodeStats(nodes) {
  const answers = await Promise.all(nodes.map((n) => get(`/api/nodes/${enc(addr(n))}`)));
  return nodes.map((node, i) => ({ node, ok: answers[i].ok, data: answers[i].data }));
}

function reportUnreachable(ctx, stats) {
  for (const s of stats) {
    if (!s.ok) ctx.warn(`nsqd ${addr(s.node)} unreachable: ${s.data.message || "no answer"}`);
  }
}

// -- overview: every topic, summed over the nodes that answered ----------------------
export async function overview(ctx) {
  const [topicsAnswer, nodesAnswer] = await Promise.all([get("/api/topics"), get("/api/nodes")]);
  if (!topicsAnswer.ok) return errorPanel("Topics could not be listed", topicsAnswer);
  ctx.warn(topicsAnswer.data.message);
  if (!nodesAnswer.ok) ctx.warn(`nodes could not be listed: ${nodesAnswer.data.message}`);
  else ctx.warn(nodesAnswer.data.message);
  const nodes = (nodesAnswer.ok && nodesAnswer.data.nodes) || [];
  const stats = await nodeStats(nodes);
  reportUnreachable(ctx, stats);

  const topics = new Map();
  for (const name of topicsAnswer.data.topics || []) topics.set(name, null);
  for (const s of stats.filter((x) => x.ok)) {
    for (const t of s.data.topics || []) {
      const acc = topics.get(t.topic_name) || { depth: 0, inFlight: 0, messages: 0, channels: new Set(), paused: false, nodes: 0 };
      acc.depth += t.depth;
      acc.messages += t.message_count;
      acc.paused = acc.paused || t.paused;
      acc.nodes += 1;
      for (const c of t.channels || []) { acc.channels.add(c.channel_name); acc.inFlight += c.in_flight_count; }
      topics.set(t.topic_name, acc);
    }
  }
  const names = [...topics.keys()].sort();
  let totalDepth = 0, totalMessages = 0;
  const rows = names.map((name) => {
    const t = topics.get(name);
    const link = ctx.link(name, `/topics/${enc(name)}`);
    if (!t) {
      return h("tr", { "data-topic": name }, h("td", {}, link), h("td", {}, badge("no nsqd", "idle")),
        h("td", { class: "num", colspan: 6 }, h("span", { class: "muted" }, "known to lookupd only")));
    }
    totalDepth += t.depth;
    totalMessages += t.messages;
    const r = rate(`topic:${name}:messages`, t.messages);
    record(`topic:${name}:depth`, t.depth);
    return h("tr", { "data-topic": name },
      h("td", {}, link), h("td", {}, statusBadge(t.paused)),
      num(t.depth, { "data-col": "depth" }), num(t.inFlight, { "data-col": "in-flight" }),
      num(t.messages, { "data-col": "messages" }),
      h("td", { class: "num", "data-col": "rate" }, fmtRate(r)),
      h("td", {}, sparkline(`topic:${name}:messages`, { width: 120, height: 22, labels: false })),
      num(t.channels.size, { "data-col": "channels" }), num(t.nodes, { "data-col": "nodes" }));
  });
  const clusterRate = rate("cluster:messages", totalMessages);
  record("cluster:depth", totalDepth);
  const reachable = stats.filter((s) => s.ok).length;
  return h("div", {},
    h("h1", {}, "Topics"),
    h("div", { class: "cards" },
      card("Topics", fmt(names.length), "topics"),
      card("nsqd nodes", `${reachable} / ${nodes.length}`, "nodes", reachable < nodes.length ? "unreachable nodes" : ""),
      card("Messages / s", fmtRate(clusterRate), "rate"),
      card("Depth", fmt(totalDepth), "depth")),
    h("div", { class: "charts" },
      chartCard("Messages / s, all topics", "cluster:messages", "msg/s", "chart-rate"),
      chartCard("Depth, all topics", "cluster:depth", "", "chart-depth")),
    h("h2", {}, "Topics"),
    names.length === 0 ? h("p", { class: "muted" }, "No topics yet.") :
      table([["Topic"], ["Status"], ["Depth", "num"], ["In flight", "num"], ["Messages", "num"], ["msg/s", "num"],
             ["Last 5 min"], ["Channels", "num"], ["Nodes", "num"]], rows, { "data-testid": "topics" }));
}

function card(label, value, testid, note) {
  return h("div", { class: "card", "data-testid": `card-${testid}` },
    h("div", { class: "value" }, value), h("div", { class: "label" }, label, note ? h("span", { class: "badge bad" }, ` ${note}`) : null));
}

// -- one topic ----------------------------------------------------------------------
export async function topicView(ctx, topic) {
  const [answer, nodesAnswer] = await Promise.all([get(`/api/topics/${enc(topic)}`), get("/api/nodes")]);
  const crumbs = h("div", { class: "crumbs" }, ctx.link("Topics", "/"), " / ", topic);
  if (!answer.ok) return h("div", {}, crumbs, h("h1", {}, `Topic ${topic}`), errorPanel(whyTopicFailed(topic, answer), answer));
  const t = answer.data;
  ctx.warn(t.message);
  const holders = ((nodesAnswer.ok && nodesAnswer.data.nodes) || []).filter((n) => (n.topics || []).some((x) => x.topic === topic));
  const answered = new Set((t.nodes || []).map((n) => n.node));
  const silent = holders.filter((n) => !answered.has(addr(n)));
  for (const n of silent) ctx.warn(`nsqd ${addr(n)} holds topic ${topic} but did not answer`);
  const tombstoned = new Set(holders.filter((n) => n.topics.some((x) => x.topic === topic && x.tombstoned)).map(addr));

  const r = rate(`topic:${topic}:messages`, t.message_count);
  record(`topic:${topic}:depth`, t.depth);
  const nodeRows = (t.nodes || []).map((n) => h("tr", { "data-node": n.node },
    h("td", {}, ctx.link(`${n.hostname} (${n.node})`, `/nodes/${enc(n.node)}`), tombstoned.has(n.node) ? badge("tombstoned", "bad") : null),
    h("td", {}, statusBadge(n.paused)), num(n.depth), h("td", { class: "num" }, `${fmt(n.memory_depth)} + ${fmt(n.backend_depth)}`),
    num(n.message_count), num((n.channels || []).length),
    h("td", {}, ctx.admin(ctx.action("Tombstone", `Tombstone topic ${topic} on ${n.node}? lookupd stops listing it there and the node deletes it.`,
      "DELETE", `/api/nodes/${enc(n.node)}`, { topic }, { small: true, testid: `tombstone-${n.node}` })))));
  const silentRows = silent.map((n) => h("tr", { class: "unreachable", "data-node": addr(n) },
    h("td", {}, `${n.hostname} (${addr(n)})`), h("td", {}, badge("unreachable", "bad", { "data-testid": "node-unreachable" })),
    h("td", { colspan: 5, class: "muted" }, "no answer from this nsqd")));
  const totalRow = h("tr", { class: "total" }, h("td", {}, "Total"), h("td", {}), num(t.depth, { "data-col": "depth" }),
    h("td", { class: "num" }, `${fmt(t.memory_depth)} + ${fmt(t.backend_depth)}`), num(t.message_count, { "data-col": "messages" }),
    num((t.channels || []).length), h("td", {}));

  const channelRows = (t.channels || []).map((c) => {
    const cr = rate(`channel:${topic}:${c.channel_name}:messages`, c.message_count);
    record(`channel:${topic}:${c.channel_name}:depth`, c.depth);
    return h("tr", { "data-channel": c.channel_name },
      h("td", {}, ctx.link(c.channel_name, `/topics/${enc(topic)}/${enc(c.channel_name)}`)),
      h("td", {}, statusBadge(c.paused, "channel-status")),
      num(c.depth, { "data-col": "depth" }), num(c.in_flight_count, { "data-col": "in-flight" }),
      num(c.deferred_count), num(c.requeue_count), num(c.timeout_count),
      num(c.message_count, { "data-col": "messages" }), h("td", { class: "num" }, fmtRate(cr)),
      h("td", {}, sparkline(`channel:${topic}:${c.channel_name}:messages`, { width: 110, height: 22, labels: false })),
      num(c.client_count, { "data-col": "clients" }));
  });

  return h("div", {}, crumbs,
    h("h1", {}, `Topic ${topic}`, statusBadge(t.paused, "topic-status")),
    ctx.admin(h("div", { class: "actions" },
      t.paused ? ctx.action("Unpause topic", `Unpause topic ${topic} on every node?`, "POST", `/api/topics/${enc(topic)}`, { action: "unpause" }, { testid: "unpause" })
               : ctx.action("Pause topic", `Pause topic ${topic} on every node? Its channels stop receiving messages.`, "POST", `/api/topics/${enc(topic)}`, { action: "pause" }, { testid: "pause" }),
      ctx.action("Empty topic", `Empty topic ${topic}? Every message waiting in the topic is dropped.`, "POST", `/api/topics/${enc(topic)}`, { action: "empty" }, { kind: "warn", testid: "empty" }),
      ctx.action("Delete topic", `Delete topic ${topic} and all its channels everywhere?`, "DELETE", `/api/topics/${enc(topic)}`, undefined, { kind: "danger", testid: "delete", then: "/" }))),
    h("div", { class: "charts" },
      chartCard("Messages / s", `topic:${topic}:messages`, "msg/s", "chart-rate"),
      chartCard("Depth", `topic:${topic}:depth`, "", "chart-depth")),
    h("h2", {}, "Nodes"),
    table([["nsqd"], ["Status"], ["Depth", "num"], ["Memory + disk", "num"], ["Messages", "num"], ["Channels", "num"], [""]],
      [...nodeRows, ...silentRows, totalRow], { "data-testid": "topic-nodes" }),
    h("h2", {}, "Channels"),
    (t.channels || []).length === 0 ? h("p", { class: "muted" }, "No channels.") :
      table([["Channel"], ["Status"], ["Depth", "num"], ["In flight", "num"], ["Deferred", "num"], ["Requeued", "num"],
             ["Timed out", "num"], ["Messages", "num"], ["msg/s", "num"], ["Last 5 min"], ["Clients", "num"]],
        channelRows, { "data-testid": "channels" }));
}

// -- one channel --------------------------------------------------------------------
export async function channelView(ctx, topic, channel) {
  const answer = await get(`/api/topics/${enc(topic)}/${enc(channel)}`);
  const crumbs = h("div", { class: "crumbs" }, ctx.link("Topics", "/"), " / ", ctx.link(topic, `/topics/${enc(topic)}`), " / ", channel);
  const title = h("h1", {}, `Channel ${channel}`);
  if (!answer.ok) return h("div", {}, crumbs, title, errorPanel(whyTopicFailed(topic, answer), answer));
  const c = answer.data;
  ctx.warn(c.message);
  if (c.channel_name === undefined) {
    return h("div", {}, crumbs, title, errorPanel(`Channel ${channel} not found in topic ${topic}`, { status: 404, data: {} }));
  }
  const key = `channel:${topic}:${channel}`;
  const r = rate(`${key}:messages`, c.message_count);
  record(`${key}:depth`, c.depth);
  record(`${key}:in-flight`, c.in_flight_count);
  const path = `/api/topics/${enc(topic)}/${enc(channel)}`;
  const nodeRows = (c.nodes || []).map((n) => h("tr", { "data-node": n.node },
    h("td", {}, ctx.link(`${n.hostname} (${n.node})`, `/nodes/${enc(n.node)}`)), h("td", {}, statusBadge(n.paused)),
    num(n.depth), h("td", { class: "num" }, `${fmt(n.memory_depth)} + ${fmt(n.backend_depth)}`),
    num(n.in_flight_count), num(n.deferred_count), num(n.requeue_count), num(n.timeout_count), num(n.message_count), num(n.client_count)));
  const totalRow = h("tr", { class: "total" }, h("td", {}, "Total"), h("td", {}),
    num(c.depth, { "data-col": "depth" }), h("td", { class: "num" }, `${fmt(c.memory_depth)} + ${fmt(c.backend_depth)}`),
    num(c.in_flight_count, { "data-col": "in-flight" }), num(c.deferred_count), num(c.requeue_count), num(c.timeout_count),
    num(c.message_count, { "data-col": "messages" }), num(c.client_count, { "data-col": "clients" }));
  const clientRows = (c.clients || []).map((cl) => h("tr", { "data-client": `${cl.node}/${cl.remote_address}` },
    h("td", {}, cl.client_id), h("td", {}, cl.hostname), h("td", {}, cl.remote_address), h("td", {}, cl.node),
    h("td", {}, cl.version), h("td", {}, cl.user_agent || h("span", { class: "muted" }, "–")),
    h("td", {}, cl.tls ? badge(cl.tls_version || "TLS", "ok") : "no"),
    h("td", {}, cl.snappy ? "snappy" : cl.deflate ? "deflate" : "none"),
    num(cl.ready_count, { "data-col": "rdy" }), num(cl.in_flight_count), num(cl.finish_count), num(cl.requeue_count),
    num(cl.message_count), h("td", {}, fmtDuration(cl.connected)), h("td", {}, cl.sample_rate ? `${cl.sample_rate}%` : "")));

  return h("div", {}, crumbs,
    h("h1", {}, `Channel ${channel}`, statusBadge(c.paused, "channel-status")),
    ctx.admin(h("div", { class: "actions" },
      c.paused ? ctx.action("Unpause channel", `Unpause channel ${channel} of ${topic} on every node?`, "POST", path, { action: "unpause" }, { testid: "unpause" })
               : ctx.action("Pause channel", `Pause channel ${channel} of ${topic} on every node? Its consumers stop getting messages.`, "POST", path, { action: "pause" }, { testid: "pause" }),
      ctx.action("Empty channel", `Empty channel ${channel}? Every message waiting in it is dropped.`, "POST", path, { action: "empty" }, { kind: "warn", testid: "empty" }),
      ctx.action("Delete channel", `Delete channel ${channel} of ${topic} everywhere?`, "DELETE", path, undefined, { kind: "danger", testid: "delete", then: `/topics/${enc(topic)}` }))),
    h("div", { class: "charts" },
      chartCard("Messages / s", `${key}:messages`, "msg/s", "chart-rate"),
      chartCard("Depth", `${key}:depth`, "", "chart-depth"),
      chartCard("In flight", `${key}:in-flight`, "", "chart-in-flight")),
    h("h2", {}, "Nodes"),
    table([["nsqd"], ["Status"], ["Depth", "num"], ["Memory + disk", "num"], ["In flight", "num"], ["Deferred", "num"],
           ["Requeued", "num"], ["Timed out", "num"], ["Messages", "num"], ["Clients", "num"]], [...nodeRows, totalRow],
      { "data-testid": "channel-nodes" }),
    h("h2", {}, `Clients (${fmt(c.client_count)})`),
    clientRows.length === 0 ? h("p", { class: "muted" }, "No consumers connected.") :
      table([["Client"], ["Host"], ["Address"], ["nsqd"], ["Protocol"], ["User agent"], ["TLS"], ["Compression"],
             ["RDY", "num"], ["In flight", "num"], ["Finished", "num"], ["Requeued", "num"], ["Messages", "num"],
             ["Connected"], ["Sample"]], clientRows, { "data-testid": "clients" }));
}

// -- nodes --------------------------------------------------------------------------
export async function nodesView(ctx) {
  const answer = await get("/api/nodes");
  if (!answer.ok) return errorPanel("Nodes could not be listed", answer);
  ctx.warn(answer.data.message);
  const nodes = answer.data.nodes || [];
  const stats = await nodeStats(nodes);
  reportUnreachable(ctx, stats);
  const rows = stats.map(({ node, ok, data }) => {
    const name = addr(node);
    const topics = (node.topics || []).map((t) => t.topic);
    let messagesRate = null;
    if (ok) messagesRate = rate(`node:${name}:messages`, data.total_messages);
    return h("tr", { "data-node": name, class: ok ? "" : "unreachable" },
      h("td", {}, ctx.link(node.hostname || name, `/nodes/${enc(name)}`)), h("td", {}, name),
      h("td", {}, node.version, node.out_of_date ? badge("out of date", "bad") : null),
      h("td", {}, `${node.broadcast_address}:${node.tcp_port}`),
      h("td", {}, ok ? badge("OK", "ok", { "data-testid": "node-status" })
                     : badge("unreachable", "bad", { "data-testid": "node-status", title: data.message })),
      num(topics.length), ok ? num(data.total_messages) : h("td", { class: "num" }, "–"),
      h("td", { class: "num" }, fmtRate(messagesRate)), ok ? num(data.total_clients) : h("td", { class: "num" }, "–"),
      h("td", { class: "muted" }, (node.remote_addresses || []).join(", ")));
  });
  return h("div", {}, h("h1", {}, "nsqd nodes"),
    nodes.length === 0 ? h("p", { class: "muted" }, "No nsqd is registered.") :
      table([["Host"], ["HTTP address"], ["Version"], ["TCP address"], ["Status"], ["Topics", "num"], ["Messages", "num"],
             ["msg/s", "num"], ["Clients", "num"], ["Registered with (lookupd/connection)"]], rows, { "data-testid": "nodes" }));
}

export async function nodeView(ctx, node) {
  const answer = await get(`/api/nodes/${enc(node)}`);
  const crumbs = h("div", { class: "crumbs" }, ctx.link("Nodes", "/nodes"), " / ", node);
  if (!answer.ok) {
    const why = answer.status === 404 ? `nsqd ${node} is not part of this cluster` : `nsqd ${node} unreachable`;
    return h("div", {}, crumbs, h("h1", {}, `nsqd ${node}`), errorPanel(why, answer));
  }
  const d = answer.data;
  ctx.warn(d.message);
  const r = rate(`node:${node}:messages`, d.total_messages);
  const rows = [];
  for (const t of d.topics || []) {
    const channels = t.channels && t.channels.length ? t.channels : [null];
    channels.forEach((c, i) => rows.push(h("tr", { "data-topic": t.topic_name, "data-channel": c ? c.channel_name : "" },
      i === 0 ? h("td", { rowspan: channels.length }, ctx.link(t.topic_name, `/topics/${enc(t.topic_name)}`), " ", t.paused ? badge("Paused", "paused") : null) : null,
      i === 0 ? num(t.depth, { rowspan: channels.length }) : null,
      i === 0 ? num(t.message_count, { rowspan: channels.length }) : null,
      h("td", {}, c ? ctx.link(c.channel_name, `/topics/${enc(t.topic_name)}/${enc(c.channel_name)}`) : h("span", { class: "muted" }, "no channels"),
        c && c.paused ? badge("Paused", "paused") : null),
      c ? num(c.depth) : h("td", {}), c ? num(c.in_flight_count) : h("td", {}), c ? num(c.message_count) : h("td", {}),
      c ? num(c.client_count) : h("td", {}),
      i === 0 ? h("td", { rowspan: channels.length }, ctx.admin(ctx.action("Tombstone", `Tombstone topic ${t.topic_name} on ${node}? lookupd stops listing it there and the node deletes it.`,
        "DELETE", `/api/nodes/${enc(node)}`, { topic: t.topic_name }, { small: true, testid: `tombstone-${t.topic_name}` }))) : null)));
  }
  return h("div", {}, crumbs, h("h1", {}, `nsqd ${node}`),
    h("div", { class: "cards" }, card("Topics", fmt((d.topics || []).length), "topics"),
      card("Messages", fmt(d.total_messages), "messages"), card("Messages / s", fmtRate(r), "rate"),
      card("Clients", fmt(d.total_clients), "clients")),
    h("div", { class: "charts" }, chartCard("Messages / s", `node:${node}:messages`, "msg/s", "chart-rate")),
    h("h2", {}, "Topics and channels"),
    rows.length === 0 ? h("p", { class: "muted" }, "No topics on this node.") :
      table([["Topic"], ["Depth", "num"], ["Messages", "num"], ["Channel"], ["Depth", "num"], ["In flight", "num"],
             ["Messages", "num"], ["Clients", "num"], [""]], rows, { "data-testid": "node-topics" }));
}

// -- lookup: what lookupd knows, and creating topics ------------------------------------
export async function lookupView(ctx) {
  const answer = await get("/api/topics?inactive=true");
  const inactive = answer.ok ? answer.data.topics || {} : {};
  if (!answer.ok) ctx.warn(`inactive topics could not be listed: ${answer.data.message}`);
  else ctx.warn(answer.data.message);
  const rows = Object.keys(inactive).sort().map((topic) => h("tr", { "data-topic": topic },
    h("td", {}, topic), h("td", {}, (inactive[topic] || []).join(", ") || h("span", { class: "muted" }, "none")),
    h("td", {}, ctx.admin(ctx.action("Delete", `Delete topic ${topic} from lookupd?`, "DELETE", `/api/topics/${enc(topic)}`, undefined,
      { small: true, kind: "danger", testid: `delete-${topic}` })))));
  const topicInput = h("input", { type: "text", name: "topic", placeholder: "topic", required: true, "data-testid": "new-topic" });
  const channelInput = h("input", { type: "text", name: "channel", placeholder: "channel (optional)", "data-testid": "new-channel" });
  const form = h("form", { class: "inline", onsubmit: (e) => {
    e.preventDefault();
    const body = { topic: topicInput.value.trim(), channel: channelInput.value.trim() };
    const what = `topic ${body.topic}${body.channel ? ` and channel ${body.channel}` : ""}`;
    ctx.run(`Create ${what}?`, "POST", "/api/topics", body, `Create ${what}`);
  } }, topicInput, channelInput, h("button", { type: "submit", "data-testid": "create" }, "Create"));
  const sources = config.lookupds.length ? config.lookupds : config.nsqds;
  return h("div", {}, h("h1", {}, "Lookup"),
    h("h2", {}, config.lookupds.length ? "nsqlookupd" : "nsqd (no lookupd configured)"),
    h("ul", { "data-testid": "sources" }, sources.map((a) => h("li", {}, a))),
    ctx.admin(h("div", {}, h("h2", {}, "Create a topic or channel"), form,
      h("p", { class: "muted" }, config.lookupds.length ? "The topic is created in every lookupd; a channel also on every nsqd that holds the topic."
                                                      : "Created on every configured nsqd."))),
    h("h2", {}, "Inactive topics"),
    h("p", { class: "muted" }, "Topics that lookupd knows but no nsqd produces."),
    rows.length === 0 ? h("p", { class: "muted" }, "None.") : table([["Topic"], ["Channels"], [""]], rows, { "data-testid": "inactive" }));
}

// -- counter: messages handled by every channel -------------------------------------
export async function counterView(ctx) {
  const answer = await get("/api/counter");
  if (!answer.ok) return errorPanel("Counts could not be read", answer);
  ctx.warn(answer.data.message);
  const entries = Object.values(answer.data.stats || {});
  const total = sum(entries, "message_count");
  const r = rate("counter:total", total);
  const rows = entries.sort((a, b) => b.message_count - a.message_count).map((e) =>
    h("tr", {}, h("td", {}, ctx.link(`${e.topic_name} / ${e.channel_name}`, `/topics/${enc(e.topic_name)}/${enc(e.channel_name)}`)),
      h("td", {}, e.node), num(e.message_count)));
  return h("div", {}, h("h1", {}, "Messages handled"),
    h("div", { class: "cards" }, card("Messages through all channels", fmt(total), "total"), card("Messages / s", fmtRate(r), "rate")),
    h("div", { class: "charts" }, chartCard("Messages / s", "counter:total", "msg/s", "chart-rate")),
    table([["Topic / channel"], ["nsqd"], ["Messages", "num"]], rows, { "data-testid": "counter" }));
}


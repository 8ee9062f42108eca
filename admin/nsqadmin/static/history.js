// What the polling has seen, kept in the page for the last few minutes: values per series,
// and rates computed from successive counter readings.
const WINDOW_MS = 5 * 60 * 1000;
const series = new Map(); // key -> [{t, v}]
const lastCount = new Map(); // key -> {t, count}

export function record(key, value, t = Date.now()) {
  let points = series.get(key);
  if (!points) series.set(key, (points = []));
  points.push({ t, v: value });
  while (points.length && points[0].t < t - WINDOW_MS) points.shift();
}

export function points(key) {
  return series.get(key) || [];
}

export function latest(key) {
  const p = points(key);
  return p.length ? p[p.length - 1].v : null;
}

// Messages per second since the previous reading of the same counter (null on the first);
// a counter that went down (a restarted node, an emptied topic) counts as 0.
export function rate(key, count, t = Date.now()) {
  const prev = lastCount.get(key);
  lastCount.set(key, { t, count });
  if (!prev || t <= prev.t) return latest(key);
  const r = count >= prev.count ? ((count - prev.count) * 1000) / (t - prev.t) : 0;
  record(key, r, t);
  return r;
}

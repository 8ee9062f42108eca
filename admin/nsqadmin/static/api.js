// Talking to nsqadmin's own JSON API (Go nsqadmin's /api routes), under the base path.
export const config = JSON.parse(document.getElementById("config").textContent);

export function url(path) {
  return config.basePath + path;
}

// Every answer as {ok, status, data}; a failed fetch is status 0 with a message.
export async function api(method, path, body) {
  let resp;
  try {
    resp = await fetch(url(path), {
      method,
      cache: "no-store",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    return { ok: false, status: 0, data: { message: `nsqadmin did not answer: ${e.message}` } };
  }
  let data;
  try {
    data = await resp.json();
  } catch (e) {
    data = { message: `${resp.status} ${resp.statusText}` };
  }
  if (data === null || typeof data !== "object") data = { value: data };
  return { ok: resp.ok, status: resp.status, data };
}

export const get = (path) => api("GET", path);
export const enc = encodeURIComponent;

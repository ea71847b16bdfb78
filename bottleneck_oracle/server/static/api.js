// The HTTP API as the page uses it: JSON calls with the token, and the server-sent events of /api/ask
// read from a POST response (EventSource can only GET).

const TOKEN = new URLSearchParams(location.hash.slice(1)).get("token");

/** Headers for every call: the bearer token when the page was opened with #token=... */
function headers(extra) {
  const h = new Headers(extra || {});
  if (TOKEN) h.set("Authorization", `Bearer ${TOKEN}`);
  return h;
}

/** The one-line reason of a failed response: the API's {"detail": ...}, else the status. */
async function failure(res) {
  let detail = `${res.status} ${res.statusText}`;
  try {
    const body = await res.json();
    if (typeof body.detail === "string") detail = body.detail;
    else if (body.detail) detail = JSON.stringify(body.detail);
  } catch (_) { /* not JSON: keep the status line */ }
  return new Error(detail);
}

/** fetch() under the page's base, with the token. Rejects with the API's one-line detail. */
export async function call(path, options = {}) {
  const res = await fetch(new URL(path, document.baseURI), { ...options, headers: headers(options.headers) });
  if (!res.ok) throw await failure(res);
  return res;
}

export async function getJSON(path) {
  return (await call(path)).json();
}

export async function postJSON(path, body) {
  const res = await call(path, { method: "POST", body: JSON.stringify(body),
                                 headers: { "Content-Type": "application/json" } });
  return res.json();
}

/** Parses one SSE block ("event: x\ndata: {...}") into [event, data]. */
function parseBlock(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  const text = data.join("\n");
  try { return [event, JSON.parse(text)]; } catch (_) { return [event, text]; }
}

/** POSTs `body` and calls onEvent(event, data) for each server-sent event, as it arrives. */
export async function streamEvents(path, body, onEvent) {
  const res = await call(path, { method: "POST", body: JSON.stringify(body),
                                 headers: { "Content-Type": "application/json", Accept: "text/event-stream" } });
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let held = "";  // a chunk's last "\r" waits: its "\n" may open the next chunk
  for (;;) {
    const { value, done } = await reader.read();
    let text = held + decoder.decode(value || new Uint8Array(), { stream: !done });
    held = !done && text.endsWith("\r") ? "\r" : "";
    if (held) text = text.slice(0, -1);
    buffer += text.replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const parsed = parseBlock(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (parsed) onEvent(parsed[0], parsed[1]);
    }
    if (done) break;
  }
  const rest = parseBlock(buffer.trim());
  if (rest) onEvent(rest[0], rest[1]);
}

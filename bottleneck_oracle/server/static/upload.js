// A panel's upload, shared by the hang and stragglers views: the files chosen in `PREFIX-files` (and the
// fields `addFields` puts on the form) posted to `path`, the JSON reply handed to `render`. `PREFIX-result`
// carries the state (running, then error here or done in `render`), `PREFIX-error` the one-line error.

import { call } from "./api.js";
import { fill } from "./dom.js";

const $ = (id) => document.getElementById(id);

export async function uploadFiles(prefix, path, missing, render, addFields = () => {}) {
  const files = $(`${prefix}-files`).files;
  const result = $(`${prefix}-result`);
  const fail = (message) => {
    fill($(`${prefix}-error`), message);
    result.dataset.state = "error";
  };
  fill($(`${prefix}-error`));
  result.dataset.state = "running";
  if (!files.length) return fail(missing);
  const form = new FormData();
  for (const f of files) form.append("files", f, f.name);
  addFields(form);
  try {
    render(await (await call(path, { method: "POST", body: form })).json());
  } catch (err) {
    fail(err.message);
  }
}

// The JSON API as the page calls it. Every call carries the token from the
// page's <meta name="treadle-token"> as the Authorization header: the cookie
// the browser holds only lets the page read, never change anything.

const meta = document.querySelector('meta[name="treadle-token"]');
const token = meta ? meta.content : "";

/** An answer of the API other than 2xx, with its parsed error body. */
export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `the server answered ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.type = error.type || null;
    this.fields = Array.isArray(error.fields) ? error.fields : [];
  }
}

/** Calls the API; resolves to the parsed JSON body (null for 204) or rejects with ApiError. */
export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`; // an answer link's page has none: the link is its credential
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = response.status === 204 ? "" : await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = { error: { type: "BadResponse", message: text.slice(0, 500) } };
    }
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path) => api("GET", path);
// Changes always send a JSON object: the API refuses any other body.
export const post = (path, body) => api("POST", path, body ?? {});
export const del = (path) => api("DELETE", path);

/** A path with its query string; empty and null values left out. */
export function withQuery(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

export const enc = encodeURIComponent;

// Loaded with `node --import` before the conformance suite: every fetch() the suite makes
// carries `Authorization: Bearer $PROCTOR_MCP_API_KEY`, because proctor's HTTP transport
// refuses any request without it (the suite has no option for headers).
const key = process.env.PROCTOR_MCP_API_KEY;
const original = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  if (!headers.has("authorization")) headers.set("authorization", `Bearer ${key}`);
  return original(input, { ...init, headers });
};

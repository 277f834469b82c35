// The official TypeScript SDK's client (npm @modelcontextprotocol/sdk, installed pinned into
// .ci/node by .ci/run) making a list of tool calls to `proctor mcp` over stdio, for
// tests/mcp/test_truth_typescript.py. It declares `elicitation: {}` (form mode, as the
// specification and this SDK read it) and declines every elicitation it is sent.
//
// argv[2]: JSON {command, args, cwd, env, calls: [[tool, arguments], ...]}; a string argument
// "$run:N" stands for the run_id of the N-th call's structured result.
// stdout: JSON {results: [CallToolResult...], elicited: [params...]}.
"use strict";

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { ElicitRequestSchema } = require("@modelcontextprotocol/sdk/types.js");

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const transport = new StdioClientTransport({
    command: spec.command,
    args: spec.args,
    cwd: spec.cwd,
    env: spec.env,
    stderr: "inherit",
  });
  const client = new Client(
    { name: "ts-test-client", version: "1" },
    { capabilities: { elicitation: {} } },
  );
  const elicited = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicited.push(request.params);
    return { action: "decline" };
  });
  await client.connect(transport);
  const results = [];
  const fill = (value) => {
    if (typeof value === "string" && value.startsWith("$run:")) {
      return results[Number(value.slice(5))].structuredContent.run_id;
    }
    if (value && typeof value === "object" && !Array.isArray(value)) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v)]));
    }
    return value;
  };
  for (const [name, args] of spec.calls) {
    results.push(await client.callTool({ name, arguments: fill(args) }));
  }
  await client.close();
  process.stdout.write(JSON.stringify({ results, elicited }));
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + "\n");
  process.exit(1);
});

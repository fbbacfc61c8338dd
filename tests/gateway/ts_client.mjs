// An MCP agent on the TypeScript SDK (the version package-lock.json pins), for the gateway's interop
// tests: `node ts_client.mjs TARGET REQUESTS_JSON` connects to TARGET (an http(s) URL, or a JSON
// array [command, ...args] started on stdio), sends each [method, params] request in turn and
// prints one JSON line: {"serverInfo", "capabilities", "answers": [{"result"} | {"error"}],
// "asked": [the server's own requests, in order], "progress": [[progress, total, message], ...]}
// (every request asks for progress). It answers sampling, elicitation and roots with
// fixed answers, as a client with those capabilities would.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const [target, requestsJson, rootUri] = process.argv.slice(2);
const requests = JSON.parse(requestsJson);
const asked = [];

const client = new Client(
  { name: "ts-agent", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } } },
);
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  asked.push(request.method);
  return { role: "assistant", model: "ts-model", content: { type: "text", text: "sampled by ts" } };
});
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.method);
  return { action: "decline" };
});
client.setRequestHandler(ListRootsRequestSchema, async (request) => {
  asked.push(request.method);
  return { roots: rootUri ? [{ uri: rootUri, name: "root" }] : [] };
});

const transport = target.startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(target))
  : (() => {
      const [command, ...args] = JSON.parse(target);
      return new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
    })();

await client.connect(transport);
const answers = [];
const progress = [];
const onprogress = (update) => progress.push([update.progress, update.total ?? null, update.message ?? null]);
for (const [method, params] of requests) {
  try {
    answers.push({ result: await client.request({ method, params }, z.looseObject({}), { onprogress }) });
  } catch (error) {
    answers.push({ error: { code: error.code, message: error.message, data: error.data } });
  }
}
const out = {
  serverInfo: client.getServerVersion(), capabilities: client.getServerCapabilities(), answers, asked, progress,
};
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();

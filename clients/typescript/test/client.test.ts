/**
 * The client and the AI SDK wrapper against a real `reversi-server` that the Python test starts
 * (tests/clients/test_typescript.py): REVERSI_URL, an agent's key and an operator's, its manifest
 * undoing `stripe.create_charge` with `stripe.refund` and its compensator answering every undo. The
 * model is the AI SDK's own offline `MockLanguageModelV4`.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { generateText, stepCountIs, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";

import { journaled } from "../src/ai-sdk.js";
import { ReversiClient, ReversiError } from "../src/index.js";

const url = process.env.REVERSI_URL ?? "";
const agent = new ReversiClient({ baseUrl: url, apiKey: process.env.REVERSI_AGENT_KEY });
const operator = new ReversiClient({ baseUrl: url, apiKey: process.env.REVERSI_OPERATOR_KEY });
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

function calling(toolName: string, input: object): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    doGenerate: [
      {
        content: [{ type: "tool-call", toolCallId: "call-1", toolName, input: JSON.stringify(input) }],
        finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [],
      },
      { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: undefined }, usage, warnings: [] },
    ],
  });
}

const charge = tool({
  description: "Charge a customer.",
  inputSchema: z.object({ amount: z.number() }),
  execute: async ({ amount }) => ({ id: `ch_${amount}`, amount }),
});

test("a model's tool call is journaled, planned and rolled back", async () => {
  const run = await agent.openRun({ scope: { actor: "ts-agent" } });
  const tools = journaled(agent, run.run_id, { charge }, { names: { charge: "stripe.create_charge" } });
  const result = await generateText({ model: calling("charge", { amount: 700 }), tools, prompt: "charge 700",
                                      stopWhen: stepCountIs(3) });
  assert.equal(result.text, "done");
  const recorded = await agent.getRun(run.run_id);
  assert.deepEqual(recorded.steps.map((s) => [s.tool, s.status, s.result]),
                   [["stripe.create_charge", "succeeded", { id: "ch_700", amount: 700 }]]);
  const intended = (await agent.events(run.run_id)).find((e) => e.type === "intended");
  assert.equal((intended?.data as { call_id?: string }).call_id, "call-1");  // the model's id of the call
  const plan = await agent.plan(run.run_id);
  assert.equal(plan.actions[0].kind, "compensate");
  assert.equal(plan.actions[0].compensation_tool, "stripe.refund");

  const job = await operator.rollback(run.run_id, { confirm: true });
  assert.ok("job_id" in job);
  let progress = await operator.rollbackProgress(run.run_id);
  const deadline = Date.now() + 60_000;  // a generous deadline, looked at every 50 ms: a loaded machine is slow
  while (progress.state !== "done" && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    progress = await operator.rollbackProgress(run.run_id);
  }
  assert.equal(progress.state, "done");
  assert.deepEqual(progress.report?.compensated, [0]);
});

test("a tool that throws is journaled failed and the model sees the error", async () => {
  const run = await agent.openRun({});
  const broken = tool({ description: "Fails.", inputSchema: z.object({}),
                        execute: async (): Promise<{ ok: boolean }> => {
                          throw new Error("the card network is down");
                        } });
  await generateText({ model: calling("broken", {}), tools: journaled(agent, run.run_id, { broken }), prompt: "go",
                       stopWhen: stepCountIs(3) });
  const [step] = (await agent.getRun(run.run_id)).steps;
  assert.deepEqual([step.status, step.error], ["failed", "Error: the card network is down"]);
});

test("a refused call does not run, and the server's reason reaches the caller", async () => {
  let ran = false;
  const run = await agent.openRun({ mode: "enforce" });
  const unknown = tool({ description: "Not in the manifest.", inputSchema: z.object({}), execute: async () => {
    ran = true;
    return {};
  } });
  const tools = journaled(agent, run.run_id, { unknown });
  await assert.rejects(async () => { await tools.unknown.execute!({}, { toolCallId: "c", messages: [] } as never); },
    (error: ReversiError) => error.code === "no_manifest_entry" && error.message === "no manifest entry for unknown");
  assert.equal(ran, false);
});

test("a bad key is a 401 with the server's message", async () => {
  const stranger = new ReversiClient({ baseUrl: url, apiKey: "not-a-key" });
  await assert.rejects(() => stranger.openRun({}), (error: ReversiError) => error.status === 401);
});

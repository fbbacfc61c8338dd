/**
 * Journaled tools for the Vercel AI SDK (`ai` 7): `journaled(client, runId, tools)` wraps each tool's
 * `execute` so every call the model makes is journaled in a Reversi run: `intended` before it runs (a
 * refusal, such as a halt, throws and the tool does not run), then `succeeded` with its result or
 * `failed` with its error, each with the model's tool-call id. A tool without `execute` (one the client
 * answers) is left as it is.
 */

import type { Tool, ToolExecutionOptions } from "ai";

import { ReversiClient, ReversiError } from "./index.js";

export interface JournalOptions {
  /** The journal's name of each tool, when not the key it has in `tools` (`{charge: "stripe.create_charge"}`). */
  names?: Record<string, string>;
}

type Execute = (input: unknown, options: ToolExecutionOptions<never>) => unknown;

/** `tools`, each call of each journaled in run `runId`. */
export function journaled<TOOLS extends Record<string, Tool>>(
  client: ReversiClient, runId: string, tools: TOOLS, options: JournalOptions = {},
): TOOLS {
  const wrapped: Record<string, Tool> = {};
  for (const [key, tool] of Object.entries(tools)) {
    const execute = (tool as { execute?: Execute }).execute;
    wrapped[key] = execute === undefined ? tool
      : { ...tool, execute: journaledExecute(client, runId, options.names?.[key] ?? key, execute) } as Tool;
  }
  return wrapped as TOOLS;
}

function journaledExecute(client: ReversiClient, runId: string, name: string, execute: Execute): Execute {
  return async (input: unknown, options: ToolExecutionOptions<never>) => {
    const args = input !== null && typeof input === "object" && !Array.isArray(input)
      ? input as Record<string, unknown> : { input };
    const recorded = await client.recordStep(runId, { tool: name, args, call_id: options.toolCallId });
    if ("pending" in recorded) {
      throw new ReversiError(202, "approval_required",
        `approval required: ${recorded.approval.approval_id} (a person must approve ${name} first)`);
    }
    let result: unknown;
    try {
      result = await execute(input, options);
    } catch (error) {
      await client.recordOutcome(runId, recorded.step, { status: "failed", error: String(error) });
      throw error;
    }
    await client.recordOutcome(runId, recorded.step, { status: "succeeded", result: result ?? null });
    return result;
  };
}

/**
 * A client of the Reversi HTTP API (`reversi-server`), typed from its OpenAPI document (`schema.ts`,
 * generated: `npm run schema`). Every request carries the API key as a bearer token; every answer that
 * is not 2xx is thrown as a `ReversiError` with the server's code and one-line message.
 */

import type { components } from "./schema.js";

export type Schemas = components["schemas"];
export type Run = Schemas["Run"];
export type Step = Schemas["Step"];
export type Plan = Schemas["Plan"];
export type Job = Schemas["Job"];
export type Report = Schemas["Report"];
export type FollowUp = Schemas["FollowUp"];
export type NewRun = Schemas["OpenRun"];
export type StepToRecord = Schemas["RecordStep"];
export type Outcome = Schemas["ReportOutcome"];
export type RollbackOptions = Schemas["Rollback"];
export type JournalEvent = Schemas["Event"];

/** What the server refused or could not do: its HTTP status, its code (`halted`, `not_found`...) and message. */
export class ReversiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown = undefined,
  ) {
    super(message);
    this.name = "ReversiError";
  }
}

export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** An API key (`reversi keys create`); without one, only a keyless loopback server answers. */
  apiKey?: string;
  /** The `fetch` to use (tests, proxies); the global one by default. */
  fetch?: typeof fetch;
}

/** The server's answer to recording a step: its number, or an approval to wait for (202). */
export type Recorded =
  | { step: number; status: "intended" }
  | { approval: Schemas["Approval"]; pending: true };

export class ReversiClient {
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.headers = { "content-type": "application/json" };
    if (options.apiKey) this.headers.authorization = `Bearer ${options.apiKey}`;
    this.fetchImpl = options.fetch ?? fetch;
  }

  /** Open a run (or continue one of the key's own with `run_id`). */
  openRun(run: NewRun = {}): Promise<Run> {
    return this.request("POST", "/v1/runs", run);
  }

  getRun(runId: string): Promise<Run> {
    return this.request("GET", `/v1/runs/${encodeURIComponent(runId)}`);
  }

  /** Journal a call as intended before it runs; a refusal (a halt, enforce mode...) throws. */
  async recordStep(runId: string, step: StepToRecord): Promise<Recorded> {
    const answer = await this.send("POST", `${this.runPath(runId)}/steps`, step);
    if (answer.status === 202) {
      const body = (await answer.json()) as { approval: Schemas["Approval"] };
      return { approval: body.approval, pending: true };
    }
    return (await answer.json()) as Recorded;
  }

  /** Journal what the call did: succeeded with its result, failed or uncertain with an error. */
  recordOutcome(runId: string, step: number, outcome: Outcome): Promise<Step> {
    return this.request("POST", `${this.runPath(runId)}/steps/${step}/outcome`, outcome);
  }

  /** The run's journal, in seq order (the first page: `limit` events at most). */
  async events(runId: string, limit = 1000): Promise<JournalEvent[]> {
    const page = await this.request<{ items: JournalEvent[] }>("GET", `${this.runPath(runId)}/events?limit=${limit}`);
    return page.items;
  }

  plan(runId: string): Promise<Plan> {
    return this.request("GET", `${this.runPath(runId)}/plan`);
  }

  /** With `confirm: true`, start a rollback job (see `rollbackProgress`); without, the plan. */
  rollback(runId: string, options: RollbackOptions = {}): Promise<Job | Plan> {
    return this.request("POST", `${this.runPath(runId)}/rollback`, options);
  }

  rollbackProgress(runId: string): Promise<Job> {
    return this.request("GET", `${this.runPath(runId)}/rollback`);
  }

  /** Settle the run's unknown steps from their manifests' probes, read with the server's reader. */
  reconcile(runId: string): Promise<Schemas["Reconciled"]> {
    return this.request("POST", `${this.runPath(runId)}/reconcile`);
  }

  /** The follow-ups rollbacks opened for the steps they left in the world. */
  async followUps(runId: string): Promise<FollowUp[]> {
    const page = await this.request<{ items: FollowUp[] }>("GET", `${this.runPath(runId)}/follow-ups`);
    return page.items;
  }

  closeFollowUp(runId: string, step: number, note: string): Promise<FollowUp> {
    return this.request("POST", `${this.runPath(runId)}/steps/${step}/follow-up/close`, { note });
  }

  private runPath(runId: string): string {
    return `/v1/runs/${encodeURIComponent(runId)}`;
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    return (await (await this.send(method, path, body)).json()) as T;
  }

  private async send(method: string, path: string, body?: unknown): Promise<Response> {
    const answer = await this.fetchImpl(`${this.baseUrl}${path}`, {
      method,
      headers: this.headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (answer.ok) return answer;
    const said = await answer.text();
    let parsed: unknown = undefined;
    try {
      parsed = JSON.parse(said);
    } catch {
      // not JSON: a proxy's page, say; its status says enough
    }
    const error = (parsed as { error?: { code?: string; message?: string } } | undefined)?.error;
    throw new ReversiError(answer.status, error?.code ?? `http_${answer.status}`,
      error?.message ?? `${method} ${path}: HTTP ${answer.status}`, parsed);
  }
}

// Runs @ag-ui/client's HttpAgent against an AG-UI endpoint and prints what it collected, as JSON.
//
//   node ag_ui_run.mjs URL PLAN_JSON
//
// PLAN_JSON: {"threadId": "...", "headers": {...}, "steps": [STEP, ...]}; each STEP is one run:
//   {"user": "text"}              add a user message, then run
//   {"tools": [TOOL, ...]}        offer the caller's tools on this run
//   {"toolResult": "text"}        answer the previous run's pending tool calls with this text
//   {"resume": ANY}               answer the pending interrupts with this payload
//   {"forwardedProps": {...}}     pass these through
// Output: one object per run: the event types and events, the outcome, the error, the agent's
// messages and state afterwards.
import { randomUUID } from "node:crypto";

import { HttpAgent } from "@ag-ui/client";

const [url, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const agent = new HttpAgent({ url, threadId: plan.threadId, headers: plan.headers ?? {} });
const runs = [];
let pendingToolCallIds = [];

for (const step of plan.steps) {
  if (step.user !== undefined) {
    agent.addMessage({ id: randomUUID(), role: "user", content: step.user });
  }
  if (step.toolResult !== undefined) {
    for (const toolCallId of pendingToolCallIds) {
      agent.addMessage({ id: randomUUID(), role: "tool", toolCallId, content: step.toolResult });
    }
  }
  const events = [];
  let finished = null;
  let runError = null;
  let failure = null;
  const parameters = { tools: step.tools ?? [], forwardedProps: step.forwardedProps ?? {} };
  if (step.resume !== undefined) {
    parameters.resume = agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: step.resume }));
  }
  try {
    await agent.runAgent(parameters, {
      onEvent({ event }) {
        events.push(event);
      },
      onRunFinishedEvent({ outcome, interrupts, pendingToolCallIds: pending }) {
        finished = { outcome, interrupts: interrupts ?? [], pendingToolCallIds: pending ?? [] };
      },
      onRunErrorEvent({ event }) {
        runError = { message: event.message, code: event.code ?? null };
      },
    });
  } catch (error) {
    failure = String(error && error.message ? error.message : error);
  }
  pendingToolCallIds = finished ? finished.pendingToolCallIds : [];
  runs.push({
    types: events.map((e) => e.type),
    events,
    finished,
    runError,
    failure,
    messages: JSON.parse(JSON.stringify(agent.messages)),
    state: JSON.parse(JSON.stringify(agent.state ?? null)),
  });
}
process.stdout.write(JSON.stringify(runs) + "\n");

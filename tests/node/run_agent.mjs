// Runs the official @ag-ui/client HttpAgent and prints what the client saw as one JSON object: the events of
// every run (as the client parsed them), the conversation it ended with, the last run's result, and any error.
// Usage: node run_agent.mjs '<json: {url, question?, threadId?, headers?, messages?, tools?, toolResults?}>'
// With `tools` (frontend tools) and `toolResults` ({toolName: content}), the script plays the application: when a
// run ends with pendingToolCallIds, it adds a tool message for each and starts the next run (at most 3 runs).
import { HttpAgent } from "@ag-ui/client";

const spec = JSON.parse(process.argv[2]);
const agent = new HttpAgent({
  url: spec.url,
  headers: spec.headers ?? {},
  threadId: spec.threadId,
  initialMessages: spec.messages ?? [],
});
if (spec.question !== undefined) {
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: spec.question });
}
const output = { runs: [], messages: [], result: undefined, error: undefined };
try {
  for (let run = 0; run < 3; run++) {
    const events = [];
    const { result } = await agent.runAgent(
      { tools: spec.tools ?? [], forwardedProps: spec.forwardedProps ?? {} },
      { onEvent: ({ event }) => { events.push(event); } },
    );
    output.runs.push(events);
    output.result = result;
    const finished = events.findLast((event) => event.type === "RUN_FINISHED");
    const pending = finished?.outcome?.pendingToolCallIds ?? [];
    if (pending.length === 0 || spec.toolResults === undefined) break;
    const calls = agent.messages.flatMap((message) => message.toolCalls ?? []);
    for (const id of pending) {
      const call = calls.find((candidate) => candidate.id === id);
      agent.addMessage({ id: crypto.randomUUID(), role: "tool", toolCallId: id, content: spec.toolResults[call.function.name] });
    }
  }
} catch (error) {
  output.error = String(error?.message ?? error);
}
output.events = output.runs[0] ?? [];
output.messages = agent.messages;
output.threadId = agent.threadId;
process.stdout.write(JSON.stringify(output) + "\n");

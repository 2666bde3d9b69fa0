// Runs one AG-UI run with the official @ag-ui/client HttpAgent and prints what the client saw as one JSON
// object: every event (as the client parsed it), the new messages, the run's result, and any error.
// Usage: node run_agent.mjs '<json: {url, question, threadId?, headers?, tools?, messages?, resume?}>'
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
const events = [];
const output = { events, newMessages: [], messages: [], result: undefined, error: undefined };
try {
  const { result, newMessages } = await agent.runAgent(
    { tools: spec.tools ?? [], resume: spec.resume, forwardedProps: spec.forwardedProps ?? {} },
    { onEvent: ({ event }) => { events.push(event); } },
  );
  output.result = result;
  output.newMessages = newMessages;
} catch (error) {
  output.error = String(error?.message ?? error);
}
output.messages = agent.messages;
output.threadId = agent.threadId;
process.stdout.write(JSON.stringify(output) + "\n");

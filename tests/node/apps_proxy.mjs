// The official @ag-ui/client HttpAgent as an MCP Apps host's client: one run whose model calls a tool with an
// interface (the run's events carry its ACTIVITY_SNAPSHOT), then the app's requests sent back through the
// proxy as CopilotKit sends them (a run with forwardedProps.__proxiedMCPRequest, on the same thread). Prints one
// JSON object: {events (of the first run), answers (each request's RUN_FINISHED result), proxyEvents, error}.
// Usage: node apps_proxy.mjs '<json: {url, headers?, threadId, question, requests: [{serverId, method, params}]}>'
import { HttpAgent } from "@ag-ui/client";

const spec = JSON.parse(process.argv[2]);
const agent = new HttpAgent({ url: spec.url, headers: spec.headers ?? {}, threadId: spec.threadId });
agent.addMessage({ id: crypto.randomUUID(), role: "user", content: spec.question });
const output = { events: [], answers: [], proxyEvents: [], error: undefined };
try {
  await agent.runAgent({}, { onEvent: ({ event }) => { output.events.push(event); } });
  for (const request of spec.requests) {
    const events = [];
    const { result } = await agent.runAgent(
      { forwardedProps: { __proxiedMCPRequest: request } },
      { onEvent: ({ event }) => { events.push(event); } },
    );
    output.proxyEvents.push(events);
    output.answers.push(result);
  }
} catch (error) {
  output.error = String(error?.message ?? error);
}
output.messages = agent.messages;
process.stdout.write(JSON.stringify(output) + "\n");

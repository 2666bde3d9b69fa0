// Runs the official @ag-ui/mcp-apps-middleware in front of an agent that calls one tool of an MCP App server, and
// prints the events the client saw as one JSON object: {events, error}. What our runtime emits for the same call
// is compared with it, field by field (tests/integration/test_apps_node.py).
// Usage: node apps_middleware.mjs '<json: {url, serverId, tool, arguments}>'
//   url: the app server's streamable HTTP endpoint; tool: a tool with _meta.ui.resourceUri; arguments: its input.
// The agent plays a model: its run streams an assistant message with one call of the tool (flat name as the
// middleware offers it: the tool's own name) and finishes; the middleware runs the call and adds TOOL_CALL_RESULT
// and ACTIVITY_SNAPSHOT before the RUN_FINISHED.
import { AbstractAgent, EventType } from "@ag-ui/client";
import { MCPAppsMiddleware } from "@ag-ui/mcp-apps-middleware";
import { Observable } from "rxjs";

const spec = JSON.parse(process.argv[2]);

class CallingAgent extends AbstractAgent {
  run(input) {
    return new Observable((subscriber) => {
      const ids = { threadId: input.threadId, runId: input.runId };
      subscriber.next({ type: EventType.RUN_STARTED, ...ids });
      subscriber.next({ type: EventType.TOOL_CALL_START, toolCallId: "c1", toolCallName: spec.tool, parentMessageId: "m1" });
      subscriber.next({ type: EventType.TOOL_CALL_ARGS, toolCallId: "c1", delta: JSON.stringify(spec.arguments) });
      subscriber.next({ type: EventType.TOOL_CALL_END, toolCallId: "c1" });
      subscriber.next({ type: EventType.RUN_FINISHED, ...ids });
      subscriber.complete();
    });
  }
}

const agent = new CallingAgent({ threadId: "t1" });
agent.use(new MCPAppsMiddleware({ mcpServers: [{ type: "http", url: spec.url, serverId: spec.serverId }] }));
agent.addMessage({ id: "u1", role: "user", content: "go" });
const output = { events: [], error: undefined };
try {
  await agent.runAgent({}, { onEvent: ({ event }) => { output.events.push(event); } });
} catch (error) {
  output.error = String(error?.message ?? error);
}
process.stdout.write(JSON.stringify(output) + "\n");

// Runs the official @ag-ui/client HttpAgent and prints what the client saw as one JSON object: the events of
// every run (as the client parsed them), the conversation it ended with, the last run's result, and any error.
// Usage: node run_agent.mjs '<json: {url, question?, threadId?, headers?, messages?, tools?, toolResults?}>'
// With `tools` (frontend tools) and `toolResults` ({toolName: content}), the script plays the application: when a
// run ends with pendingToolCallIds, it adds a tool message for each and starts the next run (at most 3 runs).
// With `approve` (true or false), a run that ends on approval interrupts is answered by the next run's resume;
// with `input` (a payload {action, content?}), so is a run that ends on a server's questions; with `authorize`
// ({user}), a run that ends on authorization_required interrupts: the script plays the person's browser (it opens
// the interrupt's URL, approves on the consent page as `user`, follows the redirect to the service's callback)
// and resumes.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const spec = JSON.parse(process.argv[2]);

// The person's browser on an authorization URL: the authorization server's redirect to its consent page, the
// approval (as `user`), and its redirect home to the service's /oauth/callback, whose answer must be a success.
async function approveInBrowser(url, user) {
  const consent = (await fetch(url, { redirect: "manual" })).headers.get("location");
  const transaction = new URL(consent).searchParams.get("transaction");
  const form = new URLSearchParams({ transaction, approve: "yes", user });
  const approved = await fetch(consent, { method: "POST", body: form, redirect: "manual" });
  const callback = await fetch(approved.headers.get("location"), { redirect: "manual" });
  if (callback.status !== 200) throw new Error(`the callback answered ${callback.status}: ${await callback.text()}`);
}
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
  let resume;
  for (let run = 0; run < 3; run++) {
    const events = [];
    const { result } = await agent.runAgent(
      { tools: spec.tools ?? [], forwardedProps: spec.forwardedProps ?? {}, resume },
      { onEvent: ({ event }) => { events.push(event); } },
    );
    resume = undefined;
    output.runs.push(events);
    output.result = result;
    const finished = events.findLast((event) => event.type === "RUN_FINISHED");
    const answering = spec.approve !== undefined || spec.input !== undefined || spec.authorize !== undefined;
    if (answering && agent.pendingInterrupts.length > 0) {
      for (const interrupt of agent.pendingInterrupts) {
        if (interrupt.reason === "authorization_required") await approveInBrowser(interrupt.metadata.url, spec.authorize.user);
      }
      const payload = (interrupt) => (interrupt.reason === "tool_approval" ? { approved: spec.approve } : spec.input);
      const answers = Object.fromEntries(agent.pendingInterrupts.map((interrupt) => [interrupt.id, { status: "resolved", payload: payload(interrupt) }]));
      resume = buildResumeArray(agent.pendingInterrupts, answers);
      continue;
    }
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

// A typed example of the AI SDK transport (issue 36 part 6): the
// transport is a `ChatTransport` of the `ai` package (its own types, the
// version pinned in package.json), and a UI renders the messages that
// `readUIMessageStream` assembles from its chunks with exhaustive switches
// over the part types and tool states it produces. Type-checked only
// (`tsc --strict`); e2e/tests/ai_transport.test.mjs runs it in Chromium.

import { readUIMessageStream } from "ai";
import type { ChatTransport, DynamicToolUIPart, UIMessageChunk } from "ai";
import type { AgentRuntime } from "../pkg/agent_host_browser.js";
import { AgentRuntimeChatTransport } from "../npm/ai_transport.js";
import type { AgentUIMessage } from "../npm/ai_transport.js";

function unreachable(value: never): never {
  throw new Error(`unhandled: ${JSON.stringify(value)}`);
}

function describeTool(part: DynamicToolUIPart): string {
  switch (part.state) {
    case "input-streaming": return `${part.toolName}…`;
    case "input-available": return `${part.toolName}(${JSON.stringify(part.input)})`;
    case "approval-requested": return `${part.toolName} asks: ${part.approval.requestReason ?? ""} [${part.approval.id}]`;
    case "approval-responded": return `${part.toolName}: ${part.approval.approved ? "approved" : "denied"}`;
    case "output-available": return `${part.toolName} → ${JSON.stringify(part.output)}`;
    case "output-error": return `${part.toolName} failed: ${part.errorText}`;
    case "output-denied": return `${part.toolName} denied`;
    default: return unreachable(part);
  }
}

function render(message: AgentUIMessage): string[] {
  const lines: string[] = [];
  if (message.metadata) lines.push(`run ${message.metadata.runId}: ${message.metadata.status}`);
  for (const part of message.parts) {
    switch (part.type) {
      case "text": lines.push(part.text); break;
      case "reasoning": lines.push(`(thinking) ${part.text}`); break;
      case "step-start": lines.push("—"); break;
      case "dynamic-tool": lines.push(describeTool(part)); break;
      default: break;
    }
  }
  return lines;
}

export async function show(runtime: AgentRuntime, chatId: string): Promise<string[]> {
  const transport: ChatTransport<AgentUIMessage> = new AgentRuntimeChatTransport({
    runtime,
    runOptions: (id) => (id === "strict" ? { approvalMode: "strict" } : undefined),
  });
  const stream: ReadableStream<UIMessageChunk> = await transport.sendMessages({
    trigger: "submit-message",
    chatId,
    messageId: undefined,
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "Write a note." }] }],
    abortSignal: undefined,
  });
  let last: AgentUIMessage | undefined;
  for await (const message of readUIMessageStream<AgentUIMessage>({ stream })) last = message;
  const again = await transport.reconnectToStream({ chatId });
  return [...(last ? render(last) : []), again === null ? "nothing open" : "replayed"];
}

// A chat rendered by the AI SDK's `useChat` (React) on the runtime's
// transport: each assistant message is one run, its tool calls are
// `dynamic-tool` parts, and an approval the run asks for is answered with
// the SDK's `addToolApprovalResponse`, which the transport hands to the
// runtime (`approve` / `deny`). The model is the scripted provider (no key
// needed); the run asks before it writes (strict approval mode). The chat's
// messages are kept in sessionStorage, and after a reload `resume` re-attaches
// to a run that still waits (it never resumes one by itself, S2.5).
import { StrictMode, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import init, { AgentRuntime } from 'agent-runtime-browser';
import { AgentRuntimeChatTransport } from 'agent-runtime-browser/ai-transport';
import wasmUrl from 'agent-runtime-browser/agent_host_browser_bg.wasm?url';
import workerGlueUrl from 'agent-runtime-browser/agent_worker_module.js?url';
import workerWasmUrl from 'agent-runtime-browser/agent_worker_module_bg.wasm?url';

const CHAT = 'example-chat';
const scenario = {
  turns: [
    {
      reasoning: 'The person wants a note; writing one needs their approval.',
      text: 'I will write the note.',
      tool_calls: [{ name: 'workspace_write', arguments: { path: 'notes/chat.md', content: '# From the chat\n' } }],
    },
    { text: 'Noted in notes/chat.md.' },
  ],
};

function ToolPart({ part, onAnswer }) {
  return (
    <div className="part" data-type={part.type} data-state={part.state}>
      <code>{part.toolName}</code> <span className="state">{part.state}</span>
      <pre>{JSON.stringify(part.input)}</pre>
      {part.state === 'approval-requested' && (
        <p>
          {part.approval.requestReason}{' '}
          <button type="button" className="approve" onClick={() => onAnswer(part.approval.id, true)}>Approve</button>{' '}
          <button type="button" className="deny" onClick={() => onAnswer(part.approval.id, false)}>Deny</button>
        </p>
      )}
      {part.state === 'output-available' && <pre className="output">{JSON.stringify(part.output)}</pre>}
      {part.state === 'output-error' && <p className="error">{part.errorText}</p>}
    </div>
  );
}

function Message({ message, onAnswer }) {
  return (
    <li data-role={message.role} data-status={message.metadata?.status ?? ''}>
      <strong>{message.role === 'user' ? 'You' : 'Agent'}</strong>
      {message.parts.map((part, i) => {
        switch (part.type) {
          case 'text': return <p key={i} className="part" data-type="text" data-state={part.state}>{part.text}</p>;
          case 'reasoning': return <p key={i} className="part" data-type="reasoning"><em>{part.text}</em></p>;
          case 'dynamic-tool': return <ToolPart key={i} part={part} onAnswer={onAnswer} />;
          default: return null;
        }
      })}
    </li>
  );
}

function Chat({ transport }) {
  const saved = JSON.parse(sessionStorage.getItem(CHAT) ?? '[]');
  const { messages, sendMessage, status, error, addToolApprovalResponse } = useChat({
    id: CHAT,
    transport,
    messages: saved,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState('');
  useEffect(() => { sessionStorage.setItem(CHAT, JSON.stringify(messages)); }, [messages]);
  const onAnswer = (id, approved) => addToolApprovalResponse({ id, approved });
  return (
    <main>
      <h1>A chat on the agent runtime</h1>
      <p>Status: <output id="chat-status" data-status={status}>{status}</output></p>
      {error && <p id="chat-error">{error.message}</p>}
      <ol id="messages">
        {messages.map((m) => <Message key={m.id} message={m} onAnswer={onAnswer} />)}
      </ol>
      <form onSubmit={(e) => { e.preventDefault(); if (input.trim()) { sendMessage({ text: input }); setInput(''); } }}>
        <input id="prompt" value={input} onChange={(e) => setInput(e.target.value)} placeholder="Ask the agent" />
        <button id="send" type="submit" disabled={status !== 'ready'}>Send</button>
      </form>
    </main>
  );
}

await init({ module_or_path: wasmUrl });
const runtime = await AgentRuntime.create({
  databaseName: 'example-chat',
  model: { provider: 'scripted', scenario },
  approvalMode: 'strict',
  workerGlueUrl: new URL(workerGlueUrl, location.href).href,
  workerWasmUrl: new URL(workerWasmUrl, location.href).href,
});
const transport = new AgentRuntimeChatTransport({ runtime });
createRoot(document.getElementById('root')).render(<StrictMode><Chat transport={transport} /></StrictMode>);

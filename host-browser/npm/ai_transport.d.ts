// The types of `agent-runtime-browser/ai-transport`: a `ChatTransport` of the
// AI SDK (`ai`, major version 7), typed with the `ai` package's own types.
import type { ChatRequestOptions, ChatTransport, UIMessage, UIMessageChunk } from 'ai';
import type { AgentRuntime, RunOptions, RunStatus, StopReason } from './agent_host_browser.js';

/** The metadata of an assistant message: the run it shows, and how its stream ended. */
export interface AgentRunMetadata {
  runId: string;
  status: RunStatus;
  stopReason?: StopReason;
}

/** A UI message whose assistant messages carry their run's metadata. */
export type AgentUIMessage = UIMessage<AgentRunMetadata>;

export interface AgentRuntimeChatTransportOptions {
  /** The page's runtime. */
  runtime: AgentRuntime;
  /** The session a chat's runs live in (default: the chat id). */
  session?: (chatId: string) => string;
  /** The options of each new run, or a function of the chat id giving them. */
  runOptions?: RunOptions | ((chatId: string) => RunOptions | undefined);
}

/**
 * The AI SDK's chat UI on an `AgentRuntime`: one assistant message per run
 * (its id is the run id), one step per model round, each tool call a
 * `dynamic-tool` part, a pending approval the SDK's tool approval (answered
 * with `addToolApprovalResponse`, which reaches `approve` / `deny`).
 * `reconnectToStream` replays a persisted open run and never resumes it.
 */
export declare class AgentRuntimeChatTransport<UI_MESSAGE extends UIMessage = AgentUIMessage>
  implements ChatTransport<UI_MESSAGE> {
  constructor(options: AgentRuntimeChatTransportOptions);
  /** Always true: a reconnection replays the run from its beginning. */
  readonly resumeStreamIsReplay: boolean;
  sendMessages(options: {
    trigger: 'submit-message' | 'regenerate-message';
    chatId: string;
    messageId: string | undefined;
    messages: UI_MESSAGE[];
    abortSignal: AbortSignal | undefined;
  } & ChatRequestOptions): Promise<ReadableStream<UIMessageChunk>>;
  reconnectToStream(options: {
    chatId: string;
    abortSignal?: AbortSignal;
  } & ChatRequestOptions): Promise<ReadableStream<UIMessageChunk> | null>;
}

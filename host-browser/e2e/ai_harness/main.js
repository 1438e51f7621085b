// The AI SDK (`ai`, from npm) in a page for e2e/tests/ai_transport.test.mjs,
// bundled by Vite there: its `Chat` (an `AbstractChat` over a plain array
// of messages, as a framework binding keeps them) and `readUIMessageStream`,
// which read the runtime's transport (host-browser/npm/ai_transport.js).
import { AbstractChat, lastAssistantMessageIsCompleteWithApprovalResponses, readUIMessageStream } from 'ai';

/** The chat's state: its messages in an array; `onChange` sees every change. */
class ArrayChatState {
  constructor(messages, onChange) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
    this.onChange = onChange;
  }

  pushMessage(message) { this.messages = [...this.messages, message]; this.onChange(this.messages); }

  popMessage() { this.messages = this.messages.slice(0, -1); this.onChange(this.messages); }

  replaceMessage(index, message) {
    this.messages = this.messages.map((m, i) => (i === index ? message : m));
    this.onChange(this.messages);
  }

  snapshot(thing) { return structuredClone(thing); }
}

export class PageChat extends AbstractChat {
  constructor({ messages = [], onChange = () => {}, ...init }) {
    super({ ...init, state: new ArrayChatState(messages, onChange) });
  }
}

window.aiSdk = { PageChat, lastAssistantMessageIsCompleteWithApprovalResponses, readUIMessageStream };
document.body.dataset.ready = 'true';

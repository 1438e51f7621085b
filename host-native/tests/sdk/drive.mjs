// Drives one official provider SDK through the agentrt relay (the test
// host-native/tests/relay_sdk.rs runs it): the SDK gets the relay as its
// base URL and the gateway token as its API key, streams one answer with
// its own stream helper, then makes the same request without streaming
// (which the relay refuses). It prints one JSON line: what the SDK parsed
// (text, tool calls, finish) and what it read from the refusal.
//
//   node drive.mjs openai|anthropic|gemini <base URL> <token>
//
// Besides the token each client sends a page-supplied key in another key
// header ("page-supplied-key"): the relay must forward neither.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';

const [sdk, baseURL, token] = process.argv.slice(2);
const PAGE_KEY = 'page-supplied-key';
const weather = {
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
  },
};

async function refusal(call) {
  try {
    await call();
    return null;
  } catch (e) {
    return { status: e.status ?? null, message: String(e.message) };
  }
}

async function openai() {
  const client = new OpenAI({
    baseURL,
    apiKey: token,
    maxRetries: 0,
    defaultHeaders: { 'x-api-key': PAGE_KEY, 'x-goog-api-key': PAGE_KEY },
  });
  const params = {
    model: 'gpt-test',
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [{ type: 'function', function: weather }],
  };
  const stream = client.chat.completions.stream(params);
  const done = await stream.finalChatCompletion();
  const choice = done.choices[0];
  return {
    text: choice.message.content,
    tool_calls: (choice.message.tool_calls ?? []).map((c) => ({
      id: c.id,
      name: c.function.name,
      arguments: JSON.parse(c.function.arguments),
    })),
    finish: choice.finish_reason,
    refused: await refusal(() => client.chat.completions.create({ ...params, stream: false })),
  };
}

async function anthropic() {
  const client = new Anthropic({
    baseURL,
    apiKey: token,
    maxRetries: 0,
    // Not `authorization`: with it the SDK leaves out its x-api-key.
    defaultHeaders: { 'x-goog-api-key': PAGE_KEY },
  });
  const params = {
    model: 'claude-test',
    max_tokens: 256,
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [{ name: weather.name, description: weather.description, input_schema: weather.parameters }],
  };
  const done = await client.messages.stream(params).finalMessage();
  return {
    text: done.content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
    tool_calls: done.content
      .filter((b) => b.type === 'tool_use')
      .map((b) => ({ id: b.id, name: b.name, arguments: b.input })),
    finish: done.stop_reason,
    usage: done.usage,
    refused: await refusal(() => client.messages.create(params)),
  };
}

async function gemini() {
  const ai = new GoogleGenAI({
    apiKey: token,
    httpOptions: {
      baseUrl: baseURL,
      headers: { authorization: `Bearer ${PAGE_KEY}`, 'x-api-key': PAGE_KEY },
    },
  });
  const params = {
    model: 'gemini-2.5-flash',
    contents: 'Weather in Paris?',
    config: { tools: [{ functionDeclarations: [weather] }] },
  };
  let text = '';
  const toolCalls = [];
  let finish = null;
  let usage = null;
  for await (const chunk of await ai.models.generateContentStream(params)) {
    text += chunk.text ?? '';
    for (const c of chunk.functionCalls ?? []) {
      toolCalls.push({ name: c.name, arguments: c.args });
    }
    finish = chunk.candidates?.[0]?.finishReason ?? finish;
    usage = chunk.usageMetadata ?? usage;
  }
  return {
    text,
    tool_calls: toolCalls,
    finish,
    usage: usage && { prompt: usage.promptTokenCount, candidates: usage.candidatesTokenCount },
    refused: await refusal(() => ai.models.generateContent(params)),
  };
}

const drivers = { openai, anthropic, gemini };
if (!drivers[sdk]) {
  console.error(`unknown SDK ${sdk}: expected openai, anthropic or gemini`);
  process.exit(2);
}
try {
  console.log(JSON.stringify(await drivers[sdk]()));
} catch (e) {
  console.error(`the ${sdk} SDK failed: ${e?.stack ?? e}`);
  process.exit(1);
}

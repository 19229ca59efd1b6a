// The Vercel AI SDK (`ai` + `@ai-sdk/openai`) against hermes-trio:
// createOpenAI({baseURL, apiKey}).chat('hermes-agent') or .responses('hermes-agent'),
// streamText or generateText with a tool that has `execute`, several steps
// (stopWhen: stepCountIs), then a second turn that reuses the first turn's
// response.messages.
//
// Cases: chat_stream, chat_generate, responses_stream, responses_generate.
import { describe, emit, main, require, version } from './_common.mjs';

const { streamText, generateText, stepCountIs, tool, jsonSchema } = require('ai');
const { createOpenAI } = require('@ai-sdk/openai');

function setup(config, api) {
  emit('sdk', { ai: version('ai'), provider: version('@ai-sdk/openai') });
  const provider = createOpenAI({ baseURL: config.base_url, apiKey: config.api_key });
  const model = api === 'chat' ? provider.chat('hermes-agent') : provider.responses('hermes-agent');
  const tools = {
    lookup_order: tool({
      description: 'Look up the status of an order by its id.',
      inputSchema: jsonSchema({
        type: 'object',
        properties: { order_id: { type: 'string' } },
        required: ['order_id'],
        additionalProperties: false,
      }),
      execute: async ({ order_id }) => {
        emit('client_tool_ran', { order_id });
        return `order ${order_id}: shipped on Tuesday`;
      },
    }),
  };
  return { model, tools };
}

async function turnStreamed(model, tools, messages, label) {
  const result = streamText({
    model, tools, messages, stopWhen: stepCountIs(5), maxRetries: 0,
    onError: () => {}, // reported from fullStream's error parts below
  });
  const text = [];
  for await (const part of result.fullStream) {
    if (part.type === 'text-delta') text.push(part.text);
    else if (part.type === 'tool-call') emit('tool_call', { turn: label, name: part.toolName, input: part.input });
    else if (part.type === 'tool-result') emit('tool_result', { turn: label, name: part.toolName });
    else if (part.type === 'tool-error') emit('tool_error', { turn: label, name: part.toolName, error: String(part.error?.message || part.error) });
    else if (part.type === 'error') emit('error_part', { turn: label, ...describe(part.error) });
  }
  const steps = await result.steps;
  const response = await result.response;
  emit('turn', {
    turn: label, text: text.join(''), deltas: text.length, steps: steps.length,
    finish: await result.finishReason,
  });
  return response.messages;
}

async function turnGenerated(model, tools, messages, label) {
  const result = await generateText({ model, tools, messages, stopWhen: stepCountIs(5), maxRetries: 0 });
  for (const step of result.steps) {
    for (const part of step.content) {
      if (part.type === 'tool-call') emit('tool_call', { turn: label, name: part.toolName, input: part.input });
      else if (part.type === 'tool-result') emit('tool_result', { turn: label, name: part.toolName });
      else if (part.type === 'tool-error') emit('tool_error', { turn: label, name: part.toolName, error: String(part.error?.message || part.error) });
    }
  }
  emit('turn', { turn: label, text: result.text, steps: result.steps.length, finish: result.finishReason });
  return result.response.messages;
}

async function run(config, api, streamed) {
  const { model, tools } = setup(config, api);
  const turn = streamed ? turnStreamed : turnGenerated;
  const messages = [{ role: 'user', content: 'Where is order A-17?' }];
  messages.push(...(await turn(model, tools, messages, 'first')));
  emit('history', { roles: messages.map((m) => m.role) });
  messages.push({ role: 'user', content: 'And when will it arrive?' });
  await turn(model, tools, messages, 'second');
}

// Provider options an AI SDK user sets that this server does not use itself:
// each tried on its own and reported, none thrown.
async function extraFields(config, api) {
  const { model } = setup(config, api);
  const trials = {
    'textVerbosity/promptCacheKey/safetyIdentifier': {
      openai: { textVerbosity: 'low', promptCacheKey: 'k1', safetyIdentifier: 'user-1' },
    },
  };
  if (api === 'responses') trials["truncation: 'auto'"] = { openai: { truncation: 'auto' } };
  for (const [name, providerOptions] of Object.entries(trials)) {
    try {
      const result = await generateText({ model, prompt: 'hi', providerOptions, maxRetries: 0 });
      emit('trial', { name, ok: true, text: result.text });
    } catch (err) {
      emit('trial', { name, ok: false, status: err?.statusCode ?? null, message: String(err?.message || err) });
    }
  }
}

main({
  chat_extra_fields: (c) => extraFields(c, 'chat'),
  responses_extra_fields: (c) => extraFields(c, 'responses'),
  chat_stream: (c) => run(c, 'chat', true),
  chat_generate: (c) => run(c, 'chat', false),
  responses_stream: (c) => run(c, 'responses', true),
  responses_generate: (c) => run(c, 'responses', false),
});

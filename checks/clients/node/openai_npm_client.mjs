// The official openai npm client (Node) against hermes-trio.
//
// Cases: chat_stream (text reassembled, tool-call fragments counted),
// lone_surrogate (a JS string cut in the middle of an emoji, as `.slice()`
// does, sent on an X-Session-ID session and to /v1/responses).
import { emit, main, now, require, version } from './_common.mjs';

const { default: OpenAI } = require('openai');

function client(config) {
  emit('sdk', { version: version('openai') });
  return new OpenAI({ baseURL: config.base_url, apiKey: config.api_key, maxRetries: 0, timeout: 15000 });
}

async function chatStream(config) {
  const c = client(config);
  const stream = await c.chat.completions.create({
    model: 'hermes-agent', stream: true,
    messages: [{ role: 'user', content: 'Tell me a story.' }],
  });
  let text = '', deltas = 0;
  const finish = [];
  for await (const chunk of stream) {
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    if (choice.delta?.content) { text += choice.delta.content; deltas++; }
    if (choice.finish_reason) finish.push(choice.finish_reason);
  }
  emit('result', { text, deltas, finish });
}

async function attempt(name, fn) {
  try {
    emit('trial', { name, ok: true, value: await fn() });
  } catch (err) {
    emit('trial', { name, ok: false, status: err?.status ?? null, message: String(err?.message || err).slice(0, 500) });
  }
}

async function loneSurrogate(config) {
  const c = client(config);
  const cut = 'moon 🌙'.slice(0, 6); // 'moon \ud83c': half of a surrogate pair
  const headers = { 'X-Session-ID': 'check-surrogate' };
  await attempt('chat with a lone surrogate', async () => (await c.chat.completions.create(
    { model: 'hermes-agent', messages: [{ role: 'user', content: cut }] }, { headers },
  )).choices[0].message.content);
  await attempt('the same session afterwards', async () => (await c.chat.completions.create(
    { model: 'hermes-agent', messages: [{ role: 'user', content: 'hello again' }] }, { headers },
  )).choices[0].message.content);
  await attempt('responses with a lone surrogate', async () => (await c.responses.create(
    { model: 'hermes-agent', input: cut },
  )).output_text);
}

main({ chat_stream: chatStream, lone_surrogate: loneSurrogate });

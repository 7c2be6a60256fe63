// Real clients of citegate in front of an upstream of another dialect (SPEC §6a):
// the official OpenAI SDK (openai-node) and the Vercel AI SDK (`ai` with the
// `@ai-sdk/openai` chat model, which turns url_citation annotations into sources).
// Prints what each handed to the application, as JSON, for test_sdk_dialects.py.
//
// usage: node sdk_dialects.mjs PORT PLAN.json
// PLAN: {"stream": FIXTURE, "body": FIXTURE, "messages": [...]}; each fixture is
// served by the mock (X-Mock-Fixture), the messages are the request's.
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { generateText, streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

const port = process.argv[2];
const plan = JSON.parse(readFileSync(process.argv[3], 'utf8'));
const baseURL = `http://127.0.0.1:${port}/v1`;

function headers(fixture, profile) {
  return { 'X-Mock-Fixture': fixture, 'X-Citegate-Profile': profile };
}

function openai(fixture, profile) {
  return new OpenAI({ baseURL, apiKey: 'sk-test', maxRetries: 0, defaultHeaders: headers(fixture, profile) });
}

async function sdkStream(profile) {
  const stream = await openai(plan.stream, profile).chat.completions.create({
    model: 'gpt-4o', messages: plan.messages, stream: true,
  });
  let content = '';
  const sources = [];
  const annotations = [];
  for await (const chunk of stream) {
    if (chunk.event && chunk.event.type === 'source') sources.push(chunk.event.data.source);
    for (const ch of chunk.choices ?? []) {
      if (typeof ch.delta?.content === 'string') content += ch.delta.content;
      for (const a of ch.delta?.annotations ?? []) annotations.push(a.url_citation);
    }
  }
  return { content, sources, annotations };
}

async function sdkBody(profile) {
  const body = await openai(plan.body, profile).chat.completions.create({
    model: 'gpt-4o', messages: plan.messages,
  });
  const message = body.choices[0].message;
  return {
    content: message.content,
    sources: (body.sources ?? []).map((s) => s.source),
    annotations: (message.annotations ?? []).map((a) => a.url_citation),
  };
}

// The AI SDK's chat-completions model, asking citegate for profile openai.
function aiModel(fixture) {
  return createOpenAI({ baseURL, apiKey: 'sk-test', headers: headers(fixture, 'openai') }).chat('gpt-4o');
}

// The AI SDK takes system messages as `instructions`, the rest as messages.
const instructions = plan.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n\n');
const aiMessages = plan.messages.filter((m) => m.role !== 'system');

function urlSources(sources) {
  return sources.filter((s) => s.sourceType === 'url').map((s) => ({ url: s.url, title: s.title }));
}

async function aiStream() {
  const result = streamText({ model: aiModel(plan.stream), instructions, messages: aiMessages, maxRetries: 0 });
  let text = '';
  for await (const piece of result.textStream) text += piece;
  return { text, sources: urlSources(await result.sources), finishReason: await result.finishReason };
}

async function aiBody() {
  const result = await generateText({
    model: aiModel(plan.body), instructions, messages: aiMessages, maxRetries: 0,
  });
  return { text: result.text, sources: urlSources(result.sources), finishReason: result.finishReason };
}

const out = {
  sdk_stream: await sdkStream('openwebui'),
  sdk_body: await sdkBody('openwebui'),
  sdk_stream_openai: await sdkStream('openai'),
  sdk_body_openai: await sdkBody('openai'),
  ai_stream: await aiStream(),
  ai_body: await aiBody(),
};
console.log(JSON.stringify(out));

// Real clients of citegate in front of an upstream of another dialect (SPEC §6a):
// the official OpenAI SDK (openai-node), the Vercel AI SDK (`ai` with the
// `@ai-sdk/openai` chat model, which turns url_citation annotations into sources) and
// LangChain JS (`@langchain/openai`'s ChatOpenAI on chat completions).
// Prints what each handed to the application, as JSON, for test_sdk_dialects.py: of the
// OpenAI SDK's answers, the content, the heads of the sources (`sources`) and the whole
// SOURCE objects (`source_objects`), the url_citation annotations and the citations.
//
// usage: node sdk_dialects.mjs PORT PLAN.json
// PLAN: {"stream": FIXTURE, "body": FIXTURE, "messages": [...], "model"?: M,
// "fixture_header"?: H}; each fixture is named to the mock in header H (default
// X-Mock-Fixture; the bedrock mock's is X-Mock-Scenario), the messages are the
// request's, M the model asked for (default gpt-4o).
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { generateText, streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI } from '@langchain/openai';

const port = process.argv[2];
const plan = JSON.parse(readFileSync(process.argv[3], 'utf8'));
const baseURL = `http://127.0.0.1:${port}/v1`;
const model = plan.model ?? 'gpt-4o';

function headers(fixture, profile) {
  return { [plan.fixture_header ?? 'X-Mock-Fixture']: fixture, 'X-Citegate-Profile': profile };
}

function openai(fixture, profile) {
  return new OpenAI({ baseURL, apiKey: 'sk-test', maxRetries: 0, defaultHeaders: headers(fixture, profile) });
}

async function sdkStream(profile) {
  const stream = await openai(plan.stream, profile).chat.completions.create({
    model, messages: plan.messages, stream: true,
  });
  let content = '';
  const sources = [];
  const sourceObjects = [];
  const annotations = [];
  const citations = [];
  for await (const chunk of stream) {
    if (chunk.event && chunk.event.type === 'source') {
      sources.push(chunk.event.data.source);
      sourceObjects.push(chunk.event.data);
    }
    for (const c of chunk.citations ?? []) citations.push(c.source);
    for (const ch of chunk.choices ?? []) {
      if (typeof ch.delta?.content === 'string') content += ch.delta.content;
      for (const a of ch.delta?.annotations ?? []) annotations.push(a.url_citation);
    }
  }
  return { content, sources, source_objects: sourceObjects, annotations, citations };
}

async function sdkBody(profile) {
  const body = await openai(plan.body, profile).chat.completions.create({
    model, messages: plan.messages,
  });
  const message = body.choices[0].message;
  return {
    content: message.content,
    sources: (body.sources ?? []).map((s) => s.source),
    source_objects: body.sources ?? [],
    annotations: (message.annotations ?? []).map((a) => a.url_citation),
    citations: (body.citations ?? []).map((c) => c.source),
  };
}

// The AI SDK's chat-completions model, asking citegate for profile openai.
function aiModel(fixture) {
  return createOpenAI({ baseURL, apiKey: 'sk-test', headers: headers(fixture, 'openai') }).chat(model);
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

// LangChain's ChatOpenAI (chat completions). It hands the application the text, and
// response_metadata / usage_metadata; it keeps no url_citation annotation of chat
// completions in additional_kwargs, response_metadata or contentBlocks, so they are read
// from what its `__includeRawResponse` option adds to each message: the raw chunk or body.
function lcModel(fixture, profile) {
  return new ChatOpenAI({
    model, apiKey: 'sk-test', maxRetries: 0, __includeRawResponse: true,
    configuration: { baseURL, defaultHeaders: headers(fixture, profile) },
  });
}

function lcOut(message, annotations) {
  return {
    content: message.content,
    annotations,
    finishReason: message.response_metadata?.finish_reason ?? null,
    modelName: message.response_metadata?.model_name ?? null,
    usage: message.usage_metadata
      ? { input_tokens: message.usage_metadata.input_tokens, output_tokens: message.usage_metadata.output_tokens,
        total_tokens: message.usage_metadata.total_tokens }
      : null,
  };
}

async function lcStream(profile) {
  let message;
  const annotations = [];
  for await (const chunk of await lcModel(plan.stream, profile).stream(plan.messages)) {
    message = message ? message.concat(chunk) : chunk;
    for (const ch of chunk.additional_kwargs?.__raw_response?.choices ?? [])
      for (const a of ch.delta?.annotations ?? []) annotations.push(a.url_citation);
  }
  return lcOut(message, annotations);
}

async function lcBody(profile) {
  const message = await lcModel(plan.body, profile).invoke(plan.messages);
  const raw = message.additional_kwargs?.__raw_response;
  return lcOut(message, (raw?.choices?.[0]?.message?.annotations ?? []).map((a) => a.url_citation));
}

const out = {
  sdk_stream: await sdkStream('openwebui'),
  sdk_body: await sdkBody('openwebui'),
  sdk_stream_openai: await sdkStream('openai'),
  sdk_body_openai: await sdkBody('openai'),
  ai_stream: await aiStream(),
  ai_body: await aiBody(),
  lc_stream: await lcStream('openwebui'),
  lc_stream_openai: await lcStream('openai'),
  lc_body_openai: await lcBody('openai'),
};
console.log(JSON.stringify(out));

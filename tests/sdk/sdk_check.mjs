// Drives citegate with the official OpenAI SDK (openai-node) and prints what
// the SDK handed to the application, as JSON, for test_sdk.py to check.
// usage: node sdk_check.mjs PORT
import OpenAI, { AzureOpenAI } from 'openai';

const port = process.argv[2];
const messages = [{ role: 'user', content: 'How do I charge the X100?' }];

function client(fixture, extra = {}) {
  return new OpenAI({
    baseURL: `http://127.0.0.1:${port}/v1`,
    apiKey: 'sk-test',
    maxRetries: 0,
    defaultHeaders: { 'X-Mock-Fixture': fixture, ...extra },
  });
}

async function collect(stream) {
  const content = {};
  const sources = [];
  for await (const chunk of stream) {
    if (chunk.event && chunk.event.type === 'source') sources.push(chunk.event.data);
    for (const ch of chunk.choices ?? []) {
      const piece = ch.delta?.content;
      if (typeof piece === 'string') content[ch.index] = (content[ch.index] ?? '') + piece;
    }
  }
  return { content, sources };
}

const out = {};
for (const split of ['1', '7', '64']) {
  const s = await client('azure_oyd_stream.sse', { 'X-Mock-Split': split })
    .chat.completions.create({ model: 'gpt-4o', messages, stream: true });
  out[`stream_split_${split}`] = await collect(s);
}

const body = await client('azure_oyd_response.json')
  .chat.completions.create({ model: 'gpt-4o', messages });
out.body = { content: { 0: body.choices[0].message.content }, sources: body.sources };

const azure = new AzureOpenAI({
  endpoint: `http://127.0.0.1:${port}`,
  apiKey: 'azure-key',
  apiVersion: '2024-02-01',
  deployment: 'gpt-4o',
  maxRetries: 0,
  defaultHeaders: { 'X-Mock-Fixture': 'azure_oyd_stream.sse' },
});
out.azure = await collect(await azure.chat.completions.create({ model: 'gpt-4o', messages, stream: true }));

try {
  await collect(await client('azure_truncated.sse').chat.completions.create({ model: 'gpt-4o', messages, stream: true }));
  out.truncated = 'no error';
} catch (e) {
  out.truncated = String(e.message ?? e);
}

console.log(JSON.stringify(out));

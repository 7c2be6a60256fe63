// Drives citegate, one request per profile and fixture, with three clients and prints what each
// handed to the application, as JSON, for tests/integration/test_sdk_profiles.py to check:
//   sdk     the official OpenAI SDK (openai-node): chat.completions.create({stream: true}) iterated
//           chunk by chunk, or create() without stream + .withResponse() (raw headers)
//   helper  the SDK's ChatCompletionStream helper (chat.completions.stream) + finalChatCompletion()
//   raw     fetch() + the eventsource-parser package (the EventSource parsing rules), fed byte
//           pieces of 7 bytes through a streaming TextDecoder
// The profile is chosen per request with the X-Citegate-Profile header; the mock upstream serves the
// fixture named in X-Mock-Fixture.
//
// usage: node sdk_profiles.mjs PORT PLAN.json
//   PLAN.json: {"runs": [{"name", "profile", "fixture", "request": {...chat body...},
//                         "mode": "stream" | "helper" | "raw" | "body", "split"?: N}]}
import OpenAI from 'openai';
import { createParser } from 'eventsource-parser';
import { readFileSync } from 'node:fs';

const [port, planPath] = process.argv.slice(2);
const { runs } = JSON.parse(readFileSync(planPath, 'utf8'));
const baseURL = `http://127.0.0.1:${port}/v1`;

const client = new OpenAI({ baseURL, apiKey: 'sk-test', maxRetries: 0, timeout: 20000 });

function headersOf(run) {
  const h = { 'X-Citegate-Profile': run.profile, 'X-Mock-Fixture': run.fixture };
  if (run.split) h['X-Mock-Split'] = String(run.split);
  return h;
}

function bodyOf(run, stream) {
  const { stream: _ignored, ...rest } = run.request;
  return { model: 'gpt-4o', ...rest, stream };
}

function errText(e) {
  return `${e?.constructor?.name ?? 'Error'}: ${e?.message ?? String(e)}`;
}

// content[i].slice(start, end) for every annotation, in JavaScript (UTF-16) indices
function slices(content, annotations) {
  const out = {};
  for (const [i, list] of Object.entries(annotations)) {
    out[i] = (list ?? []).map(a => {
      const u = a?.url_citation ?? {};
      return (content[i] ?? '').slice(u.start_index, u.end_index);
    });
  }
  return out;
}

async function viaSdkStream(run) {
  const r = { content: {}, annotations: {}, citations: [], entities: [], sources: [], chunks: 0, error: null };
  try {
    const stream = await client.chat.completions.create(bodyOf(run, true), { headers: headersOf(run) });
    for await (const chunk of stream) {
      r.chunks++;
      if (chunk.event && chunk.event.type === 'source') r.sources.push(chunk.event.data);
      if (chunk.citations !== undefined) r.citations.push(chunk.citations);
      if (chunk.entities !== undefined) r.entities.push(chunk.entities);
      for (const ch of chunk.choices ?? []) {
        const d = ch.delta ?? {};
        if (typeof d.content === 'string') r.content[ch.index] = (r.content[ch.index] ?? '') + d.content;
        if (d.annotations !== undefined) (r.annotations[ch.index] ??= []).push(...d.annotations);
      }
    }
  } catch (e) {
    r.error = errText(e);
  }
  r.slices = slices(r.content, r.annotations);
  return r;
}

async function viaHelper(run) {
  const r = { content: {}, final: null, error: null };
  try {
    const runner = client.chat.completions.stream(bodyOf(run, true), { headers: headersOf(run) });
    runner.on('content', (delta, snapshot) => {
      r.content[0] = snapshot;
    });
    for await (const _chunk of runner) {
      // events above collect the snapshot
    }
    const fin = await runner.finalChatCompletion();
    const content = {}, annotations = {};
    for (const ch of fin.choices) {
      content[ch.index] = ch.message.content;
      if (ch.message.annotations !== undefined) annotations[ch.index] = ch.message.annotations;
    }
    r.final = {
      content,
      annotations,
      citations: fin.citations ?? null,
      finish_reason: fin.choices.map(c => c.finish_reason),
      slices: slices(content, annotations)
    };
  } catch (e) {
    r.error = errText(e);
  }
  return r;
}

async function viaRaw(run) {
  const r = { status: null, contentType: null, events: [], notJson: [], parseErrors: [], error: null };
  try {
    const res = await fetch(`${baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer sk-test', ...headersOf(run) },
      body: JSON.stringify(bodyOf(run, true)),
      signal: AbortSignal.timeout(20000)
    });
    r.status = res.status;
    r.contentType = res.headers.get('content-type');
    r.citationsRemoved = res.headers.get('x-citegate-citations-removed');
    const parser = createParser({
      onEvent: ev => {
        r.events.push({ event: ev.event ?? null, id: ev.id ?? null, data: ev.data });
        if (ev.data !== '[DONE]') {
          try {
            JSON.parse(ev.data);
          } catch {
            r.notJson.push(ev.data);
          }
        }
      },
      onError: err => r.parseErrors.push(errText(err))
    });
    const bytes = new Uint8Array(await res.arrayBuffer());
    const dec = new TextDecoder('utf-8', { fatal: true });
    for (let i = 0; i < bytes.length; i += 7) parser.feed(dec.decode(bytes.subarray(i, i + 7), { stream: true }));
    parser.feed(dec.decode());
  } catch (e) {
    r.error = errText(e);
  }
  return r;
}

async function viaBody(run) {
  const r = { content: {}, annotations: {}, error: null };
  try {
    const { data, response } = await client.chat.completions
      .create(bodyOf(run, false), { headers: headersOf(run) })
      .withResponse();
    for (const ch of data.choices) {
      r.content[ch.index] = ch.message.content;
      if (ch.message.annotations !== undefined) r.annotations[ch.index] = ch.message.annotations;
    }
    r.citations = data.citations ?? null;
    r.entities = data.entities ?? null;
    r.sources = data.sources ?? null;
    r.citationsRemoved = response.headers.get('x-citegate-citations-removed');
    r.slices = slices(r.content, r.annotations);
  } catch (e) {
    r.error = errText(e);
  }
  return r;
}

const modes = { stream: viaSdkStream, helper: viaHelper, raw: viaRaw, body: viaBody };
const out = {};
for (const run of runs) out[run.name] = await modes[run.mode](run);
console.log(JSON.stringify(out));

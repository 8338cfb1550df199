// The OpenAI Node SDK (pinned in package.json) through the gateway: runs the
// client matrix's cases given by tests/test_clients.py and prints what the
// SDK saw, one JSON object keyed by case id. The expectations live in the
// Python tests, shared by every client; this only drives the SDK.
//
// stdin: {"base": "http://127.0.0.1:PORT/v1", "concurrency": N, "cases": [case, ...]}
// case:  {"id", "op": "list"|"retrieve"|"chat"|"stream"|"round_trip"|"embed",
//         "key", "headers", "body", "model", "max_retries", "results"}
import OpenAI from 'openai';
import { observe, runPlan } from './plan.mjs';

function errorObservation(e) {
  return {
    class: e?.constructor?.name ?? typeof e,
    status: e?.status ?? null,
    body: e?.error && typeof e.error === 'object' ? e.error : null,
    message: String(e?.message ?? e),
    retry_after: e?.headers?.get?.('retry-after') ?? null,
  };
}

async function runCase(base, c) {
  const sent = [];
  // Records when each HTTP request leaves the SDK (its own retries included).
  const fetchWithLog = (url, init) => {
    sent.push(Date.now() / 1000);
    return fetch(url, init);
  };
  const client = new OpenAI({
    baseURL: base,
    apiKey: c.key,
    maxRetries: c.max_retries ?? 0,
    timeout: 60_000,
    fetch: fetchWithLog,
  });
  const opts = { headers: c.headers };
  const obs = { ok: true, sent };
  await observe(obs, errorObservation, async () => {
    switch (c.op) {
      case 'list': {
        const page = await client.models.list(opts);
        obs.result = { data: page.data };
        break;
      }
      case 'retrieve':
        obs.result = await client.models.retrieve(c.model, opts);
        break;
      case 'chat':
        obs.result = await client.chat.completions.create(c.body, opts);
        break;
      case 'stream': {
        obs.chunks = [];
        const stream = await client.chat.completions.create({ ...c.body, stream: true }, opts);
        for await (const chunk of stream) obs.chunks.push(chunk);
        break;
      }
      case 'round_trip': {
        const first = await client.chat.completions.create(c.body, opts);
        obs.first = first;
        const message = first.choices[0].message;
        const calls = message.tool_calls ?? [];
        const messages = [...c.body.messages, message,
          ...calls.map((call, i) => ({ role: 'tool', tool_call_id: call.id, content: c.results[i] }))];
        obs.result = await client.chat.completions.create({ ...c.body, messages, tool_choice: 'auto' }, opts);
        break;
      }
      case 'embed':
        obs.result = await client.embeddings.create(c.body, opts);
        break;
      default:
        throw new Error(`unknown op ${c.op}`);
    }
  });
  return obs;
}

runPlan(runCase);

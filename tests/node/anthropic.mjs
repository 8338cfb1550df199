// The Anthropic Node SDK (@anthropic-ai/sdk, pinned in package.json) against
// the gateway's Messages surface: runs the cases tests/test_anthropic_node.py
// gives and prints what the SDK saw, one JSON object keyed by case id. The
// expectations live in the Python test; this only drives the SDK.
//
// stdin: {"base": "http://127.0.0.1:PORT", "concurrency": N, "cases": [case, ...]}
// case:  {"id", "op": "create"|"stream"|"stream_raw"|"round_trip"|"count",
//         "key", "headers", "body", "stream_first", "results" (round_trip)}
import Anthropic from '@anthropic-ai/sdk';
import { observe, runPlan } from './plan.mjs';

function errorObservation(e) {
  const h = e?.headers;
  return {
    class: e?.constructor?.name ?? typeof e,
    status: e?.status ?? null,
    type: e?.type ?? null,
    body: e?.error && typeof e.error === 'object' ? e.error : null,
    message: String(e?.message ?? e),
    request_id: e?.requestID ?? null,
    headers: h?.get ? {
      'x-request-id': h.get('x-request-id'),
      'x-llm-provider': h.get('x-llm-provider'),
      'retry-after': h.get('retry-after'),
    } : null,
  };
}

async function runCase(base, c) {
  const client = new Anthropic({
    baseURL: base,
    apiKey: c.key,
    maxRetries: 0,
    timeout: 60_000,
    defaultHeaders: c.headers,
  });
  const obs = { ok: true };
  await observe(obs, errorObservation, async () => {
    switch (c.op) {
      case 'create': {
        const { data, response } = await client.messages.create(c.body).withResponse();
        obs.result = data;
        obs.estimated = response.headers.get('x-llm-estimated');
        break;
      }
      case 'stream': {
        // The helper: every event, then the message it accumulated.
        obs.events = [];
        const stream = client.messages.stream(c.body);
        for await (const event of stream) obs.events.push(event);
        obs.result = await stream.finalMessage();
        break;
      }
      case 'stream_raw': {
        // The low-level stream: the SSE events as they came.
        obs.events = [];
        const stream = await client.messages.create({ ...c.body, stream: true });
        for await (const event of stream) obs.events.push(event);
        break;
      }
      case 'round_trip': {
        let first;
        if (c.stream_first) {
          const stream = client.messages.stream(c.body);
          first = await stream.finalMessage();
        } else {
          first = await client.messages.create(c.body);
        }
        obs.first = first;
        const calls = first.content.filter((b) => b.type === 'tool_use');
        const messages = [...c.body.messages, { role: 'assistant', content: first.content },
          { role: 'user', content: calls.map((b, i) => ({ type: 'tool_result', tool_use_id: b.id,
            content: c.results[i] })) }];
        obs.result = await client.messages.create({ ...c.body, messages, tool_choice: { type: 'auto' } });
        break;
      }
      case 'count': {
        const { data, response } = await client.messages.countTokens(c.body).withResponse();
        obs.result = data;
        obs.estimated = response.headers.get('x-llm-estimated');
        break;
      }
      default:
        throw new Error(`unknown op ${c.op}`);
    }
  });
  return obs;
}

runPlan(runCase);

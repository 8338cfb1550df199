// The Google Gen AI Node SDK (@google/genai, pinned in package.json) against
// the gateway's Gemini surface: runs the cases tests/test_gemini_node.py
// gives and prints what the SDK saw, one JSON object keyed by case id. The
// expectations live in the Python test; this only drives the SDK.
//
// stdin: {"base": "http://127.0.0.1:PORT", "concurrency": N, "cases": [case, ...]}
// case:  {"id", "op": "generate"|"stream"|"round_trip"|"count"|"embed"|"list"|"get",
//         "key", "headers", "model", "contents", "config", "stream_first", "result"}
import { GoogleGenAI, ApiError } from '@google/genai';
import { runPlan } from './plan.mjs';

function errorObservation(e) {
  let body = null;
  try {
    body = JSON.parse(String(e?.message ?? '').replace(/^[^{]*/, ''));
  } catch {
    body = null;
  }
  return {
    class: e?.constructor?.name ?? typeof e,
    api_error: e instanceof ApiError,
    status: e?.status ?? null,
    body,
    message: String(e?.message ?? e),
  };
}

async function runCase(base, c) {
  const ai = new GoogleGenAI({
    apiKey: c.key,
    httpOptions: { baseUrl: base, headers: c.headers, retryOptions: { attempts: 1 } },
  });
  const obs = { ok: true };
  try {
    switch (c.op) {
      case 'generate': {
        const r = await ai.models.generateContent({ model: c.model, contents: c.contents, config: c.config });
        obs.result = { text: r.text, candidates: r.candidates, usage: r.usageMetadata, modelVersion: r.modelVersion };
        break;
      }
      case 'stream': {
        obs.chunks = [];
        const stream = await ai.models.generateContentStream({ model: c.model, contents: c.contents, config: c.config });
        for await (const chunk of stream) {
          obs.chunks.push({ text: chunk.text, candidates: chunk.candidates, usage: chunk.usageMetadata,
            modelVersion: chunk.modelVersion });
        }
        break;
      }
      case 'round_trip': {
        let parts = [];
        const ask = { model: c.model, contents: c.contents, config: c.config };
        if (c.stream_first) {
          for await (const chunk of await ai.models.generateContentStream(ask)) {
            for (const p of chunk.candidates?.[0]?.content?.parts ?? []) if (p.functionCall) parts.push(p);
          }
        } else {
          const first = await ai.models.generateContent(ask);
          parts = (first.candidates?.[0]?.content?.parts ?? []).filter((p) => p.functionCall);
        }
        obs.calls = parts.map((p) => p.functionCall);
        const contents = [...c.contents, { role: 'model', parts },
          { role: 'user', parts: parts.map((p) => ({ functionResponse: { id: p.functionCall.id,
            name: p.functionCall.name, response: { output: c.result } } })) }];
        const config = { ...c.config, toolConfig: { functionCallingConfig: { mode: 'AUTO' } } };
        const second = await ai.models.generateContent({ model: c.model, contents, config });
        obs.result = { text: second.text };
        break;
      }
      case 'embed': {
        const r = await ai.models.embedContent({ model: c.model, contents: c.contents, config: c.config });
        obs.result = { sizes: (r.embeddings ?? []).map((e) => e.values?.length ?? 0) };
        break;
      }
      case 'count': {
        const r = await ai.models.countTokens({ model: c.model, contents: c.contents });
        obs.result = r;
        break;
      }
      case 'list': {
        const names = [];
        for await (const m of await ai.models.list()) names.push(m.name);
        obs.result = names;
        break;
      }
      case 'get': {
        obs.result = await ai.models.get({ model: c.model });
        break;
      }
      default:
        throw new Error(`unknown op ${c.op}`);
    }
  } catch (e) {
    obs.ok = false;
    obs.error = errorObservation(e);
  }
  return obs;
}

runPlan(runCase);

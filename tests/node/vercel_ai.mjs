// The Vercel AI SDK (`ai` with `@ai-sdk/openai` and `@ai-sdk/anthropic`,
// pinned in package.json) through the gateway: runs the cases
// tests/test_vercel_ai.py gives and prints what the SDK saw, one JSON object
// keyed by case id. The expectations live in the Python test.
//
// stdin: {"base": "http://127.0.0.1:PORT/v1", "concurrency": N, "cases": [case, ...]}
// case:  {"id", "api": "chat"|"responses"|"anthropic"|"embedding",
//         "op": "text"|"stream"|"tools"|"stream_tools"|"object"|"embed"|"embed_many",
//         "key", "headers", "prompt", "tool_results", "store", "schema", "model", "values", "dimensions"}
import { APICallError, Output, embed, embedMany, generateText, isStepCount, jsonSchema, streamText, tool } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { observe, runPlan } from './plan.mjs';

// The SDK's warnings (e.g. an unknown model id) go to the console; stdout is the JSON.
globalThis.AI_SDK_LOG_WARNINGS = false;

function model(base, c) {
  switch (c.api) {
    case 'chat':
      return createOpenAI({ baseURL: base, apiKey: c.key }).chat('any');
    case 'responses':
      return createOpenAI({ baseURL: base, apiKey: c.key }).responses('any');
    case 'anthropic':
      return createAnthropic({ baseURL: base, apiKey: c.key }).messages('any');
    case 'embedding':
      return createOpenAI({ baseURL: base, apiKey: c.key }).embedding(c.model);
    default:
      throw new Error(`unknown api ${c.api}`);
  }
}

// Responses with `store: false`: the earlier turns go inline, not as
// `item_reference`s (see tests/test_vercel_ai.py).
function providerOptions(c) {
  return c.api === 'responses' ? { openai: { store: c.store ?? false } } : undefined;
}

const LOOKUP_INPUT = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'],
  additionalProperties: false };
const WEATHER_INPUT = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'],
  additionalProperties: false };

// The tools the loop runs; each answers with the case's next result and
// records what it was called with.
function tools(c, executed) {
  const results = [...(c.tool_results ?? [])];
  const run = (name) => async (input) => {
    executed.push({ name, input });
    return results.shift() ?? 'no result';
  };
  return {
    lookup: tool({ description: 'Look something up', inputSchema: jsonSchema(LOOKUP_INPUT), execute: run('lookup') }),
    weather: tool({ description: 'The weather in a city', inputSchema: jsonSchema(WEATHER_INPUT),
      execute: run('weather') }),
  };
}

function step(s) {
  return {
    finishReason: s.finishReason,
    rawFinishReason: s.rawFinishReason ?? null,
    text: s.text,
    toolCalls: s.toolCalls.map((t) => ({ id: t.toolCallId, name: t.toolName, input: t.input })),
    toolResults: s.toolResults.map((t) => ({ id: t.toolCallId, name: t.toolName, output: t.output })),
    usage: s.usage,
  };
}

function errorObservation(e) {
  return {
    class: e?.constructor?.name ?? typeof e,
    name: e?.name ?? null,
    api_call_error: APICallError.isInstance(e),
    statusCode: e?.statusCode ?? null,
    isRetryable: e?.isRetryable ?? null,
    message: String(e?.message ?? e),
    responseBody: e?.responseBody ?? null,
    url: e?.url ?? null,
  };
}

async function runCase(base, c) {
  const obs = { ok: true };
  const executed = [];
  if (c.api === 'embedding') return runEmbedding(base, c);
  const common = {
    model: model(base, c),
    headers: c.headers,
    maxRetries: 0,
    maxOutputTokens: 200,
    providerOptions: providerOptions(c),
  };
  await observe(obs, errorObservation, async () => {
    switch (c.op) {
      case 'text': {
        const r = await generateText({ ...common, prompt: c.prompt });
        obs.result = { text: r.text, finishReason: r.finishReason, usage: r.usage, response: r.response,
          steps: r.steps.length };
        break;
      }
      case 'stream': {
        const r = streamText({ ...common, prompt: c.prompt });
        obs.parts = [];
        obs.errors = [];
        for await (const part of r.stream) {
          obs.parts.push(part.type);
          if (part.type === 'error') obs.errors.push(errorObservation(part.error));
        }
        obs.result = { text: await r.text, finishReason: await r.finishReason, usage: await r.usage,
          response: await r.response };
        break;
      }
      case 'tools':
      case 'stream_tools': {
        const ask = { ...common, prompt: c.prompt, tools: tools(c, executed), stopWhen: isStepCount(c.max_steps ?? 4) };
        let steps;
        if (c.op === 'tools') {
          const r = await generateText(ask);
          steps = r.steps;
          obs.result = { text: r.text, finishReason: r.finishReason, usage: r.usage };
        } else {
          const r = streamText(ask);
          obs.errors = [];
          for await (const part of r.stream) {
            if (part.type === 'error') obs.errors.push(errorObservation(part.error));
          }
          steps = await r.steps;
          obs.result = { text: await r.text, finishReason: await r.finishReason, usage: await r.usage };
        }
        obs.steps = steps.map(step);
        break;
      }
      case 'object': {
        const r = await generateText({ ...common, prompt: c.prompt,
          output: Output.object({ schema: jsonSchema(c.schema) }) });
        obs.result = { output: r.output, finishReason: r.finishReason, usage: r.usage };
        break;
      }
      default:
        throw new Error(`unknown op ${c.op}`);
    }
  });
  obs.executed = executed;
  return obs;
}

// `embed` (one value) and `embedMany` (values, split by the model's
// maxEmbeddingsPerCall) with the OpenAI provider's embedding model.
async function runEmbedding(base, c) {
  const obs = { ok: true };
  const common = { model: model(base, c), headers: c.headers, maxRetries: 0, dimensions: c.dimensions };
  await observe(obs, errorObservation, async () => {
    switch (c.op) {
      case 'embed': {
        const r = await embed({ ...common, value: c.values[0] });
        obs.result = { embeddings: [r.embedding], usage: r.usage };
        break;
      }
      case 'embed_many': {
        const r = await embedMany({ ...common, values: c.values });
        obs.result = { embeddings: r.embeddings, usage: r.usage };
        break;
      }
      default:
        throw new Error(`unknown op ${c.op}`);
    }
  });
  return obs;
}

runPlan(runCase);

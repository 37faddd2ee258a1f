// The SDK half of the compatibility suite: runs the cells listed in the
// JSON file argv[2] against the gateway at BREAKWATER_URL and prints one
// JSON line per cell: {"id", "ok", "detail"}. compat_test.go starts the
// gateway and the mock, writes the cells and reads the lines.
//
// Every cell uses an official client the way an application does; the
// mock (answer_tools) echoes text ("echo: " + the last user text) and
// answers tool calls, so each check knows the exact answer to expect.
import fs from 'node:fs';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { generateText, streamText, tool, jsonSchema, stepCountIs, Output } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';

const BASE = process.env.BREAKWATER_URL;
const KEY = 'sk-compat';
const PROMPT = 'Say hello to the compatibility suite.';
const TOOL_PROMPT = 'Read the file /tmp/compat/notes.txt and quote it.';
const TOOL_PATH = '/tmp/compat/notes.txt';
const TOOL_RESULT = 'hello from the file';
const FINAL = `The tool returned: "${TOOL_RESULT}"`;
const IMAGE_PROMPT = 'Describe this image.';
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
const SCHEMA = { type: 'object', properties: { path: { type: 'string', description: 'Absolute path' } }, required: ['path'], additionalProperties: false };
// The detail scenarios: the mock answers models named *-reasoning with
// reasoning (REASONING), *-structured with CITY_JSON, *-usage with
// CACHED cached prompt tokens, *-length cut by the output token limit.
const REASONING = 'Thinking it through.';
const CITY = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
const CITY_JSON = '{"city":"Paris"}';
const CACHED = 3;
const scenarioModel = (model, scenario) => (['reasoning', 'structured', 'usage', 'length'].includes(scenario) ? `${model}-${scenario}` : model);

// sdkFor returns the clients for a base URL (the gateway, or a cell's own
// base such as the translator preview's shim).
const sdks = new Map();
function sdkFor(base) {
  if (!sdks.has(base)) {
    sdks.set(base, {
      openai: new OpenAI({ baseURL: base + '/v1', apiKey: KEY, maxRetries: 0, timeout: 30000 }),
      anthropic: new Anthropic({ baseURL: base, apiKey: KEY, maxRetries: 0, timeout: 30000 }),
      aiOpenAI: createOpenAI({ baseURL: base + '/v1', apiKey: KEY }),
      aiAnthropic: createAnthropic({ baseURL: base + '/v1', apiKey: KEY }),
    });
  }
  return sdks.get(base);
}

class Mismatch extends Error {}
function expect(cond, what) {
  if (!cond) throw new Mismatch(what);
}
const short = (v) => { const s = typeof v === 'string' ? v : JSON.stringify(v); return s && s.length > 160 ? s.slice(0, 160) + '…' : s; };
const expectText = (text, want) => expect(typeof text === 'string' && text.includes(want), `answer ${short(text)} lacks ${short(want)}`);
const expectPath = (args) => expect(args && args.path === TOOL_PATH, `tool arguments ${short(args)}, want path ${TOOL_PATH}`);

// --- OpenAI Chat Completions -------------------------------------------

const chatTools = [{ type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: SCHEMA } }];

async function chat({ openai }, params, stream) {
  if (!stream) return (await openai.chat.completions.create(params)).choices[0];
  const final = await openai.chat.completions.stream({ ...params, stream_options: { include_usage: true } }).finalChatCompletion();
  return final.choices[0];
}

const openaiChat = {
  async text({ sdk, model, stream }) {
    const c = await chat(sdk, { model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: PROMPT }] }, stream);
    expectText(c.message.content, 'echo: ' + PROMPT);
    expect(c.finish_reason === 'stop', `finish_reason ${c.finish_reason}`);
  },
  async tools({ sdk, model, stream }) {
    const messages = [{ role: 'user', content: TOOL_PROMPT }];
    const c1 = await chat(sdk, { model, messages, tools: chatTools }, stream);
    expect(c1.finish_reason === 'tool_calls', `finish_reason ${c1.finish_reason}, want tool_calls`);
    const call = c1.message.tool_calls?.[0];
    expect(call?.function?.name === 'read_file', `tool call ${short(c1.message)}`);
    expectPath(JSON.parse(call.function.arguments));
    messages.push({ role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: call.id, content: TOOL_RESULT });
    const c2 = await chat(sdk, { model, messages, tools: chatTools }, stream);
    expectText(c2.message.content, FINAL);
  },
  async image({ sdk, model, stream }) {
    const c = await chat(sdk, { model, messages: [{ role: 'user', content: [{ type: 'text', text: IMAGE_PROMPT }, { type: 'image_url', image_url: { url: 'data:image/png;base64,' + PNG } }] }] }, stream);
    expectText(c.message.content, 'echo: ' + IMAGE_PROMPT);
  },
  // reasoning_content is not part of the SDK's types: read it raw (the
  // stream helper keeps only its last delta, so a stream is read chunk by
  // chunk, as applications of DeepSeek-style reasoning do).
  async reasoning({ sdk, model, stream }) {
    const params = { model, reasoning_effort: 'low', messages: [{ role: 'user', content: PROMPT }] };
    let reasoning = '', content = '';
    if (stream) {
      for await (const chunk of await sdk.openai.chat.completions.create({ ...params, stream: true })) {
        reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
        content += chunk.choices[0]?.delta?.content ?? '';
      }
    } else {
      const c = (await sdk.openai.chat.completions.create(params)).choices[0];
      reasoning = c.message.reasoning_content;
      content = c.message.content;
    }
    expectText(reasoning, REASONING);
    expectText(content, 'echo: ' + PROMPT);
  },
  async structured({ sdk, model, stream }) {
    const c = await chat(sdk, { model, messages: [{ role: 'user', content: 'Name a city.' }], response_format: { type: 'json_schema', json_schema: { name: 'city', schema: CITY, strict: true } } }, stream);
    expect(JSON.parse(c.message.content).city === 'Paris', `content ${short(c.message.content)}`);
  },
  async usage({ sdk, model, stream }) {
    const params = { model, messages: [{ role: 'user', content: PROMPT }] };
    const u = stream
      ? (await sdk.openai.chat.completions.stream({ ...params, stream_options: { include_usage: true } }).finalChatCompletion()).usage
      : (await sdk.openai.chat.completions.create(params)).usage;
    expect(u?.prompt_tokens_details?.cached_tokens === CACHED && u.prompt_tokens >= CACHED && u.total_tokens === u.prompt_tokens + u.completion_tokens, `usage ${short(u)}`);
  },
  async length({ sdk, model, stream }) {
    const c = await chat(sdk, { model, max_tokens: 5, messages: [{ role: 'user', content: PROMPT }] }, stream);
    expect(c.finish_reason === 'length', `finish_reason ${c.finish_reason}, want length`);
  },
};

// --- OpenAI Responses ----------------------------------------------------

const rsTools = [{ type: 'function', name: 'read_file', description: 'Read a file', parameters: SCHEMA, strict: true }];

async function respond({ openai }, params, stream) {
  const p = { store: false, ...params };
  if (!stream) return openai.responses.create(p);
  return openai.responses.stream(p).finalResponse();
}

const openaiResponses = {
  async text({ sdk, model, stream }) {
    const r = await respond(sdk, { model, instructions: 'Be brief.', input: PROMPT }, stream);
    expect(r.status === 'completed', `status ${r.status}`);
    expectText(r.output_text, 'echo: ' + PROMPT);
  },
  async tools({ sdk, model, stream }) {
    const input = [{ role: 'user', content: TOOL_PROMPT }];
    const r1 = await respond(sdk, { model, input, tools: rsTools }, stream);
    const call = r1.output.find((i) => i.type === 'function_call');
    expect(call?.name === 'read_file', `output ${short(r1.output)}`);
    expectPath(JSON.parse(call.arguments));
    input.push({ type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments }, { type: 'function_call_output', call_id: call.call_id, output: TOOL_RESULT });
    const r2 = await respond(sdk, { model, input, tools: rsTools }, stream);
    expectText(r2.output_text, FINAL);
  },
  async image({ sdk, model, stream }) {
    const r = await respond(sdk, { model, input: [{ role: 'user', content: [{ type: 'input_text', text: IMAGE_PROMPT }, { type: 'input_image', image_url: 'data:image/png;base64,' + PNG, detail: 'auto' }] }] }, stream);
    expectText(r.output_text, 'echo: ' + IMAGE_PROMPT);
  },
  async reasoning({ sdk, model, stream }) {
    const r = await respond(sdk, { model, input: PROMPT, reasoning: { effort: 'low', summary: 'auto' } }, stream);
    const item = r.output.find((i) => i.type === 'reasoning');
    expectText(item?.summary?.map((p) => p.text).join(''), REASONING);
    expectText(r.output_text, 'echo: ' + PROMPT);
  },
  async structured({ sdk, model, stream }) {
    const r = await respond(sdk, { model, input: 'Name a city.', text: { format: { type: 'json_schema', name: 'city', schema: CITY, strict: true } } }, stream);
    expect(JSON.parse(r.output_text).city === 'Paris', `output ${short(r.output_text)}`);
  },
  async usage({ sdk, model, stream }) {
    const r = await respond(sdk, { model, input: PROMPT }, stream);
    const u = r.usage;
    expect(u?.input_tokens_details?.cached_tokens === CACHED && u.input_tokens >= CACHED && u.total_tokens === u.input_tokens + u.output_tokens, `usage ${short(u)}`);
  },
  async length({ sdk, model, stream }) {
    const r = await respond(sdk, { model, input: PROMPT, max_output_tokens: 16 }, stream);
    expect(r.status === 'incomplete' && r.incomplete_details?.reason === 'max_output_tokens', `status ${r.status} ${short(r.incomplete_details)}`);
  },
  // A stateless translation answers previous_response_id with a 400 naming it.
  async stateless({ sdk, model }) {
    try {
      await sdk.openai.responses.create({ model, input: PROMPT, previous_response_id: 'resp_123', store: false });
    } catch (e) {
      expect(e.status === 400, `status ${e.status}: ${short(e.message)}`);
      expect(String(e.param ?? e.message).includes('previous_response_id'), `error ${short(e.message)} does not name previous_response_id`);
      return;
    }
    throw new Mismatch('no error for previous_response_id');
  },
};

// --- Anthropic Messages --------------------------------------------------

const anTools = [{ name: 'read_file', description: 'Read a file', input_schema: SCHEMA }];

async function message({ anthropic }, params, stream) {
  const p = { max_tokens: 256, ...params };
  if (!stream) return anthropic.messages.create(p);
  return anthropic.messages.stream(p).finalMessage();
}

const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

const anthropicSDK = {
  async text({ sdk, model, stream }) {
    const m = await message(sdk, { model, system: 'Be brief.', messages: [{ role: 'user', content: PROMPT }] }, stream);
    expectText(textOf(m), 'echo: ' + PROMPT);
    expect(m.stop_reason === 'end_turn', `stop_reason ${m.stop_reason}`);
  },
  async tools({ sdk, model, stream }) {
    const messages = [{ role: 'user', content: TOOL_PROMPT }];
    const m1 = await message(sdk, { model, messages, tools: anTools }, stream);
    expect(m1.stop_reason === 'tool_use', `stop_reason ${m1.stop_reason}, want tool_use`);
    const use = m1.content.find((b) => b.type === 'tool_use');
    expect(use?.name === 'read_file', `content ${short(m1.content)}`);
    expectPath(use.input);
    messages.push({ role: 'assistant', content: m1.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: TOOL_RESULT }] });
    const m2 = await message(sdk, { model, messages, tools: anTools }, stream);
    expectText(textOf(m2), FINAL);
  },
  async image({ sdk, model, stream }) {
    const m = await message(sdk, { model, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } }, { type: 'text', text: IMAGE_PROMPT }] }] }, stream);
    expectText(textOf(m), 'echo: ' + IMAGE_PROMPT);
  },
  async reasoning({ sdk, model, stream }) {
    const m = await message(sdk, { model, max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: PROMPT }] }, stream);
    expectText(m.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join(''), REASONING);
    expectText(textOf(m), 'echo: ' + PROMPT);
  },
  async structured({ sdk, model, stream }) {
    const m = await message(sdk, { model, messages: [{ role: 'user', content: 'Name a city.' }], output_config: { format: { type: 'json_schema', schema: CITY } } }, stream);
    expect(JSON.parse(textOf(m)).city === 'Paris', `text ${short(textOf(m))}`);
  },
  async usage({ sdk, model, stream }) {
    const m = await message(sdk, { model, messages: [{ role: 'user', content: PROMPT }] }, stream);
    expect(m.usage?.cache_read_input_tokens === CACHED && m.usage.input_tokens >= 0 && m.usage.output_tokens > 0, `usage ${short(m.usage)}`);
  },
  async length({ sdk, model, stream }) {
    const m = await message(sdk, { model, max_tokens: 5, messages: [{ role: 'user', content: PROMPT }] }, stream);
    expect(m.stop_reason === 'max_tokens', `stop_reason ${m.stop_reason}, want max_tokens`);
  },
  async count_tokens({ sdk, model }) {
    const r = await sdk.anthropic.messages.countTokens({ model, messages: [{ role: 'user', content: PROMPT }] });
    expect(Number.isInteger(r.input_tokens) && r.input_tokens > 0, `count ${short(r)}`);
  },
};

// --- Vercel AI SDK -------------------------------------------------------

function aiModel({ aiOpenAI, aiAnthropic }, client, model) {
  switch (client) {
    case 'ai-openai-chat': return aiOpenAI.chat(model);
    case 'ai-openai-responses': return aiOpenAI.responses(model);
    default: return aiAnthropic(model);
  }
}

async function aiRun(params, stream) {
  if (!stream) return generateText(params);
  let streamErr;
  const r = streamText({ ...params, onError: ({ error }) => { streamErr = error; } });
  try {
    const [text, steps, reasoningText, usage, finishReason] = await Promise.all([r.text, r.steps, r.reasoningText, r.usage, r.finishReason]);
    const output = params.output ? await r.output : undefined;
    if (streamErr) throw streamErr;
    return { text, steps, reasoningText, usage, finishReason, output };
  } catch (e) {
    throw streamErr ?? e; // the stream's own error says more than "no output"
  }
}

// aiOptions are the provider options of a detail scenario.
function aiOptions(client, scenario) {
  if (scenario === 'reasoning') {
    return client === 'ai-anthropic'
      ? { anthropic: { thinking: { type: 'enabled', budgetTokens: 1024 } } }
      : { openai: { reasoningEffort: 'low', reasoningSummary: 'auto', forceReasoning: true } };
  }
  if (scenario === 'structured' && client === 'ai-anthropic') return { anthropic: { structuredOutputMode: 'outputFormat' } };
  return undefined;
}

const aiSDK = {
  async text({ sdk, client, model, stream }) {
    const r = await aiRun({ model: aiModel(sdk, client, model), system: 'Be brief.', prompt: PROMPT, maxRetries: 0 }, stream);
    expectText(r.text, 'echo: ' + PROMPT);
  },
  async tools({ sdk, client, model, stream }) {
    let called;
    const r = await aiRun({
      model: aiModel(sdk, client, model), prompt: TOOL_PROMPT, maxRetries: 0, stopWhen: stepCountIs(3),
      tools: { read_file: tool({ description: 'Read a file', inputSchema: jsonSchema(SCHEMA), execute: async (args) => { called = args; return TOOL_RESULT; } }) },
    }, stream);
    expectPath(called);
    // the tool result is a string; the AI SDK sends it JSON-encoded for some providers
    expect(r.text.includes(FINAL) || r.text.includes(`The tool returned: "\\"${TOOL_RESULT}\\""`), `answer ${short(r.text)} lacks ${FINAL}`);
  },
  async image({ sdk, client, model, stream }) {
    const r = await aiRun({ model: aiModel(sdk, client, model), maxRetries: 0, messages: [{ role: 'user', content: [{ type: 'text', text: IMAGE_PROMPT }, { type: 'image', image: Buffer.from(PNG, 'base64'), mediaType: 'image/png' }] }] }, stream);
    expectText(r.text, 'echo: ' + IMAGE_PROMPT);
  },
  async reasoning({ sdk, client, model, stream }) {
    const r = await aiRun({ model: aiModel(sdk, client, model), prompt: PROMPT, maxRetries: 0, providerOptions: aiOptions(client, 'reasoning') }, stream);
    expectText(r.reasoningText, REASONING);
    expectText(r.text, 'echo: ' + PROMPT);
  },
  async structured({ sdk, client, model, stream }) {
    const r = await aiRun({ model: aiModel(sdk, client, model), prompt: 'Name a city.', maxRetries: 0, output: Output.object({ schema: jsonSchema(CITY) }), providerOptions: aiOptions(client, 'structured') }, stream);
    expect(r.output?.city === 'Paris', `output ${short(r.output)}`);
  },
  async usage({ sdk, client, model, stream }) {
    const r = await aiRun({ model: aiModel(sdk, client, model), prompt: PROMPT, maxRetries: 0 }, stream);
    expect(r.usage?.inputTokenDetails?.cacheReadTokens === CACHED && r.usage.inputTokens >= CACHED, `usage ${short(r.usage)}`);
  },
  async length({ sdk, client, model, stream }) {
    const r = await aiRun({ model: aiModel(sdk, client, model), prompt: PROMPT, maxRetries: 0, maxOutputTokens: 16 }, stream);
    expect(r.finishReason === 'length', `finishReason ${r.finishReason}, want length`);
  },
};

// --- Endpoints -----------------------------------------------------------

// expect400 runs a call that must be refused with a 400 naming field (in
// param, or in the message).
async function expect400(call, field) {
  try {
    await call();
  } catch (e) {
    const err = e.error?.error ?? e.error ?? {};
    expect(e.status === 400, `status ${e.status}: ${short(e.message)}`);
    expect([e.param, err.param, err.code, err.message, e.message].some((v) => String(v ?? '').includes(field)), `error ${short(e.message)} does not name ${field}`);
    return;
  }
  throw new Mismatch(`no error: want a 400 naming ${field}`);
}

const endpoints = {
  async models_openai({ sdk }) {
    const page = await sdk.openai.models.list();
    expect(page.data.length > 0 && page.data.every((m) => m.object === 'model'), `models ${short(page.data)}`);
  },
  async models_anthropic({ sdk }) {
    const page = await sdk.anthropic.models.list();
    expect(page.data.length > 0 && page.data.every((m) => m.type === 'model'), `models ${short(page.data)}`);
  },
  async embeddings({ sdk, model }) {
    const r = await sdk.openai.embeddings.create({ model, input: ['alpha', 'beta'] });
    expect(r.data.length === 2 && r.data[0].embedding.length > 0, `embeddings ${short(r)}`);
  },
  async completions({ sdk, model, stream }) {
    if (stream) {
      let text = '';
      for await (const c of await sdk.openai.completions.create({ model, prompt: PROMPT, stream: true })) text += c.choices[0]?.text ?? '';
      expectText(text, 'echo: ' + PROMPT);
      return;
    }
    const r = await sdk.openai.completions.create({ model, prompt: PROMPT });
    expectText(r.choices[0].text, 'echo: ' + PROMPT);
  },
  // An 11 MiB body over server.max_request_bytes: the SDK must see the 413,
  // every time (a server that closes before reading the body loses the
  // race against the client's write some of the time: 12 tries).
  async oversize({ sdk, model }) {
    const content = 'x'.repeat(11 << 20);
    for (let i = 0; i < 12; i++) {
      try {
        await sdk.openai.chat.completions.create({ model, messages: [{ role: 'user', content }] });
      } catch (e) {
        expect(e.status === 413, `try ${i + 1}: got ${e.constructor.name} status ${e.status}: ${short(e.message)}`);
        continue;
      }
      throw new Mismatch('no error for an 11 MiB body');
    }
  },
  // Documented 400s: what has no translation is refused, naming the field.
  async json_object({ sdk, model }) {
    await expect400(() => sdk.openai.chat.completions.create({ model, messages: [{ role: 'user', content: PROMPT }], response_format: { type: 'json_object' } }), 'response_format.type');
  },
  async hosted_tool({ sdk, model }) {
    await expect400(() => sdk.openai.responses.create({ model, input: PROMPT, store: false, tools: [{ type: 'web_search' }] }), 'tools[0].type');
  },
  async server_tool({ sdk, model }) {
    await expect400(() => sdk.anthropic.messages.create({ model, max_tokens: 64, messages: [{ role: 'user', content: PROMPT }], tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 1 }] }), 'tools[0].type');
  },
  async embeddings_refused({ sdk, model }) {
    await expect400(() => sdk.openai.embeddings.create({ model, input: 'alpha' }), 'wrong_endpoint');
  },
  async not_found_openai({ sdk }) {
    try {
      await sdk.openai.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: PROMPT }] });
    } catch (e) {
      expect(e.status === 404 && e.code === 'model_not_found', `status ${e.status} code ${e.code}`);
      return;
    }
    throw new Mismatch('no error for an unknown model');
  },
  async not_found_anthropic({ sdk }) {
    try {
      await sdk.anthropic.messages.create({ model: 'no-such-model', max_tokens: 10, messages: [{ role: 'user', content: PROMPT }] });
    } catch (e) {
      expect(e.status === 404 && e.error?.type === 'error' && e.error?.error?.message, `status ${e.status} body ${short(e.error)}`);
      return;
    }
    throw new Mismatch('no error for an unknown model');
  },
};

const clients = {
  'openai-chat': openaiChat,
  'openai-responses': openaiResponses,
  'anthropic-sdk': anthropicSDK,
  'ai-openai-chat': aiSDK,
  'ai-openai-responses': aiSDK,
  'ai-anthropic': aiSDK,
  endpoints,
};

async function runCell(cell) {
  const fn = clients[cell.client]?.[cell.scenario];
  if (!fn) return { id: cell.id, ok: false, detail: `no scenario ${cell.scenario} for ${cell.client}` };
  try {
    await fn({ ...cell, model: scenarioModel(cell.model, cell.scenario), sdk: sdkFor(cell.base || BASE) });
    return { id: cell.id, ok: true, detail: '' };
  } catch (e) {
    const what = e instanceof Mismatch ? e.message : `${e.constructor?.name ?? 'Error'}${e.status ? ' ' + e.status : ''}: ${e.message}`;
    return { id: cell.id, ok: false, detail: short(what.replace(/\s+/g, ' ')) };
  }
}

const cells = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const concurrency = Number(process.env.COMPAT_CONCURRENCY || 6);
let next = 0;
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (next < cells.length) {
    const cell = cells[next++];
    process.stdout.write(JSON.stringify(await runCell(cell)) + '\n');
  }
}));

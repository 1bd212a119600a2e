// smol-server driven by the official `openai` npm client (a real client, not hand-written
// HTTP): chat completions streamed and not, tool calls, logprobs, text completions, models,
// and the errors the client raises for refused requests and a wrong key.
//   node openai_client_test.mjs --server BIN --model GGUF
import OpenAI from 'openai';
import { check, finish, startTestServer, testArgs, testKey as key } from './start_server.mjs';
import Ajv from 'ajv';

const args = testArgs();

const { url, server } = await startTestServer(args);

const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
const user = (content) => [{ role: 'system', content: 'Be brief./system_override' }, { role: 'user', content }];

// The error the client raises for a request, or null when it succeeds.
async function refusal(request) {
  try {
    await request();
    return null;
  } catch (e) {
    return e;
  }
}

try {
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === 'smol-tiny', 'models.list() names the loaded model by its --alias');

  // Chat, not streamed and streamed: greedy gives the same text both ways.
  const chat = await client.chat.completions.create({ model: 'smol', messages: user('Hello there'), max_tokens: 12, temperature: 0 });
  const text = chat.choices[0].message.content;
  check(chat.object === 'chat.completion' && typeof text === 'string' && text.length > 0 && chat.model === 'smol-tiny',
        'chat.completions.create returns text, from the aliased model');
  check(chat.choices[0].finish_reason === 'length' && chat.usage.completion_tokens === 12, 'finish_reason length after max_tokens, usage counted');
  const stream = await client.chat.completions.create({
    model: 'smol', messages: user('Hello there'), max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  let streamed = '';
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    streamed += choice.delta.content ?? '';
    finish = choice.finish_reason ?? finish;
  }
  check(streamed === text, 'the streamed chat text equals the non-streamed one');
  check(finish === 'length' && usage?.completion_tokens === 12, 'the stream ends with finish_reason and a usage chunk');

  // Log-probabilities: one entry per token, whose bytes spell the reply.
  const scored = await client.chat.completions.create({
    model: 'smol', messages: user('Hello there'), max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3 });
  const entries = scored.choices[0].logprobs?.content ?? [];
  check(entries.length === 12, 'logprobs.content has one entry per generated token');
  check(entries.every((e) => e.top_logprobs.length === 3 && e.logprob <= 0 && e.token === e.top_logprobs[0].token),
        'each entry has 3 alternatives, the greedy token first');
  check(Buffer.from(entries.flatMap((e) => e.bytes)).toString('utf8') === text, 'the entries\' bytes spell the reply');

  // Tools: the random model is steered into closing a prefilled call (a user turn full of
  // </tool_call> and a strongly negative frequency penalty make the closing tag the greedy choice).
  const tools = [{ type: 'function', function: { name: 'f', description: 'Does f.', parameters: { type: 'object', properties: {} } } }];
  const call = await client.chat.completions.create({
    model: 'smol', tools, max_tokens: 1, temperature: 0, frequency_penalty: -2,
    messages: [{ role: 'user', content: '</tool_call>'.repeat(50) },
               { role: 'assistant', content: '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n' }] });
  const calls = call.choices[0].message.tool_calls ?? [];
  check(calls.length === 1 && calls[0].type === 'function' && calls[0].function.name === 'f' &&
        JSON.parse(calls[0].function.arguments).x === 1 && calls[0].id.startsWith('call_'),
        'a <tool_call> block comes back as message.tool_calls');
  // The call and its result go back into the history, as an agent loop sends them.
  const followUp = await client.chat.completions.create({
    model: 'smol', tools, max_tokens: 4, temperature: 0,
    messages: [{ role: 'user', content: 'Call f' },
               { role: 'assistant', content: null, tool_calls: calls },
               { role: 'tool', tool_call_id: calls[0]?.id ?? 'call_1', content: '42' }] });
  check(typeof followUp.choices[0].message.content === 'string', 'a history with a tool call and its result is accepted');

  // Structured output: even the random-weight model writes a JSON object, within max_tokens.
  for (const max_tokens of [12, 60]) {
    const structured = await client.chat.completions.create({
      model: 'smol', messages: user('Describe a cat as JSON'), max_tokens, temperature: 1, seed: max_tokens,
      response_format: { type: 'json_object' } });
    let parsed = null;
    try { parsed = JSON.parse(structured.choices[0].message.content); } catch { parsed = null; }
    check(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed),
          `response_format json_object gives a JSON object within ${max_tokens} tokens`);
  }

  // json_schema: what the random-weight model writes parses and validates (Ajv, a JSON Schema
  // validator), for several seeds and budgets.
  const ajv = new Ajv({ strict: false });
  const schemas = {
    person: { type: 'object', additionalProperties: false, required: ['name', 'age', 'tags'],
              properties: { name: { type: 'string', minLength: 1, maxLength: 12 },
                            age: { type: 'integer', minimum: 0, maximum: 120 },
                            score: { type: 'number', minimum: -1, maximum: 1 },
                            tags: { type: 'array', items: { enum: ['red', 'green', 7, null] }, minItems: 1, maxItems: 3 },
                            nickname: { anyOf: [{ type: 'string', maxLength: 4 }, { type: 'null' }] } } },
    tree: { $defs: { node: { type: 'object', required: ['id', 'children'], additionalProperties: false,
                             properties: { id: { type: 'integer', exclusiveMinimum: 0 },
                                           children: { type: 'array', maxItems: 2, items: { $ref: '#/$defs/node' } } } } },
            $ref: '#/$defs/node' },
  };
  for (const [name, schema] of Object.entries(schemas)) {
    const validate = ajv.compile(schema);
    for (const [seed, max_tokens] of [[1, 40], [2, 80], [3, 160]]) {
      const reply = await client.chat.completions.create({
        model: 'smol', messages: user(`A ${name} as JSON`), max_tokens, temperature: 1, seed,
        response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } } });
      let value;
      try { value = JSON.parse(reply.choices[0].message.content); } catch { value = undefined; }
      check(value !== undefined && validate(value),
            `json_schema ${name}, seed ${seed}, ${max_tokens} tokens: the reply parses and validates` +
            (value === undefined ? ` (not JSON: ${reply.choices[0].message.content})` : validate.errors ? ` ${JSON.stringify(validate.errors)}` : ''));
    }
  }

  // tool_choice "required": the reply is a call whose arguments validate against the tool's schema.
  const weather = { type: 'object', required: ['city', 'days'], additionalProperties: false,
                    properties: { city: { type: 'string', maxLength: 20 }, days: { type: 'integer', minimum: 1, maximum: 7 } } };
  const forced = await client.chat.completions.create({
    model: 'smol', messages: user('Weather in Oslo?'), max_tokens: 80, temperature: 1, seed: 4, tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: weather } }] });
  const forcedCalls = forced.choices[0].message.tool_calls ?? [];
  check(forced.choices[0].finish_reason === 'tool_calls' && forcedCalls.length === 1 &&
        forcedCalls[0].function.name === 'get_weather' && ajv.validate(weather, JSON.parse(forcedCalls[0].function.arguments)),
        'tool_choice required gives a call whose arguments validate');

  // Text completions, not streamed and streamed.
  const completion = await client.completions.create({ model: 'smol', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 2 });
  const continued = completion.choices[0].text;
  check(completion.object === 'text_completion' && continued.length > 0, 'completions.create continues a prompt');
  check(completion.choices[0].logprobs.tokens.join('') === continued, 'the completion\'s logprobs tokens spell its text');
  const textStream = await client.completions.create({ model: 'smol', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true });
  let joined = '';
  for await (const chunk of textStream) joined += chunk.choices[0]?.text ?? '';
  check(joined === continued, 'the streamed completion equals the non-streamed one');

  // logit_bias: +100 on one token makes greedy decoding repeat it; -100 keeps the greedy
  // continuation's first token out.
  const biased = await client.completions.create({ model: 'smol', prompt: 'Once upon a time', max_tokens: 3, temperature: 0,
                                                   logit_bias: { 1000: 100 } });
  const piece = await (await fetch(`${url}/detokenize`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
                                                          body: JSON.stringify({ tokens: [1000, 1000, 1000] }) })).json();
  check(biased.choices[0].text === piece.content, `logit_bias +100 forces token 1000 (${JSON.stringify(biased.choices[0].text)})`);
  const free = await client.completions.create({ model: 'smol', prompt: 'Once upon a time', max_tokens: 1, temperature: 0, logprobs: 0 });
  const firstId = (await (await fetch(`${url}/tokenize`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
                                                          body: JSON.stringify({ content: free.choices[0].text, parse_special: false }) })).json()).tokens;
  const banned = await client.completions.create({ model: 'smol', prompt: 'Once upon a time', max_tokens: 1, temperature: 0,
                                                   logit_bias: { [firstId[0]]: -100 } });
  check(firstId.length === 1 && banned.choices[0].text !== free.choices[0].text, 'logit_bias -100 bans the greedy token');

  // Refused requests raise the client's typed errors with the server's code.
  const audio = await refusal(() => client.chat.completions.create({ model: 'smol', messages: user('hi'), modalities: ['audio'] }));
  check(audio instanceof OpenAI.BadRequestError && audio.status === 400 && audio.code === 'unsupported_parameter' &&
        audio.message.includes('modalities'), 'an unimplemented field raises BadRequestError unsupported_parameter naming it');
  const pattern = await refusal(() => client.chat.completions.create({
    model: 'smol', messages: user('hi'),
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a(?=b)' } } } }));  // a lookahead not right after the ^
  check(pattern instanceof OpenAI.BadRequestError && pattern.code === 'unsupported_parameter' && pattern.message.includes('lookahead'),
        'a pattern construct smol cannot enforce is refused by name, not ignored');
  const empty = await refusal(() => client.chat.completions.create({ model: 'smol', messages: [] }));
  check(empty instanceof OpenAI.BadRequestError && empty.code === 'invalid_value', 'an empty message list raises BadRequestError');
  const long = await refusal(() => client.chat.completions.create({ model: 'smol', messages: user('word '.repeat(3000)) }));
  check(long instanceof OpenAI.BadRequestError && long.code === 'context_length_exceeded', 'a prompt over the context raises context_length_exceeded');
  const wrongKey = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  const denied = await refusal(() => wrongKey.chat.completions.create({ model: 'smol', messages: user('hi') }));
  check(denied instanceof OpenAI.AuthenticationError && denied.status === 401, 'a wrong API key raises AuthenticationError');
} finally {
  server.kill('SIGTERM');
}

finish();

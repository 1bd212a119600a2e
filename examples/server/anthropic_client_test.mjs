// smol-server driven by the official `@anthropic-ai/sdk` npm client (a real client, not
// hand-written HTTP): messages.create, messages.stream, countTokens, a forced tool_use and its
// tool_result round trip, and the errors the client raises for refused requests and a wrong key.
//   node anthropic_client_test.mjs --server BIN --model GGUF
import Anthropic from '@anthropic-ai/sdk';
import Ajv from 'ajv';
import { check, finish, startTestServer, testArgs, testKey as key } from './start_server.mjs';

const args = testArgs();

const { url, server } = await startTestServer(args);

// The SDK sends the key as x-api-key, as Claude Code does.
const client = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0, timeout: 60000 });
const base = { model: 'smol', system: 'Be brief./system_override', max_tokens: 12, temperature: 0 };
const hello = [{ role: 'user', content: 'Hello there' }];

// The error the client raises for a request, or null when it succeeds.
async function refusal(request) {
  try {
    await request();
    return null;
  } catch (e) {
    return e;
  }
}

const weather = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

try {
  // Not streamed and streamed: greedy gives the same text both ways.
  const message = await client.messages.create({ ...base, messages: hello });
  const text = message.content.find((b) => b.type === 'text')?.text;
  check(message.type === 'message' && message.role === 'assistant' && message.id.startsWith('msg_') &&
        message.model === 'smol-tiny', 'messages.create returns a message from the aliased model');
  check(typeof text === 'string' && text.length > 0, 'the reply has a text block');
  check(message.stop_reason === 'max_tokens' && message.usage.output_tokens === 12 && message.usage.input_tokens > 0,
        'stop_reason max_tokens after max_tokens, usage counted');

  const stream = client.messages.stream({ ...base, messages: hello });
  let streamed = '';
  stream.on('text', (piece) => { streamed += piece; });
  const final = await stream.finalMessage();
  check(streamed === text, 'the streamed text equals the non-streamed one');
  check(final.stop_reason === 'max_tokens' && final.usage.output_tokens === 12 &&
        final.content.length === 1 && final.content[0].text === text,
        'messages.stream().finalMessage() assembles the same message');

  const counted = await client.messages.countTokens({ model: 'smol', system: base.system, messages: hello });
  // Anthropic's usage: input_tokens were run, cache_read_input_tokens came from a slot's KV cache.
  const promptOf = (m) => m.usage.input_tokens + m.usage.cache_read_input_tokens;
  check(counted.input_tokens === promptOf(message), 'countTokens counts the prompt messages.create read');
  check(promptOf(final) === promptOf(message) && final.usage.cache_read_input_tokens > 0,
        `the same prompt again is read from the cache (${final.usage.cache_read_input_tokens} of ${promptOf(final)} tokens)`);

  // Thinking on: whatever the random model writes, the stream's blocks are well formed.
  const thinking = await client.messages.stream({
    ...base, max_tokens: 16, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: hello }).finalMessage();
  check(thinking.content.every((b) => b.type === 'thinking' || b.type === 'text'),
        'a streamed reply with thinking enabled has only thinking and text blocks');

  // A forced call: a tool_use block with input following the schema, streamed and not.
  const called = await client.messages.create({
    ...base, max_tokens: 60, tools: [weather], tool_choice: { type: 'tool', name: 'get_weather' },
    messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  const use = called.content.find((b) => b.type === 'tool_use');
  // Ajv (a JSON Schema validator) checks the input against the tool's input_schema.
  const validInput = new Ajv({ strict: false }).compile(weather.input_schema);
  check(called.stop_reason === 'tool_use' && use?.name === 'get_weather' && validInput(use?.input) &&
        use.id.startsWith('toolu_'), 'tool_choice tool gives a tool_use block whose input validates against input_schema');
  const calledStream = client.messages.stream({
    ...base, max_tokens: 60, tools: [weather], tool_choice: { type: 'any' },
    messages: [{ role: 'user', content: 'Weather in Paris?' }] });
  let inputJson = '';
  calledStream.on('inputJson', (piece) => { inputJson += piece; });
  const calledFinal = await calledStream.finalMessage();
  const streamedUse = calledFinal.content.find((b) => b.type === 'tool_use');
  check(calledFinal.stop_reason === 'tool_use' && typeof streamedUse?.input?.city === 'string' &&
        JSON.stringify(JSON.parse(inputJson)) === JSON.stringify(streamedUse.input),
        'streamed, the input_json_delta pieces join into the tool_use input');

  // The call and its result handed back: the conversation goes on.
  const followUp = await client.messages.create({
    ...base, tools: [weather],
    messages: [{ role: 'user', content: 'Weather in Paris?' },
               { role: 'assistant', content: called.content },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny, 21 C' }] }] });
  check(followUp.type === 'message' && promptOf(followUp) > promptOf(message),
        'a tool_result round trip is answered');

  // Refusals arrive as the SDK's typed errors, with Anthropic's error body.
  const unknown = await refusal(() => client.messages.create({ ...base, messages: hello, service_tier: 'auto' }));
  check(unknown instanceof Anthropic.BadRequestError && unknown.status === 400 &&
        unknown.error?.error?.type === 'invalid_request_error' && /service_tier/.test(unknown.message),
        'a field smol-server does not implement is a BadRequestError naming it');
  const image = await refusal(() => client.messages.create({
    ...base, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }));
  check(image instanceof Anthropic.BadRequestError && /image/.test(image.message), 'an image block is refused by name');
  const wrongKey = new Anthropic({ baseURL: url, apiKey: 'wrong', maxRetries: 0 });
  const unauthorized = await refusal(() => wrongKey.messages.create({ ...base, messages: hello }));
  check(unauthorized instanceof Anthropic.AuthenticationError && unauthorized.status === 401 &&
        unauthorized.error?.error?.type === 'authentication_error', 'a wrong key is an AuthenticationError');
} catch (e) {
  check(false, `unexpected error: ${e.stack ?? e}`);
} finally {
  server.kill('SIGTERM');
}

finish();

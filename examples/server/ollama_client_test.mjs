// smol-server driven by the official `ollama` npm client (a real client, not hand-written HTTP):
// list, show, version, ps, chat (plain, streamed, with a format schema, with thinking, a tool
// call handed back) and generate, and the errors the client raises for refused requests and a
// wrong key.
//   node ollama_client_test.mjs --server BIN --model GGUF
import { Ollama } from 'ollama';
import Ajv from 'ajv';
import { check, finish, startTestServer, testArgs, testKey as key } from './start_server.mjs';

const args = testArgs();

const { url, server } = await startTestServer(args);

// The key as a bearer token, as clients in front of a protected ollama send it.
const ollama = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });
const model = 'smol-tiny';
const messages = [{ role: 'system', content: 'Be brief./system_override' }, { role: 'user', content: 'Hello there' }];
const options = { temperature: 0, num_predict: 12 };

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
  const listed = await ollama.list();
  const entry = listed.models[0];
  check(listed.models.length === 1 && entry.name === model && entry.model === model && entry.size > 0 &&
        /^[0-9a-f]{64}$/.test(entry.digest) && entry.details.format === 'gguf' && !Number.isNaN(Date.parse(entry.modified_at)),
        'list() names the loaded model by its --alias, with size, digest and details');
  const shown = await ollama.show({ model });
  check(shown.template.includes('<|im_start|>') && shown.capabilities.includes('tools') &&
        shown.capabilities.includes('thinking') && shown.model_info['general.architecture'] === 'smollm3' &&
        shown.details.family === entry.details.family && shown.parameters.includes('num_ctx 2048'),
        'show() gives the chat template, capabilities, model_info, details and parameters');
  const version = await ollama.version();
  check(typeof version.version === 'string' && /^\d+\.\d+\.\d+$/.test(version.version), `version() gives ${version.version}`);
  const running = await ollama.ps();
  check(running.models.length === 1 && running.models[0].context_length === 2048, 'ps() lists the model with its context');

  // Chat, not streamed and streamed: greedy gives the same text both ways.
  const chat = await ollama.chat({ model, messages, think: false, options });
  const text = chat.message.content;
  check(chat.done && chat.done_reason === 'length' && chat.eval_count === 12 && chat.prompt_eval_count > 0 &&
        chat.message.role === 'assistant' && typeof text === 'string' && text.length > 0 && chat.model === model,
        'chat() returns the reply with done_reason length after num_predict, counted');
  let streamed = '';
  let last = null;
  let pieces = 0;
  for await (const part of await ollama.chat({ model, messages, think: false, options, stream: true })) {
    streamed += part.message.content;
    pieces++;
    last = part;
  }
  check(streamed === text && pieces > 1, `the streamed chat text equals the non-streamed one (${pieces} objects)`);
  check(last?.done === true && last.eval_count === 12 && last.eval_duration >= 0, 'the stream ends with done and the counts');

  // Thinking on: whatever the random model writes, it comes back split, never as an error.
  const thought = await ollama.chat({ model, messages, think: true, options: { ...options, num_predict: 16 } });
  check(thought.done && typeof thought.message.content === 'string' &&
        (thought.message.thinking === undefined || typeof thought.message.thinking === 'string'),
        'chat() with think: true answers with content and thinking apart');

  // format as a JSON schema: the reply validates against it.
  const schema = { type: 'object', properties: { name: { type: 'string' }, age: { type: 'integer' } }, required: ['name', 'age'] };
  const structured = await ollama.chat({ model, messages, format: schema, options: { temperature: 0, num_predict: 80 } });
  let value = null;
  try { value = JSON.parse(structured.message.content); } catch { value = null; }
  check(value !== null && new Ajv({ strict: false }).compile(schema)(value),
        `chat() with a format schema returns JSON that validates (${structured.message.content})`);
  const jsonMode = await ollama.chat({ model, messages, format: 'json', options: { temperature: 0, num_predict: 40 } });
  let object = null;
  try { object = JSON.parse(jsonMode.message.content); } catch { object = null; }
  check(object !== null && typeof object === 'object', 'format: "json" returns a JSON object');

  // A tool call handed back in ollama's shape (arguments as an object) and its result.
  const weather = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
  const followUp = await ollama.chat({ model, tools: [weather], think: false, options, messages: [
    ...messages,
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: 'sunny, 21 C', tool_name: 'get_weather' }] });
  check(followUp.done && followUp.prompt_eval_count > chat.prompt_eval_count, 'a tool call and its result handed back are answered');

  // generate: the same conversation through the template gives the same text, streamed and not.
  const generated = await ollama.generate({ model, prompt: 'Hello there', system: 'Be brief./system_override', think: false, options });
  check(generated.done && generated.response === text && generated.done_reason === 'length',
        'generate() with system and prompt gives the text chat() gave');
  let generatedStream = '';
  for await (const part of await ollama.generate({ model, prompt: 'Hello there', system: 'Be brief./system_override',
                                                   think: false, options, stream: true }))
    generatedStream += part.response;
  check(generatedStream === text, 'the streamed generate() text is the same');

  // Refusals arrive as the client's ResponseError with ollama's error text.
  const unknown = await refusal(() => ollama.chat({ model, messages, options: { ...options, tfs_z: 0.9 } }));
  check(unknown?.name === 'ResponseError' && unknown.status_code === 400 && /options\.tfs_z/.test(unknown.error),
        'an option smol-server does not implement is a 400 naming it');
  const image = await refusal(() => ollama.chat({ model, messages: [{ role: 'user', content: 'what is this?', images: ['iVBORw0KGgo='] }] }));
  check(image?.status_code === 400 && /images/.test(image.error) && /text only/.test(image.error), 'images are refused clearly');
  const wrongKey = new Ollama({ host: url, headers: { Authorization: 'Bearer wrong' } });
  const unauthorized = await refusal(() => wrongKey.list());
  check(unauthorized?.status_code === 401 && /invalid API key/.test(unauthorized.error), 'a wrong key is a 401');
} catch (e) {
  check(false, `unexpected error: ${e.stack ?? e}`);
} finally {
  server.kill('SIGTERM');
}

finish();

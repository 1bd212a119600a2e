// smol-server's Responses API driven by the official `openai` npm client (client.responses:
// create streamed and not, the SDK's own stream accumulator, a function tool round trip,
// text.format json_schema checked by a JSON Schema validator, inputTokens.count, refusals) and
// by an `@openai/agents` agent with one tool.
//   node responses_client_test.mjs --server BIN --model GGUF
import OpenAI from 'openai';
import Ajv from 'ajv';
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { check, finish, startTestServer, testArgs, testKey as key } from './start_server.mjs';

const args = testArgs();
const { url, server } = await startTestServer(args);
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 });
const base = { model: 'smol', instructions: 'Be brief./system_override', max_output_tokens: 12, temperature: 0,
               reasoning: { effort: 'none' } };

// The error the client raises for a request, or null when it succeeds.
async function refusal(request) {
  try {
    await request();
    return null;
  } catch (e) {
    return e;
  }
}

const ajv = new Ajv({ strict: false });
const weather = { type: 'object', required: ['city'], additionalProperties: false,
                  properties: { city: { type: 'string', maxLength: 20 } } };
const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: weather, strict: true }];

try {
  // Not streamed and streamed: greedy gives the same text both ways.
  const response = await client.responses.create({ ...base, input: 'Hello there' });
  check(response.object === 'response' && response.id.startsWith('resp_') && response.model === 'smol-tiny',
        'responses.create returns a response from the aliased model');
  check(typeof response.output_text === 'string' && response.output_text.length > 0, 'output_text holds the answer');
  check(response.status === 'incomplete' && response.incomplete_details?.reason === 'max_output_tokens' &&
        response.usage.output_tokens === 12 && response.usage.input_tokens > 0,
        'status incomplete after max_output_tokens, usage counted');

  const stream = await client.responses.create({ ...base, input: 'Hello there', stream: true });
  let streamed = '';
  let lastSequence = -1;
  let ordered = true;
  let lastType = '';
  for await (const event of stream) {
    ordered &&= event.sequence_number === lastSequence + 1;
    lastSequence = event.sequence_number;
    lastType = event.type;
    if (event.type === 'response.output_text.delta') streamed += event.delta;
  }
  check(ordered && lastType === 'response.incomplete', 'the events are numbered in order and end with response.incomplete');
  check(streamed === response.output_text, 'the streamed text equals the non-streamed one');

  // The SDK's own accumulator assembles the same response from the events.
  const assembled = await client.responses.stream({ ...base, input: 'Hello there' }).finalResponse();
  check(assembled.output_text === response.output_text && assembled.output.length === 1 &&
        assembled.output[0].type === 'message', 'responses.stream().finalResponse() assembles the same response');

  // Thinking on, the reply prefilled inside a think block (the random model never opens one):
  // the reasoning is its own item, streamed and not, never in output_text.
  const thinking = { ...base, reasoning: { effort: 'high' },
                     input: [{ role: 'user', content: 'Hello there' }, { role: 'assistant', content: '<think>\nLet me see' }] };
  const thought = await client.responses.create(thinking);
  const thoughtStreamed = await client.responses.stream(thinking).finalResponse();
  const reasoningText = (r) => r.output.find((item) => item.type === 'reasoning')?.content?.[0]?.text;
  check(thought.output[0]?.type === 'reasoning' && thought.output[0].content[0].type === 'reasoning_text' &&
        reasoningText(thought)?.length > 0 && thought.usage.output_tokens_details.reasoning_tokens > 0,
        'with reasoning on, the reasoning comes back as a reasoning item with reasoning_text, its tokens counted');
  check(reasoningText(thoughtStreamed) === reasoningText(thought) && thoughtStreamed.output_text === thought.output_text &&
        !thought.output_text.includes(reasoningText(thought)), 'streamed the same, and the reasoning stays out of output_text');

  const counted = await client.responses.inputTokens.count({ model: 'smol', instructions: base.instructions,
                                                             reasoning: base.reasoning, input: 'Hello there' });
  check(counted.object === 'response.input_tokens' && counted.input_tokens === response.usage.input_tokens,
        'inputTokens.count counts what responses.create was billed');

  // A forced call: a function_call item whose arguments validate, streamed and not.
  const called = await client.responses.create({ ...base, max_output_tokens: 60, temperature: 1, tools,
                                                 tool_choice: 'required', input: 'Weather in Paris?' });
  const call = called.output.find((item) => item.type === 'function_call');
  check(called.status === 'completed' && call?.name === 'get_weather' && call.call_id.startsWith('call_') &&
        ajv.validate(weather, JSON.parse(call.arguments)), 'tool_choice required gives a function_call whose arguments validate');
  const callStream = await client.responses.create({ ...base, max_output_tokens: 60, tools, stream: true,
                                                     tool_choice: { type: 'function', name: 'get_weather' },
                                                     input: 'Weather in Paris?' });
  let argumentDeltas = '';
  let doneItem = null;
  for await (const event of callStream) {
    if (event.type === 'response.function_call_arguments.delta') argumentDeltas += event.delta;
    if (event.type === 'response.output_item.done' && event.item.type === 'function_call') doneItem = event.item;
  }
  check(doneItem !== null && argumentDeltas === doneItem.arguments && ajv.validate(weather, JSON.parse(argumentDeltas)),
        'streamed, the arguments deltas join into the call\'s arguments, which validate');

  // The call and its output handed back, as an agent loop sends them: the conversation goes on.
  const followUp = await client.responses.create({
    ...base, tools,
    input: [{ role: 'user', content: 'Weather in Paris?' }, ...called.output,
            { type: 'function_call_output', call_id: call?.call_id ?? 'call_1', output: 'sunny, 21 C' }] });
  check(followUp.object === 'response' && followUp.usage.input_tokens > response.usage.input_tokens,
        'a function_call_output round trip is answered');

  // text.format json_schema: what the random-weight model writes parses and validates, also
  // with a tool on offer (then a call is the other way the reply may go).
  const person = { type: 'object', additionalProperties: false, required: ['name', 'age'],
                   properties: { name: { type: 'string', minLength: 1, maxLength: 12 },
                                 age: { type: 'integer', minimum: 0, maximum: 120 } } };
  const validate = ajv.compile(person);
  for (const [seed, withTools] of [[1, false], [2, false], [3, true], [4, true]]) {
    const reply = await client.responses.create({
      ...base, max_output_tokens: 80, temperature: 1, input: `A person as JSON (${seed})`,
      text: { format: { type: 'json_schema', name: 'person', schema: person, strict: true } },
      ...(withTools ? { tools } : {}) });
    const replyCall = reply.output.find((item) => item.type === 'function_call');
    let value;
    try { value = JSON.parse(reply.output_text); } catch { value = undefined; }
    check(replyCall ? ajv.validate(weather, JSON.parse(replyCall.arguments)) : value !== undefined && validate(value),
          `json_schema person${withTools ? ' with a tool' : ''}, seed ${seed}: the answer (or call) validates` +
          (replyCall ? ' (a call)' : value === undefined ? ` (not JSON: ${reply.output_text})` : ''));
  }

  // Refusals raise the client's typed errors, naming the field.
  const stored = await refusal(() => client.responses.create({ ...base, input: 'hi', previous_response_id: 'resp_1' }));
  check(stored instanceof OpenAI.BadRequestError && stored.status === 400 && stored.code === 'unsupported_parameter' &&
        stored.message.includes('previous_response_id'), 'previous_response_id is a BadRequestError naming it');
  const hosted = await refusal(() => client.responses.create({ ...base, input: 'hi', tools: [{ type: 'web_search' }] }));
  check(hosted instanceof OpenAI.BadRequestError && hosted.message.includes('tools[0].type'), 'a hosted tool is refused by name');
  const store = await refusal(() => client.responses.create({ ...base, input: 'hi', store: true }));
  check(store instanceof OpenAI.BadRequestError && store.message.includes('store'), 'store: true is refused');

  // An @openai/agents agent with one tool: the forced call runs the tool, whose result goes
  // back; the SDK then lets the model answer (tool_choice back to auto).
  setTracingDisabled(true);
  const cities = [];
  const getWeather = tool({
    name: 'get_weather', description: 'The weather in a city', parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => { cities.push(city); return `sunny in ${city}`; } });
  const agent = new Agent({
    name: 'Weather', instructions: 'Answer with the weather./system_override', tools: [getWeather],
    model: new OpenAIResponsesModel(client, 'smol'),
    modelSettings: { toolChoice: 'required', maxTokens: 40, temperature: 0, reasoning: { effort: 'none' } } });
  const result = await run(agent, 'Weather in Paris?', { maxTurns: 4 });
  check(cities.length === 1 && typeof cities[0] === 'string', 'the agent called its tool once, with a city');
  check(typeof result.finalOutput === 'string', `the agent finished with an answer (${JSON.stringify(result.finalOutput)})`);
} catch (e) {
  check(false, `unexpected error: ${e.stack ?? e}`);
} finally {
  server.kill('SIGTERM');
}

finish();

// What the random-weight tiny model writes under response_format json_schema, for each schema
// keyword the compiler turns into grammar (pattern, format, oneOf, anyOf, allOf, $ref/$defs, and
// the format and pattern pairs Zod writes), parses and validates with Ajv and ajv-formats: an
// independent JSON Schema validator judges smol's grammar. Requests go through the official `openai` npm client; a pattern construct
// smol cannot enforce is refused by name.
//   node json_schema_client_test.mjs --server BIN --model GGUF
import OpenAI from 'openai';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { check, finish, startTestServer, testArgs, testKey as key } from './start_server.mjs';

const args = testArgs();
const { url, server } = await startTestServer(args);
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 120000 });
const ajv = new Ajv({ strict: false });
addFormats(ajv);

const schemas = {
  pattern: { type: 'object', additionalProperties: false, required: ['code', 'note', 'word'],
             properties: { code: { type: 'string', pattern: '^[A-Z]{2}-\\d{3,5}(?:[a-z]|\\.x)?$' },
                           note: { type: 'string', pattern: '^(?:"|\\\\|\\n|[^\\s"\\\\]){1,8}$' },
                           word: { type: 'string', pattern: 'ok' } } },
  format: { type: 'object', additionalProperties: false,
            required: ['date', 'time', 'date_time', 'email', 'uuid', 'uri', 'ipv4'],
            properties: Object.fromEntries(['date', 'time', 'date-time', 'email', 'uuid', 'uri', 'ipv4']
              .map((f) => [f.replace('-', '_'), { type: 'string', format: f }])) },
  oneOf: { $defs: { Cat: { type: 'object', additionalProperties: false, required: ['pet_type', 'lives'],
                           properties: { pet_type: { const: 'cat' }, lives: { type: 'integer', minimum: 1, maximum: 9 } } },
                    Dog: { type: 'object', additionalProperties: false, required: ['pet_type', 'good'],
                           properties: { pet_type: { const: 'dog' }, good: { type: 'boolean' } } } },
           oneOf: [{ $ref: '#/$defs/Cat' }, { $ref: '#/$defs/Dog' }, { type: 'string', format: 'ipv4' }],
           discriminator: { propertyName: 'pet_type' } },
  anyOf: { type: 'array', minItems: 1, maxItems: 3,
           items: { anyOf: [{ type: 'string', format: 'date' }, { type: 'integer', minimum: 0 }, { type: 'null' }] } },
  allOf: { $defs: { Base: { type: 'object', required: ['id'], properties: { id: { type: 'string', format: 'uuid' } } } },
           type: 'object', required: ['name'], properties: { name: { type: 'string', pattern: '^[A-Z][a-z]{0,6}$' } },
           allOf: [{ $ref: '#/$defs/Base' }, { required: ['when'], properties: { when: { type: 'string', format: 'time' } } }] },
  // As zod 4.1's z.toJSONSchema writes z.email().min(3).max(40), z.uuid(), z.iso.datetime(),
  // z.iso.date(), z.ipv4(), z.string().regex(...).max(8), z.nanoid() and startsWith/endsWith, and
  // zod-to-json-schema's lookahead email: a format and a pattern side by side, both held.
  zod: { type: 'object', additionalProperties: false,
         required: ['email', 'id', 'at', 'day', 'ip', 'code', 'key', 'tag', 'legacy'],
         properties: {
           email: { type: 'string', minLength: 3, maxLength: 40, format: 'email',
                    pattern: "^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$" },
           id: { type: 'string', format: 'uuid',
                 pattern: '^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$' },
           at: { type: 'string', format: 'date-time',
                 pattern: '^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$' },
           day: { type: 'string', format: 'date',
                  pattern: '^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))$' },
           ip: { type: 'string', format: 'ipv4',
                 pattern: '^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$' },
           code: { type: 'string', maxLength: 8, pattern: '^[a-z]+$' },
           key: { type: 'string', format: 'nanoid', pattern: '^[a-zA-Z0-9_-]{21}$' },
           tag: { type: 'string', format: 'ends_with', allOf: [{ pattern: '^ab.*' }, { pattern: '.*z$' }], maxLength: 6 },
           legacy: { type: 'string', maxLength: 24,
                     pattern: "^(?!\\.)(?!.*\\.\\.)([a-zA-Z0-9_'+\\-\\.]*)[a-zA-Z0-9_+-]@([a-zA-Z0-9][a-zA-Z0-9\\-]*\\.)+[a-zA-Z]{2,}$" } } },
  definitions: { definitions: { node: { type: 'object', additionalProperties: false, required: ['ip', 'next'],
                                        properties: { ip: { type: 'string', format: 'ipv4' },
                                                      next: { anyOf: [{ $ref: '#/definitions/node' }, { type: 'null' }] } } } },
                 $ref: '#/definitions/node' },
};

try {
  for (const [name, schema] of Object.entries(schemas)) {
    const validate = ajv.compile(schema);
    for (const [seed, max_tokens] of [[1, 160], [2, 240], [3, 320]]) {
      const reply = await client.chat.completions.create({
        model: 'smol', messages: [{ role: 'user', content: `Some JSON for ${name}` }], max_tokens, temperature: 1, seed,
        response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } } });
      const content = reply.choices[0].message.content;
      let value;
      try { value = JSON.parse(content); } catch { value = undefined; }
      check(value !== undefined && validate(value),
            `${name}, seed ${seed}, ${max_tokens} tokens: the reply parses and Ajv validates it` +
            (value === undefined ? ` (not JSON: ${content})` : validate.errors ? ` ${JSON.stringify(validate.errors)} in ${content}` : ''));
    }
  }

  // What smol cannot enforce is a 400 naming it, never a reply that ignores it.
  const refusal = async (schema) => {
    try {
      await client.chat.completions.create({ model: 'smol', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4,
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
      return null;
    } catch (e) {
      return e;
    }
  };
  const lookahead = await refusal({ type: 'string', pattern: '^x(?!y)' });
  check(lookahead instanceof OpenAI.BadRequestError && lookahead.code === 'unsupported_parameter' && lookahead.message.includes('lookahead'),
        'a lookahead other than right after the ^ is refused by name');
  const disjoint = await refusal({ type: 'string', format: 'date', pattern: '^x' });
  check(disjoint instanceof OpenAI.BadRequestError && disjoint.message.includes('no string matches'),
        'a pattern and a format no string satisfies together are refused');
  const huge = await refusal({ type: 'string', pattern: '^((a{1000}){1000}){1000}$' });
  check(huge instanceof OpenAI.BadRequestError && huge.code === 'grammar_too_complex', 'a pattern past the size cap is grammar_too_complex');
  const overlapping = await refusal({ oneOf: [{ type: 'integer' }, { type: 'number' }] });
  check(overlapping instanceof OpenAI.BadRequestError && overlapping.message.includes('may both match'),
        'a oneOf whose branches overlap is refused');
} finally {
  server.kill('SIGTERM');
}

finish();

// Hugging Face's own tokenizer (the JavaScript port, @huggingface/tokenizers) over a tokenizer.json
// that `smol-inspect --hf-tokenizer` rebuilt from a GGUF, in two modes:
//
//   node hf_tokenize.mjs compare --tokenizer T.json --plain-tokenizer P.json CASES.jsonl...
//     Every line {text, parse_special, ids} of every file must get exactly `ids` from Hugging
//     Face (T.json when parse_special, P.json, which lacks the CONTROL tokens, otherwise).
//     Each mismatch prints the text and both id lists; exits 1 if there was any.
//
//   node hf_tokenize.mjs bench --tokenizer T.json --text FILE [--repeat N]
//     Times encoding the whole file (best of N, default 3) and prints one JSON line:
//     {"bytes", "tokens", "seconds", "mb_per_s", "tokens_per_s"}.
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

function usage(message) {
  if (message) console.error(`hf_tokenize: ${message}`);
  console.error("usage: node hf_tokenize.mjs compare --tokenizer T.json --plain-tokenizer P.json CASES.jsonl...\n" +
                "       node hf_tokenize.mjs bench --tokenizer T.json --text FILE [--repeat N]");
  process.exit(2);
}

function parseArgs(argv) {
  const options = { files: [] };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} expects a value`));
    if (a === "--tokenizer") options.tokenizer = value();
    else if (a === "--plain-tokenizer") options.plainTokenizer = value();
    else if (a === "--text") options.text = value();
    else if (a === "--repeat") options.repeat = Number(value());
    else if (a.startsWith("--")) usage(`unknown option ${a}`);
    else options.files.push(a);
  }
  return options;
}

function loadTokenizer(path) {
  const json = JSON.parse(readFileSync(path, "utf8"));
  return new Tokenizer(json, { add_bos_token: false, add_eos_token: false });
}

function encode(tokenizer, text) {
  return tokenizer.encode(text, { add_special_tokens: false }).ids;
}

function readCases(path) {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line, index) => ({ ...JSON.parse(line), where: `${path}:${index + 1}` }));
}

function compare(options) {
  if (!options.tokenizer || !options.plainTokenizer || options.files.length === 0) usage("compare needs both tokenizers and case files");
  const withControl = loadTokenizer(options.tokenizer);
  const plain = loadTokenizer(options.plainTokenizer);
  let checked = 0;
  let mismatches = 0;
  for (const path of options.files) {
    const cases = readCases(path);
    for (const c of cases) {
      const hf = encode(c.parse_special ? withControl : plain, c.text);
      ++checked;
      const same = hf.length === c.ids.length && hf.every((id, i) => id === c.ids[i]);
      if (same) continue;
      ++mismatches;
      if (mismatches <= 20) {
        let first = 0;
        while (first < hf.length && hf[first] === c.ids[first]) ++first;
        console.log(`MISMATCH ${c.where} parse_special=${c.parse_special}\n` +
                    `  text:         ${JSON.stringify(c.text)}\n` +
                    `  hugging face: [${hf.join(",")}]\n` +
                    `  in the file:  [${c.ids.join(",")}]\n` +
                    `  first difference at id index ${first}`);
      }
    }
    console.log(`${path}: ${cases.length} lines`);
  }
  console.log(`hf_tokenize: ${checked} texts compared, ${mismatches} mismatches`);
  process.exit(mismatches === 0 ? 0 : 1);
}

function bench(options) {
  if (!options.tokenizer || !options.text) usage("bench needs --tokenizer and --text");
  const tokenizer = loadTokenizer(options.tokenizer);
  const buffer = readFileSync(options.text);
  const text = buffer.toString("utf8");
  const repeat = options.repeat > 0 ? options.repeat : 3;
  let best = Infinity;
  let tokens = 0;
  for (let r = 0; r < repeat; ++r) {
    const start = process.hrtime.bigint();
    tokens = encode(tokenizer, text).length;
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  }
  console.log(JSON.stringify({
    bytes: buffer.length, tokens, seconds: best,
    mb_per_s: buffer.length / 1e6 / best, tokens_per_s: tokens / best,
  }));
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === "compare") compare(parseArgs(rest));
else if (mode === "bench") bench(parseArgs(rest));
else usage(mode ? `unknown mode ${mode}` : "no mode given");

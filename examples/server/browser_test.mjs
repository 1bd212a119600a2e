// Headless browser test of the smol-server chat page: starts the server on a free port,
// drives Debian's chromium through playwright-core, chats, and saves a screenshot.
//   node browser_test.mjs --server BIN --model GGUF --out DIR [--chromium PATH] [--web DIR]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { check, finish, startServer, testArgs } from './start_server.mjs';
import { vendored } from './vendor.mjs';

const args = testArgs();
const here = dirname(fileURLToPath(import.meta.url));
const executablePath = args.chromium ?? '/usr/bin/chromium';
const out = args.out ?? here;

// A reply as the server streams it (chat.completion.chunk events, then [DONE]), for
// page.route to answer with: the tiny random-weight model never writes what some checks need.
const cannedReply = (chunks) => ({
  status: 200,
  contentType: 'text/event-stream',
  body: chunks.map((c) => `data: ${JSON.stringify({ object: 'chat.completion.chunk', ...c })}\n\n`).join('') + 'data: [DONE]\n\n',
});
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// The committed copies of the front-end libraries must be exactly what npm installed.
if (args.web) {
  for (const [from, to] of vendored) {
    const installed = readFileSync(join(here, 'node_modules', from));
    const committed = readFileSync(join(args.web, 'vendor', to));
    check(installed.equals(committed), `web/vendor/${to} matches node_modules/${from}`);
  }
}

const { url, server } = await startServer(args.server, ['-m', args.model, '-c', '8192', '--parallel', '2']);

// ...and the server serves each of them, compiled in (CMakeLists.txt lists them).
if (args.web) {
  for (const [, to] of vendored) {
    const served = Buffer.from(await (await fetch(`${url}/vendor/${to}`)).arrayBuffer());
    check(served.equals(readFileSync(join(args.web, 'vendor', to))), `the server serves /vendor/${to}`);
  }
}

const profile = mkdtempSync(join(tmpdir(), 'smol-chromium-'));
// A fresh profile directory (playwright passes it as --user-data-dir).
const browser = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  acceptDownloads: true,
  permissions: ['clipboard-read', 'clipboard-write'],
  viewport: { width: 1200, height: 800 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = browser.pages()[0] ?? await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const offsite = [];
  page.on('request', (r) => { if (!r.url().startsWith(url) && !r.url().startsWith('blob:')) offsite.push(r.url()); });
  const chatBodies = [];
  const sessionIds = [];  // each chat request's X-Session-Id, the key a load balancer routes on
  page.on('request', (r) => {
    if (!r.url().endsWith('/v1/chat/completions')) return;
    chatBodies.push(JSON.parse(r.postData()));
    sessionIds.push(r.headers()['x-session-id']);
  });

  await page.goto(url);
  await page.waitForSelector('#input');
  check(await page.evaluate(() => typeof marked === 'object' && typeof DOMPurify === 'function' && typeof hljs === 'object'),
        'marked, DOMPurify and highlight.js load from the server');

  // Model output goes through marked then DOMPurify: markdown renders, script never runs.
  const rendered = await page.evaluate(async () => {
    const html = window.smolChat.renderMarkdown(
      '**bold**\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```js\nlet x = 1;\n```\n\n' +
      '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script><a href="javascript:window.__pwned=3">x</a>');
    const box = document.createElement('div');
    box.innerHTML = html;
    document.body.append(box);
    box.querySelector('a')?.click();
    await new Promise((r) => setTimeout(r, 300));
    box.remove();
    return { html, pwned: window.__pwned ?? null };
  });
  check(/<strong>bold<\/strong>/.test(rendered.html) && /<li>one<\/li>/.test(rendered.html), 'markdown: emphasis and lists');
  check(/<table>/.test(rendered.html) && /<pre><code class="language-js">/.test(rendered.html), 'markdown: tables and code blocks');
  check(!/onerror|<script|javascript:/i.test(rendered.html) && rendered.pwned === null, 'sanitized: no script runs');

  // Conversation ids are UUIDv7.
  const uuid7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const firstId = await page.evaluate(() => window.smolChat.currentId());
  check(uuid7.test(firstId), `conversation id is a UUIDv7 (${firstId})`);

  // Send a message and watch the reply stream in.
  await page.fill('#max-tokens', '48');
  await page.dispatchEvent('#max-tokens', 'change');
  await page.fill('#input', 'Hello! Write a list.');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.message.user');
  const streamed = await page.waitForFunction(() => {
    const reply = document.querySelector('.message.assistant .content');
    const stop = document.querySelector('#stop');
    return reply && reply.textContent.trim().length > 0 && !stop.hidden;
  }, null, { timeout: 120000 }).then(() => true, () => false);
  check(streamed, 'text appears while the reply is still streaming (stop button shown)');
  await page.waitForSelector('.message.assistant .stats', { timeout: 180000 });
  const stats = await page.textContent('.message.assistant .stats');
  check(/tokens · [\d.]+ tok\/s/.test(stats), `tokens/s shown after the reply (${stats})`);
  check(chatBodies[0]?.stream === true && chatBodies[0]?.chat_template_kwargs?.enable_thinking === true,
        'the first request streams with thinking on');

  // Thinking toggle: off via the switch, on again via /think.
  await page.click('#thinking');
  check(!(await page.isChecked('#thinking')), 'thinking switch turns off');
  await page.fill('#input', 'And now?');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('.message.assistant .stats').length === 2, null, { timeout: 180000 });
  check(chatBodies[1]?.chat_template_kwargs?.enable_thinking === false, 'the next request has enable_thinking false');
  check(chatBodies[1]?.messages?.length === 3, 'the follow-up sends the whole history');
  check(sessionIds.length === 2 && sessionIds.every((id) => id === firstId),
        `both turns send the conversation id as X-Session-Id (${sessionIds})`);
  await page.fill('#input', '/think');
  await page.press('#input', 'Enter');
  check(await page.isChecked('#thinking'), '/think turns thinking back on');
  await page.fill('#input', '/help');
  await page.press('#input', 'Enter');
  check((await page.textContent('#messages')).includes('/no_think'), '/help lists the commands');
  await page.screenshot({ path: join(out, 'smol-server-chat.png') });

  // Stop button ends a reply early. The random-weight model may end a turn within a few
  // tokens, faster than a click; banning its end-of-turn tokens (logit_bias added to this one
  // request on its way out) keeps the reply streaming until the stop button is pressed. On a
  // loaded machine even 4000 tokens may stream out before the click lands: the stop button is
  // then hidden again, and the test asks for another reply (three tries).
  const endIds = (await (await fetch(`${url}/tokenize`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: '<|im_end|><|end_of_text|>', parse_special: true }) })).json()).tokens;
  check(endIds.length === 2, `the end-of-turn tokens are ${endIds}`);
  await page.fill('#max-tokens', '4000');
  await page.dispatchEvent('#max-tokens', 'change');
  let stopped = false;
  for (let attempt = 0; attempt < 3 && !stopped; ++attempt) {
    await page.route('**/v1/chat/completions', async (route) => {
      const body = JSON.parse(route.request().postData());
      body.logit_bias = Object.fromEntries(endIds.map((id) => [id, -100]));
      await route.continue({ postData: JSON.stringify(body) });
    }, { times: 1 });
    const replies = (await page.$$('.message.assistant')).length;
    await page.fill('#input', 'Tell me a very long story.');
    await page.press('#input', 'Enter');
    await page.waitForFunction((n) => {
      const reply = document.querySelectorAll('.message.assistant')[n];
      return (reply?.querySelector('.content')?.textContent.length ?? 0) + (reply?.querySelector('.reasoning')?.textContent.length ?? 0) > 0;
    }, replies, { timeout: 120000 });
    if (await page.click('#stop', { timeout: 5000 }).then(() => true, () => false)) {
      stopped = await page.waitForFunction(() => [...document.querySelectorAll('.message.assistant')].at(-1)?.querySelector('.stats')?.textContent === 'stopped',
                                           null, { timeout: 10000 }).then(() => true, () => false);
    } else {  // the reply ended before the click
      await page.waitForFunction(() => [...document.querySelectorAll('.message.assistant')].at(-1)?.querySelector('.stats'), null, { timeout: 180000 });
    }
  }
  check(stopped, 'the stop button ends the reply');
  await page.fill('#max-tokens', '48');
  await page.dispatchEvent('#max-tokens', 'change');

  // A second conversation has its own (empty) history; switching back restores the first.
  await page.click('#new-chat');
  const ids = await page.$$eval('.conversation', (b) => b.map((x) => x.dataset.id));
  check(ids.length === 2 && ids.every((id) => uuid7.test(id)) && ids[0] !== ids[1], 'a second conversation opens');
  check((await page.$$('.message')).length === 0, 'the new conversation starts empty');
  await page.fill('#input', 'Second chat here');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => document.querySelector('.message.assistant .stats'), null, { timeout: 180000 });

  // Regenerate replaces the last reply with a new sample of the same history. The new reply is
  // canned so the check does not hang on what the random model says.
  const turns = () => page.evaluate(() => [...document.querySelectorAll('.message.user .text, .message.assistant .content')]
    .map((e) => `${e.closest('.message').classList.contains('user') ? 'user' : 'assistant'}: ${e.textContent.trim()}`));
  const sent = chatBodies.length;
  await page.route('**/v1/chat/completions', (route) => route.fulfill(cannedReply([
    { choices: [{ index: 0, delta: { role: 'assistant', content: 'A regenerated ' }, finish_reason: null }] },
    { choices: [{ index: 0, delta: { content: 'answer.' }, finish_reason: 'stop' }], timings: { predicted_n: 3, predicted_per_second: 9 } },
  ])), { times: 1 });
  check((await page.$$('.message.assistant .regenerate')).length === 1 && (await page.$$('.message.user .edit')).length === 1,
        'the last reply has a Regenerate button and the last user turn an Edit button');
  await page.click('.message.assistant .regenerate');
  await page.waitForFunction(() => document.querySelector('.message.assistant .stats'), null, { timeout: 10000 });
  check(chatBodies.length === sent + 1 && same(chatBodies[sent].messages, chatBodies[sent - 1].messages) &&
        same(chatBodies[sent].messages, [{ role: 'user', content: 'Second chat here' }]),
        'regenerate sends the same history again');
  check(same(await turns(), ['user: Second chat here', 'assistant: A regenerated answer.']),
        `the regenerated reply replaces the last one (one assistant message): ${JSON.stringify(await turns())}`);

  // Edit: Escape leaves the turn as it was; an edited turn is sent again and its new reply
  // (from the model) replaces the old one.
  await page.click('.message.user .edit');
  check(await page.inputValue('.message.user.editing .edit-input') === 'Second chat here', 'Edit opens the last user turn for editing');
  await page.press('.edit-input', 'Escape');
  check(!(await page.$('.edit-input')) && chatBodies.length === sent + 1 && (await turns())[0] === 'user: Second chat here',
        'Escape cancels the edit');
  await page.click('.message.user .edit');
  await page.fill('.edit-input', 'Second chat, edited');
  await page.screenshot({ path: join(out, 'smol-server-chat-edit.png') });
  await page.press('.edit-input', 'Enter');
  await page.waitForFunction(() => document.querySelector('.message.assistant .stats'), null, { timeout: 180000 });
  check(chatBodies.length === sent + 2 && same(chatBodies[sent + 1].messages, [{ role: 'user', content: 'Second chat, edited' }]),
        'the edited turn is sent in place of the old one');
  const afterEdit = await turns();
  check(afterEdit.length === 2 && afterEdit[0] === 'user: Second chat, edited' && afterEdit[1] !== 'assistant: A regenerated answer.',
        'the old reply is replaced by the new one');
  check(await page.textContent('#chat-title') === 'Second chat, edited', 'editing the first turn renames the conversation');

  // A system prompt goes first, with the system role, in every request while it is set; it is
  // kept across a reload, and an empty one sends none.
  await page.fill('#system-prompt', 'You are a terse assistant.');
  await page.fill('#input', 'Hi again');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('.message.assistant .stats').length === 2, null, { timeout: 180000 });
  const withSystem = chatBodies.at(-1).messages;
  check(same(withSystem[0], { role: 'system', content: 'You are a terse assistant.' }) && withSystem.length === 4 &&
        same(withSystem.slice(1).map((m) => m.role), ['user', 'assistant', 'user']), 'the system prompt is sent as messages[0]');
  await page.reload();
  await page.waitForSelector('#input');
  check(await page.inputValue('#system-prompt') === 'You are a terse assistant.', 'the system prompt survives a reload');
  await page.fill('#system-prompt', '');
  await page.click('.message.assistant .regenerate');
  await page.waitForFunction(() => document.querySelectorAll('.message.assistant .stats').length === 2, null, { timeout: 180000 });
  check(chatBodies.at(-1).messages[0].role === 'user' && chatBodies.at(-1).messages.length === 3,
        'with the system prompt emptied, no system message is sent');
  await page.click(`.conversation[data-id="${firstId}"]`);
  check((await page.textContent('#messages')).includes('Hello! Write a list.'), 'switching back shows the first history');
  await page.screenshot({ path: join(out, 'smol-server-chat-2.png') });

  // Export downloads the conversation as markdown.
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-chat')]);
  const exported = readFileSync(await download.path(), 'utf8');
  check(download.suggestedFilename().endsWith(`${firstId}.md`) && exported.startsWith('# Hello! Write a list.') &&
        exported.includes('## User\n\nHello! Write a list.') && exported.includes('## Assistant'),
        'export downloads the conversation as markdown');

  // Reasoning goes into a collapsible block and the answer is rendered as markdown. The tiny
  // test model never writes <think>, so this reply is a canned SSE stream in the server's
  // format, answered by the browser's request router.
  await page.click('#new-chat');
  const canned = [
    { choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
    { choices: [{ index: 0, delta: { reasoning_content: 'The user wants a table. ' }, finish_reason: null }] },
    { choices: [{ index: 0, delta: { reasoning_content: 'I will make one.' }, finish_reason: null }] },
    { choices: [{ index: 0, delta: { content: 'Here it is:\n\n| model | params |\n|---|---|\n| SmolLM3 | 3B |\n\n' }, finish_reason: null }] },
    { choices: [{ index: 0, delta: { content: '```cpp\nint main() { return 0; }\n```\n<img src=x onerror="window.__pwned=4">' }, finish_reason: null }] },
    { choices: [{ index: 0, delta: { content: '\n\n```html\n<b onclick="window.__pwned=5">hi</b><script>window.__pwned=6</script>\n```\n' }, finish_reason: null }] },
    { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], timings: { predicted_n: 20, predicted_per_second: 42.5 } },
    { choices: [], usage: { prompt_tokens: 30, completion_tokens: 20, total_tokens: 50, prompt_tokens_details: { cached_tokens: 0 } } },
  ];
  await page.route('**/v1/chat/completions', (route) => route.fulfill(cannedReply(canned)));
  await page.fill('#input', 'Show me a table');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.message.assistant .stats');
  await page.unroute('**/v1/chat/completions');
  check((await page.textContent('details.thinking .reasoning')) === 'The user wants a table. I will make one.',
        'reasoning_content is shown in the collapsible thinking block');
  check(!(await page.$eval('details.thinking', (d) => d.open)), 'the thinking block is collapsed once the answer came');
  check(await page.$('.message.assistant .content table') !== null && await page.$('.message.assistant .content pre code') !== null,
        'the answer renders its markdown table and code block');
  check((await page.textContent('.message.assistant .stats')).startsWith('20 tokens · 42.5 tok/s'), 'tokens/s from the server timings');

  // Code blocks are highlighted by highlight.js (its spans inside the block) under a bar naming
  // the language; HTML inside a fence stays text, highlighted as html.
  const blocks = await page.$$eval('.message.assistant .code-block', (bs) => bs.map((b) => ({
    language: b.querySelector('.code-bar span').textContent,
    spans: b.querySelectorAll('pre > code.hljs span[class^="hljs-"]').length,
    text: b.querySelector('pre > code').textContent,
    elements: b.querySelector('pre > code').querySelectorAll(':not(span)').length,
  })));
  check(blocks.length === 2 && blocks[0].language === 'cpp' && blocks[0].spans > 0 &&
        blocks[0].text === 'int main() { return 0; }\n', `the cpp block is highlighted (${JSON.stringify(blocks[0])})`);
  check(blocks[1]?.language === 'html' && blocks[1].spans > 0 && blocks[1].elements === 0 &&
        blocks[1].text.includes('<script>window.__pwned=6</script>'), 'HTML in a fenced block is highlighted as text, not markup');

  // Each block's copy button puts its code on the clipboard (granted to the page above), and
  // says so; without navigator.clipboard (plain http beyond localhost) it falls back to
  // execCommand('copy').
  await page.click('.message.assistant .copy-code');
  check(await page.waitForFunction(() => document.querySelector('.message.assistant .copy-code').textContent === 'Copied',
                                   null, { timeout: 5000 }).then(() => true, () => false), 'the copy button says Copied');
  check(await page.evaluate(() => navigator.clipboard.readText()) === 'int main() { return 0; }',
        'the copy button puts the code on the clipboard');
  await page.evaluate(() => {
    window.__clipboard = navigator.clipboard;
    window.__clipboardProperty = Object.getOwnPropertyDescriptor(Navigator.prototype, 'clipboard');
    Object.defineProperty(Navigator.prototype, 'clipboard', { get: () => undefined, configurable: true });
  });
  await page.locator('.message.assistant .copy-code').nth(1).click();
  await page.waitForFunction(() => document.querySelectorAll('.message.assistant .copy-code')[1].textContent !== 'Copy', null,
                             { timeout: 5000 }).catch(() => {});
  check(await page.evaluate(() => window.__clipboard.readText()) === '<b onclick="window.__pwned=5">hi</b><script>window.__pwned=6</script>',
        'without navigator.clipboard, copying falls back to execCommand');
  await page.evaluate(() => Object.defineProperty(Navigator.prototype, 'clipboard', window.__clipboardProperty));
  await page.click('details.thinking summary');
  check(await page.evaluate(() => window.__pwned ?? null) === null, 'model output with an onerror handler or a script runs nothing');
  await page.screenshot({ path: join(out, 'smol-server-chat-thinking.png') });

  // Export .json, then Import (its button opens a file chooser): the file opens as a new
  // conversation with the same title and messages, reasoning included.
  const cannedId = await page.evaluate(() => window.smolChat.currentId());
  const [jsonDownload] = await Promise.all([page.waitForEvent('download'), page.click('#export-json')]);
  const jsonPath = await jsonDownload.path();
  const exportedJson = JSON.parse(readFileSync(jsonPath, 'utf8'));
  check(jsonDownload.suggestedFilename().endsWith(`${cannedId}.json`) && exportedJson.format === 'smol-chat' &&
        same(exportedJson.messages.map((m) => m.role), ['user', 'assistant']) &&
        exportedJson.messages[1].reasoning === 'The user wants a table. I will make one.',
        'Export .json downloads the messages with their reasoning');
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.click('#import-chat')]);
  await chooser.setFiles(jsonPath);
  await page.waitForFunction((id) => window.smolChat.currentId() !== id, cannedId, { timeout: 5000 }).catch(() => {});
  const [original, imported] = await page.evaluate((id) => {
    const strip = (c) => c && ({ title: c.title, messages: c.messages.map((m) => ({ role: m.role, content: m.content, reasoning: m.reasoning || undefined })) });
    const all = window.smolChat.conversations();
    return [strip(all.find((c) => c.id === id)), strip(all.find((c) => c.id === window.smolChat.currentId() && c.id !== id))];
  }, cannedId);
  check(imported && same(original, imported), 'Import opens the exported file as a new conversation with the same messages');
  check(await page.textContent('.conversation.active') === 'Show me a table' &&
        (await page.textContent('details.thinking .reasoning')) === 'The user wants a table. I will make one.' &&
        await page.$$eval('.message.assistant .code-block code.hljs span', (s) => s.length) > 0,
        'the imported conversation shows its reasoning and highlighted code');

  // A file that is not a conversation is an error notice; nothing else changes.
  const before = await page.evaluate(() => [window.smolChat.currentId(), window.smolChat.conversations().length]);
  for (const [name, text, why] of [
    ['broken.json', '{"messages": [', 'it is not JSON'],
    ['robot.json', '{"messages": [{"role": "robot", "content": "hi"}]}', 'message 1 has role "robot"'],
    ['other.json', '{"title": "x", "turns": []}', 'it has no "messages" list'],
    ['numbers.json', '{"messages": [{"role": "user", "content": 5}]}', 'message 1 has no text content'],
    ['future.json', '{"format": "smol-chat", "version": 2, "messages": []}', 'it is version 2 of the format'],
  ]) {
    await page.setInputFiles('#import-file', { name, mimeType: 'application/json', buffer: Buffer.from(text) });
    await page.waitForFunction((n) => [...document.querySelectorAll('.notice.error')].some((e) => e.textContent.includes(n)), name,
                               { timeout: 5000 }).catch(() => {});
    const shown = await page.$$eval('.notice.error', (ns) => ns.map((n) => n.textContent));
    check(shown.some((n) => n.startsWith(`Import failed: ${name}: ${why}`)), `a malformed import shows an error (${shown.at(-1)})`);
  }
  check(same(await page.evaluate(() => [window.smolChat.currentId(), window.smolChat.conversations().length]), before),
        'a malformed import opens no conversation');
  await page.screenshot({ path: join(out, 'smol-server-chat-import.png') });
  await page.click('#delete-chat');
  await page.click('#delete-chat');

  // Clear empties a conversation; delete removes it.
  await page.click('#clear-chat');
  check((await page.$$('.message')).length === 0, 'clear empties the conversation');
  await page.click('#delete-chat');
  check((await page.$$('.conversation')).length === 1, 'delete removes the conversation');

  check(pageErrors.length === 0, `no page errors ${pageErrors.join('; ')}`);
  check(offsite.length === 0, `no requests beyond the server ${offsite.join(' ')}`);
  console.log(`screenshots in ${out}: smol-server-chat.png, smol-server-chat-2.png, smol-server-chat-edit.png, ` +
              'smol-server-chat-thinking.png, smol-server-chat-import.png');
} finally {
  await browser.close();
  server.kill('SIGTERM');
  rmSync(profile, { recursive: true, force: true });
}
finish();

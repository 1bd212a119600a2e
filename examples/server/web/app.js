// The smol chat page: conversations kept in localStorage, replies streamed from
// /v1/chat/completions as Server-Sent Events, answers rendered with marked and sanitized by
// DOMPurify so model output can never run script in the page; code blocks are then
// highlighted by highlight.js from their text.
'use strict';

(() => {
  const STORAGE_KEY = 'smol.conversations.v1';
  const SETTINGS_KEY = 'smol.settings.v1';
  const $ = (id) => document.getElementById(id);

  // ---- state -------------------------------------------------------------------------------

  // UUIDv7 (RFC 9562): 48-bit Unix milliseconds, version 7, 74 random bits; sorts by creation.
  function uuidv7() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    let ms = Date.now();
    for (let i = 5; i >= 0; i--) { bytes[i] = ms % 256; ms = Math.floor(ms / 256); }
    bytes[6] = 0x70 | (bytes[6] & 0x0f);
    bytes[8] = 0x80 | (bytes[8] & 0x3f);
    const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  function load(key, fallback) {
    try { return JSON.parse(localStorage.getItem(key)) ?? fallback; } catch { return fallback; }
  }

  const settings = Object.assign({ thinking: true, temperature: 0.6, maxTokens: 1024, apiKey: '', systemPrompt: '' },
                                 load(SETTINGS_KEY, {}));
  let conversations = load(STORAGE_KEY, []);  // [{id, title, messages: [{role, content, reasoning, stats}]}]
  let currentId = null;
  const running = new Map();  // conversation id -> AbortController of its reply in progress
  let editing = null;  // {id, draft}: the last user turn of conversation id is being edited

  function saveSettings() {
    localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
  }
  function save() {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(conversations));
    saveSettings();
  }
  const current = () => conversations.find((c) => c.id === currentId);
  const titleFrom = (text) => text.slice(0, 48) || 'New chat';
  const lastIndexOf = (c, role) => c.messages.findLastIndex((m) => m.role === role);

  function newConversation() {
    const conversation = { id: uuidv7(), title: 'New chat', messages: [] };
    conversations.unshift(conversation);
    currentId = conversation.id;
    save();
    renderAll();
    $('input').focus();
    return conversation;
  }

  // ---- rendering ---------------------------------------------------------------------------

  marked.setOptions({ gfm: true, breaks: false });
  function renderMarkdown(text) {
    return DOMPurify.sanitize(marked.parse(text ?? ''), { USE_PROFILES: { html: true } });
  }

  // Code blocks are highlighted after sanitising: highlight.js reads each block's text (not
  // HTML) and escapes it, and its output goes through DOMPurify again all the same. A streaming
  // reply repaints every frame, so results are kept per (language, code).
  const highlighted = new Map();
  function highlight(code, language) {
    const key = `${language}\n${code}`;
    let html = highlighted.get(key);
    if (html === undefined) {
      const result = language && hljs.getLanguage(language)
        ? hljs.highlight(code, { language, ignoreIllegals: true })
        : hljs.highlightAuto(code);
      html = DOMPurify.sanitize(result.value);
      if (highlighted.size >= 256) highlighted.delete(highlighted.keys().next().value);
      highlighted.set(key, html);
    }
    return html;
  }

  // navigator.clipboard needs a secure context (https or localhost); elsewhere, the older
  // execCommand('copy') on a hidden textarea.
  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch { /* no clipboard API here, or no permission */ }
    const area = document.createElement('textarea');
    area.value = text;
    area.setAttribute('readonly', '');
    area.style.position = 'fixed';
    area.style.opacity = '0';
    document.body.append(area);
    area.select();
    let copied = false;
    try { copied = document.execCommand('copy'); } catch { /* not allowed */ }
    area.remove();
    return copied;
  }

  // Markdown into el, then each code block highlighted under a bar with its language and a
  // copy button.
  function renderContent(el, text) {
    el.innerHTML = renderMarkdown(text);
    for (const code of el.querySelectorAll('pre > code')) {
      const language = /\blanguage-(\S+)/.exec(code.className)?.[1] ?? '';
      const source = code.textContent;
      if (window.hljs) {
        code.innerHTML = highlight(source, language);
        code.classList.add('hljs');
      }
      const pre = code.parentElement;
      const block = document.createElement('div');
      block.className = 'code-block';
      const bar = document.createElement('div');
      bar.className = 'code-bar';
      const label = document.createElement('span');
      label.textContent = language || 'code';
      const copy = document.createElement('button');
      copy.type = 'button';
      copy.className = 'small copy-code';
      copy.textContent = 'Copy';
      copy.title = 'Copy this code to the clipboard';
      copy.setAttribute('aria-label', `Copy ${language || 'code'} block`);
      copy.addEventListener('click', async () => {
        copy.textContent = await copyText(source.replace(/\n$/, '')) ? 'Copied' : 'Copy failed';
        setTimeout(() => { copy.textContent = 'Copy'; }, 1500);
      });
      bar.append(label, copy);
      pre.replaceWith(block);
      block.append(bar, pre);
    }
  }

  function renderSidebar() {
    const nav = $('conversations');
    nav.replaceChildren();
    for (const c of conversations) {
      const button = document.createElement('button');
      button.className = 'conversation' + (c.id === currentId ? ' active' : '');
      button.dataset.id = c.id;
      button.textContent = c.title;
      button.title = c.title;
      if (running.has(c.id)) {
        const busy = document.createElement('span');
        busy.className = 'busy';
        busy.textContent = '●';
        button.append(busy);
      }
      button.addEventListener('click', () => {
        currentId = c.id;
        editing = null;
        $('app').classList.remove('sidebar-open');
        renderAll();
      });
      nav.append(button);
    }
  }

  function actionButton(label, title, className, onClick) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = `small ${className}`;
    button.textContent = label;
    button.title = title;
    button.addEventListener('click', onClick);
    return button;
  }

  function actions(...buttons) {
    const row = document.createElement('div');
    row.className = 'actions';
    row.append(...buttons);
    return row;
  }

  // The last user turn, edited in place: Enter (or Send) resubmits it, Escape cancels.
  function editElement() {
    const el = document.createElement('div');
    el.className = 'message user editing';
    const area = document.createElement('textarea');
    area.className = 'edit-input';
    area.value = editing.draft;
    area.rows = Math.min(10, editing.draft.split('\n').length + 1);
    area.setAttribute('aria-label', 'Edit your message');
    area.addEventListener('input', () => { editing.draft = area.value; });
    area.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); resubmitEdit(); }
      if (e.key === 'Escape') { e.preventDefault(); cancelEdit(); }
    });
    el.append(area, actions(
      actionButton('Send', 'Send the edited message; the reply after it is replaced', 'primary save-edit', resubmitEdit),
      actionButton('Cancel', 'Keep the message as it was', 'cancel-edit', cancelEdit)));
    return el;
  }

  // last: the message is the last of its role, so it may be edited (user) or regenerated
  // (assistant) when the conversation is idle.
  // A <div> of the given class holding plain text (set as text, never parsed as HTML).
  function textElement(className, text) {
    const el = document.createElement('div');
    el.className = className;
    el.textContent = text;
    return el;
  }

  function messageElement(message, last, idle) {
    const el = document.createElement('div');
    el.className = `message ${message.role}`;
    if (message.role === 'user') {
      el.append(textElement('text', message.content));
      if (last && idle) {
        el.append(actions(actionButton('Edit', 'Edit this message and send it again', 'edit', startEdit)));
      }
      return el;
    }
    if (message.reasoning) {
      const details = document.createElement('details');
      details.className = 'thinking';
      // Open while the model is reasoning, closed once the answer starts, unless the user chose.
      details.open = message.reasoningOpen ?? (!!message.streaming && !message.content);
      const summary = document.createElement('summary');
      summary.addEventListener('click', () => { message.reasoningOpen = !details.open; });
      summary.textContent = message.streaming && !message.content ? 'Thinking…' : 'Reasoning';
      details.append(summary, textElement('reasoning', message.reasoning));
      el.append(details);
    }
    const content = document.createElement('div');
    content.className = 'content';
    renderContent(content, message.content);
    el.append(content);
    if (message.error) el.append(textElement('message error', message.error));
    if (message.stats) el.append(textElement('stats', message.stats));
    if (last && idle) {
      el.append(actions(actionButton('↻ Regenerate', 'Sample a new reply to the same conversation', 'regenerate', regenerate)));
    }
    return el;
  }

  function renderMessages() {
    const box = $('messages');
    const c = current();
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    box.replaceChildren();
    if (!c || c.messages.length === 0) {
      box.append(textElement('empty', 'Ask anything. Type /help for commands.'));
    } else {
      const idle = !running.has(c.id);
      const lastUser = lastIndexOf(c, 'user');
      const lastReply = lastIndexOf(c, 'assistant');
      // Repaints rebuild the list; an edit in progress keeps its text, focus and caret.
      const area = document.activeElement?.classList.contains('edit-input') ? document.activeElement : null;
      const caret = area && [area.selectionStart, area.selectionEnd];
      c.messages.forEach((m, i) => {
        if (m.role === 'notice') box.append(noticeElement(m));
        else if (i === lastUser && idle && editing?.id === c.id) box.append(editElement());
        else box.append(messageElement(m, i === (m.role === 'user' ? lastUser : lastReply) && lastReply > lastUser, idle));
      });
      const edit = box.querySelector('.edit-input');
      if (edit && caret) { edit.focus(); edit.setSelectionRange(...caret); }
    }
    if (atBottom) box.scrollTop = box.scrollHeight;
  }

  function noticeElement(message) {
    const el = textElement(message.error ? 'notice error' : 'notice', message.content);
    el.setAttribute('role', message.error ? 'alert' : 'status');
    return el;
  }

  function renderControls() {
    const c = current();
    $('chat-title').textContent = c ? c.title : 'New chat';
    const busy = c && running.has(c.id);
    $('send').hidden = !!busy;
    $('stop').hidden = !busy;
    $('thinking').checked = settings.thinking;
    $('temperature').value = settings.temperature;
    $('max-tokens').value = settings.maxTokens;
    // Only when it differs: setting a textarea's value moves its caret to the end.
    if ($('system-prompt').value !== settings.systemPrompt) $('system-prompt').value = settings.systemPrompt;
  }

  function renderAll() {
    renderSidebar();
    renderMessages();
    renderControls();
  }

  // Streaming updates arrive per token; one repaint per animation frame is enough.
  let repaintQueued = false;
  function repaint(conversationId) {
    if (conversationId !== currentId || repaintQueued) return;
    repaintQueued = true;
    requestAnimationFrame(() => { repaintQueued = false; renderMessages(); });
  }

  function notice(text, { error = false } = {}) {
    const c = current() ?? newConversation();
    c.messages.push({ role: 'notice', content: text, ...(error ? { error } : {}) });
    save();
    renderMessages();
  }

  // ---- talking to the server -----------------------------------------------------------------

  // conversation: its id goes in X-Session-Id, so a load balancer in front of several servers
  // sends every turn to the replica that holds the conversation's KV cache (deploy/README.md).
  function headers(conversation) {
    const h = { 'Content-Type': 'application/json' };
    if (settings.apiKey) h.Authorization = `Bearer ${settings.apiKey}`;
    if (conversation) h['X-Session-Id'] = conversation.id;
    return h;
  }

  // Reads an SSE body, calling onEvent with each `data:` payload.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
        if (data) onEvent(data);
      }
    }
  }

  function send(text) {
    const c = current() ?? newConversation();
    if (running.has(c.id)) return;
    c.messages.push({ role: 'user', content: text });
    if (c.title === 'New chat') c.title = titleFrom(text);
    generate(c);
  }

  // A new sample for the last user turn: the reply (and any notices after it) is dropped and
  // the same history sent again.
  function regenerate() {
    const c = current();
    if (!c || running.has(c.id)) return;
    const lastUser = lastIndexOf(c, 'user');
    if (lastUser < 0) return;
    c.messages.splice(lastUser + 1);
    generate(c);
  }

  function startEdit() {
    const c = current();
    const lastUser = c ? lastIndexOf(c, 'user') : -1;
    if (lastUser < 0 || running.has(c.id)) return;
    editing = { id: c.id, draft: c.messages[lastUser].content };
    renderMessages();
    const area = document.querySelector('.edit-input');
    area?.focus();
    area?.setSelectionRange(area.value.length, area.value.length);
  }

  function cancelEdit() {
    editing = null;
    renderMessages();
  }

  // The edited text replaces the last user turn, everything after it goes, and it is sent again.
  function resubmitEdit() {
    const c = current();
    if (!c || editing?.id !== c.id || running.has(c.id)) return;
    const text = editing.draft.trim();
    if (!text) return;
    const lastUser = lastIndexOf(c, 'user');
    const turn = c.messages[lastUser];
    if (lastUser === c.messages.findIndex((m) => m.role === 'user') && c.title === titleFrom(turn.content)) {
      c.title = titleFrom(text);
    }
    turn.content = text;
    c.messages.splice(lastUser + 1);
    editing = null;
    generate(c);
  }

  // Streams the assistant's reply to c's messages into a new message at their end.
  async function generate(c) {
    if (editing?.id === c.id) editing = null;
    const reply = { role: 'assistant', content: '', reasoning: '', streaming: true };
    c.messages.push(reply);
    const controller = new AbortController();
    running.set(c.id, controller);
    save();
    renderAll();

    const system = settings.systemPrompt.trim();
    const history = [
      ...(system ? [{ role: 'system', content: system }] : []),
      ...c.messages
        .filter((m) => (m.role === 'user' || m.role === 'assistant') && m !== reply)
        .map((m) => ({ role: m.role, content: m.content })),
    ];
    const started = performance.now();
    let firstToken = 0;
    try {
      const response = await fetch('/v1/chat/completions', {
        method: 'POST',
        headers: headers(c),
        signal: controller.signal,
        body: JSON.stringify({
          messages: history,
          stream: true,
          stream_options: { include_usage: true },
          temperature: Number(settings.temperature),
          max_tokens: Number(settings.maxTokens),
          chat_template_kwargs: { enable_thinking: settings.thinking },
        }),
      });
      if (!response.ok) {
        let message = `${response.status} ${response.statusText}`;
        try { message = (await response.json()).error.message; } catch { /* not JSON */ }
        if (response.status === 401) {
          const key = prompt('This server needs an API key:');
          if (key) { settings.apiKey = key; save(); }
        }
        throw new Error(message);
      }
      let usage = null, timings = null;
      await readEvents(response, (data) => {
        if (data === '[DONE]') return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.usage) usage = chunk.usage;
        if (chunk.timings) timings = chunk.timings;
        const delta = chunk.choices?.[0]?.delta ?? {};
        if (delta.reasoning_content || delta.content) firstToken ||= performance.now();
        if (delta.reasoning_content) reply.reasoning += delta.reasoning_content;
        if (delta.content) reply.content += delta.content;
        repaint(c.id);
      });
      const tokens = usage?.completion_tokens ?? timings?.predicted_n ?? 0;
      const rate = timings?.predicted_per_second ||
        (firstToken && tokens > 1 ? (tokens - 1) / ((performance.now() - firstToken) / 1000) : 0);
      const cached = usage?.prompt_tokens_details?.cached_tokens;
      reply.stats = `${tokens} tokens · ${rate.toFixed(1)} tok/s` +
        (cached ? ` · ${cached} prompt tokens cached` : '') +
        ` · ${((performance.now() - started) / 1000).toFixed(1)} s`;
    } catch (error) {
      if (error.name === 'AbortError') reply.stats = 'stopped';
      else reply.error = String(error.message ?? error);
    } finally {
      reply.streaming = false;
      running.delete(c.id);
      save();
      renderAll();
    }
  }

  // ---- commands ----------------------------------------------------------------------------

  const HELP = [
    '/clear          forget this conversation\'s messages',
    '/think          let the model reason before answering',
    '/no_think       answer directly',
    '/temp 0.7       set the sampling temperature',
    '/help           this list',
  ].join('\n');

  function command(text) {
    const [name, ...args] = text.trim().split(/\s+/);
    switch (name) {
      case '/clear': clearConversation(); return true;
      case '/think': setThinking(true); notice('Thinking on.'); return true;
      case '/no_think': setThinking(false); notice('Thinking off.'); return true;
      case '/temp': {
        const t = Number(args[0]);
        if (!args.length || !Number.isFinite(t) || t < 0 || t > 2) { notice('Usage: /temp 0.7 (between 0 and 2)'); return true; }
        settings.temperature = t;
        save();
        renderControls();
        notice(`Temperature ${t}.`);
        return true;
      }
      case '/help': notice(HELP); return true;
      default: return false;
    }
  }

  function setThinking(on) {
    settings.thinking = on;
    save();
    renderControls();
  }

  function clearConversation() {
    const c = current();
    if (!c) return;
    running.get(c.id)?.abort();
    c.messages = [];
    c.title = 'New chat';
    save();
    renderAll();
  }

  function exportConversation() {
    const c = current();
    if (!c) return;
    const parts = [`# ${c.title}\n`];
    for (const m of c.messages) {
      if (m.role === 'user') parts.push(`## User\n\n${m.content}\n`);
      else if (m.role === 'assistant') {
        parts.push('## Assistant\n');
        if (m.reasoning) parts.push(`<details><summary>Reasoning</summary>\n\n${m.reasoning}\n\n</details>\n`);
        parts.push(`${m.content}\n`);
      }
    }
    download(parts.join('\n'), 'text/markdown', `${fileStem(c)}.md`);
  }

  const fileStem = (c) => `${c.title.replace(/[^\w.-]+/g, '_').slice(0, 40) || 'chat'}-${c.id}`;
  function download(text, type, name) {
    const link = document.createElement('a');
    link.href = URL.createObjectURL(new Blob([text], { type }));
    link.download = name;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }

  // The JSON export, which Import reads back: the title and the user and assistant messages
  // (content, and the reasoning of replies that have one). Notices, stats and errors are the
  // page's, not the conversation's, and stay out.
  const EXPORT_FORMAT = 'smol-chat';
  function exportJson() {
    const c = current();
    if (!c) return;
    const messages = c.messages
      .filter((m) => m.role === 'user' || m.role === 'assistant')
      .map((m) => ({ role: m.role, content: m.content, ...(m.reasoning ? { reasoning: m.reasoning } : {}) }));
    const data = { format: EXPORT_FORMAT, version: 1, title: c.title, exported: new Date().toISOString(), messages };
    download(`${JSON.stringify(data, null, 2)}\n`, 'application/json', `${fileStem(c)}.json`);
  }

  // Reads a JSON export back into {title, messages}, or throws an Error saying what is wrong.
  // Besides this page's exports it takes any {messages: [...]} (such as an OpenAI request body)
  // or a bare list whose messages are user or assistant turns with string content.
  const MAX_IMPORT_BYTES = 8 << 20;
  function parseConversation(text) {
    let data;
    try { data = JSON.parse(text); } catch (e) { throw new Error(`it is not JSON (${e.message})`); }
    if (data?.format !== undefined && data.format !== EXPORT_FORMAT) {
      throw new Error(`its format is ${JSON.stringify(data.format)}, expected "${EXPORT_FORMAT}"`);
    }
    if (data?.format === EXPORT_FORMAT && data.version !== 1) {
      throw new Error(`it is version ${JSON.stringify(data.version)} of the format; this page reads version 1`);
    }
    const list = Array.isArray(data) ? data : data?.messages;
    if (!Array.isArray(list)) throw new Error('it has no "messages" list');
    if (list.length === 0) throw new Error('its "messages" list is empty');
    const messages = list.map((m, i) => {
      const where = `message ${i + 1}`;
      if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new Error(`${where} is not an object`);
      if (m.role === 'system') throw new Error(`${where} is a system message; set it as the System prompt instead`);
      if (m.role !== 'user' && m.role !== 'assistant') {
        throw new Error(`${where} has role ${JSON.stringify(m.role)}, expected "user" or "assistant"`);
      }
      if (typeof m.content !== 'string') throw new Error(`${where} has no text content (a string)`);
      const reasoning = m.reasoning ?? m.reasoning_content ?? '';
      if (typeof reasoning !== 'string') throw new Error(`${where} has a reasoning that is not a string`);
      return { role: m.role, content: m.content, ...(reasoning ? { reasoning } : {}) };
    });
    const title = typeof data.title === 'string' && data.title.trim()
      ? data.title.trim().slice(0, 80)
      : titleFrom(messages.find((m) => m.role === 'user')?.content ?? '');
    return { title, messages };
  }

  // Opens a file as a new conversation; a file that is not a conversation is a notice saying
  // why, and changes nothing else.
  async function importConversation(file) {
    try {
      if (file.size > MAX_IMPORT_BYTES) throw new Error(`it is ${(file.size / 1048576).toFixed(1)} MB, over the 8 MB limit`);
      const { title, messages } = parseConversation(await file.text());
      const conversation = { id: uuidv7(), title, messages };
      conversations.unshift(conversation);
      try {
        save();
      } catch (e) {
        conversations.shift();
        throw new Error(`the browser's storage has no room for it (${e.message})`);
      }
      currentId = conversation.id;
      editing = null;
      renderAll();
    } catch (error) {
      notice(`Import failed: ${file.name}: ${error.message}`, { error: true });
    }
  }

  function deleteConversation() {
    const c = current();
    if (!c) return;
    running.get(c.id)?.abort();
    conversations = conversations.filter((x) => x !== c);
    currentId = conversations[0]?.id ?? null;
    if (!currentId) newConversation();
    save();
    renderAll();
  }

  // ---- wiring ------------------------------------------------------------------------------

  $('composer').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = $('input');
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    input.style.height = '';
    if (text.startsWith('/') && command(text)) return;
    send(text);
  });
  $('input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $('composer').requestSubmit();
    }
  });
  $('input').addEventListener('input', (e) => {
    e.target.style.height = '';
    e.target.style.height = `${Math.min(e.target.scrollHeight, 200)}px`;
  });
  $('stop').addEventListener('click', () => running.get(currentId)?.abort());
  $('new-chat').addEventListener('click', () => { $('app').classList.remove('sidebar-open'); newConversation(); });
  $('clear-chat').addEventListener('click', clearConversation);
  $('delete-chat').addEventListener('click', deleteConversation);
  $('export-chat').addEventListener('click', exportConversation);
  $('export-json').addEventListener('click', exportJson);
  $('import-chat').addEventListener('click', () => $('import-file').click());
  $('import-file').addEventListener('change', (e) => {
    const file = e.target.files[0];
    e.target.value = '';  // so choosing the same file again is a change too
    if (file) importConversation(file);
  });
  $('thinking').addEventListener('change', (e) => setThinking(e.target.checked));
  $('temperature').addEventListener('change', (e) => { settings.temperature = Number(e.target.value); save(); });
  $('max-tokens').addEventListener('change', (e) => { settings.maxTokens = Math.max(1, Number(e.target.value) | 0); save(); });
  $('system-prompt').addEventListener('input', (e) => { settings.systemPrompt = e.target.value; saveSettings(); });
  $('toggle-sidebar').addEventListener('click', () => $('app').classList.toggle('sidebar-open'));

  fetch('/v1/models', { headers: headers() })
    .then((r) => r.json())
    .then((m) => {
      const model = m.data?.[0];
      if (model) $('model-info').textContent = `${model.id} · ${model.meta?.n_ctx ?? '?'} ctx · ${model.meta?.slots ?? '?'} slots`;
    })
    .catch(() => {});

  // Replies that were streaming when the page closed are over.
  for (const c of conversations) for (const m of c.messages) if (m.streaming) { m.streaming = false; m.stats = 'interrupted'; }
  currentId = conversations[0]?.id ?? null;
  if (!currentId) newConversation();
  renderAll();

  // For tests and the console.
  window.smolChat = { renderMarkdown, uuidv7, conversations: () => conversations, currentId: () => currentId };
})();

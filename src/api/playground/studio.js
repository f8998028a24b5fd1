// The studio around the Speak tab (app.js): the tabs, OmniVoice's knobs with the ranges the
// server lists (never copied here), the Design tab, the Code tab (the request behind the form
// last used, as curl, Python, JavaScript and the OpenAI SDK) and Kokoro's blend builder.
// Helpers the Clone, Profiles and Script tabs (workshop.js) share live here too.
'use strict';

// Where the key goes in generated code: a placeholder, never the key typed in this page.
const KEY_PLACEHOLDER = 'OMNIVOICE_API_KEY';
const NO_CHECKPOINT = 'No OmniVoice checkpoint is installed, so this tab cannot speak yet. Point the server at one and reload this page:';
const NO_CHECKPOINT_COMMAND = 'omnivoice-server --omnivoice-dir /path/to/OmniVoice';
// Knobs that are text, not numbers: the language of the input.
const TEXT_KNOBS = [{ name: 'language', label: 'Language', hint: 'e.g. en, zh; empty: detected' }];

/** What the studio did last; read by people through the page and by the browser test. */
const studio = {
  listing: { voices: [] },
  // The request each tab sent or would send: {path, json} or {path, form}.
  requests: {},
  // The tab whose request the Code tab shows.
  codeSource: 'speak',
  // Per tab: {played, error, audio (a Blob), json}.
  results: {},
};

function omnivoiceServed() {
  return Boolean(studio.listing.design_attributes);
}

// ---- Tabs ----

const tabs = [...document.querySelectorAll('[role="tab"]')];

function tabName(tab) {
  return tab.id.replace(/^tab-/, '');
}

function showTab(tab) {
  for (const other of tabs) {
    const selected = other === tab;
    other.setAttribute('aria-selected', String(selected));
    other.tabIndex = selected ? 0 : -1;
    $(other.getAttribute('aria-controls')).hidden = !selected;
  }
  const name = tabName(tab);
  if (name === 'code') showCode();
  else if (name !== 'profiles') studio.codeSource = name;
  if (name === 'profiles') loadProfiles();
}

for (const tab of tabs) {
  tab.addEventListener('click', () => showTab(tab));
  tab.addEventListener('keydown', (event) => {
    const index = tabs.indexOf(tab);
    const moves = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tabs.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const next = tabs[(moves[event.key] + tabs.length) % tabs.length];
    next.focus();
    showTab(next);
  });
}

// ---- Shared by the tabs ----

function panel(name) {
  return $(`panel-${name}`);
}

function tabStatus(name, text) {
  const status = panel(name) && panel(name).querySelector('.tab-status');
  if (status) status.textContent = text;
}

function rememberRequest(name, request) {
  studio.requests[name] = request;
}

/** Sends a tab's request; the answer on success, else the error shown and thrown. */
async function send(name, request, { remember = true } = {}) {
  if (remember) rememberRequest(name, request);
  const result = { played: false, error: null, audio: null, json: null, param: null };
  studio.results[name] = result;
  tabStatus(name, 'Synthesizing…');
  const init = { method: request.method || 'POST', headers: authHeaders() };
  if (request.json) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(request.json);
  } else if (request.form) {
    const form = new FormData();
    for (const [field, value] of request.form) {
      if (value instanceof Blob) form.append(field, value, value.name || 'clip');
      else form.append(field, value);
    }
    init.body = form;
  }
  const response = await fetch(request.path, init);
  if (!response.ok) {
    const error = await apiErrorWithParam(response);
    result.error = error.message;
    result.param = error.param;
    tabStatus(name, error.message);
    throw error;
  }
  return response;
}

/** Like app.js's apiError, keeping the field the server named (`param`). */
async function apiErrorWithParam(response) {
  let body = null;
  try {
    body = await response.clone().json();
  } catch (_) {
    // Not JSON: the status is all there is.
  }
  const error = await apiError(response);
  error.param = body && body.error ? body.error.param || null : null;
  return error;
}

/** Plays an answer's audio in the tab's player, and keeps it for the test and for download. */
async function playIn(name, blob) {
  const result = studio.results[name];
  result.audio = blob;
  const player = panel(name).querySelector('.tab-player');
  if (player.src) URL.revokeObjectURL(player.src);
  player.src = URL.createObjectURL(blob);
  player.hidden = false;
  player.onplaying = () => {
    result.played = true;
    tabStatus(name, 'Playing…');
  };
  player.onended = () => tabStatus(name, 'Done.');
  try {
    await player.play();
  } catch (e) {
    tabStatus(name, `The browser would not play the audio (${e.message}); use the player's controls.`);
  }
}

// ---- OmniVoice's knobs ----

/** A number field per knob the server lists, with its range; empty means the model's default. */
function buildKnobs(container, parameters) {
  const grid = container.querySelector('.knob-grid');
  const prefix = container.id || container.closest('[role="tabpanel"]').id;
  const fields = parameters.map((p) => {
    const id = `${prefix}-${p.name}`;
    const field = document.createElement('div');
    field.className = 'field';
    const label = document.createElement('label');
    label.htmlFor = id;
    const range = `${p.minimum}–${p.maximum}${p.default === undefined ? '' : `, default ${p.default}`}`;
    const hint = document.createElement('span');
    hint.className = 'hint';
    hint.textContent = `(${range})`;
    label.append(`${p.name.replace(/_/g, ' ')} `, hint);
    const input = document.createElement('input');
    Object.assign(input, { id, type: 'number', min: p.minimum, max: p.maximum, step: p.integer ? 1 : 'any' });
    input.inputMode = p.integer ? 'numeric' : 'decimal';
    input.dataset.knob = p.name;
    input.dataset.integer = String(p.integer);
    if (p.default !== undefined) input.placeholder = String(p.default);
    field.append(label, input);
    return field;
  });
  for (const knob of TEXT_KNOBS) {
    const field = document.createElement('div');
    field.className = 'field';
    const id = `${prefix}-${knob.name}`;
    const label = document.createElement('label');
    label.htmlFor = id;
    label.textContent = `${knob.label} `;
    const hint = document.createElement('span');
    hint.className = 'hint';
    hint.textContent = `(${knob.hint})`;
    label.append(hint);
    const input = document.createElement('input');
    Object.assign(input, { id, type: 'text', autocomplete: 'off', spellcheck: false });
    input.dataset.knob = knob.name;
    input.dataset.text = 'true';
    field.append(label, input);
    fields.push(field);
  }
  grid.replaceChildren(...fields);
}

/** The knobs set in `container`, as request fields; a value out of range is refused here. */
function knobValues(container) {
  const values = {};
  for (const input of container.querySelectorAll('[data-knob]')) {
    const raw = input.value.trim();
    if (raw === '') continue;
    if (input.dataset.text) {
      values[input.dataset.knob] = raw;
      continue;
    }
    const value = Number(raw);
    const min = Number(input.min);
    const max = Number(input.max);
    if (!Number.isFinite(value) || value < min || value > max || (input.dataset.integer === 'true' && !Number.isInteger(value))) {
      throw new Error(`${input.dataset.knob} must be ${input.dataset.integer === 'true' ? 'a whole number' : 'a number'} from ${min} to ${max}.`);
    }
    values[input.dataset.knob] = value;
  }
  return values;
}

// ---- Without a checkpoint ----

/** The Design, Clone and Profiles tabs say why they cannot speak, and how to fix it. */
function explainCheckpoint() {
  const served = omnivoiceServed();
  for (const note of document.querySelectorAll('.needs-omnivoice')) {
    note.hidden = served;
    if (!served) {
      const command = document.createElement('code');
      command.textContent = NO_CHECKPOINT_COMMAND;
      note.replaceChildren(document.createTextNode(`${NO_CHECKPOINT} `), command);
    }
  }
  for (const id of ['design-speak', 'clone-speak', 'clone-save', 'profiles-reload']) $(id).disabled = !served;
}

// ---- Design ----

const design = {
  form: $('design-form'),
  preset: $('design-preset'),
  attributes: $('design-attributes'),
  text: $('design-text'),
  error: $('design-text-error'),
  input: $('design-input'),
  knobs: $('design-form').querySelector('.knobs'),
};

function buildDesign(listing) {
  const presets = (listing.voices || []).filter((v) => v.engine === OMNIVOICE_ENGINE && v.design);
  design.preset.replaceChildren(option('auto', 'none · the model picks'),
    ...presets.map((v) => option(v.id, `${v.id} · ${v.design}`)));
  const categories = Object.entries(listing.design_attributes || {}).filter(([name]) => !name.endsWith('_zh'));
  design.attributes.replaceChildren(...categories.map(([name, values]) => {
    const field = document.createElement('div');
    field.className = 'field';
    const label = document.createElement('label');
    label.htmlFor = `design-attribute-${name}`;
    label.textContent = name.replace(/_/g, ' ').replace(/^./, (c) => c.toUpperCase());
    const select = document.createElement('select');
    select.id = `design-attribute-${name}`;
    select.dataset.attribute = name;
    select.replaceChildren(option('', 'any'), ...values.map((v) => option(v, v)));
    field.append(label, select);
    return field;
  }));
}

/** The design the form describes: the description, else the attributes picked. */
function designText() {
  const typed = design.text.value.trim();
  if (typed) return typed;
  return [...design.attributes.querySelectorAll('select')].map((s) => s.value).filter(Boolean).join(', ');
}

function designRequest() {
  const input = design.input.value;
  if (!input.trim()) throw new Error('Type some text to speak.');
  const json = { model: OMNIVOICE_ENGINE, voice: design.preset.value, input, response_format: 'wav' };
  const text = designText();
  if (text) json.instructions = text;
  Object.assign(json, knobValues(design.knobs));
  return { path: '/v1/audio/speech', json };
}

function showFieldError(element, message) {
  element.textContent = message;
  element.hidden = !message;
  design.text.setAttribute('aria-invalid', String(Boolean(message)));
}

design.form.addEventListener('submit', async (event) => {
  event.preventDefault();
  showFieldError(design.error, '');
  let request;
  try {
    request = designRequest();
  } catch (e) {
    tabStatus('design', e.message);
    return;
  }
  try {
    const response = await send('design', request);
    await playIn('design', await response.blob());
  } catch (e) {
    // The server names the field it refused: a bad design is shown where it was typed.
    if (e.param === 'instructions' || e.param === 'voice') showFieldError(design.error, e.message);
  }
});

// ---- Code ----

const code = { source: $('code-source'), language: $('code-language'), text: $('code-text'), copy: $('code-copy') };

// What each tab's request is, now, from its form: the Code tab follows the form as it changes.
const describers = {
  speak: () => ({ path: ui.highlight.checked ? '/v1/audio/speech/timestamps' : '/v1/audio/speech', json: request() }),
  design: designRequest,
  clone: () => cloneRequest(),
  script: () => scriptRequest(),
};

function currentRequest() {
  const describe = describers[studio.codeSource] || describers.speak;
  return describe();
}

function showCode() {
  let request;
  try {
    request = currentRequest();
  } catch (e) {
    code.source.textContent = `The ${studio.codeSource} tab's form is not complete: ${e.message}`;
    code.text.textContent = '';
    return;
  }
  code.source.textContent = `The request of the ${studio.codeSource} tab, as its form is now.`;
  code.text.textContent = renderCode(code.language.value, request);
}

function shellQuote(text) {
  return `'${String(text).replace(/'/g, `'\\''`)}'`;
}

function outputName(request) {
  if (!request.json) return request.path.endsWith('/script') ? 'script.wav' : 'speech.wav';
  if (request.path.endsWith('/timestamps')) return 'speech.json';
  if (request.json.output_format === 'multi_track') return 'tracks.json';
  return `speech.${request.json.response_format === 'pcm' ? 'pcm' : request.json.response_format || 'mp3'}`;
}

/** A JSON value as a Python literal. */
function python(value, indent = '') {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return JSON.stringify(value);
  const inner = `${indent}    `;
  if (Array.isArray(value)) return `[\n${value.map((v) => `${inner}${python(v, inner)},`).join('\n')}\n${indent}]`;
  return `{\n${Object.entries(value).map(([k, v]) => `${inner}${JSON.stringify(k)}: ${python(v, inner)},`).join('\n')}\n${indent}}`;
}

function renderCode(language, request) {
  const url = `${location.origin}${request.path}`;
  const keyed = Boolean(apiKey);
  const out = outputName(request);
  const fileName = (value) => value.name || 'clip.wav';
  if (language === 'curl') {
    const lines = [`curl -sS -X POST ${shellQuote(url)}`];
    if (keyed) lines.push(`-H "Authorization: Bearer $${KEY_PLACEHOLDER}"`);
    if (request.json) {
      lines.push(`-H 'Content-Type: application/json'`, `-d ${shellQuote(JSON.stringify(request.json))}`);
    } else {
      for (const [field, value] of request.form) {
        lines.push(value instanceof Blob ? `-F ${shellQuote(`${field}=@${fileName(value)}`)}` : `-F ${shellQuote(`${field}=${value}`)}`);
      }
    }
    lines.push(`-o ${out}`);
    return lines.join(' \\\n  ');
  }
  if (language === 'python') {
    const lines = ['import os', '', 'import requests', '', 'response = requests.post(', `    ${JSON.stringify(url)},`];
    if (keyed) lines.push(`    headers={"Authorization": f"Bearer {os.environ['${KEY_PLACEHOLDER}']}"},`);
    if (request.json) {
      lines.push(`    json=${python(request.json, '    ')},`);
    } else {
      const texts = Object.fromEntries(request.form.filter(([, v]) => !(v instanceof Blob)));
      const files = request.form.filter(([, v]) => v instanceof Blob);
      lines.push(`    data=${python(texts, '    ')},`);
      lines.push(`    files={${files.map(([f, v]) => `${JSON.stringify(f)}: open(${JSON.stringify(fileName(v))}, "rb")`).join(', ')}},`);
    }
    lines.push(')', 'response.raise_for_status()', `with open(${JSON.stringify(out)}, "wb") as f:`, '    f.write(response.content)');
    return lines.join('\n');
  }
  if (language === 'javascript') {
    const headers = keyed ? `Authorization: \`Bearer \${process.env.${KEY_PLACEHOLDER}}\`` : '';
    const lines = [];
    if (request.json) {
      lines.push(`const response = await fetch(${JSON.stringify(url)}, {`, '  method: "POST",',
        `  headers: { "Content-Type": "application/json"${headers ? `, ${headers}` : ''} },`,
        `  body: JSON.stringify(${JSON.stringify(request.json, null, 2).replace(/\n/g, '\n  ')}),`, '});');
    } else {
      lines.push('const form = new FormData();');
      for (const [field, value] of request.form) {
        lines.push(value instanceof Blob
          ? `form.append(${JSON.stringify(field)}, new Blob([await fs.promises.readFile(${JSON.stringify(fileName(value))})]), ${JSON.stringify(fileName(value))});`
          : `form.append(${JSON.stringify(field)}, ${JSON.stringify(String(value))});`);
      }
      lines.unshift('import fs from "node:fs";', '');
      lines.push(`const response = await fetch(${JSON.stringify(url)}, {`, '  method: "POST",', headers ? `  headers: { ${headers} },` : null, '  body: form,', '});');
    }
    lines.push('if (!response.ok) throw new Error(await response.text());', 'const audio = new Uint8Array(await response.arrayBuffer());');
    return lines.filter((l) => l !== null).join('\n');
  }
  // The OpenAI SDK speaks only /v1/audio/speech; the server's own fields go in extra_body.
  if (request.path !== '/v1/audio/speech') {
    return `# The OpenAI SDK has no call for ${request.path}: use curl, Python or JavaScript.`;
  }
  const { model, voice, input, response_format: format, speed, instructions, ...extra } = request.json;
  const args = [`model=${python(model)}`, `voice=${python(voice)}`, `input=${python(input)}`];
  if (format) args.push(`response_format=${python(format)}`);
  if (speed !== undefined) args.push(`speed=${python(speed)}`);
  if (instructions) args.push(`instructions=${python(instructions)}`);
  if (Object.keys(extra).length) args.push(`extra_body=${python(extra, '    ')}`);
  return [
    'import os', '', 'from openai import OpenAI', '',
    `client = OpenAI(base_url=${JSON.stringify(`${location.origin}/v1`)}, api_key=os.environ.get("${KEY_PLACEHOLDER}", "none"))`,
    'with client.audio.speech.with_streaming_response.create(',
    ...args.map((a) => `    ${a},`),
    ') as response:',
    `    response.stream_to_file(${JSON.stringify(out)})`,
  ].join('\n');
}

code.language.addEventListener('change', showCode);
code.copy.addEventListener('click', async () => {
  try {
    await navigator.clipboard.writeText(code.text.textContent);
    tabStatus('code', 'Copied.');
  } catch (_) {
    // No clipboard (an insecure origin, say): select the code so that Ctrl+C copies it.
    const range = document.createRange();
    range.selectNodeContents(code.text);
    getSelection().removeAllRanges();
    getSelection().addRange(range);
    tabStatus('code', 'Selected: press Ctrl+C to copy.');
  }
});
// Any change to a form is a new request: the Code tab shows it when opened.
document.addEventListener('input', () => {
  if (!panel('code').hidden) showCode();
});

// ---- Blend builder ----

const blendRows = $('blend-rows');

/** One row: a voice and its weight. */
function blendRow(voiceIds) {
  const row = document.createElement('div');
  row.className = 'row blend-row';
  const n = blendRows.children.length + 1;
  const select = document.createElement('select');
  select.setAttribute('aria-label', `Blend voice ${n}`);
  select.replaceChildren(...voiceIds.map((id) => option(id, id)));
  const weight = document.createElement('input');
  Object.assign(weight, { type: 'number', min: 0.1, step: 'any', value: 1 });
  weight.setAttribute('aria-label', `Weight of blend voice ${n}`);
  const remove = document.createElement('button');
  Object.assign(remove, { type: 'button', className: 'secondary', textContent: 'Remove' });
  remove.setAttribute('aria-label', `Remove blend voice ${n}`);
  remove.addEventListener('click', () => {
    row.remove();
    writeBlend();
  });
  select.addEventListener('change', writeBlend);
  weight.addEventListener('input', writeBlend);
  row.append(select, weight, remove);
  return row;
}

/** The rows as `a(2)+b(1)`, in the blend field. */
function writeBlend() {
  const terms = [...blendRows.querySelectorAll('.blend-row')].map((row) => {
    const [select, weight] = row.querySelectorAll('select, input');
    const w = Number(weight.value);
    return Number.isFinite(w) && w > 0 ? `${select.value}(${w})` : null;
  }).filter(Boolean);
  ui.blend.value = terms.join('+');
  ui.blend.dispatchEvent(new Event('input', { bubbles: true }));
}

let blendVoices = [];
$('blend-add').addEventListener('click', () => {
  blendRows.append(blendRow(blendVoices));
  writeBlend();
});

document.addEventListener('engine-changed', (event) => {
  blendVoices = event.detail.voices.filter((v) => v.supported !== false).map((v) => v.id);
  blendRows.replaceChildren();
});

document.addEventListener('voices-loaded', (event) => {
  studio.listing = event.detail;
  const parameters = event.detail.generation_parameters || [];
  for (const container of document.querySelectorAll('.knobs')) buildKnobs(container, parameters);
  buildDesign(event.detail);
  explainCheckpoint();
  if (typeof onVoicesLoaded === 'function') onVoicesLoaded(event.detail);
});

window.studio = studio;

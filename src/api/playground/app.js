// The omnivoice playground: a voice picker filled from GET /v1/audio/voices and speech from
// POST /v1/audio/speech. PCM plays while it is still streaming, through Web Audio; the other
// formats play in an <audio> element once downloaded. With "Highlight words" the speech comes
// from POST /v1/audio/speech/timestamps instead, and a read-along view marks each word as it
// is heard. Voices are grouped by engine (the engine picker) and by language; Kokoro's
// voices also mix, through the blend field, and those it lists but cannot speak yet are
// shown and disabled. No dependencies and no build step, so the page works offline from the
// server binary alone. This file is the Speak tab; studio.js adds the tabs, OmniVoice's knobs,
// the Design and Code tabs and the blend builder, workshop.js the Clone, Profiles and Script
// tabs. The three are classic scripts: their top-level names are one scope, loaded in order.
'use strict';

// OpenAI's `pcm`: 24 kHz, signed 16-bit little-endian, mono. The server also names the rate
// in X-Audio-Sample-Rate; this is the fallback should a proxy drop that header.
const PCM_RATE = 24000;
// Buffers are scheduled this far ahead of "now" so none starts in the past and clicks.
const SCHEDULE_LEAD_S = 0.05;
const TICK_MS = 100;
// The engine whose voices blend (`af_bella(2)+af_sky(1)`), and blends offered as examples
// when the server has their voices: two American women, a man and a woman, two British women.
const BLENDING_ENGINE = 'kokoro';
// The engine whose knobs (steps, guidance, temperatures, …) the page offers.
const OMNIVOICE_ENGINE = 'omnivoice';
const BLEND_EXAMPLES = ['af_bella(2)+af_sky(1)', 'af_heart+af_nicole', 'am_michael(3)+af_heart(1)', 'bf_emma+bf_isabella'];

const $ = (id) => document.getElementById(id);
const ui = {
  form: $('speak-form'),
  apiKey: $('api-key'),
  reloadVoices: $('reload-voices'),
  engine: $('engine'),
  voice: $('voice'),
  speakerField: $('speaker-field'),
  speaker: $('speaker'),
  blendField: $('blend-field'),
  blend: $('blend'),
  blendExamples: $('blend-examples'),
  voiceNote: $('voice-note'),
  speakKnobs: $('speak-knobs'),
  text: $('text'),
  format: $('format'),
  speed: $('speed'),
  seed: $('seed'),
  highlight: $('highlight-words'),
  speak: $('speak'),
  stop: $('stop'),
  status: $('status'),
  error: $('error'),
  result: $('result-heading').parentElement,
  firstAudio: $('stat-first-audio'),
  duration: $('stat-duration'),
  cache: $('stat-cache'),
  bytes: $('stat-bytes'),
  transcript: $('transcript'),
  player: $('player'),
};

/** What the last request did; read by people through the page and by the browser test. */
const stats = {};
function resetStats(format) {
  Object.assign(stats, {
    format,
    // What the request asked for: the engine and the voice (or blend) sent.
    model: null,
    voice: null,
    bytes: 0,
    chunks: 0,
    samplesDecoded: 0,
    sampleRate: null,
    firstAudioMs: null,
    lastByteMs: null,
    durationS: null,
    xCache: null,
    playing: false,
    done: false,
    error: null,
    // With "Highlight words": how many words were timed, and the index of each word marked,
    // in the order they were marked.
    words: 0,
    highlighted: [],
    // The audio of a downloaded (not streamed) answer, as a Blob.
    audio: null,
  });
}
resetStats(null);

/**
 * Turns a byte stream of signed 16-bit little-endian samples into floats. Network chunks may
 * split a sample between them; the odd byte is kept and joined to the next chunk.
 */
class Pcm16Decoder {
  constructor() {
    this.pending = null;
  }

  /** Returns the complete samples in `bytes` (a Uint8Array), in -1..1. */
  push(bytes) {
    if (this.pending !== null) {
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = this.pending;
      joined.set(bytes, 1);
      bytes = joined;
      this.pending = null;
    }
    const whole = bytes.length - (bytes.length % 2);
    if (whole < bytes.length) this.pending = bytes[bytes.length - 1];
    const view = new DataView(bytes.buffer, bytes.byteOffset, whole);
    const samples = new Float32Array(whole / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
    return samples;
  }

  /** True when the stream ended in the middle of a sample. */
  get truncated() {
    return this.pending !== null;
  }
}

/** Plays decoded chunks back to back on one AudioContext, each as soon as it arrives. */
class StreamingPlayer {
  constructor(context, sampleRate) {
    this.context = context;
    this.sampleRate = sampleRate;
    this.sources = new Set();
    this.firstStart = null;
    this.nextStart = 0;
  }

  /** Schedules `samples` right after what is already queued; returns when they start (s). */
  enqueue(samples) {
    const buffer = this.context.createBuffer(1, samples.length, this.sampleRate);
    buffer.copyToChannel(samples, 0);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    // After an underrun "right after the queue" is in the past: start a little ahead instead.
    const start = Math.max(this.nextStart, this.context.currentTime + SCHEDULE_LEAD_S);
    source.start(start);
    source.onended = () => this.sources.delete(source);
    this.sources.add(source);
    this.nextStart = start + buffer.duration;
    if (this.firstStart === null) this.firstStart = start;
    return start;
  }

  get playing() {
    const now = this.context.currentTime;
    return this.context.state === 'running' && this.firstStart !== null
      && now >= this.firstStart && now < this.nextStart;
  }

  get finished() {
    return this.firstStart !== null && this.context.currentTime >= this.nextStart;
  }

  /** Seconds since the first sample started sounding (underrun gaps included). */
  get elapsed() {
    if (this.firstStart === null) return 0;
    return Math.max(0, Math.min(this.context.currentTime, this.nextStart) - this.firstStart);
  }

  stop() {
    for (const source of this.sources) source.stop();
    this.sources.clear();
    this.nextStart = this.context.currentTime;
  }
}

/**
 * The read-along view: the input as typed, each timed word in a span of its own, the word
 * being heard marked. Words are [{word, start, end, char_start, char_end}] as
 * /v1/audio/speech/timestamps answers them: seconds of audio, and offsets into the input in
 * code points (not the UTF-16 units of JavaScript strings).
 */
class WordHighlighter {
  constructor(container) {
    this.container = container;
    this.words = [];
    this.spans = [];
    this.current = -1;
  }

  show(input, words) {
    const chars = Array.from(input);
    const nodes = [];
    let at = 0;
    this.words = words;
    this.spans = words.map((word, index) => {
      if (word.char_start > at) nodes.push(document.createTextNode(chars.slice(at, word.char_start).join('')));
      const span = document.createElement('span');
      span.className = 'word';
      span.dataset.index = String(index);
      span.textContent = chars.slice(word.char_start, word.char_end).join('') || word.word;
      nodes.push(span);
      at = Math.max(at, word.char_end);
      return span;
    });
    if (at < chars.length) nodes.push(document.createTextNode(chars.slice(at).join('')));
    this.container.replaceChildren(...nodes);
    this.container.hidden = false;
    this.current = -1;
  }

  /** Marks the word heard at `seconds`: the last one begun, kept through the pause after it. */
  at(seconds) {
    let index = -1;
    while (index + 1 < this.words.length && this.words[index + 1].start <= seconds) index += 1;
    if (index === this.current) return;
    if (this.current >= 0) {
      this.spans[this.current].classList.remove('active');
      this.spans[this.current].removeAttribute('aria-current');
    }
    if (index >= 0) {
      this.spans[index].classList.add('active');
      this.spans[index].setAttribute('aria-current', 'true');
      stats.highlighted.push(index);
    }
    this.current = index;
  }

  /** Unmarks the word; the text stays for reading. */
  rest() {
    this.at(-1);
  }

  hide() {
    this.words = [];
    this.spans = [];
    this.current = -1;
    this.container.replaceChildren();
    this.container.hidden = true;
  }
}

const highlighter = new WordHighlighter(ui.transcript);

// Media types of the downloaded formats, for the <audio> element's blob.
const MEDIA_TYPES = { mp3: 'audio/mpeg', opus: 'audio/ogg', aac: 'audio/aac', flac: 'audio/flac', wav: 'audio/wav' };

// The API key lives in this variable only: never in storage, gone when the page closes.
let apiKey = '';
let voices = [];
let audioContext = null;
let current = null; // the request in flight: {controller, player}

function authHeaders() {
  return apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
}

function setStatus(text) {
  ui.status.textContent = text;
}

function showError(message) {
  stats.error = message;
  ui.error.textContent = message;
  ui.error.hidden = false;
}

function clearError() {
  ui.error.hidden = true;
  ui.error.textContent = '';
}

/** The message of an OpenAI-shaped error body, or the HTTP status when there is none. */
async function apiError(response) {
  let message = '';
  try {
    const body = await response.json();
    message = body && body.error && body.error.message ? String(body.error.message) : '';
  } catch (_) {
    // Not JSON (a proxy's error page, say): the status line is all there is to show.
  }
  const status = `${response.status} ${response.statusText}`.trim();
  const error = new Error(message ? `${message} (${status})` : `The server answered ${status}.`);
  error.status = response.status;
  return error;
}

function option(value, label) {
  const element = document.createElement('option');
  element.value = value;
  element.textContent = label;
  return element;
}

async function defaultEngine() {
  try {
    const response = await fetch('/health');
    if (response.ok) return (await response.json()).default_engine || null;
  } catch (_) {
    // Health is only a hint for the initial choice; any engine will do without it.
  }
  return null;
}

async function loadVoices() {
  setStatus('Loading voices…');
  clearError();
  ui.engine.disabled = ui.voice.disabled = true;
  try {
    const [response, preferred] = await Promise.all([
      fetch('/v1/audio/voices', { headers: authHeaders() }),
      defaultEngine(),
    ]);
    if (!response.ok) throw await apiError(response);
    const listing = await response.json();
    voices = listing.voices || [];
    // The Design, Clone and Profiles tabs and the knobs are built from the same answer.
    document.dispatchEvent(new CustomEvent('voices-loaded', { detail: listing }));
    const engines = [...new Set(voices.map((v) => v.engine))];
    ui.engine.replaceChildren(...engines.map((e) => {
      const count = voices.filter((v) => v.engine === e).length;
      return option(e, `${e} · ${count} voice${count === 1 ? '' : 's'}`);
    }));
    if (preferred && engines.includes(preferred)) ui.engine.value = preferred;
    fillVoices();
    ui.engine.disabled = ui.voice.disabled = engines.length === 0;
    setStatus(voices.length ? `${voices.length} voices loaded. Ready.` : 'The server has no voices.');
  } catch (e) {
    voices = [];
    ui.engine.replaceChildren(option('', 'unavailable'));
    ui.voice.replaceChildren(option('', 'unavailable'));
    ui.speakerField.hidden = true;
    setStatus('Could not load the voices.');
    const hint = e.status === 401 ? ' Enter the API key above, then press Reload voices.' : '';
    showError(e.message + hint);
  }
}

/** A voice's entry: its name, language and gender; one the server cannot speak is disabled. */
function voiceOption(v) {
  const traits = [v.language, v.gender].filter(Boolean).join(', ');
  const unsupported = v.supported === false;
  const element = option(v.id, `${v.name}${traits ? ` (${traits})` : ''}${unsupported ? ' · not supported yet' : ''}`);
  if (unsupported) {
    element.disabled = true;
    element.title = v.unsupported_reason || 'This server cannot speak this voice yet.';
  }
  return element;
}

/** The engine's voices, grouped by language in the order the server lists them. */
function fillVoices() {
  const list = voices.filter((v) => v.engine === ui.engine.value);
  const groups = new Map();
  for (const v of list) {
    const language = v.language || 'other';
    if (!groups.has(language)) groups.set(language, []);
    groups.get(language).push(v);
  }
  ui.voice.replaceChildren(...[...groups].map(([language, members]) => {
    const group = document.createElement('optgroup');
    const unsupported = members.every((v) => v.supported === false);
    group.label = unsupported ? `${language} · not supported yet` : language;
    group.replaceChildren(...members.map(voiceOption));
    return group;
  }));
  const first = list.find((v) => v.supported !== false);
  if (first) ui.voice.value = first.id;
  const blends = ui.engine.value === BLENDING_ENGINE;
  ui.blendField.hidden = !blends;
  ui.speakKnobs.hidden = ui.engine.value !== OMNIVOICE_ENGINE;
  document.dispatchEvent(new CustomEvent('engine-changed', { detail: { blends, voices: list } }));
  if (!blends) ui.blend.value = '';
  const known = new Set(list.map((v) => v.id));
  const names = (blend) => blend.split(/[+-]/).map((term) => term.replace(/\(.*\)$/, ''));
  ui.blendExamples.replaceChildren(...(blends ? BLEND_EXAMPLES : [])
    .filter((blend) => names(blend).every((name) => known.has(name)))
    .map((blend) => option(blend, blend)));
  const unsupported = list.filter((v) => v.supported === false);
  ui.voiceNote.hidden = unsupported.length === 0;
  ui.voiceNote.textContent = unsupported.length === 0 ? '' : `${unsupported.length} of these voices are listed but not supported yet (${
    [...new Set(unsupported.map((v) => v.language))].join(', ')}): ${
    [...new Set(unsupported.map((v) => v.unsupported_reason).filter(Boolean))].join(' ')}`;
  fillSpeakers();
}

function selectedVoice() {
  return voices.find((v) => v.engine === ui.engine.value && v.id === ui.voice.value) || null;
}

function fillSpeakers() {
  const voice = selectedVoice();
  const speakers = voice && Array.isArray(voice.speakers) ? voice.speakers : [];
  ui.speakerField.hidden = speakers.length < 2;
  ui.speaker.replaceChildren(...speakers.map((s) => option(s, s)));
}

function context() {
  if (!audioContext) audioContext = new AudioContext();
  // Called from the click or key press, so the browser lets the context run.
  audioContext.resume();
  return audioContext;
}

function showStats() {
  ui.firstAudio.textContent = stats.firstAudioMs === null ? '–' : `${Math.round(stats.firstAudioMs)} ms`;
  ui.duration.textContent = stats.durationS === null ? '–' : `${stats.durationS.toFixed(2)} s${stats.done ? '' : ' so far'}`;
  ui.cache.textContent = stats.xCache || '–';
  ui.bytes.textContent = stats.bytes ? `${(stats.bytes / 1024).toFixed(1)} KiB` : '–';
}

function tick() {
  if (current && current.player) {
    stats.playing = current.player.playing;
    highlighter.at(current.player.elapsed);
    if (stats.done && current.player.finished) finish('Done.');
  } else if (current && !ui.player.paused) {
    // More often than the element's own timeupdate events.
    highlighter.at(ui.player.currentTime);
  }
  showStats();
}

function request() {
  const voice = selectedVoice();
  if (!voice) throw new Error('No voice is selected: load the voices first.');
  const input = ui.text.value;
  if (!input.trim()) throw new Error('Type some text to speak.');
  const speed = ui.speed.valueAsNumber;
  if (Number.isNaN(speed)) throw new Error('Speed must be a number between 0.25 and 4.');
  const speaker = ui.speakerField.hidden ? '' : ui.speaker.value;
  const blend = ui.blendField.hidden ? '' : ui.blend.value.trim();
  const body = {
    model: voice.engine,
    voice: blend || (speaker ? `${voice.id}:${speaker}` : voice.id),
    input,
    response_format: ui.format.value,
    speed,
    // Only PCM can be played while it arrives; other formats come as one body with its length.
    // Word timings are known only once all audio is, so with them nothing streams.
    stream: ui.format.value === 'pcm' && !ui.highlight.checked,
  };
  if (ui.seed.value.trim() !== '') {
    const seed = Number(ui.seed.value);
    if (!Number.isSafeInteger(seed) || seed < 0) throw new Error('Seed must be a whole number of 0 or more.');
    body.seed = seed;
  }
  if (!ui.speakKnobs.hidden) Object.assign(body, knobValues(ui.speakKnobs));
  return body;
}

async function speak() {
  stopPlayback();
  clearError();
  let body;
  try {
    body = request();
  } catch (e) {
    showError(e.message);
    return;
  }
  resetStats(body.response_format);
  rememberRequest('speak', { path: ui.highlight.checked ? '/v1/audio/speech/timestamps' : '/v1/audio/speech', json: body });
  stats.model = body.model;
  stats.voice = body.voice;
  highlighter.hide();
  const timed = ui.highlight.checked;
  const started = performance.now();
  const controller = new AbortController();
  // Made now, while the click or key press still lets audio start.
  const ctx = body.response_format === 'pcm' ? context() : null;
  current = { controller, player: null };
  ui.stop.disabled = false;
  ui.result.setAttribute('aria-busy', 'true');
  setStatus('Synthesizing…');
  try {
    const response = await fetch(timed ? '/v1/audio/speech/timestamps' : '/v1/audio/speech', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...authHeaders() },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) throw await apiError(response);
    stats.xCache = response.headers.get('X-Cache');
    showStats();
    if (timed) {
      await playTimed(await response.json(), body.input, ctx, started);
    } else if (body.stream) {
      await playStream(response, ctx, started);
    } else {
      const header = Number(response.headers.get('X-Audio-Duration-S'));
      await playWhole(await response.blob(), header > 0 ? header : null, started);
    }
  } catch (e) {
    if (e.name === 'AbortError') return;
    showError(e.message);
    finish('Request failed.');
  }
}

async function playStream(response, ctx, started) {
  const rate = Number(response.headers.get('X-Audio-Sample-Rate')) || PCM_RATE;
  stats.sampleRate = rate;
  const decoder = new Pcm16Decoder();
  const player = new StreamingPlayer(ctx, rate);
  current.player = player;
  const reader = response.body.getReader();
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new Error(`The audio stream broke off: ${e.message}`);
    }
    if (chunk.done) break;
    stats.bytes += chunk.value.length;
    stats.chunks += 1;
    const samples = decoder.push(chunk.value);
    if (samples.length === 0) continue;
    const start = player.enqueue(samples);
    if (stats.firstAudioMs === null) {
      // When the first sample will sound, not merely when it arrived.
      const wait = Math.max(0, start - ctx.currentTime) * 1000;
      stats.firstAudioMs = performance.now() - started + wait;
      setStatus('Playing…');
    }
    stats.samplesDecoded += samples.length;
    stats.durationS = stats.samplesDecoded / rate;
    showStats();
  }
  stats.lastByteMs = performance.now() - started;
  stats.done = true;
  if (decoder.truncated) showError('The stream ended in the middle of a sample; the last byte was dropped.');
  if (stats.samplesDecoded === 0) finish('The server sent no audio.');
}

/** Plays the answer of /v1/audio/speech/timestamps with its words in the read-along view. */
async function playTimed(answer, input, ctx, started) {
  const bytes = Uint8Array.from(atob(answer.audio), (c) => c.charCodeAt(0));
  stats.lastByteMs = performance.now() - started;
  stats.words = answer.words.length;
  highlighter.show(input, answer.words);
  if (answer.format !== 'pcm') {
    const blob = new Blob([bytes], { type: MEDIA_TYPES[answer.format] || '' });
    await playWhole(blob, answer.duration_s, started);
    return;
  }
  stats.bytes = bytes.length;
  stats.chunks = 1;
  stats.sampleRate = answer.sample_rate;
  const decoder = new Pcm16Decoder();
  const samples = decoder.push(bytes);
  const player = new StreamingPlayer(ctx, answer.sample_rate);
  current.player = player;
  const start = player.enqueue(samples);
  stats.firstAudioMs = performance.now() - started + Math.max(0, start - ctx.currentTime) * 1000;
  stats.samplesDecoded = samples.length;
  stats.durationS = samples.length / answer.sample_rate;
  stats.done = true;
  setStatus('Playing…');
  showStats();
}

async function playWhole(blob, durationS, started) {
  stats.bytes = blob.size;
  // What was played, for the Code tab's promise that its request gives the same bytes.
  stats.audio = blob;
  stats.durationS = durationS;
  if (ui.player.src) URL.revokeObjectURL(ui.player.src);
  ui.player.src = URL.createObjectURL(blob);
  ui.player.hidden = false;
  ui.player.onplaying = () => {
    if (stats.firstAudioMs === null) stats.firstAudioMs = performance.now() - started;
    stats.playing = true;
    setStatus('Playing…');
    showStats();
  };
  ui.player.onended = () => finish('Done.');
  ui.player.ontimeupdate = () => highlighter.at(ui.player.currentTime);
  ui.player.onloadedmetadata = () => {
    if (stats.durationS === null && Number.isFinite(ui.player.duration)) stats.durationS = ui.player.duration;
    showStats();
  };
  stats.done = true;
  showStats();
  try {
    await ui.player.play();
  } catch (e) {
    throw new Error(`The browser cannot play ${stats.format} here (${e.message}). Try pcm or wav.`);
  }
}

function finish(message) {
  stats.playing = false;
  highlighter.rest();
  ui.stop.disabled = true;
  ui.result.removeAttribute('aria-busy');
  if (current) current.player = null;
  current = null;
  setStatus(message);
  showStats();
}

function stopPlayback() {
  if (current) {
    current.controller.abort();
    if (current.player) current.player.stop();
  }
  if (!ui.player.paused) ui.player.pause();
}

ui.form.addEventListener('submit', (event) => {
  event.preventDefault();
  speak();
});
ui.text.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    ui.form.requestSubmit();
  }
});
ui.apiKey.addEventListener('keydown', (event) => {
  // Enter in the key field means "use this key", not "speak".
  if (event.key === 'Enter') {
    event.preventDefault();
    apiKey = ui.apiKey.value.trim();
    loadVoices();
  }
});
ui.apiKey.addEventListener('change', () => {
  apiKey = ui.apiKey.value.trim();
});
ui.reloadVoices.addEventListener('click', () => {
  apiKey = ui.apiKey.value.trim();
  loadVoices();
});
ui.engine.addEventListener('change', fillVoices);
ui.voice.addEventListener('change', fillSpeakers);
ui.stop.addEventListener('click', () => {
  stopPlayback();
  finish('Stopped.');
});
document.addEventListener('keydown', (event) => {
  if (event.key === 'Escape' && current) {
    stopPlayback();
    finish('Stopped.');
  }
});

window.playground = { stats, Pcm16Decoder, wordHighlighter: highlighter };
setInterval(tick, TICK_MS);
loadVoices();

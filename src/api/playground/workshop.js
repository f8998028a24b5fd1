// The studio's Clone, Profiles and Script tabs, on the helpers of studio.js: a clip uploaded
// or recorded in the browser (MediaRecorder, re-encoded here as WAV, which the server reads),
// spoken with and saved as a profile; the profiles listed, played, changed and deleted; and a
// script of several speakers, each of any engine and voice, played or downloaded.
'use strict';

// Profile ids, as the server checks them.
const PROFILE_ID = /^[A-Za-z0-9_-]{1,64}$/;

// ---- WAV ----

/** 16-bit mono PCM WAV of `samples` (floats in -1..1) at `rate`. */
function encodeWav(samples, rate) {
  const bytes = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const text = (at, s) => [...s].forEach((c, i) => bytes.setUint8(at + i, c.charCodeAt(0)));
  text(0, 'RIFF');
  bytes.setUint32(4, 36 + samples.length * 2, true);
  text(8, 'WAVE');
  text(12, 'fmt ');
  bytes.setUint32(16, 16, true);
  bytes.setUint16(20, 1, true);
  bytes.setUint16(22, 1, true);
  bytes.setUint32(24, rate, true);
  bytes.setUint32(28, rate * 2, true);
  bytes.setUint16(32, 2, true);
  bytes.setUint16(34, 16, true);
  text(36, 'data');
  bytes.setUint32(40, samples.length * 2, true);
  samples.forEach((s, i) => bytes.setInt16(44 + i * 2, Math.max(-1, Math.min(1, s)) * 32767, true));
  return new Blob([bytes.buffer], { type: 'audio/wav' });
}

/** A recording (WebM or Ogg Opus, as browsers record) as a WAV clip, channels averaged. */
async function recordingAsWav(blob) {
  const decoded = await context().decodeAudioData(await blob.arrayBuffer());
  const mono = new Float32Array(decoded.length);
  for (let c = 0; c < decoded.numberOfChannels; c++) {
    decoded.getChannelData(c).forEach((s, i) => { mono[i] += s / decoded.numberOfChannels; });
  }
  const wav = encodeWav(mono, decoded.sampleRate);
  wav.name = 'recording.wav';
  return wav;
}

// ---- Clone ----

const clone = {
  form: $('clone-form'),
  file: $('clone-file'),
  record: $('clone-record'),
  recordStop: $('clone-record-stop'),
  preview: $('clone-preview'),
  refText: $('clone-ref-text'),
  input: $('clone-input'),
  knobs: $('clone-form').querySelector('.knobs'),
  profileId: $('clone-profile-id'),
  save: $('clone-save'),
  // The clip to send: the file chosen, or the last recording.
  clip: null,
  recorder: null,
};

function setClip(blob) {
  clone.clip = blob;
  if (clone.preview.src) URL.revokeObjectURL(clone.preview.src);
  clone.preview.src = URL.createObjectURL(blob);
  clone.preview.hidden = false;
}

clone.file.addEventListener('change', () => {
  if (clone.file.files.length) setClip(clone.file.files[0]);
});

clone.record.addEventListener('click', async () => {
  try {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    const chunks = [];
    clone.recorder = new MediaRecorder(stream);
    clone.recorder.ondataavailable = (event) => chunks.push(event.data);
    clone.recorder.onstop = async () => {
      for (const track of stream.getTracks()) track.stop();
      try {
        setClip(await recordingAsWav(new Blob(chunks, { type: clone.recorder.mimeType })));
        tabStatus('clone', 'Recorded. Type what you said as the transcript.');
      } catch (e) {
        tabStatus('clone', `The recording could not be read: ${e.message}`);
      }
    };
    clone.recorder.start();
    clone.record.disabled = true;
    clone.recordStop.disabled = false;
    tabStatus('clone', 'Recording… press Stop recording when done.');
  } catch (e) {
    tabStatus('clone', `The browser would not record (${e.message}). Upload a clip instead.`);
  }
});

clone.recordStop.addEventListener('click', () => {
  if (clone.recorder && clone.recorder.state === 'recording') clone.recorder.stop();
  clone.record.disabled = false;
  clone.recordStop.disabled = true;
});

/** The one-shot cloning form, as the Python server's route takes it. */
function cloneRequest() {
  if (!clone.clip) throw new Error('Upload or record a clip first.');
  const input = clone.input.value;
  if (!input.trim()) throw new Error('Type some text to speak.');
  const form = [['text', input], ['ref_audio', clone.clip]];
  if (clone.refText.value.trim()) form.push(['ref_text', clone.refText.value.trim()]);
  form.push(['response_format', 'wav']);
  for (const [name, value] of Object.entries(knobValues(clone.knobs))) form.push([name, String(value)]);
  return { path: '/v1/audio/speech/clone', form };
}

clone.form.addEventListener('submit', async (event) => {
  event.preventDefault();
  let request;
  try {
    request = cloneRequest();
  } catch (e) {
    tabStatus('clone', e.message);
    return;
  }
  try {
    const response = await send('clone', request);
    await playIn('clone', await response.blob());
  } catch (_) {
    // send() has shown the server's message.
  }
});

clone.save.addEventListener('click', async () => {
  const id = clone.profileId.value.trim();
  if (!PROFILE_ID.test(id)) {
    tabStatus('clone', 'A profile id is 1 to 64 letters, digits, - or _.');
    return;
  }
  if (!clone.clip) {
    tabStatus('clone', 'Upload or record a clip first.');
    return;
  }
  const form = [['profile_id', id], ['ref_audio', clone.clip]];
  if (clone.refText.value.trim()) form.push(['ref_text', clone.refText.value.trim()]);
  try {
    const response = await send('clone', { path: '/v1/voices/profiles', form }, { remember: false });
    const saved = await response.json();
    panel('clone').querySelector('.tab-status').textContent = `Saved as profile ${saved.profile_id}: speak with voice clone:${saved.profile_id}.`;
    loadProfiles();
  } catch (e) {
    tabStatus('clone', e.message);
  }
});

// ---- Profiles ----

const profileList = $('profile-list');
studio.profiles = [];

/** Lists the profiles; `done`, when given, is what the tab says after (an action's outcome). */
async function loadProfiles(done) {
  if (!omnivoiceServed()) return;
  try {
    const response = await fetch('/v1/voices', { headers: authHeaders() });
    if (!response.ok) throw await apiError(response);
    studio.profiles = (await response.json()).voices.filter((v) => v.type === 'clone');
    profileList.replaceChildren(...studio.profiles.map(profileCard));
    const count = studio.profiles.length ? `${studio.profiles.length} profiles.` : 'No profiles yet: save one from the Clone tab.';
    tabStatus('profiles', typeof done === 'string' ? done : count);
    fillScriptVoices();
  } catch (e) {
    tabStatus('profiles', e.message);
  }
}

function button(text, label, onClick, secondary = true) {
  const element = document.createElement('button');
  element.type = 'button';
  element.textContent = text;
  if (secondary) element.className = 'secondary';
  element.setAttribute('aria-label', label);
  element.addEventListener('click', onClick);
  return element;
}

/** One profile: its name and transcript, its clip, and what can be done with it. */
function profileCard(profile) {
  const id = profile.profile_id;
  const card = document.createElement('li');
  card.className = 'card';
  card.dataset.profile = id;
  const title = document.createElement('h3');
  title.textContent = profile.name === id ? id : `${profile.name} (${id})`;
  const transcriptId = `profile-${id}-ref-text`;
  const transcriptLabel = document.createElement('label');
  transcriptLabel.htmlFor = transcriptId;
  transcriptLabel.textContent = 'Transcript';
  const transcript = document.createElement('input');
  Object.assign(transcript, { id: transcriptId, type: 'text', value: profile.ref_text || '' });
  const clipId = `profile-${id}-clip`;
  const clipLabel = document.createElement('label');
  clipLabel.htmlFor = clipId;
  clipLabel.textContent = 'New clip (optional)';
  const clip = document.createElement('input');
  Object.assign(clip, { id: clipId, type: 'file', accept: 'audio/*' });
  const speakText = document.createElement('input');
  Object.assign(speakText, { type: 'text', value: 'Hello! This is my saved voice.' });
  speakText.setAttribute('aria-label', `Text to speak as ${id}`);
  const actions = document.createElement('div');
  actions.className = 'row';
  actions.append(
    button('Play the reference', `Play the reference of ${id}`, () => playReference(id)),
    button('Speak', `Speak as ${id}`, () => speakAsProfile(id, speakText.value), false),
    button('Save changes', `Save changes to ${id}`, () => changeProfile(id, transcript.value, clip.files[0])),
    button('Delete', `Delete ${id}`, () => deleteProfile(id)),
  );
  const fields = document.createElement('div');
  fields.className = 'grid';
  const wrap = (...children) => {
    const field = document.createElement('div');
    field.className = 'field';
    field.append(...children);
    return field;
  };
  fields.append(wrap(transcriptLabel, transcript), wrap(clipLabel, clip));
  card.append(title, fields, speakText, actions);
  return card;
}

async function playReference(id) {
  try {
    const response = await send('profiles', { method: 'GET', path: `/v1/voices/profiles/${id}/audio` }, { remember: false });
    await playIn('profiles', await response.blob());
  } catch (_) {
    // send() has shown the server's message.
  }
}

async function speakAsProfile(id, input) {
  const json = { model: OMNIVOICE_ENGINE, voice: `clone:${id}`, input, response_format: 'wav' };
  try {
    const response = await send('profiles', { path: '/v1/audio/speech', json });
    await playIn('profiles', await response.blob());
  } catch (_) {
    // send() has shown the server's message.
  }
}

/** A new transcript alone goes urlencoded (as the Python SDK sends it); a clip, multipart. */
async function changeProfile(id, refText, file) {
  const path = `/v1/voices/profiles/${id}`;
  const init = { method: 'PATCH', headers: authHeaders() };
  if (file) {
    const form = new FormData();
    form.append('ref_audio', file, file.name);
    form.append('ref_text', refText);
    init.body = form;
  } else {
    init.body = new URLSearchParams({ ref_text: refText });
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    tabStatus('profiles', (await apiError(response)).message);
    return;
  }
  loadProfiles(`Saved ${id}.`);
}

async function deleteProfile(id) {
  if (!confirm(`Delete the profile ${id}?`)) return;
  const response = await fetch(`/v1/voices/profiles/${id}`, { method: 'DELETE', headers: authHeaders() });
  if (!response.ok) {
    tabStatus('profiles', (await apiError(response)).message);
    return;
  }
  loadProfiles(`Deleted ${id}.`);
}

$('profiles-reload').addEventListener('click', loadProfiles);

// ---- Script ----

const script = {
  form: $('script-form'),
  speakers: $('script-speakers'),
  lines: $('script-lines'),
  output: $('script-output'),
  pause: $('script-pause'),
  tracks: $('script-tracks'),
};
let rowCount = 0;

/** The voices a speaker may have: every engine's, the profiles, or a design (OmniVoice). */
function scriptVoiceOptions() {
  const groups = new Map();
  for (const v of voices.filter((voice) => voice.supported !== false)) {
    if (!groups.has(v.engine)) groups.set(v.engine, []);
    groups.get(v.engine).push(option(`${v.engine}/${v.id}`, v.id));
  }
  if (omnivoiceServed()) {
    const omni = groups.get(OMNIVOICE_ENGINE) || [];
    omni.push(...studio.profiles.map((p) => option(`${OMNIVOICE_ENGINE}/clone:${p.profile_id}`, `profile ${p.profile_id}`)));
    omni.push(option('design', 'a design (type it beside)'));
    groups.set(OMNIVOICE_ENGINE, omni);
  }
  return [...groups].map(([engine, options]) => {
    const group = document.createElement('optgroup');
    group.label = engine;
    group.replaceChildren(...options);
    return group;
  });
}

function speakerRow(name, voice) {
  rowCount += 1;
  const row = document.createElement('div');
  row.className = 'row script-speaker';
  const id = document.createElement('input');
  Object.assign(id, { type: 'text', value: name, pattern: '[A-Za-z0-9_-]{1,64}' });
  id.setAttribute('aria-label', `Speaker ${rowCount} name`);
  id.className = 'speaker-name';
  const select = document.createElement('select');
  select.className = 'speaker-voice';
  select.setAttribute('aria-label', `Speaker ${rowCount} voice`);
  select.replaceChildren(...scriptVoiceOptions());
  if (voice) select.value = voice;
  const designText = document.createElement('input');
  Object.assign(designText, { type: 'text', placeholder: 'female, low pitch', className: 'speaker-design' });
  designText.setAttribute('aria-label', `Speaker ${rowCount} design`);
  designText.hidden = select.value !== 'design';
  select.addEventListener('change', () => { designText.hidden = select.value !== 'design'; });
  id.addEventListener('input', fillLineSpeakers);
  row.append(id, select, designText, button('Remove', `Remove speaker ${rowCount}`, () => { row.remove(); fillLineSpeakers(); }));
  script.speakers.append(row);
  fillLineSpeakers();
}

function speakerNames() {
  return [...script.speakers.querySelectorAll('.speaker-name')].map((i) => i.value.trim()).filter(Boolean);
}

function lineRow(speaker, text) {
  rowCount += 1;
  const row = document.createElement('div');
  row.className = 'row script-line';
  const select = document.createElement('select');
  select.className = 'line-speaker';
  select.setAttribute('aria-label', `Line ${rowCount} speaker`);
  const input = document.createElement('input');
  Object.assign(input, { type: 'text', value: text, className: 'line-text' });
  input.setAttribute('aria-label', `Line ${rowCount} text`);
  row.append(select, input, button('Remove', `Remove line ${rowCount}`, () => row.remove()));
  script.lines.append(row);
  fillLineSpeakers();
  if (speaker) select.value = speaker;
}

/** Every line's speaker picker lists the speakers as named now. */
function fillLineSpeakers() {
  const names = speakerNames();
  for (const select of script.lines.querySelectorAll('.line-speaker')) {
    const chosen = select.value;
    select.replaceChildren(...names.map((n) => option(n, n)));
    if (names.includes(chosen)) select.value = chosen;
  }
}

/** Refreshes the voice pickers (voices or profiles changed), keeping each choice. */
function fillScriptVoices() {
  for (const select of script.speakers.querySelectorAll('.speaker-voice')) {
    const chosen = select.value;
    select.replaceChildren(...scriptVoiceOptions());
    if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
  }
}

function scriptRequest() {
  const voiceOf = new Map([...script.speakers.querySelectorAll('.script-speaker')].map((row) => {
    const select = row.querySelector('.speaker-voice');
    const design = row.querySelector('.speaker-design').value.trim();
    const voice = select.value === 'design' ? `${OMNIVOICE_ENGINE}/design:${design}` : select.value;
    return [row.querySelector('.speaker-name').value.trim(), voice];
  }));
  const lines = [...script.lines.querySelectorAll('.script-line')].map((row) => ({
    speaker: row.querySelector('.line-speaker').value,
    text: row.querySelector('.line-text').value,
  })).filter((line) => line.text.trim());
  if (!lines.length) throw new Error('Write at least one line.');
  const seen = new Set();
  const segments = lines.map((line) => {
    const segment = { speaker: line.speaker, text: line.text };
    // A speaker's voice is read from their first line.
    if (!seen.has(line.speaker) && voiceOf.get(line.speaker)) segment.voice = voiceOf.get(line.speaker);
    seen.add(line.speaker);
    return segment;
  });
  const pause = Number(script.pause.value);
  const json = { script: segments, response_format: 'wav', output_format: script.output.value };
  if (Number.isFinite(pause)) json.pause_between_speakers = pause;
  return { path: '/v1/audio/script', json };
}

function downloadLink(blob, name) {
  const link = document.createElement('a');
  link.href = URL.createObjectURL(blob);
  link.download = name;
  link.textContent = `Download ${name}`;
  return link;
}

function wavOfBase64(b64) {
  return new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], { type: 'audio/wav' });
}

script.form.addEventListener('submit', async (event) => {
  event.preventDefault();
  let request;
  try {
    request = scriptRequest();
  } catch (e) {
    tabStatus('script', e.message);
    return;
  }
  script.tracks.replaceChildren();
  try {
    const response = await send('script', request);
    if (request.json.output_format === 'multi_track') {
      const answer = await response.json();
      studio.results.script.json = answer;
      script.tracks.replaceChildren(...Object.entries(answer.tracks).map(([speaker, b64]) => {
        const figure = document.createElement('figure');
        const caption = document.createElement('figcaption');
        caption.textContent = speaker;
        const audio = document.createElement('audio');
        audio.controls = true;
        const blob = wavOfBase64(b64);
        audio.src = URL.createObjectURL(blob);
        figure.append(caption, audio, downloadLink(blob, `${speaker}.wav`));
        return figure;
      }));
      await playIn('script', wavOfBase64(Object.values(answer.tracks)[0]));
    } else {
      const blob = await response.blob();
      script.tracks.replaceChildren(downloadLink(blob, 'script.wav'));
      await playIn('script', blob);
    }
  } catch (_) {
    // send() has shown the server's message.
  }
});

$('script-add-speaker').addEventListener('click', () => speakerRow(`speaker${script.speakers.children.length + 1}`));
$('script-add-line').addEventListener('click', () => lineRow(speakerNames()[0] || '', ''));

/** Called by studio.js once the voices are known: a starting script of two speakers. */
function onVoicesLoaded() {
  if (!script.speakers.children.length && voices.length) {
    const first = voices.find((v) => v.supported !== false);
    const second = voices.filter((v) => v.supported !== false && v.engine === first.engine)[1] || first;
    speakerRow('host', `${first.engine}/${first.id}`);
    speakerRow('guest', `${second.engine}/${second.id}`);
    lineRow('host', 'Welcome to the show.');
    lineRow('guest', 'Thanks for having me.');
  } else {
    fillScriptVoices();
  }
  if (omnivoiceServed()) loadProfiles();
}

//! One deterministic fake engine for the tests that need predictable timing or observable
//! loads (the real engines are exercised everywhere else).
//!
//! Its voices sleep `compute` per batch ("SLOW" in a text: `slow` instead), panic on "PANIC",
//! hand "LATE" items over a second after the earlier ones, hum a 60 Hz drone for 1.5 s on
//! "DRONE" (what no real engine can be made to do on demand), and record every batch's texts. The
//! engine counts loads and keeps a weak reference to every voice it handed out, so a test can
//! see when the last user of a voice is gone. Armed with [`FakeEngine::panic_on_next_listing`],
//! its next voice listing panics: a fault inside a request handler (`GET /v1/audio/voices`
//! lists voices on the handler's own task), where a voice's panic happens on a worker thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use omnivoice_server::engine::{Engine, EngineError, Pcm, SynthesisItem, Voice, VoiceInfo};

/// Samples per utterance: 0.1 s at the fake rate.
pub const FAKE_SAMPLES: usize = 2205;
pub const FAKE_RATE: u32 = 22050;

/// How the fake voices behave.
#[derive(Clone, Copy)]
struct Timing {
    compute: Duration,
    slow: Duration,
    load_delay: Duration,
}

pub struct FakeEngine {
    id: String,
    voices: Vec<String>,
    timing: Timing,
    loads: AtomicUsize,
    handed_out: Mutex<BTreeMap<String, Weak<FakeVoice>>>,
    batches: Arc<Mutex<Vec<Vec<String>>>>,
    panic_on_listing: AtomicBool,
}

impl FakeEngine {
    /// An engine `id` offering `voices`; instant unless configured otherwise.
    pub fn new(id: &str, voices: &[&str]) -> Self {
        Self {
            id: id.to_string(),
            voices: voices.iter().map(|v| v.to_string()).collect(),
            timing: Timing {
                compute: Duration::ZERO,
                slow: Duration::from_millis(1500),
                load_delay: Duration::ZERO,
            },
            loads: AtomicUsize::new(0),
            handed_out: Mutex::default(),
            batches: Arc::default(),
            panic_on_listing: AtomicBool::new(false),
        }
    }

    /// Time per batch.
    pub fn compute_ms(mut self, ms: u64) -> Self {
        self.timing.compute = Duration::from_millis(ms);
        self
    }

    /// Time per batch containing "SLOW".
    pub fn slow_ms(mut self, ms: u64) -> Self {
        self.timing.slow = Duration::from_millis(ms);
        self
    }

    /// Time to load a voice.
    pub fn load_delay_ms(mut self, ms: u64) -> Self {
        self.timing.load_delay = Duration::from_millis(ms);
        self
    }

    pub fn shared(self) -> Arc<Self> {
        Arc::new(self)
    }

    /// How many voices were loaded so far.
    pub fn loads(&self) -> usize {
        self.loads.load(Ordering::SeqCst)
    }

    /// Whether anyone (registry or request) still holds the voice.
    pub fn alive(&self, voice: &str) -> bool {
        self.handed_out
            .lock()
            .unwrap()
            .get(voice)
            .is_some_and(|w| w.strong_count() > 0)
    }

    /// Makes the next call of `voices()` panic (once: the listing after it works again).
    pub fn panic_on_next_listing(&self) {
        self.panic_on_listing.store(true, Ordering::SeqCst);
    }

    /// The texts of every batch computed so far, in order.
    pub fn batches(&self) -> Vec<Vec<String>> {
        self.batches.lock().unwrap().clone()
    }

    fn info(&self, voice: &str) -> VoiceInfo {
        VoiceInfo {
            id: voice.to_string(),
            engine: self.id.clone(),
            language: "en".into(),
            sample_rate: FAKE_RATE,
            speakers: vec![],
            gender: None,
            unsupported: None,
            design: None,
        }
    }
}

impl Engine for FakeEngine {
    fn id(&self) -> &str {
        &self.id
    }

    fn voices(&self) -> Vec<VoiceInfo> {
        if self.panic_on_listing.swap(false, Ordering::SeqCst) {
            panic!("fake engine asked to panic while listing its voices");
        }
        self.voices.iter().map(|v| self.info(v)).collect()
    }

    fn load_voice(&self, voice: &str) -> Result<Arc<dyn Voice>, EngineError> {
        if !self.voices.iter().any(|v| v == voice) {
            return Err(EngineError::UnknownVoice(voice.into()));
        }
        std::thread::sleep(self.timing.load_delay);
        self.loads.fetch_add(1, Ordering::SeqCst);
        let loaded = Arc::new(FakeVoice {
            info: self.info(voice),
            timing: self.timing,
            batches: self.batches.clone(),
        });
        self.handed_out
            .lock()
            .unwrap()
            .insert(voice.into(), Arc::downgrade(&loaded));
        Ok(loaded)
    }
}

pub struct FakeVoice {
    info: VoiceInfo,
    timing: Timing,
    batches: Arc<Mutex<Vec<Vec<String>>>>,
}

/// Whether `batch` is the server's warm-up at start ([`omnivoice_server::speech::WARM_UP_TEXT`]),
/// not a request: test engines answer it at once and leave it out of what they record.
pub fn is_warm_up(batch: &[SynthesisItem]) -> bool {
    batch
        .iter()
        .all(|item| item.text == omnivoice_server::speech::WARM_UP_TEXT)
}

fn utterance() -> Pcm {
    Pcm::new(vec![0.25; FAKE_SAMPLES], FAKE_RATE)
}

fn drone() -> Pcm {
    let samples = (0..FAKE_RATE as usize * 3 / 2)
        .map(|i| 0.3 * (std::f32::consts::TAU * 60.0 * i as f32 / FAKE_RATE as f32).sin())
        .collect();
    Pcm::new(samples, FAKE_RATE)
}

impl Voice for FakeVoice {
    fn info(&self) -> &VoiceInfo {
        &self.info
    }

    /// One sleep per batch, whatever its size: a padded pass.
    fn computes_batches_at_once(&self) -> bool {
        true
    }

    fn synthesize_each(
        &self,
        batch: &[SynthesisItem],
        done: &mut dyn FnMut(usize, Pcm),
    ) -> Result<(), EngineError> {
        let texts: Vec<String> = batch.iter().map(|i| i.text.clone()).collect();
        if texts
            .iter()
            .all(|t| t == omnivoice_server::speech::WARM_UP_TEXT)
        {
            // The server's warm-up at start, not a request: answered at once, not recorded.
            (0..texts.len()).for_each(|index| done(index, utterance()));
            return Ok(());
        }
        self.batches.lock().unwrap().push(texts.clone());
        if texts.iter().any(|t| t.contains("PANIC")) {
            panic!("fake engine asked to panic");
        }
        if texts.iter().any(|t| t.contains("LATE")) {
            for (index, text) in texts.iter().enumerate() {
                if text.contains("LATE") {
                    std::thread::sleep(Duration::from_millis(1000));
                }
                done(index, utterance());
            }
            return Ok(());
        }
        let slow = texts.iter().any(|t| t.contains("SLOW"));
        std::thread::sleep(if slow {
            self.timing.slow
        } else {
            self.timing.compute
        });
        for (index, text) in texts.iter().enumerate() {
            done(
                index,
                if text.contains("DRONE") {
                    drone()
                } else {
                    utterance()
                },
            );
        }
        Ok(())
    }
}

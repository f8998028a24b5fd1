//! The cache of finished audio, in front of the batcher: in memory, and optionally in Redis.
//!
//! Agents and chat apps repeat phrases; answering a repeat from memory costs microseconds
//! instead of a forward pass. Entries are the final encoded bytes, keyed on everything that
//! changes them (see [`CacheKey`]), bounded by bytes (moka's weigher) and by age (TTL).
//! Identical requests that arrive while the first is still being synthesized wait for it
//! instead of synthesizing again (single flight); a failure is handed to every waiter and
//! never stored. The cache does not know what a failure is: it is generic over the caller's
//! error type and only adds its own outcome, [`FlightError::Abandoned`].
//!
//! With `--redis-url`, a miss in memory asks Redis next (see [`redis`]), which the replicas of
//! a deployment share: lookups go memory, Redis, synthesis, and a Redis hit fills memory.
//!
//! An entry's age is judged on Tokio's clock when it is read, so that tests can drive the TTL
//! with paused time; moka's own TTL, of the same length on the wall clock, reclaims the bytes
//! of entries nobody reads again.

mod breaker;
mod envelope;
mod redis;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared, WeakShared};
use moka::notification::RemovalCause;
use moka::ops::compute::{CompResult, Op};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;
use tokio::time::Instant;

use self::redis::{Claim, Lookup, SharedCache, SharedStats, Waited};
use crate::config::CacheSettings;
use crate::metrics as m;
use crate::params::SynthesisParams;

/// A finished response body and what a front door says about it.
#[derive(Debug, Clone)]
pub struct CachedAudio {
    pub bytes: Bytes,
    pub sample_rate: u32,
    pub duration_s: f64,
    /// It sounded like no speech (a drone, not a voice); see `audio::speech_like`.
    pub no_speech: bool,
}

/// Why a single flight produced no audio.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FlightError<E> {
    /// The request producing the audio went away before finishing; a waiter may lead instead.
    #[error("the identical request this one waited for was abandoned")]
    Abandoned,
    /// Synthesis failed; every waiter gets the same error.
    #[error(transparent)]
    Failed(E),
}

/// Everything that changes the bytes of a response. Hashed, never stored.
#[derive(Debug, Serialize)]
pub struct CacheKey<'a> {
    pub engine: &'a str,
    pub voice: &'a str,
    pub voice_fingerprint: &'a str,
    /// The language the voice reads in when it is not its own (a request's `language` for a
    /// voice named outright); empty otherwise.
    pub reads_in: &'a str,
    /// The other voices that read parts of the input (SSML `<lang>`, detected languages),
    /// with their fingerprints; empty when the job's voice reads it all.
    pub other_voices: &'a str,
    pub input: &'a str,
    pub response_format: &'a str,
    pub sample_rate: u32,
    /// Every synthesis knob, so a new one can never be forgotten here.
    pub params: &'a SynthesisParams,
    /// How the text was written out before phonemizing (`verbatim`, or the date order).
    pub reading: &'a str,
    /// A digest of the pronunciation dictionary's entries that the input uses (empty when it
    /// uses none): a changed entry makes the audio it affects, and only that, miss.
    pub lexicon: &'a str,
    /// `stream` where a streamed response is other audio than the whole body (an OmniVoice
    /// text streamed piece by piece); empty, and then left out of the hash, elsewhere.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub delivery: &'a str,
    pub server_version: &'a str,
}

pub type KeyHash = [u8; 32];

impl CacheKey<'_> {
    pub fn hash(&self) -> KeyHash {
        let canonical = serde_json::to_vec(self).expect("cache keys serialize");
        Sha256::digest(&canonical).into()
    }
}

/// Where a cached answer came from, for the `X-Cache-Layer` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheLayer {
    Memory,
    Redis,
}

impl CacheLayer {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheLayer::Memory => "memory",
            CacheLayer::Redis => "redis",
        }
    }
}

/// How a response was produced: `status` for `X-Cache`; `layer` names the cache the bytes
/// came from, and is `None` when they were synthesized for this request or its twins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheOutcome {
    pub status: CacheStatus,
    pub layer: Option<CacheLayer>,
}

impl CacheOutcome {
    fn new(status: CacheStatus, layer: Option<CacheLayer>) -> Self {
        Self { status, layer }
    }
}

/// How a response was produced, for the `X-Cache` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    Hit,
    Miss,
    Coalesced,
    Bypass,
}

impl CacheStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Hit => "HIT",
            CacheStatus::Miss => "MISS",
            CacheStatus::Coalesced => "COALESCED",
            CacheStatus::Bypass => "BYPASS",
        }
    }
}

/// What a flight produced, as its leader tells it; waiters report `Coalesced` instead.
#[derive(Debug, Clone)]
struct Found {
    audio: Arc<CachedAudio>,
    outcome: CacheOutcome,
}

type FlightResult<E> = Result<Found, FlightError<E>>;
type Flight<E> = Shared<BoxFuture<'static, FlightResult<E>>>;
type WeakFlight<E> = WeakShared<BoxFuture<'static, FlightResult<E>>>;

/// Syntheses in progress, by key; the number tells flights of the same key apart, so a
/// finished flight never removes its successor.
type InFlight<E> = Arc<Mutex<HashMap<KeyHash, (u64, WeakFlight<E>)>>>;

/// The first layer: this replica's memory, bounded by bytes and by age.
#[derive(Clone)]
struct Memory {
    entries: moka::future::Cache<KeyHash, Stored>,
    ttl: Option<Duration>,
    max_bytes: u64,
    evictions: Arc<AtomicU64>,
}

#[derive(Clone)]
struct Stored {
    audio: Arc<CachedAudio>,
    /// `None`: kept until the byte budget pushes it out.
    expires: Option<Instant>,
}

impl Stored {
    fn expired(&self) -> bool {
        self.expires.is_some_and(|at| at <= Instant::now())
    }
}

/// The cache; `E` is the error a failed synthesis hands to everyone waiting for it.
pub struct AudioCache<E> {
    store: Option<Memory>,
    /// Redis, when configured: the second layer, shared with other replicas.
    shared: Option<Arc<SharedCache>>,
    in_flight: InFlight<E>,
    next_flight: AtomicU64,
    max_bytes: u64,
    evictions: Arc<AtomicU64>,
    /// How many requests found an identical one in flight and waited for it.
    #[cfg(test)]
    joined: tokio::sync::watch::Sender<usize>,
}

/// Numbers for `/health` and `DELETE /v1/audio/cache`.
#[derive(Debug, Clone, Serialize)]
pub struct CacheStats {
    pub enabled: bool,
    pub entries: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    pub evictions: u64,
    /// The Redis layer, when configured.
    pub redis: Option<SharedStats>,
}

impl<E: Clone + Send + Sync + 'static> AudioCache<E> {
    /// The cache these settings describe. With a Redis URL it must run inside the Tokio runtime
    /// (the client connects in the background).
    pub fn new(settings: &CacheSettings) -> Self {
        let max_bytes = settings.max_mb.saturating_mul(1024 * 1024);
        let evictions = Arc::new(AtomicU64::new(0));
        let ttl = (settings.ttl_s > 0).then(|| Duration::from_secs(settings.ttl_s));
        let store = settings.enabled.then(|| {
            let counter = evictions.clone();
            let mut builder = moka::future::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_k: &KeyHash, v: &Stored| {
                    u32::try_from(v.audio.bytes.len()).unwrap_or(u32::MAX)
                })
                .eviction_listener(move |_k, _v, cause| {
                    if matches!(cause, RemovalCause::Size | RemovalCause::Expired) {
                        count_eviction(&counter);
                    }
                });
            if let Some(ttl) = ttl {
                builder = builder.time_to_live(ttl);
            }
            Memory {
                entries: builder.build(),
                ttl,
                max_bytes,
                evictions: evictions.clone(),
            }
        });
        let shared = settings
            .redis
            .as_ref()
            .filter(|_| settings.enabled)
            .and_then(|redis| match SharedCache::connect(redis, settings.ttl_s) {
                Ok(shared) => Some(shared),
                Err(e) => {
                    tracing::error!(error = %e, "cannot use the redis URL; serving without it");
                    None
                }
            });
        Self {
            store,
            shared,
            in_flight: Arc::default(),
            next_flight: AtomicU64::new(0),
            max_bytes,
            evictions,
            #[cfg(test)]
            joined: tokio::sync::watch::Sender::new(0),
        }
    }

    pub fn enabled(&self) -> bool {
        self.store.is_some()
    }

    /// The stored bytes for `key`, or the result of `synthesize` — shared with every identical
    /// request already waiting for it, on this replica or (through Redis) on another.
    /// `bypass` skips reading and writing the cache.
    pub async fn get_or_synthesize<F>(
        &self,
        key: KeyHash,
        bypass: bool,
        synthesize: F,
    ) -> (Result<Arc<CachedAudio>, E>, CacheOutcome)
    where
        F: std::future::Future<Output = Result<CachedAudio, E>> + Send + 'static,
    {
        let Some(store) = self.store.as_ref().filter(|_| !bypass) else {
            let outcome = CacheOutcome::new(CacheStatus::Bypass, None);
            return (synthesize.await.map(Arc::new), outcome);
        };
        let mut synthesize = Some(synthesize);
        loop {
            if let Some(hit) = store.get(&key).await {
                let outcome = CacheOutcome::new(CacheStatus::Hit, Some(CacheLayer::Memory));
                count(outcome.status);
                return (Ok(hit), outcome);
            }
            let (flight, leads) = {
                let mut in_flight = self.in_flight.lock();
                match in_flight.get(&key).and_then(|(_, weak)| weak.upgrade()) {
                    Some(flight) => {
                        self.note_joined();
                        (flight, false)
                    }
                    None => {
                        let id = self.next_flight.fetch_add(1, Ordering::Relaxed);
                        let work = synthesize.take().expect("a request leads at most once");
                        let flight = self.leader(key, id, store.clone(), work);
                        in_flight.insert(key, (id, flight.downgrade().expect("flight is pending")));
                        (flight, true)
                    }
                }
            };
            let as_waiter = |layer| CacheOutcome::new(CacheStatus::Coalesced, layer);
            match flight.await {
                Ok(found) => {
                    let outcome = if leads {
                        found.outcome
                    } else {
                        as_waiter(found.outcome.layer)
                    };
                    count(outcome.status);
                    return (Ok(found.audio), outcome);
                }
                Err(FlightError::Failed(e)) => {
                    let status = if leads {
                        CacheStatus::Miss
                    } else {
                        CacheStatus::Coalesced
                    };
                    count(status);
                    return (Err(e), CacheOutcome::new(status, None));
                }
                // A streamed leader went away: lead instead. (A leader's own flight is never
                // abandoned: it is driven by whoever awaits it.)
                Err(FlightError::Abandoned) => continue,
            }
        }
    }

    /// The shared future of the first request for a key on this replica: it asks Redis,
    /// otherwise synthesizes and stores a success, and leaves the in-flight table, whichever
    /// of its waiters happens to drive it.
    fn leader<F>(&self, key: KeyHash, id: u64, store: Memory, synthesize: F) -> Flight<E>
    where
        F: std::future::Future<Output = Result<CachedAudio, E>> + Send + 'static,
    {
        let in_flight = self.in_flight.clone();
        let shared = self.shared.clone();
        async move {
            let result = produce(key, &store, shared.as_ref(), synthesize).await;
            leave(&in_flight, key, id);
            result
        }
        .boxed()
        .shared()
    }

    /// For a streamed response, which produces its bytes piece by piece outside of this
    /// cache: the cached bytes (memory, then Redis), the bytes of an identical request in
    /// flight on this replica (waited for), or a lease to produce them and hand them to
    /// whoever arrives meanwhile. If the streaming request that holds the lease goes away, its
    /// waiters take over: one of them leads next. A stream never waits for another replica:
    /// its client is listening for first audio now.
    pub async fn lead_or_follow(&self, key: KeyHash) -> Result<StreamRole<E>, E> {
        let Some(store) = &self.store else {
            return Ok(StreamRole::Lead(None));
        };
        loop {
            if let Some(hit) = store.get(&key).await {
                count(CacheStatus::Hit);
                let outcome = CacheOutcome::new(CacheStatus::Hit, Some(CacheLayer::Memory));
                return Ok(StreamRole::Done(hit, outcome));
            }
            let flight = {
                let mut in_flight = self.in_flight.lock();
                match in_flight.get(&key).and_then(|(_, weak)| weak.upgrade()) {
                    Some(flight) => {
                        self.note_joined();
                        Err(flight)
                    }
                    None => {
                        let id = self.next_flight.fetch_add(1, Ordering::Relaxed);
                        let (sender, receiver) = oneshot::channel();
                        let flight: Flight<E> = receiver
                            .map(|r| r.unwrap_or(Err(FlightError::Abandoned)))
                            .boxed()
                            .shared();
                        in_flight.insert(key, (id, flight.downgrade().expect("flight is pending")));
                        Ok(StreamLease {
                            key,
                            id,
                            sender: Some(sender),
                            _keep_alive: flight,
                            in_flight: self.in_flight.clone(),
                            store: store.clone(),
                            shared: self.shared.clone(),
                        })
                    }
                }
            };
            let flight = match flight {
                Ok(lease) => return Ok(self.lead_stream(lease).await),
                Err(flight) => flight,
            };
            count(CacheStatus::Coalesced);
            match flight.await {
                Ok(found) => {
                    let outcome = CacheOutcome::new(CacheStatus::Coalesced, found.outcome.layer);
                    return Ok(StreamRole::Done(found.audio, outcome));
                }
                Err(FlightError::Abandoned) => continue,
                Err(FlightError::Failed(e)) => return Err(e),
            }
        }
    }

    /// The first stream of a key on this replica: Redis may have its bytes already.
    async fn lead_stream(&self, mut lease: StreamLease<E>) -> StreamRole<E> {
        let Some(shared) = &self.shared else {
            return lead(lease);
        };
        let audio = match shared.get(&lease.key).await {
            Lookup::Found(audio) => Arc::new(audio),
            Lookup::Absent => return lead(lease),
            Lookup::Unavailable => {
                lease.shared = None;
                return lead(lease);
            }
        };
        lease.store.remember(lease.key, audio.clone()).await;
        let outcome = CacheOutcome::new(CacheStatus::Hit, Some(CacheLayer::Redis));
        lease.hand_over(Ok(Found {
            audio: audio.clone(),
            outcome,
        }));
        count(CacheStatus::Hit);
        StreamRole::Done(audio, outcome)
    }

    /// Entries and bytes after moka's pending maintenance, and the gauges set to match. Runs
    /// that maintenance, so it is for `/health` and scrapes, never for the request path.
    pub async fn stats(&self) -> CacheStats {
        let (entries, bytes) = match &self.store {
            Some(store) => {
                store.entries.run_pending_tasks().await;
                (store.entries.entry_count(), store.entries.weighted_size())
            }
            None => (0, 0),
        };
        metrics::gauge!(m::CACHE_ENTRIES).set(entries as f64);
        metrics::gauge!(m::CACHE_BYTES).set(bytes as f64);
        CacheStats {
            enabled: self.enabled(),
            entries,
            bytes,
            max_bytes: self.max_bytes,
            evictions: self.evictions.load(Ordering::Relaxed),
            redis: self.shared.as_ref().map(|shared| shared.stats()),
        }
    }

    /// Empties this replica's memory and returns what it held. Redis is shared with the
    /// other replicas and stays as it is (its entries expire with `--cache-ttl-s`).
    pub async fn clear(&self) -> CacheStats {
        let stats = self.stats().await;
        if let Some(store) = &self.store {
            store.entries.invalidate_all();
            store.entries.run_pending_tasks().await;
        }
        metrics::gauge!(m::CACHE_ENTRIES).set(0.0);
        metrics::gauge!(m::CACHE_BYTES).set(0.0);
        stats
    }

    /// A request found an identical one in flight and waits for it; tests wait on this instead
    /// of guessing how long the request takes to get there.
    fn note_joined(&self) {
        #[cfg(test)]
        self.joined.send_modify(|n| *n += 1);
    }
}

fn lead<E>(lease: StreamLease<E>) -> StreamRole<E> {
    count(CacheStatus::Miss);
    StreamRole::Lead(Some(lease))
}

/// A leader's work: Redis' value, another replica's (waited for), or this replica's synthesis,
/// stored in both layers.
async fn produce<E, F>(
    key: KeyHash,
    store: &Memory,
    shared: Option<&Arc<SharedCache>>,
    synthesize: F,
) -> FlightResult<E>
where
    F: std::future::Future<Output = Result<CachedAudio, E>>,
{
    let mut claim = None;
    let mut shared = shared;
    if let Some(redis) = shared {
        let from_redis = |status| CacheOutcome::new(status, Some(CacheLayer::Redis));
        let mut found = None;
        match redis.get(&key).await {
            Lookup::Found(audio) => found = Some((audio, from_redis(CacheStatus::Hit))),
            Lookup::Unavailable => shared = None,
            Lookup::Absent => match redis.claim(&key).await {
                Claim::Won(lock) => claim = Some(lock),
                Claim::Stored(audio) => found = Some((audio, from_redis(CacheStatus::Hit))),
                Claim::Taken => match redis.wait_for(&key).await {
                    Waited::Value(audio) => {
                        found = Some((audio, from_redis(CacheStatus::Coalesced)))
                    }
                    Waited::Claimed(lock) => claim = Some(lock),
                    Waited::GaveUp => {}
                },
                Claim::Unavailable => shared = None,
            },
        }
        if let Some((audio, outcome)) = found {
            let audio = Arc::new(audio);
            store.remember(key, audio.clone()).await;
            return Ok(Found { audio, outcome });
        }
    }
    let result = synthesize.await.map(Arc::new).map_err(FlightError::Failed);
    if let Ok(audio) = &result {
        store.remember(key, audio.clone()).await;
        if let Some(shared) = shared {
            shared.put(&key, audio).await;
        }
    }
    if let Some(lock) = claim {
        lock.release().await;
    }
    result.map(|audio| Found {
        audio,
        outcome: CacheOutcome::new(CacheStatus::Miss, None),
    })
}

impl Memory {
    /// The stored bytes for `key`, unless they are older than the TTL.
    async fn get(&self, key: &KeyHash) -> Option<Arc<CachedAudio>> {
        let hit = match self.entries.get(key).await {
            Some(stored) if stored.expired() => {
                self.expire(*key).await;
                None
            }
            stored => stored.map(|stored| stored.audio),
        };
        let name = if hit.is_some() {
            m::CACHE_LAYER_HITS
        } else {
            m::CACHE_LAYER_MISSES
        };
        metrics::counter!(name, "layer" => "memory").increment(1);
        hit
    }

    /// Removes `key` if it is still the expired entry (a fresh one may have replaced it since),
    /// and counts it as moka counts the entries it expires itself.
    async fn expire(&self, key: KeyHash) {
        let removed = self
            .entries
            .entry(key)
            .and_compute_with(|entry| async move {
                match entry {
                    Some(entry) if entry.value().expired() => Op::Remove,
                    _ => Op::Nop,
                }
            })
            .await;
        if matches!(removed, CompResult::Removed(_)) {
            count_eviction(&self.evictions);
        }
    }

    /// Stores `audio` unless it alone exceeds the budget.
    async fn remember(&self, key: KeyHash, audio: Arc<CachedAudio>) {
        if (audio.bytes.len() as u64) <= self.max_bytes {
            // A TTL beyond what the clock can count is no TTL.
            let expires = self.ttl.and_then(|ttl| Instant::now().checked_add(ttl));
            self.entries.insert(key, Stored { audio, expires }).await;
        }
    }
}

fn count_eviction(evictions: &AtomicU64) {
    evictions.fetch_add(1, Ordering::Relaxed);
    metrics::counter!(m::CACHE_EVICTIONS).increment(1);
}

/// What a streamed request does: produce the audio (holding the lease, if the cache is on),
/// or send bytes that already exist.
pub enum StreamRole<E> {
    Lead(Option<StreamLease<E>>),
    Done(Arc<CachedAudio>, CacheOutcome),
}

/// The right, and the duty, to produce a key's bytes for everyone waiting on them.
pub struct StreamLease<E> {
    key: KeyHash,
    id: u64,
    sender: Option<oneshot::Sender<FlightResult<E>>>,
    /// Keeps the shared flight alive while no waiter holds it, so later arrivals still find it.
    _keep_alive: Flight<E>,
    in_flight: InFlight<E>,
    store: Memory,
    shared: Option<Arc<SharedCache>>,
}

impl<E> StreamLease<E> {
    /// Stores a success in both layers, and hands the result to every waiter.
    pub async fn complete(mut self, result: Result<CachedAudio, E>) {
        let result = result.map(Arc::new).map_err(FlightError::Failed);
        if let Ok(audio) = &result {
            self.store.remember(self.key, audio.clone()).await;
        }
        let found = result.map(|audio| Found {
            audio,
            outcome: CacheOutcome::new(CacheStatus::Miss, None),
        });
        let stored = found.as_ref().ok().map(|found| found.audio.clone());
        self.hand_over(found);
        if let (Some(audio), Some(shared)) = (stored, &self.shared) {
            shared.put(&self.key, &audio).await;
        }
    }

    fn hand_over(&mut self, found: FlightResult<E>) {
        leave(&self.in_flight, self.key, self.id);
        if let Some(sender) = self.sender.take() {
            let _ = sender.send(found);
        }
    }
}
impl<E> Drop for StreamLease<E> {
    fn drop(&mut self) {
        // Not completed: the streaming client went away. Waiters see `Abandoned` and retry.
        if self.sender.is_some() {
            leave(&self.in_flight, self.key, self.id);
        }
    }
}

/// Counts a lookup's outcome. Hits and coalesced requests are requests the batcher never sees.
fn count(status: CacheStatus) {
    let name = match status {
        CacheStatus::Hit => m::CACHE_HITS,
        CacheStatus::Coalesced => m::CACHE_COALESCED,
        CacheStatus::Miss => m::CACHE_MISSES,
        CacheStatus::Bypass => return,
    };
    metrics::counter!(name).increment(1);
    if status != CacheStatus::Miss {
        metrics::counter!(m::BATCH_REQUESTS_AVOIDED).increment(1);
    }
}

fn leave<E>(in_flight: &InFlight<E>, key: KeyHash, id: u64) {
    let mut in_flight = in_flight.lock();
    if in_flight
        .get(&key)
        .is_some_and(|(current, _)| *current == id)
    {
        in_flight.remove(&key);
    }
}

#[cfg(test)]
mod tests;

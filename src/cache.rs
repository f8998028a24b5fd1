//! The in-memory cache of finished audio, in front of the batcher.
//!
//! Agents and chat apps repeat phrases; answering a repeat from memory costs microseconds
//! instead of a forward pass. Entries are the final encoded bytes, keyed on everything that
//! changes them (see [`CacheKey`]), bounded by bytes (moka's weigher) and by age (TTL).
//! Identical requests that arrive while the first is still being synthesized wait for it
//! instead of synthesizing again (single flight); a failure is handed to every waiter and
//! never stored. The cache does not know what a failure is: it is generic over the caller's
//! error type and only adds its own outcome, [`FlightError::Abandoned`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt, Shared, WeakShared};
use moka::notification::RemovalCause;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use crate::config::CacheSettings;
use crate::metrics as m;
use crate::params::SynthesisParams;

/// A finished response body and what a front door says about it.
#[derive(Debug, Clone)]
pub struct CachedAudio {
    pub bytes: Bytes,
    pub sample_rate: u32,
    pub duration_s: f64,
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
    pub input: &'a str,
    pub response_format: &'a str,
    pub sample_rate: u32,
    /// Every synthesis knob, so a new one can never be forgotten here.
    pub params: &'a SynthesisParams,
    pub server_version: &'a str,
}

pub type KeyHash = [u8; 32];

impl CacheKey<'_> {
    pub fn hash(&self) -> KeyHash {
        let canonical = serde_json::to_vec(self).expect("cache keys serialize");
        Sha256::digest(&canonical).into()
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

type FlightResult<E> = Result<Arc<CachedAudio>, FlightError<E>>;
type Flight<E> = Shared<BoxFuture<'static, FlightResult<E>>>;
type WeakFlight<E> = WeakShared<BoxFuture<'static, FlightResult<E>>>;

/// Syntheses in progress, by key; the number tells flights of the same key apart, so a
/// finished flight never removes its successor.
type InFlight<E> = Arc<Mutex<HashMap<KeyHash, (u64, WeakFlight<E>)>>>;

/// The cache; `E` is the error a failed synthesis hands to everyone waiting for it.
pub struct AudioCache<E> {
    store: Option<moka::future::Cache<KeyHash, Arc<CachedAudio>>>,
    in_flight: InFlight<E>,
    next_flight: AtomicU64,
    max_bytes: u64,
    evictions: Arc<AtomicU64>,
}

/// Numbers for `/health` and `DELETE /v1/audio/cache`.
#[derive(Debug, Clone, Serialize)]
pub struct CacheStats {
    pub enabled: bool,
    pub entries: u64,
    pub bytes: u64,
    pub max_bytes: u64,
    pub evictions: u64,
}

impl<E: Clone + Send + Sync + 'static> AudioCache<E> {
    pub fn new(settings: &CacheSettings) -> Self {
        let max_bytes = settings.max_mb.saturating_mul(1024 * 1024);
        let evictions = Arc::new(AtomicU64::new(0));
        let store = settings.enabled.then(|| {
            let counter = evictions.clone();
            let mut builder = moka::future::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_k: &KeyHash, v: &Arc<CachedAudio>| {
                    u32::try_from(v.bytes.len()).unwrap_or(u32::MAX)
                })
                .eviction_listener(move |_k, _v, cause| {
                    if matches!(cause, RemovalCause::Size | RemovalCause::Expired) {
                        counter.fetch_add(1, Ordering::Relaxed);
                        metrics::counter!(m::CACHE_EVICTIONS).increment(1);
                    }
                });
            if settings.ttl_s > 0 {
                builder = builder.time_to_live(Duration::from_secs(settings.ttl_s));
            }
            builder.build()
        });
        Self {
            store,
            in_flight: Arc::default(),
            next_flight: AtomicU64::new(0),
            max_bytes,
            evictions,
        }
    }

    pub fn enabled(&self) -> bool {
        self.store.is_some()
    }

    /// The stored bytes for `key`, or the result of `synthesize` — shared with every identical
    /// request already waiting for it. `bypass` skips reading and writing the cache.
    pub async fn get_or_synthesize<F>(
        &self,
        key: KeyHash,
        bypass: bool,
        synthesize: F,
    ) -> (Result<Arc<CachedAudio>, E>, CacheStatus)
    where
        F: std::future::Future<Output = Result<CachedAudio, E>> + Send + 'static,
    {
        let Some(store) = self.store.as_ref().filter(|_| !bypass) else {
            return (synthesize.await.map(Arc::new), CacheStatus::Bypass);
        };
        let mut synthesize = Some(synthesize);
        loop {
            if let Some(hit) = store.get(&key).await {
                count(CacheStatus::Hit);
                return (Ok(hit), CacheStatus::Hit);
            }
            let (flight, status) = {
                let mut in_flight = self.in_flight.lock().expect("cache lock");
                match in_flight.get(&key).and_then(|(_, weak)| weak.upgrade()) {
                    Some(flight) => (flight, CacheStatus::Coalesced),
                    None => {
                        let id = self.next_flight.fetch_add(1, Ordering::Relaxed);
                        let work = synthesize.take().expect("a request leads at most once");
                        let flight = self.leader(key, id, store.clone(), work);
                        in_flight.insert(key, (id, flight.downgrade().expect("flight is pending")));
                        (flight, CacheStatus::Miss)
                    }
                }
            };
            count(status);
            match flight.await {
                Ok(audio) => return (Ok(audio), status),
                Err(FlightError::Failed(e)) => return (Err(e), status),
                // A streamed leader went away: lead instead. (A leader's own flight is never
                // abandoned: it is driven by whoever awaits it.)
                Err(FlightError::Abandoned) => continue,
            }
        }
    }

    /// The shared future of the first request for a key: it synthesizes, stores a success and
    /// leaves the in-flight table, whichever of its waiters happens to drive it.
    fn leader<F>(
        &self,
        key: KeyHash,
        id: u64,
        store: moka::future::Cache<KeyHash, Arc<CachedAudio>>,
        synthesize: F,
    ) -> Flight<E>
    where
        F: std::future::Future<Output = Result<CachedAudio, E>> + Send + 'static,
    {
        let in_flight = self.in_flight.clone();
        let max_bytes = self.max_bytes;
        async move {
            let result = synthesize.await.map(Arc::new).map_err(FlightError::Failed);
            if let Ok(audio) = &result {
                if (audio.bytes.len() as u64) <= max_bytes {
                    store.insert(key, audio.clone()).await;
                }
            }
            leave(&in_flight, key, id);
            result
        }
        .boxed()
        .shared()
    }

    /// For a streamed response, which produces its bytes piece by piece outside of this
    /// cache: the cached bytes, the bytes of an identical request in flight (waited for), or a
    /// lease to produce them and hand them to whoever arrives meanwhile. If the streaming
    /// request that holds the lease goes away, its waiters take over: one of them leads next.
    pub async fn lead_or_follow(&self, key: KeyHash) -> Result<StreamRole<E>, E> {
        let Some(store) = &self.store else {
            return Ok(StreamRole::Lead(None));
        };
        loop {
            if let Some(hit) = store.get(&key).await {
                count(CacheStatus::Hit);
                return Ok(StreamRole::Done(hit, CacheStatus::Hit));
            }
            let flight = {
                let mut in_flight = self.in_flight.lock().expect("cache lock");
                match in_flight.get(&key).and_then(|(_, weak)| weak.upgrade()) {
                    Some(flight) => flight,
                    None => {
                        let id = self.next_flight.fetch_add(1, Ordering::Relaxed);
                        let (sender, receiver) = oneshot::channel();
                        let flight: Flight<E> = receiver
                            .map(|r| r.unwrap_or(Err(FlightError::Abandoned)))
                            .boxed()
                            .shared();
                        in_flight.insert(key, (id, flight.downgrade().expect("flight is pending")));
                        count(CacheStatus::Miss);
                        return Ok(StreamRole::Lead(Some(StreamLease {
                            key,
                            id,
                            sender: Some(sender),
                            _keep_alive: flight,
                            in_flight: self.in_flight.clone(),
                            store: store.clone(),
                            max_bytes: self.max_bytes,
                        })));
                    }
                }
            };
            count(CacheStatus::Coalesced);
            match flight.await {
                Ok(audio) => return Ok(StreamRole::Done(audio, CacheStatus::Coalesced)),
                Err(FlightError::Abandoned) => continue,
                Err(FlightError::Failed(e)) => return Err(e),
            }
        }
    }

    /// Entries and bytes after moka's pending maintenance, and the gauges set to match. Runs
    /// that maintenance, so it is for `/health` and scrapes, never for the request path.
    pub async fn stats(&self) -> CacheStats {
        let (entries, bytes) = match &self.store {
            Some(store) => {
                store.run_pending_tasks().await;
                (store.entry_count(), store.weighted_size())
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
        }
    }

    /// Empties the cache and returns what it held.
    pub async fn clear(&self) -> CacheStats {
        let stats = self.stats().await;
        if let Some(store) = &self.store {
            store.invalidate_all();
            store.run_pending_tasks().await;
        }
        metrics::gauge!(m::CACHE_ENTRIES).set(0.0);
        metrics::gauge!(m::CACHE_BYTES).set(0.0);
        stats
    }
}

/// What a streamed request does: produce the audio (holding the lease, if the cache is on),
/// or send bytes that already exist.
pub enum StreamRole<E> {
    Lead(Option<StreamLease<E>>),
    Done(Arc<CachedAudio>, CacheStatus),
}

/// The right, and the duty, to produce a key's bytes for everyone waiting on them.
pub struct StreamLease<E> {
    key: KeyHash,
    id: u64,
    sender: Option<oneshot::Sender<FlightResult<E>>>,
    /// Keeps the shared flight alive while no waiter holds it, so later arrivals still find it.
    _keep_alive: Flight<E>,
    in_flight: InFlight<E>,
    store: moka::future::Cache<KeyHash, Arc<CachedAudio>>,
    max_bytes: u64,
}

impl<E> StreamLease<E> {
    /// Stores a success, and hands the result to every waiter.
    pub async fn complete(mut self, result: Result<CachedAudio, E>) {
        let result = result.map(Arc::new).map_err(FlightError::Failed);
        if let Ok(audio) = &result {
            if (audio.bytes.len() as u64) <= self.max_bytes {
                self.store.insert(self.key, audio.clone()).await;
            }
        }
        leave(&self.in_flight, self.key, self.id);
        if let Some(sender) = self.sender.take() {
            let _ = sender.send(result);
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
    let mut in_flight = in_flight.lock().expect("cache lock");
    if in_flight
        .get(&key)
        .is_some_and(|(current, _)| *current == id)
    {
        in_flight.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    type Cache = AudioCache<String>;

    fn audio(n: usize) -> CachedAudio {
        CachedAudio {
            bytes: Bytes::from(vec![7u8; n]),
            sample_rate: 1,
            duration_s: 0.0,
        }
    }

    fn settings(max_mb: u64, ttl_s: u64) -> CacheSettings {
        CacheSettings {
            enabled: true,
            max_mb,
            ttl_s,
        }
    }

    #[tokio::test]
    async fn second_lookup_is_a_hit() {
        let cache = Cache::new(&settings(1, 0));
        let (first, status) = cache
            .get_or_synthesize([1; 32], false, async { Ok(audio(10)) })
            .await;
        assert_eq!(status, CacheStatus::Miss);
        let (second, status) = cache
            .get_or_synthesize([1; 32], false, async { Ok(audio(99)) })
            .await;
        assert_eq!(status, CacheStatus::Hit);
        assert_eq!(first.unwrap().bytes, second.unwrap().bytes);
    }

    #[tokio::test]
    async fn identical_concurrent_requests_synthesize_once() {
        let cache = Arc::new(Cache::new(&settings(1, 0)));
        let calls = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..5 {
            let (cache, calls) = (cache.clone(), calls.clone());
            tasks.push(tokio::spawn(async move {
                let work = async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(audio(10))
                };
                cache.get_or_synthesize([2; 32], false, work).await.1
            }));
        }
        let mut statuses = Vec::new();
        for t in tasks {
            statuses.push(t.await.unwrap());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            statuses.iter().filter(|s| **s == CacheStatus::Miss).count(),
            1
        );
        assert_eq!(
            statuses
                .iter()
                .filter(|s| **s == CacheStatus::Coalesced)
                .count(),
            4
        );
    }

    #[tokio::test]
    async fn failures_reach_every_waiter_and_are_not_stored() {
        let cache = Cache::new(&settings(1, 0));
        let (result, _) = cache
            .get_or_synthesize([3; 32], false, async { Err("boom".to_string()) })
            .await;
        assert!(result.is_err());
        let (_, status) = cache
            .get_or_synthesize([3; 32], false, async { Ok(audio(1)) })
            .await;
        assert_eq!(status, CacheStatus::Miss, "the failure was not cached");
    }

    #[tokio::test]
    async fn an_entry_larger_than_the_budget_is_not_stored() {
        let cache = Cache::new(&settings(1, 0));
        let (result, _) = cache
            .get_or_synthesize([4; 32], false, async { Ok(audio(2 * 1024 * 1024)) })
            .await;
        assert!(result.is_ok(), "the caller still gets its audio");
        assert!(matches!(
            cache.lead_or_follow([4; 32]).await,
            Ok(StreamRole::Lead(_))
        ));
    }

    #[tokio::test]
    async fn bypass_neither_reads_nor_writes() {
        let cache = Cache::new(&settings(1, 0));
        let (_, status) = cache
            .get_or_synthesize([5; 32], true, async { Ok(audio(1)) })
            .await;
        assert_eq!(status, CacheStatus::Bypass);
        assert!(matches!(
            cache.lead_or_follow([5; 32]).await,
            Ok(StreamRole::Lead(_))
        ));
    }

    #[tokio::test]
    async fn an_abandoned_flight_does_not_block_later_requests() {
        let cache = Cache::new(&settings(1, 0));
        let slow = cache.get_or_synthesize([6; 32], false, async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(audio(1))
        });
        assert!(tokio::time::timeout(Duration::from_millis(20), slow)
            .await
            .is_err());
        let (result, status) = cache
            .get_or_synthesize([6; 32], false, async { Ok(audio(3)) })
            .await;
        assert_eq!(status, CacheStatus::Miss);
        assert_eq!(result.unwrap().bytes.len(), 3);
    }

    #[tokio::test]
    async fn a_stream_lease_serves_its_followers_and_then_the_cache() {
        let cache = Arc::new(Cache::new(&settings(1, 0)));
        let Ok(StreamRole::Lead(Some(lease))) = cache.lead_or_follow([7; 32]).await else {
            panic!("the first request leads");
        };
        let follower = tokio::spawn({
            let cache = cache.clone();
            async move { cache.lead_or_follow([7; 32]).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        lease.complete(Ok(audio(5))).await;
        match follower.await.unwrap() {
            Ok(StreamRole::Done(audio, CacheStatus::Coalesced)) => assert_eq!(audio.bytes.len(), 5),
            _ => panic!("the follower gets the leader's bytes"),
        }
        assert!(matches!(
            cache.lead_or_follow([7; 32]).await,
            Ok(StreamRole::Done(_, CacheStatus::Hit))
        ));
    }

    #[tokio::test]
    async fn followers_of_an_abandoned_stream_take_over() {
        let cache = Arc::new(Cache::new(&settings(1, 0)));
        let Ok(StreamRole::Lead(lease)) = cache.lead_or_follow([8; 32]).await else {
            panic!("the first request leads");
        };
        let follower = tokio::spawn({
            let cache = cache.clone();
            async move { cache.lead_or_follow([8; 32]).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(lease);
        let role = tokio::time::timeout(Duration::from_secs(5), follower)
            .await
            .unwrap()
            .unwrap();
        assert!(
            matches!(role, Ok(StreamRole::Lead(Some(_)))),
            "the follower leads now"
        );
    }

    #[test]
    fn keys_differ_by_format() {
        let key = |format, params: &SynthesisParams| {
            CacheKey {
                engine: "piper",
                voice: "v",
                voice_fingerprint: "f",
                input: "hi",
                response_format: format,
                sample_rate: 22050,
                params,
                server_version: "0",
            }
            .hash()
        };
        let plain = SynthesisParams::default();
        assert_ne!(key("wav", &plain), key("mp3", &plain));
        assert_eq!(key("wav", &plain), key("wav", &plain));
        let speaker = SynthesisParams {
            speaker: Some(1),
            ..plain
        };
        assert_ne!(key("wav", &plain), key("wav", &speaker));
    }
}

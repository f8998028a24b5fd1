//! Tests of the in-memory layer and of single flight; the Redis layer is tested against a real
//! Redis in tests/scaleout.rs.

use super::*;
use std::sync::atomic::AtomicUsize;

type Cache = AudioCache<String>;

fn audio(n: usize) -> CachedAudio {
    CachedAudio {
        bytes: Bytes::from(vec![7u8; n]),
        sample_rate: 1,
        duration_s: 0.0,
        no_speech: false,
    }
}

fn settings(max_mb: u64, ttl_s: u64) -> CacheSettings {
    CacheSettings {
        enabled: true,
        max_mb,
        ttl_s,
        redis: None,
    }
}

#[tokio::test]
async fn second_lookup_is_a_hit() {
    let cache = Cache::new(&settings(1, 0));
    let (first, outcome) = cache
        .get_or_synthesize([1; 32], false, async { Ok(audio(10)) })
        .await;
    assert_eq!(outcome, CacheOutcome::new(CacheStatus::Miss, None));
    let (second, outcome) = cache
        .get_or_synthesize([1; 32], false, async { Ok(audio(99)) })
        .await;
    assert_eq!(
        outcome,
        CacheOutcome::new(CacheStatus::Hit, Some(CacheLayer::Memory))
    );
    assert_eq!(first.unwrap().bytes, second.unwrap().bytes);
}

/// Resolves once `n` requests in all have found an identical one in flight and wait for it.
async fn joined(cache: &Cache, n: usize) {
    let mut joined = cache.joined.subscribe();
    joined.wait_for(|count| *count >= n).await.unwrap();
}

#[tokio::test]
async fn identical_concurrent_requests_synthesize_once() {
    let cache = Arc::new(Cache::new(&settings(1, 0)));
    let calls = Arc::new(AtomicUsize::new(0));
    // The leader's synthesis finishes only once the other four wait for it.
    let gate = Arc::new(tokio::sync::Notify::new());
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let (cache, calls, gate) = (cache.clone(), calls.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let work = async move {
                calls.fetch_add(1, Ordering::SeqCst);
                gate.notified().await;
                Ok(audio(10))
            };
            cache.get_or_synthesize([2; 32], false, work).await.1.status
        }));
    }
    joined(&cache, 4).await;
    gate.notify_one();
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
    assert_eq!(
        status.status,
        CacheStatus::Miss,
        "the failure was not cached"
    );
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
    assert_eq!(status, CacheOutcome::new(CacheStatus::Bypass, None));
    assert!(matches!(
        cache.lead_or_follow([5; 32]).await,
        Ok(StreamRole::Lead(_))
    ));
}

#[tokio::test]
async fn an_abandoned_flight_does_not_block_later_requests() {
    let cache = Cache::new(&settings(1, 0));
    let (started, synthesizing) = oneshot::channel();
    let slow = cache.get_or_synthesize([6; 32], false, async move {
        let _ = started.send(());
        std::future::pending::<Result<CachedAudio, String>>().await
    });
    // Drive the first request until its synthesis runs, then let it go.
    tokio::select! {
        _ = slow => panic!("that synthesis never ends"),
        _ = synthesizing => {}
    }
    let (result, status) = cache
        .get_or_synthesize([6; 32], false, async { Ok(audio(3)) })
        .await;
    assert_eq!(status.status, CacheStatus::Miss);
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
    joined(&cache, 1).await;
    lease.complete(Ok(audio(5))).await;
    match follower.await.unwrap() {
        Ok(StreamRole::Done(audio, outcome)) => {
            assert_eq!(outcome, CacheOutcome::new(CacheStatus::Coalesced, None));
            assert_eq!(audio.bytes.len(), 5)
        }
        _ => panic!("the follower gets the leader's bytes"),
    }
    assert!(matches!(
        cache.lead_or_follow([7; 32]).await,
        Ok(StreamRole::Done(
            _,
            CacheOutcome {
                status: CacheStatus::Hit,
                layer: Some(CacheLayer::Memory)
            }
        ))
    ));
}

// Paused time: a follower that is never woken makes the timeout fire at once instead of a
// hang, and nothing here waits on a timer otherwise.
#[tokio::test(start_paused = true)]
async fn followers_of_an_abandoned_stream_take_over() {
    let key = [8; 32];
    let cache = Arc::new(Cache::new(&settings(1, 0)));
    let Ok(StreamRole::Lead(Some(lease))) = cache.lead_or_follow(key).await else {
        panic!("the first request leads");
    };
    let follow = |cache: &Arc<Cache>| {
        let cache = cache.clone();
        tokio::spawn(async move { cache.lead_or_follow(key).await })
    };
    let follower = follow(&cache);
    // It waits on the leader's flight before the leader goes: what follows is a takeover.
    joined(&cache, 1).await;
    drop(lease);
    let role = tokio::time::timeout(Duration::from_secs(5), follower)
        .await
        .expect("the follower is woken when the leader goes")
        .unwrap();
    let Ok(StreamRole::Lead(Some(lease))) = role else {
        panic!("the follower leads now");
    };
    // Its lease is the key's flight now: a later request follows it and gets its bytes.
    let later = follow(&cache);
    joined(&cache, 2).await;
    lease.complete(Ok(audio(4))).await;
    match tokio::time::timeout(Duration::from_secs(5), later).await {
        Ok(Ok(Ok(StreamRole::Done(audio, outcome)))) => {
            assert_eq!(outcome, CacheOutcome::new(CacheStatus::Coalesced, None));
            assert_eq!(audio.bytes.len(), 4);
        }
        _ => panic!("the later request gets the new leader's bytes"),
    }
}

// Tokio's clock, paused, decides an entry's age; moka's own TTL (wall clock) is far away.
#[tokio::test(start_paused = true)]
async fn an_entry_is_served_until_its_ttl_and_then_synthesized_again() {
    let cache = Cache::new(&settings(1, 60));
    let key = [9; 32];
    let (_, outcome) = cache
        .get_or_synthesize(key, false, async { Ok(audio(10)) })
        .await;
    assert_eq!(outcome.status, CacheStatus::Miss);
    tokio::time::advance(Duration::from_secs(59)).await;
    let (hit, outcome) = cache
        .get_or_synthesize(key, false, async { Ok(audio(20)) })
        .await;
    assert_eq!(
        outcome,
        CacheOutcome::new(CacheStatus::Hit, Some(CacheLayer::Memory))
    );
    assert_eq!(hit.unwrap().bytes.len(), 10, "still the first bytes");
    tokio::time::advance(Duration::from_secs(1)).await;
    let (fresh, outcome) = cache
        .get_or_synthesize(key, false, async { Ok(audio(20)) })
        .await;
    assert_eq!(outcome.status, CacheStatus::Miss, "expired at the TTL");
    assert_eq!(fresh.unwrap().bytes.len(), 20);
    let stats = cache.stats().await;
    assert_eq!((stats.entries, stats.evictions), (1, 1), "{stats:?}");
    // The new entry starts its own TTL; a stream sees the same memory.
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(matches!(
        cache.lead_or_follow(key).await,
        Ok(StreamRole::Done(audio, _)) if audio.bytes.len() == 20
    ));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(matches!(
        cache.lead_or_follow(key).await,
        Ok(StreamRole::Lead(Some(_)))
    ));
}

#[tokio::test(start_paused = true)]
async fn without_a_ttl_entries_do_not_age() {
    let cache = Cache::new(&settings(1, 0));
    let key = [10; 32];
    let (stored, _) = cache
        .get_or_synthesize(key, false, async { Ok(audio(10)) })
        .await;
    assert!(stored.is_ok());
    tokio::time::advance(Duration::from_secs(10 * 365 * 24 * 3600)).await;
    let (_, outcome) = cache
        .get_or_synthesize(key, false, async { Ok(audio(20)) })
        .await;
    assert_eq!(outcome.status, CacheStatus::Hit);
    assert_eq!(cache.stats().await.evictions, 0);
}

#[test]
fn keys_differ_by_format_parameters_reading_language_lexicon_and_delivery() {
    let key_as = |format, params: &SynthesisParams, reading, lexicon, reads_in, delivery| {
        CacheKey {
            engine: "piper",
            voice: "v",
            voice_fingerprint: "f",
            reads_in,
            other_voices: "",
            input: "hi",
            response_format: format,
            sample_rate: 22050,
            params,
            reading,
            lexicon,
            delivery,
            server_version: "0",
        }
        .hash()
    };
    let key_in = |format, params: &SynthesisParams, reading, lexicon, reads_in| {
        key_as(format, params, reading, lexicon, reads_in, "")
    };
    let key_with = |format, params: &SynthesisParams, reading, lexicon| {
        key_in(format, params, reading, lexicon, "")
    };
    let key_read =
        |format, params: &SynthesisParams, reading| key_with(format, params, reading, "");
    let key = |format, params: &SynthesisParams| key_read(format, params, "mdy");
    let plain = SynthesisParams::default();
    assert_ne!(key("wav", &plain), key("mp3", &plain));
    assert_eq!(key("wav", &plain), key("wav", &plain));
    let speaker = SynthesisParams {
        speaker: Some(1),
        ..plain
    };
    assert_ne!(key("wav", &plain), key("wav", &speaker));
    // OmniVoice's generation fields are knobs like any other.
    let fewer_steps = SynthesisParams {
        generation: crate::params::Generation {
            num_step: Some(16),
            ..Default::default()
        },
        ..plain
    };
    assert_ne!(key("wav", &plain), key("wav", &fewer_steps));
    assert_ne!(key("wav", &plain), key_read("wav", &plain, "dmy"));
    assert_ne!(key("wav", &plain), key_read("wav", &plain, "verbatim"));
    assert_ne!(key("wav", &plain), key_with("wav", &plain, "mdy", "0a1b"));
    assert_ne!(key("wav", &plain), key_in("wav", &plain, "mdy", "", "de"));
    // A stream made otherwise than the body is other audio.
    assert_ne!(
        key("wav", &plain),
        key_as("wav", &plain, "mdy", "", "", "stream")
    );
}

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
            cache.get_or_synthesize([2; 32], false, work).await.1.status
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
    tokio::time::sleep(Duration::from_millis(20)).await;
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

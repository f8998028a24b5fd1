//! Several replicas of the real binary sharing one real Redis, and behind a real haproxy: the
//! shared cache answers across replicas, Redis faults cost requests nothing but the shared
//! answers, stored garbage is ignored, and a replica stopping under load loses no request.
//! Redis and haproxy are Debian's (scripts/scaleout-deps.sh), on loopback ephemeral ports.

mod common;

use std::time::{Duration, Instant};

use common::services::{shipped_haproxy_config, Haproxy, Redis};
use common::{get_text, metric, Binary};
use serde_json::json;

/// A replica sharing `redis` under `prefix`. The timeout is generous: these tests assert that
/// values are shared, and a loaded CI machine must not turn a slow answer into a miss.
async fn replica(redis: &Redis, prefix: &str, timeout_ms: &str) -> Binary {
    replica_with_cooldown(redis, prefix, timeout_ms, "300").await
}

async fn replica_with_cooldown(
    redis: &Redis,
    prefix: &str,
    timeout_ms: &str,
    cooldown_ms: &str,
) -> Binary {
    let url = redis.url();
    Binary::ready(&[
        "--preload",
        "espeak/en-us",
        "--redis-url",
        &url,
        "--redis-prefix",
        prefix,
        "--redis-timeout-ms",
        timeout_ms,
        "--redis-breaker-cooldown-ms",
        cooldown_ms,
    ])
    .await
}

struct Answer {
    status: u16,
    cache: String,
    layer: Option<String>,
    body: bytes::Bytes,
}

async fn speak(url: &str, input: &str, stream: bool) -> Answer {
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/audio/speech"))
        .json(&json!({
            "model": "espeak", "voice": "en-us", "input": input,
            "response_format": "wav", "stream": stream,
        }))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("the request is answered");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let (cache, layer) = (
        header("x-cache").unwrap_or_default(),
        header("x-cache-layer"),
    );
    let status = response.status().as_u16();
    let body = response.bytes().await.expect("a whole body");
    Answer {
        status,
        cache,
        layer,
        body,
    }
}

async fn metrics(server: &Binary) -> String {
    get_text(format!("{}/metrics", server.url)).await
}

/// Sends new phrases to `a`, then to `b`, until `b` answers one from Redis; bounded.
async fn sharing_resumes(a: &Binary, b: &Binary, tag: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    for round in 0.. {
        assert!(Instant::now() < deadline, "replicas never shared again");
        let input = format!("{tag} round {round}.");
        assert_eq!(speak(&a.url, &input, false).await.status, 200);
        let on_b = speak(&b.url, &input, false).await;
        assert_eq!(on_b.status, 200);
        if on_b.layer.as_deref() == Some("redis") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_miss_on_one_replica_is_a_hit_on_another() {
    let redis = Redis::start();
    let a = replica(&redis, "share:", "1000").await;
    let b = replica(&redis, "share:", "1000").await;

    let first = speak(&a.url, "Shared between replicas.", false).await;
    assert_eq!((first.status, first.cache.as_str()), (200, "MISS"));
    assert_eq!(first.layer, None, "synthesized bytes name no cache layer");
    let stored = redis.value_keys("share:");
    assert_eq!(stored.len(), 1, "{stored:?}");
    let ttl_ms = redis.ttl_ms(&stored[0]);
    assert!(
        (1..=3_600_000).contains(&ttl_ms),
        "the value expires with the default --cache-ttl-s: {ttl_ms} ms"
    );
    let on_b = speak(&b.url, "Shared between replicas.", false).await;
    assert_eq!(
        (on_b.cache.as_str(), on_b.layer.as_deref()),
        ("HIT", Some("redis"))
    );
    assert_eq!(on_b.body, first.body, "B sends A's bytes");
    let again = speak(&b.url, "Shared between replicas.", false).await;
    assert_eq!(
        (again.cache.as_str(), again.layer.as_deref()),
        ("HIT", Some("memory"))
    );
    assert_eq!(again.body, first.body);

    // A streamed body is stored when it ends, and a stream can be answered from Redis.
    let streamed = speak(&b.url, "Streamed on one, whole on the other.", true).await;
    assert_eq!((streamed.status, streamed.cache.as_str()), (200, "MISS"));
    let whole = speak(&a.url, "Streamed on one, whole on the other.", false).await;
    assert_eq!(
        (whole.cache.as_str(), whole.layer.as_deref()),
        ("HIT", Some("redis"))
    );
    assert_eq!(whole.body, streamed.body);
    let whole_first = speak(&a.url, "Whole on one, streamed on the other.", false).await;
    let stream_hit = speak(&b.url, "Whole on one, streamed on the other.", true).await;
    assert_eq!(
        (stream_hit.cache.as_str(), stream_hit.layer.as_deref()),
        ("HIT", Some("redis"))
    );
    assert_eq!(stream_hit.body, whole_first.body);

    let text = metrics(&b).await;
    assert_eq!(
        metric(&text, "omnivoice_cache_layer_hits_total{layer=\"redis\"}"),
        2.0
    );
    assert!(metric(&text, "omnivoice_cache_layer_hits_total{layer=\"memory\"}") >= 1.0);
    assert_eq!(
        metric(&text, "omnivoice_syntheses_total"),
        1.0,
        "only the streamed one"
    );
    assert_eq!(metric(&text, "omnivoice_redis_breaker_state"), 0.0);
    let health = common::get_json(format!("{}/health", b.url)).await;
    assert_eq!(
        health["cache"]["stats"]["redis"]["breaker"], "closed",
        "{health}"
    );
    assert!(
        !health.to_string().contains(&redis.url()),
        "the URL is not shown"
    );
}

#[tokio::test]
async fn identical_requests_on_two_replicas_synthesize_once() {
    let redis = Redis::start();
    let a = replica(&redis, "flight:", "1000").await;
    let b = replica(&redis, "flight:", "1000").await;
    let rounds = 6;
    for round in 0..rounds {
        // Long enough that both replicas are likely to be at it at once.
        let input = format!(
            "Round {round}. Two replicas receive this same request at the same moment, \
             and only one of them should compute it while the other one waits for it."
        );
        let (on_a, on_b) = tokio::join!(speak(&a.url, &input, false), speak(&b.url, &input, false));
        assert_eq!((on_a.status, on_b.status), (200, 200));
        assert_eq!(on_a.body, on_b.body, "round {round}: the same audio");
        let mut statuses = [on_a.cache.as_str(), on_b.cache.as_str()];
        statuses.sort();
        let (other, miss) = (statuses[0], statuses[1]);
        assert_eq!(miss, "MISS", "round {round}: one synthesized: {statuses:?}");
        assert!(
            ["HIT", "COALESCED"].contains(&other),
            "round {round}: the other did not: {statuses:?}"
        );
        let shared = if on_a.cache == "MISS" { &on_b } else { &on_a };
        assert_eq!(shared.layer.as_deref(), Some("redis"), "round {round}");
    }
    let syntheses = metric(&metrics(&a).await, "omnivoice_syntheses_total")
        + metric(&metrics(&b).await, "omnivoice_syntheses_total");
    assert_eq!(syntheses, f64::from(rounds));
}

#[tokio::test]
async fn a_frozen_redis_is_skipped_and_used_again_when_it_wakes() {
    let redis = Redis::start();
    let a = replica(&redis, "frozen:", "100").await;
    let b = replica(&redis, "frozen:", "100").await;
    sharing_resumes(&a, &b, "before").await;

    redis.freeze();
    for i in 0..6 {
        let answer = speak(&a.url, &format!("Redis is frozen, request {i}."), false).await;
        assert_eq!((answer.status, answer.cache.as_str()), (200, "MISS"));
        let streamed = speak(&a.url, &format!("Frozen, streamed {i}."), true).await;
        assert_eq!(streamed.status, 200);
    }
    let text = metrics(&a).await;
    assert!(
        metric(
            &text,
            "omnivoice_redis_errors_total{op=\"get\",kind=\"timeout\"}"
        ) >= 1.0
    );
    assert!(
        metric(
            &text,
            "omnivoice_redis_skipped_total{op=\"get\",reason=\"breaker_open\"}"
        ) >= 1.0,
        "the breaker opened"
    );
    redis.thaw();
    sharing_resumes(&a, &b, "after the thaw").await;
    assert_eq!(
        metric(&metrics(&a).await, "omnivoice_redis_breaker_state"),
        0.0
    );
}

#[tokio::test]
async fn a_restarted_redis_is_used_again() {
    let mut redis = Redis::start();
    let a = replica(&redis, "restart:", "100").await;
    let b = replica(&redis, "restart:", "100").await;
    sharing_resumes(&a, &b, "before").await;

    redis.kill();
    for i in 0..6 {
        let answer = speak(&b.url, &format!("Redis is gone, request {i}."), false).await;
        assert_eq!((answer.status, answer.cache.as_str()), (200, "MISS"));
    }
    let text = metrics(&b).await;
    assert!(
        metric(
            &text,
            "omnivoice_redis_errors_total{op=\"get\",kind=\"connection\"}"
        ) + metric(
            &text,
            "omnivoice_redis_errors_total{op=\"get\",kind=\"timeout\"}"
        ) >= 1.0
    );
    assert_eq!(metric(&text, "omnivoice_redis_breaker_state"), 1.0, "open");

    redis.restart();
    sharing_resumes(&a, &b, "after the restart").await;
}

/// The connection manager replaces a broken connection only once a command fails on it; that
/// command must go again on the new one, or the first request after Redis comes back would do
/// without Redis and another replica would synthesize its text again. A cooldown of zero lets
/// every request probe, so the first request after the restart is the breaker's probe.
#[tokio::test]
async fn the_first_request_after_a_redis_restart_is_shared() {
    let mut redis = Redis::start();
    let a = replica_with_cooldown(&redis, "reconnect:", "1000", "0").await;
    let b = replica_with_cooldown(&redis, "reconnect:", "1000", "0").await;
    sharing_resumes(&a, &b, "before").await;

    redis.kill();
    // Each replica finds its connection dead, fails to make a new one, and opens its breaker.
    for (name, replica) in [("a", &a), ("b", &b)] {
        for i in 0..3 {
            let answer = speak(&replica.url, &format!("Down, {name} {i}."), false).await;
            assert_eq!((answer.status, answer.cache.as_str()), (200, "MISS"));
        }
        let text = metrics(replica).await;
        assert_eq!(
            metric(&text, "omnivoice_redis_breaker_state"),
            1.0,
            "{name}"
        );
    }

    redis.restart();
    let input = "The first request after the restart.";
    let first = speak(&a.url, input, false).await;
    assert_eq!((first.status, first.cache.as_str()), (200, "MISS"));
    assert_eq!(
        redis.value_keys("reconnect:").len(),
        1,
        "A stored the first request after the restart"
    );
    let on_b = speak(&b.url, input, false).await;
    assert_eq!(
        (on_b.cache.as_str(), on_b.layer.as_deref()),
        ("HIT", Some("redis")),
        "B's first request after the restart read it"
    );
    assert_eq!(on_b.body, first.body);
    for replica in [&a, &b] {
        let text = metrics(replica).await;
        assert_eq!(
            metric(&text, "omnivoice_redis_breaker_state"),
            0.0,
            "closed"
        );
    }
}

/// Overwrites the value under a key.
type Spoil = fn(&mut redis::Connection, &str);

#[tokio::test]
async fn corrupt_and_foreign_values_are_ignored_and_counted() {
    let redis = Redis::start();
    let a = replica(&redis, "corrupt:", "1000").await;
    let b = replica(&redis, "corrupt:", "1000").await;
    let mut connection = redis.connection().unwrap();

    // Each case: a value A stored, then spoiled; B must synthesize instead of sending it.
    let cases: [(&str, Spoil); 3] = [
        ("foreign", |c, key| {
            redis::cmd("SET")
                .arg(key)
                .arg("garbage")
                .query::<()>(c)
                .unwrap()
        }),
        ("corrupt", |c, key| {
            let mut value: Vec<u8> = redis::cmd("GET").arg(key).query(c).unwrap();
            let middle = value.len() / 2;
            value[middle] ^= 0x55;
            redis::cmd("SET")
                .arg(key)
                .arg(value)
                .query::<()>(c)
                .unwrap()
        }),
        ("foreign", |c, key| {
            redis::cmd("DEL").arg(key).query::<()>(c).unwrap();
            redis::cmd("RPUSH")
                .arg(key)
                .arg("a list")
                .query::<()>(c)
                .unwrap()
        }),
    ];
    for (i, (reason, spoil)) in cases.iter().enumerate() {
        let input = format!("A value that gets spoiled, case {i}.");
        let before = redis.value_keys("corrupt:");
        let original = speak(&a.url, &input, false).await;
        assert_eq!(original.cache, "MISS");
        let new: Vec<String> = redis
            .value_keys("corrupt:")
            .into_iter()
            .filter(|k| !before.contains(k))
            .collect();
        assert_eq!(new.len(), 1, "A stored one value: {new:?}");
        spoil(&mut connection, &new[0]);
        let refused_before = metric(
            &metrics(&b).await,
            &format!("omnivoice_redis_refused_values_total{{reason=\"{reason}\"}}"),
        );
        let on_b = speak(&b.url, &input, false).await;
        assert_eq!(
            (on_b.status, on_b.cache.as_str()),
            (200, "MISS"),
            "case {i}"
        );
        assert_eq!(on_b.layer, None);
        common::read_wav(&on_b.body);
        let refused = metric(
            &metrics(&b).await,
            &format!("omnivoice_redis_refused_values_total{{reason=\"{reason}\"}}"),
        );
        assert_eq!(refused, refused_before + 1.0, "case {i} ({reason}) counted");
    }
    assert_eq!(
        metric(&metrics(&b).await, "omnivoice_redis_breaker_state"),
        0.0,
        "bad values are no Redis failure"
    );
}

#[tokio::test]
async fn haproxy_rides_out_a_replica_stopping_under_load() {
    let a = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let b = Binary::ready(&["--preload", "espeak/en-us"]).await;
    let address = |url: &str| url.trim_start_matches("http://").to_string();
    let port = common::services::free_port();
    let config = shipped_haproxy_config(port, &[&address(&a.url), &address(&b.url)]);
    let proxy = Haproxy::start(&config, port);
    let deadline = Instant::now() + Duration::from_secs(10);
    while reqwest::get(format!("{}/health", proxy.url))
        .await
        .map_or(true, |r| r.status() != 200)
    {
        assert!(Instant::now() < deadline, "haproxy never reached a replica");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (total, tasks) = (60usize, 4usize);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for task in 0..tasks {
        let (url, done) = (proxy.url.clone(), done.clone());
        clients.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut failures = Vec::new();
            for i in (task..total).step_by(tasks) {
                let body = json!({
                    "model": "espeak", "voice": "en-us", "stream": false, "cache": false,
                    "response_format": "wav",
                    "input": format!(
                        "Request number {i} goes through the load balancer. It is a few \
                         sentences long, so that some are in flight when a replica stops. \
                         The client must never notice."
                    ),
                });
                let result = client
                    .post(format!("{url}/v1/audio/speech"))
                    .json(&body)
                    .timeout(Duration::from_secs(30))
                    .send()
                    .await;
                match result {
                    Ok(r) if r.status() == 200 => {
                        let bytes = r.bytes().await.expect("a whole body");
                        common::read_wav(&bytes);
                    }
                    Ok(r) => failures.push(format!("request {i}: status {}", r.status())),
                    Err(e) => failures.push(format!("request {i}: {e}")),
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            failures
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.load(std::sync::atomic::Ordering::SeqCst) < total / 4 {
        assert!(Instant::now() < deadline, "the load run stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let served_by_a = metric(
        &metrics(&a).await,
        "omnivoice_requests_total{protocol=\"http\",route=\"/v1/audio/speech\",status=\"200\"}",
    );
    assert!(served_by_a >= 1.0, "haproxy spread the load");
    let stopping = std::thread::spawn(move || a.terminate());

    let mut failures = Vec::new();
    for client in clients {
        failures.extend(client.await.unwrap());
    }
    assert!(failures.is_empty(), "clients saw errors: {failures:?}");
    assert!(
        stopping.join().unwrap().success(),
        "the stopped replica exited cleanly"
    );
    let served_by_b = metric(
        &metrics(&b).await,
        "omnivoice_requests_total{protocol=\"http\",route=\"/v1/audio/speech\",status=\"200\"}",
    );
    assert!(served_by_b >= 1.0, "the other replica took over");
}

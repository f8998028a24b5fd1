//! Prometheus metrics: one list of names, one recorder, one renderer.
//!
//! Every module records through the `metrics` facade with the names below, so a dashboard can
//! rely on this file alone. Histograms get explicit buckets (otherwise the exporter would render
//! summaries), sized for speech: milliseconds of queueing up to minutes of synthesis.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub const REQUESTS_TOTAL: &str = "omnivoice_requests_total";
pub const REQUEST_DURATION_SECONDS: &str = "omnivoice_request_duration_seconds";
pub const AUDIO_SECONDS_TOTAL: &str = "omnivoice_audio_seconds_total";
pub const INFERENCE_SECONDS: &str = "omnivoice_inference_seconds";
pub const BATCH_SIZE: &str = "omnivoice_batch_size";
pub const BATCHES_TOTAL: &str = "omnivoice_batches_total";
pub const OMNIVOICE_STEPS: &str = "omnivoice_decoding_steps_total";
pub const OMNIVOICE_STEP_UTTERANCES: &str = "omnivoice_decoding_step_utterances";
pub const QUEUE_DEPTH: &str = "omnivoice_queue_depth";
pub const QUEUE_WAIT_SECONDS: &str = "omnivoice_queue_wait_seconds";
pub const REJECTED: &str = "omnivoice_rejected_total";
pub const CACHE_HITS: &str = "omnivoice_cache_hits_total";
pub const CACHE_MISSES: &str = "omnivoice_cache_misses_total";
pub const CACHE_COALESCED: &str = "omnivoice_cache_coalesced_total";
pub const CACHE_EVICTIONS: &str = "omnivoice_cache_evictions_total";
pub const CACHE_ENTRIES: &str = "omnivoice_cache_entries";
pub const CACHE_BYTES: &str = "omnivoice_cache_bytes";
pub const CACHE_LAYER_HITS: &str = "omnivoice_cache_layer_hits_total";
pub const CACHE_LAYER_MISSES: &str = "omnivoice_cache_layer_misses_total";
pub const REDIS_ERRORS: &str = "omnivoice_redis_errors_total";
pub const REDIS_SKIPPED: &str = "omnivoice_redis_skipped_total";
pub const REDIS_REFUSED: &str = "omnivoice_redis_refused_values_total";
pub const REDIS_WAITS: &str = "omnivoice_redis_waits_total";
pub const REDIS_BREAKER_STATE: &str = "omnivoice_redis_breaker_state";
pub const BATCH_REQUESTS_AVOIDED: &str = "omnivoice_batch_requests_avoided_total";
pub const SYNTHESES_TOTAL: &str = "omnivoice_syntheses_total";
pub const VOICES_LOADED: &str = "omnivoice_voices_loaded";
pub const VOICE_LOADS: &str = "omnivoice_voice_loads_total";
pub const VOICE_UNLOADS: &str = "omnivoice_voice_unloads_total";
pub const VOICE_LOAD_SECONDS: &str = "omnivoice_voice_load_seconds";
pub const STREAM_ERRORS: &str = "omnivoice_stream_errors_total";
pub const UTTERANCE_PHONEME_IDS: &str = "omnivoice_utterance_phoneme_ids";
pub const UTTERANCES_SPLIT: &str = "omnivoice_utterances_split_total";
pub const KOKORO_PASS_TOKENS: &str = "omnivoice_kokoro_pass_tokens";
pub const PANICS: &str = "omnivoice_panics_total";
pub const REFERENCE_ENCODES: &str = "omnivoice_reference_encodes_total";

const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0];
/// Phoneme-id buckets before the engines add their limits to them ([`install`]).
const PHONEME_ID_BUCKETS: &[f64] = &[
    16.0, 32.0, 64.0, 128.0, 256.0, 384.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
];

/// Installs the global recorder once per process and returns the handle that renders it.
///
/// `phoneme_id_limits` are the engines' limits on phoneme ids (Piper) or tokens (Kokoro) per
/// model input, handed in by whoever assembles the server (this module sits below the engines
/// and knows none of them). Each becomes a bucket boundary of `omnivoice_utterance_phoneme_ids`
/// and `omnivoice_kokoro_pass_tokens`, so `le` at a limit equals the count when no model input
/// was longer. The first call in a process decides.
pub fn install(phoneme_id_limits: &[usize]) -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full(BATCH_SIZE.into()), BATCH_BUCKETS)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(OMNIVOICE_STEP_UTTERANCES.into()),
                        BATCH_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(UTTERANCE_PHONEME_IDS.into()),
                        &phoneme_id_buckets(phoneme_id_limits),
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(KOKORO_PASS_TOKENS.into()),
                        &phoneme_id_buckets(phoneme_id_limits),
                    )
                })
                .expect("bucket lists are non-empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (tests embedding several servers in one
            // process); then this handle renders nothing new, which only affects those tests.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

/// [`PHONEME_ID_BUCKETS`] with `limits` among them, in order.
fn phoneme_id_buckets(limits: &[usize]) -> Vec<f64> {
    let mut buckets: Vec<f64> = PHONEME_ID_BUCKETS
        .iter()
        .copied()
        .chain(limits.iter().map(|&limit| limit as f64))
        .collect();
    buckets.sort_by(f64::total_cmp);
    buckets.dedup();
    buckets
}

/// Adds to `omnivoice_audio_seconds_total`. Prometheus counters here are integers, so the
/// fractional part is carried over to the next call instead of being rounded away.
pub fn add_audio_seconds(seconds: f64) {
    static CARRY: parking_lot::Mutex<f64> = parking_lot::Mutex::new(0.0);
    let mut carry = CARRY.lock();
    *carry += seconds.max(0.0);
    let whole = carry.floor();
    *carry -= whole;
    metrics::counter!(AUDIO_SECONDS_TOTAL).increment(whole as u64);
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        REQUESTS_TOTAL,
        "Requests by front door (protocol: http, wyoming), route or event, and status."
    );
    describe_histogram!(
        REQUEST_DURATION_SECONDS,
        Unit::Seconds,
        "HTTP request duration."
    );
    describe_counter!(
        AUDIO_SECONDS_TOTAL,
        Unit::Seconds,
        "Seconds of audio returned to clients."
    );
    describe_histogram!(
        INFERENCE_SECONDS,
        Unit::Seconds,
        "Wall time of one batched forward pass."
    );
    describe_histogram!(BATCH_SIZE, "Utterances per batched forward pass.");
    describe_counter!(BATCHES_TOTAL, "Batched forward passes run.");
    describe_counter!(
        OMNIVOICE_STEPS,
        "OmniVoice decoding steps: one forward each, of every utterance in flight."
    );
    describe_histogram!(
        OMNIVOICE_STEP_UTTERANCES,
        "Utterances stepped together by one OmniVoice decoding step."
    );
    describe_gauge!(QUEUE_DEPTH, "Utterances waiting for an inference worker.");
    describe_histogram!(
        QUEUE_WAIT_SECONDS,
        Unit::Seconds,
        "Time an utterance waited in the queue."
    );
    describe_counter!(
        REJECTED,
        "Requests or utterances refused or dropped, by reason."
    );
    describe_counter!(CACHE_HITS, "Speech requests answered from the audio cache.");
    describe_counter!(CACHE_MISSES, "Speech requests that had to be synthesized.");
    describe_counter!(
        CACHE_COALESCED,
        "Speech requests that waited for an identical one in flight."
    );
    describe_counter!(
        CACHE_EVICTIONS,
        "Audio cache entries evicted for size or expiry."
    );
    describe_gauge!(CACHE_ENTRIES, "Entries in the audio cache.");
    describe_gauge!(CACHE_BYTES, Unit::Bytes, "Bytes held by the audio cache.");
    describe_counter!(
        CACHE_LAYER_HITS,
        "Cache lookups answered, by layer (memory, redis)."
    );
    describe_counter!(
        CACHE_LAYER_MISSES,
        "Cache lookups that found nothing, by layer (memory, redis)."
    );
    describe_counter!(
        REDIS_ERRORS,
        "Redis operations that failed, by operation and kind (timeout, connection, reply)."
    );
    describe_counter!(
        REDIS_SKIPPED,
        "Redis operations not attempted, by operation and reason (breaker_open, too_large)."
    );
    describe_counter!(
        REDIS_REFUSED,
        "Values read from Redis and ignored, by reason (foreign, other_version, other_key, corrupt)."
    );
    describe_counter!(
        REDIS_WAITS,
        "Waits for an identical request on another replica, by outcome (value, took_over, gave_up)."
    );
    describe_gauge!(
        REDIS_BREAKER_STATE,
        "Redis circuit breaker: 0 closed (in use), 1 open (skipped), 2 half-open (probing)."
    );
    describe_counter!(
        BATCH_REQUESTS_AVOIDED,
        "Requests the batcher never saw thanks to the cache."
    );
    describe_counter!(
        SYNTHESES_TOTAL,
        "Speech syntheses started (one per cache miss)."
    );
    describe_gauge!(VOICES_LOADED, "Voices currently loaded.");
    describe_counter!(
        REFERENCE_ENCODES,
        "Clips to clone a voice from, by result: encoded, or cached (codes kept from an earlier request)."
    );
    describe_counter!(VOICE_LOADS, "Voice loads by engine and voice.");
    describe_counter!(VOICE_UNLOADS, "Voice unloads by engine and voice.");
    describe_histogram!(VOICE_LOAD_SECONDS, Unit::Seconds, "Time to load a voice.");
    describe_counter!(
        STREAM_ERRORS,
        "Streamed responses that failed after the first byte."
    );
    describe_histogram!(
        UTTERANCE_PHONEME_IDS,
        "Phoneme ids per Piper model input: an utterance, or a piece of one cut to the limit."
    );
    describe_counter!(
        UTTERANCES_SPLIT,
        "Piper and Kokoro utterances cut into several model inputs for having too many phoneme ids or tokens."
    );
    describe_histogram!(
        KOKORO_PASS_TOKENS,
        "Tokens per Kokoro model input: an utterance, or a piece of one cut to the limit."
    );
    describe_counter!(
        PANICS,
        "HTTP handlers that panicked; each request was answered 500 (a bug to report)."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_limit_becomes_a_bucket_boundary_in_order() {
        let buckets = phoneme_id_buckets(&[768, 512]);
        let expected = [
            16.0, 32.0, 64.0, 128.0, 256.0, 384.0, 512.0, 768.0, 1024.0, 2048.0, 4096.0, 8192.0,
        ];
        assert_eq!(buckets, expected);
    }
}

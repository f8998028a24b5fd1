//! The second-level audio cache: Redis, shared by every replica of the server.
//!
//! One replica's synthesis answers identical requests on all of them, and two replicas that
//! get the same request at once synthesize it once: the first claims it with a short-lived
//! lock key (`SET NX PX`), the others poll for its value for a bounded time and then go
//! ahead on their own. Redis is an optimisation, never a dependency: every operation has a
//! timeout, a circuit breaker skips Redis entirely while it keeps failing, a command that finds
//! its connection broken goes once more on a new one (within the same timeout), and a value
//! that is not an intact envelope for its key is counted and ignored. Whatever goes wrong, the
//! request is answered by synthesizing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, FromRedisValue};
use serde::Serialize;

use super::breaker::{Breaker, Verdict};
use super::{envelope, CachedAudio, KeyHash};
use crate::config::RedisSettings;
use crate::metrics as m;

/// Longest pause between two looks for the value another replica is producing.
const MAX_POLL: Duration = Duration::from_millis(100);

/// Deletes the lock only while it still holds this request's token, so a request whose claim
/// expired never releases the claim of the replica that took over.
const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

pub struct SharedCache {
    connection: ConnectionManager,
    prefix: String,
    timeout: Duration,
    /// `None`: entries never expire (Redis' own eviction policy bounds them).
    ttl: Option<Duration>,
    max_entry_bytes: usize,
    lock_wait: Duration,
    breaker: Breaker,
}

/// What the shared cache says in `/health`.
#[derive(Debug, Clone, Serialize)]
pub struct SharedStats {
    pub breaker: &'static str,
    pub prefix: String,
}

/// What a first look in Redis found.
pub enum Lookup {
    Found(CachedAudio),
    Absent,
    /// Redis failed or is skipped: the request does without it from here on, so a failing
    /// Redis costs one request one timeout at most.
    Unavailable,
}

/// The answer to "may this replica synthesize the key for everyone?".
pub enum Claim {
    Won(Lock),
    /// The value arrived between the lookup and the claim (another replica just finished).
    Stored(CachedAudio),
    /// Another replica is producing it.
    Taken,
    /// Redis cannot say: synthesize without a claim.
    Unavailable,
}

/// What waiting for another replica's value gave.
pub enum Waited {
    Value(CachedAudio),
    /// Its claim went away without a value (it failed, or gave up): this replica holds it now.
    Claimed(Lock),
    /// Redis failed, or the wait ran out: synthesize without a claim.
    GaveUp,
}

/// A claim on a key; released when done with, or (dropped early) in the background.
pub struct Lock {
    shared: Arc<SharedCache>,
    key: String,
    token: String,
    held: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Report {
    Refusals,
    Nothing,
}

/// Why an operation gave no answer.
enum Failure {
    /// The breaker is open.
    Skipped,
    /// Redis timed out or the connection failed.
    Down,
    /// Redis answered with an error (a key of another type, say): it is up, the request is wrong.
    Answered(redis::RedisError),
}

impl SharedCache {
    /// A client for `settings.url` that connects lazily and reconnects by itself. Fails only on
    /// a URL the client cannot use. Must run inside the Tokio runtime.
    pub fn connect(settings: &RedisSettings, ttl_s: u64) -> redis::RedisResult<Arc<Self>> {
        let timeout = Duration::from_millis(settings.timeout_ms);
        let cooldown = Duration::from_millis(settings.breaker_cooldown_ms);
        let client = redis::Client::open(settings.url.as_str())?;
        // Reconnects happen in the background while requests go on without Redis, so they
        // may take longer than one operation; the breaker's cooldown paces the retries.
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(timeout))
            .set_connection_timeout(Some(timeout.max(Duration::from_millis(250))))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(cooldown);
        let connection = ConnectionManager::new_lazy_with_config(client, config)?;
        let shared = Arc::new(Self {
            connection,
            prefix: settings.prefix.clone(),
            timeout,
            ttl: (ttl_s > 0).then(|| Duration::from_secs(ttl_s)),
            max_entry_bytes: usize::try_from(settings.max_entry_mb.saturating_mul(1024 * 1024))
                .unwrap_or(usize::MAX),
            lock_wait: Duration::from_millis(settings.lock_wait_ms),
            breaker: Breaker::new(settings.breaker_failures, cooldown),
        });
        tokio::spawn({
            let shared = shared.clone();
            async move {
                match shared.run::<String>("ping", redis::cmd("PING")).await {
                    Ok(_) => tracing::info!(prefix = %shared.prefix, "redis audio cache connected"),
                    Err(_) => tracing::warn!(
                        "redis is unreachable; serving without the shared cache until it answers"
                    ),
                }
            }
        });
        Ok(shared)
    }

    /// The stored audio for `key`, if Redis has an intact value for it.
    pub async fn get(&self, key: &KeyHash) -> Lookup {
        match self.fetch(key, Report::Refusals).await {
            Ok(Some(audio)) => {
                layer_lookup(m::CACHE_LAYER_HITS);
                Lookup::Found(audio)
            }
            Ok(None) => {
                layer_lookup(m::CACHE_LAYER_MISSES);
                Lookup::Absent
            }
            Err(()) => Lookup::Unavailable,
        }
    }

    /// Stores `audio` under `key`, unless it is larger than one entry may be.
    pub async fn put(&self, key: &KeyHash, audio: &CachedAudio) {
        if audio.bytes.len() > self.max_entry_bytes {
            metrics::counter!(m::REDIS_SKIPPED, "op" => "set", "reason" => "too_large")
                .increment(1);
            return;
        }
        let mut set = redis::cmd("SET");
        set.arg(self.value_key(key)).arg(envelope::seal(key, audio));
        if let Some(ttl) = self.ttl {
            set.arg("PX").arg(ttl.as_millis() as u64);
        }
        let _ = self.run::<()>("set", set).await;
    }

    /// Claims `key` for this replica for at most the wait of the others. A won claim looks for
    /// the value once more: a replica that stored it and released its claim between this
    /// replica's lookup and claim must not be followed by a second synthesis.
    pub async fn claim(self: &Arc<Self>, key: &KeyHash) -> Claim {
        let lock_key = self.lock_key(key);
        let token = uuid::Uuid::new_v4().to_string();
        let mut set = redis::cmd("SET");
        set.arg(&lock_key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(self.lock_wait.as_millis() as u64);
        let lock = match self.run::<Option<String>>("lock", set).await {
            Ok(Some(_)) => Lock {
                shared: self.clone(),
                key: lock_key,
                token,
                held: true,
            },
            Ok(None) => return Claim::Taken,
            Err(_) => return Claim::Unavailable,
        };
        match self.fetch(key, Report::Nothing).await {
            Ok(Some(audio)) => {
                lock.release().await;
                Claim::Stored(audio)
            }
            Ok(None) => Claim::Won(lock),
            // Redis failed just now: the claim stands, the store after synthesis will tell.
            Err(()) => Claim::Won(lock),
        }
    }

    /// Waits for the value of a key another replica claimed: until it appears, the claim goes
    /// (then this replica claims it), Redis fails, or the wait runs out.
    pub async fn wait_for(self: &Arc<Self>, key: &KeyHash) -> Waited {
        let deadline = Instant::now() + self.lock_wait;
        let mut pause = Duration::from_millis(5);
        let waited = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Waited::GaveUp;
            }
            tokio::time::sleep(pause.min(left)).await;
            pause = (pause * 2).min(MAX_POLL);
            match self.fetch(key, Report::Nothing).await {
                Ok(Some(audio)) => break Waited::Value(audio),
                Ok(None) => {}
                Err(()) => break Waited::GaveUp,
            }
            match self.claim(key).await {
                Claim::Won(lock) => break Waited::Claimed(lock),
                Claim::Stored(audio) => break Waited::Value(audio),
                Claim::Taken => {}
                Claim::Unavailable => break Waited::GaveUp,
            }
        };
        let outcome = match &waited {
            Waited::Value(_) => "value",
            Waited::Claimed(_) => "took_over",
            Waited::GaveUp => "gave_up",
        };
        metrics::counter!(m::REDIS_WAITS, "outcome" => outcome).increment(1);
        waited
    }

    pub fn stats(&self) -> SharedStats {
        SharedStats {
            breaker: self.breaker.position().as_str(),
            prefix: self.prefix.clone(),
        }
    }

    /// The stored value, `Ok(None)` for none or one that is not ours, `Err` when Redis cannot say.
    /// Only a request's first look reports a bad value; its later looks see the same one.
    async fn fetch(&self, key: &KeyHash, report: Report) -> Result<Option<CachedAudio>, ()> {
        let value = match self
            .run::<Option<Vec<u8>>>("get", redis::cmd("GET").arg(self.value_key(key)).clone())
            .await
        {
            Ok(value) => value,
            Err(Failure::Answered(e)) if e.code() == Some("WRONGTYPE") => {
                if report == Report::Refusals {
                    refused("foreign");
                }
                return Ok(None);
            }
            Err(_) => return Err(()),
        };
        let Some(value) = value else {
            return Ok(None);
        };
        match envelope::open(key, Bytes::from(value)) {
            Ok(audio) => Ok(Some(audio)),
            Err(_) if report == Report::Nothing => Ok(None),
            Err(why) => {
                tracing::warn!(reason = %why, "ignoring a value in redis that is not an intact entry");
                refused(match why {
                    envelope::Refused::Foreign => "foreign",
                    envelope::Refused::OtherVersion => "other_version",
                    envelope::Refused::OtherKey => "other_key",
                    envelope::Refused::Corrupt => "corrupt",
                });
                Ok(None)
            }
        }
    }

    /// One command through the breaker and the timeout. A connection found broken (Redis
    /// restarted since the last command, or the last reconnect failed while it was down) is
    /// replaced by the connection manager only once a command fails on it, so the command goes
    /// once more on the new connection, within the same timeout: otherwise the first request
    /// after Redis comes back would do without it.
    async fn run<T: FromRedisValue>(
        &self,
        op: &'static str,
        command: redis::Cmd,
    ) -> Result<T, Failure> {
        if self.breaker.admit(Instant::now()) == Verdict::Skip {
            metrics::counter!(m::REDIS_SKIPPED, "op" => op, "reason" => "breaker_open")
                .increment(1);
            return Err(Failure::Skipped);
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut connection = self.connection.clone();
        let mut attempt =
            tokio::time::timeout_at(deadline, command.query_async::<T>(&mut connection)).await;
        let mut broke = false;
        if let Ok(Err(e)) = &attempt {
            if broken(e) {
                tracing::debug!(op, error = %e, "redis connection broken; trying a new one");
                broke = true;
                attempt =
                    tokio::time::timeout_at(deadline, command.query_async::<T>(&mut connection))
                        .await;
            }
        }
        let kind = match attempt {
            Ok(Ok(value)) => {
                self.breaker.succeeded();
                return Ok(value);
            }
            Ok(Err(e)) if answered(&e) => {
                self.breaker.succeeded();
                metrics::counter!(m::REDIS_ERRORS, "op" => op, "kind" => "reply").increment(1);
                tracing::debug!(op, error = %e, "redis refused a command");
                return Err(Failure::Answered(e));
            }
            Ok(Err(e)) => {
                tracing::debug!(op, error = %e, "redis command failed");
                if e.is_timeout() && !broke {
                    "timeout"
                } else {
                    "connection"
                }
            }
            // A new connection that could not be made in time: the cause is the broken one.
            Err(_) if broke => "connection",
            Err(_) => "timeout",
        };
        self.breaker.failed(Instant::now());
        metrics::counter!(m::REDIS_ERRORS, "op" => op, "kind" => kind).increment(1);
        Err(Failure::Down)
    }

    fn value_key(&self, key: &KeyHash) -> String {
        format!("{}{}", self.prefix, hex(key))
    }

    fn lock_key(&self, key: &KeyHash) -> String {
        format!("{}lock:{}", self.prefix, hex(key))
    }
}

impl Lock {
    /// Gives the claim up, so that replicas still waiting stop waiting.
    pub async fn release(mut self) {
        self.held = false;
        release(&self.shared, &self.key, &self.token).await;
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // The request went away mid-synthesis; waiting replicas should not wait out the claim.
        if self.held {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let (shared, key, token) =
                    (self.shared.clone(), self.key.clone(), self.token.clone());
                runtime.spawn(async move { release(&shared, &key, &token).await });
            }
        }
    }
}

async fn release(shared: &SharedCache, key: &str, token: &str) {
    let mut eval = redis::cmd("EVAL");
    eval.arg(RELEASE).arg(1).arg(key).arg(token);
    let _ = shared.run::<i64>("unlock", eval).await;
}

/// The connection failed under the command (not a slow answer): the connection manager has
/// begun replacing it, and the same command may go on the replacement. Every command here
/// may run twice: a claim that did reach Redis before the connection broke finds itself
/// taken, and the wait for it ends when the claim expires.
fn broken(e: &redis::RedisError) -> bool {
    (e.is_io_error() || e.is_unrecoverable_error()) && !e.is_timeout() && !answered(e)
}

/// Redis itself answered with the error: the server is reachable.
fn answered(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(_)
            | ErrorKind::Extension
            | ErrorKind::UnexpectedReturnType
            | ErrorKind::Parse
    ) && !e.is_io_error()
        && !e.is_timeout()
}

fn refused(reason: &'static str) {
    metrics::counter!(m::REDIS_REFUSED, "reason" => reason).increment(1);
}

fn layer_lookup(name: &'static str) {
    metrics::counter!(name, "layer" => "redis").increment(1);
}

fn hex(key: &KeyHash) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

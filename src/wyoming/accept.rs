//! The Wyoming listener: accepts connections up to a bound and runs a session for each.
//!
//! Bounding happens at accept time, so a flood of connections costs one small write and a
//! close each, not a task and buffers each.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::codec::Encoder;
use tokio_util::sync::CancellationToken;

use super::event::ServerEvent;
use super::frame::Codec;
use super::{serve_connection, Limits, Synthesizer};

/// Pause after a failed accept (out of file descriptors, say), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves Wyoming on `listener` until `shutdown` completes; then stops accepting, lets open
/// connections finish their current request for up to [`Limits::shutdown_grace`], and
/// returns.
pub async fn serve<S>(
    listener: TcpListener,
    synthesizer: Arc<S>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) where
    S: Synthesizer + ?Sized + 'static,
{
    let limits = Arc::new(limits);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let stop_sessions = CancellationToken::new();
    let mut sessions = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(finished) = sessions.join_next(), if !sessions.is_empty() => {
                if let Err(e) = finished {
                    tracing::error!(error = %e, "wyoming: a session task failed");
                }
            }
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "wyoming: accept failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    tracing::warn!(%peer, "wyoming: connection limit reached");
                    refuse_busy(stream, &limits);
                    continue;
                };
                // Audio chunks are small and latency matters more than packet count.
                let _ = stream.set_nodelay(true);
                let synthesizer = synthesizer.clone();
                let limits = limits.clone();
                let stop = stop_sessions.clone();
                sessions.spawn(async move {
                    let _slot = slot;
                    let (reader, writer) = stream.into_split();
                    serve_connection(&*synthesizer, reader, writer, &limits, &stop).await;
                });
            }
        }
    }
    stop_sessions.cancel();
    let drain = async { while sessions.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_grace, drain)
        .await
        .is_err()
    {
        tracing::warn!("wyoming: connections still busy after the shutdown grace; closing them");
        sessions.shutdown().await;
    }
}

/// Tells a connection over the limit why it is closed, without waiting: a fresh socket's send
/// buffer takes the few bytes at once, and a client that cannot take them loses only the
/// reason. The write goes straight to the socket (tokio's `try_write` would refuse until the
/// reactor has seen the new socket become writable).
fn refuse_busy(stream: tokio::net::TcpStream, limits: &Limits) {
    let mut bytes = BytesMut::new();
    let busy = ServerEvent::Error {
        code: "busy",
        text: format!("server busy: {} connections open", limits.max_connections),
    };
    if Codec::new(limits.frame())
        .encode(busy.into_raw(), &mut bytes)
        .is_ok()
    {
        if let Ok(mut stream) = stream.into_std() {
            // Still non-blocking: a full buffer fails the write instead of stalling the loop.
            let _ = std::io::Write::write(&mut stream, &bytes);
        }
    }
}

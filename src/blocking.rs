//! The one way work leaves the async threads.
//!
//! Tokio's workers serve every connection; anything that can take more than about a
//! millisecond (reading or hashing files, decoding, encoding) runs on the blocking pool
//! instead, through [`run`], so that one slow request never stalls the others queued on the
//! same worker. A panic there goes on on the caller's task, as if the work had run inline:
//! whoever catches the caller's panics (the HTTP handler's catcher) answers it.

/// `work`'s result, computed on the blocking pool.
pub async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Blocking tasks are cancelled only when the runtime shuts down, and nothing
            // waits for this answer then.
            Err(e) => panic!("blocking work cancelled: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_result_and_passes_a_panic_on() {
        assert_eq!(run(|| 6 * 7).await, 42);
        let panicked = tokio::spawn(run(|| -> u8 { panic!("inside the blocking pool") })).await;
        let panic = panicked.unwrap_err().into_panic();
        assert_eq!(
            panic.downcast_ref::<&str>(),
            Some(&"inside the blocking pool")
        );
    }
}

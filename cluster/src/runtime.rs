//! `SeededRuntime`: the openraft `AsyncRuntime` of every Baton group. It is tokio's runtime with one
//! difference: the randomness openraft draws (election timeouts) comes from a per-thread ChaCha
//! generator that [`seed_thread`] can fix. Production seeds it from the OS once per thread; the
//! simulator, which runs the whole cluster on one thread, seeds it from the run's seed so a run
//! replays exactly.

use openraft::async_runtime::TokioOneShotSender;
use openraft::{AsyncRuntime, OptionalSend, TokioInstant};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

thread_local! {
    static RNG: RefCell<ChaCha8Rng> = RefCell::new(ChaCha8Rng::from_entropy());
}

/// Makes every draw of openraft's randomness on this thread follow `seed`.
pub fn seed_thread(seed: u64) {
    RNG.with(|r| *r.borrow_mut() = ChaCha8Rng::seed_from_u64(seed));
}

/// tokio with a seedable per-thread generator.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SeededRuntime;

impl AsyncRuntime for SeededRuntime {
    type JoinError = tokio::task::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = tokio::task::JoinHandle<T>;
    type Sleep = tokio::time::Sleep;
    type Instant = TokioInstant;
    type TimeoutError = tokio::time::error::Elapsed;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = tokio::time::Timeout<T>;
    type ThreadLocalRng = ChaCha8Rng;
    type OneshotSender<T: OptionalSend> = TokioOneShotSender<T>;
    type OneshotReceiver<T: OptionalSend> = tokio::sync::oneshot::Receiver<T>;
    type OneshotReceiverError = tokio::sync::oneshot::error::RecvError;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        tokio::task::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        tokio::time::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        tokio::time::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        tokio::time::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        tokio::time::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        join_error.is_panic()
    }

    /// A generator forked from this thread's seeded one (each call advances the parent).
    fn thread_rng() -> Self::ThreadLocalRng {
        RNG.with(|r| ChaCha8Rng::seed_from_u64(r.borrow_mut().next_u64()))
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (TokioOneShotSender(tx), rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_thread_draws_the_same_sequence() {
        let draw = || -> Vec<u64> {
            (0..3)
                .map(|_| SeededRuntime::thread_rng().next_u64())
                .collect()
        };
        seed_thread(7);
        let first = draw();
        seed_thread(7);
        assert_eq!(first, draw());
        seed_thread(8);
        assert_ne!(first, draw());
    }
}

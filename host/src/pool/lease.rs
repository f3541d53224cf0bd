//! An instance checked out of the pool, and the work run on it.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;

use super::{DispatchError, Instance, Outcome, Pool};
use crate::runtime::{CallFailure, HandlerInstance};

/// An instance checked out of the pool for one request. If it is dropped
/// without being checked in (its task panicked), the instance is discarded
/// and a fresh one takes its place.
#[derive(Debug)]
pub struct Lease {
    pub(super) pool: Arc<Pool>,
    pub(super) instance: Option<Instance>,
    /// The instance's linear memory when it was leased.
    pub(super) memory_before: u64,
}

/// The answer of work spawned on a lease.
#[derive(Debug)]
pub struct Answer<T>(oneshot::Receiver<Result<T, CallFailure>>);

impl<T> Answer<T> {
    pub async fn wait(self) -> Result<T, DispatchError> {
        self.0
            .await
            .map_err(|_| DispatchError::Lost)?
            .map_err(DispatchError::from)
    }
}

impl Lease {
    /// Run `work` on the leased instance in a task of its own, so a client
    /// that hangs up cannot cancel storage work half-way (nor leave an
    /// instance mid-call). The answer is sent before the instance is checked
    /// back in, so the client never waits for a replacement to be made.
    pub fn spawn<T, W>(mut self, work: W) -> Answer<T>
    where
        T: Send + 'static,
        W: for<'a> FnOnce(&'a mut HandlerInstance) -> BoxFuture<'a, Result<T, CallFailure>>
            + Send
            + 'static,
    {
        let (answer, answered) = oneshot::channel();
        tokio::spawn(async move {
            let Some(instance) = self.instance.as_mut() else {
                return;
            };
            let result = work(&mut instance.handler).await;
            let outcome = match &result {
                Ok(_) => Outcome::Served {
                    memory_before: self.memory_before,
                },
                Err(failure) => Outcome::Failed(failure.clone()),
            };
            let _ = answer.send(result);
            self.check_in(outcome).await;
        });
        Answer(answered)
    }

    /// [`Lease::spawn`] and wait for the answer.
    pub async fn run<T, W>(self, work: W) -> Result<T, DispatchError>
    where
        T: Send + 'static,
        W: for<'a> FnOnce(&'a mut HandlerInstance) -> BoxFuture<'a, Result<T, CallFailure>>
            + Send
            + 'static,
    {
        self.spawn(work).wait().await
    }

    /// Give the instance back unused.
    pub async fn release(self) {
        self.check_in(Outcome::Unused).await;
    }

    async fn check_in(mut self, outcome: Outcome) {
        if let Some(instance) = self.instance.take() {
            self.pool.check_in(instance, outcome).await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(instance) = self.instance.take() {
            let pool = self.pool.clone();
            tracing::error!(
                instance = instance.info.id,
                "an instance was lost mid-request; replacing it"
            );
            pool.retire(instance);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    match pool.create().await {
                        Ok(fresh) => pool.make_idle(fresh),
                        Err(error) => tracing::error!(%error, "could not replace a lost instance"),
                    }
                });
            }
        }
    }
}

//! Registration hooks (upstream's `NodeLifecycleHook`): a provider may hold a NodeClaim's
//! registration until conditions of its own hold (a capacity reservation bound, a label it
//! resolves once the instance runs). Until every hook is ready the Node keeps the
//! `karpenter.sh/unregistered` taint and the claim's `Registered` condition stays Unknown with
//! the reason `RegistrationHookPending`, naming the hooks that wait.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use karpenter_api::NodeClaim;

use crate::Result;

/// What one hook says of a claim whose Node has appeared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookResult {
    /// `None`: ready. `Some(after)`: not yet; the controller asks again within `after` (or
    /// on its resync when `None`), sooner when the claim or its Node changes.
    pub pending: Option<Option<Duration>>,
    /// Labels the hook resolved, set on the NodeClaim and on its Node.
    pub labels: BTreeMap<String, String>,
}

impl HookResult {
    /// Ready, nothing to add.
    pub fn ready() -> Self {
        Self::default()
    }

    /// Not ready yet; look again after `after`.
    pub fn pending_for(after: Duration) -> Self {
        Self {
            pending: Some(Some(after)),
            labels: BTreeMap::new(),
        }
    }
}

/// A future a hook answers with.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = Result<HookResult>> + Send + 'a>>;

/// A condition registration waits for. Hooks are asked together, each time registration is
/// tried, until all are ready.
pub trait RegistrationHook: Send + Sync {
    /// Its name, as the `Registered` condition lists the hooks that wait.
    fn name(&self) -> &str;
    /// Whether `claim` may register now.
    fn registered<'a>(&'a self, claim: &'a NodeClaim) -> HookFuture<'a>;
}

//! Where a provider reads its NodeClasses: the API server in the controller, a fixed map in
//! tests and offline runs.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;

use serde::de::DeserializeOwned;

/// A source of NodeClasses of kind `T`, by name.
pub trait NodeClasses<T>: Send + Sync + 'static {
    /// The NodeClass named `name`, if it exists.
    fn node_class(&self, name: &str) -> impl Future<Output = Result<Option<T>, String>> + Send;
}

/// The API server, as the controller reads it.
impl<T> NodeClasses<T> for kube::Api<T>
where
    T: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    async fn node_class(&self, name: &str) -> Result<Option<T>, String> {
        self.get_opt(name).await.map_err(|e| e.to_string())
    }
}

/// Fixed NodeClasses by name, for tests and offline runs.
impl<T: Clone + Send + Sync + 'static> NodeClasses<T> for BTreeMap<String, T> {
    async fn node_class(&self, name: &str) -> Result<Option<T>, String> {
        Ok(self.get(name).cloned())
    }
}

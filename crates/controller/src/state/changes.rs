//! What changed in an index since a loop last looked: the keys, or everything after a relist.
//! The state's indexes tell their subscribers; the work queues read them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

/// Keys of an index that changed since they were last taken; every key after a relist.
#[derive(Debug, Default)]
pub struct Changes {
    keys: Mutex<(HashSet<String>, bool)>,
    notify: Notify,
}

impl Changes {
    /// Records a changed key.
    pub fn key(&self, key: &str) {
        self.lock().0.insert(key.to_string());
        self.notify.notify_one();
    }

    /// Records that every key may have changed (a relist).
    pub fn all(&self) {
        self.lock().1 = true;
        self.notify.notify_one();
    }

    /// The keys changed since the last call, and whether everything did.
    pub fn take(&self) -> (HashSet<String>, bool) {
        std::mem::take(&mut *self.lock())
    }

    /// Waits for the next change.
    pub async fn changed(&self) {
        self.notify.notified().await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashSet<String>, bool)> {
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The subscribers of an index.
#[derive(Debug, Default)]
pub struct Subscribers(Mutex<Vec<Weak<Changes>>>);

impl Subscribers {
    /// A new subscription.
    pub fn subscribe(&self) -> Arc<Changes> {
        let changes = Arc::new(Changes::default());
        self.lock().push(Arc::downgrade(&changes));
        changes
    }

    /// Tells every live subscriber `key` changed.
    pub fn key(&self, key: &str) {
        self.lock().retain(|w| match w.upgrade() {
            Some(c) => {
                c.key(key);
                true
            }
            None => false,
        });
    }

    /// Tells every live subscriber everything may have changed.
    pub fn all(&self) {
        self.lock().retain(|w| match w.upgrade() {
            Some(c) => {
                c.all();
                true
            }
            None => false,
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Changes>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_collect_keys_until_taken() {
        let subscribers = Subscribers::default();
        let changes = subscribers.subscribe();
        subscribers.key("a");
        subscribers.key("a");
        subscribers.key("b");
        let (keys, all) = changes.take();
        assert_eq!(keys.len(), 2);
        assert!(!all);
        subscribers.all();
        assert!(changes.take().1);
        drop(changes);
        subscribers.key("c");
        assert!(subscribers.lock().is_empty(), "dropped subscriptions go");
    }
}

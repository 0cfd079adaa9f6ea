//! Randomness for signature nonces. Alibaba refuses a nonce it has seen (`SignatureNonceUsed`),
//! so every attempt is signed afresh with a new one, through the shared client's
//! `send_rebuilt_with_retries`.

/// 64 random-enough bits: `RandomState` is seeded from the OS per instance, and the counter and
/// clock make two draws in the same instant differ.
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// A signature nonce: 32 hex digits, different for every request.
pub(crate) fn nonce() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_differ() {
        let nonces: std::collections::BTreeSet<String> = (0..1000).map(|_| nonce()).collect();
        assert_eq!(nonces.len(), 1000);
        assert!(nonces.iter().all(|n| n.len() == 32));
    }
}

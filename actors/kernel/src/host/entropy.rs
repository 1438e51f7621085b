//! Random bytes from the host (keys, ids), and a seeded source for tests and
//! the simulator so that a seed replays exactly.

use std::sync::Mutex;

use crate::maybe_send::{MaybeSend, MaybeSync};

/// A source of random bytes. Natively the OS; in the browser `crypto.getRandomValues`.
pub trait Entropy: MaybeSend + MaybeSync {
    fn fill(&self, buf: &mut [u8]);
}

/// A fresh 256-bit key (for a run's `Authority`).
pub fn random_key(entropy: &dyn Entropy) -> [u8; 32] {
    let mut key = [0u8; 32];
    entropy.fill(&mut key);
    key
}

/// A fresh identifier: `prefix` then 16 random bytes in hex.
pub fn random_id(entropy: &dyn Entropy, prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    entropy.fill(&mut bytes);
    format!("{prefix}{}", hex::encode(bytes))
}

/// Deterministic bytes from a seed (SplitMix64). For tests and simulation only:
/// never for keys that guard anything real.
pub struct SeededEntropy {
    state: Mutex<u64>,
}

impl SeededEntropy {
    pub fn new(seed: u64) -> Self {
        Self {
            state: Mutex::new(seed),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        let Ok(mut s) = self.state.lock() else {
            return 0;
        };
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Entropy for SeededEntropy {
    fn fill(&self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

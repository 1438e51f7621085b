//! Key ranges for IndexedDB prefix scans: the exclusive upper bound of the
//! keys that start with a prefix. Pure, so native unit tests cover it.

/// The exclusive upper bound of every byte string that starts with `prefix`
/// (the prefix with its last non-0xFF byte incremented), or `None` when no
/// such bound exists (empty prefix, or only 0xFF bytes).
pub fn prefix_upper_bound(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut upper = prefix.to_vec();
    while let Some(last) = upper.pop() {
        if last < u8::MAX {
            upper.push(last + 1);
            return Some(upper);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_bounds_cover_exactly_the_prefix() {
        assert_eq!(prefix_upper_bound(b""), None);
        assert_eq!(prefix_upper_bound(b"run1"), Some(b"run2".to_vec()));
        assert_eq!(prefix_upper_bound(b"run1/"), Some(b"run10".to_vec()));
        assert_eq!(prefix_upper_bound(&[b'a', 0xFF]), Some(vec![b'b']));
        assert_eq!(prefix_upper_bound(&[0xFF, 0xFF]), None);
    }
}

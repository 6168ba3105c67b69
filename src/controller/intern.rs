//! Shared copies of the strings many records repeat (pure): every object of a namespace holds
//! one `Arc<str>` of the namespace's name instead of a `String` of its own.

use std::collections::HashSet;
use std::sync::Arc;

/// A set of shared strings.
#[derive(Debug, Default)]
pub struct Interner {
    names: HashSet<Arc<str>>,
}

impl Interner {
    /// The shared copy of `name` (kept while anything holds it, see [`Interner::prune`]).
    pub fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.names.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = name.into();
        self.names.insert(shared.clone());
        shared
    }

    /// Forgets the strings nothing else holds any more.
    pub fn prune(&mut self) {
        self.names.retain(|name| Arc::strong_count(name) > 1);
    }

    /// How many strings are kept.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_names_share_one_allocation_until_nothing_holds_it() {
        let mut interner = Interner::default();
        let a = interner.intern("shop");
        let b = interner.intern("shop");
        assert!(Arc::ptr_eq(&a, &b));
        let other = interner.intern("bank");
        assert_eq!(interner.len(), 2);
        drop(other);
        interner.prune();
        assert_eq!(interner.len(), 1, "bank is held by nothing else");
        drop((a, b));
        interner.prune();
        assert!(interner.is_empty());
    }
}

//! The key of a JSON object as the core's readers take it: borrowed from the input unless it
//! holds escapes. The readers that share it (`parts`, `pod` and `skim`) import it from here,
//! and it imports none of them, so that imports inside the core run one way.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::Visitor;

/// A JSON object key, borrowed from the input unless it holds escapes.
#[derive(Debug, Clone)]
pub struct Key<'a>(Cow<'a, str>);

impl Key<'_> {
    /// The key's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

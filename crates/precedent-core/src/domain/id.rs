//! The contract's ids as types of their own: a value of one of them has
//! passed [`check_id`], so code that holds one never checks it again, and
//! a user id cannot be passed where a session id is meant. A
//! [`SessionKey`] names one session of one user.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use super::check::{Invalid, check_id};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id, when it is not empty and at most
            #[doc = concat!("[`MAX_ID_BYTES`](super::MAX_ID_BYTES) long; the error names `", $field, "`.")]
            pub fn new(id: impl Into<String>) -> Result<$name, Invalid> {
                let id = id.into();
                check_id($field, &id)?;
                Ok($name(id))
            }

            /// An id read back from the store, which holds only ids that
            /// passed the check when they were added: not checked again.
            /// For stored values only; anything else goes through
            #[doc = concat!("[`", stringify!($name), "::new`].")]
            pub fn from_stored(id: impl Into<String>) -> $name {
                $name(id.into())
            }

            /// The id's text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// An Add's idempotency key, unique per user.
    RequestId,
    "request_id"
);
id_type!(
    /// A scope: the isolation boundary. One user's data never answers
    /// another's search.
    UserId,
    "user_id"
);
id_type!(
    /// The trajectory (session) that an Add's messages belong to.
    SessionId,
    "session_id"
);

/// One session of one user: the key of everything kept per session.
/// Ordered by user, then session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// The session's user.
    pub user_id: UserId,
    /// The session.
    pub session_id: SessionId,
}

impl SessionKey {
    /// The key of `session_id` of `user_id`.
    pub fn new(user_id: UserId, session_id: SessionId) -> SessionKey {
        SessionKey {
            user_id,
            session_id,
        }
    }

    /// A key read back from the store (see [`UserId::from_stored`]).
    pub fn from_stored(user_id: impl Into<String>, session_id: impl Into<String>) -> SessionKey {
        SessionKey::new(
            UserId::from_stored(user_id),
            SessionId::from_stored(session_id),
        )
    }
}

/// Ids for tests, built through the check (feature `testing`, which other
/// crates' tests turn on).
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use super::{SessionId, SessionKey, UserId};

    /// A user id; the text must be a valid one.
    pub fn uid(id: &str) -> UserId {
        UserId::new(id).expect("a valid user id")
    }

    /// A session id; the text must be a valid one.
    pub fn sid(id: &str) -> SessionId {
        SessionId::new(id).expect("a valid session id")
    }

    /// A session key; both texts must be valid ids.
    pub fn key(user_id: &str, session_id: &str) -> SessionKey {
        SessionKey::new(uid(user_id), sid(session_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::MAX_ID_BYTES;

    #[test]
    fn session_keys_order_as_their_texts_do() {
        let pairs = [("b", "a"), ("a", "b"), ("ab", "a"), ("a", "ab"), ("a", "a")];
        let mut texts = pairs.to_vec();
        texts.sort();
        let mut keys: Vec<SessionKey> = pairs
            .iter()
            .map(|(user_id, session_id)| testing::key(user_id, session_id))
            .collect();
        keys.sort();
        let keys: Vec<(&str, &str)> = keys
            .iter()
            .map(|key| (key.user_id.as_str(), key.session_id.as_str()))
            .collect();
        assert_eq!(keys, texts);
    }

    #[test]
    fn an_id_is_built_only_from_valid_text() {
        assert_eq!(
            UserId::new("alice").map(|id| id.to_string()),
            Ok("alice".to_string())
        );
        assert_eq!(UserId::new("").unwrap_err().field, "user_id");
        assert_eq!(SessionId::new("").unwrap_err().field, "session_id");
        let long = "i".repeat(MAX_ID_BYTES + 1);
        assert_eq!(RequestId::new(long).unwrap_err().field, "request_id");
        assert!(RequestId::new("i".repeat(MAX_ID_BYTES)).is_ok());
    }
}

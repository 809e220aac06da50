//! The contract's ids as types of their own: a value of one of them has
//! passed [`check_id`], so code that holds one never checks it again, and
//! a user id cannot be passed where a session id is meant.

use std::fmt;
use std::ops::Deref;

use super::check::{Invalid, check_id};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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

            /// The id's text.
            pub fn as_str(&self) -> &str {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::MAX_ID_BYTES;

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

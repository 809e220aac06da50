//! store::pool: "lend me a read connection." Idle read connections of one
//! store, shared by whoever reads it: searches, inspection, health, and the
//! checks and derivations of Adds before the writer.

use std::sync::Mutex;

use super::{StoreConn, StoreError, StoreLocation};

/// Idle read connections the pool keeps.
const MAX_IDLE_READERS: usize = 16;

/// Read connections to the store at one location: taken for one read, given
/// back after it, opened when none is idle.
#[derive(Debug)]
pub struct ReaderPool {
    location: StoreLocation,
    /// Idle read connections. A std mutex: held only to push or pop.
    idle: Mutex<Vec<StoreConn>>,
}

impl ReaderPool {
    /// An empty pool of read connections to the store at `location`.
    pub fn new(location: StoreLocation) -> ReaderPool {
        ReaderPool {
            location,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Where the pool's store is.
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// Runs `read` with a pooled read connection.
    pub fn with_reader<T, E: From<StoreError>>(
        &self,
        read: impl FnOnce(&StoreConn) -> Result<T, E>,
    ) -> Result<T, E> {
        let conn = self.take()?;
        let result = read(&conn);
        self.give_back(conn);
        result
    }

    /// A read connection from the pool, or a new one. Connections the
    /// store closed meanwhile (a PostgreSQL restart) are dropped.
    fn take(&self) -> Result<StoreConn, StoreError> {
        loop {
            let pooled = self.idle.lock().ok().and_then(|mut idle| idle.pop());
            match pooled {
                Some(conn) if conn.is_broken() => continue,
                Some(conn) => return Ok(conn),
                None => return self.location.open_reader(),
            }
        }
    }

    /// Gives a read connection back to the pool, unless it broke.
    fn give_back(&self, conn: StoreConn) {
        if conn.is_broken() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE_READERS
        {
            idle.push(conn);
        }
    }
}

//! local: the per-user server that `mcp`, `import` and `hook` share, so
//! that any number of agents and imports use one data directory at once.
//!
//! [`attach`] answers the address of the server holding a data directory,
//! starting one on first use: `precedent serve` on a free loopback port,
//! detached (its own session, stdio to `server.log` in the data
//! directory). A server records where it listens in `server.json` in the
//! data directory once it listens; a file lock on `server.lock` makes two
//! first uses that race start one server.
//!
//! A recorded server is trusted only when it proves it holds the record's
//! key: the client's `GET /health` carries a fresh random challenge
//! ([`CHALLENGE_HEADER`]) and nothing else, and the answer must carry the
//! challenge's HMAC under that key ([`PROOF_HEADER`]) within a second.
//! Whatever listens on a dead server's port (another user's process, say)
//! cannot answer it, so the record is replaced, never trusted; a server
//! that was killed is replaced by the next call, and nothing it
//! acknowledged is lost (an Add is answered after its SQLite commit).
//!
//! An auto-started server requires a key that only the data directory's
//! owner can read (`server.json` is created `0600`), exits after an idle
//! time, and exits when its record is removed or replaced.
//!
//! What it leaves to others: serving (`cli::serve`), the HTTP calls of the
//! tools and the import (`mcp`, `import::sink`).

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The file where a server on the data directory records its address.
pub const RECORD_FILE: &str = "server.json";
/// The file locked while a server is being started.
pub const START_LOCK_FILE: &str = "server.lock";
/// The log of the auto-started server.
pub const LOG_FILE: &str = "server.log";
/// Set (to anything but `0` or empty) to open the data directory directly
/// instead of attaching to a server, as `--no-server` does.
pub const NO_AUTOSTART_ENV: &str = "PRECEDENT_NO_AUTOSTART";
/// The idle time after which an auto-started server exits, unless
/// `PRECEDENT_IDLE_EXIT` says otherwise (`90s`, `30m`, `2h`).
pub const DEFAULT_IDLE_EXIT: Duration = Duration::from_secs(30 * 60);
/// The environment variable that sets the auto-started server's idle time.
pub const IDLE_EXIT_ENV: &str = "PRECEDENT_IDLE_EXIT";
/// How long [`attach`] waits for a server it started to answer.
pub const START_DEADLINE: Duration = Duration::from_secs(30);
/// The header of a client's challenge to a recorded server: random hex.
pub const CHALLENGE_HEADER: &str = "x-precedent-challenge";
/// The header of a server's answer: [`proof`] of the challenge.
pub const PROOF_HEADER: &str = "x-precedent-proof";
/// The longest challenge a server answers.
pub const MAX_CHALLENGE_LEN: usize = 128;
/// How long a recorded server has to answer its health check.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);
/// A log past this size is started afresh when a server starts.
const MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;
/// Lines of the log quoted when a server fails to start.
const LOG_LINES_QUOTED: usize = 12;
/// Environment a started server must not inherit from its caller: it
/// listens on loopback with its own key, without TLS, on the data
/// directory's SQLite store.
const ENVIRONMENT_NOT_INHERITED: &[&str] = &[
    "PRECEDENT_LISTEN",
    "PRECEDENT_STORE",
    "PRECEDENT_API_KEY",
    "PRECEDENT_API_KEY_FILE",
    "PRECEDENT_KEYS_FILE",
    "PRECEDENT_KEY_RATE_LIMIT",
    "PRECEDENT_TLS_CERT",
    "PRECEDENT_TLS_KEY",
    "PRECEDENT_RETENTION_DAYS",
];

/// What a server writes to [`RECORD_FILE`] once it listens.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerRecord {
    /// Where to reach it (`http://127.0.0.1:PORT`).
    pub url: String,
    /// Its process id.
    pub pid: u32,
    /// Whether [`attach`] started it (then it exits when idle).
    pub auto_started: bool,
    /// The key it requires, when it was auto-started with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The secret it proves itself with ([`proof`]): random, of this
    /// process alone. A record without one is never trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// A server to send requests to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// Whether this call started it.
    pub started: bool,
    /// The record it was proven against (its address and key), to prove
    /// it again.
    record: ServerRecord,
}

impl Attached {
    /// Its base URL.
    pub fn url(&self) -> &str {
        &self.record.url
    }

    /// The key it requires, if any.
    pub fn api_key(&self) -> Option<&str> {
        self.record.api_key.as_deref()
    }

    /// Whether the server is still the one that was attached to: alive,
    /// and still proving the record's secret.
    pub fn still_proven(&self) -> bool {
        proven(&self.record)
    }
}

/// Why no server could be attached to.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The data directory, its lock or its log cannot be used.
    #[error("cannot use the data directory {path}: {source}")]
    DataDir {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The server process could not be started.
    #[error("cannot start `precedent serve`: {0}")]
    Spawn(std::io::Error),
    /// The server exited before it answered.
    #[error("the local server exited at start-up ({status}); its log {log} ends:\n{tail}")]
    ExitedAtStart {
        /// Its exit status.
        status: String,
        /// Its log file.
        log: String,
        /// The log's last lines.
        tail: String,
    },
    /// The server did not answer within [`START_DEADLINE`].
    #[error(
        "the local server started but did not answer within {} s; it may still be starting: see {log}",
        START_DEADLINE.as_secs()
    )]
    Timeout {
        /// Its log file.
        log: String,
    },
}

/// Whether the environment asks commands to open the data directory
/// directly ([`NO_AUTOSTART_ENV`]).
pub fn autostart_disabled() -> bool {
    std::env::var_os(NO_AUTOSTART_ENV).is_some_and(|value| !value.is_empty() && value != "0")
}

/// The server holding `data_dir`, started if none answers. Blocking.
pub fn attach(data_dir: &Path) -> Result<Attached, LocalError> {
    let data_dir_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LocalError::DataDir { path, source }
    };
    precedent_core::files::private_dir(data_dir).map_err(data_dir_error(data_dir))?;
    let data_dir = data_dir.canonicalize().map_err(data_dir_error(data_dir))?;
    if let Some(attached) = recorded_and_alive(&data_dir) {
        return Ok(attached);
    }
    let lock_path = data_dir.join(START_LOCK_FILE);
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(data_dir_error(&lock_path))?;
    // Blocks while another process starts a server; that one is then
    // found below. The lock is released when `lock` is dropped.
    lock.lock().map_err(data_dir_error(&lock_path))?;
    if let Some(attached) = recorded_and_alive(&data_dir) {
        return Ok(attached);
    }
    start(&data_dir)
}

/// The recorded server, if it proves it is the one that wrote the record.
fn recorded_and_alive(data_dir: &Path) -> Option<Attached> {
    let record = read_record(data_dir)?;
    proven(&record).then_some(Attached {
        started: false,
        record,
    })
}

/// The record of the server on `data_dir`, if there is one that reads.
pub fn read_record(data_dir: &Path) -> Option<ServerRecord> {
    let text = std::fs::read(data_dir.join(RECORD_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Records `record` for `data_dir` (readable by its owner only: it may
/// hold a key), replacing any earlier record at once.
pub fn write_record(data_dir: &Path, record: &ServerRecord) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = data_dir.join(format!("{RECORD_FILE}.{}.tmp", record.pid));
    let text = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    {
        let mut file = std::fs::File::options()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(&text)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, data_dir.join(RECORD_FILE))
}

/// Removes the record of `data_dir` if it names process `pid` (a server
/// leaving; a later server's record stays).
pub fn remove_record(data_dir: &Path, pid: u32) {
    if read_record(data_dir).is_some_and(|record| record.pid == pid) {
        let _ = std::fs::remove_file(data_dir.join(RECORD_FILE));
    }
}

/// Asks the auto-started server that holds `data_dir` to exit (SIGTERM),
/// once it has proven it is the one its record names, and waits up to
/// `wait` for it to be gone. Its record when it was asked and is gone;
/// `None` when the record names no auto-started server that proves itself
/// (a server started by hand is never stopped).
pub fn stop_auto_started(data_dir: &Path, wait: Duration) -> Option<ServerRecord> {
    let record = read_record(data_dir).filter(|record| record.auto_started)?;
    if !proven(&record) {
        return None;
    }
    let pid = libc::pid_t::try_from(record.pid)
        .ok()
        .filter(|pid| *pid > 0)?;
    // SAFETY: a plain signal to the process that proved it holds the
    // record's secret: the local server of this data directory.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        return None;
    }
    let deadline = Instant::now() + wait;
    while process_alive(record.pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    (!process_alive(record.pid)).then_some(record)
}

/// The server `data_dir`'s record names, if it is alive and proves it is
/// the one that wrote the record.
pub fn proven_record(data_dir: &Path) -> Option<ServerRecord> {
    recorded_and_alive(data_dir).map(|attached| attached.record)
}

/// The answer to `challenge` of a server holding `secret`: HMAC-SHA256 of
/// the challenge under the secret, in hex.
pub fn proof(secret: &str, challenge: &str) -> String {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(b"precedent local server proof\0");
    mac.update(challenge.as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Whether the server `record` names is alive and proves it holds the
/// record's secret, within [`HEALTH_TIMEOUT`]. The request carries the
/// challenge alone: no key, no user data.
fn proven(record: &ServerRecord) -> bool {
    let Some(secret) = &record.secret else {
        return false;
    };
    if !process_alive(record.pid) {
        return false;
    }
    let Ok(challenge) = random_key() else {
        return false;
    };
    let agent = crate::client::agent(HEALTH_TIMEOUT);
    let Ok(response) = agent
        .get(format!("{}/health", record.url))
        .header(CHALLENGE_HEADER, &challenge)
        .call()
    else {
        return false;
    };
    if response.status().as_u16() != 200 {
        return false;
    }
    let expected = proof(secret, &challenge);
    response
        .headers()
        .get(PROOF_HEADER)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|answered| constant_time_eq(answered.as_bytes(), expected.as_bytes()))
}

/// Whether process `pid` exists (of any user: a signal-0 probe that is
/// refused still says it exists).
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks the pid.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Compares two byte strings in time that does not depend on where they
/// differ.
fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// Starts `precedent serve` on `data_dir` and waits until it answers.
fn start(data_dir: &Path) -> Result<Attached, LocalError> {
    let started_at = Instant::now();
    let log_path = data_dir.join(LOG_FILE);
    let log = open_log(&log_path).map_err(|source| LocalError::DataDir {
        path: log_path.clone(),
        source,
    })?;
    let log_error = |source| LocalError::DataDir {
        path: log_path.clone(),
        source,
    };
    let api_key = random_key().map_err(LocalError::Spawn)?;
    let idle_exit = std::env::var(IDLE_EXIT_ENV)
        .ok()
        .filter(|value| parse_duration(value).is_ok())
        .unwrap_or_else(|| format!("{}s", DEFAULT_IDLE_EXIT.as_secs()));
    let executable = std::env::current_exe().map_err(LocalError::Spawn)?;
    let mut command = std::process::Command::new(executable);
    command
        .arg("serve")
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--idle-exit")
        .arg(&idle_exit)
        .arg("--auto-started")
        .current_dir(data_dir)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(log_error)?)
        .stderr(log);
    for name in ENVIRONMENT_NOT_INHERITED {
        command.env_remove(name);
    }
    // The key reaches the server through its environment, which other
    // users cannot read (its command line they can).
    command.env("PRECEDENT_API_KEY", &api_key);
    detach(&mut command);
    let mut child = command.spawn().map_err(LocalError::Spawn)?;
    let pid = child.id();
    let log_name = log_path.display().to_string();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(LocalError::ExitedAtStart {
                status: status.to_string(),
                tail: log_tail(&log_path),
                log: log_name,
            });
        }
        if let Some(record) = read_record(data_dir)
            && record.pid == pid
            && proven(&record)
        {
            tracing::info!(
                url = %record.url,
                pid,
                elapsed_ms = started_at.elapsed().as_millis() as u64,
                "started the local server"
            );
            // Reaped when it exits, however long this process lives.
            std::thread::spawn(move || child.wait());
            return Ok(Attached {
                started: true,
                record,
            });
        }
        if started_at.elapsed() >= START_DEADLINE {
            std::thread::spawn(move || child.wait());
            return Err(LocalError::Timeout { log: log_name });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server runs in a session of its own: a terminal's hangup or
/// Ctrl-C reaches the command that started it, not the server.
fn detach(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no memory of the
    // parent; it runs in the child between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The log, appended to; started afresh past [`MAX_LOG_BYTES`].
fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    let too_large = std::fs::metadata(path).is_ok_and(|metadata| metadata.len() > MAX_LOG_BYTES);
    std::fs::File::options()
        .create(true)
        .append(!too_large)
        .write(true)
        .truncate(too_large)
        .open(path)
}

/// The last lines of the log.
fn log_tail(path: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let length = file.metadata().map_or(0, |metadata| metadata.len());
    let _ = file.seek(std::io::SeekFrom::Start(length.saturating_sub(16 * 1024)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_LINES_QUOTED)..].join("\n")
}

/// A key of 128 random bits, in hex.
pub fn random_key() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Waits until the index of `data_dir` has committed everything the
/// server at `url` has made searchable, so that a command reading the data
/// directory directly (`precedent search`) sees it; gives up after
/// `deadline` (the server commits about once a second).
pub fn wait_for_index_commit(data_dir: &Path, url: &str, deadline: Duration) -> bool {
    let agent = crate::client::agent(HEALTH_TIMEOUT);
    let Some(visible_seq) = agent
        .get(format!("{url}/health"))
        .call()
        .ok()
        .and_then(|mut response| response.body_mut().read_json::<serde_json::Value>().ok())
        .and_then(|health| health["indexed_seq"].as_i64())
    else {
        return false;
    };
    let started = Instant::now();
    while precedent_index::committed_seq(data_dir) < visible_seq {
        if started.elapsed() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// `90s`, `30m`, `2h`, `1d` or plain seconds (`120`) as a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|character: char| !character.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 90s, 30m, 2h)"))?;
    let seconds_per_unit = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: the unit is s, m, h or d")),
    };
    let seconds = number
        .checked_mul(seconds_per_unit)
        .ok_or_else(|| format!("{text:?} is too long"))?;
    if seconds == 0 {
        return Err("the idle time must be at least one second".to_string());
    }
    Ok(Duration::from_secs(seconds))
}

/// A server on a data directory that [`LocalServer::reattach`] replaces
/// when it is gone: what a long-lived client (`mcp`) holds.
pub struct LocalServer {
    data_dir: PathBuf,
    // A std Mutex: held only to clone or replace the address, never
    // across a request.
    current: std::sync::Mutex<Attached>,
    /// The current server was proven by the attach that found it, and no
    /// request went to it since: the next one need not prove it again.
    just_proven: std::sync::atomic::AtomicBool,
}

impl LocalServer {
    /// Attaches to the server on `data_dir`, starting it if needed.
    pub fn attach(data_dir: &Path) -> Result<LocalServer, LocalError> {
        let attached = attach(data_dir)?;
        Ok(LocalServer {
            data_dir: data_dir.to_path_buf(),
            current: std::sync::Mutex::new(attached),
            just_proven: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// The server requests go to now.
    pub fn current(&self) -> Attached {
        match self.current.lock() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The server to send the next request to: the current one when it
    /// still proves itself (a server that died may have left its port to
    /// another process), else the data directory's server now. The first
    /// request after the attach rests on the attach's own proof.
    pub fn proven(&self) -> Result<Attached, LocalError> {
        let current = self.current();
        let just_proven = self
            .just_proven
            .swap(false, std::sync::atomic::Ordering::Relaxed);
        if just_proven || current.still_proven() {
            return Ok(current);
        }
        self.reattach(&current)
    }

    /// After a request to `failed` could not reach it: the server on the
    /// data directory now, started again if it is gone.
    pub fn reattach(&self, failed: &Attached) -> Result<Attached, LocalError> {
        let current = self.current();
        if current.url() != failed.url() {
            return Ok(current);
        }
        let attached = attach(&self.data_dir)?;
        tracing::info!(url = %attached.url(), started = attached.started, "attached to the local server again");
        match self.current.lock() {
            Ok(mut current) => *current = attached.clone(),
            Err(poisoned) => *poisoned.into_inner() = attached.clone(),
        }
        // The attach proved it; the retry that follows goes to it as is.
        Ok(attached)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7_200)));
        assert_eq!(parse_duration("120"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn a_record_is_replaced_whole_and_removed_only_by_its_server() {
        let dir = tempfile::tempdir().expect("temp dir");
        let record = ServerRecord {
            url: "http://127.0.0.1:1".to_string(),
            pid: 7,
            auto_started: true,
            api_key: Some("k".to_string()),
            secret: Some("s".to_string()),
        };
        write_record(dir.path(), &record).expect("written");
        assert_eq!(read_record(dir.path()), Some(record));
        remove_record(dir.path(), 8);
        assert!(read_record(dir.path()).is_some());
        remove_record(dir.path(), 7);
        assert!(read_record(dir.path()).is_none());
    }

    #[test]
    fn a_recorded_server_that_does_not_answer_is_not_attached_to() {
        let dir = tempfile::tempdir().expect("temp dir");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        drop(listener);
        let record = ServerRecord {
            url,
            pid: 7,
            auto_started: true,
            api_key: None,
            secret: Some("s".to_string()),
        };
        write_record(dir.path(), &record).expect("written");
        assert_eq!(recorded_and_alive(dir.path()), None);
    }
}

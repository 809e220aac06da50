//! A PostgreSQL server of the test's own: `initdb` in a temporary
//! directory, `pg_ctl start` on a free loopback port, stopped and removed
//! on drop. Tests that restart the database need one; the others use it
//! when `PRECEDENT_TEST_POSTGRES` does not name a database.
//!
//! `initdb` and `postgres` refuse to run as root: as root (CI), the
//! binaries run as the `postgres` user through `runuser`, the directory
//! handed over to it.
//!
//! Where a program it needs is missing (PostgreSQL's own, or `runuser`,
//! which lives in /usr/sbin, off many users' PATH), a test is skipped
//! with a note naming it, unless `PRECEDENT_REQUIRE_PG=1` (CI): then it
//! fails, naming it.

use std::ffi::OsStr;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The account the binaries run as when the tests run as root.
const UNPRIVILEGED_USER: &str = "postgres";

/// Set to `1`, a missing PostgreSQL fails the tests that need one instead
/// of skipping them.
pub(crate) const REQUIRE_VAR: &str = "PRECEDENT_REQUIRE_PG";

/// PostgreSQL's programs the tests run, from its `bin` directory.
const CLUSTER_PROGRAMS: &[&str] = &["initdb", "pg_ctl", "postgres"];

/// A running PostgreSQL of the test's own (trust authentication on
/// loopback, superuser `precedent`).
pub(crate) struct OwnPostgres {
    bin: PathBuf,
    as_user: Option<&'static str>,
    dir: tempfile::TempDir,
    pub port: u16,
    running: bool,
}

impl OwnPostgres {
    /// Starts one; `None`, with a note naming `test` and the missing
    /// program, where one is missing (see [`unavailable`]). Panics instead
    /// when `PRECEDENT_REQUIRE_PG=1`.
    pub(crate) fn start(test: &str) -> Option<OwnPostgres> {
        let (bin, as_user) = match tools() {
            Ok(tools) => tools,
            Err(why) => {
                skip_or_fail(test, &why);
                return None;
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("precedent-pg-")
            .tempdir()
            .expect("temp dir");
        if let Some(user) = as_user {
            let status = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(dir.path())
                .status()
                .expect("chown runs");
            assert!(status.success(), "chown of {}", dir.path().display());
        }
        let mut postgres = OwnPostgres {
            bin,
            as_user,
            dir,
            port: free_port(),
            running: false,
        };
        let data = postgres.data_dir();
        postgres.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "precedent",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
        );
        postgres.start_server();
        Some(postgres)
    }

    /// The URL of its `postgres` database.
    pub(crate) fn url(&self) -> String {
        format!("postgres://precedent@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl stop -m fast`: sessions are ended, the server shuts down.
    pub(crate) fn stop(&mut self) {
        let data = self.data_dir();
        self.run("pg_ctl", &["stop", "-D", &data, "-m", "fast", "-w"]);
        self.running = false;
    }

    /// Starts it again on the same port and directory.
    pub(crate) fn start_server(&mut self) {
        let data = self.data_dir();
        let log = self.path("server.log");
        // Small: several test servers run at once on a small machine.
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=16MB -c max_connections=60",
            self.port,
            self.dir.path().display()
        );
        let output = self.command(
            "pg_ctl",
            &[
                "start", "-D", &data, "-l", &log, "-w", "-t", "60", "-o", &options,
            ],
        );
        if !output.status.success() {
            let log =
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
            panic!(
                "pg_ctl start failed: {}{}\n{log}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        self.running = true;
    }

    fn data_dir(&self) -> String {
        self.path("data")
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn command(&self, binary: &str, args: &[&str]) -> Output {
        let program = self.bin.join(binary);
        let (mut command, launcher) = match self.as_user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.arg("-u").arg(user).arg("--").arg(&program);
                (command, format!("runuser (to run {binary} as {user})"))
            }
            None => (Command::new(&program), program.display().to_string()),
        };
        // The unprivileged user may not enter the test's working directory.
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("LC_ALL", "C")
            .output()
            .unwrap_or_else(|error| panic!("{launcher} does not start: {error}"))
    }

    fn run(&self, binary: &str, args: &[&str]) {
        let output = self.command(binary, args);
        assert!(
            output.status.success(),
            "{binary} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        if self.running {
            let data = self.data_dir();
            let _ = self.command("pg_ctl", &["stop", "-D", &data, "-m", "immediate", "-w"]);
        }
    }
}

/// Why a server of the test's own cannot be started here, naming the
/// missing program; `None` when everything it needs is there.
pub(crate) fn unavailable() -> Option<String> {
    tools().err()
}

/// Skips (a note naming `test` and `why`), or panics with both when
/// `PRECEDENT_REQUIRE_PG=1`.
pub(crate) fn skip_or_fail(test: &str, why: &str) {
    if std::env::var_os(REQUIRE_VAR).is_some_and(|value| value == "1") {
        panic!("{test}: PostgreSQL is required ({REQUIRE_VAR}=1) but {why}");
    }
    eprintln!("{test}: skipped ({why}; {REQUIRE_VAR}=1 makes this a failure)");
}

/// The directory of PostgreSQL's programs and, as root, the user they run
/// as; else what is missing.
fn tools() -> Result<(PathBuf, Option<&'static str>), String> {
    let bin = binaries().ok_or_else(|| {
        "PostgreSQL is not installed: no initdb under /usr/lib/postgresql/*/bin or on PATH"
            .to_string()
    })?;
    if let Some(missing) = CLUSTER_PROGRAMS
        .iter()
        .find(|program| !is_executable(&bin.join(program)))
    {
        return Err(format!(
            "{missing} is missing beside initdb in {}",
            bin.display()
        ));
    }
    if on_path("id").is_none() {
        return Err("id is not on PATH (needed to tell whether the tests run as root)".to_string());
    }
    if !running_as_root() {
        return Ok((bin, None));
    }
    // As root: the cluster's programs run as the unprivileged user.
    for program in ["runuser", "chown"] {
        if on_path(program).is_none() {
            let hint = if program == "runuser" {
                " (it is usually in /usr/sbin)"
            } else {
                ""
            };
            return Err(format!(
                "{program} is not on PATH{hint}: running as root, PostgreSQL's programs run as the {UNPRIVILEGED_USER} user through runuser"
            ));
        }
    }
    let exists = Command::new("id")
        .arg("-u")
        .arg(UNPRIVILEGED_USER)
        .output()
        .is_ok_and(|output| output.status.success());
    if !exists {
        return Err(format!(
            "running as root and there is no {UNPRIVILEGED_USER} user to run PostgreSQL as"
        ));
    }
    Ok((bin, Some(UNPRIVILEGED_USER)))
}

/// `program` in a directory of PATH, as `Command` finds it.
fn on_path(program: impl AsRef<OsStr>) -> Option<PathBuf> {
    let program = program.as_ref();
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| is_executable(candidate))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

/// The directory of `initdb`, `pg_ctl` and `postgres`: the newest
/// `/usr/lib/postgresql/*/bin` (Debian), else the one on PATH.
fn binaries() -> Option<PathBuf> {
    let mut versioned: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versioned.sort();
    if let Some((_, bin)) = versioned.pop() {
        return Some(bin);
    }
    on_path("initdb").and_then(|initdb| initdb.parent().map(Path::to_path_buf))
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// A loopback port free right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

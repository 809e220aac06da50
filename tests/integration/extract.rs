//! Extraction over real, minimized trajectories: data-driven snapshots of
//! the session record, and a bounded property run over mutated inputs.
//!
//! `PRECEDENT_UPDATE_SNAPSHOTS=1 cargo test --test integration extract`
//! rewrites the snapshots; review the diff before committing it.

use std::path::{Path, PathBuf};

use precedent::{IngestMessage, Role, SessionRecord};
use serde_json::Value;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Every fixture session: name and `(role, content)` messages.
fn fixture_sessions() -> Vec<(String, Vec<(Role, String)>)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures_dir().join("sessions"))
        .expect("fixtures/sessions")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let fixture: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("JSON");
            let messages = fixture["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|message| {
                    let role = Role::parse(message["role"].as_str().expect("role")).expect("role");
                    (
                        role,
                        message["content"].as_str().expect("content").to_string(),
                    )
                })
                .collect();
            let name = path
                .file_stem()
                .expect("stem")
                .to_string_lossy()
                .to_string();
            (name, messages)
        })
        .collect()
}

fn extract(messages: &[(Role, String)]) -> SessionRecord {
    let inputs = IngestMessage::in_order(
        messages
            .iter()
            .map(|(role, content)| (*role, content.as_str())),
    );
    // Snapshots compare records byte for byte: a loaded machine must not
    // cut a parse short.
    precedent::extract_session(&inputs, precedent::Clock::Ignored).0
}

/// The one way these tests check a record: against its snapshot.
fn check_snapshot(name: &str, record: &SessionRecord) -> Option<String> {
    let path = fixtures_dir()
        .join("snapshots")
        .join(format!("{name}.json"));
    let actual = serde_json::to_string_pretty(record).expect("serialize") + "\n";
    if std::env::var_os("PRECEDENT_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &actual).expect("write snapshot");
        return None;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    (expected != actual).then(|| {
        format!(
            "{name}: record differs from {} (rerun with PRECEDENT_UPDATE_SNAPSHOTS=1 and review)",
            path.display()
        )
    })
}

#[test]
fn every_fixture_matches_its_snapshot() {
    let sessions = fixture_sessions();
    assert!(sessions.len() >= 12, "{} fixtures", sessions.len());
    let failures: Vec<String> = sessions
        .iter()
        .filter_map(|(name, messages)| check_snapshot(name, &extract(messages)))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_snapshot_has_a_fixture() {
    let names: Vec<String> = fixture_sessions()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    for entry in std::fs::read_dir(fixtures_dir().join("snapshots")).expect("snapshots") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            // `transcripts/`: checked by every_transcript_matches_its_snapshot.
            continue;
        }
        let stem = path
            .file_stem()
            .expect("stem")
            .to_string_lossy()
            .to_string();
        assert!(names.contains(&stem), "stale snapshot {}", path.display());
    }
}

/// xorshift64*: a small deterministic generator, so a failure reproduces.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

/// One random edit of a text: cut, repeat, splice in a piece of another
/// text, flip bytes (lossily back to UTF-8), or insert structure markers.
fn mutate(text: &str, donor: &str, random: &mut Random) -> String {
    let bytes = text.as_bytes();
    let at = random.below(bytes.len() + 1);
    match random.below(6) {
        0 => String::from_utf8_lossy(&bytes[..at]).into_owned(),
        1 => {
            let end = (at + random.below(2000)).min(bytes.len());
            let piece = String::from_utf8_lossy(&bytes[at..end]).into_owned();
            format!("{}{}", text, piece.repeat(1 + random.below(20)))
        }
        2 => {
            let donor_bytes = donor.as_bytes();
            let start = random.below(donor_bytes.len() + 1);
            let end = (start + random.below(4000)).min(donor_bytes.len());
            let mut out = bytes[..at].to_vec();
            out.extend_from_slice(&donor_bytes[start..end]);
            out.extend_from_slice(&bytes[at..]);
            String::from_utf8_lossy(&out).into_owned()
        }
        3 => {
            let mut out = bytes.to_vec();
            for _ in 0..1 + random.below(50) {
                if out.is_empty() {
                    break;
                }
                let index = random.below(out.len());
                out[index] = (random.next() & 0xff) as u8;
            }
            String::from_utf8_lossy(&out).into_owned()
        }
        4 => {
            const MARKERS: [&str; 10] = [
                "\n```diff\n",
                "\ndiff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,4 @@ def f(\n",
                "\nTraceback (most recent call last):\n  File \"x.py\", line ",
                "\nerror[E0308]: mismatched types\n --> src/",
                "\nthread 'main' panicked at ",
                "\n```bash\n",
                "\n<returncode>",
                "{\"name\": \"bash\", \"arguments\": {\"command\": \"",
                "\ngoroutine 1 [running]:\nmain.f(",
                "\n\tat com.x.Y.z(Y.java:",
            ];
            let marker = MARKERS[random.below(MARKERS.len())];
            let mut out = String::from_utf8_lossy(&bytes[..at]).into_owned();
            out.push_str(marker);
            out.push_str(&String::from_utf8_lossy(&bytes[at..]));
            out
        }
        _ => {
            let end = (at + random.below(500)).min(bytes.len());
            let mut out = bytes[..at].to_vec();
            out.extend_from_slice(&bytes[end..]);
            String::from_utf8_lossy(&out).into_owned()
        }
    }
}

/// Every evidence span must slice its message; every index must exist.
fn check_spans(messages: &[(Role, String)], record: &SessionRecord) {
    for evidence in &record.evidence {
        let (_, content) = &messages[evidence.message_index];
        assert!(
            content
                .get(evidence.byte_start..evidence.byte_end)
                .is_some(),
            "evidence {}..{} does not slice message {} ({} bytes)",
            evidence.byte_start,
            evidence.byte_end,
            evidence.message_index,
            content.len()
        );
    }
    for command in &record.commands {
        assert!(command.message_index < messages.len());
    }
}

#[test]
fn mutated_trajectories_never_panic_and_spans_stay_valid() {
    // Bounded: CI runs this many cases; raise PRECEDENT_PROPERTY_CASES locally.
    let cases: usize = std::env::var("PRECEDENT_PROPERTY_CASES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(300);
    let sessions = fixture_sessions();
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    for _ in 0..cases {
        let (_, base) = &sessions[random.below(sessions.len())];
        let (_, donor) = &sessions[random.below(sessions.len())];
        let mut messages = base.clone();
        for _ in 0..1 + random.below(4) {
            let index = random.below(messages.len());
            let donor_text = &donor[random.below(donor.len())].1;
            messages[index].1 = mutate(&messages[index].1, donor_text, &mut random);
        }
        if random.below(4) == 0 {
            // Reorder roles too: the task may not come first.
            let shift = random.below(messages.len());
            messages.rotate_left(shift);
        }
        let record = extract(&messages);
        check_spans(&messages, &record);
    }
}

/// Every transcript file under `dir`, recursively, sorted.
fn transcript_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() {
                pending.push(path);
            } else if name.ends_with(".jsonl")
                || name.ends_with(".traj")
                || name.ends_with(".chat.history.md")
                || (name.ends_with(".json") && !name.ends_with(".meta.json"))
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The records of one transcript file, read as `precedent import` reads it.
fn transcript_records(path: &Path) -> Vec<SessionRecord> {
    let (_, transcripts) = precedent::read_transcripts(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    transcripts
        .iter()
        .map(|transcript| {
            let messages: Vec<(Role, String)> = transcript
                .messages
                .iter()
                .map(|message| (message.role, message.content.clone()))
                .collect();
            extract(&messages)
        })
        .collect()
}

/// Real transcripts of each agent (`fixtures/transcripts/`), read through the
/// transcript importer, give the records of `fixtures/snapshots/transcripts/`.
#[test]
fn every_transcript_matches_its_snapshot() {
    let root = fixtures_dir().join("transcripts");
    let mut failures = Vec::new();
    let files = transcript_files(&root);
    assert!(files.len() >= 8, "transcript fixtures missing");
    for path in files {
        let relative = path.strip_prefix(&root).expect("under root");
        let stem = relative
            .to_string_lossy()
            .trim_start_matches('.')
            .replace(['/', '.'], "-");
        for (index, record) in transcript_records(&path).iter().enumerate() {
            let name = format!("transcripts/{stem}-{index}");
            failures.extend(check_snapshot(&name, record));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Held-out sessions (`fixtures/heldout/<format>/`): `precedent bench
/// heldout` measures extraction on them (`scripts/heldout-measure` prints
/// the figures); this test checks that every held-out transcript beside a
/// submitted patch is read and measured, and that every patch names a file
/// to compare with (the bench fails otherwise).
#[test]
fn heldout_sessions_are_measured() {
    let root = fixtures_dir().join("heldout");
    let with_patch = transcript_files(&root)
        .into_iter()
        .filter(|path| PathBuf::from(format!("{}.patch", path.display())).is_file())
        .count();
    assert!(with_patch > 0, "no held-out sessions");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_precedent"))
        .args(["bench", "heldout", "--json", "--fixtures"])
        .arg(&root)
        .output()
        .expect("run precedent bench heldout");
    assert!(
        output.status.success(),
        "bench heldout failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
    let groups = report["groups"].as_array().expect("groups");
    let mut measured = std::collections::BTreeMap::<&str, u64>::new();
    for group in groups {
        let format = group["format"].as_str().expect("format");
        assert!(
            group["files_truth"].as_u64() > Some(0),
            "{format}: no submitted patch names a file"
        );
        *measured
            .entry(group["rendering"].as_str().expect("rendering"))
            .or_default() += group["num_sessions"].as_u64().expect("num_sessions");
    }
    for rendering in ["structured", "text"] {
        assert_eq!(
            measured.get(rendering).copied(),
            Some(with_patch as u64),
            "every held-out session is measured {rendering}"
        );
    }
}

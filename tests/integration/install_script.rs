//! `install.sh`, run by `sh` against a release folder on disk (a
//! `file://` download URL): it installs the archive for this machine when
//! its checksum matches, and nothing when it does not. Needs `sh`, `curl`
//! and `tar`; without one of them the test says which and skips.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The release target `install.sh` picks on this machine.
fn target() -> Option<String> {
    let cpu = match std::env::consts::ARCH {
        "x86_64" => "x86_64",
        "aarch64" => "aarch64",
        _ => return None,
    };
    match std::env::consts::OS {
        "linux" => Some(format!("{cpu}-unknown-linux-gnu")),
        "macos" => Some(format!("{cpu}-apple-darwin")),
        _ => None,
    }
}

fn missing_program() -> Option<&'static str> {
    ["sh", "curl", "tar"]
        .into_iter()
        .find(|program| Command::new(program).arg("--version").output().is_err())
}

/// A release folder holding `precedent-<target>.tar.gz` (whose
/// `precedent` prints a version) and its `.sha256`.
fn release(root: &Path, target: &str) -> PathBuf {
    let folder = root.join("release");
    let staged = folder.join(format!("precedent-{target}"));
    std::fs::create_dir_all(&staged).expect("mkdir");
    let binary = staged.join("precedent");
    std::fs::write(&binary, "#!/bin/sh\necho 'precedent 9.9.9'\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let archive = format!("precedent-{target}.tar.gz");
    let status = Command::new("tar")
        .args(["-czf", &archive, &format!("precedent-{target}")])
        .current_dir(&folder)
        .status()
        .expect("tar runs");
    assert!(status.success());
    let bytes = std::fs::read(folder.join(&archive)).expect("archive");
    let digest: String = Sha256::digest(&bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    std::fs::write(
        folder.join(format!("{archive}.sha256")),
        format!("{digest}  {archive}\n"),
    )
    .expect("checksum");
    folder
}

/// Runs install.sh: exit code, stdout, stderr.
fn install(home: &Path, url: &Path, install_dir: &Path) -> (Option<i32>, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh");
    let output = Command::new("sh")
        .arg(script)
        .env("HOME", home)
        .env(
            "PRECEDENT_DOWNLOAD_URL",
            format!("file://{}", url.display()),
        )
        .env("PRECEDENT_INSTALL_DIR", install_dir)
        .env_remove("PRECEDENT_VERSION")
        .env_remove("PRECEDENT_REPOSITORY")
        .output()
        .expect("sh runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[test]
fn install_sh_installs_a_verified_archive_and_nothing_else() {
    if let Some(program) = missing_program() {
        eprintln!("skipped: install.sh's test needs {program}, which is not installed");
        return;
    }
    let Some(target) = target() else {
        eprintln!("skipped: no release build for this machine");
        return;
    };
    let root = tempfile::tempdir().expect("temp dir");
    let folder = release(root.path(), &target);

    let bin = root.path().join("bin");
    let (code, out, err) = install(root.path(), &folder, &bin);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("checksum verified"), "{out}");
    assert!(out.contains("installed precedent 9.9.9"), "{out}");
    let installed = Command::new(bin.join("precedent"))
        .output()
        .expect("the installed binary runs");
    assert_eq!(
        String::from_utf8_lossy(&installed.stdout),
        "precedent 9.9.9\n"
    );
    // Again: replaced in place.
    let (code, _, err) = install(root.path(), &folder, &bin);
    assert_eq!(code, Some(0), "{err}");

    // A checksum that does not match: nothing is installed.
    let archive = format!("precedent-{target}.tar.gz");
    std::fs::write(
        folder.join(format!("{archive}.sha256")),
        format!("{}  {archive}\n", "0".repeat(64)),
    )
    .expect("checksum");
    let other = root.path().join("other-bin");
    let (code, _, err) = install(root.path(), &folder, &other);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not match its checksum"), "{err}");
    assert!(!other.join("precedent").exists());

    // No archive for this machine: a failure that names the URL.
    std::fs::remove_file(folder.join(&archive)).expect("remove");
    let (code, _, err) = install(root.path(), &folder, &other);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&archive), "{err}");
}

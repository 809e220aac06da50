//! Continuity with the product's former name, `codemem`: data directories
//! and environment variables set up under it keep working for one release.
//! Everything here goes once that release is out; nothing else in the
//! code base knows the old name (the store's old file name aside,
//! `store::LEGACY_DATABASE_FILE`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The prefix of the environment variables the product read before its
/// rename.
const LEGACY_ENV_PREFIX: &str = "CODEMEM_";

/// The prefix they have now.
const ENV_PREFIX: &str = "PRECEDENT_";

/// The product's name before the rename, as directory names carry it.
const LEGACY_NAME: &str = "codemem";

/// The product's name in directory names now.
const NAME: &str = "precedent";

/// The default data directory when it is the old one (set by
/// [`default_or_legacy`]), so that the command that opens it says so.
static LEGACY_DATA_DIR_CHOSEN: OnceLock<PathBuf> = OnceLock::new();

/// A `CODEMEM_*` variable found in the environment.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct LegacyVariable {
    /// Its name (`CODEMEM_DATA_DIR`).
    old: String,
    /// The name it has now (`PRECEDENT_DATA_DIR`).
    new: String,
    value: OsString,
    /// Whether the new name is set too (and so wins).
    shadowed: bool,
}

/// The `CODEMEM_*` variables among `vars`, by name.
pub(super) fn legacy_variables(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<LegacyVariable> {
    let vars: Vec<(OsString, OsString)> = vars.into_iter().collect();
    let is_set = |name: &str| vars.iter().any(|(key, _)| key.to_str() == Some(name));
    let mut found: Vec<LegacyVariable> = vars
        .iter()
        .filter_map(|(key, value)| {
            let old = key.to_str()?;
            let rest = old
                .strip_prefix(LEGACY_ENV_PREFIX)
                .filter(|rest| !rest.is_empty())?;
            let new = format!("{ENV_PREFIX}{rest}");
            Some(LegacyVariable {
                old: old.to_string(),
                shadowed: is_set(&new),
                new,
                value: value.clone(),
            })
        })
        .collect();
    found.sort_by(|a, b| a.old.cmp(&b.old));
    found
}

/// Copies every `CODEMEM_*` variable to its `PRECEDENT_*` name where that
/// is unset, before the arguments are parsed; returns one warning per old
/// variable, to be logged once logging is set up.
///
/// Called first thing in `cli::main`, while the process has one thread.
pub(super) fn adopt_legacy_environment() -> Vec<String> {
    let mut warnings = Vec::new();
    for variable in legacy_variables(std::env::vars_os()) {
        let LegacyVariable {
            old,
            new,
            value,
            shadowed,
        } = variable;
        if shadowed {
            warnings.push(format!(
                "{old} is ignored: {new} is set and wins; unset {old}"
            ));
            continue;
        }
        // SAFETY: called at the start of `cli::main`, before any thread is
        // spawned (no runtime, no logging, no store yet), so nothing reads
        // or writes the environment concurrently.
        unsafe { std::env::set_var(&new, value) };
        warnings.push(format!(
            "{old} is deprecated and will not be read after this release: set {new} instead"
        ));
    }
    warnings
}

/// The default data directory: the new one, unless it does not exist and
/// the one of the old name (beside it) does; then that one, remembered so
/// that [`announce_if_legacy`] can say so.
pub(super) fn default_or_legacy(new: PathBuf) -> PathBuf {
    let legacy = legacy_beside(&new);
    match choose(&new, legacy.as_deref()) {
        Some(legacy) => {
            let _ = LEGACY_DATA_DIR_CHOSEN.set(legacy.clone());
            legacy
        }
        None => new,
    }
}

/// The old-name directory beside `new`: `…/codemem` for `…/precedent`,
/// `./codemem-data` for `./precedent-data`.
fn legacy_beside(new: &Path) -> Option<PathBuf> {
    let name = new.file_name()?.to_str()?;
    name.contains(NAME)
        .then(|| new.with_file_name(name.replacen(NAME, LEGACY_NAME, 1)))
}

/// The legacy directory, when the new one does not exist and it does.
fn choose(new: &Path, legacy: Option<&Path>) -> Option<PathBuf> {
    let legacy = legacy?;
    (!new.exists() && legacy.is_dir()).then(|| legacy.to_path_buf())
}

/// Logs one line when a command opens the old default data directory.
pub(super) fn announce_if_legacy(data_dir: &Path) {
    if LEGACY_DATA_DIR_CHOSEN
        .get()
        .is_some_and(|legacy| legacy == data_dir)
    {
        tracing::info!(
            data_dir = %data_dir.display(),
            "opening the data directory of codemem, precedent's former name, since the new default does not exist; move it to keep using it after the next release"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn old_variables_are_found_with_their_new_names() {
        let found = legacy_variables(vars(&[
            ("CODEMEM_LOG", "debug"),
            ("CODEMEM_DATA_DIR", "/old"),
            ("PRECEDENT_LOG", "warn"),
            ("CODEMEM_", "x"),
            ("HOME", "/home/me"),
        ]));
        let variable = |old: &str, new: &str, value: &str, shadowed| LegacyVariable {
            old: old.into(),
            new: new.into(),
            value: value.into(),
            shadowed,
        };
        assert_eq!(
            found,
            vec![
                variable("CODEMEM_DATA_DIR", "PRECEDENT_DATA_DIR", "/old", false),
                variable("CODEMEM_LOG", "PRECEDENT_LOG", "debug", true),
            ]
        );
    }

    #[test]
    fn the_old_data_directory_is_used_only_when_the_new_one_is_missing() {
        let root = tempfile::tempdir().unwrap();
        let new = root.path().join("precedent");
        let legacy = root.path().join("codemem");
        assert_eq!(choose(&new, Some(&legacy)), None, "neither exists");
        std::fs::create_dir(&legacy).unwrap();
        assert_eq!(choose(&new, Some(&legacy)), Some(legacy.clone()));
        std::fs::create_dir(&new).unwrap();
        assert_eq!(choose(&new, Some(&legacy)), None, "the new one wins");
        assert_eq!(legacy_beside(&new), Some(legacy));
        assert_eq!(
            legacy_beside(Path::new("./precedent-data")),
            Some(PathBuf::from("./codemem-data"))
        );
    }
}

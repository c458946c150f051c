//! The official Python SDK (`azure-cosmos`, pinned) in a virtualenv under `target/`.
//!
//! CI creates it before running tests (`.ci/run`); when it is missing, the first test that
//! needs it creates it, holding a file lock so parallel test processes do not race.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const AZURE_COSMOS: &str = "azure-cosmos==4.17.1";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The virtualenv's Python, created (with `azure-cosmos` installed) if needed.
pub fn interpreter() -> PathBuf {
    let root = std::env::var_os("STRATA_PYENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target").join("pyenv"));
    let python = root.join("bin").join("python");
    let marker = root.join(".strata-ready");
    if marker.exists() {
        return python;
    }
    std::fs::create_dir_all(root.parent().expect("parent")).expect("target dir");
    let lock_path = root.with_extension("lock");
    let lock = std::fs::File::create(&lock_path).expect("lock file");
    lock.lock().expect("lock the virtualenv");
    if !marker.exists() {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&root)
            .status()
            .expect("python3 must be installed to run the official SDK tests")
            .success();
        assert!(ok, "creating the virtualenv failed");
        let ok = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                AZURE_COSMOS,
            ])
            .status()
            .expect("pip")
            .success();
        assert!(ok, "installing {AZURE_COSMOS} failed (is PyPI reachable?)");
        std::fs::write(&marker, AZURE_COSMOS).expect("marker");
    }
    python
}

/// Runs a script from `tests/python/` against `endpoint`; panics with its output on failure.
pub fn run_script(script: &str, endpoint: &str, extra_env: &[(&str, &str)]) -> String {
    let python = interpreter();
    let path = workspace().join("tests").join("python").join(script);
    let mut cmd = Command::new(python);
    cmd.arg(&path)
        .env("STRATA_ENDPOINT", endpoint)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{script} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    stdout
}

/// Path of the test data kept in the repository (`tests/data/`, see its README).
pub fn testdata() -> PathBuf {
    workspace().join("tests").join("data")
}

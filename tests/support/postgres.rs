//! A throwaway PostgreSQL for the tests of strata's PostgreSQL backend: `initdb` and `pg_ctl`
//! from Debian's `postgresql-15` (which `.ci/run` installs) in a temp folder, on a free port,
//! stopped and removed on drop. As root, the server runs as the `postgres` user the package
//! creates (PostgreSQL refuses to run as root).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running PostgreSQL that lives as long as this value.
pub struct Postgres {
    pub url: String,
    pub port: u16,
    root: PathBuf,
    as_postgres: bool,
}

/// A PostgreSQL program: Debian's versioned folder first, then `PATH`.
fn program(name: &str) -> PathBuf {
    let debian = Path::new("/usr/lib/postgresql/15/bin").join(name);
    if debian.exists() {
        return debian;
    }
    PathBuf::from(name)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Postgres {
    /// Starts a fresh cluster; panics with what to install when PostgreSQL is missing.
    pub fn start() -> Self {
        let root =
            std::env::temp_dir().join(format!("strata-pg-{}-{}", std::process::id(), free_port()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("temp folder");
        // PostgreSQL refuses to run as root: as root, run it as the package's user.
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        let mut pg = Self {
            url: String::new(),
            port: free_port(),
            root,
            as_postgres,
        };
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(&pg.root)
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(
                ok,
                "chown to the postgres user failed (is postgresql-15 installed?)"
            );
        }
        let data = pg.root.join("data");
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "strata", "--no-sync", "-E", "UTF8"])
            .output()
            .unwrap_or_else(|e| {
                panic!("PostgreSQL's initdb did not run ({e}): apt-get install postgresql-15")
            });
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pg.launch();
        pg.url = format!("postgres://strata@127.0.0.1:{}/postgres", pg.port);
        pg
    }

    fn command(&self, name: &str) -> Command {
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program(name));
            c
        } else {
            Command::new(program(name))
        }
    }

    /// Runs SQL through `psql` (for checks from outside strata).
    pub fn psql(&self, sql: &str) -> String {
        let out = self
            .command("psql")
            .args([
                "-X",
                "-A",
                "-t",
                "-h",
                "127.0.0.1",
                "-U",
                "strata",
                "-d",
                "postgres",
            ])
            .args(["-p", &self.port.to_string(), "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Postgres {
    /// Starts the server on its folder and port (again, after [`Postgres::stop`]).
    pub fn launch(&self) {
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=200",
            self.port,
            self.root.display()
        );
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.root.join("data"))
            .args(["-o", &opts, "-w", "-l"])
            .arg(self.root.join("log"))
            .arg("start")
            .output()
            .expect("pg_ctl runs");
        assert!(
            out.status.success(),
            "pg_ctl start failed: {} {}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.root.join("log")).unwrap_or_default()
        );
    }

    /// Stops the server at once (as a crash would), keeping its files.
    pub fn stop(&self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.root.join("data"))
            .args(["-m", "immediate", "stop"])
            .output();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

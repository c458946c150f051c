//! `strata trust`: makes the official SDKs accept the self-signed certificate of a strata
//! started with `--tls`, without switching their checks off.
//!
//! Each SDK reads its roots from a different place: the Rust SDK (rustls with the platform's
//! roots) and OpenSSL-based tools from `SSL_CERT_FILE`; the Python SDK (`requests`) from
//! `REQUESTS_CA_BUNDLE`; Node from its own roots plus `NODE_EXTRA_CA_CERTS`. So the command
//! writes a bundle — this machine's roots plus strata's certificate, the system store
//! untouched — and prints the variables that point each SDK at it, for a shell to `eval` or a
//! CI job to append to its environment file. `--system` adds the certificate to the system
//! store instead (as root), which covers what reads the system store.

use std::path::{Path, PathBuf};

/// Trust the certificate of a strata started with --tls.
#[derive(clap::Args, Debug, Clone)]
pub struct TrustArgs {
    /// The server. Default: the strata on this machine (STRATA_PORT or PORT), over HTTPS.
    #[arg(long, env = "STRATA_ENDPOINT")]
    pub endpoint: Option<String>,
    /// Where to write `strata.pem` and `trust-bundle.pem`. Default: `$XDG_CONFIG_HOME/strata`
    /// or `~/.config/strata`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// How to print the variables: `shell` (`export K='V'`, for `eval "$(strata trust)"`) or
    /// `env` (`K=V` lines, for `>> "$GITHUB_ENV"` or a compose env file).
    #[arg(long, default_value = "shell", value_parser = ["shell", "env"])]
    pub format: String,
    /// Also add the certificate to the system's store (Debian/Ubuntu
    /// `update-ca-certificates`, Fedora/RHEL `update-ca-trust`); needs root.
    #[arg(long)]
    pub system: bool,
}

/// The roots this machine trusts, where the common Linux distributions and macOS's Homebrew
/// OpenSSL keep them as one PEM file.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/opt/homebrew/etc/openssl@3/cert.pem",
];

pub async fn trust(a: TrustArgs) -> Result<String, String> {
    let endpoint = https(
        &a.endpoint
            .clone()
            .unwrap_or_else(crate::transfer::local_endpoint),
    );
    let pem = fetch(&endpoint).await?;
    let dir = a.dir.clone().unwrap_or_else(super::default_cert_dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let cert = dir.join("strata.pem");
    write(&cert, pem.as_bytes())?;
    let roots = SYSTEM_BUNDLES
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let bundle = dir.join("trust-bundle.pem");
    write(&bundle, format!("{roots}\n{pem}").as_bytes())?;
    if a.system {
        install_system(&pem)?;
    }
    Ok(variables(&a.format, &cert, &bundle))
}

/// `endpoint` over HTTPS: the certificate is only served there.
fn https(endpoint: &str) -> String {
    match endpoint.strip_prefix("http://") {
        Some(rest) => format!("https://{rest}"),
        None => endpoint.to_string(),
    }
}

/// The certificate the server presents, as it serves it at `/_explorer/emulator.pem`. The
/// first fetch cannot check it — that is what it is for — so what comes back must be one
/// certificate and nothing else.
async fn fetch(endpoint: &str) -> Result<String, String> {
    let url = format!("{}/_explorer/emulator.pem", endpoint.trim_end_matches('/'));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let r = http.get(&url).send().await.map_err(|e| {
        format!("no strata answers over HTTPS at {endpoint} ({e}); start it with --tls, or say where with --endpoint")
    })?;
    if !r.status().is_success() {
        return Err(format!(
            "{url} answered {}: is that strata started with --tls?",
            r.status()
        ));
    }
    let pem = r.text().await.map_err(|e| e.to_string())?;
    let blocks = pem.matches("-----BEGIN CERTIFICATE-----").count();
    if blocks != 1 || !pem.trim_end().ends_with("-----END CERTIFICATE-----") {
        return Err(format!("{url} did not answer with one PEM certificate"));
    }
    Ok(pem)
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Adds the certificate to the system's store with the distribution's own tool.
fn install_system(pem: &str) -> Result<(), String> {
    let (dir, tool, args): (&str, &str, &[&str]) = if Path::new("/usr/sbin/update-ca-certificates")
        .exists()
        || Path::new("/usr/bin/update-ca-certificates").exists()
    {
        (
            "/usr/local/share/ca-certificates",
            "update-ca-certificates",
            &[],
        )
    } else if Path::new("/usr/bin/update-ca-trust").exists() {
        (
            "/etc/pki/ca-trust/source/anchors",
            "update-ca-trust",
            &["extract"],
        )
    } else {
        return Err("--system knows update-ca-certificates (Debian, Ubuntu, Alpine) and update-ca-trust (Fedora, RHEL); neither is here: use the printed variables instead".into());
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create {dir}: {e} (--system needs root)"))?;
    write(&Path::new(dir).join("strata.crt"), pem.as_bytes())
        .map_err(|e| format!("{e} (--system needs root)"))?;
    let status = std::process::Command::new(tool)
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {tool}: {e}"))?;
    if !status.success() {
        return Err(format!("{tool} failed ({status})"));
    }
    Ok(())
}

/// The variables that point each SDK at the certificate, one per line.
fn variables(format: &str, cert: &Path, bundle: &Path) -> String {
    let (cert, bundle) = (cert.display().to_string(), bundle.display().to_string());
    let vars = [
        // The Rust SDK (rustls-native-certs) and OpenSSL: the roots plus strata's.
        ("SSL_CERT_FILE", &bundle),
        // The Python SDK (requests): the same bundle, in place of certifi's.
        ("REQUESTS_CA_BUNDLE", &bundle),
        // Node keeps its own roots and adds these.
        ("NODE_EXTRA_CA_CERTS", &cert),
    ];
    let lines: Vec<String> = vars
        .iter()
        .map(|(k, v)| match format {
            "env" => format!("{k}={v}"),
            _ => format!("export {k}='{}'", v.replace('\'', r"'\''")),
        })
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_print_for_a_shell_and_for_an_env_file() {
        let (c, b) = (Path::new("/h/it's/strata.pem"), Path::new("/h/b.pem"));
        let shell = variables("shell", c, b);
        assert!(shell.contains("export SSL_CERT_FILE='/h/b.pem'"), "{shell}");
        assert!(
            shell.contains(r"export NODE_EXTRA_CA_CERTS='/h/it'\''s/strata.pem'"),
            "{shell}"
        );
        let env = variables("env", c, b);
        assert_eq!(env.lines().nth(1), Some("REQUESTS_CA_BUNDLE=/h/b.pem"));
        assert_eq!(https("http://127.0.0.1:8081/"), "https://127.0.0.1:8081/");
    }
}

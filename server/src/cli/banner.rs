//! What `strata` prints once it serves: where to reach it, with which key and certificate,
//! what the official SDKs need to be told, and the lines test frameworks wait for.

use super::Args;
use crate::api::security::auth::EMULATOR_KEY;

/// The banner: the first line is what scripts wait for; the rest is for people.
pub(super) fn banner(
    args: &Args,
    running: &crate::net::Running,
    data_dir: Option<&std::path::Path>,
    cert_file: Option<&std::path::Path>,
) -> Vec<String> {
    let storage = match &data_dir {
        _ if args.store.is_some() && running.store().is_none() => {
            "data in PostgreSQL, served by another strata process: forwarding to it, taking over when it stops".to_string()
        }
        _ if args.store.is_some() => "data in PostgreSQL".to_string(),
        Some(d) => format!(
            "data in {}",
            d.canonicalize()
                .unwrap_or_else(|_| d.to_path_buf())
                .display()
        ),
        None => "data in memory only".to_string(),
    };
    // The first line is what scripts wait for; the rest is for people.
    let url = match &args.public_host {
        Some(h) => {
            let scheme = if running.tls { "https" } else { "http" };
            let host = if h.contains(':') && !h.starts_with('[') {
                format!("[{h}]")
            } else {
                h.clone()
            };
            format!("{scheme}://{host}:{}/", running.addr.port())
        }
        // Listening on every interface (0.0.0.0, ::) is no address to connect to: clients
        // on this machine reach it at the loopback address.
        None if running.addr.ip().is_unspecified() => {
            let scheme = if running.tls { "https" } else { "http" };
            format!("{scheme}://127.0.0.1:{}/", running.addr.port())
        }
        None => running.url(),
    };
    let key = if args.key == EMULATOR_KEY {
        format!("{} (the emulator's well-known key)", args.key)
    } else {
        "the key given with --key / STRATA_KEY".to_string()
    };
    let mut banner = vec![
        format!("strata listening on {} ({storage})", running.url()),
        format!("  endpoint           {url}"),
        format!("  key                {key}"),
    ];
    if args.key == EMULATOR_KEY {
        banner.push(format!(
            "  connection string  AccountEndpoint={url};AccountKey={};",
            args.key
        ));
    }
    banner.push(match &cert_file {
        Some(c) => format!(
            "  certificate        {} (also at {url}_explorer/emulator.pem)",
            c.display()
        ),
        None => "  certificate        none: plain HTTP (--tls or PROTOCOL=https for HTTPS)".into(),
    });
    banner.push(match args.no_explorer {
        true => "  explorer           off".into(),
        false => format!("  explorer           {url}_explorer/index.html"),
    });
    banner.push(format!("  ready              {url}_strata/ready"));
    if let Some(line) = rust_sdk_settings(&url, running.tls) {
        banner.push(format!("  Rust SDK           {line}"));
    }
    if running.addr.ip().is_unspecified() {
        banner.push(format!(
            "  listening on       every interface: other machines use this one's name or address, port {}",
            running.addr.port()
        ));
    }
    if running.regions.len() > 1 {
        let names = args.regions.as_deref().unwrap_or_default().split(',');
        let list: Vec<String> = names
            .zip(&running.regions)
            .map(|(n, a)| format!("{} :{}", n.trim(), a.port()))
            .collect();
        let mode = if args.multi_write {
            "multi-write"
        } else {
            "the first writes"
        };
        banner.push(format!("  regions            {} ({mode})", list.join(", ")));
    }
    if let Some(m) = running.management {
        banner.push(format!(
            "  management API     http://{m}/ (the SDK test emulator's)"
        ));
    }
    // The lines the Testcontainers modules wait for, last, once serving: Node's `Now listening
    // on: `, Python's `Started\s*$` and Java's `.*Started\r\n$` — a line ending in CR LF, as
    // the official Linux emulator prints it.
    banner.push(format!("Now listening on: {url}"));
    banner.push("Started\r".into());
    banner
}

/// The JSON `ready` record the SDK test emulator's harnesses read from the last line of
/// stdout, when the management API is served (`--management-port`).
pub(super) fn ready_record(args: &Args, running: &crate::net::Running) -> Option<String> {
    let management = running.management?;
    let scheme = if running.tls { "https" } else { "http" };
    let names: Vec<String> = match &args.regions {
        Some(list) => list
            .split(',')
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect(),
        None => vec![crate::regions::DEFAULT_REGION.to_string()],
    };
    let regions: Vec<serde_json::Value> = names
        .iter()
        .zip(&running.regions)
        .map(|(name, a)| {
            let a = match a.ip().is_unspecified() {
                true => std::net::SocketAddr::from(([127, 0, 0, 1], a.port())),
                false => *a,
            };
            serde_json::json!({"name": name, "gatewayEndpoint": format!("{scheme}://{a}/")})
        })
        .collect();
    let account = regions.first()?.get("gatewayEndpoint")?.clone();
    Some(
        serde_json::json!({
            "event": "ready",
            "managementEndpoint": format!("http://{management}/"),
            "accountEndpoint": account,
            "regions": regions,
        })
        .to_string(),
    )
}

/// The environment the official Rust SDK (`azure_data_cosmos` 1.0) needs to reach `url`: it
/// checks a self-signed certificate unless `AZURE_COSMOS_EMULATOR_SERVER_CERT_VALIDATION_DISABLED`
/// is true, and counts only `localhost`, `127.0.0.1` and `[::1]` as an emulator host — plain
/// HTTP and skipped checks elsewhere need `AZURE_COSMOS_EMULATOR_HOST`. `None` when it needs
/// nothing (plain HTTP on loopback).
fn rust_sdk_settings(url: &str, tls: bool) -> Option<String> {
    let host = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .map(|authority| match authority.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
            _ => authority,
        })
        .unwrap_or_default();
    let loopback = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|h| h.eq_ignore_ascii_case(host));
    let mut vars = Vec::new();
    if tls {
        vars.push("AZURE_COSMOS_EMULATOR_SERVER_CERT_VALIDATION_DISABLED=true".to_string());
    }
    if !loopback {
        vars.push(format!("AZURE_COSMOS_EMULATOR_HOST={host}"));
    }
    (!vars.is_empty()).then(|| vars.join(" "))
}

#[cfg(test)]
mod tests {
    use super::rust_sdk_settings;

    #[test]
    fn the_rust_sdk_is_told_what_it_needs() {
        assert_eq!(rust_sdk_settings("http://127.0.0.1:8081/", false), None);
        assert_eq!(
            rust_sdk_settings("https://localhost:8081/", true).as_deref(),
            Some("AZURE_COSMOS_EMULATOR_SERVER_CERT_VALIDATION_DISABLED=true")
        );
        assert_eq!(
            rust_sdk_settings("http://cosmos:8081/", false).as_deref(),
            Some("AZURE_COSMOS_EMULATOR_HOST=cosmos")
        );
        assert_eq!(
            rust_sdk_settings("https://[::1]:8081/", true).as_deref(),
            Some("AZURE_COSMOS_EMULATOR_SERVER_CERT_VALIDATION_DISABLED=true")
        );
    }
}

//! The deployment files under deploy/ cannot be built or applied here (no Docker engine, no
//! cluster), so these tests act them out and hold them to the server:
//! - `docker`: each Dockerfile's build stage, assembled from the build context as its `COPY`
//!   lines and `.dockerignore` define it, has what the build needs, and its final stage is
//!   unprivileged and healthy;
//! - `kubernetes`: each kustomize overlay, built here, has probes that ask served routes on
//!   the configured port, shutdown inside its grace, volumes where the settings look, and memory
//!   limits above the peaks measured for its engine set;
//! - `compose`: each profile's services know their settings, share the data volume, and have
//!   the same limits.

mod compose;
mod docker;
mod kubernetes;
mod kustomize;

use std::path::{Path, PathBuf};

use omnivoice_server::config::{Cli, Settings};
use yaml_rust2::{Yaml, YamlLoader};

/// The routes a probe or health check may ask: health (whole, liveness, readiness) and metrics.
const PROBE_ROUTES: [&str; 4] = ["/health", "/health/live", "/health/ready", "/metrics"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn deploy(path: &str) -> PathBuf {
    root().join("deploy").join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml_documents(path: &Path) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

fn str_of<'a>(node: &'a Yaml, what: &str) -> &'a str {
    node.as_str()
        .unwrap_or_else(|| panic!("{what} is a string: {node:?}"))
}

fn list<'a>(node: &'a Yaml, what: &str) -> &'a Vec<Yaml> {
    node.as_vec()
        .unwrap_or_else(|| panic!("{what} is a list: {node:?}"))
}

/// A number written as YAML integer or string ("8880").
fn number(node: &Yaml, what: &str) -> i64 {
    node.as_i64()
        .or_else(|| node.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("{what} is a number: {node:?}"))
}

/// Settings from a TOML text, as the server reads its `--config` file.
fn settings_from_toml(text: &str) -> Settings {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    let cli = Cli::try_parse_args_only([
        "omnivoice-server",
        "--config",
        file.path().to_str().unwrap(),
    ])
    .unwrap();
    Settings::resolve(&cli.serve).expect("a valid settings file")
}

fn default_settings() -> Settings {
    Settings::resolve(
        &Cli::try_parse_args_only(["omnivoice-server"])
            .unwrap()
            .serve,
    )
    .unwrap()
}

/// Kubernetes and Compose quantities as bytes: `768Mi`, `1.5Gi`, `1gb` (Redis' spelling),
/// `2g`, plain bytes.
fn bytes(quantity: &str) -> f64 {
    let units = [
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("gb", 1e9),
        ("mb", 1e6),
        ("g", 1024.0 * 1024.0 * 1024.0),
        ("m", 1024.0 * 1024.0),
    ];
    for (suffix, scale) in units {
        if let Some(n) = quantity.strip_suffix(suffix) {
            return n.parse::<f64>().expect("a number before the unit") * scale;
        }
    }
    quantity.parse().expect("a quantity")
}

fn host_and_port(url: &str) -> (String, u16) {
    let rest = url.split_once("://").expect("a URL").1;
    let authority = rest.split('/').next().unwrap();
    let (host, port) = authority.rsplit_once(':').expect("a port in the URL");
    (host.to_string(), port.parse().unwrap())
}

/// The settings the server reads from its environment (`env = "OMNIVOICE_…"` in config.rs).
fn known_variables() -> Vec<String> {
    read(&root().join("src/config.rs"))
        .split("env = \"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name.to_string()))
        .collect()
}

/// The engine sets whose memory was measured, and their peak in MiB: the last cell of each
/// row of the table in docs/performance.md §18 that starts with the set's name in backticks.
/// Limits are checked against these, so a new measurement above a limit fails here.
fn measured_peak_mib(engine_set: &str) -> f64 {
    let docs = read(&root().join("docs/performance.md"));
    let section = docs
        .split("\n## ")
        .find(|s| s.starts_with("18. "))
        .expect("docs/performance.md has §18, the deployments' memory");
    let row = section
        .lines()
        .find(|l| l.starts_with(&format!("| `{engine_set}` |")))
        .unwrap_or_else(|| panic!("§18 has a row for `{engine_set}`"));
    let last = row.trim_end_matches('|').rsplit('|').next().unwrap();
    last.replace(['*', ','], "")
        .trim()
        .trim_end_matches("MiB")
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("§18's `{engine_set}` row ends with its peak in MiB: {row}"))
}

/// Room a memory limit keeps above the measured peak: allocator and page-cache noise between
/// runs and machines (two runs of one set differed by up to 3 %), and texts unlike the bench's.
const LIMIT_OVER_PEAK: f64 = 1.2;

/// The limit for an engine set is at least [`LIMIT_OVER_PEAK`] × its measured peak.
fn assert_limit_covers_peak(limit: f64, engine_set: &str, what: &str) {
    let peak = measured_peak_mib(engine_set) * 1024.0 * 1024.0;
    assert!(
        limit >= LIMIT_OVER_PEAK * peak,
        "{what}: memory limit {} MiB is under {LIMIT_OVER_PEAK} × the measured peak of `{engine_set}` ({} MiB)",
        limit / 1048576.0,
        peak / 1048576.0
    );
}

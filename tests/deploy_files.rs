//! The deployment files under deploy/ cannot be built or applied here, so this reads them and
//! holds them to the server: the ConfigMap's TOML is a valid settings file, every probe and
//! health check asks a route the server serves on the port it listens on, graceful shutdown
//! fits in each grace period, and the pieces name each other (selectors, services, files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use omnivoice_server::config::{Cli, Settings};
use yaml_rust2::{Yaml, YamlLoader};

/// The routes a probe or health check may ask: health (whole, liveness, readiness) and metrics.
const PROBE_ROUTES: [&str; 4] = ["/health", "/health/live", "/health/ready", "/metrics"];

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path)
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

/// Kubernetes quantities as bytes: `768Mi`, `1.5Gi`, `1gb` (Redis' spelling), plain bytes.
fn bytes(quantity: &str) -> f64 {
    let units = [
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("gb", 1e9),
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

struct Kubernetes {
    /// `kind/name` → document.
    objects: BTreeMap<String, Yaml>,
}

impl Kubernetes {
    fn load() -> Self {
        let dir = deploy("kubernetes");
        let kustomization = &yaml_documents(&dir.join("kustomization.yaml"))[0];
        let mut listed: Vec<String> = list(&kustomization["resources"], "resources")
            .iter()
            .map(|r| str_of(r, "resource").to_string())
            .collect();
        listed.sort();
        let mut present: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
            .collect();
        present.sort();
        assert_eq!(listed, present, "kustomization.yaml lists every manifest");
        let mut objects = BTreeMap::new();
        for file in &present {
            for doc in yaml_documents(&dir.join(file)) {
                let kind = str_of(&doc["kind"], "kind");
                let name = str_of(&doc["metadata"]["name"], "metadata.name");
                assert!(
                    !doc["apiVersion"].is_badvalue(),
                    "{kind}/{name} has an apiVersion"
                );
                objects.insert(format!("{kind}/{name}"), doc);
            }
        }
        Self { objects }
    }

    fn get(&self, kind_name: &str) -> &Yaml {
        self.objects
            .get(kind_name)
            .unwrap_or_else(|| panic!("deploy/kubernetes has {kind_name}"))
    }

    fn with_kind(&self, kind: &str) -> Vec<&Yaml> {
        self.objects
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{kind}/")))
            .map(|(_, v)| v)
            .collect()
    }
}

/// The port a probe or Service names (by number or by container port name) as a number.
fn resolve_port(port: &Yaml, container: &Yaml) -> i64 {
    if let Some(name) = port.as_str() {
        let ports = list(&container["ports"], "container ports");
        let named = ports
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("the container has a port named {name}"));
        return number(&named["containerPort"], "containerPort");
    }
    number(port, "port")
}

#[test]
fn kubernetes_probes_ask_served_routes_on_the_configured_port() {
    let k8s = Kubernetes::load();
    let config = k8s.get("ConfigMap/omnivoice-config");
    let toml = str_of(&config["data"]["config.toml"], "config.toml");
    let settings = settings_from_toml(toml);
    let port = i64::from(settings.port);

    let deployment = k8s.get("Deployment/omnivoice-server");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &list(&pod["containers"], "containers")[0];
    let ports = list(&container["ports"], "ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(number(&ports[0]["containerPort"], "containerPort"), port);

    let mut paths = BTreeMap::new();
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        let get = &container[probe]["httpGet"];
        let path = str_of(&get["path"], probe);
        assert!(PROBE_ROUTES.contains(&path), "{probe} asks {path}");
        assert_eq!(resolve_port(&get["port"], container), port, "{probe} port");
        paths.insert(probe, path);
    }
    assert_eq!(paths["readinessProbe"], "/health/ready");
    assert_eq!(paths["livenessProbe"], "/health/live");
    assert_eq!(paths["startupProbe"], "/health/live");

    // The config file the container reads is the ConfigMap's, where it is mounted.
    let args: Vec<&str> = list(&container["args"], "args")
        .iter()
        .map(|a| str_of(a, "arg"))
        .collect();
    let config_path = args[args.iter().position(|a| *a == "--config").unwrap() + 1];
    let mount = list(&container["volumeMounts"], "volumeMounts")
        .iter()
        .find(|m| config_path.starts_with(str_of(&m["mountPath"], "mountPath")))
        .expect("the config file's directory is mounted");
    let volume = list(&pod["volumes"], "volumes")
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume");
    assert_eq!(volume["configMap"]["name"], config["metadata"]["name"]);
    assert!(config_path.ends_with("/config.toml"));

    // Shutdown: preStop, then the server's own grace, inside the kubelet's.
    let pre_stop = list(
        &container["lifecycle"]["preStop"]["exec"]["command"],
        "preStop",
    );
    assert_eq!(str_of(&pre_stop[0], "preStop"), "sleep");
    let pre_stop_s = number(&pre_stop[1], "preStop seconds");
    let grace = number(&pod["terminationGracePeriodSeconds"], "grace");
    assert!(
        grace > pre_stop_s + settings.shutdown_timeout_s as i64,
        "terminationGracePeriodSeconds {grace} > preStop {pre_stop_s} + shutdown {}",
        settings.shutdown_timeout_s
    );

    // The memory limit holds the memory cache's budget with room for the server itself.
    let resources = &container["resources"];
    let limit = bytes(str_of(&resources["limits"]["memory"], "memory limit"));
    let request = bytes(str_of(&resources["requests"]["memory"], "memory request"));
    assert!(request <= limit);
    let cache = settings.cache.max_mb as f64 * 1024.0 * 1024.0;
    assert!(
        limit >= cache + 512.0 * 1024.0 * 1024.0,
        "limit {limit} covers the cache {cache}"
    );
    assert!(number(&resources["requests"]["cpu"], "cpu") as usize >= settings.max_concurrent);
}

#[test]
fn kubernetes_objects_name_each_other() {
    let k8s = Kubernetes::load();
    let deployment = k8s.get("Deployment/omnivoice-server");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let selects_pods = |selector: &Yaml| {
        let selector = selector.as_hash().expect("a selector");
        assert!(!selector.is_empty());
        for (key, value) in selector {
            assert_eq!(&labels[str_of(key, "label")], value, "selector {key:?}");
        }
    };
    selects_pods(&deployment["spec"]["selector"]["matchLabels"]);
    selects_pods(&k8s.get("Service/omnivoice-server")["spec"]["selector"]);
    let pdb = k8s.get("PodDisruptionBudget/omnivoice-server");
    selects_pods(&pdb["spec"]["selector"]["matchLabels"]);

    let container = &list(
        &deployment["spec"]["template"]["spec"]["containers"],
        "containers",
    )[0];
    let service_port = &list(
        &k8s.get("Service/omnivoice-server")["spec"]["ports"],
        "ports",
    )[0];
    let settings = settings_from_toml(str_of(
        &k8s.get("ConfigMap/omnivoice-config")["data"]["config.toml"],
        "config.toml",
    ));
    assert_eq!(
        resolve_port(&service_port["targetPort"], container),
        i64::from(settings.port)
    );

    let hpa = k8s.get("HorizontalPodAutoscaler/omnivoice-server");
    let target = &hpa["spec"]["scaleTargetRef"];
    assert_eq!(str_of(&target["kind"], "kind"), "Deployment");
    assert_eq!(target["name"], deployment["metadata"]["name"]);
    let min_replicas = number(&hpa["spec"]["minReplicas"], "minReplicas");
    assert!(min_replicas > number(&pdb["spec"]["minAvailable"], "minAvailable"));
    assert!(number(&hpa["spec"]["maxReplicas"], "maxReplicas") >= min_replicas);

    // redis_url names the Redis Service, on its port.
    let redis = settings.cache.redis.expect("the ConfigMap turns redis on");
    let (host, port) = host_and_port(&redis.url);
    let service = k8s.get(&format!("Service/{host}"));
    let ports = list(&service["spec"]["ports"], "ports");
    assert!(ports
        .iter()
        .any(|p| number(&p["port"], "port") == i64::from(port)));
    assert_eq!(k8s.with_kind("Deployment").len(), 2, "the server and Redis");
}

/// Dockerfile instructions with continuation lines joined, comments dropped.
fn dockerfile() -> Vec<(String, String)> {
    let text = read(&deploy("Dockerfile"));
    let mut joined = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => current.push_str(&format!("{part} ")),
            None => {
                current.push_str(trimmed);
                joined.push(std::mem::take(&mut current));
            }
        }
    }
    joined
        .into_iter()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (instruction, rest) = l.split_once(char::is_whitespace).unwrap_or((&l, ""));
            (instruction.to_uppercase(), rest.trim().to_string())
        })
        .collect()
}

#[test]
fn the_dockerfile_builds_in_one_stage_and_runs_unprivileged_in_another() {
    let instructions = dockerfile();
    let stages: Vec<usize> = (0..instructions.len())
        .filter(|&i| instructions[i].0 == "FROM")
        .collect();
    assert!(stages.len() >= 2, "multi-stage");
    let (build, last) = (
        &instructions[stages[0]..stages[1]],
        &instructions[*stages.last().unwrap()..],
    );
    let values = |stage: &[(String, String)], name: &str| -> Vec<String> {
        stage
            .iter()
            .filter(|(i, _)| i == name)
            .map(|(_, v)| v.clone())
            .collect()
    };

    // The build stage fetches the voice with setup.sh's pinned sha256 sums, and every path it
    // copies exists.
    assert!(values(build, "RUN")
        .iter()
        .any(|r| r.contains("scripts/setup.sh")));
    for copy in values(build, "COPY") {
        let sources: Vec<&str> = copy.split_whitespace().collect();
        for source in &sources[..sources.len() - 1] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(source);
            assert!(path.exists(), "COPY {source}: no such path");
        }
    }
    assert!(values(build, "RUN")
        .iter()
        .any(|r| r.contains("cargo build --release")));

    // The final stage: no toolchain, a user that is not root, and the server's own port,
    // signal and readiness route.
    let base = &values(last, "FROM")[0];
    assert!(base.contains("-slim") && !base.contains("rust"), "{base}");
    for run in values(last, "RUN") {
        for compiler in [
            "gcc",
            "g++",
            "clang",
            "cargo",
            "rustc",
            "build-essential",
            "-dev ",
        ] {
            assert!(
                !format!("{run} ").contains(compiler),
                "final stage installs {compiler}"
            );
        }
    }
    let user = &values(last, "USER")[0];
    assert!(
        !user.starts_with("root") && !user.starts_with("0"),
        "USER {user}"
    );
    assert_eq!(values(last, "STOPSIGNAL"), ["SIGTERM"]);
    let env = values(last, "ENV").join(" ");
    let port = env
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("OMNIVOICE_PORT="))
        .expect("ENV OMNIVOICE_PORT");
    assert_eq!(port, default_settings().port.to_string());
    assert_eq!(values(last, "EXPOSE"), [port]);
    let check = &values(last, "HEALTHCHECK")[0];
    let url = check
        .split_whitespace()
        .find(|w| w.contains("http://"))
        .expect("HEALTHCHECK asks a URL")
        .trim_matches('"')
        .replace("${OMNIVOICE_PORT}", port);
    let path = &url[url.find("://").unwrap() + 3..];
    let path = &path[path.find('/').unwrap()..];
    assert!(PROBE_ROUTES.contains(&path), "HEALTHCHECK asks {path}");
    assert!(url.contains(&format!(":{port}/")), "{url}");
}

#[test]
fn compose_and_haproxy_agree_on_replicas_ports_and_routes() {
    let compose = &yaml_documents(&deploy("compose.yaml"))[0];
    let services = &compose["services"];
    let haproxy = read(&deploy("haproxy.cfg"));
    let lines: Vec<Vec<&str>> = haproxy
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| !w.is_empty() && !w[0].starts_with('#'))
        .collect();

    let servers: Vec<&Vec<&str>> = lines.iter().filter(|w| w[0] == "server").collect();
    assert_eq!(servers.len(), 2, "two replicas behind haproxy");
    for server in &servers {
        let (host, port) = server[2].rsplit_once(':').expect("host:port");
        let replica = &services[host];
        assert!(!replica.is_badvalue(), "compose has a service {host}");
        let env = &replica["environment"];
        let replica_port = match &env["OMNIVOICE_PORT"] {
            Yaml::BadValue => i64::from(default_settings().port),
            value => number(value, "OMNIVOICE_PORT"),
        };
        assert_eq!(port.parse::<i64>().unwrap(), replica_port, "{host}");
        assert!(server.contains(&"check"), "haproxy checks {host}");
        let dockerfile = str_of(&replica["build"]["dockerfile"], "dockerfile");
        let context = deploy(str_of(&replica["build"]["context"], "context"));
        assert!(context.join(dockerfile).exists(), "{dockerfile}");
        let (redis_host, _) = host_and_port(str_of(&env["OMNIVOICE_REDIS_URL"], "redis URL"));
        assert!(
            !services[redis_host.as_str()].is_badvalue(),
            "a {redis_host} service"
        );
        // Docker's SIGKILL comes after the server's own shutdown grace.
        let grace = str_of(&replica["stop_grace_period"], "stop_grace_period");
        let grace_s: i64 = grace.trim_end_matches('s').parse().unwrap();
        assert!(grace_s > number(&env["OMNIVOICE_SHUTDOWN_TIMEOUT_S"], "shutdown"));
    }

    let check = lines
        .iter()
        .find(|w| w.starts_with(&["option", "httpchk"]))
        .expect("option httpchk");
    assert!(
        PROBE_ROUTES.contains(&check[3]),
        "haproxy checks {}",
        check[3]
    );
    let bind = lines.iter().find(|w| w[0] == "bind").expect("bind");
    let bind_port = bind[1].rsplit(':').next().unwrap();
    let proxy = &services["haproxy"];
    let published = list(&proxy["ports"], "ports");
    assert!(published
        .iter()
        .any(|p| str_of(p, "port").ends_with(&format!(":{bind_port}"))));
    let mounts = list(&proxy["volumes"], "volumes");
    let config = str_of(&mounts[0], "volume");
    assert!(config.starts_with("./haproxy.cfg:"), "{config}");
}

/// Whether `path` (relative to the repository, `/`-separated) is left out of the build context
/// by the `.dockerignore` `pattern`: segment by segment, `*` within a segment, `**` for any
/// number of segments, a match of a directory covering everything below it.
fn ignored_by(pattern: &str, path: &str) -> bool {
    fn segment(pattern: &str, name: &str) -> bool {
        match pattern.split_once('*') {
            None => pattern == name,
            Some((head, tail)) => {
                name.starts_with(head)
                    && (0..=name.len() - head.len()).any(|i| {
                        name.is_char_boundary(head.len() + i)
                            && segment(tail, &name[head.len() + i..])
                    })
            }
        }
    }
    fn segments(pattern: &[&str], path: &[&str]) -> bool {
        match (pattern.first(), path.first()) {
            (None, _) => true,
            (Some(&"**"), _) => (0..=path.len()).any(|skip| segments(&pattern[1..], &path[skip..])),
            (Some(p), Some(name)) => segment(p, name) && segments(&pattern[1..], &path[1..]),
            (Some(_), None) => false,
        }
    }
    let pattern: Vec<&str> = pattern.trim_matches('/').split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    segments(&pattern, &path)
}

/// The build context `docker build` sends for the repository: the files git tracks, less
/// those `.dockerignore` leaves out.
fn build_context() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ignore = read(&root.join(".dockerignore"));
    let patterns: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        patterns.iter().all(|p| !p.starts_with('!')),
        "exceptions are not read here"
    );
    let listed = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git ls-files");
    assert!(listed.status.success());
    String::from_utf8(listed.stdout)
        .unwrap()
        .split('\0')
        .filter(|f| !f.is_empty() && root.join(f).is_file())
        .filter(|f| !patterns.iter().any(|p| ignored_by(p, f)))
        .map(str::to_string)
        .collect()
}

/// The Dockerfile's build stage, acted out without Docker: its `COPY` lines applied to the
/// build context in a temporary directory (the stage's `WORKDIR`), then checked as the build
/// would find it. It holds every script a copied script runs or sources, Cargo can read the
/// whole workspace there, and each path the final stage takes from the build stage is one the
/// build stage makes.
#[test]
fn the_build_stage_has_what_the_build_needs() {
    let instructions = dockerfile();
    let stages: Vec<usize> = (0..instructions.len())
        .filter(|&i| instructions[i].0 == "FROM")
        .collect();
    let build = &instructions[stages[0]..stages[1]];
    let last = &instructions[*stages.last().unwrap()..];
    let workdir = build
        .iter()
        .find(|(i, _)| i == "WORKDIR")
        .map(|(_, dir)| dir.trim_end_matches('/').to_string())
        .expect("the build stage sets a WORKDIR");

    let context = build_context();
    let staged = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut copied = Vec::new();
    for (_, copy) in build.iter().filter(|(i, _)| i == "COPY") {
        assert!(
            !copy.starts_with("--from"),
            "the build stage copies from its context"
        );
        let words: Vec<&str> = copy.split_whitespace().collect();
        let (destination, sources) = words.split_last().unwrap();
        let into_dir = destination.ends_with('/') || sources.len() > 1;
        for source in sources {
            let source = source.trim_end_matches('/');
            let files: Vec<&String> = context
                .iter()
                .filter(|f| *f == source || f.starts_with(&format!("{source}/")))
                .collect();
            assert!(
                !files.is_empty(),
                "COPY {source}: nothing in the build context"
            );
            for file in files {
                let target = match (file == source, into_dir) {
                    (true, true) => {
                        Path::new(destination).join(Path::new(file).file_name().unwrap())
                    }
                    (true, false) => PathBuf::from(destination),
                    (false, _) => Path::new(destination).join(&file[source.len() + 1..]),
                };
                let target = staged.path().join(target);
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::copy(root.join(file), &target).unwrap();
                copied.push(target);
            }
        }
    }

    // Every script a copied script runs or sources is there too.
    let script = |word: &str| -> Option<String> {
        let start = word.find("scripts/")?;
        let name: String = word[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
            .collect();
        [".sh", ".py", ".txt"]
            .iter()
            .any(|ext| name.ends_with(ext))
            .then_some(name)
    };
    for file in copied
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "sh"))
    {
        for line in read(file)
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
        {
            for needed in line.split_whitespace().filter_map(script) {
                assert!(
                    staged.path().join(&needed).is_file(),
                    "{} needs {needed}, which the build stage does not copy",
                    file.display()
                );
            }
        }
    }

    // Cargo reads every member's manifest and target there, from the lock file alone (for
    // this platform: other platforms' crates are not in the local registry).
    let rustc = std::process::Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    let version = String::from_utf8(rustc.stdout).unwrap();
    let host = version
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc names its host");
    let metadata = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--locked", "--offline", "--format-version", "1"])
        .args(["--filter-platform", host])
        .current_dir(staged.path())
        .env("CARGO_TARGET_DIR", staged.path().join("target"))
        .output()
        .expect("cargo metadata");
    assert!(
        metadata.status.success(),
        "cargo metadata in the build stage's copy: {}",
        String::from_utf8_lossy(&metadata.stderr)
    );

    // What the final stage takes from the build stage, the build stage makes: a path a RUN
    // line names, or one a script it runs names.
    let runs: Vec<&String> = build
        .iter()
        .filter(|(i, _)| i == "RUN")
        .map(|(_, r)| r)
        .collect();
    for (_, copy) in last.iter().filter(|(i, _)| i == "COPY") {
        let Some(rest) = copy.strip_prefix("--from=build ") else {
            continue;
        };
        let source = rest.split_whitespace().next().unwrap();
        let relative = source
            .strip_prefix(&format!("{workdir}/"))
            .unwrap_or(source);
        let made = runs.iter().any(|run| {
            run.contains(source)
                || run.split_whitespace().filter_map(script).any(|s| {
                    std::fs::read_to_string(staged.path().join(s))
                        .is_ok_and(|text| text.contains(relative))
                })
        });
        assert!(made, "COPY --from=build {source}: no build step makes it");
    }
}

#[test]
fn dockerignore_patterns_match_as_docker_reads_them() {
    assert!(ignored_by("target", "target/debug/x"));
    assert!(!ignored_by("target", "crates/models/target/x"));
    assert!(ignored_by("**/target", "crates/models/target/x"));
    assert!(ignored_by(".venv*", ".venv-api/bin/python"));
    assert!(!ignored_by(".venv*", "src/.venv"));
    assert!(!ignored_by("voices", "src/engine/voices.rs"));
}

/// The settings the server reads from its environment (`env = "OMNIVOICE_…"` in config.rs).
fn known_variables() -> Vec<String> {
    let config = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config.rs"));
    config
        .split("env = \"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name.to_string()))
        .collect()
}

/// Both replicas name only settings the server knows, and share one named volume mounted at
/// the directory the image's settings keep profiles, voice files and the lexicon in.
#[test]
fn compose_replicas_share_a_data_volume_and_know_their_settings() {
    let compose = &yaml_documents(&deploy("compose.yaml"))[0];
    let known = known_variables();
    assert!(
        known.contains(&"OMNIVOICE_DATA_DIR".to_string()),
        "{known:?}"
    );
    let image_env = dockerfile()
        .into_iter()
        .filter(|(i, _)| i == "ENV")
        .map(|(_, v)| v)
        .collect::<Vec<_>>()
        .join(" ");
    // The server's own settings, in the image (the build stage's `CARGO_*` are Cargo's).
    let image_settings = image_env
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter(|(name, _)| name.starts_with("OMNIVOICE_"));
    for (name, _) in image_settings {
        assert!(
            known.contains(&name.to_string()),
            "ENV {name} is no setting"
        );
    }
    let data_dir = image_env
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("OMNIVOICE_DATA_DIR="))
        .expect("the image sets OMNIVOICE_DATA_DIR");
    let declared = &compose["volumes"];
    let mut sources = Vec::new();
    for name in ["omnivoice-a", "omnivoice-b"] {
        let replica = &compose["services"][name];
        if let Some(env) = replica["environment"].as_hash() {
            for key in env.keys() {
                let key = str_of(key, "variable");
                assert!(
                    known.contains(&key.to_string()),
                    "{name}: {key} is no setting"
                );
            }
        }
        let mounts = list(&replica["volumes"], "volumes");
        let data = mounts
            .iter()
            .map(|m| str_of(m, "volume"))
            .find_map(|m| m.split_once(':').filter(|(_, at)| *at == data_dir))
            .unwrap_or_else(|| panic!("{name} mounts nothing at {data_dir}"));
        assert!(
            !declared[data.0].is_badvalue(),
            "{name}: {} is a named volume",
            data.0
        );
        sources.push(data.0.to_string());
    }
    assert_eq!(sources[0], sources[1], "one data volume for both replicas");
}

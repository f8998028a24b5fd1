//! deploy/compose.yaml, with its YAML merge keys resolved as Compose resolves them, held to
//! haproxy's configuration, the Dockerfiles and the server's settings, profile by profile.

use std::collections::BTreeMap;

use yaml_rust2::Yaml;

use super::docker::Dockerfile;
use super::{
    assert_limit_covers_peak, bytes, default_settings, deploy, host_and_port, known_variables,
    list, number, read, str_of, yaml_documents, PROBE_ROUTES,
};

/// The profiles, and the engine set whose measured memory each one's limits must cover.
const PROFILES: [(&str, &str); 3] = [
    ("cpu", "cpu"),
    ("omnivoice", "omnivoice"),
    ("cuda", "omnivoice"),
];

/// `<<` keys replaced by the maps they name (one map or a list), the node's own keys first.
fn resolve_merge_keys(node: &Yaml) -> Yaml {
    match node {
        Yaml::Hash(hash) => {
            let merge_key = Yaml::String("<<".into());
            let mut out = yaml_rust2::yaml::Hash::new();
            for (key, value) in hash {
                if *key != merge_key {
                    out.insert(key.clone(), resolve_merge_keys(value));
                }
            }
            let sources = match hash.get(&merge_key) {
                Some(Yaml::Array(maps)) => maps.clone(),
                Some(map) => vec![map.clone()],
                None => Vec::new(),
            };
            for source in sources {
                if let Yaml::Hash(source) = resolve_merge_keys(&source) {
                    for (key, value) in source {
                        out.entry(key).or_insert(value);
                    }
                }
            }
            Yaml::Hash(out)
        }
        Yaml::Array(items) => Yaml::Array(items.iter().map(resolve_merge_keys).collect()),
        other => other.clone(),
    }
}

fn compose() -> Yaml {
    resolve_merge_keys(&yaml_documents(&deploy("compose.yaml"))[0])
}

/// The services a profile starts: its own and those in no profile.
fn services_of<'a>(compose: &'a Yaml, profile: &str) -> Vec<(&'a str, &'a Yaml)> {
    compose["services"]
        .as_hash()
        .unwrap()
        .iter()
        .filter(|(_, s)| {
            s["profiles"]
                .as_vec()
                .is_none_or(|p| p.iter().any(|p| p.as_str() == Some(profile)))
        })
        .map(|(name, s)| (str_of(name, "service name"), s))
        .collect()
}

/// The servers: the services that build one of deploy/'s Dockerfiles.
fn servers<'a>(services: &[(&'a str, &'a Yaml)]) -> Vec<(&'a str, &'a Yaml)> {
    services
        .iter()
        .filter(|(_, s)| !s["build"].is_badvalue())
        .copied()
        .collect()
}

#[test]
fn the_cpu_profile_puts_two_replicas_behind_haproxy() {
    let compose = compose();
    let services: BTreeMap<&str, &Yaml> = services_of(&compose, "cpu").into_iter().collect();
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
        let replica = services
            .get(host)
            .unwrap_or_else(|| panic!("the cpu profile has a service {host}"));
        let env = &replica["environment"];
        let replica_port = match &env["OMNIVOICE_PORT"] {
            Yaml::BadValue => i64::from(default_settings().port),
            value => number(value, "OMNIVOICE_PORT"),
        };
        assert_eq!(port.parse::<i64>().unwrap(), replica_port, "{host}");
        assert!(server.contains(&"check"), "haproxy checks {host}");
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
    let proxy = services["haproxy"];
    let published = list(&proxy["ports"], "ports");
    assert!(published
        .iter()
        .any(|p| str_of(p, "port").ends_with(&format!(":{bind_port}"))));
    let mounts = list(&proxy["volumes"], "volumes");
    assert!(str_of(&mounts[0], "volume").starts_with("./haproxy.cfg:"));
}

/// In every profile: each server builds a Dockerfile of deploy/ and runs the image it names,
/// knows its settings, reaches Redis, drains before Docker's SIGKILL, shares the one data
/// volume, mounts only directories its settings name, has a memory limit above the measured
/// peak of its engine set, and asks for a GPU exactly when its image is CUDA's. One service of
/// each profile publishes the server's port.
#[test]
fn every_profile_serves_with_known_settings_a_shared_data_volume_and_measured_limits() {
    let compose = compose();
    let known = known_variables();
    let declared = &compose["volumes"];
    for (profile, engine_set) in PROFILES {
        let services = services_of(&compose, profile);
        let servers = servers(&services);
        assert!(!servers.is_empty(), "profile {profile} runs a server");
        let mut data_volumes = Vec::new();
        for (name, server) in &servers {
            let dockerfile = str_of(&server["build"]["dockerfile"], "dockerfile");
            let context = deploy(str_of(&server["build"]["context"], "context"));
            assert!(context.join(dockerfile).exists(), "{name}: {dockerfile}");
            let image = str_of(&server["image"], "image");
            let cuda = dockerfile.ends_with(".cuda");
            assert_eq!(
                image.ends_with(":cuda"),
                cuda,
                "{name}: {image} from {dockerfile}"
            );
            let file = Dockerfile::load(dockerfile.trim_start_matches("deploy/"));
            let mut env: BTreeMap<String, String> = file.final_env().into_iter().collect();
            for (key, value) in server["environment"].as_hash().into_iter().flatten() {
                let key = str_of(key, "variable");
                assert!(
                    known.contains(&key.to_string()),
                    "{name}: {key} is no setting"
                );
                env.insert(key.to_string(), str_of(value, key).to_string());
            }
            let (redis, _) = host_and_port(&env["OMNIVOICE_REDIS_URL"]);
            assert!(
                services.iter().any(|(s, _)| *s == redis),
                "{profile}: a {redis} service"
            );
            let grace = str_of(&server["stop_grace_period"], "stop_grace_period");
            let grace_s: i64 = grace.trim_end_matches('s').parse().unwrap();
            assert!(
                grace_s
                    > number(
                        &Yaml::String(env["OMNIVOICE_SHUTDOWN_TIMEOUT_S"].clone()),
                        "shutdown"
                    )
            );

            let directories: Vec<&String> = env
                .iter()
                .filter(|(k, _)| k.ends_with("_DIR"))
                .map(|(_, v)| v)
                .collect();
            for mount in list(&server["volumes"], "volumes") {
                let mount = str_of(mount, "volume");
                // `SOURCE:TARGET[:MODE]`, where SOURCE may be `${VARIABLE:-default}`.
                let (source, rest) = match mount.strip_prefix("${") {
                    Some(variable) => {
                        let end = variable.find('}').expect("a closed ${…}");
                        (&mount[..end + 3], &variable[end + 2..])
                    }
                    None => mount.split_once(':').expect("source:target"),
                };
                let mut parts = rest.split(':');
                let at = parts.next().unwrap();
                assert!(
                    directories.iter().any(|d| *d == at),
                    "{name}: {at} is mounted, but no setting names it"
                );
                if at == env["OMNIVOICE_DATA_DIR"] {
                    assert!(
                        !declared[source].is_badvalue(),
                        "{name}: {source} is a named volume"
                    );
                    data_volumes.push(source.to_string());
                }
                if at == env["OMNIVOICE_OMNIVOICE_DIR"] {
                    assert_eq!(
                        parts.next(),
                        Some("ro"),
                        "{name}: the checkpoint is read-only"
                    );
                }
            }

            let resources = &server["deploy"]["resources"];
            let limit = bytes(str_of(&resources["limits"]["memory"], "memory limit"));
            assert_limit_covers_peak(limit, engine_set, &format!("compose {name}"));
            let devices = resources["reservations"]["devices"].as_vec();
            let gpus = devices.into_iter().flatten().filter(|d| {
                list(&d["capabilities"], "capabilities")
                    .iter()
                    .any(|c| c.as_str() == Some("gpu"))
            });
            assert_eq!(
                gpus.count(),
                usize::from(cuda),
                "{name}: a GPU exactly for CUDA"
            );
        }
        assert_eq!(
            data_volumes.len(),
            servers.len(),
            "{profile}: every server mounts the data volume"
        );
        assert!(
            data_volumes.windows(2).all(|w| w[0] == w[1]),
            "{profile}: one data volume"
        );
        let port = default_settings().port;
        let publishers = services
            .iter()
            .filter(|(_, s)| {
                s["ports"]
                    .as_vec()
                    .into_iter()
                    .flatten()
                    .any(|p| p.as_str().is_some_and(|p| p.ends_with(&format!(":{port}"))))
            })
            .count();
        assert_eq!(publishers, 1, "{profile}: one service publishes {port}");
    }
    // A service is in one of the profiles above, or in all of them (Redis).
    for (name, service) in compose["services"].as_hash().unwrap() {
        for profile in service["profiles"].as_vec().into_iter().flatten() {
            let profile = str_of(profile, "profile");
            assert!(
                PROFILES.iter().any(|(p, _)| *p == profile),
                "{name:?}: unknown profile {profile}"
            );
        }
    }
}

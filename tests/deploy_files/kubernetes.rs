//! Each overlay under deploy/kubernetes/overlays, built as kustomize builds it, held to the
//! server: probes, ports, shutdown grace, the objects naming each other, settings, volumes and
//! memory.

use std::collections::BTreeMap;

use yaml_rust2::Yaml;

use super::docker::Dockerfile;
use super::{
    assert_limit_covers_peak, bytes, deploy, host_and_port, known_variables, kustomize, list,
    number, settings_from_toml, str_of, PROBE_ROUTES,
};
use omnivoice_server::config::Settings;

/// The overlays, and the engine set whose measured memory each one's limit must cover.
const OVERLAYS: [(&str, &str); 3] = [
    ("cpu", "cpu"),
    ("omnivoice", "omnivoice"),
    ("cuda", "omnivoice"),
];

struct Kubernetes {
    overlay: String,
    /// `kind/name` → object.
    objects: BTreeMap<String, Yaml>,
}

impl Kubernetes {
    fn build(overlay: &str) -> Self {
        let dir = deploy("kubernetes/overlays").join(overlay);
        let mut objects = BTreeMap::new();
        for object in kustomize::build(&dir) {
            let kind = str_of(&object["kind"], "kind");
            let name = str_of(&object["metadata"]["name"], "metadata.name");
            assert!(
                !object["apiVersion"].is_badvalue(),
                "{kind}/{name} has an apiVersion"
            );
            let key = format!("{kind}/{name}");
            assert!(!objects.contains_key(&key), "{overlay}: {key} twice");
            objects.insert(key, object);
        }
        Self {
            overlay: overlay.to_string(),
            objects,
        }
    }

    fn get(&self, kind_name: &str) -> &Yaml {
        self.objects
            .get(kind_name)
            .unwrap_or_else(|| panic!("overlay {} has {kind_name}", self.overlay))
    }

    fn with_kind(&self, kind: &str) -> Vec<&Yaml> {
        self.objects
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{kind}/")))
            .map(|(_, v)| v)
            .collect()
    }

    fn pod(&self) -> &Yaml {
        &self.get("Deployment/omnivoice-server")["spec"]["template"]["spec"]
    }

    fn container(&self) -> &Yaml {
        &list(&self.pod()["containers"], "containers")[0]
    }

    fn settings(&self) -> Settings {
        let config = self.get("ConfigMap/omnivoice-config");
        settings_from_toml(str_of(&config["data"]["config.toml"], "config.toml"))
    }

    /// The image's final-stage `ENV`, then the container's `env` over it: what the server
    /// reads from its environment in this pod.
    fn environment(&self) -> BTreeMap<String, String> {
        let image = str_of(&self.container()["image"], "image");
        let tag = image.rsplit_once(':').map_or("latest", |(_, t)| t);
        let dockerfile = match tag {
            "cpu" => "Dockerfile",
            "cuda" => "Dockerfile.cuda",
            other => panic!("{}: no Dockerfile builds the tag {other}", self.overlay),
        };
        let mut env: BTreeMap<String, String> = Dockerfile::load(dockerfile)
            .final_env()
            .into_iter()
            .collect();
        if let Some(vars) = self.container()["env"].as_vec() {
            for var in vars {
                let value = str_of(&var["value"], "an env value");
                env.insert(
                    str_of(&var["name"], "an env name").to_string(),
                    value.to_string(),
                );
            }
        }
        env
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
fn probes_ask_served_routes_on_the_configured_port_and_shutdown_fits_the_grace() {
    for (overlay, _) in OVERLAYS {
        let k8s = Kubernetes::build(overlay);
        let settings = k8s.settings();
        let port = i64::from(settings.port);
        let (pod, container) = (k8s.pod(), k8s.container());
        let ports = list(&container["ports"], "ports");
        assert_eq!(ports.len(), 1);
        assert_eq!(number(&ports[0]["containerPort"], "containerPort"), port);

        let mut paths = BTreeMap::new();
        for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
            let get = &container[probe]["httpGet"];
            let path = str_of(&get["path"], probe);
            assert!(
                PROBE_ROUTES.contains(&path),
                "{overlay}: {probe} asks {path}"
            );
            assert_eq!(resolve_port(&get["port"], container), port, "{probe} port");
            paths.insert(probe, path);
        }
        assert_eq!(paths["readinessProbe"], "/health/ready");
        assert_eq!(paths["livenessProbe"], "/health/live");
        assert_eq!(paths["startupProbe"], "/health/live");

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
            "{overlay}: terminationGracePeriodSeconds {grace} > preStop {pre_stop_s} + shutdown {}",
            settings.shutdown_timeout_s
        );
        assert!(
            number(&container["resources"]["requests"]["cpu"], "cpu") as usize
                >= settings.max_concurrent
        );
    }
}

#[test]
fn objects_name_each_other() {
    for (overlay, _) in OVERLAYS {
        let k8s = Kubernetes::build(overlay);
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

        let service_port = &list(
            &k8s.get("Service/omnivoice-server")["spec"]["ports"],
            "ports",
        )[0];
        let settings = k8s.settings();
        assert_eq!(
            resolve_port(&service_port["targetPort"], k8s.container()),
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

        // Every volume the pod names is defined; every claim is an object of the build.
        let volumes = list(&k8s.pod()["volumes"], "volumes");
        for mount in list(&k8s.container()["volumeMounts"], "volumeMounts") {
            assert!(
                volumes.iter().any(|v| v["name"] == mount["name"]),
                "{overlay}: mount {:?} names a volume",
                mount["name"]
            );
        }
        for volume in volumes {
            if let Some(claim) = volume["persistentVolumeClaim"]["claimName"].as_str() {
                k8s.get(&format!("PersistentVolumeClaim/{claim}"));
            }
        }
    }
}

/// Every variable the pod sets is a setting the server knows, and every directory mounted is
/// one its settings name: the config file's, or one of the `*_dir` settings as the ConfigMap
/// and the environment resolve them. The data directory is a claim every replica can write.
#[test]
fn settings_volumes_and_claims_agree() {
    let known = known_variables();
    for (overlay, _) in OVERLAYS {
        let k8s = Kubernetes::build(overlay);
        let env = k8s.environment();
        for name in env.keys().filter(|n| n.starts_with("OMNIVOICE_")) {
            assert!(known.contains(name), "{overlay}: {name} is no setting");
        }
        let settings = k8s.settings();
        let mut directories: Vec<String> = env
            .iter()
            .filter(|(name, _)| name.starts_with("OMNIVOICE_") && name.ends_with("_DIR"))
            .map(|(_, value)| value.clone())
            .collect();
        directories.extend(
            [
                &settings.data_dir,
                &settings.voices_dir,
                &settings.omnivoice_dir,
            ]
            .iter()
            .map(|p| p.display().to_string()),
        );
        let args: Vec<&str> = list(&k8s.container()["args"], "args")
            .iter()
            .map(|a| str_of(a, "arg"))
            .collect();
        let config = args[args.iter().position(|a| *a == "--config").unwrap() + 1];
        directories.push(config.rsplit_once('/').unwrap().0.to_string());
        let volumes = list(&k8s.pod()["volumes"], "volumes");
        let mut mounted = BTreeMap::new();
        for mount in list(&k8s.container()["volumeMounts"], "volumeMounts") {
            let path = str_of(&mount["mountPath"], "mountPath");
            assert!(
                directories.iter().any(|d| d == path),
                "{overlay}: {path} is mounted, but no setting names it ({directories:?})"
            );
            let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
            mounted.insert(path.to_string(), (mount.clone(), volume.clone()));
        }
        let data = settings.data_dir.display().to_string();
        let (data_mount, data_volume) = mounted
            .get(&data)
            .unwrap_or_else(|| panic!("{overlay}: nothing mounted at the data directory {data}"));
        assert!(data_mount["readOnly"].as_bool() != Some(true));
        let claim = str_of(
            &data_volume["persistentVolumeClaim"]["claimName"],
            "the data claim",
        );
        let claim = k8s.get(&format!("PersistentVolumeClaim/{claim}"));
        let modes = list(&claim["spec"]["accessModes"], "accessModes");
        assert!(
            modes.iter().any(|m| m.as_str() == Some("ReadWriteMany")),
            "{overlay}: replicas share the data directory"
        );

        let omnivoice = mounted.get(&env["OMNIVOICE_OMNIVOICE_DIR"]);
        if overlay == "cpu" {
            assert!(omnivoice.is_none(), "the CPU shape has no checkpoint");
        } else {
            let (mount, _) = omnivoice.expect("a checkpoint where OMNIVOICE_OMNIVOICE_DIR says");
            assert_eq!(
                mount["readOnly"].as_bool(),
                Some(true),
                "{overlay}: the checkpoint is read-only"
            );
        }
    }
}

/// Requests and limits from the measured peaks, and a GPU where the image is CUDA's.
#[test]
fn memory_limits_cover_the_measured_peaks_and_the_gpu_shape_asks_for_a_gpu() {
    for (overlay, engine_set) in OVERLAYS {
        let k8s = Kubernetes::build(overlay);
        let resources = &k8s.container()["resources"];
        let limit = bytes(str_of(&resources["limits"]["memory"], "memory limit"));
        let request = bytes(str_of(&resources["requests"]["memory"], "memory request"));
        assert!(request <= limit, "{overlay}");
        assert_limit_covers_peak(limit, engine_set, &format!("overlay {overlay}"));
        let cache = k8s.settings().cache.max_mb as f64 * 1024.0 * 1024.0;
        assert!(
            request >= cache,
            "{overlay}: the request holds the memory cache"
        );

        let image = str_of(&k8s.container()["image"], "image");
        let gpus = &resources["limits"]["nvidia.com/gpu"];
        if image.ends_with(":cuda") {
            assert_eq!(number(gpus, "nvidia.com/gpu"), 1, "{overlay}");
            let selector = k8s.pod()["nodeSelector"]
                .as_hash()
                .expect("a node selector");
            assert!(selector
                .keys()
                .any(|k| str_of(k, "label").starts_with("nvidia.com/")));
            assert_eq!(k8s.environment()["OMNIVOICE_DEVICE"], "auto");
        } else {
            assert!(gpus.is_badvalue(), "{overlay}: a CPU image asks for no GPU");
        }
    }
}

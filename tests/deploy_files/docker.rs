//! Every `deploy/Dockerfile*`, read as Docker reads it (continuation lines joined, comments
//! dropped, `${ARG}` replaced by the `ARG` line's default), and its build stage acted out
//! without Docker on the build context that `.dockerignore` leaves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{default_settings, deploy, read, root, PROBE_ROUTES};

/// One instruction: its name (upper case) and the rest of its line.
pub type Instruction = (String, String);

/// A Dockerfile's instructions, split into stages at each `FROM`.
pub struct Dockerfile {
    pub name: String,
    pub stages: Vec<Vec<Instruction>>,
}

impl Dockerfile {
    pub fn load(name: &str) -> Self {
        let text = read(&deploy(name));
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
        let mut args = BTreeMap::new();
        let mut stages: Vec<Vec<Instruction>> = Vec::new();
        for line in joined.into_iter().filter(|l| !l.is_empty()) {
            let (instruction, rest) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
            let instruction = instruction.to_uppercase();
            let mut rest = rest.trim().to_string();
            if instruction == "ARG" {
                if let Some((name, default)) = rest.split_once('=') {
                    args.insert(name.to_string(), default.to_string());
                }
            }
            // Build arguments, not the environment variables a RUN or CMD sees at run time.
            if matches!(instruction.as_str(), "FROM" | "COPY") {
                for (name, value) in &args {
                    rest = rest.replace(&format!("${{{name}}}"), value);
                }
            }
            if instruction == "FROM" {
                stages.push(Vec::new());
            }
            if let Some(stage) = stages.last_mut() {
                stage.push((instruction, rest));
            }
        }
        assert!(!stages.is_empty(), "{name} has a FROM");
        Self {
            name: name.to_string(),
            stages,
        }
    }

    /// Every Dockerfile in deploy/.
    pub fn all() -> Vec<Self> {
        let mut names: Vec<String> = std::fs::read_dir(deploy(""))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("Dockerfile"))
            .collect();
        names.sort();
        assert!(names.len() >= 2, "a CPU and a CUDA Dockerfile: {names:?}");
        names.iter().map(|n| Self::load(n)).collect()
    }

    pub fn build_stage(&self) -> &[Instruction] {
        &self.stages[0]
    }

    pub fn final_stage(&self) -> &[Instruction] {
        self.stages.last().unwrap()
    }

    /// The `KEY=VALUE` pairs of the final stage's `ENV` lines.
    pub fn final_env(&self) -> Vec<(String, String)> {
        values(self.final_stage(), "ENV")
            .join(" ")
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

pub fn values(stage: &[Instruction], name: &str) -> Vec<String> {
    stage
        .iter()
        .filter(|(i, _)| i == name)
        .map(|(_, v)| v.clone())
        .collect()
}

/// A path under `scripts/` that a word of a shell line names (a script, or a file a script
/// reads), if any.
fn script_in(word: &str) -> Option<String> {
    let start = word.find("scripts/")?;
    let name: String = word[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
        .collect();
    [".sh", ".py", ".txt"]
        .iter()
        .any(|ext| name.ends_with(ext))
        .then_some(name)
}

#[test]
fn each_dockerfile_builds_in_one_stage_and_runs_unprivileged_in_another() {
    for file in Dockerfile::all() {
        let name = &file.name;
        assert!(file.stages.len() >= 2, "{name}: multi-stage");
        let (build, last) = (file.build_stage(), file.final_stage());
        // The build stage fetches the voices with setup.sh's pinned sha256 sums.
        assert!(values(build, "RUN")
            .iter()
            .any(|r| r.contains("scripts/setup.sh")));
        assert!(
            values(build, "RUN")
                .iter()
                .any(|r| r.contains("cargo build --release --locked")),
            "{name}"
        );

        // The final stage: a runtime base without a toolchain, a user that is not root, and
        // the server's own port, signal, readiness route, checkpoint and data directories.
        let base = &values(last, "FROM")[0];
        assert!(
            !base.contains("rust") && !base.contains("devel"),
            "{name}: {base}"
        );
        assert!(
            base.contains("-slim") || base.contains("-runtime"),
            "{name}: a slim or runtime base, {base}"
        );
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
                    "{name}: final stage installs {compiler}"
                );
            }
        }
        let user = &values(last, "USER")[0];
        assert!(
            !user.starts_with("root") && !user.starts_with('0'),
            "{name}: USER {user}"
        );
        assert_eq!(values(last, "STOPSIGNAL"), ["SIGTERM"], "{name}");
        let env: BTreeMap<String, String> = file.final_env().into_iter().collect();
        let port = &env["OMNIVOICE_PORT"];
        assert_eq!(*port, default_settings().port.to_string());
        assert_eq!(values(last, "EXPOSE"), std::slice::from_ref(port), "{name}");
        assert_eq!(
            env["OMNIVOICE_OMNIVOICE_DIR"], "/models/omnivoice",
            "{name}"
        );
        let data = &env["OMNIVOICE_DATA_DIR"];
        assert_eq!(values(last, "VOLUME"), [format!("[\"{data}\"]")], "{name}");
        assert!(
            env["OMNIVOICE_LEXICON"].starts_with(&format!("{data}/")),
            "{name}: the lexicon is kept on the data volume"
        );
        let check = &values(last, "HEALTHCHECK")[0];
        let url = check
            .split_whitespace()
            .find(|w| w.contains("http://"))
            .expect("HEALTHCHECK asks a URL")
            .trim_matches('"')
            .replace("${OMNIVOICE_PORT}", port);
        let path = &url[url.find("://").unwrap() + 3..];
        let path = &path[path.find('/').unwrap()..];
        assert!(
            PROBE_ROUTES.contains(&path),
            "{name}: HEALTHCHECK asks {path}"
        );
        assert!(url.contains(&format!(":{port}/")), "{url}");
    }
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
    let ignore = read(&root().join(".dockerignore"));
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
        .current_dir(root())
        .output()
        .expect("git ls-files");
    assert!(listed.status.success());
    String::from_utf8(listed.stdout)
        .unwrap()
        .split('\0')
        .filter(|f| !f.is_empty() && root().join(f).is_file())
        .filter(|f| !patterns.iter().any(|p| ignored_by(p, f)))
        .map(str::to_string)
        .collect()
}

/// The build stage's `COPY` lines applied to `context` under `staged` (the stage's `WORKDIR`).
/// Returns the files copied.
fn stage_copies(file: &Dockerfile, context: &[String], staged: &Path) -> Vec<PathBuf> {
    let mut copied = Vec::new();
    for copy in values(file.build_stage(), "COPY") {
        assert!(
            !copy.starts_with("--from"),
            "{}: the build stage copies from its context",
            file.name
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
                "{}: COPY {source}: nothing in the build context",
                file.name
            );
            for path in files {
                let target = match (path == source, into_dir) {
                    (true, true) => {
                        Path::new(destination).join(Path::new(path).file_name().unwrap())
                    }
                    (true, false) => PathBuf::from(destination),
                    (false, _) => Path::new(destination).join(&path[source.len() + 1..]),
                };
                let target = staged.join(target);
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::copy(root().join(path), &target).unwrap();
                copied.push(target);
            }
        }
    }
    copied
}

/// Each Dockerfile's build stage, acted out without Docker: its `COPY` lines applied to the
/// build context in a temporary directory, then checked as the build would find it. It holds
/// every script a `RUN` line or a copied script runs, sources or reads; Cargo can read the
/// whole workspace there; and each path the final stage takes from the build stage is one the
/// build stage makes.
#[test]
fn each_build_stage_has_what_the_build_needs() {
    let context = build_context();
    let rustc = std::process::Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    let version = String::from_utf8(rustc.stdout).unwrap();
    let host = version
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc names its host")
        .to_string();
    for file in Dockerfile::all() {
        let name = &file.name;
        let build = file.build_stage();
        let workdir = values(build, "WORKDIR")
            .first()
            .map(|dir| dir.trim_end_matches('/').to_string())
            .expect("the build stage sets a WORKDIR");
        let staged = tempfile::tempdir().unwrap();
        let copied = stage_copies(&file, &context, staged.path());

        let runs = values(build, "RUN");
        let scripts_of = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .flat_map(|l| {
                    l.split_whitespace()
                        .filter_map(script_in)
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        // From the RUN lines, every script they run, source or read, and every one those name.
        let mut needed: Vec<String> = runs.iter().flat_map(|run| scripts_of(run)).collect();
        let mut seen = std::collections::BTreeSet::new();
        while let Some(script) = needed.pop() {
            if !seen.insert(script.clone()) {
                continue;
            }
            let path = staged.path().join(&script);
            assert!(
                path.is_file(),
                "{name}: the build needs {script}, which the build stage does not copy"
            );
            if script.ends_with(".sh") {
                needed.extend(scripts_of(&read(&path)));
            }
        }
        assert!(
            seen.iter().any(|s| s == "scripts/setup.sh")
                && copied.iter().any(|c| c.ends_with("scripts/setup.sh")),
            "{name}: runs the copied scripts/setup.sh"
        );

        // Cargo reads every member's manifest and target there, from the lock file alone (for
        // this platform: other platforms' crates are not in the local registry).
        let metadata = std::process::Command::new(env!("CARGO"))
            .args(["metadata", "--locked", "--offline", "--format-version", "1"])
            .args(["--filter-platform", &host])
            .current_dir(staged.path())
            .env("CARGO_TARGET_DIR", staged.path().join("target"))
            .output()
            .expect("cargo metadata");
        assert!(
            metadata.status.success(),
            "{name}: cargo metadata in the build stage's copy: {}",
            String::from_utf8_lossy(&metadata.stderr)
        );

        // What the final stage takes from the build stage, the build stage makes: a path a
        // RUN line names, or one a script it runs names.
        for copy in values(file.final_stage(), "COPY") {
            let Some(rest) = copy.strip_prefix("--from=build ") else {
                continue;
            };
            let source = rest.split_whitespace().next().unwrap();
            let relative = source
                .strip_prefix(&format!("{workdir}/"))
                .unwrap_or(source);
            let made = runs.iter().any(|run| {
                run.contains(source)
                    || scripts_of(run).iter().any(|s| {
                        std::fs::read_to_string(staged.path().join(s))
                            .is_ok_and(|text| text.contains(relative))
                    })
            });
            assert!(
                made,
                "{name}: COPY --from=build {source}: no build step makes it"
            );
        }
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

//! Tests of the settings layers, and of the two documents written from the settings: the
//! README's table (generated here) and config.example.toml (written by hand, held to them here).

use super::*;

/// The command line alone: the developer's `OMNIVOICE_*` variables must not change a test.
fn parse(args: &[&str]) -> ServeArgs {
    let mut argv = vec!["omnivoice-server"];
    argv.extend_from_slice(args);
    Cli::try_parse_args_only(argv)
        .expect("valid command line")
        .serve
}

fn write(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

fn with_file(text: &str, args: &[&str]) -> Result<Settings, ConfigError> {
    let file = write(text);
    let mut all = vec!["--config", file.path().to_str().unwrap()];
    all.extend_from_slice(args);
    Settings::resolve(&parse(&all))
}

fn repo_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

#[test]
fn defaults_apply_without_flags_or_file() {
    // An empty voices directory: no Kokoro, so Piper answers OpenAI's names.
    let empty = tempfile::tempdir().unwrap();
    let s = Settings::resolve(&parse(&["--voices-dir", empty.path().to_str().unwrap()])).unwrap();
    assert_eq!(s.port, 8880);
    assert_eq!(s.host.to_string(), "127.0.0.1");
    assert_eq!(s.max_input_chars, 4096);
    assert!(s.batch.enabled && s.cache.enabled);
    assert_eq!(s.batch.max_size, 8);
    assert_eq!(s.preload, Preload::DefaultVoice);
    assert_eq!(s.max_concurrent, num_cpus::get_physical());
    assert_eq!(s.wyoming_port, None);
    assert!(!s.public_discovery);
    // Which engine and voice that is, the engines say (`engine::defaults`).
    assert_eq!((s.default_engine, s.default_voice), (None, None));
    assert_eq!(s.kokoro_dir, empty.path().join("kokoro"));
    assert_eq!(s.mandarin_dir, empty.path().join("mandarin"));
}

/// The engine and voice named by the settings are kept as named; `--preload none` loads
/// nothing.
#[test]
fn the_default_engine_and_voice_are_as_named() {
    let s = Settings::resolve(&parse(&[
        "--default-engine",
        "omnivoice",
        "--default-voice",
        "nova",
        "--preload",
        "none",
    ]))
    .unwrap();
    assert_eq!(s.default_engine.as_deref(), Some("omnivoice"));
    assert_eq!(s.default_voice.as_deref(), Some("nova"));
    assert_eq!(s.preload, Preload::Voices(Vec::new()));
}

#[test]
fn flag_beats_file_and_file_beats_default() {
    let s = with_file(
        "port = 9000\nmax_input_chars = 100\nbatch_enabled = false\n",
        &["--port", "9100"],
    )
    .unwrap();
    assert_eq!(s.port, 9100, "flag wins");
    assert_eq!(s.max_input_chars, 100, "file wins over default");
    assert!(!s.batch.enabled);
    assert_eq!(s.effective_batch().max_size, 1);
}

#[test]
fn a_flag_that_repeats_the_default_still_beats_the_file() {
    let file = "port = 9000\npublic_discovery = true\nseed = 7\napi_keys = [\"from-file\"]\n";
    let s = with_file(
        file,
        &[
            "--port",
            "8880",
            "--public-discovery",
            "false",
            "--api-key",
            "k",
        ],
    )
    .unwrap();
    assert_eq!(s.port, 8880);
    assert!(!s.public_discovery);
    assert_eq!(s.api_keys, ["k"]);
    assert_eq!(
        s.seed,
        Some(7),
        "what no flag gave still comes from the file"
    );
}

#[test]
fn off_switches_beat_the_file() {
    let file = "batch_enabled = true\ncache_enabled = true\nstream = true\n";
    let s = with_file(file, &["--no-batch", "--no-cache", "--no-stream"]).unwrap();
    assert!(!s.batch.enabled && !s.cache.enabled && !s.stream);
    let s = with_file(file, &[]).unwrap();
    assert!(s.batch.enabled && s.cache.enabled && s.stream);
}

#[test]
fn a_switch_and_its_off_flag_conflict_on_the_command_line() {
    for (on, off) in [
        ("--batch-enabled", "--no-batch"),
        ("--cache-enabled", "--no-cache"),
        ("--stream", "--no-stream"),
    ] {
        let err = Cli::try_parse_args_only(["omnivoice-server", on, off]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let message = err.to_string();
        assert!(message.contains(on) && message.contains(off), "{message}");
    }
}

#[test]
fn wyoming_port_and_public_discovery_come_from_flags_and_file() {
    let s = Settings::resolve(&parse(&["--wyoming-port", "10200", "--public-discovery"])).unwrap();
    assert_eq!(s.wyoming_port, Some(10200));
    assert!(s.public_discovery);
    let s = with_file("wyoming_port = 10300\npublic_discovery = true\n", &[]).unwrap();
    assert_eq!(s.wyoming_port, Some(10300));
    assert!(s.public_discovery);
}

#[test]
fn precision_comes_from_flag_file_or_default() {
    use omnivoice_models::kernels::Precision;
    let s = Settings::resolve(&parse(&[])).unwrap();
    assert_eq!(s.precision, PrecisionChoice::Auto);
    assert_eq!(s.precision.requested(), None);
    let s = Settings::resolve(&parse(&["--precision", "bf16"])).unwrap();
    assert_eq!(s.precision.requested(), Some(Precision::Bf16));
    let s = with_file("precision = \"f32\"\n", &[]).unwrap();
    assert_eq!(s.precision.requested(), Some(Precision::F32));
    let s = Settings::resolve(&parse(&["--precision", "int8"])).unwrap();
    assert_eq!(s.precision.requested(), Some(Precision::Int8));
    let s = with_file("precision = \"f32\"\n", &["--precision", "auto"]).unwrap();
    assert_eq!(s.precision, PrecisionChoice::Auto);
    assert!(with_file("precision = \"fp8\"\n", &[])
        .unwrap_err()
        .to_string()
        .contains("precision"));
}

#[test]
fn wyoming_port_must_differ_from_port() {
    let err = Settings::resolve(&parse(&["--port", "9000", "--wyoming-port", "9000"])).unwrap_err();
    assert!(err.to_string().contains("wyoming-port"), "{err}");
}

#[test]
fn unknown_file_key_names_it() {
    let err = with_file("prot = 9000\n", &[]).unwrap_err().to_string();
    assert!(err.contains("prot"), "{err}");
}

#[test]
fn a_bad_file_value_names_its_key_on_one_line() {
    let err = with_file("host = \"127.0.0.1\"\nport = \"high\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("'port'"), "{err}");
    let err = with_file("port = [\n", &[]).unwrap_err().to_string();
    assert!(err.contains("'config'") && !err.contains('\n'), "{err}");
}

#[test]
fn unreadable_file_is_an_error() {
    let err = Settings::resolve(&parse(&["--config", "/nonexistent/omnivoice.toml"]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("config") && err.contains("/nonexistent"),
        "{err}"
    );
}

#[test]
fn zero_workers_are_rejected() {
    let err = Settings::resolve(&parse(&["--max-concurrent", "0"])).unwrap_err();
    assert!(err.to_string().contains("max-concurrent"));
}

#[test]
fn bad_values_fail_in_clap() {
    for args in [
        ["--port", "70000"],
        ["--device", "tpu"],
        ["--precision", "int4"],
    ] {
        let mut argv = vec!["omnivoice-server"];
        argv.extend_from_slice(&args);
        let err = Cli::try_parse_args_only(argv).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}");
    }
}

#[test]
fn alias_tables_come_from_the_file() {
    let s = with_file(
        "[models.aliases]\nmy-tts = \"espeak\"\n[voices.aliases]\nalloy = \"en-us\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(s.model_aliases["my-tts"], "espeak");
    assert_eq!(s.voice_aliases["alloy"], "en-us");
}

#[test]
fn the_serve_subcommand_reads_the_same_flags() {
    let cli = Cli::try_parse_args_only(["omnivoice-server", "serve", "--port", "9001"]).unwrap();
    let Some(Command::Serve(args)) = cli.command else {
        panic!("serve subcommand");
    };
    assert_eq!(Settings::resolve(&args).unwrap().port, 9001);
}

/// `layered` copies given values by clap id into the file's keys: they must be one name, and
/// the variable must follow from it, so that the README's rule holds.
#[test]
fn every_setting_has_one_name_for_key_id_and_variable() {
    let keys: BTreeSet<String> = as_map(&Options::default()).keys().cloned().collect();
    let flag_keys: BTreeSet<String> = FLAG_KEYS.iter().cloned().collect();
    let file_only: Vec<&String> = keys.difference(&flag_keys).collect();
    assert_eq!(file_only, ["models", "voices"], "settings without a flag");
    assert!(flag_keys.is_subset(&keys), "every flag is a file key");
    for arg in Options::augment_args(clap::Command::new("settings")).get_arguments() {
        let id = arg.get_id().as_str();
        let env = arg.get_env().and_then(|e| e.to_str());
        assert_eq!(
            env,
            Some(format!("OMNIVOICE_{}", id.to_uppercase()).as_str()),
            "{id}"
        );
        assert!(arg.get_long().is_some() && arg.get_help().is_some(), "{id}");
    }
}

/// Clap's defaults (shown by `--help`) are `Options::default()`, not numbers of their own.
#[test]
fn clap_shows_the_default_impl() {
    let defaults = as_map(&Options::default());
    for arg in Options::augment_args(clap::Command::new("settings")).get_arguments() {
        let id = arg.get_id().as_str();
        let shown: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let expected = match &defaults[id] {
            serde_json::Value::Null => vec![],
            serde_json::Value::Array(items) => items.iter().map(plain).collect(),
            value => vec![plain(value)],
        };
        assert_eq!(shown, expected, "clap default of {id}");
    }
}

/// A default as a person writes it: strings without quotes.
fn plain(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[test]
fn the_example_config_is_valid_and_matches_the_defaults() {
    let path = repo_file("config.example.toml");
    let from_file = Settings::resolve(&parse(&["--config", path.to_str().unwrap()])).unwrap();
    let defaults = Settings::resolve(&parse(&[])).unwrap();
    assert_eq!(
        serde_json::to_value(&from_file).unwrap(),
        serde_json::to_value(&defaults).unwrap()
    );
    assert_eq!(
        as_map(&read_file(&path).unwrap()),
        as_map(&Options::default()),
        "config.example.toml writes each default as it is"
    );
}

/// Every setting appears once before the alias tables: with its default, or commented out with
/// a valid example where it has none (unset).
#[test]
fn the_example_config_lists_every_setting() {
    let text = std::fs::read_to_string(repo_file("config.example.toml")).unwrap();
    let defaults = as_map(&Options::default());
    let mut listed = BTreeMap::new();
    for line in text.lines().take_while(|l| !l.starts_with('[')) {
        let (commented, entry) = match line.strip_prefix('#') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, line),
        };
        let Some((key, _)) = entry.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            continue; // prose
        }
        assert!(
            FLAG_KEYS.iter().any(|k| k == key),
            "config.example.toml lists '{key}', which is not a setting"
        );
        assert!(
            listed.insert(key.to_string(), commented).is_none(),
            "config.example.toml lists '{key}' twice"
        );
        if commented {
            let example: Options = toml::from_str(entry)
                .unwrap_or_else(|e| panic!("the example of '{key}' is no value: {e}"));
            assert!(!as_map(&example)[key].is_null(), "{key}");
        }
    }
    for key in FLAG_KEYS.iter() {
        let unset = defaults[key.as_str()].is_null();
        match listed.get(key) {
            None => panic!("config.example.toml misses '{key}'"),
            Some(&commented) => assert_eq!(
                commented, unset,
                "'{key}': write a default as it is, comment out an example for an unset one"
            ),
        }
    }
}

const TABLE_START: &str =
    "<!-- settings table: generated by `UPDATE_DOCS=1 cargo test --lib config` from src/config.rs -->";
const TABLE_END: &str = "<!-- end of settings table -->";

/// The README's table of every flag, from the same fields as `--help`.
fn settings_table() -> String {
    let defaults = as_map(&Options::default());
    let mut table =
        String::from("| flag | file key | environment | default | |\n|---|---|---|---|---|\n");
    for arg in ServeArgs::augment_args(clap::Command::new("serve")).get_arguments() {
        let id = arg.get_id().as_str();
        let repeatable = if matches!(arg.get_action(), ArgAction::Append) {
            " (repeatable)"
        } else {
            ""
        };
        let code = |s: &str| format!("`{s}`");
        let key = defaults.get(id).map_or("—".into(), |_| code(id));
        let env = arg
            .get_env()
            .map_or("—".into(), |e| code(&e.to_string_lossy()));
        let default = match defaults.get(id) {
            Some(serde_json::Value::Null) => "unset".into(),
            Some(serde_json::Value::Array(items)) if items.is_empty() => "empty".into(),
            Some(value) => code(&plain(value)),
            None if matches!(arg.get_action(), ArgAction::SetTrue) => "—".into(),
            None => "unset".into(),
        };
        let help = arg.get_help().expect("every flag has help").to_string();
        let help = help
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('|', "\\|");
        let long = arg.get_long().expect("every flag has a long name");
        table += &format!("| `--{long}`{repeatable} | {key} | {env} | {default} | {help} |\n");
    }
    table
}

#[test]
fn the_readme_table_lists_every_flag_with_its_default() {
    let path = repo_file("README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (before, rest) = readme
        .split_once(&format!("{TABLE_START}\n"))
        .expect("README.md has the settings table's start marker");
    let (current, after) = rest
        .split_once(TABLE_END)
        .expect("README.md has the settings table's end marker");
    let expected = settings_table();
    if current == expected {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{before}{TABLE_START}\n{expected}{TABLE_END}{after}");
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "README.md's settings table is out of date; rerun with UPDATE_DOCS=1 to rewrite it.\n\
         expected:\n{expected}"
    );
}

#[test]
fn redis_is_off_unless_a_url_is_given() {
    let s = Settings::resolve(&parse(&[])).unwrap();
    assert_eq!(s.cache.redis, None);
    let s = with_file(
        "redis_url = \"redis://:secret@cache.internal:6380/2\"\nredis_timeout_ms = 40\n",
        &["--redis-prefix", "tts:"],
    )
    .unwrap();
    let redis = s.cache.redis.clone().expect("a URL turns redis on");
    assert_eq!(redis.url, "redis://:secret@cache.internal:6380/2");
    assert_eq!((redis.prefix.as_str(), redis.timeout_ms), ("tts:", 40));
    assert_eq!(redis.lock_wait_ms, Options::default().redis_lock_wait_ms);
    let shown = serde_json::to_string(&s).unwrap();
    assert!(!shown.contains("secret"), "settings as shown: {shown}");
}

#[test]
fn a_bad_redis_setting_is_named_and_its_password_not_shown() {
    let err = Settings::resolve(&parse(&["--redis-url", "http://:hunter2@x/"]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("'redis-url'") && !err.contains("hunter2"),
        "{err}"
    );
    let err = Settings::resolve(&parse(&[
        "--redis-url",
        "redis://127.0.0.1/",
        "--redis-timeout-ms",
        "0",
    ]))
    .unwrap_err();
    assert!(err.to_string().contains("redis-timeout-ms"), "{err}");
}
